"""A tool-use conversation with one agent: send, answer tool calls, feed back errors.

Every call goes through the provider (which retries transient API errors). A tool call whose
input does not fit its schema is answered with an error ``tool_result`` so the model can fix it;
such malformed calls count against the agent's attempt limit, never crash the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import LLMProvider, LLMResponse, ToolCall, ToolSpec
from ..prompts import check_tool_input


@dataclass
class Conversation:
    provider: LLMProvider
    agent: str
    system: str
    tools: list[ToolSpec]
    messages: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 8192
    on_response: Callable[[str, LLMResponse], None] | None = None  # journal hook

    def send(self, content: str | list[dict[str, Any]], tool_choice: dict[str, Any] | None = None) -> LLMResponse:
        self.messages.append({"role": "user", "content": content})
        response = self.provider.complete(self.system, self.messages, self.tools, tool_choice,
                                          self.max_tokens, agent=self.agent)
        self.messages.append({"role": "assistant", "content": response.content or [{"type": "text", "text": ""}]})
        if self.on_response is not None:
            self.on_response(self.agent, response)
        return response

    def validate(self, call: ToolCall) -> str | None:
        tool = next((t for t in self.tools if t.name == call.name), None)
        if tool is None:
            return f"unknown tool {call.name!r}; available: {', '.join(t.name for t in self.tools)}"
        return check_tool_input(tool, call.input)


def tool_result(call_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def compact_json(value: Any, limit: int = 6000) -> str:
    text = json.dumps(value, indent=1, default=str)
    return text if len(text) <= limit else text[:limit] + "\n... (truncated)"
