"""The agents' prompt templates and tool schemas, read from plain files the user can edit.

``prompts/<agent>.md`` is a ``string.Template`` (``$name`` placeholders; a literal ``$`` is
``$$``) and ``prompts/<agent>.tools.json`` the tool list beside it. ``$KERNELOPT_PROMPTS_DIR``
points at another folder (e.g. a user's edited copy).
"""

from __future__ import annotations

import json
import os
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .llm.base import ToolSpec

AGENTS = ("planner", "executor", "summarizer", "profiler")
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "prompts"


class PromptError(ValueError):
    """A template or tool file is missing or malformed (the message names the file)."""


@dataclass
class AgentPrompt:
    agent: str
    template: string.Template
    tools: list[ToolSpec]
    path: str

    def render(self, **values: Any) -> str:
        """The system prompt; unknown placeholders are left as written, never a crash."""
        return self.template.safe_substitute({k: str(v) for k, v in values.items()})

    def tool(self, name: str) -> ToolSpec:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise PromptError(f"{self.path}: no tool named {name!r}")


# Where a wheel install puts the templates (setuptools data-files: share/kernelopt/prompts).
INSTALLED_DIR = Path(sys.prefix) / "share" / "kernelopt" / "prompts"


def prompts_dir() -> Path:
    explicit = os.environ.get("KERNELOPT_PROMPTS_DIR")
    if explicit:
        return Path(explicit)
    return DEFAULT_DIR if DEFAULT_DIR.is_dir() or not INSTALLED_DIR.is_dir() else INSTALLED_DIR


def load_prompt(agent: str, root: Path | None = None) -> AgentPrompt:
    root = root or prompts_dir()
    template_path = root / f"{agent}.md"
    tools_path = root / f"{agent}.tools.json"
    try:
        template = template_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{template_path}: cannot read the {agent} prompt ({exc.strerror})") from None
    tools: list[ToolSpec] = []
    if tools_path.exists():
        try:
            raw = json.loads(tools_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PromptError(f"{tools_path}: not valid JSON ({exc})") from None
        if not isinstance(raw, list):
            raise PromptError(f"{tools_path}: expected a list of tools")
        for item in raw:
            if not isinstance(item, dict) or not {"name", "input_schema"} <= set(item):
                raise PromptError(f"{tools_path}: every tool needs a name and an input_schema")
            tools.append(ToolSpec(str(item["name"]), str(item.get("description", "")), dict(item["input_schema"])))
    return AgentPrompt(agent, string.Template(template), tools, str(template_path))


def load_text(name: str, root: Path | None = None) -> str:
    path = (root or prompts_dir()) / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read ({exc.strerror})") from None


def check_tool_input(tool: ToolSpec, value: Any) -> str | None:
    """Why a tool call's input does not fit the tool's schema (required keys and basic types), or None."""
    if not isinstance(value, dict):
        return f"{tool.name} expects a JSON object, got {type(value).__name__}"
    schema = tool.input_schema
    missing = [key for key in schema.get("required", []) if key not in value]
    if missing:
        return f"{tool.name} is missing required field(s): {', '.join(missing)}"
    types: dict[str, type | tuple[type, ...]] = {"string": str, "number": (int, float), "integer": int, "array": list,
                                                 "object": dict, "boolean": bool}
    for key, spec in (schema.get("properties") or {}).items():
        if key not in value or not isinstance(spec, dict):
            continue
        expected = types.get(str(spec.get("type")))
        if expected is not None and not isinstance(value[key], expected):
            return f"{tool.name}.{key} must be a {spec.get('type')}, got {type(value[key]).__name__}"
        if "enum" in spec and value[key] not in spec["enum"]:
            return f"{tool.name}.{key} must be one of {', '.join(map(str, spec['enum']))}"
    return None
