"""The planner: N plans per iteration, each a direction with the profiling evidence behind it.

Offline it ranks the rewrite families that apply to the kernel: the analyst's directions first,
then the device's default order; families marked AVOID by the cross-run memory go last, and
during a meltdown the recent directions are pushed behind every other one. With an LLM it runs
the planner prompt with its tools (profiling context, kernel source, memory, submit_plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import LLMProvider, LLMResponse
from ..prompts import AgentPrompt
from ..rewrites import FAMILIES, RewriteContext, applicable_families
from ..rewrites.declaration import cause_families, default_order, direction_families
from .context import KernelBrief, Plan
from .conversation import Conversation, compact_json, tool_result

MAX_TOOL_ROUNDS = 8
# The order families are tried in, derived from their declarations in FAMILIES (rewrites/declaration.py):
DIRECTION_FAMILIES = direction_families(FAMILIES)  # analyst direction -> the families it calls for
# Launcher families a measured (or source-read) cause calls for, before the algorithmic families.
EVIDENCE_FAMILIES = cause_families(FAMILIES, "launcher")
# The algorithmic families a cause calls for (on pointwise kernels too, and not).
ALGORITHM_FAMILIES = cause_families(FAMILIES, "algorithm")
ALGORITHM_FAMILIES_NOT_POINTWISE = cause_families(FAMILIES, "algorithm", pointwise=False)
# The order the algorithmic causes are read in: too few programs first, then re-reads.
ALGORITHM_CAUSE_ORDER = ("low-parallelism", "re-reads")
# Causes whose families come after the algorithmic ones, which remove re-reads themselves where they apply.
LATER_EVIDENCE_FAMILIES = cause_families(FAMILIES, "later")
DEFAULT_ORDER = default_order(FAMILIES)  # without evidence, per device


@dataclass
class PlanRequest:
    brief: KernelBrief
    node_source: str
    context: RewriteContext
    n: int
    recent: list[str] = field(default_factory=list)  # recent directions (meltdown window)
    banned: set[str] = field(default_factory=set)  # forced diversity: avoid these now
    avoid: set[str] = field(default_factory=set)  # AVOID strategies from the cross-run memory
    boosted: dict[str, float] = field(default_factory=dict)  # family -> best speedup seen in this run
    history: list[str] = field(default_factory=list)  # lines describing the search so far


def evidence_families(ctx: RewriteContext) -> list[str]:
    """The algorithmic families the analyst's evidence calls for, the most specific first.

    The low-parallelism cause (fewer programs or rows than SMs) calls for spreading each row over
    programs; re-reads (the cause, or a measured traffic ratio of 1.3 or more) for reading each row
    once, or (a pointwise kernel) for reading the data every row shares once. Whether a family can
    rewrite the kernel is its own call (``not_applicable``).
    """
    causes = list(ctx.evidence.get("causes") or [])
    ratio = ctx.evidence.get("traffic_ratio")
    if isinstance(ratio, (int, float)) and ratio >= 1.3 and "re-reads" not in causes:
        causes.append("re-reads")  # measured: DRAM traffic says the rows are read more than once
    table = ALGORITHM_FAMILIES if ctx.module.is_pointwise else ALGORITHM_FAMILIES_NOT_POINTWISE
    order: list[str] = []
    for cause in [*ALGORITHM_CAUSE_ORDER, *(c for c in causes if c not in ALGORITHM_CAUSE_ORDER)]:
        if cause in causes:
            order += table.get(cause, ())
    return list(dict.fromkeys(order))


def offline_plans(request: PlanRequest) -> list[Plan]:
    ctx = request.context
    status = applicable_families(ctx)
    applicable = [name for name, why in status.items() if why is None]
    order: list[str] = []
    for cause in ctx.evidence.get("causes") or []:
        order += [family for family in EVIDENCE_FAMILIES.get(cause, ()) if family not in order]
    order += [family for family in evidence_families(ctx) if family not in order]
    for cause in ctx.evidence.get("causes") or []:
        order += [family for family in LATER_EVIDENCE_FAMILIES.get(cause, ()) if family not in order]
    for direction in request.brief.directions:
        for family in DIRECTION_FAMILIES.get(direction.get("name", ""), ()):
            if family not in order:
                order.append(family)
    for family in DEFAULT_ORDER["cpu" if ctx.on_cpu else "cuda"]:
        if family not in order:
            order.append(family)
    rank = {name: i for i, name in enumerate(order)}

    def key(name: str) -> tuple:
        return (name in request.avoid, name in request.banned, -request.boosted.get(name, 0.0),
                rank.get(name, len(rank)), name)

    ranked = sorted(applicable, key=key)
    plans: list[Plan] = []
    evidence = request.brief.evidence[:2] or [f"tier {request.brief.tier}"]
    for i in range(request.n):
        if not ranked:
            break
        family = ranked[i % len(ranked)]
        notes = []
        if family in request.avoid:
            notes.append("marked AVOID by past runs; tried only because nothing else applies")
        if family in request.banned:
            notes.append("recent directions collapsed (meltdown); no other direction applies")
        plans.append(Plan(
            direction=family, family=family, origin="offline",
            rationale=FAMILIES[family].summary + (f" ({'; '.join(notes)})" if notes else ""),
            evidence=[*evidence, *_family_evidence(family, ctx)],
        ))
    return plans


def _family_evidence(family: str, ctx: RewriteContext) -> list[str]:
    module = ctx.module
    facts = []
    if family in ("launch_config", "mask_removal") and module.numels:
        sizes = ", ".join(f"{k}={v}" for k, v in module.numels.items())
        current = module.explicit_config.label() if module.explicit_config else (
            ctx.inductor_configs[0].label() if ctx.inductor_configs else "Inductor's heuristic")
        facts.append(f"{sizes}; current config {current}")
    if family in ("single_read", "cooperative_rows", "split_programs"):
        facts.append(f"looped reduction over {module.numels.get('xnumel')} rows of r0_numel="
                     f"{module.numels.get('r0_numel')}, {module.text.count('for r0_offset in')} pass(es) per row")
        ratio = ctx.evidence.get("traffic_ratio")
        if ratio is not None:
            target = "the ideal bytes" if family != "split_programs" else "more programs at the same traffic"
            facts.append(f"DRAM traffic {ratio:.2f}x the ideal {ctx.evidence.get('ideal_bytes')} bytes; "
                         f"target: {target}")
        causes = ctx.evidence.get("causes") or []
        if causes:
            facts.append(f"analyst causes: {', '.join(causes)}")
    if family == "program_order":
        ratio = ctx.evidence.get("traffic_ratio")
        measured = f"DRAM traffic {ratio:.2f}x the ideal bytes; " if isinstance(ratio, (int, float)) else ""
        facts.append(f"{measured}pointwise over xnumel={module.numels.get('xnumel')}: data read through "
                     "`xindex % C` alone is re-read by every row")
    if family == "split_reduction":
        facts.append(f"persistent row of {module.numels.get('r0_numel')} elements held in registers")
    if family in EVIDENCE_FAMILIES.get("strided-access", ()):
        causes = ", ".join(ctx.evidence.get("causes") or []) or "none measured"
        sol = ctx.evidence.get("sol_pct")
        sol_text = f"SOL {sol:.0f}%" if isinstance(sol, (int, float)) else "SOL unknown"
        facts.append(f"causes: {causes}; {sol_text}; target: the ideal {ctx.evidence.get('ideal_bytes') or 'unknown'} "
                     "bytes (each input read once, each output written once)")
    return facts


class Planner:
    def __init__(self, provider: LLMProvider | None, prompt: AgentPrompt | None,
                 memory_lookup: Callable[[str], str] | None = None,
                 on_response: Callable[[str, LLMResponse], None] | None = None):
        self.provider = provider
        self.prompt = prompt
        self.memory_lookup = memory_lookup
        self.on_response = on_response

    def plan(self, request: PlanRequest) -> list[Plan]:
        if self.provider is None or self.prompt is None:
            return offline_plans(request)
        return self._llm_plans(request)

    def _llm_plans(self, request: PlanRequest) -> list[Plan]:
        assert self.provider is not None and self.prompt is not None
        brief = request.brief
        families = "\n".join(f"- {name}: {family.summary}" for name, family in FAMILIES.items())
        diversity = ("- The last directions collapsed to too few kinds (meltdown): every plan MUST take a direction "
                     f"other than {', '.join(sorted(request.banned))}." if request.banned else "")
        system = self.prompt.render(kernel_name=brief.name, plans=request.n, families=families,
                                    recent_directions=", ".join(request.recent[-6:]) or "none yet",
                                    diversity_note=diversity, speed_of_light=brief.sol_summary())
        conversation = Conversation(self.provider, "planner", system, self.prompt.tools, on_response=self.on_response)
        context = (f"Kernel {brief.name} ({brief.kind}) on {brief.device}; tier {brief.tier}; share of graph "
                   f"{brief.share if brief.share is not None else 'unknown'}; {brief.sol_summary()}.\n"
                   f"Submit {request.n} plans.")
        plans: list[Plan] = []
        content: str | list[dict[str, Any]] = context
        for _ in range(MAX_TOOL_ROUNDS):
            response = conversation.send(content)
            if not response.tool_calls:
                content = f"Call submit_plan; {request.n - len(plans)} plan(s) still missing."
                continue
            results = []
            for call in response.tool_calls:
                problem = conversation.validate(call)
                if problem:
                    results.append(tool_result(call.id, f"malformed call: {problem}", is_error=True))
                    continue
                results.append(tool_result(call.id, self._answer(call.name, call.input, request, plans)))
            content = results
            if len(plans) >= request.n:
                break
        return plans[:request.n]

    def _answer(self, tool: str, data: dict[str, Any], request: PlanRequest, plans: list[Plan]) -> str:
        brief = request.brief
        if tool == "submit_plan":
            family = data.get("family")
            plans.append(Plan(direction=str(data["direction"]), rationale=str(data["rationale"]),
                              evidence=[str(e) for e in data.get("evidence", [])],
                              family=family if family in FAMILIES else None, origin="llm"))
            return f"plan {len(plans)} recorded"
        if tool == "get_kernel_source":
            return request.node_source
        if tool == "search_memory":
            return self.memory_lookup(str(data.get("query", ""))) if self.memory_lookup else "memory is off"
        aspect = str(data.get("aspect", ""))
        answers = {
            "tier": {"tier": brief.tier, "paper_tier": brief.paper_tier, "evidence": brief.evidence,
                     "directions": brief.directions},
            "speed_of_light": brief.speed_of_light or "no speed-of-light evidence (the kernel was not analysed)",
            "ncu_metrics": brief.metrics or "no ncu metrics (ncu unavailable or switched off)",
            "rules": brief.top_rules or "no ncu rules",
            "timing": {"kernel_alone_ms": brief.baseline_ms, "device": brief.device},
            "dispatch": {"share_of_graph": brief.share},
            "launch_config": {"inductor_configs": brief.inductor_configs,
                              "current": request.context.module.explicit_config.label()
                              if request.context.module.explicit_config else "Inductor's heuristic"},
            "history": request.history[-20:] or ["no candidates yet"],
        }
        return compact_json(answers.get(aspect, f"unknown aspect {aspect!r}"))
