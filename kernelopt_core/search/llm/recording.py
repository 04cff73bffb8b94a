"""A provider wrapper that journals every LLM call and replays it on a resumed run.

Each call is keyed ``<agent>#<n>`` (the agent's n-th call in the run). The search is
deterministic given the answers, so on resume the same calls happen in the same order and
their recorded answers are used instead of asking the model again: nothing paid for is lost,
and the token/cost totals include the calls made before the interruption.
"""

from __future__ import annotations

from typing import Any

from ...runs import Journal
from .base import CallRecord, LLMProvider, LLMResponse, ToolCall, ToolSpec, Usage, UsageLedger


class RecordingProvider:
    def __init__(self, inner: LLMProvider, journal: Journal, ledger: UsageLedger):
        self.inner = inner
        self.journal = journal
        self.ledger = ledger
        self.name = inner.name
        self.model = inner.model
        self._counts: dict[str, int] = {}
        self.replayed = 0

    def complete(self, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None,
                 tool_choice: dict[str, Any] | None = None, max_tokens: int = 8192, agent: str = "") -> LLMResponse:
        agent = agent or "agent"
        n = self._counts.get(agent, 0)
        self._counts[agent] = n + 1
        key = f"{agent}#{n}"
        entry = self.journal.lookup("llm", key)
        if entry is not None:
            self.replayed += 1
            response = _from_entry(entry)
        else:
            response = self.inner.complete(system, messages, tools, tool_choice, max_tokens, agent=agent)
            self.journal.append("llm", key, agent=agent, model=response.model, usage=response.usage.to_json(),
                                cost_usd=response.cost_usd, attempts=response.attempts,
                                stop_reason=response.stop_reason, content=response.content)
        self.ledger.add(CallRecord(agent, response.model, response.usage, response.cost_usd, response.attempts, 0.0))
        return response


def _from_entry(entry: dict[str, Any]) -> LLMResponse:
    content = list(entry.get("content") or [])
    calls = [ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input"))
             for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    text = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    usage = Usage(**{k: int(v) for k, v in (entry.get("usage") or {}).items() if k in Usage.__dataclass_fields__})
    return LLMResponse(text=text, tool_calls=calls, stop_reason=entry.get("stop_reason"), usage=usage,
                       model=str(entry.get("model", "")), content=content, attempts=int(entry.get("attempts", 1)),
                       cost_usd=entry.get("cost_usd"))
