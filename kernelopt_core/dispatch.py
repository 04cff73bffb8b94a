"""Dispatch analysis: where a graph's launches and time go, and whether it is worth optimizing.

Without timings the shares are launch counts; with per-launch times (from the worker) they are
time shares. Wrapper-level overheads (CUDA-graph input copies, launch gaps) are first-class
items beside kernels and vendor calls when the caller measured them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .artifacts.model import CompiledGraph, ExternCall, Launch

Classification = Literal["optimizable", "vendor-dominated", "no-triton"]
VENDOR_DOMINATED_SHARE = 0.80


@dataclass
class OverheadItem:
    """Time spent outside kernels and vendor calls, e.g. a CUDA-graph input copy."""

    name: str
    time_ms: float
    share: float
    detail: str = ""
    suggestion: str = ""
    bytes_per_call: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "time_ms": self.time_ms, "share": self.share, "detail": self.detail,
                "suggestion": self.suggestion, "bytes_per_call": self.bytes_per_call}


@dataclass
class LaunchShare:
    order: int
    name: str  # kernel name, or the vendor op
    type: Literal["triton", "extern"]
    time_ms: float | None
    share: float  # of graph time when timed, else of the launch count


@dataclass
class DispatchReport:
    graph: str
    classification: Classification
    evidence: str
    timed: bool
    triton_share: float
    vendor_share: float
    launches: list[LaunchShare] = field(default_factory=list)
    overheads: list[OverheadItem] = field(default_factory=list)
    timing_path: str | None = None  # which path the times were taken through (see measure.paths)

    def share_of(self, kernel_name: str) -> float:
        return sum(item.share for item in self.launches if item.type == "triton" and item.name == kernel_name)

    @property
    def share_basis(self) -> str:
        """What every share in this report is a fraction of."""
        return "graph time" if self.timed else "launches"

    def to_json(self) -> dict[str, Any]:
        # vendor_share / triton_share are fractions of graph time in every command; untimed, there is
        # none (the launch counts say what the dump alone says).
        counts = {"triton": sum(1 for s in self.launches if s.type == "triton"),
                  "vendor": sum(1 for s in self.launches if s.type == "extern"), "total": len(self.launches)}
        return {
            "classification": self.classification,
            "evidence": self.evidence,
            "timed": self.timed,
            "timing_path": self.timing_path,
            "share_basis": self.share_basis,
            "triton_share": self.triton_share if self.timed else None,
            "vendor_share": self.vendor_share if self.timed else None,
            "launch_counts": counts,
            "launches": [vars(item).copy() for item in self.launches],
            "overheads": [item.to_json() for item in self.overheads],
        }


def _label(item: Launch | ExternCall) -> tuple[str, Literal["triton", "extern"]]:
    if isinstance(item, Launch):
        return item.kernel, "triton"
    return item.op, "extern"


def analyze(
    graph: CompiledGraph,
    launch_times_ms: dict[int, float] | None = None,
    overheads: list[OverheadItem] | None = None,
    timing_path: str | None = None,
) -> DispatchReport:
    """Classify a graph. ``launch_times_ms`` maps a launch's ``order`` to its measured time."""
    timeline = graph.timeline()
    times = launch_times_ms or {}
    timed = bool(times) and all(item.order in times for item in timeline)
    weights = [times[item.order] if timed else 1.0 for item in timeline]
    total = sum(weights) + (sum(o.time_ms for o in overheads or []) if timed else 0.0)
    shares: list[LaunchShare] = []
    for item, weight in zip(timeline, weights, strict=True):
        name, kind = _label(item)
        shares.append(LaunchShare(
            order=item.order, name=name, type=kind,
            time_ms=weight if timed else None, share=(weight / total) if total else 0.0,
        ))
    triton_share = sum(s.share for s in shares if s.type == "triton")
    vendor_share = sum(s.share for s in shares if s.type == "extern")
    # Every percentage names its basis: a share of launches (untimed) is not a share of time.
    unit = "of graph time" if timed else "of launches"
    untimed = "" if timed else " (launch counts, not time: `kernelopt inspect --time` measures time shares)"
    if not graph.kernels or not graph.launches:
        classification: Classification = "no-triton"
        evidence = f"no Triton kernels launched; {len(graph.extern_calls)} vendor/ATen call(s)"
    elif vendor_share >= VENDOR_DOMINATED_SHARE:
        classification = "vendor-dominated"
        top = max((s for s in shares if s.type == "extern"), key=lambda s: s.share)
        evidence = (f"{vendor_share:.0%} {unit} in vendor calls (largest: {top.name} {top.share:.0%}); "
                    + (f"Triton kernels can win at most {triton_share:.0%} {unit}" if timed
                       else f"Triton kernels {triton_share:.0%} {unit}{untimed}"))
    else:
        classification = "optimizable"
        top = max((s for s in shares if s.type == "triton"), key=lambda s: s.share)
        evidence = (f"{triton_share:.0%} {unit} in {len(graph.kernels)} Triton kernel(s) "
                    f"(largest: {top.name} {top.share:.0%}); vendor calls {vendor_share:.0%} {unit}{untimed}")
    report = DispatchReport(
        graph=graph.name, classification=classification, evidence=evidence, timed=timed,
        triton_share=triton_share, vendor_share=vendor_share, launches=shares,
        overheads=list(overheads or []), timing_path=timing_path,
    )
    if timed and total:
        for overhead in report.overheads:
            overhead.share = overhead.time_ms / total
    return report
