"""The deterministic strategy analyst: a tier per kernel from its speed of light, causes and directions.

**Speed of light** = ideal bytes / (kernel time x the device's measured copy bandwidth); the ideal
bytes are every distinct tensor the launch reads, once, plus every tensor it writes, once
(:mod:`kernelopt_core.measure.traffic`). The tier, first match wins: ``near-optimal`` (>= 85%, or
compute-bound near the compute peak), ``unknown`` (no ncu figures), ``underutilized``,
``memory-bound``, ``compute-bound``. A kernel below 85% gets its causes named with their numbers:
``re-reads``, ``low-parallelism``, ``strided-access``, ``l2-thrash``; each cause maps to a
direction. The paper's rule (:func:`classify`) stays as a second figure, ``paper_tier``.

Pure Python: no torch. The rules in full: docs/design-notes.md, "analyst.py".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .measure.access import AccessFacts, access_facts
from .measure.traffic import (
    DTYPE_BYTES,
    LaunchArg,
    SpeedOfLight,
    bytes_text,
    launch_ideal_bytes,
    numel_args,
    speed_of_light,
)

if TYPE_CHECKING:
    from .artifacts.model import TritonKernel
    from .measure.ncu import KernelMetrics, NcuRule
    from .measure.peaks import DevicePeaks
    from .measure.statistics import TimingStats

Tier = Literal["near-optimal", "memory-bound", "compute-bound", "underutilized", "unknown"]
TIERS: tuple[Tier, ...] = ("near-optimal", "memory-bound", "compute-bound", "underutilized", "unknown")
CauseId = Literal["re-reads", "low-parallelism", "strided-access", "l2-thrash"]
CAUSES: tuple[CauseId, ...] = ("re-reads", "low-parallelism", "strided-access", "l2-thrash")

NEAR_OPTIMAL_PCT = 80.0  # the paper's rule, on ncu's SOL memory/compute percentages
NEAR_OPTIMAL_SOL_PCT = 85.0  # speed of light against the ideal bytes
NEAR_PEAK_COMPUTE_PCT = 80.0  # SOL compute (SM) of a compute-bound kernel at its peak
NEAR_PEAK_MATMUL_FRACTION = 0.80  # of the measured matmul rate, when the FLOPs are known
REREAD_RATIO = 1.3  # measured / ideal bytes from which re-reads are a cause
LOW_SECTOR_EFFICIENCY_PCT = 60.0  # useful bytes per fetched 32-byte sector, %
LOW_PCT = 30.0
SIMILAR_PCT = 10.0
SIMILAR_CEILING_PCT = 60.0
LOW_OCCUPANCY_PCT = 50.0
HIGH_REGISTERS = 128
LOW_L2_HIT_PCT = 50.0
SM_COUNT_FALLBACK_KEY = "multi_processor_count"


def classify(memory_pct: float | None, compute_pct: float | None) -> Tier:
    """The paper's tier from SOL memory and compute throughput (%): near-optimal above 80%, then
    steps 3-5 of the rule in the module docstring. Kept as the labelled second reading."""
    if memory_pct is None or compute_pct is None:
        return "unknown"
    if memory_pct > NEAR_OPTIMAL_PCT or compute_pct > NEAR_OPTIMAL_PCT:
        return "near-optimal"
    return _busy_tier(memory_pct, compute_pct)


def _busy_tier(memory_pct: float, compute_pct: float) -> Tier:
    if memory_pct < LOW_PCT and compute_pct < LOW_PCT:
        return "underutilized"
    if abs(memory_pct - compute_pct) <= SIMILAR_PCT and max(memory_pct, compute_pct) <= SIMILAR_CEILING_PCT:
        return "underutilized"
    if memory_pct >= compute_pct:
        return "memory-bound"
    return "compute-bound"


def compute_at_peak(memory_pct: float | None, compute_pct: float | None,
                    matmul_fraction: float | None = None) -> bool:
    """Compute-bound near the compute peak: SOL compute (SM) above 80% and leading memory, or at
    least 80% of the measured matmul rate."""
    if matmul_fraction is not None and matmul_fraction >= NEAR_PEAK_MATMUL_FRACTION:
        return True
    return (compute_pct is not None and compute_pct > NEAR_PEAK_COMPUTE_PCT
            and (memory_pct is None or compute_pct > memory_pct))


def classify_sol(sol_pct: float | None, memory_pct: float | None, compute_pct: float | None,
                 matmul_fraction: float | None = None) -> Tier:
    """The tier by the rule in the module docstring (speed of light first)."""
    if sol_pct is not None and sol_pct >= NEAR_OPTIMAL_SOL_PCT:
        return "near-optimal"
    if matmul_fraction is not None and matmul_fraction >= NEAR_PEAK_MATMUL_FRACTION:
        return "near-optimal"
    if sol_pct is None and compute_at_peak(memory_pct, compute_pct, matmul_fraction):
        return "near-optimal"
    if memory_pct is None or compute_pct is None:
        return "unknown"
    return _busy_tier(memory_pct, compute_pct)


@dataclass
class Direction:
    name: str  # a stable id the planner and the memory use, e.g. "vectorize-loads"
    rationale: str
    evidence: str  # the numbers behind it

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rationale": self.rationale, "evidence": self.evidence}


@dataclass
class Cause:
    """Why a kernel is below its speed of light, with the numbers that say so."""

    id: CauseId
    text: str
    source: str  # "measured" (ncu), "kernel source", or both
    numbers: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "source": self.source, "numbers": dict(self.numbers)}


@dataclass
class KernelFacts:
    """The launch shape behind the causes (None where nothing measured or captured it)."""

    grid: int | None = None  # programs (ncu's grid size)
    waves: float | None = None  # ncu's waves per SM, else programs / SMs
    sm_count: int | None = None
    l2_bytes: int | None = None
    xnumel: int | None = None
    r0_numel: int | None = None
    passes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class KernelAnalysis:
    kernel: str
    tier: Tier
    evidence: list[str] = field(default_factory=list)
    directions: list[Direction] = field(default_factory=list)
    top_rules: list[NcuRule] = field(default_factory=list)
    achieved: dict[str, float] = field(default_factory=dict)  # bytes/s, FLOP/s and their peak fractions
    sol: SpeedOfLight = field(default_factory=SpeedOfLight)
    paper_tier: Tier = "unknown"  # the paper's rule on SOL memory/compute (see classify)
    causes: list[Cause] = field(default_factory=list)
    facts: KernelFacts = field(default_factory=KernelFacts)
    access: AccessFacts | None = None

    @property
    def cause_ids(self) -> list[str]:
        return [c.id for c in self.causes]

    def sol_fields(self) -> dict[str, Any]:
        """The flat speed-of-light keys of a profile row (``kernelopt profile --json``, reports)."""
        sol = self.sol
        return {
            "ideal_bytes": sol.ideal_bytes, "ideal_read_bytes": sol.ideal_read_bytes,
            "ideal_write_bytes": sol.ideal_write_bytes, "ideal_source": sol.ideal_source,
            "dram_bytes": sol.dram_bytes, "dram_read_bytes": sol.dram_read_bytes,
            "dram_write_bytes": sol.dram_write_bytes, "traffic_ratio": sol.traffic_ratio, "sol_pct": sol.sol_pct,
            "sol_time_ms": sol.duration_ms, "sol_time_source": sol.duration_source,
            "sol_unknown_reason": sol.unknown_reason, "traffic_unknown_reason": sol.traffic_unknown_reason,
            "sol_text": sol.phrase(), "paper_tier": self.paper_tier, "causes": self.cause_ids,
            "cause_details": [c.to_json() for c in self.causes], "passes": self.facts.passes,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "tier": self.tier, "evidence": list(self.evidence),
            "directions": [d.to_json() for d in self.directions],
            "top_rules": [r.to_json() for r in self.top_rules], "achieved": dict(self.achieved),
            "sol": self.sol.to_json(), "paper_tier": self.paper_tier, "causes": [c.to_json() for c in self.causes],
            "facts": self.facts.to_json(), "access": self.access.to_json() if self.access else None,
        }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _paper_evidence(tier: Tier, m: KernelMetrics | None) -> str:
    if m is None:
        return "paper's SOL-memory tier: unknown (no ncu Speed-of-Light figures)"
    figures = f"SOL memory {_pct(m.memory_pct)}, compute (SM) {_pct(m.compute_pct)}"
    rule = "one unit above 80% is near-optimal" if tier == "near-optimal" else "neither unit above 80%"
    return f"paper's SOL-memory tier: {tier} ({figures}; {rule})"


def _tier_evidence(tier: Tier, m: KernelMetrics | None, sol: SpeedOfLight) -> str:
    sol_text = f"{sol.sol_pct:.1f}% of speed of light" if sol.sol_pct is not None else "speed of light unknown"
    if m is None:
        if tier == "near-optimal":
            return f"near-optimal: {sol_text} (at least {NEAR_OPTIMAL_SOL_PCT:.0f}%)"
        return "unknown: no ncu metrics for this kernel (ncu unavailable or not run)"
    figures = f"SOL memory {_pct(m.memory_pct)}, compute (SM) {_pct(m.compute_pct)}"
    if tier == "near-optimal":
        if sol.sol_pct is not None and sol.sol_pct >= NEAR_OPTIMAL_SOL_PCT:
            return f"near-optimal: {sol_text} (at least {NEAR_OPTIMAL_SOL_PCT:.0f}%); {figures}"
        return f"near-optimal: compute-bound at the compute peak ({figures})"
    below = (f"{sol_text}, below {NEAR_OPTIMAL_SOL_PCT:.0f}%" if sol.sol_pct is not None
             else f"{sol_text}, so not near-optimal")
    if tier == "underutilized":
        return (f"underutilized (latency-bound): {below}; {figures}; neither unit is busy, so the kernel waits "
                "on latency (too few warps in flight, or too little work per launch)")
    if tier == "memory-bound":
        return f"memory-bound: {below}; {figures}; memory leads"
    if tier == "compute-bound":
        return f"compute-bound: {below}; {figures}; compute leads"
    return "unknown: no Speed-of-Light metrics (ncu did not run)"


def _sol_evidence(sol: SpeedOfLight, peaks: DevicePeaks | None) -> str:
    if sol.ideal_bytes:
        minimum = (f"minimum {bytes_text(sol.ideal_bytes)} (reads {bytes_text(sol.ideal_read_bytes)}, writes "
                   f"{bytes_text(sol.ideal_write_bytes)}, each tensor once; from {sol.ideal_source})")
    else:
        minimum = "minimum bytes unknown"
    if sol.sol_pct is None:
        text = f"speed of light {sol.unknown_reason or 'unknown'}; {minimum}"
    else:
        where = f", {peaks.gpu}" if peaks is not None else ""
        text = (f"speed of light {sol.sol_pct:.1f}%: {minimum} in {sol.duration_ms:.4f} ms ({sol.duration_source}) "
                f"at the measured copy peak {(sol.copy_bytes_per_s or 0) / 1e9:,.0f} GB/s{where}")
    if sol.traffic_ratio is not None:
        text += (f"; DRAM moved {bytes_text(sol.dram_bytes)} (read {bytes_text(sol.dram_read_bytes)}, write "
                 f"{bytes_text(sol.dram_write_bytes)}) = {sol.traffic_ratio:.2f}x the minimum")
    elif sol.traffic_unknown_reason:
        text += f"; traffic ratio {sol.traffic_unknown_reason}"
    return text


def _arguments(launch_args: Any) -> list[LaunchArg] | None:
    if launch_args is None:
        return None
    args = getattr(launch_args, "args", launch_args)  # a LaunchTraffic, or its argument list
    return [a if isinstance(a, LaunchArg) else LaunchArg.from_json(a) for a in args]


def analyze_kernel(metrics: KernelMetrics | None, timing: TimingStats | None = None,
                   peaks: DevicePeaks | None = None, kernel: TritonKernel | None = None,
                   flops: float | None = None, *, launch_args: Any = None, duration_ms: float | None = None,
                   duration_source: str | None = None, cpu: bool | None = None,
                   ideal_source: str | None = None) -> KernelAnalysis:
    """Tier, speed of light, causes, evidence, directions and top ncu rules for one kernel.

    ``launch_args`` (a :class:`~kernelopt_core.measure.traffic.LaunchTraffic` or a list of
    :class:`~kernelopt_core.measure.traffic.LaunchArg`, roles set) gives the ideal bytes and the
    sizes. The kernel time is ncu's duration, else ``duration_ms`` (its ``duration_source`` says
    which timer), else ``timing``'s median. ``flops`` (the kernel's floating-point operations per
    launch), when the caller knows it, gives achieved FLOP/s against the measured matmul peak.
    ``cpu`` (default: the kernel's own device) makes the speed of light unknown, with the reason.
    """
    name = (metrics.name if metrics else None) or (kernel.name if kernel else "") or "kernel"
    args = _arguments(launch_args)
    on_cpu = cpu if cpu is not None else bool(kernel is not None and kernel.device_str == "cpu")
    duration, source = _duration(metrics, timing, duration_ms, duration_source)
    ideal = launch_ideal_bytes(args, ideal_source or getattr(launch_args, "source", None)
                               or "captured launch arguments") if args else None
    sol = speed_of_light(
        ideal if ideal is not None and ideal.total > 0 else None, duration_ms=duration, duration_source=source,
        copy_bytes_per_s=peaks.copy_bytes_per_s if peaks is not None else None,
        dram_read_bytes=metrics.dram_read_bytes if metrics else None,
        dram_write_bytes=metrics.dram_write_bytes if metrics else None, cpu=on_cpu)
    analysis = KernelAnalysis(kernel=name, tier="unknown", sol=sol)
    analysis.paper_tier = classify(metrics.memory_pct if metrics else None, metrics.compute_pct if metrics else None)
    achieved_lines = _achieved(analysis, metrics, peaks, duration, flops)
    analysis.tier = classify_sol(sol.sol_pct, metrics.memory_pct if metrics else None,
                                 metrics.compute_pct if metrics else None,
                                 analysis.achieved.get("matmul_peak_fraction"))
    analysis.access = access_facts(kernel.source, kernel.name) if kernel is not None else None
    analysis.facts = _facts(metrics, peaks, kernel, args, analysis.access)
    analysis.evidence.append(_sol_evidence(sol, peaks))
    analysis.evidence.append(_tier_evidence(analysis.tier, metrics, sol))
    analysis.evidence.append(_paper_evidence(analysis.paper_tier, metrics))
    if analysis.tier != "near-optimal":
        analysis.causes = _causes(analysis, metrics, kernel, args)
        analysis.evidence += [f"cause {c.id} ({c.source}): {c.text}" for c in analysis.causes]
    if metrics is not None:
        analysis.top_rules = metrics.top_rules(3)
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
    analysis.evidence += achieved_lines
    if metrics is not None:
        _occupancy_evidence(analysis, metrics)
        for rule in analysis.top_rules:
            gain = f"est. {rule.est_speedup_pct:.1f}% speedup" if rule.est_speedup_pct is not None else "no estimate"
            analysis.evidence.append(f"ncu rule {rule.name} [{rule.type}] ({gain}): {_first_sentence(rule.description)}")
    analysis.directions = _directions(analysis, metrics, kernel)
    return analysis


def _duration(metrics: KernelMetrics | None, timing: TimingStats | None, duration_ms: float | None,
              duration_source: str | None) -> tuple[float | None, str | None]:
    if metrics is not None and metrics.duration_ns:
        return metrics.duration_ns / 1e6, "ncu"
    if duration_ms:
        return duration_ms, duration_source or "timed"
    if timing is not None:
        return timing.median_ms, f"timed, {timing.path} path"
    return None, None


def _achieved(analysis: KernelAnalysis, metrics: KernelMetrics | None, peaks: DevicePeaks | None,
              duration_ms: float | None, flops: float | None) -> list[str]:
    """Fills ``analysis.achieved``; returns the evidence lines (they follow the time lines)."""
    lines: list[str] = []
    if peaks is None:
        lines.append("no measured device peaks (CPU backend or not measured): no roofline figures")
    bandwidth = metrics.dram_bytes_per_s if metrics is not None else None
    if bandwidth is not None:
        copy_peak = None if peaks is None else _Peak(
            "copy_peak_fraction", peaks.copy_bytes_per_s,
            f"the measured copy peak ({peaks.copy_bytes_per_s / 1e9:,.0f} GB/s, {peaks.gpu})")
        lines.append(_achieved_rate(analysis, "dram_bytes_per_s", bandwidth,
                                    f"achieved DRAM bandwidth {bandwidth / 1e9:,.0f} GB/s", copy_peak))
    if flops is not None and duration_ms:
        rate = flops / (duration_ms / 1000.0)
        matmul_peak = None if peaks is None else _Peak(
            "matmul_peak_fraction", peaks.matmul_flops_per_s,
            f"the measured bf16 matmul peak ({peaks.matmul_flops_per_s / 1e12:,.0f} TFLOP/s)")
        lines.append(_achieved_rate(analysis, "flops_per_s", rate, f"achieved {rate / 1e12:,.1f} TFLOP/s", matmul_peak))
    return lines


@dataclass(frozen=True)
class _Peak:
    """A measured peak an achieved rate is set against."""

    fraction_key: str  # where ``analysis.achieved`` keeps the share of it reached
    per_s: float  # 0 when not measured
    text: str  # how the evidence line names it


def _achieved_rate(analysis: KernelAnalysis, key: str, rate: float, text: str, peak: _Peak | None) -> str:
    """Records ``rate`` (and the share of a measured peak it reaches); returns its evidence line."""
    analysis.achieved[key] = rate
    if peak is not None and peak.per_s > 0:
        fraction = rate / peak.per_s
        analysis.achieved[peak.fraction_key] = fraction
        text += f" = {fraction:.0%} of {peak.text}"
    return text


def _sm_count(metrics: KernelMetrics | None, peaks: DevicePeaks | None, kernel: TritonKernel | None) -> int | None:
    """The measured SM count, else ncu's, else the one Inductor compiled for (``triton_meta["device"]``)."""
    if peaks is not None and peaks.sm_count:
        return peaks.sm_count
    if metrics is not None and metrics.sm_count:
        return metrics.sm_count
    if kernel is None or kernel.device_str == "cpu":
        return None
    device = kernel.triton_meta.get("device")
    if isinstance(device, dict):
        count = device.get(SM_COUNT_FALLBACK_KEY)
        return count if isinstance(count, int) else None
    found = re.search(rf"{SM_COUNT_FALLBACK_KEY}=(\d+)", str(device or ""))  # DeviceProperties(...) as text
    return int(found.group(1)) if found else None


def _facts(metrics: KernelMetrics | None, peaks: DevicePeaks | None, kernel: TritonKernel | None,
           args: list[LaunchArg] | None, access: AccessFacts | None) -> KernelFacts:
    facts = KernelFacts(sm_count=_sm_count(metrics, peaks, kernel),
                        l2_bytes=peaks.l2_bytes if peaks is not None else None)
    numels = numel_args(args or [])
    fixed = _fixed_numels(kernel)
    facts.xnumel = numels.get("xnumel", fixed.get("xnumel"))
    facts.r0_numel = numels.get("r0_numel", numels.get("rnumel", fixed.get("r0_numel", fixed.get("rnumel"))))
    if metrics is not None:
        facts.grid = metrics.grid_size
        facts.waves = metrics.waves_per_sm
    if facts.waves is None and facts.grid and facts.sm_count:
        facts.waves = facts.grid / facts.sm_count
    if access is not None and kernel is not None and kernel.kind in ("red", "per"):
        facts.passes = access.passes
    elif access is not None:
        facts.passes = access.passes if access.loops else 1
    return facts


def _fixed_numels(kernel: TritonKernel | None) -> dict[str, int]:
    """``xnumel = 4096`` style constants Inductor writes into the kernel body."""
    if kernel is None:
        return {}
    return {name: int(value) for name, value in
            re.findall(r"^\s*(xnumel|r0_numel|rnumel)\s*=\s*(\d+)\s*$", kernel.source, re.MULTILINE)}


def _itemsize(args: list[LaunchArg] | None, pointer: str) -> int | None:
    for arg in args or []:
        if arg.name == pointer and arg.dtype:
            return DTYPE_BYTES.get(arg.dtype)
    return None


def _causes(analysis: KernelAnalysis, m: KernelMetrics | None, kernel: TritonKernel | None,
            args: list[LaunchArg] | None) -> list[Cause]:
    sol, facts, access = analysis.sol, analysis.facts, analysis.access
    causes: list[Cause] = []
    passes = facts.passes or 1
    rereads = access.reread_pointers if access is not None else []
    pass_text = f"{passes} passes over {', '.join(rereads)} in the source (for r0_offset loops)" if rereads else ""
    ratio = sol.traffic_ratio
    if ratio is not None and ratio >= REREAD_RATIO:
        text = (f"DRAM traffic {ratio:.2f}x the minimum ({bytes_text(sol.dram_bytes)} moved, "
                f"{bytes_text(sol.ideal_bytes)} needed)")
        causes.append(Cause("re-reads", text + (f"; {pass_text}" if pass_text else ""),
                            "measured" + (" + kernel source" if pass_text else ""),
                            {"traffic_ratio": ratio, "passes": passes, "pointers": rereads}))
    elif ratio is None and rereads and analysis.tier != "compute-bound":
        causes.append(Cause("re-reads", f"{pass_text}; no DRAM counters say whether L2 serves the second pass",
                            "kernel source", {"passes": passes, "pointers": rereads}))
    low = _low_parallelism(facts, kernel)
    if low is not None:
        causes.append(low)
    strided = _strided_access(m, access)
    if strided is not None and (strided.source != "kernel source" or analysis.tier != "compute-bound"):
        causes.append(strided)
    thrash = _l2_thrash(m, sol, facts, rereads, args)
    if thrash is not None and (thrash.source != "kernel source" or analysis.tier != "compute-bound"):
        causes.append(thrash)
    return causes


def _low_parallelism(facts: KernelFacts, kernel: TritonKernel | None) -> Cause | None:
    sms = facts.sm_count
    if not sms:
        return None
    if facts.grid is not None and facts.grid < sms:
        return Cause("low-parallelism", f"{facts.grid:,} programs for {sms} SMs: fewer than one wave "
                                        f"({facts.waves or facts.grid / sms:.2f} waves per SM)", "measured",
                     {"grid": facts.grid, "sm_count": sms, "waves": facts.waves})
    if facts.waves is not None and facts.waves < 1.0:
        return Cause("low-parallelism", f"{facts.waves:.2f} waves per SM: the SMs are not all busy", "measured",
                     {"grid": facts.grid, "sm_count": sms, "waves": facts.waves})
    rows, length = facts.xnumel, facts.r0_numel
    if (facts.grid is None and kernel is not None and kernel.kind in ("red", "per") and rows is not None
            and rows < sms):
        return Cause("low-parallelism", f"{rows:,} rows of {length or '?':,} elements for {sms} SMs: a reduction "
                                        "gives each row to one program, so at most "
                                        f"{rows} of {sms} SMs work", "kernel source",
                     {"rows": rows, "row_length": length, "sm_count": sms})
    return None


def _strided_access(m: KernelMetrics | None, access: AccessFacts | None) -> Cause | None:
    efficiency = m.sector_efficiency_pct if m is not None else None
    windows = access.windows if access is not None else {}
    strided = access.strided_loads if access is not None else []
    shapes = []
    if windows:
        shapes.append("; ".join(f"{count} loads of {pointer} at different offsets (a pooling window or stencil, "
                                "one scalar load per tap)" for pointer, count in sorted(windows.items())))
    if strided:
        shown = ", ".join(f"`{s}`" for s in strided[:2]) + (f" and {len(strided) - 2} more" if len(strided) > 2 else "")
        shapes.append(f"loads moving with a stride > 1 along every dimension: {shown}")
    source_text = "; ".join(shapes)
    if efficiency is not None:
        if efficiency >= LOW_SECTOR_EFFICIENCY_PCT:
            return None  # measured coalescing is fine, whatever the source suggests
        text = f"global-load sector efficiency {efficiency:.1f}% (useful bytes of each 32-byte sector)"
        return Cause("strided-access", text + (f"; {source_text}" if source_text else ""),
                     "measured" + (" + kernel source" if source_text else ""),
                     {"sector_efficiency_pct": efficiency, "windows": dict(windows), "strided_loads": strided})
    if source_text:
        return Cause("strided-access", source_text, "kernel source",
                     {"windows": dict(windows), "strided_loads": strided})
    return None


def _l2_thrash(m: KernelMetrics | None, sol: SpeedOfLight, facts: KernelFacts, rereads: list[str],
               args: list[LaunchArg] | None) -> Cause | None:
    hit = m.l2_hit_pct if m is not None else None
    working_set = None
    if rereads and facts.r0_numel and facts.sm_count:
        itemsize = _itemsize(args, rereads[0]) or 4
        rows_in_flight = min(facts.xnumel or facts.sm_count, facts.sm_count)
        working_set = rows_in_flight * facts.r0_numel * itemsize
    numbers = {"l2_hit_pct": hit, "traffic_ratio": sol.traffic_ratio, "working_set_bytes": working_set,
               "l2_bytes": facts.l2_bytes}
    size_text = ""  # said only when the sizes alone predict the eviction
    if working_set is not None and facts.l2_bytes and working_set > facts.l2_bytes:
        size_text = (f"the rows re-read while at least {min(facts.xnumel or facts.sm_count or 0, facts.sm_count or 0)} "
                     f"are in flight span {bytes_text(working_set)}, more than the {bytes_text(facts.l2_bytes)} L2")
    ratio = sol.traffic_ratio
    if ratio is not None and ratio >= REREAD_RATIO and hit is not None and hit < LOW_L2_HIT_PCT:
        text = f"L2 hit rate {hit:.1f}% while {ratio:.2f}x the minimum bytes reach DRAM: re-read data is evicted first"
        return Cause("l2-thrash", text + (f"; {size_text}" if size_text else ""), "measured", numbers)
    if ratio is None and size_text:
        return Cause("l2-thrash", f"predicted from sizes: {size_text}, so the second pass reads DRAM again",
                     "kernel source", numbers)
    return None


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


_CAUSE_DIRECTIONS: dict[str, tuple[str, str]] = {
    "re-reads": ("fuse-rereads", "read each input once: keep the row on chip (a persistent reduction, more warps), "
                                 "or order the programs so the second pass finds its row in L2"),
    "low-parallelism": ("more-programs", "more programs than SMs: split each long row across programs (partials "
                                         "in a scratch buffer, then a finalize), or smaller blocks"),
    "strided-access": ("coalesce-access", "contiguous, vectorised loads: tile the transposed dimension, load a "
                                          "window's rows once and reuse overlapping taps"),
    "l2-thrash": ("l2-friendly-order", "keep re-read data in L2: group programs so rows in flight fit the L2 "
                                       "(sized from the measured L2), evict_first on streamed data"),
}


def _directions(analysis: KernelAnalysis, m: KernelMetrics | None, kernel: TritonKernel | None) -> list[Direction]:
    tier = analysis.tier
    if tier == "near-optimal":
        return []
    caused = [Direction(name, rationale, cause.text) for cause in analysis.causes
              for name, rationale in [_CAUSE_DIRECTIONS[cause.id]]]
    if m is None:
        return _merged(caused, _static_directions(kernel))
    tiered = _tier_directions(tier, m, kernel, analysis.achieved)
    if tier == "compute-bound":
        # instructions, not bytes, set the time: the tier's directions lead (problem 92's apply kernel, 81%
        # compute, tried coalescing first and found fast math third)
        return _merged(tiered, caused)
    return _merged(caused, tiered)


def _merged(*groups: Iterable[Direction]) -> list[Direction]:
    """The groups' directions in order, each name once (its first)."""
    out: dict[str, Direction] = {}
    for group in groups:
        for direction in group:
            out.setdefault(direction.name, direction)
    return list(out.values())


def _tier_directions(tier: Tier, m: KernelMetrics, kernel: TritonKernel | None,
                     achieved: dict[str, float]) -> list[Direction]:
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


# --- the evidence rewrite families read ---------------------------------------------------------

EVIDENCE_KEYS: tuple[str, ...] = (
    "ideal_bytes", "dram_bytes", "traffic_ratio", "sol_pct", "duration_ms", "copy_bytes_per_s", "l2_bytes",
    "sm_count", "grid", "waves", "passes", "xnumel", "r0_numel", "causes", "launch_args",
)


def rewrite_evidence(analysis: KernelAnalysis | None, launch_args: Any = None) -> dict[str, Any]:
    """``RewriteContext.evidence``: exactly :data:`EVIDENCE_KEYS`, any of them None when unknown."""
    evidence: dict[str, Any] = dict.fromkeys(EVIDENCE_KEYS)
    args = _arguments(launch_args)
    if args:
        evidence["launch_args"] = [a.evidence_json() for a in args if a.is_tensor]
    if analysis is None:
        return evidence
    sol, facts = analysis.sol, analysis.facts
    evidence.update(
        ideal_bytes=sol.ideal_bytes, dram_bytes=sol.dram_bytes, traffic_ratio=sol.traffic_ratio,
        sol_pct=sol.sol_pct, duration_ms=sol.duration_ms, copy_bytes_per_s=sol.copy_bytes_per_s,
        l2_bytes=facts.l2_bytes, sm_count=facts.sm_count, grid=facts.grid, waves=facts.waves,
        passes=facts.passes, xnumel=facts.xnumel, r0_numel=facts.r0_numel, causes=analysis.cause_ids,
    )
    return evidence
