"""The decision: ``optimized`` (all four gates passed), ``matched`` (correct candidates, none measurably
faster: the compiler's code is kept), or ``fallback`` with its reason; labelled "budget reached" when
the budget cut the search or its final gates short."""

from __future__ import annotations

from ..gates.verdict import CascadeResult
from .kernel_search import KernelSearch
from .options import OptimizeConfig
from .result import Decision

BUDGET_REACHED = "budget reached"


def decide(searches: list[KernelSearch], final: CascadeResult | None, config: OptimizeConfig,
           budget_note: str | None = None, user_kernel: bool = False) -> tuple[Decision, str]:
    """The decision and its reason; ``budget_note`` (what the budget cut short) labels it "budget reached"."""
    decision, reason = _decide(searches, final, config, budget_note is not None)
    if user_kernel:  # a project's own kernel: what is kept is the user's, not the compiler's
        reason = reason.replace("the compiler's code", "the original kernel").replace(
            "Inductor's kernel", "the original kernel")
    if budget_note:
        reason = f"{BUDGET_REACHED} ({budget_note}): {reason}"
    return decision, reason


def _decide(searches: list[KernelSearch], final: CascadeResult | None, config: OptimizeConfig,
            budget_cut: bool) -> tuple[Decision, str]:
    accepted = [s for s in searches if s.accepted is not None]
    if accepted and final is not None and final.accepted:
        names = ", ".join(s.brief.name for s in accepted)
        ci = f" (95% CI {final.ci[0]:.3f}-{final.ci[1]:.3f})" if final.ci else ""
        if not config.use_perf_gate:
            return "optimized", f"{names} rewritten; gate 4 switched off (ablation): kernel timing decided"
        return "optimized", f"{names} rewritten: {final.speedup:.3f}x end to end{ci}, all four gates passed"
    total = sum(s.candidates for s in searches)
    ok = sum(s.screened_ok for s in searches)
    unverified = sum(s.unverified for s in searches)
    rejections: dict[int, int] = {}
    for s in searches:
        for gate, n in s.rejections.items():
            rejections[gate] = rejections.get(gate, 0) + n
    perf = sum(s.perf_rejected for s in searches)
    at_limit = [s for s in searches if s.not_searched]
    if total == 0 and at_limit:
        why = "; ".join(f"{s.brief.name}: {s.not_searched}" for s in at_limit)
        return "matched", f"{why}; the compiler's code is kept"
    if total == 0:
        return "fallback", "no rewrite applied to the searched kernel(s); the compiler's code is kept"
    if ok == 0 and unverified and not rejections:
        return "fallback", (f"none of the {total} candidate(s) could be verified (the check itself failed, "
                            "e.g. out of memory); the compiler's code is kept")
    if ok == 0:
        detail = ", ".join(f"gate {g}: {n}" for g, n in sorted(rejections.items()))
        return "fallback", f"all {total} candidate(s) were rejected ({detail}); the compiler's code is kept"
    best = max((n.speedup for s in searches for n in s.nodes if n.id != "root"), default=None)
    if perf:
        reason = (f"{ok} correct candidate(s), but none cleared the {config.min_speedup:.2f}x end-to-end gate "
                  f"({perf} rejected by gate 4: {final.reason if final else ''})")
        return "matched", reason + "; the compiler's code is kept"
    too_late = [(s, n) for s in searches for n in s.found_unverified]
    if too_late:
        search, node = max(too_late, key=lambda pair: (pair[1].speedup, pair[1].id))
        title = search.titles.get(node.id, node.id)
        return "matched", (f"{ok} correct candidate(s); {search.brief.name} {node.id} ({title}, kernel speedup "
                           f"{node.speedup:.3f}x) did not go through the final gates within the budget: found, not "
                           "verified within the budget; the compiler's code is kept")
    waiting = [n for s in searches for n in s.nodes if n.id != "root" and n.speedup > 1.0 and n.id not in s.finalized
               and n.id not in s.out_of_reach]
    if budget_cut and waiting and best is not None:
        return "matched", (f"{ok} correct candidate(s); the fastest (kernel speedup {best:.3f}x) did not go through "
                           "the final gates within the budget; the compiler's code is kept")
    out_of_reach = [(n, s.out_of_reach[n.id]) for s in searches for n in s.nodes if n.id in s.out_of_reach]
    if out_of_reach and not any(s.finalized for s in searches):
        node, why = max(out_of_reach, key=lambda pair: (pair[0].speedup, pair[0].id))
        return "matched", (f"{ok} correct candidate(s), none fast enough for the {config.min_speedup:.2f}x end-to-end "
                           f"gate (the fastest, {node.id}: {why}), so none went through the final gates; the "
                           "compiler's code is kept")
    correct_model = any(s.correct for s in searches)
    if final is not None and not final.accepted and final.failed_gate in (2, 3) and not correct_model:
        # gate 2 here is its full battery, which finalists run before gate 3 (the screen ran only part of it)
        check = "gate 2's full battery" if final.failed_gate == 2 else "the model-level check"
        return "fallback", f"the fastest candidates failed {check}: {final.reason}"
    return "matched", (f"{ok} correct candidate(s), none faster than Inductor's kernel "
                       f"(best kernel speedup {best:.3f}x); the compiler's code is kept" if best is not None else
                       f"{ok} correct candidate(s), none measurably faster; the compiler's code is kept")
