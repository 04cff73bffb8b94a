"""The summarizer: one experience item per measured candidate, and how it updates the memory.

Offline the item is assembled from the plan, the rewrite and the measurement (append when the
result is informative, skip otherwise). With an LLM the model writes the strategy text through
``submit_experience``; the measured speedup always comes from the measurement, never the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..llm.base import LLMProvider, LLMResponse, ProviderError
from ..memory import ExperienceItem, MemoryUpdate, RunMemory, informative
from ..prompts import AgentPrompt
from .context import KernelBrief, Plan, Proposal
from .conversation import Conversation, compact_json


@dataclass
class Outcome:
    plan: Plan
    proposal: Proposal
    speedup: float | None  # kernel-alone speedup when it passed gates 1-2
    rejected_by: str | None  # "gate 2: ..." when rejected


def offline_experience(brief: KernelBrief, outcome: Outcome) -> tuple[ExperienceItem, MemoryUpdate]:
    speedup = outcome.speedup if outcome.speedup is not None else 0.0
    signal = brief.evidence[0] if brief.evidence else f"tier {brief.tier}"
    item = ExperienceItem(
        speedup=speedup, rewrite_type=outcome.proposal.family, direction=outcome.plan.direction,
        profiling_signal=signal, strategy_title=outcome.proposal.title,
        strategy_description=outcome.proposal.summary or outcome.plan.rationale,
        applicable_when=f"{brief.kind} kernel, tier {brief.tier}, on {brief.device}" if speedup >= 1.05 else "",
        not_applicable_when=(outcome.rejected_by or (f"{brief.kind} kernel, tier {brief.tier}" if speedup < 1 else "")),
        kernel_kind=brief.kind, device=brief.device,
    )
    return item, MemoryUpdate("append" if informative(speedup) else "skip")


class Summarizer:
    def __init__(self, provider: LLMProvider | None, prompt: AgentPrompt | None, capacity: int = 8,
                 on_response: Callable[[str, LLMResponse], None] | None = None):
        self.provider = provider
        self.prompt = prompt
        self.capacity = capacity
        self.on_response = on_response

    def summarize(self, brief: KernelBrief, outcome: Outcome, memory: RunMemory | None) -> tuple[ExperienceItem, MemoryUpdate]:
        fallback = offline_experience(brief, outcome)
        if self.provider is None or self.prompt is None:
            return fallback
        system = self.prompt.render(capacity=self.capacity)
        conversation = Conversation(self.provider, "summarizer", system, self.prompt.tools,
                                    on_response=self.on_response, max_tokens=2048)
        request = {
            "kernel": brief.name, "kind": brief.kind, "tier": brief.tier, "evidence": brief.evidence[:3],
            "plan": outcome.plan.to_json(), "change": outcome.proposal.to_json(),
            "measured_speedup": outcome.speedup, "rejected_by": outcome.rejected_by,
            "memory": [f"{i}: {item.describe()}" for i, item in enumerate(memory.items)] if memory else [],
        }
        try:
            response = conversation.send(compact_json(request), tool_choice={"type": "tool", "name": "submit_experience"})
        except ProviderError:
            return fallback  # the experience is a hint for later plans; losing its prose is not fatal
        call = next((c for c in response.tool_calls if c.name == "submit_experience"), None)
        if call is None or conversation.validate(call):
            return fallback
        data = dict(call.input)
        data["speedup"] = fallback[0].speedup  # the measurement decides, not the model
        data.setdefault("kernel_kind", brief.kind)
        data.setdefault("device", brief.device)
        item = ExperienceItem.from_json(data)
        action = data.get("memory_update", "append")
        index = data.get("replace_index")
        return item, MemoryUpdate(action if action in ("append", "replace", "skip") else "append",
                                  int(index) if isinstance(index, int) else None)
