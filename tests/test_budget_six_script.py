"""The device script for issue 25's targets (benchmarks/gpu/budget_six.py): its checks, read from a
campaign's results.json (the script itself runs the campaign on the device)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("budget_six_under_test", ROOT / "benchmarks" / "gpu" / "budget_six.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _problem(name: str, outcome: str, speedup: float, category: str | None = None) -> dict[str, Any]:
    return {"name": name, "outcome": outcome, "category": category, "vs_max_autotune": {"value": speedup},
            "budget_reached": True, "wall_s": 170.0, "budget_s": 180.0, "optimize_budget_s": 120.0,
            "stage_seconds": {"optimize": 118.0},
            "time_split": {"screened": 8, "screened_per_minute": 6.0, "screen_s": {"median": 6.0, "p90": 12.0},
                           "finalize_s": [25.0], "stages": {"screen": 48.0},
                           "final_gates_s": [{"2": 9.5, "3": 14.2, "4": 1.6, "sanitizer": 11.0}]}}


def _results(problems: list[dict[str, Any]], geomean: float, median: float, p90: float) -> dict[str, Any]:
    return {"problems": problems, "summary": {"overall": {"geomean_vs_max_autotune": geomean}, "regression_count": 0,
                                              "time": {"screen_median_s": median, "screen_p90_s": p90,
                                                       "stages": {"screen": 96.0}}}}


def test_the_six_problems_and_the_targets() -> None:
    script = _script()
    assert script.SIX == ("max_pool2d_dilated", "avg_pool1d", "softmax_long_rows", "l2_norm", "layer_norm_16_rows",
                          "cross_entropy")
    assert all((ROOT / "benchmarks" / "problems" / "kbscale" / f"{name}.py").is_file() for name in script.SIX)


def test_the_checks_pass_only_when_every_target_is_met() -> None:
    script = _script()
    good = script.check(_results([_problem("a", "optimized", 1.4), _problem("b", "matched", 1.0)], 1.18, 6.0, 12.0))
    assert good["passed"] and all(row["passed"] for row in good["checks"].values())
    assert good["problems"][0]["screen_median_s"] == 6.0 and good["problems"][0]["optimize_budget_s"] == 120.0
    timeout = script.check(_results([_problem("a", "error", 1.0, "timeout")], 1.2, 6.0, 12.0))
    assert not timeout["passed"] and timeout["checks"]["timeouts"]["value"] == 1
    assert not timeout["checks"]["errors"]["passed"]
    slow = script.check(_results([_problem("a", "optimized", 1.3)], 1.3, 11.0, 25.0))
    assert not slow["checks"]["screen_median_s"]["passed"] and not slow["checks"]["screen_p90_s"]["passed"]
    low = script.check(_results([_problem("a", "matched", 1.0)], 1.0, 6.0, 12.0))
    assert not low["checks"]["geomean"]["passed"]
    text = script.markdown(good, 180.0)
    assert "| geomean | 1.180 | >= 1.15 | yes |" in text and "| a | optimized | 1.400 | yes |" in text
    assert "| 25.0 | 9.5 / 14.2 / 1.6 (11.0) |" in text  # where each finalist's gates spent their time


def test_the_suite_holds_only_the_chosen_problems(tmp_path: Path) -> None:
    script = _script()
    stale = tmp_path / "suite"
    stale.mkdir()
    (stale / "layer_norm_16_rows.py").write_text("# an earlier call's problem, left on a warm machine\n")
    folder = Path(script._suite(str(tmp_path), ["l2_norm"]))
    assert sorted(p.name for p in folder.iterdir()) == ["l2_norm.py"]


def test_the_six_gathered_from_several_calls_reproduce_their_record(tmp_path: Path) -> None:
    """Session 10 ran the six in three device calls; the combined record is recomputed from the per-problem
    results the bench wrote, and each problem's figure is the one its own call reported."""
    import json
    import math

    script = _script()
    session = ROOT / "benchmarks" / "results" / "h100" / "session10"
    picks = {name: str(session / "call1" / "campaign")
             for name in ("avg_pool1d", "cross_entropy", "l2_norm", "max_pool2d_dilated")}
    picks |= {"softmax_long_rows": str(session / "call2" / "campaign"),
              "layer_norm_16_rows": str(session / "call3" / "campaign")}
    verdict = script.combine(str(tmp_path), picks)
    recorded = json.loads((session / "budget_six_combined.json").read_text())
    assert verdict["checks"] == recorded["checks"]
    per_call = {}
    for call in ("call1", "call2", "call3"):
        for row in json.loads((session / call / "budget_six.json").read_text())["problems"]:
            per_call[(call, row["name"])] = row["vs_max_autotune"]
    speedups = [per_call[(Path(campaign).parent.name, name)] for name, campaign in picks.items()]
    expected = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    assert math.isclose(verdict["checks"]["geomean"]["value"], expected, rel_tol=1e-9)
    assert verdict["sources"]["layer_norm_16_rows"]["environment"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert (tmp_path / "budget_six_combined.md").is_file()


def test_each_row_has_its_budget_use_configuration_and_late_candidates() -> None:
    script = _script()
    softmax = _problem("softmax_long_rows", "matched", 1.0)
    softmax["time_split"]["stages"]["config"] = 41.5
    softmax["config_change"] = {"allowed": True, "chosen": None,
                                "recommendation": {"change": {"mode": "max-autotune-no-cudagraphs"}},
                                "verified": {"not_verified": True, "measured_speedup": 2.43, "reason": "budget"}}
    softmax["found_unverified"] = [{"kernel": "triton_red_0", "candidate": "i1c3", "kernel_speedup": 1.1}]
    pool = _problem("avg_pool1d", "optimized", 1.27)
    pool["config_change"] = {"allowed": True, "chosen": "mode", "recommendation": {"change": {"mode": "m"}},
                             "verified": {"speedup": 1.89, "accepted": True},
                             "verifications": [{"option": "mode", "memory": {
                                 "peak_over_working_set": 2.04, "working_set_bytes": 100,
                                 "peak_bytes_by_phase": {"seeds": 150, "timing": 204}, "held_at_start_bytes": 20}},
                                 {"memory": None}]}
    verdict = script.check(_results([softmax, pool], 1.13, 6.0, 12.0))
    rows = {p["name"]: p for p in verdict["problems"]}
    assert rows["softmax_long_rows"]["budget_used"] == round(170.0 / 180.0, 3)
    assert rows["softmax_long_rows"]["config"] == "max-autotune-no-cudagraphs not verified (measured 2.43x)"
    assert rows["softmax_long_rows"]["config_s"] == 41.5
    assert rows["softmax_long_rows"]["found_unverified"] == ["triton_red_0 i1c3 1.100x"]
    assert rows["avg_pool1d"]["config"] == "mode verified 1.89x" and rows["avg_pool1d"]["found_unverified"] == []
    assert rows["avg_pool1d"]["config_memory"] == [2.04] and rows["softmax_long_rows"]["config_memory"] == []
    assert rows["avg_pool1d"]["config_memory_phases"] == [
        {"option": "mode", "phases_over_working_set": {"seeds": 1.5, "timing": 2.04}, "held_at_start_over_working_set": 0.2}]
    table = script.markdown(verdict, 180.0)
    assert "| configuration | config peak / working set | found, not verified |" in table
    assert "94% |" in table and "not verified (measured 2.43x)" in table and "triton_red_0 i1c3 1.100x" in table
    assert "| 2.04x |" in table
