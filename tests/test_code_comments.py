"""Comments say what and why: no issue numbers in kernelopt_core/ or server/, and module docstrings of
at most 15 lines (a longer design essay belongs in docs/, the docstring pointing to it).

History lives in git and docs/, not in the code: a comment or docstring that cites an issue number
tells a reader to look elsewhere for the reason it should give itself. Pure :mod:`ast` and text.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_ROOTS = (ROOT / "kernelopt_core", ROOT / "server")
DOCSTRING_MAX_LINES = 15  # from the opening quotes' line to the closing quotes' line

# "issue 28", "issues 20 and 25", "Issue #40", "issue-20", "(#28)", "gh-28"
ISSUE_NUMBER = re.compile(r"\bissues?[ _-]?#?\d+|\(#\d+\)|\bgh-\d+", re.IGNORECASE)


def code_files() -> list[Path]:
    return sorted(p for root in CODE_ROOTS for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def docstring_lines(source: str) -> int:
    """How many source lines the module docstring spans (0 without one)."""
    doc = ast.get_docstring(ast.parse(source), clean=False)
    return 0 if doc is None else len(doc.split("\n"))


def test_the_rules_see_what_they_are_for() -> None:
    for cited in ("# issue 28: skipped", "(Issue #40)", "issue-20 case", "see issues 20", "(#28)", "gh-12"):
        assert ISSUE_NUMBER.search(cited), cited
    for clean in ("# an issue with 2 inputs", "tissue 3", "the issuer 4", "x#28"):
        assert not ISSUE_NUMBER.search(clean), clean
    assert docstring_lines('"""One line."""\n') == 1
    assert docstring_lines('"""Title.\n\nBody.\n"""\nx = 1\n') == 4
    assert docstring_lines("x = 1\n") == 0


def test_no_issue_number_in_the_code() -> None:
    found = []
    for path in code_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "say why in the comment; history goes to docs/:\n" + "\n".join(found)


def test_module_docstrings_are_short() -> None:
    spans = {str(p.relative_to(ROOT)): docstring_lines(p.read_text()) for p in code_files()}
    long = {name: lines for name, lines in spans.items() if lines > DOCSTRING_MAX_LINES}
    assert not long, (f"module docstrings over {DOCSTRING_MAX_LINES} lines (move the essay to docs/, "
                      f"docs/design-notes.md for a module's reasoning): {long}")
