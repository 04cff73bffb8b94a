"""The language server's shape (issue 27): a thin shell, feature modules that never import it, no
import circle inside ``kernelopt_lsp``, and no class that holds a whole subsystem.

Imports are read from the source with ``ast`` (every import: module level, in functions, under
TYPE_CHECKING), so a circle that only bites at run time is caught too; the reader is
tests/import_graph.py, which tests/test_import_graph.py uses for the layers of the whole project.
"""

from __future__ import annotations

import ast
from pathlib import Path

from import_graph import find_cycle as _cycle
from import_graph import imports as _imports
from import_graph import module_files

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "kernelopt_lsp"
SHELL = "kernelopt_lsp.server"
SHELL_MAX_LINES = 200
CLASS_MAX_LINES = 300


def _modules() -> dict[str, Path]:
    return module_files(PACKAGE)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def test_the_import_graph_reads_relative_and_nested_imports():
    graph = _graph()
    assert "kernelopt_lsp.features.hover" in graph[SHELL]
    assert "kernelopt_lsp.hover" in graph["kernelopt_lsp.providers.dump_provider"]  # from ..hover import ...
    assert SHELL in graph["kernelopt_lsp.main"]  # imported inside main()
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_circle_in_the_language_server():
    cycle = _cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_only_the_entry_point_imports_the_shell():
    importers = sorted(name for name, deps in _graph().items() if SHELL in deps and name != "kernelopt_lsp.main")
    assert importers == [], f"these import the server shell: {importers}"


def test_every_feature_module_registers_itself():
    features = [p for p in (PACKAGE / "features").glob("*.py") if p.name != "__init__.py"]
    assert features
    for path in features:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body), path.name


def test_the_shell_is_thin_and_no_class_holds_a_subsystem():
    shell_lines = len(_modules()[SHELL].read_text(encoding="utf-8").splitlines())
    assert shell_lines <= SHELL_MAX_LINES, f"server.py has {shell_lines} lines"
    too_big = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > CLASS_MAX_LINES:
                too_big.append(f"{name}.{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert too_big == [], too_big


def _kind_branches(tree: ast.AST) -> list[int]:
    """Lines of ``if user is not None`` / ``if target is not None`` tests (also inside ``and``/``or``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        for part in ast.walk(node.test):
            if (isinstance(part, ast.Compare) and isinstance(part.left, ast.Name)
                    and part.left.id in ("user", "target") and len(part.ops) == 1
                    and isinstance(part.ops[0], (ast.IsNot, ast.Is))
                    and isinstance(part.comparators[0], ast.Constant) and part.comparators[0].value is None):
                found.append(node.lineno)
    return found


def test_the_kind_branch_finder_finds_one():
    tree = ast.parse("if x and user is not None:\n    pass\ny = 1 if target is None else 2\nif doc is None:\n    pass\n")
    assert _kind_branches(tree) == [1, 3]


def test_no_feature_branches_on_the_kind_of_file():
    """The features ask the providers (providers/); none picks the dump or the user-kernel side itself."""
    branches = []
    for path in sorted((PACKAGE / "features").glob("*.py")):
        lines = _kind_branches(ast.parse(path.read_text(encoding="utf-8")))
        branches += [f"features/{path.name}:{line}" for line in lines]
    assert branches == [], f"branches on the kind of file: {branches}"
