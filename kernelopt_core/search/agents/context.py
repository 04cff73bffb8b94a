"""What the agents read and write: the kernel brief, plans and proposals. Plain data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Analyst direction names -> the offline rewrite families that act on them.
DIRECTION_FAMILIES: dict[str, tuple[str, ...]] = {
    "vectorize-loads": ("launch_config", "vector_hints"),
    "fuse-rereads": ("single_read", "cooperative_rows"),
    "eviction-hints": ("eviction_hints",),
    "cheaper-math": ("fast_math",),
    "tile-tuning": ("launch_config",),
    "more-programs": ("split_programs", "cooperative_rows", "launch_config"),
    "smaller-blocks-more-warps": ("launch_config",),
    "reduce-register-pressure": ("split_reduction", "int32_index", "launch_config"),
    "raise-occupancy": ("launch_config",),
    "coalesce-access": ("vector_hints", "launch_config"),
    "l2-friendly-order": ("program_order", "eviction_hints", "launch_config"),
}

# Without metrics, the order families are tried in. On the CPU interpreter per-program and
# per-loop-trip overhead dominates, so launch shape comes first; on a GPU, memory traffic.
DEFAULT_ORDER = {
    # user_* families apply to a project's own kernels only (docs/user-kernels.md)
    "cpu": ("user_autotune", "launch_config", "single_read", "mask_removal", "fast_math", "user_fast_math",
            "split_reduction", "split_programs", "eviction_hints", "vector_hints", "int32_index", "cooperative_rows",
            "program_order"),
    # program_order applies only where the source shows shared data bigger than an L2 share re-read per row
    # (without ncu, seen on the H100: launch_config went first and used the layer norm's budget)
    "cuda": ("user_autotune", "program_order", "launch_config", "single_read", "cooperative_rows", "split_programs",
             "eviction_hints", "vector_hints", "mask_removal", "fast_math", "user_fast_math", "split_reduction",
             "int32_index"),
}


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
