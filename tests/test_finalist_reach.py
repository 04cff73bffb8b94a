"""Finalists only within reach of the end-to-end gate: a candidate whose kernel speedup, at its kernel's
share of the graph time (Amdahl's law, at the top of its confidence interval), cannot give gate 4's 1.03x
never goes through the final gates; the decision and the report say why. On the H200 a 1.001x candidate
spent 62 s of a 180-s budget in the final gates before gate 4 measured 1.000x."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_search_pipeline import ELEMENTWISE, StandInEvaluator, kinds

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.search.finalists import end_to_end_bound
from kernelopt_core.search.pipeline import OptimizeConfig, optimize


def run(tmp_path: Path, evaluator: StandInEvaluator, **overrides: Any):
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"),
                            iterations=1, plans=2, **overrides)
    result = optimize(ELEMENTWISE, config=config, evaluator=evaluator)
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    return result, journal


def timing_with_share(share: float) -> dict[str, Any]:
    """A launch timing of the elementwise graph in which its one kernel is ``share`` of the graph time
    (the rest a CUDA-graph input copy)."""
    graph = parse_output_code(ELEMENTWISE)
    launches = {str(item.order): 1.0 for item in graph.timeline()}
    copy_ms = (1.0 - share) / share * len(launches)
    overheads = [{"name": "CUDA-graph input copy", "time_ms": copy_ms, "share": 1.0 - share, "detail": "",
                  "suggestion": ""}] if copy_ms > 0 else []
    return {"launch_times_ms": launches, "overheads": overheads, "path": "compiled-callable-cudagraphs"}


def test_the_bound_is_amdahls_law() -> None:
    assert end_to_end_bound(2.0, None) == pytest.approx(2.0)  # no share: the kernel is all of it
    assert end_to_end_bound(1.3, 0.6) == pytest.approx(1 / (0.4 + 0.6 / 1.3))  # avg_pool1d on the H200: 1.16x
    assert end_to_end_bound(1.25, 0.1) == pytest.approx(1 / (0.9 + 0.1 / 1.25))
    assert end_to_end_bound(1.5, 0.0) == pytest.approx(1.0) and end_to_end_bound(0.0, 0.5) == 0.0


def test_candidates_too_slow_for_the_end_to_end_gate_are_not_finalists(tmp_path: Path) -> None:
    # 1.010x, its interval up to 1.020x: no share of the graph can make that 1.03x end to end
    evaluator = StandInEvaluator(latency=lambda source: 0.99 if "fixed_config" in source else 1.0)
    result, journal = run(tmp_path, evaluator)
    assert [n["node"]["speedup"] for n in kinds(journal, "node") if n["node"]["speedup"] > 1.0]  # there was one
    assert evaluator.calls["finalize"] == 0 and not kinds(journal, "finalist")
    (skipped,) = kinds(journal, "finalist_skipped")
    assert "at most 1.020x end to end, below the 1.03x gate" in skipped["reason"]
    assert result.decision == "matched" and "none fast enough for the 1.03x end-to-end gate" in result.reason
    assert skipped["node"] in result.reason
    report = Path(result.run_dir, "report.md").read_text()
    assert "Not sent to the final gates" in report and f"`{skipped['node']}`" in report


def test_a_clear_kernel_win_on_a_small_share_of_the_graph_is_not_a_finalist(tmp_path: Path) -> None:
    win = lambda source: 0.8 if "fixed_config" in source else 1.0  # noqa: E731 - 1.25x kernel speedup
    small = StandInEvaluator(latency=win, launch_timing=timing_with_share(0.1))
    result, journal = run(tmp_path / "small", small)
    assert small.calls["finalize"] == 0  # neither an early finalist nor a final one: 1.02x at most
    assert all("at its 10% of graph time" in s["reason"] for s in kinds(journal, "finalist_skipped"))
    assert result.decision == "matched"

    whole = StandInEvaluator(latency=win, launch_timing=timing_with_share(1.0))
    result, journal = run(tmp_path / "whole", whole)
    assert [f for f in kinds(journal, "finalist") if f["early"]]  # the same win on the whole graph goes early
    assert result.decision == "optimized" and not kinds(journal, "finalist_skipped")


def test_with_gate_4_off_the_kernel_speedup_itself_must_reach_the_threshold(tmp_path: Path) -> None:
    evaluator = StandInEvaluator(latency=lambda source: 0.98 if "fixed_config" in source else 1.0)  # 1.02x
    result, journal = run(tmp_path, evaluator, use_perf_gate=False)
    assert evaluator.calls["finalize"] == 0
    (skipped,) = kinds(journal, "finalist_skipped")
    assert "decides with gate 4 off" in skipped["reason"]
