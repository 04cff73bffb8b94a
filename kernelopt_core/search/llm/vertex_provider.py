"""The ``vertex`` provider: Claude on Google Cloud Vertex AI through ``anthropic.AnthropicVertex``.

Region from ``CLOUD_ML_REGION`` (or config), project from ``ANTHROPIC_VERTEX_PROJECT_ID`` /
``GOOGLE_CLOUD_PROJECT`` (or config). Credentials are Google's application-default
credentials unless ``access_token`` is given; they are checked when the provider is built so
a missing login is reported before a search starts, not in the middle of it.
"""

from __future__ import annotations

import os
from typing import Any

from .anthropic_provider import RetryPolicy, build_request, call_with_retries
from .base import LLMResponse, ProviderConfigError, ToolSpec, UsageLedger


class VertexProvider:
    name = "vertex"

    def __init__(self, model: str, *, region: str | None = None, project_id: str | None = None,
                 access_token: str | None = None, base_url: str | None = None, retry: RetryPolicy | None = None,
                 ledger: UsageLedger | None = None):
        self.model = model
        self.retry = retry or RetryPolicy()
        self.ledger = ledger or UsageLedger()
        self.region = region or os.environ.get("CLOUD_ML_REGION")
        self.project_id = (project_id or os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID")
                           or os.environ.get("GOOGLE_CLOUD_PROJECT"))
        if not self.region:
            raise ProviderConfigError("the vertex provider needs a region: set CLOUD_ML_REGION (e.g. us-east5), "
                                      "or run with --provider offline")
        if access_token is None:
            access_token = _application_default_token()
        try:
            from anthropic import AnthropicVertex
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ProviderConfigError("the anthropic package is not installed; or run with --provider offline") from exc
        kwargs: dict[str, Any] = {"region": self.region, "access_token": access_token, "max_retries": 0,
                                  "timeout": self.retry.timeout_s}
        if self.project_id:
            kwargs["project_id"] = self.project_id
        if base_url:
            kwargs["base_url"] = base_url
        self._client = AnthropicVertex(**kwargs)

    def complete(self, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec] | None = None,
                 tool_choice: dict[str, Any] | None = None, max_tokens: int = 8192, agent: str = "") -> LLMResponse:
        request = build_request(self.model, system, messages, tools, tool_choice, max_tokens)
        return call_with_retries(self._client, request, self.retry, self.ledger, agent, self.name)


def _application_default_token() -> str:
    """A bearer token from Google's application-default credentials, or a clear error."""
    try:
        import google.auth
        import google.auth.transport.requests
    except ImportError:
        raise ProviderConfigError(
            "the vertex provider needs Google authentication: pip install 'anthropic[vertex]' and run "
            "`gcloud auth application-default login` (or run with --provider offline)") from None
    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        credentials.refresh(google.auth.transport.requests.Request())
    except Exception as exc:  # noqa: BLE001 - google-auth raises several unrelated types
        raise ProviderConfigError(
            f"no usable Google credentials for Vertex AI ({type(exc).__name__}: {exc}); run "
            "`gcloud auth application-default login`, or run with --provider offline") from None
    token = getattr(credentials, "token", None)
    if not token:
        raise ProviderConfigError("Google credentials gave no access token; run "
                                  "`gcloud auth application-default login`, or --provider offline")
    return str(token)
