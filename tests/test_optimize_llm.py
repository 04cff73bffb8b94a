"""The agent loop driven by a fake Messages API through the real anthropic SDK.

The planner makes a malformed tool call first; the executor's first request meets a 529
(retried); its first answer is malformed, its second a wrong kernel that gate 2 rejects on the
CPU backend, and the gate's message must arrive in the next request, which answers with a
correct, faster kernel that all four gates accept. A second test kills a run and resumes it:
recorded LLM answers are replayed, never requested (or paid for) again.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import H200_DUMPS, one_program_example_candidate  # noqa: E402
from fake_anthropic import FakeAnthropic, Reply, message, overloaded, text_block, tool_use  # noqa: E402
from test_search_pipeline import StandInEvaluator  # noqa: E402

from kernelopt_core.artifacts import parse_output_code  # noqa: E402
from kernelopt_core.search.pipeline import OptimizeConfig, optimize  # noqa: E402
from kernelopt_core.search.rewrites import parse_kernel_module  # noqa: E402
from kernelopt_core.search.rewrites.kernel_source import LaunchConfig, with_launch_config  # noqa: E402


class ScriptedAgents:
    """Answers by agent (recognised by the tools offered), recording what each agent was sent."""

    def __init__(self, good: str | list[str], wrong: str | None, overload_first_executor: bool = True):
        self.good = [good] if isinstance(good, str) else good
        self.good_sent = 0
        self.wrong = wrong
        self.overload = overload_first_executor
        self.sent: dict[str, list[dict[str, Any]]] = {"planner": [], "executor": [], "summarizer": []}

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        tools = {t["name"] for t in body.get("tools", [])}
        if "submit_plan" in tools:
            self.sent["planner"].append(body)
            if len(self.sent["planner"]) == 1:
                return message(tool_use("query_profiling_context", {"aspect": "tier"}),
                               tool_use("submit_plan", {"direction": "bigger blocks"}))  # rationale missing
            return message(tool_use("submit_plan", {
                "direction": "process 64 rows per program", "family": "launch_config",
                "rationale": "the interpreter pays per program", "evidence": ["XBLOCK=1: 64 programs"]}))
        if "submit_kernel" in tools:
            if self.overload:
                self.overload = False
                return overloaded()
            self.sent["executor"].append(body)
            n = len(self.sent["executor"])
            if n == 1:
                return message(tool_use("submit_kernel", {"change_summary": "forgot the source"}))
            if n == 2 and self.wrong is not None:
                return message(text_block("Trying a fused variant."),
                               tool_use("submit_kernel", {"kernel_source": self.wrong, "change_summary": "fused"}))
            source = self.good[self.good_sent % len(self.good)]
            self.good_sent += 1
            return message(tool_use("submit_kernel", {"kernel_source": source, "change_summary": "bigger blocks"}))
        if "submit_experience" in tools:
            self.sent["summarizer"].append(body)
            return message(tool_use("submit_experience", {
                "speedup": 99.0, "rewrite_type": "launch_config", "direction": "bigger blocks",
                "strategy_title": "fewer programs", "memory_update": "append",
                "applicable_when": "many small rows"}), input_tokens=400, output_tokens=80)
        return message(text_block("no tools?"))


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # in-process and against a local fake API: only the gates' own work takes time
def test_llm_loop_with_rejection_feedback_and_acceptance(cpu_example_dump: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = parse_output_code(str(cpu_example_dump)).kernels[0]
    good = one_program_example_candidate(kernel)
    wrong = good.replace("tmp63 = tmp60 + tmp62", "tmp63 = tmp60 - tmp62")
    assert wrong != good
    agents = ScriptedAgents(good, wrong)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake-key")
    with FakeAnthropic(responder=agents) as server:
        config = OptimizeConfig(provider="anthropic", model="claude-sonnet-4-6", base_url=server.url,
                                beam_width=1, iterations=1, plans=1, retries=3, ab_rounds=4,
                                api_base_delay_s=0.01, run_root=str(tmp_path / "runs"),
                                memory_path=str(tmp_path / "memory.sqlite"))
        result = optimize(str(cpu_example_dump), config=config)
    # The planner's malformed call was answered with the schema error, then a valid plan came.
    second_planner = tool_results(agents.sent["planner"][1])
    assert any(r.get("is_error") and "missing required field(s): rationale" in r["content"] for r in second_planner)
    assert any("tier" in r["content"] and not r.get("is_error") for r in second_planner)
    # The executor: malformed -> fed back; wrong kernel -> gate 2 rejected it -> its message fed back.
    executor = agents.sent["executor"]
    assert len(executor) == 3
    opening = json.dumps(executor[0]["messages"][0])
    assert "process 64 rows per program" in opening and kernel.name in opening  # the plan and the kernel
    fed_malformed = tool_results(executor[1])
    assert fed_malformed[0]["is_error"] and "kernel_source" in fed_malformed[0]["content"]
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    rejected = next(e for e in journal if e["kind"] == "screen" and not e["passed"])
    assert rejected["failed_gate"] == 2
    fed_gate = tool_results(executor[2])
    assert fed_gate[0]["is_error"] and fed_gate[0]["content"] == rejected["value"]["reason"]
    assert "gate 2" in fed_gate[0]["content"]
    # The correct kernel went through all four gates.
    assert result.decision == "optimized", result.reason
    assert result.speedup and result.speedup >= 1.03 and result.ci and result.ci[0] >= 1.03
    assert result.accepted_sources[kernel.name] == good
    # Token and cost accounting, per call in the journal and per run in the result.
    llm = [e for e in journal if e["kind"] == "llm"]
    assert len(llm) == len(server.requests) - 1  # every answered request; the 529 was retried, not answered
    assert all(e["usage"]["input_tokens"] > 0 for e in llm)
    assert Counter(e["agent"] for e in llm) == Counter({"planner": 2, "executor": 3, "summarizer": 2})
    usage = result.llm_usage
    assert usage["calls"] == len(llm) and usage["retries"] == 1
    assert usage["input_tokens"] == sum(e["usage"]["input_tokens"] for e in llm)
    assert usage["cost_usd"] > 0
    # The summarizer's invented speedup was replaced by the measured one.
    experiences = [e for e in journal if e["kind"] == "experience"]
    assert experiences[-1]["item"]["speedup"] != 99.0 and experiences[-1]["item"]["strategy_title"] == "fewer programs"
    report = Path(result.run_dir, "report.md").read_text()
    assert "LLM usage" in report and "**decision: optimized**" in report
    assert all(r.headers.get("x-api-key") == "sk-fake-key" or r.headers.get("authorization") == "Bearer sk-fake-key"
               for r in server.requests)


def test_resumed_llm_run_replays_recorded_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump = str(H200_DUMPS / "elementwise" / "output_code.py")
    kernel = parse_output_code(dump).kernels[0]
    module = parse_kernel_module(kernel.source, kernel.name)
    goods = [with_launch_config(module, LaunchConfig.of({"XBLOCK": x}, 8)) for x in (2048, 4096, 512)]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake-key")
    settings = dict(provider="anthropic", model="claude-sonnet-4-6", beam_width=1, iterations=2, plans=1,
                    retries=3, api_base_delay_s=0.01, run_root=str(tmp_path / "runs"),
                    memory_path=str(tmp_path / "memory.sqlite"), early_stop=False)
    with FakeAnthropic(responder=ScriptedAgents(goods, None, overload_first_executor=False)) as first:
        config = OptimizeConfig(base_url=first.url, **settings)
        with pytest.raises(KeyboardInterrupt):
            optimize(dump, config=config, evaluator=StandInEvaluator(stop_after_screens=1))
    (run_dir,) = list((tmp_path / "runs").iterdir())
    recorded = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    recorded_llm = [e for e in recorded if e["kind"] == "llm"]
    assert recorded_llm and len(first.requests) == len(recorded_llm)
    with FakeAnthropic(responder=ScriptedAgents(goods, None, overload_first_executor=False)) as second:
        config = OptimizeConfig(base_url=second.url, **settings)
        result = optimize("", config=config, resume=run_dir.name, evaluator=StandInEvaluator())
    entries = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    llm = [e for e in entries if e["kind"] == "llm"]
    assert len(second.requests) == len(llm) - len(recorded_llm) > 0  # only new calls reached the API
    assert not [e for e in entries if e["kind"] == "llm_error"]
    assert Counter(e["key"] for e in llm).most_common(1)[0][1] == 1
    assert result.llm_usage["calls"] == len(llm)  # the totals include the calls made before the kill
    assert result.decision in ("optimized", "matched")
