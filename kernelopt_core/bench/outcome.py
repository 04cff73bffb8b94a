"""From an optimize run to a campaign outcome: optimized, matched, fallback (with why), or error.

The optimizer decides optimized / matched / fallback; this module names the fallback reason in
a fixed vocabulary so a campaign can count them (the paper's table: vendor dominance, no Triton
kernels, perf-gate rejections, end-to-end correctness, ...).
"""

from __future__ import annotations

from typing import Any

from .results import OUTCOMES, Outcome

NOT_OPTIMIZED = "not optimized (timing only)"  # a --no-optimize campaign's problems: nothing was searched
FALLBACK_CATEGORIES: dict[str, str] = {
    "vendor-dominated": "vendor-dominated (cuBLAS/cuDNN time dominates)",
    "no-triton-kernels": "no Triton kernels",
    "gate-1-static": "gate 1 (static) rejected every candidate",
    "gate-2-kernel": "gate 2 (kernel correctness) rejected every candidate",
    "gate-3-model": "gate 3 (model-level correctness)",
    "gate-4-perf": "gate 4 (end-to-end speed)",
    "no-candidates": "no candidate was produced",
    "could-not-verify": "could not verify (the check itself failed, e.g. out of memory; not a rejection)",
    "budget": "budget reached before a candidate was verified",
    "not-optimized": NOT_OPTIMIZED,
    "other": "other",
}
ERROR_CATEGORIES: dict[str, str] = {
    "import": "the problem file failed to import",
    "build": "building the model or its inputs failed",
    "eager": "the eager model failed to run",
    "compile": "torch.compile failed",
    "optimize": "the optimizer failed",
    "timeout": "the problem ran past its time limit",
    "crash": "the problem's process died",
    "setup": "the problem's process could not be started",
    "cancelled": "cancelled by the user",
    "gpu-memory-held": "not run: an earlier problem's GPU memory was still held",
}
_GATE_CATEGORY = {1: "gate-1-static", 2: "gate-2-kernel", 3: "gate-3-model", 4: "gate-4-perf"}
_GATE_WORDS = {"static": 1, "kernel": 2, "model": 3, "perf": 4}


def fallback_category(reason: str, cascade: dict[str, Any] | None, classification: str | None) -> str:
    """The fallback reason in the campaign's vocabulary (see FALLBACK_CATEGORIES)."""
    text = (reason or "").lower()
    if classification == "vendor-dominated" or "vendor" in text:
        return "vendor-dominated"
    if classification == "no-triton" or "no triton" in text or "no-triton" in text:
        return "no-triton-kernels"
    if text.startswith("budget reached") and ("no rewrite applied" in text or "before the search verified" in text):
        return "budget"
    if (cascade or {}).get("could_not_verify") or "could not be verified" in text or "could not verify" in text:
        return "could-not-verify"
    gate = _failed_gate(cascade)
    if gate is None:
        for number in (4, 3, 2, 1):  # the latest gate named in the reason is the one that decided
            if f"gate {number}" in text or f"gate{number}" in text:
                gate = number
                break
    if gate is not None:
        return _GATE_CATEGORY[gate]
    if "no candidate" in text or "no candidates" in text or "nothing to" in text:
        return "no-candidates"
    return "other"


def _failed_gate(cascade: dict[str, Any] | None) -> int | None:
    if not cascade:
        return None
    failed = cascade.get("failed_gate")
    if isinstance(failed, int) and failed in _GATE_CATEGORY:
        return failed
    for verdict in cascade.get("gates") or []:
        if isinstance(verdict, dict) and verdict.get("passed") is False and not verdict.get("could_not_verify"):
            number = verdict.get("gate") or _GATE_WORDS.get(str(verdict.get("name")))
            if isinstance(number, int) and number in _GATE_CATEGORY:
                return number
    return None


def classify_decision(decision: str, reason: str, cascade: dict[str, Any] | None,
                      classification: str | None) -> tuple[Outcome, str | None]:
    """(outcome, category) for an optimizer decision; an unknown decision is an error."""
    if decision == "optimized":
        return "optimized", None
    if decision == "matched":
        return "matched", None
    if decision == "fallback":
        return "fallback", fallback_category(reason, cascade, classification)
    return "error", "optimize"


def category_label(outcome: str, category: str | None) -> str:
    if category is None:
        return outcome
    table = FALLBACK_CATEGORIES if outcome == "fallback" else ERROR_CATEGORIES
    return table.get(category, category)


def outcome_text(outcome: str, category: str | None) -> str:
    """A problem's outcome as a progress line says it: ``optimized``, ``matched``, ``fallback (gate-4-perf)``,
    ...; a problem that ``--no-optimize`` only timed is "not optimized (timing only)", never a fallback."""
    if outcome == "fallback" and category == "not-optimized":
        return NOT_OPTIMIZED
    return f"{outcome} ({category})" if category else outcome


def counts_text(counts: dict[str, int], not_optimized: int = 0) -> str:
    """``{'optimized': 2, 'matched': 1, ...}`` as "2 optimized, 1 matched, 0 fallback, 0 error". The
    ``not_optimized`` of the fallbacks (problems only timed) are named apart, and a campaign of them
    leaves out the outcomes a search would have had."""
    if not not_optimized:
        return ", ".join(f"{counts.get(outcome, 0)} {outcome}" for outcome in OUTCOMES)
    rest = {**counts, "fallback": counts.get("fallback", 0) - not_optimized}
    parts = [f"{not_optimized} {NOT_OPTIMIZED}"]
    parts += [f"{rest[o]} {o}" for o in OUTCOMES if rest.get(o, 0) or o == "error"]
    return ", ".join(parts)
