"""The analyst: tiers at every boundary of the documented rule, and directions with their numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt_core.analyst import TIERS, analyze_kernel, classify
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.measure.ncu import KernelMetrics, NcuRule, parse_ncu_csv
from kernelopt_core.measure.peaks import DevicePeaks
from kernelopt_core.measure.statistics import summarize
from kernelopt_core.measure.traffic import static_graph_traffic


@pytest.mark.parametrize(("memory", "compute", "tier"), [
    # near-optimal: either above 80
    (80.01, 10.0, "near-optimal"),
    (10.0, 80.01, "near-optimal"),
    (95.0, 95.0, "near-optimal"),
    (80.0, 10.0, "memory-bound"),  # exactly 80 is not above 80
    (10.0, 80.0, "compute-bound"),
    (80.0, 80.0, "memory-bound"),  # tie above the similar-and-low ceiling goes to memory
    # underutilized: both below 30
    (29.99, 29.99, "underutilized"),
    (29.99, 0.0, "underutilized"),
    (30.0, 0.0, "memory-bound"),  # 30 is not below 30, and 30 apart is not similar
    (0.0, 30.0, "compute-bound"),
    # underutilized: similar (|m - c| <= 10) and both <= 60
    (60.0, 50.0, "underutilized"),
    (50.0, 60.0, "underutilized"),
    (60.01, 50.01, "memory-bound"),  # above the 60 ceiling
    (50.01, 60.01, "compute-bound"),
    (60.0, 49.99, "memory-bound"),  # 10.01 apart is not similar
    (49.99, 60.0, "compute-bound"),
    (45.0, 45.0, "underutilized"),
    # memory- and compute-bound
    (70.0, 40.0, "memory-bound"),
    (40.0, 70.0, "compute-bound"),
    (70.0, 69.0, "memory-bound"),
    (69.0, 70.0, "compute-bound"),
    # unknown
    (None, 50.0, "unknown"),
    (50.0, None, "unknown"),
    (None, None, "unknown"),
])
def test_tier_boundaries(memory: float | None, compute: float | None, tier: str) -> None:
    assert classify(memory, compute) == tier
    assert tier in TIERS


def _metrics(memory: float, compute: float, **extra) -> KernelMetrics:
    fields = dict(name="triton_k", duration_ns=10_000.0, memory_pct=memory, dram_pct=memory, compute_pct=compute,
                  achieved_occupancy_pct=70.0, registers=32, block_size=256, grid_size=1024)
    fields.update(extra)
    return KernelMetrics(**fields)


PEAKS = DevicePeaks(gpu="NVIDIA H200", copy_bytes_per_s=4.243e12, matmul_flops_per_s=790e12,
                    measured_at="2026-11-30")


def test_rmsnorm_fixture_analysis(h200_dumps: Path) -> None:
    metrics = parse_ncu_csv((h200_dumps / "ncu" / "rmsnorm_sections.csv").read_text())[0]
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    (launch,) = static_graph_traffic(graph)
    analysis = analyze_kernel(metrics, None, PEAKS, graph.kernels[0], launch_args=launch)
    # x (8192 x 4096 fp32) and the 4096-float weight read once, the output written once, in 62,080 ns
    ideal = 2 * 8192 * 4096 * 4 + 4096 * 4
    assert analysis.sol.ideal_bytes == ideal
    assert analysis.sol.sol_pct == pytest.approx(100 * ideal / (62_080e-9 * 4.243e12))
    assert analysis.tier == "near-optimal" and analysis.paper_tier == "near-optimal"
    assert analysis.directions == [] and analysis.causes == []  # nothing left to win inside the kernel
    assert analysis.evidence[1].startswith("near-optimal: 101.9% of speed of light (at least 85%)")
    assert analysis.evidence[2].startswith("paper's SOL-memory tier: near-optimal (SOL memory 81.2%, compute (SM) 22.0%")
    assert analysis.achieved["copy_peak_fraction"] == pytest.approx(3_907.5134 / 4_243.0, rel=1e-6)
    assert any("92% of the measured copy peak" in e for e in analysis.evidence)
    assert any("62,080 ns" in e for e in analysis.evidence)
    # Without the launch arguments the ideal bytes are unknown, and SOL memory > 80% alone is not enough
    alone = analyze_kernel(metrics, None, PEAKS, graph.kernels[0])
    assert alone.tier == "memory-bound" and alone.paper_tier == "near-optimal"
    assert "speed of light unknown: no launch arguments were captured" in alone.evidence[0]


def test_memory_bound_directions_carry_numbers() -> None:
    metrics = _metrics(62.0, 20.0, l2_hit_pct=12.5, dram_bytes_per_s=2.6e12)
    analysis = analyze_kernel(metrics, None, PEAKS, None)
    assert analysis.tier == "memory-bound"
    names = [d.name for d in analysis.directions]
    assert names[:1] == ["vectorize-loads"] and "eviction-hints" in names
    vectorize = analysis.directions[0]
    assert "62.0%" in vectorize.evidence and "20.0%" in vectorize.evidence and "61% of copy peak" in vectorize.evidence
    eviction = next(d for d in analysis.directions if d.name == "eviction-hints")
    assert "12.5%" in eviction.evidence and "low" in eviction.evidence


def test_memory_bound_reduction_adds_fuse_rereads(h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "layernorm_gelu" / "output_code.py"))
    kernel = graph.kernels[0]
    assert kernel.kind == "red"
    analysis = analyze_kernel(_metrics(60.0, 25.0), None, None, kernel)
    # No DRAM counters: the two r0 passes over in_ptr0 are read from the source, and said so
    assert analysis.cause_ids == ["re-reads"] and analysis.causes[0].source == "kernel source"
    fuse = next(d for d in analysis.directions if d.name == "fuse-rereads")
    assert "2 passes over in_ptr0" in fuse.evidence


def test_underutilized_directions() -> None:
    analysis = analyze_kernel(_metrics(12.0, 8.0, grid_size=40, waves_per_sm=0.3, achieved_occupancy_pct=18.0))
    assert analysis.tier == "underutilized"
    more = next(d for d in analysis.directions if d.name == "more-programs")
    assert "40 blocks" in more.evidence and "0.3 waves" in more.evidence
    warps = next(d for d in analysis.directions if d.name == "smaller-blocks-more-warps")
    assert "18.0%" in warps.evidence


def test_compute_bound_directions_and_register_pressure() -> None:
    analysis = analyze_kernel(_metrics(20.0, 75.0, registers=168, theoretical_occupancy_pct=25.0))
    assert analysis.tier == "compute-bound"
    names = [d.name for d in analysis.directions]
    assert "cheaper-math" in names and "tile-tuning" in names
    pressure = next(d for d in analysis.directions if d.name == "reduce-register-pressure")
    assert "168 registers" in pressure.evidence and "25.0%" in pressure.evidence


def test_low_occupancy_direction_when_not_underutilized() -> None:
    analysis = analyze_kernel(_metrics(70.0, 20.0, achieved_occupancy_pct=31.0))
    occupancy = next(d for d in analysis.directions if d.name == "raise-occupancy")
    assert "31.0%" in occupancy.evidence


def test_top_three_rules_by_estimated_speedup() -> None:
    rules = [NcuRule("A", "OPT", "a.", 5.0), NcuRule("B", "OPT", "b.", 40.0), NcuRule("C", "INF", "c.", None),
             NcuRule("D", "OPT", "d. More.", 12.5)]
    analysis = analyze_kernel(_metrics(50.0, 10.0, rules=rules))
    assert [r.name for r in analysis.top_rules] == ["B", "D", "A"]
    assert any("ncu rule D [OPT] (est. 12.5% speedup): d." == e for e in analysis.evidence)


def test_flops_against_the_matmul_peak() -> None:
    analysis = analyze_kernel(_metrics(20.0, 70.0, duration_ns=1_000_000.0), None, PEAKS, None, flops=395e9)
    assert analysis.achieved["flops_per_s"] == pytest.approx(395e12)
    assert analysis.achieved["matmul_peak_fraction"] == pytest.approx(0.5)
    assert any("50% of the measured bf16 matmul peak" in e for e in analysis.evidence)


def test_unknown_without_metrics_says_so_and_uses_timing() -> None:
    timing = summarize([1.0, 1.1, 1.2, 0.9, 1.0], "module-call")
    analysis = analyze_kernel(None, timing, None, None)
    assert analysis.tier == "unknown"
    assert analysis.evidence[0].startswith("speed of light unknown")
    assert "no ncu metrics" in analysis.evidence[1]
    assert any("median 1.0000 ms" in e and "module-call" in e for e in analysis.evidence)
    assert any("no measured device peaks" in e for e in analysis.evidence)
    assert [d.name for d in analysis.directions] == ["profile-on-gpu"]
    assert analysis.to_json()["tier"] == "unknown"


def test_peaks_cache_round_trip_and_cpu_has_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.measure.cache_dir import write_json
    from kernelopt_core.measure.peaks import cached_peaks, device_peaks, peaks_cache_path, peaks_task

    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path))
    assert cached_peaks("NVIDIA H200") is None
    path = peaks_cache_path("NVIDIA H200")
    assert path.parent == tmp_path / "peaks" and path.name == "NVIDIA-H200.json"
    write_json(path, PEAKS.to_json())
    assert cached_peaks("NVIDIA H200") == PEAKS
    path.write_text("{broken")
    assert cached_peaks("NVIDIA H200") is None  # a damaged entry is a miss
    assert device_peaks("cpu") is None
    assert peaks_task({"device": "cpu"}) is None
