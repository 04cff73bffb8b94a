"""One target, two kinds: the search reads a dump's graph and a project's own kernel through one protocol,
so none of its modules picks a side by testing whether a target (or a user's kernel) was given."""

from __future__ import annotations

import ast
from pathlib import Path

SEARCH = Path(__file__).resolve().parents[1] / "kernelopt_core" / "search"
# The names a branch on the kind of target tests against None.
TARGET_NAMES = {"target", "user", "user_kernel", "user_target"}


def _name(node: ast.expr) -> str | None:
    """``target``, or ``ctx.target`` / ``self.target`` (not ``statement.target``, an assignment's)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("ctx", "self"):
        return node.attr
    return None


def side_branches(source: str) -> list[int]:
    """Lines that compare a target's name with None (``target is not None``, ``ctx.target is None``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value is None for o in operands) and \
                    any(_name(o) in TARGET_NAMES for o in operands):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_a_branch_on_the_kind_of_target() -> None:
    assert side_branches("if ctx.target is not None:\n    pass\n") == [1]
    assert side_branches("x = a if user is None else b\n") == [1]
    assert side_branches("if ctx.target.users_own:\n    pass\nif budget is None:\n    pass\n") == []
    assert side_branches("if statement.target is None:\n    pass\n") == []


def test_no_module_of_the_search_branches_on_whether_a_target_was_given() -> None:
    found = {str(path.relative_to(SEARCH)): side_branches(path.read_text(encoding="utf-8"))
             for path in sorted(SEARCH.rglob("*.py"))}
    assert {path: lines for path, lines in found.items() if lines} == {}
