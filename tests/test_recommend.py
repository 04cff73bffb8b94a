"""Deterministic configuration recommendations, and their verification like any candidate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.dispatch import analyze
from kernelopt_core.measure.accounting import (
    COPY_ITEM,
    GAPS_ITEM,
    GUARD_ITEM,
    CallableAccounting,
    MeasuredParts,
    PathTiming,
    split_overheads,
)
from kernelopt_core.measure.paths import TimingPath
from kernelopt_core.measure.statistics import summarize
from kernelopt_core.recommend import (
    ConfigRecommendation,
    ConfigVerificationError,
    recommend_config,
    verify_recommendation,
)


def _accounting(parts: MeasuredParts, mode: str, device: str = "cuda:0",
                alternatives: dict[str, float] | None = None) -> CallableAccounting:
    items, _ = split_overheads(parts)
    path = TimingPath.COMPILED_CALLABLE_CUDAGRAPHS if parts.cudagraphs else TimingPath.COMPILED_CALLABLE
    alts = [PathTiming(f"{m} (full callable)", m, summarize([ms, ms * 1.01, ms * 0.99], "compiled-callable"))
            for m, ms in (alternatives or {}).items()]
    return CallableAccounting(
        name="case", device=device, mode=mode, cudagraphs=parts.cudagraphs,
        callable=PathTiming(f"{mode} (full callable)", mode, summarize([parts.callable_ms] * 3, path.value)),
        kernel_ms=parts.kernel_ms, overheads=items, copy_bytes=parts.copy_bytes, alternatives=alts,
    )


# The relu case of the measurement notes as input: 6.62 ms through max-autotune, 3.01 ms kernel.
RELU = MeasuredParts(callable_ms=6.62, kernel_ms=3.01, gaps_ms=0.005, copy_ms=3.55,
                     copy_bytes=6_442_450_944, launches=1, cudagraphs=True)
LAUNCH_BOUND = MeasuredParts(callable_ms=0.120, kernel_ms=0.030, gaps_ms=0.060, launches=14)


def test_copy_dominated_graph_is_told_to_drop_cuda_graphs() -> None:
    rec = recommend_config(_accounting(RELU, "max-autotune"))
    assert rec is not None
    assert rec.change == {"mode": "max-autotune-no-cudagraphs"} and rec.baseline_mode == "max-autotune"
    assert rec.dominant == COPY_ITEM
    assert "54%" in rec.reason and "6.4 GB" in rec.reason
    assert any("mark_static_address" in alt for alt in rec.alternatives)
    assert any("persistent buffers" in alt for alt in rec.alternatives)
    assert rec.overhead_share >= 0.30


def test_measured_alternative_goes_into_the_reason_or_vetoes() -> None:
    faster = recommend_config(_accounting(RELU, "max-autotune", alternatives={"max-autotune-no-cudagraphs": 3.01}))
    assert faster is not None and "2.20x" in faster.reason
    assert faster.evidence["measured_ms"] == {"current": 6.62, "recommended": 3.01}
    slower = recommend_config(_accounting(RELU, "max-autotune", alternatives={"max-autotune-no-cudagraphs": 7.0}))
    assert slower is None


def test_reduce_overhead_falls_back_to_default() -> None:
    rec = recommend_config(_accounting(RELU, "reduce-overhead"))
    assert rec is not None and rec.change == {"mode": "default"}


def test_launch_bound_graph_without_graphs_is_told_to_use_them() -> None:
    rec = recommend_config(_accounting(LAUNCH_BOUND, "max-autotune-no-cudagraphs"))
    assert rec is not None
    assert rec.change == {"mode": "max-autotune"} and rec.dominant == GAPS_ITEM
    assert "launch-bound" in rec.title
    assert recommend_config(_accounting(LAUNCH_BOUND, "default")).change == {"mode": "reduce-overhead"}


def test_no_recommendation_when_overhead_is_small_or_no_change_helps() -> None:
    small = MeasuredParts(callable_ms=1.0, kernel_ms=0.91, gaps_ms=0.05, launches=3)  # 9% overhead
    assert recommend_config(_accounting(small, "max-autotune-no-cudagraphs")) is None
    over_rule = MeasuredParts(callable_ms=1.0, kernel_ms=0.89, gaps_ms=0.05, launches=3)  # 11%
    assert recommend_config(_accounting(over_rule, "max-autotune-no-cudagraphs")) is not None
    below_dominating = MeasuredParts(callable_ms=1.0, kernel_ms=0.75, gaps_ms=0.1, launches=3)  # 25%
    assert recommend_config(_accounting(below_dominating, "max-autotune-no-cudagraphs")) is not None
    graphed_gaps = MeasuredParts(callable_ms=0.1, kernel_ms=0.02, gaps_ms=0.07, copy_ms=0.001, copy_bytes=1024,
                                 launches=30, cudagraphs=True)
    assert recommend_config(_accounting(graphed_gaps, "max-autotune")) is None  # graphs already on
    assert recommend_config(_accounting(LAUNCH_BOUND, "default", device="cpu")) is None  # no CUDA graphs on CPU


def test_recommendation_from_a_dispatch_report_and_from_json(h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "elementwise" / "output_code.py"))
    acct = _accounting(RELU, "max-autotune")
    report = analyze(graph, {i.order: acct.kernel_ms for i in graph.timeline()}, acct.overheads, acct.path)
    from_report = recommend_config(report, mode="max-autotune")
    assert from_report is not None and from_report.change == {"mode": "max-autotune-no-cudagraphs"}
    from_profile_json = recommend_config({"overheads": [o.to_json() for o in report.overheads],
                                          "timing_path": report.timing_path})
    assert from_profile_json is not None and from_profile_json.dominant == COPY_ITEM
    from_accounting_json = recommend_config(acct.to_json())
    assert from_accounting_json is not None and from_accounting_json.to_json() == from_report.to_json()
    assert ConfigRecommendation.from_json(from_report.to_json()) == from_report
    assert "Recommendation" in from_report.to_markdown()
    with pytest.raises(TypeError):
        recommend_config(42)  # type: ignore[arg-type]


def test_guard_dominated_without_graphs_recommends_graphs() -> None:
    guard_bound = MeasuredParts(callable_ms=0.2, kernel_ms=0.05, gaps_ms=0.01, launches=2)
    rec = recommend_config(_accounting(guard_bound, "max-autotune-no-cudagraphs"))
    assert rec is not None and rec.dominant == GUARD_ITEM and rec.change == {"mode": "max-autotune"}


# --- gate-3 style comparison -------------------------------------------------------------------


def test_output_comparison_tolerance_and_float64_fallback() -> None:
    torch = pytest.importorskip("torch")
    from kernelopt_core.measure.accounting_verify import compare_outputs

    base = torch.tensor([1.0, 2.0, 4.0])
    assert compare_outputs(base, base + 1e-5, None)["passed"]
    wrong = compare_outputs(base, base + 1e-2, None)
    assert not wrong["passed"] and wrong["rel_err"] == pytest.approx(1e-2 / 4, rel=1e-3)
    # the baseline itself is 1e-3 off the float64 truth; a candidate 2e-3 off passes (rho 2) ...
    ref = base.double()
    noisy_base = base + 1e-3
    assert compare_outputs(noisy_base, base + 2e-3, ref)["rho"] == pytest.approx(2.0, rel=1e-3)
    assert compare_outputs(noisy_base, base + 2e-3, ref)["passed"]
    # ... and one 5e-2 off fails (rho 50)
    assert not compare_outputs(noisy_base, base + 5e-2, ref)["passed"]
    assert not compare_outputs(base, torch.ones(2), None)["passed"]  # shape mismatch
    calls = []
    lazy = compare_outputs(base, base + 1e-6, lambda: calls.append(1) or ref)
    assert lazy["passed"] and calls == []  # the float64 reference is only computed when needed
    assert compare_outputs(noisy_base, base + 2e-3, lambda: calls.append(1) or ref)["passed"] and calls == [1]
    nan = compare_outputs(base, torch.tensor([1.0, float("nan"), 4.0]), ref)
    assert not nan["passed"] and "NaN" in nan["reason"]


# --- verification through the worker (CPU backend) ---------------------------------------------

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x).sum(dim=1) * 0.5

    def get_inputs():
        return [torch.randn(8, 32)]

    def get_init_inputs():
        return []
''')


def test_verify_a_recommendation_like_a_candidate(tmp_path: Path) -> None:
    from kernelopt_core.measure.worker import Worker

    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    rec = recommend_config(_accounting(RELU, "max-autotune"))
    assert rec is not None
    with Worker("cpu") as worker:
        verdict = verify_recommendation(str(problem), rec, worker=worker, rounds=5, timeout_s=300)
    gate3, gate4 = verdict.gates
    assert (gate3["gate"], gate3["name"], gate3["passed"]) == (3, "model", True)
    assert [s["seed"] for s in gate3["seeds"]] == [0, 42, 123]
    assert gate4["gate"] == 4 and gate4["rounds"] == 5
    # both timed through the full callable (on the CPU both modes compile alike, without CUDA graphs)
    assert verdict.baseline_path == verdict.candidate_path == TimingPath.COMPILED_CALLABLE.value
    assert verdict.accepted == (verdict.speedup >= 1.03 and verdict.ci[0] > 1.0)
    assert verdict.notes and "same code" in verdict.notes[0]
    assert verdict.to_json()["change"] == {"mode": "max-autotune-no-cudagraphs"}


def test_verify_refuses_bad_input(tmp_path: Path) -> None:
    rec = ConfigRecommendation(title="t", reason="r", change={"dynamic": True}, baseline_mode="max-autotune",
                               overhead_share=0.5, dominant=GAPS_ITEM)
    with pytest.raises(ConfigVerificationError, match="no such problem file"):
        verify_recommendation(str(tmp_path / "absent.py"), rec, worker=object())
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    with pytest.raises(ConfigVerificationError, match="only mode changes"):
        verify_recommendation(str(problem), rec, worker=object())


def test_what_the_change_removes_decides_on_level_2s_h100_accountings() -> None:
    """Session 22's H100 accountings of level 2: problem 17's input copy is 13% of its callable (0.40 of
    3.00 ms), under the 30% at which overhead dominates, and now checked; problem 92's 20% of overhead is
    guard + wrapper under CUDA graphs, and problems 21 and 85 remove under 10%: nothing to check there."""
    import json

    data = json.loads((Path(__file__).parent / "fixtures" / "level2_h100" / "accounting_session22.json").read_text())
    accountings = {name: CallableAccounting.from_json(value) for name, value in data.items()}
    assert not accountings["p17"].overhead_dominates
    rec = recommend_config(accountings["p17"])
    assert rec is not None and rec.change == {"mode": "max-autotune-no-cudagraphs"} and rec.dominant == COPY_ITEM
    assert "removes 13%" in rec.reason
    assert accountings["p92"].overhead_share > 0.10
    assert [name for name, acct in accountings.items() if recommend_config(acct) is not None] == ["p17"]
