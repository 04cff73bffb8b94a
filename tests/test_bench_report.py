"""Report maths on synthetic results: geomean, fast_p, intervals, outcome counts, the regression check."""

from __future__ import annotations

import json
import math

import pytest

from kernelopt_core.bench.figures import derived_eager_speedup, identity_speedup, ratio_of_medians
from kernelopt_core.bench.outcome import classify_decision, fallback_category
from kernelopt_core.bench.report import CampaignInfo, write_reports
from kernelopt_core.bench.results import ProblemResult, Speedup, load_result, write_result
from kernelopt_core.bench.summary import fast_p, geomean, geomean_ci, regression_check, summarize_campaign
from kernelopt_core.cli.bench_cmd import level_rows


def make(name: str, outcome: str, value: float | None, level: int = 1, ci: tuple[float, float] | None = None,
         category: str | None = None, eager: float | None = None, confirmed: bool = True) -> ProblemResult:
    figure = None
    if value is not None:
        low, high = ci or (value * 0.98, value * 1.02)
        figure = Speedup(value, low, high, "module-call", "test")
    return ProblemResult(
        name=name, level=level, path=f"/suite/{name}.py", outcome=outcome, reason=f"{outcome} for a test",
        category=category, vs_max_autotune=figure,
        vs_eager=Speedup(eager, eager * 0.9, eager * 1.1, "eager vs x", "test") if eager else None,
        confirm={"speedup": value} if outcome == "optimized" and confirmed else None, wall_s=2.0,
    )


def test_geomean_and_its_interval():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([1.5]) == pytest.approx(1.5)
    low, high = geomean_ci([1.0, 1.2, 1.5, 3.0])
    assert low <= geomean([1.0, 1.2, 1.5, 3.0]) <= high and low < high
    assert geomean_ci([1.3, 1.3, 1.3]) == pytest.approx((1.3, 1.3))
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    with pytest.raises(ValueError):
        geomean([])


def test_fast_p_counts_errors_in_the_denominator_and_is_strict():
    results = [make("a", "optimized", 1.5), make("b", "optimized", 1.05), make("c", "matched", 1.0),
               make("d", "fallback", 1.0, category="gate-4-perf"), make("e", "error", None, category="compile")]
    assert fast_p(results, 1.0) == pytest.approx(2 / 5)  # 1.0 itself is not faster than 1.0
    assert fast_p(results, 1.03) == pytest.approx(2 / 5)
    assert fast_p(results, 1.1) == pytest.approx(1 / 5)
    assert fast_p([], 1.0) == 0.0
    # an error never counts, whatever numbers it carries
    assert fast_p([make("x", "error", 2.0)], 1.0) == 0.0


def test_regression_check_flags_accepted_results_slower_than_baseline():
    results = [make("fast", "optimized", 1.4), make("slow", "optimized", 0.97, ci=(0.95, 0.99)),
               make("shaky", "optimized", 1.05, ci=(0.98, 1.12)), make("unchecked", "optimized", 1.2, confirmed=False),
               make("kept", "fallback", 1.0)]
    check = regression_check(results)
    assert check.regressions == ["slow"]
    assert set(check.unconfirmed) == {"shaky", "unchecked"}
    assert check.checked == 4 and not check.passed
    assert regression_check([make("fast", "optimized", 1.4)]).passed


def test_campaign_summary_per_level_and_reasons():
    results = [make("l1a", "optimized", 2.0, level=1, eager=3.0), make("l1b", "fallback", 1.0, level=1,
                                                                       category="gate-4-perf", eager=1.5),
               make("l2a", "fallback", 1.0, level=2, category="vendor-dominated", eager=1.2),
               make("l2b", "error", None, level=2, category="import"), make("l3a", "matched", 1.0, level=3)]
    summary = summarize_campaign(results, not_reached=["l3b"])
    assert summary.counts == {"optimized": 1, "matched": 1, "fallback": 2, "error": 1}
    assert summary.fallback_reasons == {"gate-4-perf": 1, "vendor-dominated": 1}
    assert summary.error_reasons == {"import": 1}
    assert summary.levels[1].geomean_vs_max_autotune == pytest.approx(math.sqrt(2.0))
    assert summary.levels[2].geomean_vs_max_autotune == pytest.approx(1.0)  # the error is excluded
    assert summary.levels[2].ran == 1 and summary.levels[2].problems == 2
    assert summary.levels[1].geomean_vs_eager == pytest.approx(math.sqrt(3.0 * 1.5))
    assert list(summary.to_json()["levels"]) == ["1", "2", "3"]  # JSON keys are text; the summary's are numbers
    assert [label for label, _ in level_rows(summary.levels)] == ["L1", "L2", "L3"]
    assert summary.overall.fast_p["1.0"] == pytest.approx(1 / 5)
    assert summary.overall.max_vs_max_autotune == pytest.approx(2.0)
    assert summary.not_reached == ["l3b"] and summary.wall_s_total == pytest.approx(10.0)


def test_reports_are_written_and_flag_regressions_loudly(tmp_path):
    info = CampaignInfo(suite="synthetic", device="cuda", provider="offline")
    good = [make("a", "optimized", 1.3, eager=2.0), make("b", "fallback", 1.0, category="no-triton-kernels", eager=1.1)]
    summary = write_reports(str(tmp_path / "ok"), info, good)
    text = (tmp_path / "ok" / "report.md").read_text()
    assert summary.regression.passed and "PASS: 0 regressions among 1 accepted" in text
    assert "REGRESSION" not in text
    assert "| L1 | 2 | 2 | 1 | 0 | 1 | 0 | 1.140×" in text  # sqrt(1.3) = 1.140
    data = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert data["summary"]["regression_count"] == 0 and len(data["problems"]) == 2
    png = (tmp_path / "ok" / "speedups.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000

    bad = good + [make("c", "optimized", 0.9, ci=(0.85, 0.95))]
    summary = write_reports(str(tmp_path / "bad"), info, bad)
    text = (tmp_path / "bad" / "report.md").read_text()
    assert summary.regression.regressions == ["c"]
    assert "⚠️ REGRESSIONS: 1 accepted result(s) are SLOWER" in text and "`c`: 0.90×" in text
    assert json.loads((tmp_path / "bad" / "results.json").read_text())["summary"]["regression_count"] == 1


def test_report_without_any_speedup_says_why_there_is_no_plot(tmp_path):
    info = CampaignInfo(suite="synthetic", device="cpu")
    write_reports(str(tmp_path), info, [make("broken", "error", None, category="import")])
    text = (tmp_path / "report.md").read_text()
    assert "no plot: no problem has a speedup to plot" in text and "CPU backend" in text
    assert not (tmp_path / "speedups.png").exists()


def test_speedup_figures_from_samples():
    ratio = ratio_of_medians([10.0, 11.0, 9.0, 10.0], [5.0, 5.0, 5.5, 4.5], "eager vs compiled", "test")
    assert ratio.value == pytest.approx(2.0) and ratio.ci_low <= 2.0 <= ratio.ci_high
    # eager 10 ms, compiled callable 5 ms, the A/B saved 4 - 2 = 2 ms of kernel time: 10 / 3
    derived = derived_eager_speedup([10.0] * 5, [5.0] * 5, [4.0] * 5, [2.0] * 5, "p")
    assert derived is not None and derived.value == pytest.approx(10.0 / 3.0)
    assert derived.ci_low == pytest.approx(10.0 / 3.0) and "derived" in derived.source
    assert derived_eager_speedup([10.0], [1.0], [4.0], [2.0], "p") is None  # saving larger than the callable
    same = identity_speedup("module-call")
    assert (same.value, same.ci_low, same.ci_high) == (1.0, 1.0, 1.0) and "by construction" in same.source


def test_outcome_classification():
    assert classify_decision("optimized", "", None, "optimizable") == ("optimized", None)
    assert classify_decision("matched", "no faster kernel", None, "optimizable") == ("matched", None)
    assert classify_decision("surprise", "", None, None) == ("error", "optimize")
    assert fallback_category("graph is vendor-dominated (addmm 91%)", None, "optimizable") == "vendor-dominated"
    assert fallback_category("", None, "no-triton") == "no-triton-kernels"
    assert fallback_category("rejected", {"failed_gate": 4}, "optimizable") == "gate-4-perf"
    assert fallback_category("rejected", {"gates": [{"gate": 1, "passed": True}, {"gate": 3, "passed": False}]},
                             None) == "gate-3-model"
    assert fallback_category("best candidate failed gate 2 on seed 42", None, None) == "gate-2-kernel"
    assert fallback_category("no candidates were produced", None, None) == "no-candidates"
    assert fallback_category("something else", None, None) == "other"


def test_result_files_round_trip_and_torn_files_count_as_missing(tmp_path):
    result = make("level1/softmax", "optimized", 1.2, eager=2.0)
    path = write_result(str(tmp_path), result)
    assert path.endswith("problems/level1/softmax.json")
    loaded = load_result(str(tmp_path), "level1/softmax")
    assert loaded is not None and loaded.to_json() == result.to_json()
    (tmp_path / "problems" / "level1" / "softmax.json").write_text('{"name": "level1/softm')
    assert load_result(str(tmp_path), "level1/softmax") is None
    assert load_result(str(tmp_path), "never/ran") is None


def test_per_problem_table_shows_sol_before_and_after(tmp_path):
    info = CampaignInfo(suite="synthetic", device="cuda", provider="offline")
    improved = make("softmax", "optimized", 1.3)
    improved.sol = {"kernel": "triton_red_k", "baseline_pct": 65.0, "after_pct": 84.0, "traffic_ratio": 1.5}
    kept = make("relu", "fallback", 1.0, category="no-triton-kernels")
    kept.sol = {"kernel": "triton_poi_k", "baseline_pct": 96.2, "after_pct": None, "traffic_ratio": None}
    unknown = make("cpu", "fallback", 1.0, category="no-triton-kernels")
    write_reports(str(tmp_path), info, [improved, kept, unknown], plot=False)
    text = (tmp_path / "report.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert "| 65% → 84% (1.50x) |" in rows["`softmax`"]
    assert "| 96% |" in rows["`relu`"] and "| – |" in rows["`cpu`"]
    assert "SOL base → after" in text
    data = json.loads((tmp_path / "results.json").read_text())
    assert {p["name"]: p["sol"] for p in data["problems"]}["softmax"] == improved.sol
    assert load_result(str(tmp_path), "softmax") is None  # write_reports writes only the summaries
    write_result(str(tmp_path), improved)
    assert load_result(str(tmp_path), "softmax").sol == improved.sol  # round trip


def test_problem_sol_from_the_classify_timing_then_the_optimizer(monkeypatch):
    from kernelopt_core.bench import problem_main
    from kernelopt_core.measure import peaks as peaks_module
    from kernelopt_core.measure.launch_timing import LaunchTiming
    from kernelopt_core.measure.peaks import DevicePeaks
    from kernelopt_core.measure.traffic import IdealBytes, LaunchArg, LaunchTraffic

    monkeypatch.setattr(peaks_module, "device_peaks", lambda device, **_: DevicePeaks(
        gpu="g", copy_bytes_per_s=4e12, matmul_flops_per_s=1e15, measured_at="now"))

    class Launch:
        def __init__(self, order: int, kernel: str) -> None:
            self.order, self.kernel = order, kernel

    class Graph:
        launches = [Launch(0, "small"), Launch(2, "big")]

    big = [LaunchArg("in_ptr0", 0, "input", [1000], [1], "torch.float32", 4000_000_000),
           LaunchArg("out_ptr0", 1, "output", [1000], [1], "torch.float32", 4000_000_000)]
    timing = LaunchTiming(graph="g", launch_times_ms={0: 0.1, 1: 5.0, 2: 2.5}, total_ms=4.0, overheads=[],
                          path="module-call", device="cuda:0", iters=20,
                          launch_traffic={2: LaunchTraffic(2, "big", big)},
                          graph_ideal=IdealBytes(4_000_000_000, 4_000_000_000, "graph inputs and outputs"))
    notes: list[str] = []
    sol = problem_main._timed_sol(Graph(), timing, "cuda:0", notes)
    # the longest Triton launch (order 1 is a vendor call): 8 GB in 2.5 ms at 4 TB/s = 80%
    assert sol["kernel"] == "big" and sol["baseline_pct"] == pytest.approx(80.0)
    assert sol["graph_baseline_pct"] == pytest.approx(50.0) and sol["source"] == "timed launch, module-call path"
    after = problem_main._optimized_sol(sol, [{"name": "big", "sol_pct": 65.0, "sol_after_pct": 91.0,
                                               "traffic_ratio": 1.5, "causes": ["re-reads"]}])
    assert after["baseline_pct"] == 65.0 and after["after_pct"] == 91.0 and after["graph_baseline_pct"] == 50.0
    assert problem_main._optimized_sol(sol, [{"name": "big", "sol_pct": None}]) is sol
