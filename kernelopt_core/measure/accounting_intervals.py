"""Arithmetic on call traces: busy time, idle gaps, leading input copies, per-launch times.

Pure Python, so the rules can be tested on synthetic traces. A trace is the list of busy
intervals of one call on the timeline where its work runs (the device for a GPU, the host for the
CPU interpreter), in milliseconds, plus the call's own wall time on the same clock where known.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class Interval:
    start_ms: float
    end_ms: float
    name: str
    kind: Literal["kernel", "copy"] = "kernel"

    @property
    def duration_ms(self) -> float:
        return max(0.0, self.end_ms - self.start_ms)


@dataclass
class CallTrace:
    outer_ms: float | None  # the call's wall time on the intervals' clock; None when not comparable
    intervals: list[Interval] = field(default_factory=list)
    origin_ms: float = 0.0  # when the call started, on the intervals' clock


@dataclass
class TraceSummary:
    kernel_ms: float  # busy time of kernels and vendor calls (overlaps counted once)
    copy_ms: float  # busy time of copies that run before the first kernel (CUDA-graph input copies)
    gaps_ms: float  # idle time between the first and the last interval
    edge_ms: float | None  # the call's time outside [first start, last end]; None without outer_ms
    launches: int


def union_ms(intervals: Sequence[Interval]) -> float:
    """Total time covered by the intervals, overlaps counted once."""
    total = 0.0
    current_start = current_end = None
    for iv in sorted(intervals, key=lambda i: i.start_ms):
        if current_end is None or iv.start_ms > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = iv.start_ms, iv.end_ms
        else:
            current_end = max(current_end, iv.end_ms)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def summarize_trace(trace: CallTrace) -> TraceSummary:
    """Split one traced call into kernel time, leading copies, gaps and the edges around them.

    Copies count as *input copies* only while no kernel has started yet: that is where a
    cudagraph tree copies non-static inputs, before it replays the graph. A copy later in the
    call is the graph's own work and counts as kernel time.
    """
    ordered = sorted(trace.intervals, key=lambda i: i.start_ms)
    if not ordered:
        return TraceSummary(0.0, 0.0, 0.0, trace.outer_ms, 0)
    first_kernel = next((i for i, iv in enumerate(ordered) if iv.kind != "copy"), len(ordered))
    copies, work = ordered[:first_kernel], ordered[first_kernel:]
    span = max(iv.end_ms for iv in ordered) - ordered[0].start_ms
    busy = union_ms(ordered)
    edge = None if trace.outer_ms is None else max(0.0, trace.outer_ms - span)
    return TraceSummary(kernel_ms=union_ms(work), copy_ms=union_ms(copies), gaps_ms=max(0.0, span - busy),
                        edge_ms=edge, launches=len(work))


def median_summary(summaries: Sequence[TraceSummary]) -> TraceSummary:
    """Field-wise medians over several traced calls."""
    if not summaries:
        raise ValueError("no traced calls to summarize")
    edges = [s.edge_ms for s in summaries if s.edge_ms is not None]
    return TraceSummary(
        kernel_ms=statistics.median(s.kernel_ms for s in summaries),
        copy_ms=statistics.median(s.copy_ms for s in summaries),
        gaps_ms=statistics.median(s.gaps_ms for s in summaries),
        edge_ms=statistics.median(edges) if edges else None,
        launches=int(statistics.median(s.launches for s in summaries)),
    )


@dataclass
class TimelineItem:
    order: int
    name: str  # the kernel name of a Triton launch, or the op of an extern call
    triton: bool


def map_launch_times(timeline: Sequence[TimelineItem], recorded: Sequence[tuple[str, float]]) -> dict[int, float]:
    """Each launch's time from the recorded (name, ms) of one call, or {} when they do not line up.

    Triton launches match recorded entries by kernel name, in order. Whatever was recorded between
    two Triton launches belongs to the extern calls between them: one entry per call when the
    counts agree (names need not match: cuBLAS kernels are not named after the op), otherwise the
    segment's total split evenly.
    """
    result: dict[int, float] = {}
    pending: list[TimelineItem] = []
    position = 0

    def settle(entries: Sequence[tuple[str, float]]) -> bool:
        if not pending:
            return True  # e.g. a memset the wrapper issued: not a launch of the timeline
        if not entries:
            return False
        if len(entries) == len(pending):
            for item, (_, ms) in zip(pending, entries, strict=True):
                result[item.order] = ms
        else:
            share = sum(ms for _, ms in entries) / len(pending)
            for item in pending:
                result[item.order] = share
        pending.clear()
        return True

    for item in timeline:
        if not item.triton:
            pending.append(item)
            continue
        found = next((j for j in range(position, len(recorded)) if recorded[j][0] == item.name), None)
        if found is None or not settle(recorded[position:found]):
            return {}
        result[item.order] = recorded[found][1]
        position = found + 1
    if not settle(recorded[position:]):
        return {}
    return result


def durations_by_name(trace: CallTrace, skip_leading_copies: bool = True) -> list[tuple[str, float]]:
    """(name, ms) of a call's intervals in start order, for :func:`map_launch_times`."""
    ordered = sorted(trace.intervals, key=lambda i: i.start_ms)
    if skip_leading_copies:
        while ordered and ordered[0].kind == "copy":
            ordered.pop(0)
    return [(iv.name, iv.duration_ms) for iv in ordered]


def median_launch_times(per_call: Sequence[dict[int, float]]) -> dict[int, float]:
    """Per-launch medians over calls whose mappings succeeded."""
    values: dict[int, list[float]] = defaultdict(list)
    complete = [m for m in per_call if m]
    for mapping in complete:
        for order, ms in mapping.items():
            values[order].append(ms)
    return {order: statistics.median(ms) for order, ms in values.items() if len(ms) == len(complete)}
