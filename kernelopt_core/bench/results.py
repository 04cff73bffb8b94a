"""The record of one problem in a campaign, and its file ``<out>/problems/<name>.json``.

Files are written atomically (temporary file + rename) as each problem finishes, so a campaign
that is killed keeps every finished problem and ``--resume`` skips them.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..atomic_files import write_json_atomic

Outcome = Literal["optimized", "matched", "fallback", "error"]
OUTCOMES: tuple[Outcome, ...] = ("optimized", "matched", "fallback", "error")
RESULT_VERSION = 1


@dataclass
class Speedup:
    """A speedup with its confidence interval and where the numbers came from."""

    value: float
    ci_low: float
    ci_high: float
    path: str  # the timing path(s) behind it (see kernelopt_core.measure.paths)
    source: str  # "confirmation A/B", "gate 4 A/B", "fallback: the compiler's own code", "derived", ...

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Speedup | None:
        if not data:
            return None
        return cls(value=float(data["value"]), ci_low=float(data["ci_low"]), ci_high=float(data["ci_high"]),
                   path=str(data.get("path", "")), source=str(data.get("source", "")))


@dataclass
class ProblemResult:
    name: str
    level: int
    path: str
    outcome: Outcome
    reason: str  # one human sentence
    category: str | None = None  # fallback: vendor-dominated, gate-4-perf, ...; error: the failed stage
    stage: str | None = None  # the last stage reached
    device: str = "cpu"
    dtype: str = "fp32"
    wall_s: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    eager: dict[str, Any] | None = None  # TimingStats json, path "eager"
    max_autotune: dict[str, Any] | None = None  # TimingStats json of the full torch.compile callable
    vs_max_autotune: Speedup | None = None
    vs_eager: Speedup | None = None
    max_autotune_vs_eager: Speedup | None = None  # the baseline's own speedup over eager
    gate4: dict[str, Any] | None = None  # the perf gate's A/B as the cascade reported it
    confirm: dict[str, Any] | None = None  # an independent A/B of the accepted graph (module-call path)
    classification: str | None = None  # dispatch: optimizable / vendor-dominated / no-triton
    dispatch_evidence: str | None = None
    graphs: int = 0
    kernels: int = 0
    extern_calls: int = 0
    compile_s: float | None = None
    run_id: str | None = None
    run_dir: str | None = None
    kernels_changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None  # {"stage", "type", "message", "traceback"}
    log_path: str | None = None
    gpu: str | None = None  # which GPU ran it (physical index / name) when on CUDA
    # Speed of light of the main kernel and of the graph: {"kernel", "baseline_pct", "after_pct",
    # "traffic_ratio", "ideal_bytes", "causes", "source", "graph_baseline_pct", "graph_ideal_bytes", ...}
    sol: dict[str, Any] | None = None
    started: str | None = None
    finished: str | None = None
    # the whole torch.compile callable beyond its kernels (see kernelopt_core.config_findings):
    accounting: dict[str, Any] | None = None  # CallableAccounting JSON without per-launch times
    suggestions: list[str] = field(default_factory=list)
    config_change: dict[str, Any] | None = None  # recommendation and its verification; never a kernel rewrite
    # the problem's budget (the campaign's per-problem time), what the optimizer got of it, and whether the
    # budget cut the search (or, at the backstop, the problem) short
    budget_s: float | None = None
    optimize_budget_s: float | None = None
    budget_reached: bool = False
    # the optimizer's time split: seconds per stage, candidates screened (and per minute), every screen's
    # seconds (the campaign's median and p90 come from them); the run's report.md has the per-candidate table
    time_split: dict[str, Any] | None = None
    # candidates worth finalizing that the budget left no time to verify, each with its kernel speedup
    # ("found, not verified within the budget"; never counted as a speedup)
    found_unverified: list[dict[str, Any]] = field(default_factory=list)
    # what the bench had to end after the problem's own process ended, "pid N (command)" each (a
    # timed-out problem's worker, say); a problem that ends normally leaves nothing
    processes_ended: list[str] = field(default_factory=list)
    device_memory: dict[str, Any] | None = None  # device_memory.MemoryCheck JSON: back to the baseline?
    version: int = RESULT_VERSION

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("vs_max_autotune", "vs_eager", "max_autotune_vs_eager"):
            value = getattr(self, key)
            data[key] = value.to_json() if value is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemResult:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for key in ("vs_max_autotune", "vs_eager", "max_autotune_vs_eager"):
            known[key] = Speedup.from_json(data.get(key))
        if known.get("outcome") not in OUTCOMES:
            raise ValueError(f"unknown outcome {known.get('outcome')!r}")
        return cls(**known)


def result_path(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, "problems", *name.split("/")) + ".json"


def partial_path(work_dir: str) -> str:
    """Where a problem's process keeps what it has so far (the parent reads it after a backstop kill)."""
    return os.path.join(work_dir, "partial_result.json")


def write_result(out_dir: str, result: ProblemResult) -> str:
    path = result_path(out_dir, result.name)
    write_json_atomic(path, result.to_json())
    return path


def load_result(out_dir: str, name: str) -> ProblemResult | None:
    """The finished result of ``name``, or None when there is none (or it is unreadable)."""
    path = result_path(out_dir, name)
    try:
        with open(path, encoding="utf-8") as handle:
            return ProblemResult.from_json(json.load(handle))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # a torn or foreign file is treated as not finished: the problem runs again
