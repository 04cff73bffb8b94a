"""The one small interface every LLM provider implements, and the run's token/cost ledger.

Messages use the Anthropic Messages API shape (a list of ``{"role", "content"}`` with content
blocks), since both real providers speak it. No provider SDK is imported here.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class ProviderError(RuntimeError):
    """The provider could not answer (after its retries); the message says why."""


class ProviderConfigError(ProviderError):
    """The provider cannot be used as configured (no key, no SDK extra, no region...)."""


@dataclass
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass
class ToolCall:
    id: str
    name: str
    input: Any  # normally a dict; a malformed call may carry anything


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class LLMResponse:
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str | None
    usage: Usage
    model: str
    content: list[dict[str, Any]]  # the assistant content blocks, to append to the conversation
    attempts: int = 1  # requests it took, counting retries
    cost_usd: float | None = None


class LLMProvider(Protocol):
    name: str
    model: str

    def complete(self, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None,
                 tool_choice: dict[str, Any] | None = None, max_tokens: int = 8192,
                 agent: str = "") -> LLMResponse:
        """One model turn. Raises :class:`ProviderError` when it cannot answer."""


@dataclass
class CallRecord:
    agent: str
    model: str
    usage: Usage
    cost_usd: float | None
    attempts: int
    seconds: float


@dataclass
class UsageLedger:
    """Token and cost accounting for one run (thread-safe; providers append to it)."""

    calls: list[CallRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self.calls.append(record)

    def totals(self) -> dict[str, Any]:
        with self._lock:
            calls = list(self.calls)
        cost = [c.cost_usd for c in calls if c.cost_usd is not None]
        return {
            "calls": len(calls),
            "input_tokens": sum(c.usage.input_tokens for c in calls),
            "output_tokens": sum(c.usage.output_tokens for c in calls),
            "cache_creation_input_tokens": sum(c.usage.cache_creation_input_tokens for c in calls),
            "cache_read_input_tokens": sum(c.usage.cache_read_input_tokens for c in calls),
            "cost_usd": round(sum(cost), 6) if cost else (0.0 if not calls else None),
            "retries": sum(max(0, c.attempts - 1) for c in calls),
        }
