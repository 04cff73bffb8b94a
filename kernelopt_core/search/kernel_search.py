"""The state of one kernel's search, shared by the beam, the finalists and the decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..gates.verdict import CascadeResult
from .agents import KernelBrief
from .beam import BeamNode


@dataclass
class VariantTiming:
    """A timed variant of a rewrite family on this kernel: what the next variants are ordered by."""

    family: str
    params: dict[str, Any]
    speedup: float


AT_SPEED_OF_LIGHT_PCT = 100.0
MINIMUM_TRAFFIC = 1.05  # DRAM bytes over the ideal at which a kernel moves no more than it must


def at_speed_of_light(brief: KernelBrief) -> str | None:
    """Why no rewrite of the kernel can be faster, or None: it moves its minimum bytes (ncu's DRAM traffic within
    5% of the ideal) at the device's measured copy bandwidth or faster (a pooling kernel measured so:
    docs/design-notes.md, "Measurements"). A rewrite cannot move fewer bytes than the ideal, so it could only gain what a kernel can run
    above the copy bandwidth, a few percent, under the 3% end-to-end gate's noise."""
    sol = brief.speed_of_light or {}
    pct, traffic = sol.get("sol_pct"), sol.get("traffic_ratio")
    if not isinstance(pct, (int, float)) or not isinstance(traffic, (int, float)):
        return None
    if pct < AT_SPEED_OF_LIGHT_PCT or traffic > MINIMUM_TRAFFIC:
        return None
    return (f"already at {pct:.0f}% of the speed of light with DRAM traffic {traffic:.2f}x the minimum bytes: "
            "no rewrite moves fewer bytes, so none was tried")


@dataclass
class KernelSearch:
    brief: KernelBrief
    nodes: list[BeamNode] = field(default_factory=list)
    candidates: int = 0
    screened_ok: int = 0
    rejections: dict[int, int] = field(default_factory=dict)
    accepted: BeamNode | None = None
    cascade: CascadeResult | None = None
    correct: bool = False  # some candidate passed gates 1-3
    perf_rejected: int = 0
    titles: dict[str, str] = field(default_factory=dict)  # node id -> rewrite title
    unverified: int = 0  # candidates whose check could not run (e.g. out of memory): not rejections
    quarantined: list[dict[str, Any]] = field(default_factory=list)  # candidates that broke containment
    finalized: set[str] = field(default_factory=set)  # node ids that went through gates 3-4
    # node id -> why its kernel speedup cannot clear the end-to-end gate: never sent to the final gates
    out_of_reach: dict[str, str] = field(default_factory=dict)
    timings: list[VariantTiming] = field(default_factory=list)  # every timed variant, in order
    stopped_by_budget: bool = False  # the budget ended the beam before its iterations did
    passed_over: int = 0  # plans not tried because their family's candidates no longer fit the time left
    nothing_left: str | None = None  # why the beam ended with budget left: it had nothing left to try
    # where the beam was, so that a beam its share of the time stopped can go on (BeamStage.resume)
    beam: list[BeamNode] = field(default_factory=list)  # the nodes it expands next
    tried: set[str] = field(default_factory=set)  # every source digest tried, the original's included
    iteration: int = 0  # the iteration it was in
    counter: int = 0  # candidates labelled so far: labels stay unique when it goes on
    not_searched: str | None = None  # why no candidate was tried (the kernel already runs at the speed of light)
    # candidates worth finalizing for which the budget had no finalist's time: "found, not verified"
    found_unverified: list[BeamNode] = field(default_factory=list)

    def best(self) -> BeamNode | None:
        found = [n for n in self.nodes if n.id != "root"]
        return min(found, key=lambda n: (n.latency_ms, n.id)) if found else None

    @property
    def root(self) -> BeamNode:
        return self.nodes[0]
