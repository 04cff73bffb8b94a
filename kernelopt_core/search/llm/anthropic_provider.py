"""The ``anthropic`` provider: the official SDK's Messages API with tool use.

* The key comes from ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``) or ``ANTHROPIC_AUTH_TOKEN``
  (sent as ``Authorization: Bearer``); ``ANTHROPIC_BASE_URL`` is honoured by the SDK.
* Retries are ours, not the SDK's (it is built with ``max_retries=0``), so every attempt is
  counted: 429, 5xx, 529 overloaded, timeouts and dropped connections back off exponentially
  (with jitter, honouring ``retry-after``); other errors fail at once with the API's message.
* The large static parts of a request are marked for prompt caching
  (``cache_control: {"type": "ephemeral"}``): the system prompt, the tool list and the first
  user block (the kernel and its profile), which repeat across an agent's calls.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any

from .base import (
    CallRecord,
    LLMResponse,
    ProviderConfigError,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
    UsageLedger,
)
from .pricing import cost_usd

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}
CACHE = {"type": "ephemeral"}


@dataclass
class RetryPolicy:
    max_retries: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    timeout_s: float = 300.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_delay_s)
        backoff = min(self.base_delay_s * (2 ** attempt), self.max_delay_s)
        return backoff * (0.75 + 0.5 * random.random())


def missing_key_message(provider: str) -> str:
    return (f"the {provider} provider needs an API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), "
            "or run without an LLM using --provider offline")


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, model: str, *, api_key: str | None = None, auth_token: str | None = None,
                 base_url: str | None = None, retry: RetryPolicy | None = None, ledger: UsageLedger | None = None,
                 client: Any = None):
        self.model = model
        self.retry = retry or RetryPolicy()
        self.ledger = ledger or UsageLedger()
        self._client = client if client is not None else self._make_client(api_key, auth_token, base_url)

    def _make_client(self, api_key: str | None, auth_token: str | None, base_url: str | None) -> Any:
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        auth_token = auth_token or os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        if not api_key and not auth_token:
            raise ProviderConfigError(missing_key_message(self.name))
        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ProviderConfigError("the anthropic package is not installed (pip install anthropic), "
                                      "or run with --provider offline") from exc
        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.retry.timeout_s}
        if base_url:
            kwargs["base_url"] = base_url
        if api_key:
            kwargs["api_key"] = api_key
        else:
            kwargs["auth_token"] = auth_token
        return anthropic.Anthropic(**kwargs)

    def complete(self, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None,
                 tool_choice: dict[str, Any] | None = None, max_tokens: int = 8192, agent: str = "") -> LLMResponse:
        request = build_request(self.model, system, messages, tools, tool_choice, max_tokens)
        return call_with_retries(self._client, request, self.retry, self.ledger, agent, self.name)


def build_request(model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec] | None,
                  tool_choice: dict[str, Any] | None, max_tokens: int) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": system, "cache_control": CACHE}],
        "messages": _with_cached_context(messages),
    }
    if tools:
        specs = [tool.to_api() for tool in tools]
        specs[-1] = {**specs[-1], "cache_control": CACHE}
        request["tools"] = specs
    if tool_choice:
        request["tool_choice"] = tool_choice
    return request


def _with_cached_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark the first user block (the static kernel/profile context) for prompt caching."""
    if not messages or messages[0].get("role") != "user":
        return messages
    first = messages[0]
    content = first["content"]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if isinstance(content, str) \
        else [dict(b) for b in content]
    if blocks:
        blocks[0] = {**blocks[0], "cache_control": CACHE}
    return [{**first, "content": blocks}, *messages[1:]]


def call_with_retries(client: Any, request: dict[str, Any], retry: RetryPolicy, ledger: UsageLedger, agent: str,
                      provider: str) -> LLMResponse:
    import anthropic

    begin = time.monotonic()
    last_error = ""
    for attempt in range(retry.max_retries + 1):
        try:
            response = client.messages.create(**request)
        except anthropic.APITimeoutError:
            last_error = f"timed out after {retry.timeout_s:g} s"
            retry_after = None
        except anthropic.APIConnectionError as exc:
            last_error = f"connection failed: {exc}"
            retry_after = None
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise ProviderConfigError(f"{provider} rejected the credentials ({_api_message(exc)}); check the key, "
                                      "or run with --provider offline") from None
        except anthropic.APIStatusError as exc:
            if exc.status_code not in RETRY_STATUSES:
                raise ProviderError(f"{provider} API error {exc.status_code}: {_api_message(exc)}") from None
            last_error = f"HTTP {exc.status_code} ({_api_message(exc)})"
            retry_after = _retry_after(exc)
        else:
            return _to_response(response, attempt + 1, time.monotonic() - begin, ledger, agent)
        if attempt < retry.max_retries:
            time.sleep(retry.delay(attempt, retry_after))
    raise ProviderError(f"{provider} did not answer after {retry.max_retries + 1} attempt(s): {last_error}")


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _to_response(response: Any, attempts: int, seconds: float, ledger: UsageLedger, agent: str) -> LLMResponse:
    content: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content or []:
        data = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
        content.append(data)
        if data.get("type") == "text":
            texts.append(data.get("text", ""))
        elif data.get("type") == "tool_use":
            calls.append(ToolCall(id=str(data.get("id", "")), name=str(data.get("name", "")), input=data.get("input")))
    raw = response.usage
    usage = Usage(
        input_tokens=int(getattr(raw, "input_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cache_creation_input_tokens=int(getattr(raw, "cache_creation_input_tokens", 0) or 0),
        cache_read_input_tokens=int(getattr(raw, "cache_read_input_tokens", 0) or 0),
    )
    model = str(getattr(response, "model", "") or "")
    cost = cost_usd(model, usage)
    ledger.add(CallRecord(agent=agent, model=model, usage=usage, cost_usd=cost, attempts=attempts, seconds=seconds))
    return LLMResponse(text="".join(texts), tool_calls=calls, stop_reason=getattr(response, "stop_reason", None),
                       usage=usage, model=model, content=content, attempts=attempts, cost_usd=cost)
