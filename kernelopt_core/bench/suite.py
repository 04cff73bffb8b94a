"""The problems of a KernelBench-format suite, found without importing any of them.

A suite is a folder. Files directly in it are problems; so are files in sub-folders named for a
level (``level1``, ``level_2``, ``L3``), and in problem-set sub-folders, marked by a
``PROBLEM_SET.md`` file that says what the set is (``kbscale/``: the KernelBench-scale
memory-bound set). Other sub-folders (``tiny/``, ``__pycache__``) are not entered, so
``benchmarks/problems`` is the H200 suite and ``benchmarks/problems/tiny`` the CI one.
A problem's level is its level folder's, or a module-level ``LEVEL = N`` (read from the source
text), else 0. A single ``.py`` file is a suite of one.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

_LEVEL_DIR = re.compile(r"^(?:level|l)[_-]?(\d+)$", re.IGNORECASE)
SET_MARKER = "PROBLEM_SET.md"


@dataclass(frozen=True)
class ProblemSpec:
    name: str  # e.g. "level1/softmax_rows": unique in the suite, also its result file's stem
    path: str  # absolute path of the problem file
    level: int  # 0 when the suite does not say

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemSpec:
        return cls(name=str(data["name"]), path=str(data["path"]), level=int(data.get("level", 0)))


class SuiteError(ValueError):
    """The suite path cannot be used (missing, not a folder of problems, bad --levels)."""


def level_of_folder(folder: str) -> int | None:
    match = _LEVEL_DIR.match(folder)
    return int(match.group(1)) if match else None


def declared_level(path: str) -> int | None:
    """``LEVEL = N`` at module level, read from the source (the file is never executed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None  # a broken file still counts as a problem; running it will say what is wrong
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "LEVEL" and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, int)):
            return node.value.value
    return None


def _is_problem_file(name: str) -> bool:
    return name.endswith(".py") and not name.startswith(("_", "."))


def discover_suite(path: str, levels: set[int] | None = None) -> list[ProblemSpec]:
    """The suite's problems, sorted by (level, name); ``levels`` keeps only those levels."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        if not path.endswith(".py"):
            raise SuiteError(f"{path}: a problem file must be a .py file")
        found = [ProblemSpec(os.path.splitext(os.path.basename(path))[0], path, declared_level(path) or 0)]
    elif os.path.isdir(path):
        found = []
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if os.path.isfile(full) and _is_problem_file(entry):
                found.append(ProblemSpec(os.path.splitext(entry)[0], full, declared_level(full) or 0))
            elif os.path.isdir(full) and (level := level_of_folder(entry)) is not None:
                for name in sorted(os.listdir(full)):
                    if _is_problem_file(name) and os.path.isfile(os.path.join(full, name)):
                        stem = os.path.splitext(name)[0]
                        found.append(ProblemSpec(f"{entry}/{stem}", os.path.join(full, name), level))
            elif os.path.isfile(os.path.join(full, SET_MARKER)):
                for name in sorted(os.listdir(full)):
                    problem = os.path.join(full, name)
                    if _is_problem_file(name) and os.path.isfile(problem):
                        stem = os.path.splitext(name)[0]
                        found.append(ProblemSpec(f"{entry}/{stem}", problem, declared_level(problem) or 0))
    else:
        raise SuiteError(f"{path}: no such suite folder or problem file")
    if levels:
        found = [p for p in found if p.level in levels]
    if not found:
        wanted = f" at levels {sorted(levels)}" if levels else ""
        raise SuiteError(f"{path}: no problem files found{wanted} (expected *.py files, or level1/, level2/, ... folders)")
    return sorted(found, key=lambda p: (p.level, p.name))


def parse_levels(text: str | None) -> set[int] | None:
    """``"1,3"`` -> {1, 3}; None or empty -> None (all levels)."""
    if not text:
        return None
    try:
        levels = {int(part) for part in text.split(",") if part.strip()}
    except ValueError as exc:
        raise SuiteError(f"--levels wants comma-separated integers such as 1,2,3, got {text!r}") from exc
    return levels or None


def interleave_levels(problems: list[ProblemSpec]) -> list[ProblemSpec]:
    """Round-robin over levels (L1, L2, L3, L1, ...), so a campaign cut short still covers each level."""
    by_level: dict[int, list[ProblemSpec]] = {}
    for problem in problems:
        by_level.setdefault(problem.level, []).append(problem)
    queues = [by_level[level] for level in sorted(by_level)]
    ordered: list[ProblemSpec] = []
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop(0))
    return ordered
