"""One kernel's facts in words: the lines diagnostics, hovers and code lenses show.

Everything here is pure: a graph, its static dispatch report and the remembered results in,
strings out. A result made on an older version of the kernel source is flagged stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel
from kernelopt_core.dispatch import DispatchReport
from kernelopt_core.measure.traffic import sol_phrase

from .results import GateRecord, ProfileRecord, ResultStore, RunRecord

STALE_SUFFIX = " (stale: kernel changed since this run)"
KIND_WORDS = {
    "poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template", "other": "kernel",
}
GATE_NAMES = {1: "static", 2: "kernel", 3: "model", 4: "perf"}


@dataclass
class KernelView:
    """A kernel with what is known about it, as seen in the current text of its dump."""

    graph: CompiledGraph
    kernel: TritonKernel
    dispatch: DispatchReport
    profile: ProfileRecord | None = None
    profile_stale: bool = False
    gate_records: list[tuple[GateRecord, bool]] = field(default_factory=list)  # (record, stale)
    run: RunRecord | None = None

    @property
    def launches(self) -> int:
        return len(self.graph.launches_of(self.kernel.name))

    @property
    def launch_share(self) -> float:
        return self.dispatch.share_of(self.kernel.name)

    @property
    def time_share(self) -> float | None:
        if self.profile is not None and not self.profile_stale:
            return self.profile.time_share
        return None


def kernel_view(graph: CompiledGraph, kernel: TritonKernel, dispatch: DispatchReport,
                store: ResultStore) -> KernelView:
    current = kernel.source_hash
    profile = store.profile(graph.path, kernel.name)
    records = [(r, is_stale(r, current)) for r in store.gate_records(graph.path, kernel.name)]
    return KernelView(
        graph=graph, kernel=kernel, dispatch=dispatch, profile=profile,
        profile_stale=profile is not None and profile.source_hash != current,
        gate_records=records, run=store.last_run(graph.path, kernel.name),
    )


def is_stale(record: GateRecord, current_hash: str) -> bool:
    if record.source_hash == current_hash:
        return False
    # An applied optimization is not stale: the kernel is now the accepted one.
    return not (record.optimized_hash is not None and record.optimized_hash == current_hash)


def is_applied(record: GateRecord, current_hash: str) -> bool:
    return record.optimized_hash is not None and record.optimized_hash == current_hash


# --- words ----------------------------------------------------------------------------------------


def kind_words(kernel: TritonKernel) -> str:
    return KIND_WORDS.get(kernel.kind, kernel.kind)


def fused_ops(kernel: TritonKernel) -> list[str]:
    return [op.removeprefix("aten.") for op in kernel.aten_ops]


def percent(value: float | None) -> str:
    """A metric already in percent (ncu style: 62.3 -> '62%')."""
    return "-" if value is None else f"{value:.0f}%"


def duration_text(ns: float) -> str:
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def share_text(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def speedup_text(speedup: float | None, ci: tuple[float, float] | None) -> str:
    if speedup is None:
        return "no speedup measured"
    text = f"{speedup:.2f}×"
    if ci is not None:
        text += f" (95% CI {ci[0]:.2f}–{ci[1]:.2f}×)"
    return text


def sol_text(profile: ProfileRecord) -> str:
    """``65% of speed of light · reads 1.5× the minimum`` from a profile row ("" when unknown)."""
    return sol_phrase(profile.number("sol_pct"), profile.number("traffic_ratio"), profile.number("dram_read_bytes"),
                      profile.number("dram_write_bytes"), profile.number("ideal_read_bytes"),
                      profile.number("ideal_write_bytes"))


def profile_line(profile: ProfileRecord) -> str:
    """e.g. ``memory-bound · 65% of speed of light · reads 1.5× the minimum · DRAM 62% of peak ·
    occupancy 48% · 31% of graph time``."""
    timed_only = profile.metrics.get("source") == "timing"
    parts = ["timed, no ncu metrics" if timed_only else (profile.tier or "profiled")]
    sol = sol_text(profile)
    if sol:
        parts.append(sol)
    dram = profile.number("dram_pct")
    sm = profile.number("sm_pct")
    occupancy = profile.number("occupancy_pct")
    if dram is not None:
        parts.append(f"DRAM {percent(dram)} of peak")
    if sm is not None and (dram is None or profile.tier in ("compute-bound", "underutilized")):
        parts.append(f"SM {percent(sm)}")
    if occupancy is not None:
        parts.append(f"occupancy {percent(occupancy)}")
    duration = profile.number("duration_ns")
    if dram is None and sm is None and duration is not None:
        parts.append(f"{duration_text(duration)} per call")
    share = profile.time_share
    if profile.share_over_whole:  # within noise of the whole call: the figure would flip between runs
        parts.append(f"~100% {profile.share_words}")
    elif share is not None:
        parts.append(f"{share_text(share)} {profile.share_words}")
    return " · ".join(parts)


def static_line(view: KernelView) -> str:
    """What the dump alone says: kind, fused ops and the launch share (not a time share)."""
    parts = [kind_words(view.kernel)]
    ops = fused_ops(view.kernel)
    if ops:
        shown = ", ".join(ops[:6]) + (f" +{len(ops) - 6}" if len(ops) > 6 else "")
        parts.append(f"fuses {shown}")
    total = len(view.graph.timeline())
    if view.launches:
        parts.append(f"{view.launches} of {total} launches ({share_text(view.launch_share)}); not profiled")
    else:
        parts.append("never launched by call()")
    return " · ".join(parts)


def gate_line(record: GateRecord, *, applied: bool = False) -> str:
    speed = speedup_text(record.speedup, record.ci) if record.speedup is not None else ""
    if record.kind == "verify":
        if record.accepted:
            return "verify: all gates passed" + (f" · {speed}" if speed else "")
        return f"verify: {_rejection(record)}"
    run = f"optimize run {record.run_id}" if record.run_id else "optimize"
    if applied:
        return f"{run}: optimized kernel applied ({speed})" if speed else f"{run}: optimized kernel applied"
    if record.decision == "optimized":
        return f"{run}: optimized {speed} · review with Show diff, then Apply optimized kernel"
    if record.decision == "matched":
        return f"{run}: matched (kept the compiler's kernel): {record.reason or 'no candidate was faster'}"
    if record.failed_gate is not None:
        return f"{run}: fallback, {_rejection(record)}"
    return f"{run}: fallback: {record.reason or 'no candidate passed the gates'}"


def _rejection(record: GateRecord) -> str:
    if record.failed_gate is None:
        return f"not accepted: {record.reason or 'no reason given'}"
    if record.reason.lower().startswith(f"gate {record.failed_gate}"):
        return record.reason  # the gates' own words already say which gate and why
    name = GATE_NAMES.get(record.failed_gate, "")
    for gate in record.gates:
        if gate.get("gate") == record.failed_gate and isinstance(gate.get("name"), str):
            name = gate["name"]
        if gate.get("gate") == record.failed_gate and not record.reason and gate.get("reason"):
            return f"rejected at gate {record.failed_gate} ({name}): {gate['reason']}"
    return f"rejected at gate {record.failed_gate} ({name}): {record.reason or 'no reason given'}"


def lens_summary(view: KernelView) -> str:
    """The code lens title before the commands:
    ``12.3% of graph · memory-bound · 65% of speed of light · reads 1.5× the minimum``."""
    if view.profile is not None:
        parts = []
        share = view.profile.time_share
        if share is not None:
            basis = "graph" if view.profile.share_basis == "graph" else view.profile.share_basis
            parts.append(f"{share_text(share)} of {basis}")
        parts.append(view.profile.tier or "profiled")
        sol = sol_text(view.profile)
        if sol:
            parts.append(sol)
        text = " · ".join(parts)
        return text + " (stale)" if view.profile_stale else text
    if view.launches:
        return f"{view.launches}/{len(view.graph.timeline())} launches · {kind_words(view.kernel)} · not profiled"
    return f"{kind_words(view.kernel)} · not launched"
