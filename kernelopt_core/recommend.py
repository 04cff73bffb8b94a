"""Deterministic configuration recommendations when graph-level overhead dominates.

Pure Python; no torch at import. The rule (documented in docs/accounting.md):

1. Overhead dominates when the named overheads (CUDA-graph input copy, launch gaps, guard +
   wrapper) take at least 30% of the full callable's time. Otherwise: no recommendation.
2. The largest overhead decides:
   * **CUDA-graph input copy** -> compile without CUDA graphs
     (``max-autotune`` -> ``max-autotune-no-cudagraphs``, ``reduce-overhead`` -> ``default``);
     marking inputs static or persistent input buffers are named as the alternatives.
   * **launch gaps** or **guard + wrapper**, with no CUDA graphs in use, on a GPU -> CUDA graphs
     (``max-autotune``, or ``reduce-overhead`` from ``default``) for a launch-bound graph.
   * with CUDA graphs already on, or on the CPU backend, no configuration change helps.
3. Where the accounting timed the recommended configuration too, the recommendation stands only
   if that configuration was faster; its numbers go into the reason.

:func:`verify_recommendation` checks a recommendation like any candidate (``--allow-config-changes``):
it compiles the problem both ways in a worker, compares outputs gate-3 style and times both
through the full callable, interleaved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .dispatch import DispatchReport, OverheadItem
from .measure.accounting import (
    COPY_ITEM,
    GAPS_ITEM,
    GUARD_ITEM,
    OVERHEAD_DOMINATES_SHARE,
    CallableAccounting,
    describe_overhead,
    format_bytes,
    overheads_from_json,
)
from .measure.paths import TimingPath

WITHOUT_CUDAGRAPHS = {"max-autotune": "max-autotune-no-cudagraphs", "reduce-overhead": "default"}
WITH_CUDAGRAPHS = {"max-autotune-no-cudagraphs": "max-autotune", "default": "reduce-overhead",
                   "max-autotune": "max-autotune"}


@dataclass
class ConfigRecommendation:
    title: str
    reason: str  # with the numbers behind it
    change: dict[str, Any]  # e.g. {"mode": "max-autotune-no-cudagraphs"}
    baseline_mode: str | None
    overhead_share: float
    dominant: str  # the overhead item that decided
    alternatives: list[str] = field(default_factory=list)  # other ways to act on it
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfigRecommendation:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def to_markdown(self) -> str:
        lines = [f"**Recommendation: {self.title}**", "", self.reason, "",
                 f"Change: `{self.change}` (from `{self.baseline_mode}`)"]
        lines += [f"- or: {alt}" for alt in self.alternatives]
        return "\n".join(lines) + "\n"


@dataclass
class _Facts:
    overheads: list[OverheadItem]
    mode: str | None
    cudagraphs: bool | None
    device: str | None
    callable_ms: float | None = None
    measured: dict[str, float] = field(default_factory=dict)  # mode -> median ms of its full callable


def _facts(source: CallableAccounting | DispatchReport | dict[str, Any], mode: str | None) -> _Facts:
    if isinstance(source, CallableAccounting):
        measured = {t.mode: t.stats.median_ms for t in source.alternatives if t.mode}
        return _Facts(source.overheads, mode or source.mode, source.cudagraphs, source.device,
                      source.callable_ms, measured)
    if isinstance(source, DispatchReport):
        path = source.timing_path
        graphs = None if path is None else path == TimingPath.COMPILED_CALLABLE_CUDAGRAPHS.value
        if graphs is None and any(item.name == COPY_ITEM for item in source.overheads):
            graphs = True
        return _Facts(source.overheads, mode, graphs, None)
    if isinstance(source, dict):
        if "callable" in source and "overheads" in source and "mode" in source:
            return _facts(CallableAccounting.from_json(source), mode)
        items = overheads_from_json(source.get("overheads") or source.get("dispatch", {}).get("overheads") or [])
        path = source.get("timing_path") or source.get("path")
        graphs = None if path is None else path == TimingPath.COMPILED_CALLABLE_CUDAGRAPHS.value
        return _Facts(items, mode or source.get("mode"), graphs, source.get("device"))
    raise TypeError(f"cannot recommend from a {type(source).__name__}: pass a CallableAccounting, "
                    "a DispatchReport or their JSON")


def recommend_config(source: CallableAccounting | DispatchReport | dict[str, Any], *, mode: str | None = None,
                     threshold: float = OVERHEAD_DOMINATES_SHARE) -> ConfigRecommendation | None:
    """A configuration change when overhead dominates the callable, else None (see the module doc)."""
    facts = _facts(source, mode)
    share = sum(item.share for item in facts.overheads)
    if not facts.overheads or share < threshold:
        return None
    dominant = max(facts.overheads, key=lambda item: item.time_ms)
    summary = "; ".join(describe_overhead(item) for item in facts.overheads if item.time_ms > 0)
    head = f"Overheads take {share:.0%} of the callable's time (rule: >= {threshold:.0%}): {summary}."
    evidence = {"overhead_share": share, "overheads": [item.to_json() for item in facts.overheads]}
    if facts.device is not None and not facts.device.startswith("cuda"):
        return None  # no CUDA graphs to toggle on the CPU backend
    if dominant.name == COPY_ITEM and dominant.time_ms > 0:
        current = facts.mode or "max-autotune"
        target = WITHOUT_CUDAGRAPHS.get(current, "max-autotune-no-cudagraphs")
        rec = ConfigRecommendation(
            title=f"compile with mode='{target}': the CUDA-graph input copy is "
                  f"{dominant.share:.0%} of the callable",
            reason=head + f" CUDA graphs copy {format_bytes(dominant.bytes_per_call)} of non-static inputs "
                          "before every replay; without CUDA graphs the graph reads them in place.",
            change={"mode": target}, baseline_mode=current, overhead_share=share, dominant=dominant.name,
            alternatives=["mark the inputs static: torch._dynamo.mark_static_address(x) for each input",
                          "keep inputs in persistent buffers and refill them in place (x_static.copy_ is "
                          "then yours, once, where the data is produced)"],
            evidence=evidence,
        )
    elif dominant.name in (GAPS_ITEM, GUARD_ITEM) and facts.cudagraphs is False:
        current = facts.mode or "max-autotune-no-cudagraphs"
        target = WITH_CUDAGRAPHS.get(current, "max-autotune")
        if target == current:
            return None
        rec = ConfigRecommendation(
            title=f"use CUDA graphs (mode='{target}'): the graph is launch-bound",
            reason=head + " A CUDA-graph replay issues every kernel in one launch and skips the host work "
                          "between launches; it copies non-static inputs per call, so mark them static if large.",
            change={"mode": target}, baseline_mode=current, overhead_share=share, dominant=dominant.name,
            alternatives=["torch._dynamo.mark_static_address(x) on large inputs so the replay does not copy them"],
            evidence=evidence,
        )
    else:
        return None
    target_mode = rec.change["mode"]
    if facts.callable_ms and target_mode in facts.measured:
        alt_ms = facts.measured[target_mode]
        rec.evidence.update(measured_ms={"current": facts.callable_ms, "recommended": alt_ms})
        if alt_ms >= facts.callable_ms:
            return None  # measured, and not faster: the overhead is real but this change does not remove it
        rec.reason += (f" Measured through the full callable: {rec.baseline_mode} {facts.callable_ms:.3f} ms, "
                       f"{target_mode} {alt_ms:.3f} ms ({facts.callable_ms / alt_ms:.2f}x).")
    return rec


# --- verification ----------------------------------------------------------------------------


@dataclass
class ConfigVerdict:
    """A configuration change checked like a candidate: gate 3 (outputs) and gate 4 (full callable)."""

    accepted: bool
    reason: str
    change: dict[str, Any]
    baseline_mode: str
    gates: list[dict[str, Any]]  # GateVerdict-shaped: gate, name, passed, reason, seconds, numbers...
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    baseline_path: str | None = None
    candidate_path: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["ci"] = list(self.ci) if self.ci else None
        return data


class ConfigVerificationError(RuntimeError):
    """The verification could not run (bad problem file, worker failure)."""


def verify_recommendation(problem: str, recommendation: ConfigRecommendation | dict[str, Any], *,
                          baseline_mode: str | None = None, device: str = "auto", seeds: tuple[int, ...] = (0, 42, 123),
                          tol: float = 1e-4, min_speedup: float = 1.03, rounds: int | None = None,
                          worker: Any = None, timeout_s: float = 900.0) -> ConfigVerdict:
    """Compile ``problem`` both ways in the device's worker and gate the change like any candidate."""
    if isinstance(recommendation, dict):
        recommendation = ConfigRecommendation.from_json(recommendation)
    if not os.path.isfile(problem):
        raise ConfigVerificationError(f"{problem}: no such problem file")
    candidate_mode = recommendation.change.get("mode")
    if not isinstance(candidate_mode, str):
        raise ConfigVerificationError(f"only mode changes can be verified, got {recommendation.change!r}")
    base = baseline_mode or recommendation.baseline_mode or "max-autotune"
    if worker is None:
        from .measure.worker import get_worker

        worker = get_worker(device)
    payload = {"problem": os.path.abspath(problem), "baseline_mode": base, "candidate_mode": candidate_mode,
               "seeds": list(seeds), "tol": tol, "min_speedup": min_speedup, "rounds": rounds}
    outcome = worker.call("kernelopt_core.measure.accounting_verify:verify_config_job", payload, timeout_s=timeout_s)
    if not outcome.ok:
        failure = outcome.failure
        raise ConfigVerificationError(
            f"{problem}: verifying {recommendation.change} failed ({failure.kind}: {failure.message})" if failure
            else f"{problem}: verifying {recommendation.change} failed")
    value = outcome.value
    perf = next((g for g in value["gates"] if g.get("gate") == 4), None)
    return ConfigVerdict(
        accepted=bool(value["accepted"]), reason=str(value["reason"]), change=dict(value["change"]),
        baseline_mode=base, gates=list(value["gates"]),
        speedup=perf.get("speedup") if perf else None,
        ci=tuple(perf["ci"]) if perf and perf.get("ci") else None,  # type: ignore[arg-type]
        baseline_path=perf.get("baseline_path") if perf else None,
        candidate_path=perf.get("candidate_path") if perf else None, notes=list(value.get("notes") or []),
    )
