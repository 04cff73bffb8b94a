"""What the agents read and write: the kernel brief, plans and proposals. Plain data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class KernelBrief:
    """One kernel as the agents see it: facts, profile and analyst output."""

    name: str
    kind: str  # poi/red/per/tem
    device: str
    original_source: str
    share: float | None = None  # of graph time (or launches when untimed)
    share_timed: bool = False  # the share is of measured graph time, not of the launch count
    baseline_ms: float | None = None  # kernel alone, on captured arguments
    tier: str = "unknown"
    evidence: list[str] = field(default_factory=list)
    directions: list[dict[str, str]] = field(default_factory=list)  # analyst Direction.to_json()
    top_rules: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    inductor_configs: list[dict[str, Any]] = field(default_factory=list)
    aten_ops: list[str] = field(default_factory=list)
    # The analyst's speed-of-light evidence with exactly the keys of ``RewriteContext.evidence``
    # (ideal_bytes, traffic_ratio, sol_pct, causes, launch_args, ...); empty when not analysed.
    speed_of_light: dict[str, Any] = field(default_factory=dict)
    paper_tier: str = "unknown"  # the paper's SOL-memory tier, the second reading

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("original_source")
        return data

    def sol_summary(self) -> str:
        """One line of the speed-of-light evidence for prompts: SOL, traffic ratio, ideal bytes, causes."""
        from ...measure.traffic import bytes_text

        sol = self.speed_of_light or {}
        parts = []
        if sol.get("sol_pct") is not None:
            parts.append(f"{sol['sol_pct']:.0f}% of speed of light")
        else:
            parts.append("speed of light unknown")
        if sol.get("traffic_ratio") is not None:
            parts.append(f"DRAM traffic {sol['traffic_ratio']:.2f}x the minimum")
        if sol.get("ideal_bytes"):
            parts.append(f"minimum {bytes_text(sol['ideal_bytes'])}")
        if sol.get("causes"):
            parts.append("causes: " + ", ".join(sol["causes"]))
        parts.append(f"paper's SOL-memory tier: {self.paper_tier}")
        return "; ".join(parts)


@dataclass
class Plan:
    direction: str
    rationale: str
    evidence: list[str] = field(default_factory=list)
    family: str | None = None  # an offline rewrite family when the plan is one
    origin: str = "offline"  # offline | llm

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        evidence = data.get("evidence") or []
        return cls(direction=str(data.get("direction", "")), rationale=str(data.get("rationale", "")),
                   evidence=[str(e) for e in evidence] if isinstance(evidence, list) else [str(evidence)],
                   family=data.get("family") or None, origin=str(data.get("origin", "offline")))


@dataclass
class Proposal:
    """A candidate kernel module the executor wrote for a plan."""

    source: str
    summary: str
    family: str  # the rewrite family, or "llm"
    title: str
    params: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("source")
        return data
