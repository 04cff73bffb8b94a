"""Deterministic configuration recommendations when graph-level overhead is worth removing.

The largest named overhead decides: a CUDA-graph input copy -> compile without CUDA graphs (or keep
them and mark the inputs static); launch gaps or guard + wrapper without CUDA graphs, on a GPU -> CUDA
graphs; otherwise nothing helps. The change is recommended when what it removes (the copy; the gaps
and the guard) is at least 10% of the full callable's time. Where the accounting timed the recommended
configuration too, it stands only if faster.

:func:`verify_recommendation` checks a recommendation like any candidate (``--allow-config-changes``):
both configurations compiled in a worker, outputs compared gate-3 style, both timed through the
full callable; :func:`verify_option` does the same for one :class:`ConfigOption`. Pure Python; no
torch at import. The rule in full: docs/accounting.md and docs/design-notes.md, "recommend.py".
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
    CallableAccounting,
    describe_overhead,
    format_bytes,
    overheads_from_json,
)
from .measure.paths import TimingPath

WITHOUT_CUDAGRAPHS = {"max-autotune": "max-autotune-no-cudagraphs", "reduce-overhead": "default"}
WITH_CUDAGRAPHS = {"max-autotune-no-cudagraphs": "max-autotune", "default": "reduce-overhead",
                   "max-autotune": "max-autotune"}

# What a change removes must be at least this share of the callable: 1.11x if it all goes, over three times
# the 1.03x speed gate. Level 2's problem 17 on the H100 (session 22): a 13% input copy, under the 30% at
# which overhead "dominates", left unchecked.
WORTH_CHECKING_SHARE = 0.10

OPTION_MODE = "mode"  # another torch.compile mode
OPTION_STATIC_INPUTS = "static-inputs"  # the same mode, inputs marked with torch._dynamo.mark_static_address
ASSUMES_NOTHING = ("nothing about the caller: the graph reads its inputs in place; it gives up the CUDA-graph "
                   "replay, so each kernel is launched from the host again")
ASSUMES_STATIC = ("the caller passes the same input tensors on every call and refills them in place "
                  "(x.copy_(new_data)); a new tensor each call makes cudagraph trees re-record the graph, "
                  "which is slower than the copy it saves")
ASSUMES_GRAPHS = ("static shapes, and that the caller does not keep a call's outputs past the next call "
                  "(cudagraph trees overwrite them on the next replay: clone what you keep)")


def compile_call(mode: str | None) -> str:
    """The ``torch.compile`` call for ``mode``, as a user writes it."""
    if not mode or mode == "default":
        return "compiled = torch.compile(model)"
    return f'compiled = torch.compile(model, mode="{mode}")'


def static_inputs_snippet(mode: str | None) -> str:
    return ("# the tensors you pass every call, refilled in place (x.copy_(new_data)), never replaced\n"
            "for x in inputs:\n"
            "    torch._dynamo.mark_static_address(x)\n" + compile_call(mode))


@dataclass
class ConfigOption:
    """One way to act on a recommendation, with what it assumes about the caller."""

    name: str  # OPTION_MODE or OPTION_STATIC_INPUTS
    title: str
    change: dict[str, Any]  # {"mode": ...} or {"mode": ..., "static_inputs": True}
    assumes: str
    snippet: str  # the code to copy: the torch.compile call (and the static marking)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfigOption:
        return cls(name=str(data["name"]), title=str(data.get("title") or data["name"]),
                   change=dict(data.get("change") or {}), assumes=str(data.get("assumes") or ""),
                   snippet=str(data.get("snippet") or ""))


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
    # the options that can be verified, the recommended change first
    options: list[ConfigOption] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["options"] = [option.to_json() for option in self.options]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfigRecommendation:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["options"] = [ConfigOption.from_json(o) for o in data.get("options") or []
                            if isinstance(o, dict) and "name" in o]
        return cls(**known)

    def option(self, name: str) -> ConfigOption | None:
        return next((o for o in self.options if o.name == name), None)

    def to_markdown(self) -> str:
        lines = [f"**Recommendation: {self.title}**", "", self.reason, "",
                 f"Change: `{self.change}` (from `{self.baseline_mode}`)"]
        lines += [f"- or: {alt}" for alt in self.alternatives]
        for option in self.options:
            lines.append(f"- option `{option.name}` ({option.title}): assumes {option.assumes}")
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
                     threshold: float = WORTH_CHECKING_SHARE) -> ConfigRecommendation | None:
    """A configuration change when what it removes is at least ``threshold`` of the callable, else None
    (see the module doc)."""
    facts = _facts(source, mode)
    if not facts.overheads:
        return None
    share = sum(item.share for item in facts.overheads)
    dominant = max(facts.overheads, key=lambda item: item.time_ms)
    removable = (dominant.share if dominant.name == COPY_ITEM else
                 sum(item.share for item in facts.overheads if item.name in (GAPS_ITEM, GUARD_ITEM)))
    if removable < threshold:
        return None
    summary = "; ".join(describe_overhead(item) for item in facts.overheads if item.time_ms > 0)
    head = (f"Overheads take {share:.0%} of the callable's time; the change removes {removable:.0%} "
            f"(rule: >= {threshold:.0%}): {summary}.")
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
            options=[
                ConfigOption(OPTION_MODE, f"compile with mode='{target}'", {"mode": target}, ASSUMES_NOTHING,
                             compile_call(target)),
                ConfigOption(OPTION_STATIC_INPUTS, f"keep mode='{current}' and mark the inputs static",
                             {"mode": current, "static_inputs": True}, ASSUMES_STATIC,
                             static_inputs_snippet(current)),
            ],
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
            options=[ConfigOption(OPTION_MODE, f"compile with mode='{target}'", {"mode": target}, ASSUMES_GRAPHS,
                                  compile_call(target))],
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
    option: str = OPTION_MODE  # which ConfigOption was verified
    assumes: str = ""  # what that option assumes about the caller
    snippet: str = ""  # the code to copy
    device: str | None = None
    # the check's device allocator peak against the problem's inputs and outputs (None on the CPU)
    memory: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["ci"] = list(self.ci) if self.ci else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfigVerdict:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        ci = data.get("ci")
        known["ci"] = (float(ci[0]), float(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
        return cls(**known)


class ConfigVerificationError(RuntimeError):
    """The verification could not run (bad problem file, worker failure)."""


class ConfigNotVerified(ConfigVerificationError):
    """The verification did not run: no time was left for it. The recommendation stands with the figure the
    accounting measured, labelled "not verified"."""


def measured_speedup(recommendation: ConfigRecommendation, option: ConfigOption | None = None) -> float | None:
    """The speedup the whole-callable accounting measured for the recommended mode (current over recommended
    median), None when it timed no alternative or ``option`` is not the plain mode change."""
    if option is not None and (option.name != OPTION_MODE or option.change.get("static_inputs")):
        return None
    measured = recommendation.evidence.get("measured_ms") or {}
    current, recommended = measured.get("current"), measured.get("recommended")
    if not isinstance(current, (int, float)) or not isinstance(recommended, (int, float)) or recommended <= 0:
        return None
    return float(current) / float(recommended)


def measured_text(recommendation: ConfigRecommendation, option: ConfigOption | None = None) -> str:
    """The accounting's figure for ``option`` in words (it is no verification: no gate 3, no interleaved A/B)."""
    speedup = measured_speedup(recommendation, option)
    if speedup is None:
        return "no measured figure for this option"
    measured = recommendation.evidence["measured_ms"]
    return (f"measured {speedup:.2f}x through the full callable by the accounting ({recommendation.baseline_mode} "
            f"{measured['current']:.3f} ms, {recommendation.change.get('mode')} {measured['recommended']:.3f} ms)")


def primary_option(recommendation: ConfigRecommendation) -> ConfigOption:
    """The recommended change as an option (a recommendation from older JSON may list none)."""
    if recommendation.options:
        return recommendation.options[0]
    mode = recommendation.change.get("mode")
    return ConfigOption(OPTION_MODE, f"compile with mode='{mode}'", dict(recommendation.change), "",
                        compile_call(mode if isinstance(mode, str) else None))


def verify_recommendation(problem: str, recommendation: ConfigRecommendation | dict[str, Any], *,
                          baseline_mode: str | None = None, device: str = "auto", seeds: tuple[int, ...] = (0, 42, 123),
                          tol: float = 1e-4, min_speedup: float = 1.03, rounds: int | None = None,
                          worker: Any = None, timeout_s: float = 900.0) -> ConfigVerdict:
    """Compile ``problem`` both ways in the device's worker and gate the recommended change like any candidate."""
    if isinstance(recommendation, dict):
        recommendation = ConfigRecommendation.from_json(recommendation)
    return verify_option(problem, primary_option(recommendation),
                         baseline_mode or recommendation.baseline_mode or "max-autotune", device=device, seeds=seeds,
                         tol=tol, min_speedup=min_speedup, rounds=rounds, worker=worker, timeout_s=timeout_s)


def verification_payload(problem: str, option: ConfigOption, baseline_mode: str, *, seeds: tuple[int, ...] = (0, 42, 123),
                         tol: float = 1e-4, min_speedup: float = 1.03, rounds: int | None = None) -> dict[str, Any]:
    """The ``verify_config_task`` payload for ``option``; refuses changes it cannot make."""
    if not os.path.isfile(problem):
        raise ConfigVerificationError(f"{problem}: no such problem file")
    unknown = sorted(set(option.change) - {"mode", "static_inputs"})
    candidate_mode = option.change.get("mode")
    if unknown or not isinstance(candidate_mode, str):
        raise ConfigVerificationError(f"only mode changes and static inputs can be verified, got {option.change!r}")
    return {"problem": os.path.abspath(problem), "baseline_mode": baseline_mode, "candidate_mode": candidate_mode,
            "static_inputs": bool(option.change.get("static_inputs")), "seeds": list(seeds), "tol": tol,
            "min_speedup": min_speedup, "rounds": rounds}


def verdict_from_task(value: dict[str, Any], option: ConfigOption, baseline_mode: str) -> ConfigVerdict:
    """A ConfigVerdict from what ``verify_config_task`` returned."""
    perf = next((g for g in value["gates"] if g.get("gate") == 4), None)
    return ConfigVerdict(
        accepted=bool(value["accepted"]), reason=str(value["reason"]), change=dict(value["change"]),
        baseline_mode=baseline_mode, gates=list(value["gates"]),
        speedup=perf.get("speedup") if perf else None,
        ci=tuple(perf["ci"]) if perf and perf.get("ci") else None,
        baseline_path=perf.get("baseline_path") if perf else None,
        candidate_path=perf.get("candidate_path") if perf else None, notes=list(value.get("notes") or []),
        option=option.name, assumes=option.assumes, snippet=option.snippet, device=value.get("device"),
        memory=value.get("memory"),
    )


def verify_option(problem: str, option: ConfigOption, baseline_mode: str, *, device: str = "auto",
                  seeds: tuple[int, ...] = (0, 42, 123), tol: float = 1e-4, min_speedup: float = 1.03,
                  rounds: int | None = None, worker: Any = None, timeout_s: float = 900.0) -> ConfigVerdict:
    """Gate one option of a recommendation: gate 3 on ``seeds``, gate 4 through the full callable."""
    payload = verification_payload(problem, option, baseline_mode, seeds=seeds, tol=tol, min_speedup=min_speedup,
                                   rounds=rounds)
    if worker is None:
        from .measure.worker import get_worker

        worker = get_worker(device)
    outcome = worker.call("kernelopt_core.measure.accounting_verify:verify_config_task", payload, timeout_s=timeout_s)
    if not outcome.ok:
        failure = outcome.failure
        if failure is not None and failure.kind == "timeout":  # the time it was given ran out: no verdict
            raise ConfigNotVerified(f"the check ran past the {timeout_s:.0f} s that were left for it")
        raise ConfigVerificationError(
            f"{problem}: verifying {option.change} failed ({failure.kind}: {failure.message})" if failure
            else f"{problem}: verifying {option.change} failed")
    return verdict_from_task(outcome.value, option, baseline_mode)
