"""The LLM providers against a fake Messages API server reached by the real anthropic SDK."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeAnthropic, error, message, overloaded, text_block, tool_use  # noqa: E402

from kernelopt_core.search.llm import (  # noqa: E402
    AnthropicProvider,
    ProviderConfigError,
    ProviderError,
    RetryPolicy,
    ToolSpec,
    UsageLedger,
    make_provider,
)
from kernelopt_core.search.llm.pricing import cost_usd, price_of  # noqa: E402

FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05, timeout_s=5.0)
TOOL = ToolSpec("submit_kernel", "submit a kernel", {"type": "object", "properties": {"kernel_source": {"type": "string"}},
                                                      "required": ["kernel_source"]})


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLOUD_ML_REGION",
                 "ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)


def test_api_key_tool_use_caching_and_usage(no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic([message(text_block("thinking"), tool_use("submit_kernel", {"kernel_source": "x"}),
                                input_tokens=1000, output_tokens=200, cache_read=5000)]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)  # the SDK itself reads it
        ledger = UsageLedger()
        provider = make_provider("anthropic", "claude-sonnet-4-6", retry=FAST, ledger=ledger)
        assert provider is not None
        reply = provider.complete("SYSTEM PROMPT", [{"role": "user", "content": "KERNEL CONTEXT"}], tools=[TOOL],
                                  tool_choice={"type": "any"}, agent="executor")
    assert [c.name for c in reply.tool_calls] == ["submit_kernel"]
    assert reply.tool_calls[0].input == {"kernel_source": "x"}
    assert reply.text == "thinking"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    # SDK 2.x sends an API key as a bearer token; older SDKs used x-api-key. Either way, the key arrives.
    assert sent_key(request.headers) == "sk-test-key"
    assert request.headers.get("anthropic-version")
    body = request.body
    assert body["model"] == "claude-sonnet-4-6"
    assert body["system"][0] == {"type": "text", "text": "SYSTEM PROMPT", "cache_control": {"type": "ephemeral"}}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {"type": "any"}
    totals = ledger.totals()
    assert totals["input_tokens"] == 1000 and totals["output_tokens"] == 200
    assert totals["cache_read_input_tokens"] == 5000
    expected = (1000 * 3.0 + 200 * 15.0 + 5000 * 0.3) / 1e6
    assert totals["cost_usd"] == pytest.approx(expected)


def test_auth_token_is_sent_as_bearer(no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic([message(text_block("ok"))]) as server:
        monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-123")
        provider = AnthropicProvider("claude-sonnet-4-6", base_url=server.url, retry=FAST)
        provider.complete("s", [{"role": "user", "content": "u"}])
    assert server.requests[0].headers["authorization"] == "Bearer tok-123"
    assert "x-api-key" not in server.requests[0].headers


def sent_key(headers: dict[str, str]) -> str | None:
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def test_overloaded_and_rate_limits_are_retried(no_keys: None) -> None:
    script = [overloaded(), error(429, "rate_limit_error", "slow down", retry_after=0.01),
              error(500, "api_error", "boom"), message(text_block("finally"))]
    with FakeAnthropic(script) as server:
        ledger = UsageLedger()
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="k", base_url=server.url, retry=FAST, ledger=ledger)
        reply = provider.complete("s", [{"role": "user", "content": "u"}])
    assert reply.text == "finally"
    assert reply.attempts == 4
    assert len(server.requests) == 4
    assert ledger.totals()["retries"] == 3


def test_retries_run_out_with_a_clear_error(no_keys: None) -> None:
    with FakeAnthropic([overloaded(), overloaded(), overloaded()]) as server:
        retry = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02, timeout_s=5.0)
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="k", base_url=server.url, retry=retry)
        with pytest.raises(ProviderError, match=r"3 attempt\(s\).*529"):
            provider.complete("s", [{"role": "user", "content": "u"}])


def test_a_timeout_is_retried_then_answered(no_keys: None) -> None:
    slow = message(text_block("too late"))
    slow.delay_s = 3.0
    with FakeAnthropic([slow, message(text_block("on time"))]) as server:
        retry = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02, timeout_s=1.0)
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="k", base_url=server.url, retry=retry)
        reply = provider.complete("s", [{"role": "user", "content": "u"}])
    assert reply.text == "on time"
    assert reply.attempts == 2


def test_timeouts_every_time_fail_cleanly(no_keys: None) -> None:
    replies = [message(text_block("late")) for _ in range(2)]
    for reply in replies:
        reply.delay_s = 2.0
    with FakeAnthropic(replies) as server:
        retry = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02, timeout_s=0.5)
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="k", base_url=server.url, retry=retry)
        with pytest.raises(ProviderError, match="timed out"):
            provider.complete("s", [{"role": "user", "content": "u"}])


def test_bad_request_is_not_retried(no_keys: None) -> None:
    with FakeAnthropic([error(400, "invalid_request_error", "messages: field required")]) as server:
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="k", base_url=server.url, retry=FAST)
        with pytest.raises(ProviderError, match="400: messages: field required"):
            provider.complete("s", [{"role": "user", "content": "u"}])
    assert len(server.requests) == 1


def test_rejected_key_suggests_offline(no_keys: None) -> None:
    with FakeAnthropic([error(401, "authentication_error", "invalid x-api-key")]) as server:
        provider = AnthropicProvider("claude-sonnet-4-6", api_key="bad", base_url=server.url, retry=FAST)
        with pytest.raises(ProviderConfigError, match="--provider offline"):
            provider.complete("s", [{"role": "user", "content": "u"}])


def test_missing_key_suggests_offline(no_keys: None) -> None:
    with pytest.raises(ProviderConfigError, match="ANTHROPIC_API_KEY.*--provider offline"):
        make_provider("anthropic", "claude-sonnet-4-6")


def test_offline_is_no_llm_and_unknown_provider_is_refused() -> None:
    assert make_provider("offline", "any") is None
    with pytest.raises(ProviderConfigError, match="unknown provider 'gpt'"):
        make_provider("gpt", "m")


def test_vertex_needs_a_region(no_keys: None) -> None:
    with pytest.raises(ProviderConfigError, match="CLOUD_ML_REGION"):
        make_provider("vertex", "claude-sonnet-4-5@20250929")


def test_vertex_without_google_auth_says_how_to_fix(no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setitem(sys.modules, "google", None)  # google-auth absent (as here) or hidden
    with pytest.raises(ProviderConfigError, match=r"anthropic\[vertex\].*--provider offline"):
        make_provider("vertex", "claude-sonnet-4-5@20250929")


def test_vertex_builds_with_a_token_and_reaches_the_api(no_keys: None) -> None:
    from kernelopt_core.search.llm.vertex_provider import VertexProvider

    with FakeAnthropic([message(text_block("hi from vertex"))]) as server:
        provider = VertexProvider("claude-sonnet-4-5@20250929", region="us-east5", project_id="proj",
                                  access_token="ya29.token", base_url=server.url, retry=FAST)
        reply = provider.complete("s", [{"role": "user", "content": "u"}])
    assert reply.text == "hi from vertex"
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer ya29.token"
    assert "claude-sonnet-4-5@20250929" in request.path  # Vertex puts the model in the URL


def test_prices() -> None:
    assert price_of("claude-sonnet-4-5-20250929").input == 3.0
    assert price_of("claude-opus-4-5@20251101").output == 25.0
    assert price_of("some-other-model") is None
    from kernelopt_core.search.llm import Usage

    assert cost_usd("unknown", Usage(10, 10)) is None
