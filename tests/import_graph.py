"""The project's import graph, read from its source with :mod:`ast` (nothing is imported).

Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:``, relative or
absolute, so a circle that only bites at run time (or only for a type checker) is seen too. A
string constant that names a module (``"kernelopt_core.gates.tasks.graph:run_kernel_gate"``, the way worker
tasks and the sandbox's ``call`` are named) is read as a reference to that module, apart from the
imports. Used by ``tests/test_import_graph.py`` (the whole project) and
``tests/lsp/test_lsp_structure.py`` (the language server's own shape).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The import name of each package and the folder it lives in.
PACKAGES = {"kernelopt_core": ROOT, "kernelopt": ROOT, "kernelopt_lsp": ROOT / "server"}
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_.]*)?$")


def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package at ``package_dir`` by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def project_modules() -> dict[str, Path]:
    """The modules of ``kernelopt_core``, ``kernelopt`` and ``kernelopt_lsp`` (server/)."""
    found: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        found.update(module_files(folder / name))
    return found


def _nearest(target: str, known: set[str]) -> str | None:
    """The module ``target`` names, or the nearest enclosing known module (``a.b.f`` -> ``a.b``)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def imports(name: str, path: Path, known: set[str], tree: ast.Module | None = None) -> set[str]:
    """The known modules that module ``name`` (at ``path``) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree or ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import sub` needs the module pkg.sub; `from pkg import name` needs pkg itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        out |= {found for t in targets if (found := _nearest(t, known)) is not None}
    out.discard(name)
    return out


def named_modules(name: str, path: Path, known: set[str], tree: ast.Module | None = None) -> set[str]:
    """The known modules that string constants of module ``name`` name (``"pkg.mod"``, ``"pkg.mod:f"``);
    docstrings are prose and do not count."""
    tree = tree or ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and _MODULE_NAME.match(node.value):
            module = node.value.partition(":")[0]
            if module in known:  # exactly a module: "kernelopt.optimize" is an LSP command, not a module
                out.add(module)
    out.discard(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as a path that ends where it starts, or None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph``: each group of nodes that reach one another, shown as one path
    through it (Tarjan's strongly connected components, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    groups.append(group)
    out = []
    for group in groups:
        path = find_cycle({n: graph.get(n, set()) & group for n in group})
        assert path is not None
        out.append(path)
    return sorted(out)
