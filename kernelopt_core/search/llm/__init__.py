"""LLM providers behind one small interface: ``anthropic``, ``vertex``, and ``offline`` (no LLM).

``make_provider("offline")`` returns None: the agents then use their deterministic strategies
(the rewrite families) instead of a model.
"""

from __future__ import annotations

from .anthropic_provider import AnthropicProvider, RetryPolicy
from .base import (
    CallRecord,
    LLMProvider,
    LLMResponse,
    ProviderConfigError,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
    UsageLedger,
)

PROVIDERS = ("offline", "anthropic", "vertex")


def make_provider(name: str, model: str, *, retry: RetryPolicy | None = None, ledger: UsageLedger | None = None,
                  base_url: str | None = None) -> LLMProvider | None:
    """Build a provider by name; None for ``offline``. Raises :class:`ProviderConfigError`."""
    if name == "offline":
        return None
    if name == "anthropic":
        return AnthropicProvider(model, retry=retry, ledger=ledger, base_url=base_url)
    if name == "vertex":
        from .vertex_provider import VertexProvider

        return VertexProvider(model, retry=retry, ledger=ledger, base_url=base_url)
    raise ProviderConfigError(f"unknown provider {name!r} (choose one of {', '.join(PROVIDERS)})")


__all__ = [
    "PROVIDERS", "AnthropicProvider", "CallRecord", "LLMProvider", "LLMResponse", "ProviderConfigError",
    "ProviderError", "RetryPolicy", "ToolCall", "ToolSpec", "Usage", "UsageLedger", "make_provider",
]
