"""The profiler agent: chooses what Nsight Compute collects for a kernel.

Offline it asks for the sections the analyst's tiers, causes and directions read (each section adds
replay passes of the kernel under ncu); with a model whose answer is unusable, for the measurement
layer's default sections, since the model's planner reads every figure of the profile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..llm.base import LLMProvider, LLMResponse, ProviderError
from ..prompts import AgentPrompt
from .context import KernelBrief
from .conversation import Conversation

KNOWN_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis",
                  "SchedulerStats", "WarpStateStats", "MemoryWorkloadAnalysis_Chart", "InstructionStats",
                  "SourceCounters")
# The analyst needs Speed-of-Light for the tier; the rest refine directions.
REQUIRED_SECTIONS = ("SpeedOfLight",)


@dataclass
class NcuRequest:
    sections: tuple[str, ...]
    rationale: str
    metrics: list[str] = field(default_factory=list)
    origin: str = "offline"

    def to_json(self) -> dict[str, object]:
        return {"sections": list(self.sections), "rationale": self.rationale, "metrics": self.metrics,
                "origin": self.origin}


def default_request() -> NcuRequest:
    """What the profiler asks for when the model's answer is unusable: the measurement layer's default sections."""
    from ...measure.ncu import DEFAULT_SECTIONS

    return NcuRequest(tuple(DEFAULT_SECTIONS), "the default sections: Speed-of-Light for the tier, "
                                               "occupancy, memory and scheduler statistics for the directions")


def analyst_request() -> NcuRequest:
    """What the offline search asks for: only the sections whose figures the analyst reads."""
    from ...measure.ncu import ANALYST_SECTIONS

    return NcuRequest(tuple(ANALYST_SECTIONS), "the sections the analyst reads: Speed-of-Light for the tier, "
                                               "occupancy, launch statistics and memory workload for the "
                                               "causes and directions")


class Profiler:
    def __init__(self, provider: LLMProvider | None, prompt: AgentPrompt | None,
                 on_response: Callable[[str, LLMResponse], None] | None = None):
        self.provider = provider
        self.prompt = prompt
        self.on_response = on_response

    def choose(self, brief: KernelBrief) -> NcuRequest:
        if self.provider is None or self.prompt is None:
            return analyst_request()
        fallback = default_request()
        system = self.prompt.render(kernel_name=brief.name, sections=", ".join(KNOWN_SECTIONS),
                                    known="; ".join(brief.evidence[:3]) or "nothing yet")
        conversation = Conversation(self.provider, "profiler", system, self.prompt.tools,
                                    on_response=self.on_response, max_tokens=1024)
        try:
            response = conversation.send(f"Kernel {brief.name} ({brief.kind}), aten ops: {', '.join(brief.aten_ops)}",
                                         tool_choice={"type": "tool", "name": "submit_ncu_config"})
        except ProviderError:
            return fallback
        call = next((c for c in response.tool_calls if c.name == "submit_ncu_config"), None)
        if call is None or conversation.validate(call):
            return fallback
        chosen = [s for s in call.input.get("sections", []) if s in KNOWN_SECTIONS]
        sections = tuple(dict.fromkeys([*REQUIRED_SECTIONS, *chosen]))
        return NcuRequest(sections, str(call.input.get("rationale", "")),
                          [str(m) for m in call.input.get("metrics", []) or []], origin="llm")
