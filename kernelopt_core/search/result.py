"""What an optimize run returns and writes to result.json."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from ..gates.verdict import CascadeResult

Decision = Literal["optimized", "matched", "fallback"]


@dataclass
class OptimizeResult:
    run_id: str
    run_dir: str
    decision: Decision
    reason: str
    speedup: float | None
    ci: tuple[float, float] | None
    timing_path: str | None
    kernels: list[dict[str, Any]] = field(default_factory=list)
    accepted_sources: dict[str, str] = field(default_factory=dict)
    cascade: CascadeResult | None = None
    graph_path: str = ""
    device: str = ""
    llm_usage: dict[str, Any] = field(default_factory=dict)
    suggestions: list[str] = field(default_factory=list)
    config_change: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)  # torch/triton versions, GPU name
    # the whole-callable accounting (CallableAccounting JSON, no per-launch times) when the problem is known
    accounting: dict[str, Any] | None = None
    # the budget: its seconds, the time used, whether it cut the search short ("budget reached") and where
    budget: dict[str, Any] = field(default_factory=dict)
    # where the time went: seconds per stage and per candidate, candidates screened per minute
    time_split: dict[str, Any] = field(default_factory=dict)
    # False while the search goes on: an early finalist's verified result, written as soon as it passed
    final: bool = True
    # candidates worth finalizing that the budget left no time to verify: kernel, node, title, kernel speedup
    found_unverified: list[dict[str, Any]] = field(default_factory=list)

    @property
    def budget_reached(self) -> bool:
        return bool(self.budget.get("reached"))

    def to_json(self) -> dict[str, Any]:
        cascade = self.cascade.to_json() if self.cascade else None
        if cascade is not None:
            cascade.pop("diff", None)  # it is in final.diff
        return {
            "run_id": self.run_id, "run_dir": self.run_dir, "decision": self.decision, "reason": self.reason,
            "speedup": self.speedup, "ci": list(self.ci) if self.ci else None, "timing_path": self.timing_path,
            "kernels": self.kernels, "accepted_kernels": sorted(self.accepted_sources), "graph_path": self.graph_path,
            "device": self.device, "cascade": cascade, "llm_usage": self.llm_usage, "suggestions": self.suggestions,
            "config_change": self.config_change, "accepted_sources": dict(self.accepted_sources),
            "environment": self.environment, "accounting": self.accounting,
            "budget": self.budget, "budget_reached": self.budget_reached, "time_split": self.time_split,
            "final": self.final, "found_unverified": self.found_unverified,
            "report": os.path.join(self.run_dir, "report.md"), "diff": os.path.join(self.run_dir, "final.diff"),
        }
