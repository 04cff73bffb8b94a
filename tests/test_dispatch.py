"""Dispatch analysis: launch-count shares, time shares, and the three classifications with evidence."""

from __future__ import annotations

import pytest
from conftest import H200_DUMPS

from kernelopt_core.artifacts import CompiledGraph, parse_output_code
from kernelopt_core.dispatch import VENDOR_DOMINATED_SHARE, OverheadItem, analyze


def _graph(name: str) -> CompiledGraph:
    return parse_output_code(str(H200_DUMPS / name / "output_code.py"))


def test_untimed_shares_are_launch_counts() -> None:
    report = analyze(_graph("conv_bn_relu"))
    assert report.timed is False and report.timing_path is None
    assert [s.share for s in report.launches] == pytest.approx([0.25] * 4)
    assert report.vendor_share == pytest.approx(0.25) and report.triton_share == pytest.approx(0.75)
    assert report.classification == "optimizable"
    assert "75% of launches" in report.evidence and "3 Triton kernel(s)" in report.evidence
    assert all(s.time_ms is None for s in report.launches)


def test_timed_shares_follow_time_and_can_flip_to_vendor_dominated() -> None:
    graph = _graph("matmul_bias_relu")  # order 0: extern mm, order 1: the poi epilogue
    report = analyze(graph, {0: 9.0, 1: 1.0}, timing_path="module-call")
    assert report.timed and report.timing_path == "module-call"
    assert report.vendor_share == pytest.approx(0.9)
    assert report.classification == "vendor-dominated"
    assert "90% of graph time in vendor calls" in report.evidence
    assert "extern_kernels.mm" in report.evidence and "at most 10%" in report.evidence
    assert report.share_of("triton_poi_fused_add_addmm_mul_relu_0") == pytest.approx(0.1)
    # Same graph untimed: 1 of 2 launches is vendor -> optimizable.
    assert analyze(graph).classification == "optimizable"


@pytest.mark.parametrize(("vendor_ms", "expected"), [
    (79.9, "optimizable"),
    (80.0, "vendor-dominated"),  # the threshold is inclusive: at least 80%
    (80.1, "vendor-dominated"),
])
def test_vendor_dominated_threshold(vendor_ms: float, expected: str) -> None:
    report = analyze(_graph("matmul_bias_relu"), {0: vendor_ms, 1: 100.0 - vendor_ms})
    assert VENDOR_DOMINATED_SHARE == 0.80
    assert report.classification == expected


def test_partial_timing_is_ignored_not_misread() -> None:
    report = analyze(_graph("conv_bn_relu"), {0: 5.0})  # only one of four launches timed
    assert report.timed is False
    assert [s.share for s in report.launches] == pytest.approx([0.25] * 4)


def test_overheads_take_a_share_of_graph_time() -> None:
    overhead = OverheadItem(name="cudagraph input copy", time_ms=2.0, share=0.0)
    report = analyze(_graph("elementwise"), {0: 2.0}, overheads=[overhead], timing_path="compiled-callable-cudagraphs")
    assert report.overheads[0].share == pytest.approx(0.5)
    assert report.triton_share == pytest.approx(0.5)
    data = report.to_json()
    assert data["overheads"][0]["name"] == "cudagraph input copy"
    assert data["timing_path"] == "compiled-callable-cudagraphs"


def test_no_triton_graph() -> None:
    graph = _graph("matmul_bias_relu")
    graph.kernels, graph.launches = [], []  # e.g. an LSTM: vendor calls only
    report = analyze(graph)
    assert report.classification == "no-triton"
    assert "no Triton kernels launched; 1 vendor/ATen call(s)" == report.evidence
    assert report.vendor_share == pytest.approx(1.0)


def test_pure_triton_graphs_are_optimizable_with_evidence() -> None:
    for name in ("elementwise", "rmsnorm", "softmax", "sum_reduce", "transpose", "layernorm_gelu"):
        report = analyze(_graph(name))
        assert report.classification == "optimizable"
        assert report.vendor_share == 0.0
        assert "100% of launches" in report.evidence


def test_sum_reduce_largest_kernel_named_from_times() -> None:
    report = analyze(_graph("sum_reduce"), {0: 3.0, 1: 1.0})
    assert report.evidence.startswith("100% of graph time in 2 Triton kernel(s) (largest: triton_red_fused_sum_0 75%)")
