"""The executor: writes the candidate kernel for a plan, with up to K attempts.

Offline, an attempt is the family's next variant not tried yet (a rejected variant's gate
message rules it out; the next differs in what the gate objected to: block size, warps, ...).
With an LLM, the plan, the kernel and the launcher contract go in; each rejection's gate
message comes back as the ``submit_kernel`` tool result, so the model fixes what the gate said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..llm.base import LLMProvider, LLMResponse
from ..prompts import AgentPrompt
from ..rewrites import FAMILIES, RewriteContext
from ..rewrites.base import Rewrite
from ..rewrites.kernel_source import source_digest
from .context import KernelBrief, Plan, Proposal
from .conversation import Conversation, tool_result


@dataclass
class OfflineSession:
    variants: list[Rewrite]
    tried: set[str]
    attempts: int = 0
    error: str | None = None
    position: int = 0

    def propose(self, feedback: str | None = None) -> Proposal | None:
        self.attempts += 1
        while self.position < len(self.variants):
            rewrite = self.variants[self.position]
            self.position += 1
            if source_digest(rewrite.source) in self.tried:
                continue
            return Proposal(rewrite.source, rewrite.detail, rewrite.family, rewrite.title, rewrite.params, self.attempts)
        self.error = "no untried variant left in this family"
        return None

    @property
    def exhausted(self) -> bool:
        return self.position >= len(self.variants)


@dataclass
class LLMSession:
    conversation: Conversation
    opening: str
    attempts: int = 0
    error: str | None = None
    pending_calls: list[str] = field(default_factory=list)  # tool_use ids the next message must answer
    exhausted: bool = False
    history: list[str] = field(default_factory=list)

    def propose(self, feedback: str | None = None) -> Proposal | None:
        self.attempts += 1
        if not self.pending_calls:
            content: object = self.opening
        else:
            message = feedback or self.error or "the previous submission was not usable"
            first, *others = self.pending_calls
            content = [tool_result(first, message, is_error=True),
                       *(tool_result(i, "ignored: submit one kernel at a time", is_error=True) for i in others)]
        response = self.conversation.send(content, tool_choice={"type": "tool", "name": "submit_kernel"})  # type: ignore[arg-type]
        calls = [c for c in response.tool_calls if c.name == "submit_kernel"] or response.tool_calls
        self.pending_calls = [c.id for c in response.tool_calls]
        if not calls:
            self.opening = "Answer with one submit_kernel call containing the full kernel module."
            self.error = "no submit_kernel call in the answer"
            return None
        call = calls[0]
        self.pending_calls = [call.id] + [i for i in self.pending_calls if i != call.id]
        problem = self.conversation.validate(call)
        if problem:
            self.error = f"malformed submit_kernel call: {problem}"
            return None
        data = call.input
        assert isinstance(data, dict)
        source = str(data["kernel_source"])
        return Proposal(source, str(data.get("change_summary", "")), "llm", str(data.get("change_summary", ""))[:80],
                        {}, self.attempts)


class Executor:
    def __init__(self, provider: LLMProvider | None, prompt: AgentPrompt | None, launcher_contract: str = "",
                 retries: int = 4, on_response: Callable[[str, LLMResponse], None] | None = None):
        self.provider = provider
        self.prompt = prompt
        self.launcher_contract = launcher_contract
        self.retries = retries
        self.on_response = on_response

    def start(self, plan: Plan, brief: KernelBrief, node_source: str, context: RewriteContext,
              tried: set[str]) -> OfflineSession | LLMSession:
        if self.provider is None or self.prompt is None:
            family = FAMILIES.get(plan.family or "")
            variants = family.variants(context) if family is not None else []
            return OfflineSession(variants, tried)
        system = self.prompt.render(launcher_contract=self.launcher_contract, retries=self.retries)
        conversation = Conversation(self.provider, "executor", system, self.prompt.tools, on_response=self.on_response)
        evidence = "\n".join(f"- {e}" for e in plan.evidence) or "- (none given)"
        opening = (f"Plan: {plan.direction}\nRationale: {plan.rationale}\nEvidence:\n{evidence}\n"
                   f"Speed of light: {brief.sol_summary()}\n\n"
                   f"Kernel {brief.name} ({brief.kind}, tier {brief.tier}) on {brief.device}. Current module source:\n"
                   f"```python\n{node_source}\n```\nSubmit the rewritten module with submit_kernel.")
        return LLMSession(conversation, opening)
