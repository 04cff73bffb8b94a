"""The deterministic strategy analyst: a tier per kernel from Speed-of-Light, and directions.

The tier rule (percentages are ncu's SOL memory and compute (SM) throughput), first match wins:

1. ``unknown``        either figure is missing (no ncu, e.g. on the CPU backend);
2. ``near-optimal``   memory > 80 or compute > 80;
3. ``underutilized``  both < 30 (nothing is busy: latency-bound), or the two are similar
                      (|memory - compute| <= 10) and both <= 60;
4. ``memory-bound``   memory >= compute (both <= 80; an exact tie counts as memory-bound, since
                      Inductor's kernels move data more than they compute);
5. ``compute-bound``  compute > memory (both <= 80).

Every claim carries the numbers behind it. Pure Python: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .artifacts.model import TritonKernel
    from .measure.ncu import KernelMetrics, NcuRule
    from .measure.peaks import DevicePeaks
    from .measure.statistics import TimingStats

Tier = Literal["near-optimal", "memory-bound", "compute-bound", "underutilized", "unknown"]
TIERS: tuple[Tier, ...] = ("near-optimal", "memory-bound", "compute-bound", "underutilized", "unknown")

NEAR_OPTIMAL_PCT = 80.0
LOW_PCT = 30.0
SIMILAR_PCT = 10.0
SIMILAR_CEILING_PCT = 60.0
LOW_OCCUPANCY_PCT = 50.0
HIGH_REGISTERS = 128
LOW_L2_HIT_PCT = 50.0


def classify(memory_pct: float | None, compute_pct: float | None) -> Tier:
    """The tier from SOL memory and compute throughput (%), by the rule in the module docstring."""
    if memory_pct is None or compute_pct is None:
        return "unknown"
    if memory_pct > NEAR_OPTIMAL_PCT or compute_pct > NEAR_OPTIMAL_PCT:
        return "near-optimal"
    if memory_pct < LOW_PCT and compute_pct < LOW_PCT:
        return "underutilized"
    if abs(memory_pct - compute_pct) <= SIMILAR_PCT and max(memory_pct, compute_pct) <= SIMILAR_CEILING_PCT:
        return "underutilized"
    if memory_pct >= compute_pct:
        return "memory-bound"
    return "compute-bound"


@dataclass
class Direction:
    name: str  # a stable id the planner and the memory use, e.g. "vectorize-loads"
    rationale: str
    evidence: str  # the numbers behind it

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rationale": self.rationale, "evidence": self.evidence}


@dataclass
class KernelAnalysis:
    kernel: str
    tier: Tier
    evidence: list[str] = field(default_factory=list)
    directions: list[Direction] = field(default_factory=list)
    top_rules: list[NcuRule] = field(default_factory=list)
    achieved: dict[str, float] = field(default_factory=dict)  # bytes/s, FLOP/s and their peak fractions

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "tier": self.tier, "evidence": list(self.evidence),
            "directions": [d.to_json() for d in self.directions],
            "top_rules": [r.to_json() for r in self.top_rules], "achieved": dict(self.achieved),
        }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _tier_evidence(tier: Tier, m: KernelMetrics) -> str:
    mem, comp = m.memory_pct, m.compute_pct
    figures = f"SOL memory {_pct(mem)}, compute (SM) {_pct(comp)}"
    if tier == "near-optimal":
        return f"near-optimal: {figures}; one unit is above {NEAR_OPTIMAL_PCT:.0f}% of its peak"
    if tier == "underutilized":
        return (f"underutilized (latency-bound): {figures}; neither unit is busy, so the kernel waits "
                "on latency (too few warps in flight, or too little work per launch)")
    if tier == "memory-bound":
        return f"memory-bound: {figures}; memory leads and both are at most {NEAR_OPTIMAL_PCT:.0f}%"
    if tier == "compute-bound":
        return f"compute-bound: {figures}; compute leads and both are at most {NEAR_OPTIMAL_PCT:.0f}%"
    return "unknown: no Speed-of-Light metrics (ncu did not run)"


def analyze_kernel(metrics: KernelMetrics | None, timing: TimingStats | None = None,
                   peaks: DevicePeaks | None = None, kernel: TritonKernel | None = None,
                   flops: float | None = None) -> KernelAnalysis:
    """Tier, evidence, directions and top ncu rules for one kernel.

    ``flops`` (the kernel's floating-point operations per launch), when the caller knows it,
    gives achieved FLOP/s against the measured matmul peak.
    """
    name = (metrics.name if metrics else None) or (kernel.name if kernel else "") or "kernel"
    tier = classify(metrics.memory_pct if metrics else None, metrics.compute_pct if metrics else None)
    analysis = KernelAnalysis(kernel=name, tier=tier)
    if metrics is None:
        analysis.evidence.append("unknown: no ncu metrics for this kernel (ncu unavailable or not run)")
    else:
        analysis.evidence.append(_tier_evidence(tier, metrics))
        analysis.top_rules = metrics.top_rules(3)
    duration_ms = _duration_ms(metrics, timing)
    if timing is not None:
        analysis.evidence.append(
            f"time: median {timing.median_ms:.4f} ms (IQR {timing.iqr_ms:.4f} ms, 95% CI "
            f"{timing.ci_low_ms:.4f}-{timing.ci_high_ms:.4f} ms, n={timing.n}, path {timing.path})")
    elif metrics is not None and metrics.duration_ns is not None:
        spread = ""
        if metrics.duration_ns_range and metrics.launches > 1:
            low, high = metrics.duration_ns_range
            spread = f" (median of {metrics.launches} launches, {low:,.0f}-{high:,.0f} ns)"
        analysis.evidence.append(f"ncu duration {metrics.duration_ns:,.0f} ns{spread}")
    _achieved(analysis, metrics, peaks, duration_ms, flops)
    if metrics is not None:
        _occupancy_evidence(analysis, metrics)
        for rule in analysis.top_rules:
            gain = f"est. {rule.est_speedup_pct:.1f}% speedup" if rule.est_speedup_pct is not None else "no estimate"
            analysis.evidence.append(f"ncu rule {rule.name} [{rule.type}] ({gain}): {_first_sentence(rule.description)}")
    analysis.directions = _directions(tier, metrics, kernel, analysis.achieved)
    return analysis


def _duration_ms(metrics: KernelMetrics | None, timing: TimingStats | None) -> float | None:
    if metrics is not None and metrics.duration_ns:
        return metrics.duration_ns / 1e6
    return timing.median_ms if timing is not None else None


def _achieved(analysis: KernelAnalysis, metrics: KernelMetrics | None, peaks: DevicePeaks | None,
              duration_ms: float | None, flops: float | None) -> None:
    if peaks is None:
        analysis.evidence.append("no measured device peaks (CPU backend or not measured): no roofline figures")
    bandwidth = metrics.dram_bytes_per_s if metrics is not None else None
    if bandwidth is not None:
        analysis.achieved["dram_bytes_per_s"] = bandwidth
        text = f"achieved DRAM bandwidth {bandwidth / 1e9:,.0f} GB/s"
        if peaks is not None and peaks.copy_bytes_per_s > 0:
            fraction = bandwidth / peaks.copy_bytes_per_s
            analysis.achieved["copy_peak_fraction"] = fraction
            text += f" = {fraction:.0%} of the measured copy peak ({peaks.copy_bytes_per_s / 1e9:,.0f} GB/s, {peaks.gpu})"
        analysis.evidence.append(text)
    if flops is not None and duration_ms:
        rate = flops / (duration_ms / 1000.0)
        analysis.achieved["flops_per_s"] = rate
        text = f"achieved {rate / 1e12:,.1f} TFLOP/s"
        if peaks is not None and peaks.matmul_flops_per_s > 0:
            fraction = rate / peaks.matmul_flops_per_s
            analysis.achieved["matmul_peak_fraction"] = fraction
            text += f" = {fraction:.0%} of the measured bf16 matmul peak ({peaks.matmul_flops_per_s / 1e12:,.0f} TFLOP/s)"
        analysis.evidence.append(text)


def _occupancy_evidence(analysis: KernelAnalysis, m: KernelMetrics) -> None:
    parts = []
    if m.achieved_occupancy_pct is not None:
        parts.append(f"achieved occupancy {_pct(m.achieved_occupancy_pct)}")
    if m.theoretical_occupancy_pct is not None:
        parts.append(f"theoretical {_pct(m.theoretical_occupancy_pct)}")
    if m.registers is not None:
        parts.append(f"{m.registers} registers/thread")
    if m.block_size is not None and m.grid_size is not None:
        parts.append(f"{m.grid_size:,} blocks of {m.block_size} threads")
    if m.waves_per_sm is not None:
        parts.append(f"{m.waves_per_sm:g} waves per SM")
    if parts:
        analysis.evidence.append(", ".join(parts))


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def _is_reduction(kernel: TritonKernel | None) -> bool:
    return kernel is not None and kernel.kind in ("red", "per")


def _directions(tier: Tier, m: KernelMetrics | None, kernel: TritonKernel | None,
                achieved: dict[str, float]) -> list[Direction]:
    if tier == "near-optimal" or m is None:
        return _static_directions(kernel) if m is None else []
    out: list[Direction] = []
    mem, comp = _pct(m.memory_pct), _pct(m.compute_pct)
    occupancy = m.achieved_occupancy_pct
    if tier == "memory-bound":
        bw = achieved.get("copy_peak_fraction")
        bw_text = f", {bw:.0%} of copy peak" if bw is not None else ""
        out.append(Direction("vectorize-loads",
                             "wider, coalesced accesses: a larger XBLOCK, contiguous inner dimension, more "
                             "elements per thread", f"SOL memory {mem} vs compute {comp}{bw_text}"))
        if _is_reduction(kernel):
            assert kernel is not None
            out.append(Direction("fuse-rereads",
                                 "read each input once: keep the row in registers (persistent reduction) "
                                 "instead of a second pass over global memory",
                                 f"{kernel.kind} kernel with {kernel.inductor_meta.get('num_load', '?')} loads; "
                                 f"SOL memory {mem}"))
        hit = m.l2_hit_pct
        out.append(Direction("eviction-hints",
                             "eviction_policy='evict_first' on data read once, 'evict_last' on data reused",
                             f"L2 hit rate {_pct(hit)}" + (" is low" if hit is not None and hit < LOW_L2_HIT_PCT else "")))
    elif tier == "compute-bound":
        out.append(Direction("cheaper-math",
                             "fewer or cheaper instructions: hoist invariant math out of loops, fuse "
                             "multiply-adds, avoid recomputing exp/div per element",
                             f"SOL compute {comp} vs memory {mem}"))
        if kernel is not None and kernel.kind == "tem":
            out.append(Direction("tile-tuning",
                                 "retune BLOCK_M/N/K, num_warps and num_stages for this shape",
                                 f"template kernel, SOL compute {comp}"))
        else:
            out.append(Direction("tile-tuning", "retune block sizes and num_warps for this shape",
                                 f"SOL compute {comp}, occupancy {_pct(occupancy)}"))
    elif tier == "underutilized":
        waves = m.waves_per_sm
        grid_text = f"{m.grid_size:,} blocks" if m.grid_size is not None else "grid n/a"
        out.append(Direction("more-programs",
                             "more, smaller programs (split the reduction, smaller XBLOCK) so every SM has work",
                             f"{grid_text}, {waves:g} waves per SM" if waves is not None else grid_text))
        out.append(Direction("smaller-blocks-more-warps",
                             "hide latency with more warps in flight: smaller blocks or more num_warps",
                             f"achieved occupancy {_pct(occupancy)}, SOL memory {mem}, compute {comp}"))
    if m.registers is not None and m.registers > HIGH_REGISTERS:
        out.append(Direction("reduce-register-pressure",
                             "fewer live values per thread (smaller blocks, fewer unrolled loads)",
                             f"{m.registers} registers/thread, theoretical occupancy {_pct(m.theoretical_occupancy_pct)}"))
    elif occupancy is not None and occupancy < LOW_OCCUPANCY_PCT and tier != "underutilized":
        out.append(Direction("raise-occupancy", "more warps in flight per SM",
                             f"achieved occupancy {_pct(occupancy)} < {LOW_OCCUPANCY_PCT:.0f}%"))
    return out


def _static_directions(kernel: TritonKernel | None) -> list[Direction]:
    """Without metrics only the kernel's shape speaks; say so, and suggest measuring."""
    out = [Direction("profile-on-gpu", "run ncu on a GPU before choosing a direction",
                     "no Speed-of-Light metrics for this kernel")]
    if kernel is not None and kernel.kind == "red":
        out.append(Direction("fuse-rereads", "a looped reduction may read its input twice; a persistent "
                                             "reduction keeps the row in registers",
                             f"kernel kind {kernel.kind} (looped reduction), size hints {kernel.size_hints}"))
    return out
