"""The rewrites' cost model: what a rewritten reduction may hold on chip, and the traffic and speed of
light its plan targets.

* The register limit comes from the compiled kernel (``RewriteContext.compile_probe``: registers,
  spill bytes and shared memory of the candidate compiled for sm_90), never from a guess about row
  lengths; without a probe (CPU runs, tests) a conservative elements-per-thread bound stands in.
* Occupancy (programs resident at once) follows from registers, warps and shared memory, with the
  sm_90 limits.
* Each plan states the bytes it must move (its traffic model) against the ideal bytes (every input
  read once, every output written once) and the speed of light it expects: the traffic bound times
  the share of that bound the family declares (``traffic_efficiency``, from the measurements in
  benchmarks/explore/README.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .base import RewriteContext
from .declaration import FamilyDeclaration
from .kernel_source import KernelSourceError
from .reduction_passes import ReductionKernel

T = TypeVar("T")

# sm_90 (H100/H200) per-multiprocessor limits.
REGS_PER_SM = 65536
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32
SHARED_PER_SM = 233472
SHARED_PER_PROGRAM = 232448  # sm_90's opt-in limit for one block: more and the launch fails "out of resource"
REG_ALLOCATION_UNIT = 256  # registers are allocated per warp in units of 256

# Without a compile probe: at most this many row elements per thread held in registers; 32 ran
# without spills where measured, 64 spilled (docs/design-notes.md, "Measurements").
MAX_ELEMENTS_PER_THREAD = 32
# The longest row one program reads once (32 warps x 32 threads x 32 elements).
SINGLE_READ_MAX_ROW = 32 * 32 * MAX_ELEMENTS_PER_THREAD



@dataclass(frozen=True)
class Probe:
    """The compiled candidate's resources (``compile_probe``'s answer)."""

    regs: int | None
    spills: int | None
    shared_bytes: int | None

    @staticmethod
    def of(answer: dict[str, Any] | None) -> Probe | None:
        if not isinstance(answer, dict):
            return None

        def number(key: str) -> int | None:
            value = answer.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        return Probe(number("regs"), number("spills"), number("shared_bytes"))

    @property
    def spills_registers(self) -> bool:
        return bool(self.spills)

    @property
    def does_not_fit(self) -> bool:
        """Spills registers, or needs more shared memory than one program may have (the launch would fail,
        as seen on a GPU: docs/design-notes.md, "Measurements")."""
        return self.spills_registers or (self.shared_bytes or 0) > SHARED_PER_PROGRAM


def probe(ctx: RewriteContext, source: str) -> Probe | None:
    """The compiled resources of ``source`` when the context can compile (a GPU target), else None.

    A probe that fails or raises says nothing (None): the caller falls back to its bound.
    """
    return probe_all(ctx, [source])[0]


def probe_all(ctx: RewriteContext, sources: Sequence[str | None]) -> list[Probe | None]:
    """:func:`probe` of each source, compiled together (concurrently where the context can); None for
    a None source."""
    if ctx.on_cpu or (ctx.compile_probe is None and ctx.compile_probes is None):
        return [None] * len(sources)
    wanted = [s for s in sources if s is not None]
    answers: list[Any]
    if ctx.compile_probes is not None and wanted:
        try:
            answers = list(ctx.compile_probes(wanted))
        except Exception:  # noqa: BLE001 - a failed probe is no evidence either way
            answers = [None] * len(wanted)
    else:
        answers = [_answer(ctx.compile_probe, s) for s in wanted]
    found = iter(answers + [None] * (len(wanted) - len(answers)))
    return [Probe.of(next(found)) if s is not None else None for s in sources]


def _answer(compile_probe: Callable[[str], dict[str, Any] | None] | None, source: str) -> Any:
    if compile_probe is None:
        return None
    try:
        return compile_probe(source)
    except Exception:  # noqa: BLE001 - a failed probe is no evidence either way
        return None


def to_probe(ctx: RewriteContext, make: Callable[[], str]) -> str | None:
    """The source ``make`` builds for a probe, when the context will compile it (else None, as when
    the source cannot be built: no probe, no evidence)."""
    if ctx.on_cpu or not ctx.can_probe:
        return None
    try:
        return make()
    except KernelSourceError:
        return None


def probed_in_batches(ctx: RewriteContext, items: Iterable[tuple[T, str | None]],
                      batch: int) -> Iterator[tuple[T, str | None, Probe | None]]:
    """``(item, source, probe)`` in order, probing ``batch`` sources at a time, together.

    A family walks its variants in order of preference and stops when it has enough: the sources
    of the next ``batch`` compile at once, and the ones after them only if the family asks for more.
    """
    pending = iter(items)
    while True:
        chunk = list(itertools.islice(pending, max(1, batch)))
        if not chunk:
            return
        probes = probe_all(ctx, [source for _, source in chunk])
        for (item, source), probed in zip(chunk, probes, strict=True):
            yield item, source, probed


def blocks_per_sm(num_warps: int, regs: int | None = None, shared_bytes: int | None = None) -> int:
    """Programs of one kernel resident on one sm_90 multiprocessor at once (at least 1)."""
    by_threads = THREADS_PER_SM // (num_warps * 32)
    by_regs = by_threads
    if regs:
        per_warp = -(-regs * 32 // REG_ALLOCATION_UNIT) * REG_ALLOCATION_UNIT
        by_regs = (REGS_PER_SM // per_warp) // num_warps
    by_shared = SHARED_PER_SM // (shared_bytes + 1024) if shared_bytes else by_threads
    return max(1, min(by_threads, by_regs, by_shared, BLOCKS_PER_SM))


def sm_count(ctx: RewriteContext) -> int:
    value = ctx.evidence.get("sm_count")
    return int(value) if isinstance(value, int) and value > 0 else ctx.multiprocessors


def elements_per_thread(elements: int, num_warps: int) -> float:
    return elements / (num_warps * 32)


def reread_signal(ctx: RewriteContext, kernel: ReductionKernel) -> str | None:
    """Why the evidence says the kernel reads its rows more than once, or None."""
    causes = ctx.evidence.get("causes") or []
    ratio = ctx.evidence.get("traffic_ratio")
    if "re-reads" in causes:
        return "the analyst found re-reads" + (f" (DRAM traffic {ratio:.2f}x the ideal)" if ratio else "")
    if isinstance(ratio, (int, float)):
        if ratio >= 1.3:
            return f"DRAM traffic {ratio:.2f}x the ideal bytes"
        return None  # measured: the second pass is served from L2 (or there is none)
    pointers = kernel.reread_pointers()
    if pointers:
        return f"{len(kernel.passes)} passes load {', '.join(pointers)} (kernel source; no DRAM counters)"
    return None


def low_parallelism_signal(ctx: RewriteContext, rows: int) -> str | None:
    causes = ctx.evidence.get("causes") or []
    sms = sm_count(ctx)
    if "low-parallelism" in causes:
        return "the analyst found low parallelism"
    if rows < sms:
        return f"{rows} rows for {sms} SMs"
    return None


def near_speed_of_light(ctx: RewriteContext, limit: float = 95.0) -> str | None:
    sol = ctx.evidence.get("sol_pct")
    if isinstance(sol, (int, float)) and sol >= limit:
        return f"already at {sol:.0f}% of the speed of light"
    return None


def pointer_bytes(ctx: RewriteContext, pointer: str) -> int | None:
    for arg in ctx.evidence.get("launch_args") or []:
        if isinstance(arg, dict) and arg.get("name") == pointer and isinstance(arg.get("storage_bytes"), int):
            return int(arg["storage_bytes"])
    return None


def ideal_bytes(ctx: RewriteContext) -> int | None:
    value = ctx.evidence.get("ideal_bytes")
    if isinstance(value, (int, float)) and value > 0:
        return int(value)
    args = [a for a in ctx.evidence.get("launch_args") or [] if isinstance(a, dict)]
    sizes = [s for s in (a.get("storage_bytes") for a in args) if isinstance(s, int)]
    if args and len(sizes) == len(args):
        return int(sum(sizes))
    return None


def traffic_plan(ctx: RewriteContext, declaration: FamilyDeclaration, extra_reads: list[str]) -> dict[str, Any]:
    """The variant's traffic model: ideal bytes, bytes it moves (ideal plus ``extra_reads``, each a
    pointer read once more), the expected speed of light (the family's declared traffic efficiency
    of that bound) and the evidence it starts from."""
    efficiency = declaration.traffic_efficiency
    if efficiency is None:
        raise ValueError("a traffic plan needs a family declared with a traffic efficiency")
    ideal = ideal_bytes(ctx)
    planned: int | None = ideal
    if ideal is not None:
        for pointer in extra_reads:
            size = pointer_bytes(ctx, pointer)
            planned = None if size is None or planned is None else planned + size
    expected = (round(100.0 * efficiency * ideal / planned, 1)
                if ideal and planned else None)
    return {"ideal_bytes": ideal, "planned_bytes": planned, "expected_sol_pct": expected,
            "sol_pct_before": ctx.evidence.get("sol_pct"), "traffic_ratio_before": ctx.evidence.get("traffic_ratio")}


def plan_text(plan: dict[str, Any]) -> str:
    ideal, planned, expected = plan["ideal_bytes"], plan["planned_bytes"], plan["expected_sol_pct"]
    if ideal is None:
        return "ideal bytes unknown (no launch arguments captured)"
    parts = [f"targets {ideal:,} ideal bytes"]
    if planned is not None and planned != ideal:
        parts.append(f"moves {planned:,} ({planned / ideal:.2f}x)")
    if expected is not None:
        parts.append(f"expected ~{expected:.0f}% of the speed of light")
    before = plan.get("sol_pct_before")
    if isinstance(before, (int, float)):
        parts.append(f"now {before:.0f}%")
    return ", ".join(parts)
