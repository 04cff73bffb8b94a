"""Bench and the budget: a problem's process killed at its backstop keeps what its search had verified
(labelled "budget reached"), one killed before the search is an error (timeout); the campaign's report
totals the time split. The problem's process here is a stand-in that writes what a real one writes
(its partial result, the optimize run's result.json) and then hangs, so the test takes seconds."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.bench import problem_process
from kernelopt_core.bench.config import CampaignConfig, grace_s
from kernelopt_core.bench.report import CampaignInfo, write_reports
from kernelopt_core.bench.results import ProblemResult, load_result
from kernelopt_core.bench.salvage import salvage
from kernelopt_core.bench.suite import ProblemSpec
from kernelopt_core.bench.time_totals import compact_time_split, total_time

SPLIT = {"total_s": 100.0, "stages": {"dispatch": 5.0, "beam": 10.0, "screen": 50.0, "time": 10.0, "finalize": 20.0},
         "screened": 5, "replayed": 0, "search_s": 70.0, "screened_per_minute": 60.0 * 5 / 70.0,
         "screen_s": {"median": 10.0, "p90": 10.0, "max": 10.0}, "finalize_s": [20.0],
         "candidates": [{"label": f"i1c{n}", "screen_s": 10.0, "replayed": False} for n in range(5)]}

# The stand-in for `python -m kernelopt_core.bench.problem_main PAYLOAD`: what a real problem's process has
# written when its search verified a candidate (stage "optimize", the run's provisional result.json), then
# it hangs like a search that runs past its budget.
STAND_IN_PROBLEM = '''
import json, os, sys, time
payload = json.load(open(sys.argv[-1]))
work, verified = payload["work_dir"], payload["problem"]["name"] != "nothing_verified"
run_dir = os.path.join(work, "runs", "r1")
os.makedirs(run_dir)
if verified:
    json.dump({"decision": "optimized", "final": False, "speedup": 1.2, "ci": [1.1, 1.3], "timing_path": "module-call",
               "reason": "k rewritten: 1.200x end to end, all four gates passed (verified while the search goes on)",
               "accepted_kernels": ["k"], "time_split": SPLIT}, open(os.path.join(run_dir, "result.json"), "w"))
samples = {"median_ms": 2.0, "samples_ms": [2.0, 2.0, 2.1], "path": "compiled-callable"}
partial = {"name": payload["problem"]["name"], "level": 1, "path": "p.py", "outcome": "error", "reason": "not finished",
           "stage": "optimize", "eager": {**samples, "median_ms": 4.0, "samples_ms": [4.0, 4.0, 4.1], "path": "eager"},
           "max_autotune": samples, "classification": "optimizable", "run_dir": run_dir, "budget_s": 1.0,
           "stage_seconds": {"compile": 0.1}}
json.dump(partial, open(os.path.join(work, "partial_result.json"), "w"))
print("@kernelopt-event " + json.dumps({"event": "progress", "message": "optimize", "stage": "optimize"}), flush=True)
time.sleep(600)
'''


@pytest.fixture
def stand_in_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "stand_in_problem.py"
    script.write_text(f"SPLIT = {SPLIT!r}\n" + STAND_IN_PROBLEM)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(problem_process.sys, "executable", str(python))
    monkeypatch.setattr(CampaignConfig, "grace_s", lambda self: 1.0)  # the backstop a second after the budget


def run_stand_in(tmp_path: Path, name: str) -> tuple[ProblemResult, float]:
    started = time.perf_counter()
    result = problem_process.run_problem_process(ProblemSpec(name, str(tmp_path / f"{name}.py"), 1),
                                                 CampaignConfig(device="cpu", timeout_s=1.0), str(tmp_path / "out"),
                                                 problem_process.Slot("cpu"))
    return result, time.perf_counter() - started


def test_a_problem_killed_at_its_backstop_keeps_what_its_search_verified(tmp_path: Path, stand_in_problem: None) -> None:
    result, seconds = run_stand_in(tmp_path, "verified")
    assert seconds < 30  # killed at the backstop (1 s + 1 s), not after the stand-in's 10 minutes
    assert result.outcome == "optimized" and result.budget_reached and result.category is None
    assert result.reason.startswith("budget reached: stopped at the backstop") and "1.200x" in result.reason
    assert result.vs_max_autotune is not None and result.vs_max_autotune.value == pytest.approx(1.2)
    assert result.vs_max_autotune.source == "gate 4 A/B (no confirmation A/B)"
    assert result.max_autotune_vs_eager is not None and result.kernels_changed == ["k"]
    assert result.time_split is not None and result.time_split["screens"] == [10.0] * 5
    assert load_result(str(tmp_path / "out"), "verified") == result  # written as the problem's result


def test_a_search_killed_before_it_verified_anything_is_a_fallback_not_an_error(tmp_path: Path,
                                                                                 stand_in_problem: None) -> None:
    result, _ = run_stand_in(tmp_path, "nothing_verified")
    assert result.outcome == "fallback" and result.category == "budget" and result.budget_reached
    assert "before the search verified a candidate" in result.reason
    assert result.vs_max_autotune is not None and result.vs_max_autotune.value == 1.0


def test_a_process_killed_before_the_search_stays_an_error(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "partial_result.json").write_text(json.dumps({"name": "p", "level": 1, "path": "p.py", "outcome": "error",
                                                          "reason": "not finished", "stage": "compile"}))
    assert salvage(str(work), "stopped", 3.0) is None
    assert salvage(str(tmp_path / "nothing here"), "stopped", 3.0) is None


def test_the_grace_is_a_quarter_of_the_budget_within_bounds() -> None:
    assert grace_s(4.0) == 10.0 and grace_s(180.0) == 45.0 and grace_s(1800.0) == 120.0


def _result(name: str, split: dict[str, Any] | None, reached: bool = False) -> ProblemResult:
    return ProblemResult(name=name, level=1, path=f"{name}.py", outcome="matched", reason="r", wall_s=120.0,
                         budget_s=180.0, optimize_budget_s=110.0, budget_reached=reached,
                         time_split=compact_time_split(split), stage_seconds={"optimize": 100.0})


def test_the_campaign_totals_the_time_split(tmp_path: Path) -> None:
    slow = {**SPLIT, "candidates": [{"label": "a", "screen_s": 30.0}, {"label": "b", "screen_s": 40.0},
                                    {"label": "c", "screen_s": 1.0, "replayed": True}],
            "search_s": 70.0, "finalize_s": [60.0]}
    results = [_result("fast", SPLIT), _result("slow", slow, reached=True), _result("untimed", None)]
    totals = total_time(results)
    assert totals.problems == 2 and totals.budget_reached == 1
    assert totals.screened == 7  # five 10-s screens and two slow ones; the replayed one is not a measurement
    assert totals.screen_median_s == pytest.approx(10.0) and totals.screen_max_s == pytest.approx(40.0)
    assert totals.screen_p90_s == pytest.approx(34.0)  # between 30 and 40, at the 90th percentile of 7
    assert totals.screened_per_minute == pytest.approx(60.0 * 7 / 140.0)
    assert totals.stages["screen"] == pytest.approx(100.0) and totals.finalize_median_s == pytest.approx(40.0)
    info = CampaignInfo(suite="s", device="cuda:0")
    write_reports(str(tmp_path), info, results, plot=False)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["summary"]["time"]["screened"] == 7 and data["summary"]["time"]["screen_p90_s"] == pytest.approx(34.0)
    assert data["problems"][0]["time_split"]["screens"]
    report = (tmp_path / "report.md").read_text()
    assert "## Time" in report and "screen median 10.0 s, p90 34.0 s" in report
    assert "| `slow` | 180.0 | 110.0 |" in report and "matched (budget reached)" in report
    assert os.path.isfile(tmp_path / "report.md")
