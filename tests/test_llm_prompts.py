"""The prompt templates and tool schemas in prompts/: present, valid, editable, and enforced."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt_core.search.prompts import AGENTS, PromptError, check_tool_input, load_prompt, load_text

REQUIRED_TOOLS = {
    "planner": {"query_profiling_context", "get_kernel_source", "search_memory", "submit_plan"},
    "executor": {"submit_kernel"},
    "summarizer": {"submit_experience"},
    "profiler": {"submit_ncu_config"},
}


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agent_has_a_template_and_its_tools(agent: str) -> None:
    prompt = load_prompt(agent)
    assert {t.name for t in prompt.tools} == REQUIRED_TOOLS[agent]
    for tool in prompt.tools:
        assert tool.description and tool.input_schema["type"] == "object"
    rendered = prompt.render(kernel_name="triton_poi_x", plans=4, retries=4, capacity=8, launcher_contract="C",
                             families="F", recent_directions="none", diversity_note="", sections="S", known="K",
                             speed_of_light="65% of speed of light")
    assert "$" not in rendered.replace("$$", "")  # every placeholder is filled


def test_submit_kernel_schema_is_enforced() -> None:
    tool = load_prompt("executor").tool("submit_kernel")
    assert check_tool_input(tool, {"kernel_source": "x", "change_summary": "y"}) is None
    assert "missing required field(s): kernel_source" in check_tool_input(tool, {"change_summary": "y"})
    assert "must be a string" in check_tool_input(tool, {"kernel_source": 3, "change_summary": "y"})
    assert "expects a JSON object" in check_tool_input(tool, ["not", "an", "object"])
    aspect = load_prompt("planner").tool("query_profiling_context")
    assert "must be one of" in check_tool_input(aspect, {"aspect": "weather"})


def test_templates_are_user_editable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "planner.md").write_text("Plan $plans things for $kernel_name, costs $$5.")
    monkeypatch.setenv("KERNELOPT_PROMPTS_DIR", str(tmp_path))
    prompt = load_prompt("planner")
    assert prompt.render(plans=2, kernel_name="k") == "Plan 2 things for k, costs $5."
    assert prompt.tools == []  # no tools file beside it: none
    (tmp_path / "executor.md").write_text("x")
    (tmp_path / "executor.tools.json").write_text("{broken")
    with pytest.raises(PromptError, match="executor.tools.json: not valid JSON"):
        load_prompt("executor")
    with pytest.raises(PromptError, match="summarizer.md: cannot read"):
        load_prompt("summarizer")
    with pytest.raises(PromptError, match="launcher_contract.md"):
        load_text("launcher_contract.md")


def test_the_launcher_contract_names_fixed_config() -> None:
    assert "fixed_config" in load_text("launcher_contract.md")
