"""The executor: writes the candidate kernel for a plan, with up to K attempts.

Offline, an attempt is the family's next variant not tried yet (a rejected variant's gate
message rules it out; the next differs in what the gate objected to: block size, warps, ...),
best first by what the device and the run measured (``search.variant_order``).
With an LLM, the plan, the kernel and the candidate contract go in; each rejection's gate
message comes back as the ``submit_kernel`` tool result, so the model fixes what the gate said.

A candidate is a plain kernel module or a launcher module (docs/launchers.md). Before any gate
runs, :func:`candidate_kind` tells which one a submission is and catches the mistakes that
would only confuse the gates' messages (no function with the kernel's name, a launcher whose
parameters differ from the wrapper's arguments, a declared kind the source contradicts); the
answer goes back to the model like a gate's.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import LLMProvider, LLMResponse
from ..prompts import AgentPrompt
from ..rewrites import FAMILIES, RewriteContext
from ..rewrites.base import Rewrite
from ..rewrites.kernel_source import KernelSourceError, parse_kernel_module, source_digest
from ..rewrites.launcher_source import runtime_params
from .context import KernelBrief, Plan, Proposal
from .conversation import Conversation, tool_result


def candidate_kind(source: str, kernel_name: str, runtime: list[str] | None,
                   declared: str | None = None) -> tuple[str, str | None]:
    """("kernel" | "launcher", None) for a well-formed submission, else (kind guessed, the problem)."""
    from ...launchers import launcher_function

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return declared or "kernel", f"the module does not parse: {exc}"
    launcher = launcher_function(source, kernel_name)
    jitted = any(isinstance(node, ast.FunctionDef) and node.name == kernel_name and node.decorator_list
                 for node in tree.body)
    kind = "launcher" if launcher is not None else "kernel"
    if launcher is None and not jitted:
        return declared or kind, (f"the module defines no function named {kernel_name}: a plain kernel module "
                                  f"decorates `@triton.jit def {kernel_name}(...)`, a launcher module defines an "
                                  f"undecorated `def {kernel_name}(...)` that launches its kernels")
    if declared in ("kernel", "launcher") and declared != kind:
        return kind, (f"kind is {declared!r} but the source is a {kind} module "
                      f"({'an undecorated' if kind == 'launcher' else 'a decorated'} `def {kernel_name}`)")
    if launcher is not None and runtime is not None:
        params = [a.arg for a in launcher.args.args]
        if params != runtime or launcher.args.vararg or launcher.args.kwarg or launcher.args.kwonlyargs:
            return kind, (f"the launcher takes ({', '.join(params)}) but the wrapper passes "
                          f"({', '.join(runtime)}): same names, same order, nothing else")
    return kind, None


def kernel_runtime_params(source: str, kernel_name: str) -> list[str] | None:
    """The runtime parameters of Inductor's kernel (what the wrapper passes), or None when unreadable."""
    try:
        return runtime_params(parse_kernel_module(source, kernel_name))
    except KernelSourceError:
        return None


@dataclass
class OfflineSession:
    variants: list[Rewrite]
    tried: set[str]
    attempts: int = 0
    error: str | None = None
    position: int = 0
    # orders the variants not yet proposed, best first, as of each attempt (search.variant_order)
    order: Callable[[list[Rewrite]], list[Rewrite]] | None = None

    def propose(self, feedback: str | None = None) -> Proposal | None:
        self.attempts += 1
        if self.order is not None and len(self.variants) - self.position > 1:
            self.variants[self.position:] = self.order(self.variants[self.position:])
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
    kernel_name: str = ""
    runtime: list[str] | None = None  # the wrapper's arguments: a launcher's signature
    attempts: int = 0
    error: str | None = None
    pending_calls: list[str] = field(default_factory=list)  # tool_use ids the next message must answer
    exhausted: bool = False
    history: list[str] = field(default_factory=list)

    def propose(self, feedback: str | None = None) -> Proposal | None:
        self.attempts += 1
        if not self.pending_calls:
            content: str | list[dict[str, Any]] = self.opening
        else:
            message = feedback or self.error or "the previous submission was not usable"
            first, *others = self.pending_calls
            content = [tool_result(first, message, is_error=True),
                       *(tool_result(i, "ignored: submit one kernel at a time", is_error=True) for i in others)]
        response = self.conversation.send(content, tool_choice={"type": "tool", "name": "submit_kernel"})
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
        declared = data.get("kind") if isinstance(data.get("kind"), str) else None
        kind, problem = candidate_kind(source, self.kernel_name, self.runtime, declared)
        if problem:
            self.error = f"not submitted to the gates: {problem}"
            return None
        summary = str(data.get("change_summary", ""))
        return Proposal(source, summary, "llm", summary[:80], {"kind": kind}, self.attempts)


class Executor:
    def __init__(self, provider: LLMProvider | None, prompt: AgentPrompt | None, launcher_contract: str = "",
                 retries: int = 4, on_response: Callable[[str, LLMResponse], None] | None = None):
        self.provider = provider
        self.prompt = prompt
        self.launcher_contract = launcher_contract
        self.retries = retries
        self.on_response = on_response

    def start(self, plan: Plan, brief: KernelBrief, node_source: str, context: RewriteContext,
              tried: set[str], order: Callable[[list[Rewrite]], list[Rewrite]] | None = None) -> \
            OfflineSession | LLMSession:
        """A session for ``plan``; offline, ``order`` ranks the family's variants (else the family's order)."""
        if self.provider is None or self.prompt is None:
            family = FAMILIES.get(plan.family or "")
            variants = family.variants(context) if family is not None else []
            return OfflineSession(variants, tried, order=order)
        system = self.prompt.render(launcher_contract=self.launcher_contract, retries=self.retries)
        runtime = kernel_runtime_params(brief.original_source, brief.name)
        conversation = Conversation(self.provider, "executor", system, self.prompt.tools, on_response=self.on_response)
        evidence = "\n".join(f"- {e}" for e in plan.evidence) or "- (none given)"
        opening = (f"Plan: {plan.direction}\nRationale: {plan.rationale}\nEvidence:\n{evidence}\n"
                   f"Speed of light: {brief.sol_summary()}\n\n"
                   f"Kernel {brief.name} ({brief.kind}, tier {brief.tier}) on {brief.device}. Current module source:\n"
                   f"```python\n{node_source}\n```\nSubmit the rewritten module with submit_kernel: a plain kernel "
                   f"module, or a launcher module whose `def {brief.name}(...)` takes "
                   f"({', '.join(runtime or ['the kernel runtime parameters'])}).")
        return LLMSession(conversation, opening, brief.name, runtime)
