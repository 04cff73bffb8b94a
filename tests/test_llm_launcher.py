"""A launcher candidate written by the LLM executor, driven through the real anthropic SDK against a fake
Messages API on 127.0.0.1, then through the real gates on a CPU-backend graph (avg_pool1d, tiny).

The executor's prompt and tool schema describe launchers and scratch (with the worked example). Its
first answer is a launcher whose parameters differ from the wrapper's arguments: the executor answers
that itself, before any gate. The second computes the wrong window: gate 2 rejects it and its message
is the next tool result. The third is right and passes gates 2 and 3 (and 1 once gate 1 knows launchers).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeAnthropic, Reply, message, tool_use  # noqa: E402
from window_dumps import compiled_window_graphs, context_for, gate_one_takes_launchers  # noqa: E402

from kernelopt_core.gates import CascadeConfig, run_cascade  # noqa: E402
from kernelopt_core.search.agents import Executor, KernelBrief, Plan  # noqa: E402
from kernelopt_core.search.agents.executor import candidate_kind  # noqa: E402
from kernelopt_core.search.llm import AnthropicProvider, RetryPolicy  # noqa: E402
from kernelopt_core.search.prompts import load_prompt, load_text  # noqa: E402
from kernelopt_core.search.rewrites.launcher_source import runtime_params  # noqa: E402
from kernelopt_core.search.rewrites.window_model import recognise_window  # noqa: E402
from kernelopt_core.search.rewrites.windowed import WindowPlan, generate_launcher  # noqa: E402


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_window_graphs(tmp_path_factory)


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []


def test_an_llm_launcher_goes_through_the_gates(graphs: dict[str, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    graph, kernel, ctx = context_for("avg_pool1d", graphs["avg_pool1d"])
    params = runtime_params(ctx.module)
    window = recognise_window(ctx.module, ctx.evidence["launch_args"])
    plan_rows = WindowPlan("shifted", 128, 1, 4)
    good = generate_launcher(window, plan_rows, kernel.name, params)
    wrong = generate_launcher(replace(window, padding=(0, window.padding[1] - 1)), plan_rows, kernel.name, params)
    bad_signature = good.replace(f"def {kernel.name}({', '.join(params)}):", f"def {kernel.name}(in_ptr0, out_ptr0):")
    assert bad_signature != good
    answers = [bad_signature, wrong, good]
    sent: list[dict[str, Any]] = []

    def responder(body: dict[str, Any], index: int) -> Reply:
        sent.append(body)
        source = answers[min(len(sent), len(answers)) - 1]
        return message(tool_use("submit_kernel", {"kernel_source": source, "kind": "launcher",
                                                  "change_summary": "each input row loaded once; targets the ideal "
                                                                    "bytes"}))

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake-key")
    gates = (1, 2, 3) if gate_one_takes_launchers(kernel.source, kernel.name, good) else (2, 3)
    outcomes = []
    with FakeAnthropic(responder=responder) as server:
        provider = AnthropicProvider("claude-sonnet-4-6", base_url=server.url, retry=RetryPolicy(base_delay_s=0.01))
        executor = Executor(provider, load_prompt("executor"), load_text("launcher_contract.md"), retries=3)
        brief = KernelBrief(name=kernel.name, kind="poi", device="cpu", original_source=kernel.source,
                            speed_of_light={"ideal_bytes": 4160, "causes": ["strided-access"]})
        plan = Plan(direction="load each input row once, windows from block scans", rationale="8 loads per output",
                    evidence=["8 loads of in_ptr0 at different offsets"], family="windowed", origin="llm")
        session = executor.start(plan, brief, kernel.source, ctx, set())
        feedback = None
        for _ in range(3):
            proposal = session.propose(feedback)
            if proposal is None:
                feedback = session.error
                outcomes.append(("not submitted", session.error))
                continue
            assert proposal.params == {"kind": "launcher"}
            result = run_cascade(graph, {kernel.name: proposal.source},
                                 CascadeConfig(run_gates=gates, workdir=str(tmp_path)))
            outcomes.append((result.failed_gate, result.reason))
            if result.accepted:
                break
            feedback = result.reason
    assert len(sent) == 3
    # The system prompt and the tool describe both kinds of candidate, with the worked example.
    system = json.dumps(sent[0]["system"])
    assert "launcher module" in system and "torch.empty" in system and "_partial_rows" in system
    tool = next(t for t in sent[0]["tools"] if t["name"] == "submit_kernel")
    assert tool["input_schema"]["properties"]["kind"]["enum"] == ["kernel", "launcher"]
    assert f"takes ({', '.join(params)})" in json.dumps(sent[0]["messages"][0])
    # 1: refused before the gates, and told why.
    assert outcomes[0][0] == "not submitted"
    first = _results(sent[1])
    assert first[0]["is_error"] and f"the wrapper passes ({', '.join(params)})" in first[0]["content"]
    # 2: gate 2 found the wrong window, and its message came back.
    assert outcomes[1][0] == 2 and "differ" in outcomes[1][1]
    second = _results(sent[2])
    assert second[0]["is_error"] and second[0]["content"] == outcomes[1][1]
    # 3: accepted by the gates that ran.
    assert outcomes[2] == (None, outcomes[2][1]) and "passed gates" in outcomes[2][1]


def test_the_executor_checks_a_submissions_kind() -> None:
    plain = "import triton\n@triton.jit\ndef k(in_ptr0, xnumel, XBLOCK: tl.constexpr):\n    pass\n"
    launcher = "import torch\ndef k(in_ptr0, xnumel):\n    pass\n"
    assert candidate_kind(plain, "k", ["in_ptr0", "xnumel"]) == ("kernel", None)
    assert candidate_kind(launcher, "k", ["in_ptr0", "xnumel"], "launcher") == ("launcher", None)
    assert "kind is 'kernel'" in candidate_kind(launcher, "k", ["in_ptr0", "xnumel"], "kernel")[1]
    assert "defines no function named k" in candidate_kind("x = 1\n", "k", ["in_ptr0"])[1]
    assert "the wrapper passes (in_ptr0, xnumel)" in candidate_kind(launcher.replace(", xnumel", ""), "k",
                                                                    ["in_ptr0", "xnumel"])[1]
    assert "does not parse" in candidate_kind("def k(:\n", "k", None)[1]
