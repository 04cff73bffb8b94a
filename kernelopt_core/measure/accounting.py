"""Whole-callable accounting: where the time of a ``torch.compile`` callable goes beyond its kernels.

The callable's median time ``T`` is split into kernel time ``K`` (the graph's kernels and vendor
calls), the ``CUDA-graph input copy`` ``X``, ``launch gaps`` ``G`` (idle time between the first and
last launch) and ``guard + wrapper`` ``W`` (the rest). A graph's overhead *dominates* when
``(X + G + W) / T >= OVERHEAD_DOMINATES_SHARE`` (30%).

This module holds the data and the arithmetic only (no torch); the measured parts come from
:mod:`kernelopt_core.measure.accounting_run` (in a worker). Every timing carries its
:class:`~kernelopt_core.measure.paths.TimingPath`: :func:`speedup_between` refuses to compare
different paths, except user-facing callables compared *across configurations*.
docs/accounting.md has the rest.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dispatch import OverheadItem
from .paths import CrossPathComparison, TimingPath, require_same_path
from .statistics import TimingStats

OVERHEAD_DOMINATES_SHARE = 0.30

COPY_ITEM = "CUDA-graph input copy"
GAPS_ITEM = "launch gaps"
GUARD_ITEM = "guard + wrapper"
OVERHEAD_ITEMS = (COPY_ITEM, GAPS_ITEM, GUARD_ITEM)

# The callables a user can call; a config comparison may cross between these and only these.
USER_FACING_PATHS = frozenset({TimingPath.EAGER, TimingPath.COMPILED_CALLABLE,
                               TimingPath.COMPILED_CALLABLE_CUDAGRAPHS})

SUGGEST_COPY = (
    "inputs are copied into the CUDA graph's buffers on every call: mark them static with "
    "torch._dynamo.mark_static_address(x) (or keep them in persistent buffers that you refill in "
    "place), or compile with mode='max-autotune-no-cudagraphs'"
)
SUGGEST_GAPS_NO_GRAPHS = (
    "the GPU idles between launches while the host issues the next one: the graph is launch-bound; "
    "use CUDA graphs (mode='max-autotune' or 'reduce-overhead') so one replay launches every kernel"
)
SUGGEST_GAPS_GRAPHS = (
    "gaps remain inside the CUDA-graph replay (tiny kernels back to back); fewer, larger kernels "
    "help more than configuration here"
)
SUGGEST_GUARD = (
    "host time outside the kernels (dynamo guards, wrappers, output allocation): batch more work "
    "per call, avoid recompiles (torch._dynamo.config / mark_dynamic), or capture the whole step in "
    "one compiled region; with no CUDA graphs, mode='max-autotune' replays the graph in one launch"
)


def mode_uses_cudagraphs(mode: str | None) -> bool:
    """Whether ``torch.compile(mode=...)`` turns cudagraph trees on (on a GPU)."""
    return mode in ("max-autotune", "reduce-overhead")


def callable_path(mode: str | None, device: str) -> TimingPath:
    """The path a full ``torch.compile`` callable with ``mode`` is timed through on ``device``."""
    if mode == "eager":
        return TimingPath.EAGER
    if device.startswith("cuda") and mode_uses_cudagraphs(mode):
        return TimingPath.COMPILED_CALLABLE_CUDAGRAPHS
    return TimingPath.COMPILED_CALLABLE


def format_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def describe_overhead(item: OverheadItem) -> str:
    """One line for reports and diagnostics, e.g. ``CUDA-graph input copy: 54% of graph time (6.4 GB per call)``."""
    text = f"{item.name}: {item.share:.0%} of graph time ({item.time_ms:.3f} ms"
    if item.bytes_per_call:
        text += f", {format_bytes(item.bytes_per_call)} per call"
    return text + ")"


# --- the split ---------------------------------------------------------------------------------


@dataclass
class MeasuredParts:
    """What was measured about one callable, all in ms, medians over traced calls."""

    callable_ms: float  # T: the callable's median through its path (untraced timing)
    kernel_ms: float  # K: busy time of the graph's own kernels and vendor calls
    gaps_ms: float  # G: idle time between the first and last launch
    copy_ms: float = 0.0  # X: CUDA-graph input copies
    copy_bytes: int = 0
    guard_ms: float | None = None  # W measured directly (CPU); None: the residual T - K - G - X
    launches: int = 0
    cudagraphs: bool = False


def split_overheads(parts: MeasuredParts) -> tuple[list[OverheadItem], list[str]]:
    """The named overhead items of a callable and notes on the arithmetic.

    Shares are of the callable's time ``T``. The guard + wrapper time is the residual
    ``T - K - G - X`` unless it was measured directly; a negative residual is noise and clamps to 0.
    """
    notes: list[str] = []
    total = parts.callable_ms
    if not math.isfinite(total) or total <= 0:
        raise ValueError(f"the callable's time must be positive, got {total!r}")
    for name, value in (("kernel", parts.kernel_ms), ("gaps", parts.gaps_ms), ("copy", parts.copy_ms)):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"{name} time must be a non-negative number, got {value!r}")
    if parts.guard_ms is not None:
        guard = max(0.0, parts.guard_ms)
    else:
        residual = total - parts.kernel_ms - parts.gaps_ms - parts.copy_ms
        if residual < 0:
            notes.append(f"kernels + gaps + copies ({total - residual:.4f} ms) exceed the callable's median "
                         f"({total:.4f} ms) by {-residual:.4f} ms (timing noise); guard + wrapper set to 0")
        guard = max(0.0, residual)
    items: list[OverheadItem] = []
    if parts.cudagraphs:
        items.append(OverheadItem(
            name=COPY_ITEM, time_ms=parts.copy_ms, share=parts.copy_ms / total,
            detail=f"{format_bytes(parts.copy_bytes)} of non-static inputs copied per call",
            suggestion=SUGGEST_COPY if parts.copy_bytes else "", bytes_per_call=parts.copy_bytes,
        ))
    launch_word = "launch" if parts.launches == 1 else "launches"
    items.append(OverheadItem(
        name=GAPS_ITEM, time_ms=parts.gaps_ms, share=parts.gaps_ms / total,
        detail=f"idle between {parts.launches} {launch_word}",
        suggestion=(SUGGEST_GAPS_GRAPHS if parts.cudagraphs else SUGGEST_GAPS_NO_GRAPHS)
        if parts.gaps_ms / total >= 0.10 else "",
    ))
    items.append(OverheadItem(
        name=GUARD_ITEM, time_ms=guard, share=guard / total,
        detail="before the first launch and after the last",
        suggestion=SUGGEST_GUARD if guard / total >= 0.10 else "",
    ))
    return items, notes


def overhead_share(items: Iterable[OverheadItem]) -> float:
    """The callable's time outside kernels, as a share (items' shares are of the callable's time)."""
    return sum(item.share for item in items)


def overhead_dominates(items: Iterable[OverheadItem], threshold: float = OVERHEAD_DOMINATES_SHARE) -> bool:
    """The documented rule: overheads take at least ``threshold`` (30%) of the callable's time."""
    return overhead_share(items) >= threshold


# --- like-for-like comparisons -----------------------------------------------------------------


@dataclass
class Comparison:
    """A speedup of a candidate over a baseline with the path each was timed through."""

    speedup: float  # baseline median / candidate median; > 1: the candidate is faster
    ci_low: float
    ci_high: float
    baseline_path: str
    candidate_path: str
    baseline_ms: float
    candidate_ms: float
    across_configurations: bool = False

    def describe(self, baseline_label: str = "baseline", candidate_label: str = "candidate") -> str:
        via = (f"through {self.baseline_path}" if self.baseline_path == self.candidate_path
               else f"{baseline_label} through {self.baseline_path}, {candidate_label} through {self.candidate_path}")
        return (f"{self.speedup:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}] vs {baseline_label} "
                f"({self.baseline_ms:.4f} ms -> {self.candidate_ms:.4f} ms, {via})")

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def speedup_between(baseline: TimingStats, candidate: TimingStats, *, across_configurations: bool = False,
                    confidence: float = 0.95) -> Comparison:
    """The speedup of ``candidate`` over ``baseline``, refusing a comparison across paths.

    With ``across_configurations`` two *user-facing* callables may differ in path (e.g.
    max-autotune vs eager, or a configuration change); a module ``call()`` or a single kernel
    is still never compared with anything but its own path.
    """
    path_a, path_b = TimingPath(baseline.path), TimingPath(candidate.path)
    if across_configurations:
        internal = [p.value for p in (path_a, path_b) if p not in USER_FACING_PATHS]
        if internal:
            raise CrossPathComparison(
                f"refusing a configuration comparison through {', '.join(internal)}: only user-facing "
                f"callables ({', '.join(sorted(p.value for p in USER_FACING_PATHS))}) can be compared "
                "across configurations"
            )
    else:
        require_same_path(path_a, path_b)
    if candidate.median_ms <= 0 or baseline.median_ms <= 0:
        raise ValueError("a speedup needs positive medians on both sides")
    low, high = _ratio_interval(baseline.samples_ms or [baseline.median_ms],
                                candidate.samples_ms or [candidate.median_ms], confidence)
    return Comparison(
        speedup=baseline.median_ms / candidate.median_ms, ci_low=low, ci_high=high,
        baseline_path=path_a.value, candidate_path=path_b.value, baseline_ms=baseline.median_ms,
        candidate_ms=candidate.median_ms, across_configurations=across_configurations and path_a is not path_b,
    )


def _ratio_interval(a: Sequence[float], b: Sequence[float], confidence: float) -> tuple[float, float]:
    """Bootstrap interval of median(a) / median(b) for independent samples (fixed seed)."""
    import numpy as np

    from .statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_arr.size == 1 and b_arr.size == 1:
        ratio = float(a_arr[0] / b_arr[0])
        return ratio, ratio
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    a_med = np.median(a_arr[rng.integers(0, a_arr.size, size=(BOOTSTRAP_RESAMPLES, a_arr.size))], axis=1)
    b_med = np.median(b_arr[rng.integers(0, b_arr.size, size=(BOOTSTRAP_RESAMPLES, b_arr.size))], axis=1)
    ratios = a_med / np.where(b_med > 0, b_med, np.nan)
    ratios = ratios[np.isfinite(ratios)]
    tail = (1.0 - confidence) / 2.0
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1.0 - tail))


# --- the accounting of one callable -------------------------------------------------------------


@dataclass
class PathTiming:
    """One way of calling the problem, timed: eager, a compiled callable, or a module's ``call()``."""

    label: str  # "eager", "max-autotune (full callable)", "module call()", ...
    mode: str | None  # the torch.compile mode; None for eager and module calls
    stats: TimingStats

    @property
    def path(self) -> str:
        return self.stats.path

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "mode": self.mode, "path": self.path,
                **{k: v for k, v in self.stats.to_json().items() if k != "path"}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PathTiming:
        return cls(label=data["label"], mode=data.get("mode"), stats=TimingStats.from_json(data))


@dataclass
class GraphAccounting:
    """One compiled graph of the callable, through its module's ``call()``."""

    path: str  # the output_code.py the module was loaded from
    call: PathTiming
    kernel_ms: float
    gaps_ms: float
    launch_times_ms: dict[int, float] = field(default_factory=dict)  # launch order -> busy time (ms)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "call": self.call.to_json(), "kernel_ms": self.kernel_ms,
                "gaps_ms": self.gaps_ms, "launch_times_ms": {str(k): v for k, v in self.launch_times_ms.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphAccounting:
        return cls(path=data["path"], call=PathTiming.from_json(data["call"]), kernel_ms=data["kernel_ms"],
                   gaps_ms=data["gaps_ms"],
                   launch_times_ms={int(k): float(v) for k, v in (data.get("launch_times_ms") or {}).items()})


@dataclass
class CallableAccounting:
    """The time of a compiled callable as the user calls it, beside its modules' ``call()``."""

    name: str
    device: str
    mode: str  # the mode the user compiled with
    cudagraphs: bool  # CUDA graphs were in use (not skipped) for this callable
    callable: PathTiming
    kernel_ms: float
    overheads: list[OverheadItem]
    graphs: list[GraphAccounting] = field(default_factory=list)
    alternatives: list[PathTiming] = field(default_factory=list)  # eager, the other mode, ...
    copy_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    measurement: dict[str, Any] = field(default_factory=dict)  # how: traced calls, methods, ...

    @property
    def path(self) -> str:
        return self.callable.path

    @property
    def callable_ms(self) -> float:
        return self.callable.stats.median_ms

    @property
    def module_call_ms(self) -> float:
        return sum(g.call.stats.median_ms for g in self.graphs)

    @property
    def overhead_ms(self) -> float:
        return sum(item.time_ms for item in self.overheads)

    @property
    def overhead_share(self) -> float:
        return self.overhead_ms / self.callable_ms if self.callable_ms > 0 else 0.0

    @property
    def overhead_dominates(self) -> bool:
        return self.overhead_share >= OVERHEAD_DOMINATES_SHARE

    def overhead(self, name: str) -> OverheadItem | None:
        return next((item for item in self.overheads if item.name == name), None)

    def timings(self) -> list[PathTiming]:
        return [self.callable, *(g.call for g in self.graphs), *self.alternatives]

    def timing(self, label: str) -> PathTiming | None:
        return next((t for t in self.timings() if t.label == label), None)

    def speedups(self) -> list[tuple[str, str, Comparison]]:
        """The user's callable against eager and against every other configuration, each named.

        These cross configurations on purpose (they are what the user chooses between); each
        comparison names both paths. The module ``call()`` is shown beside, never compared.
        """
        rows = []
        for other in self.alternatives:
            rows.append((other.label, self.callable.label,
                         speedup_between(other.stats, self.callable.stats, across_configurations=True)))
        return rows

    def split_text(self) -> str:
        """``callable 1.2 ms = kernels 1.0 ms + overheads 0.2 ms (17%)``."""
        return (f"callable {self.callable_ms:.4f} ms = kernels {self.kernel_ms:.4f} ms + overheads "
                f"{self.overhead_ms:.4f} ms ({self.overhead_share:.0%})")

    def speedup_lines(self) -> list[str]:
        """One line per comparison of :meth:`speedups`: ``<candidate>: <the comparison>``."""
        return [f"{candidate}: {cmp.describe(baseline, candidate)}" for baseline, candidate, cmp in self.speedups()]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "device": self.device, "mode": self.mode, "cudagraphs": self.cudagraphs,
            "path": self.path, "callable": self.callable.to_json(), "callable_ms": self.callable_ms,
            "module_call_ms": self.module_call_ms, "kernel_ms": self.kernel_ms,
            "overhead_ms": self.overhead_ms, "overhead_share": self.overhead_share,
            "overhead_dominates": self.overhead_dominates, "copy_bytes": self.copy_bytes,
            "overheads": [item.to_json() for item in self.overheads],
            "graphs": [g.to_json() for g in self.graphs],
            "alternatives": [t.to_json() for t in self.alternatives],
            "speedups": [{"baseline": b, "candidate": c, **cmp.to_json()} for b, c, cmp in self.speedups()],
            "notes": list(self.notes), "measurement": dict(self.measurement),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CallableAccounting:
        return cls(
            name=data["name"], device=data["device"], mode=data["mode"], cudagraphs=bool(data["cudagraphs"]),
            callable=PathTiming.from_json(data["callable"]), kernel_ms=float(data["kernel_ms"]),
            overheads=overheads_from_json(data.get("overheads") or []),
            graphs=[GraphAccounting.from_json(g) for g in data.get("graphs") or []],
            alternatives=[PathTiming.from_json(t) for t in data.get("alternatives") or []],
            copy_bytes=int(data.get("copy_bytes") or 0), notes=list(data.get("notes") or []),
            measurement=dict(data.get("measurement") or {}),
        )

    def to_markdown(self) -> str:
        lines = [f"### {self.name}: {self.mode} on {self.device}", "",
                 "| timed | path | median ms | IQR ms |", "|---|---|---|---|"]
        for t in self.timings():
            lines.append(f"| {t.label} | {t.path} | {t.stats.median_ms:.4f} | {t.stats.iqr_ms:.4f} |")
        split = self.split_text()
        lines += ["", f"{split[0].upper()}{split[1:]}; module call() {self.module_call_ms:.4f} ms.", ""]
        for item in self.overheads:
            lines.append(f"- {describe_overhead(item)}" + (f" — {item.suggestion}" if item.suggestion else ""))
        if self.overhead_dominates:
            lines.append(f"- **overhead dominates** (≥ {OVERHEAD_DOMINATES_SHARE:.0%} of the callable's time)")
        lines += [f"- {line}" for line in self.speedup_lines()]
        for note in self.notes:
            lines.append(f"- note: {note}")
        return "\n".join(lines) + "\n"


def overheads_from_json(items: Iterable[dict[str, Any]]) -> list[OverheadItem]:
    """Overhead items from JSON (``"overheads"`` of a profile or accounting); bad rows are skipped."""
    out = []
    for data in items:
        if not isinstance(data, dict) or "name" not in data:
            continue
        try:
            out.append(OverheadItem(
                name=str(data["name"]), time_ms=float(data.get("time_ms") or 0.0),
                share=float(data.get("share") or 0.0), detail=str(data.get("detail") or ""),
                suggestion=str(data.get("suggestion") or ""),
                bytes_per_call=int(data["bytes_per_call"]) if data.get("bytes_per_call") is not None else None,
            ))
        except (TypeError, ValueError):
            continue
    return out
