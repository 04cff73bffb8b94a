"""The house's shape (issue 27): no import circle, no import from a lower layer to a higher one,
no class over ~300 lines, over ``kernelopt_core``, ``kernelopt`` and ``kernelopt_lsp``.

The layers are the table "Layers: who may import whom" of docs/architecture.md, read from the
doc itself, so the doc and the code cannot drift apart. A module may import its own package, the
packages of its own layer and those of every layer below; what a lower layer must run of a higher
one it is given by name (``"package.module:function"``), so a string constant that names a module
counts here like an import. The language server's inner shape (a thin shell the features never
import, no circle inside it, feature modules that register themselves, its classes' size) is
tests/lsp/test_lsp_structure.py's, which reads the imports with the same reader
(tests/import_graph.py). Pure :mod:`ast`: nothing is imported; the whole file takes a few seconds.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
from import_graph import ROOT, circles, imports, named_modules, project_modules

ARCHITECTURE = ROOT / "docs" / "architecture.md"
LAYERS_HEADING = "## Layers: who may import whom"
CLASS_MAX_LINES = 300
ROOT_PACKAGE = "kernelopt_core"  # kernelopt_core/__init__.py: below every layer, it imports nothing


def package_of(module: str) -> str:
    """The unit the layer table names: a package or module of kernelopt_core by its own name
    (``gates``, ``events``), else the top-level package (``kernelopt``, ``kernelopt_lsp``)."""
    parts = module.split(".")
    if parts[0] == ROOT_PACKAGE:
        return parts[1] if len(parts) > 1 else ROOT_PACKAGE
    return parts[0]


def read_layers(text: str) -> dict[str, int]:
    """Each package's layer from the doc's table: rows ``| N | `a`, `b` | ... |``."""
    if LAYERS_HEADING not in text:
        raise AssertionError(f"docs/architecture.md has no section {LAYERS_HEADING!r}")
    section = text.split(LAYERS_HEADING, 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[1]):
            if name in layers:
                raise AssertionError(f"{name} is in layers {layers[name]} and {cells[0]} of the table")
            layers[name] = int(cells[0])
    return layers


@cache
def _trees() -> dict[str, tuple[Path, ast.Module]]:
    """Every module's path and syntax tree, parsed once for all the checks."""
    return {name: (path, ast.parse(path.read_text(encoding="utf-8"))) for name, path in project_modules().items()}


@cache
def _project() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(imports, string references) of every module, by module name."""
    trees = _trees()
    known = set(trees)
    imported = {name: imports(name, path, known, tree) for name, (path, tree) in trees.items()}
    named = {name: named_modules(name, path, known, tree) for name, (path, tree) in trees.items()}
    return imported, named


def package_edges(*graphs: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importer package, imported package) -> the module pairs behind it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for graph in graphs:
        for module, targets in graph.items():
            for target in targets:
                if package_of(module) != package_of(target):
                    edges[package_of(module), package_of(target)].append(f"{module} -> {target}")
    return edges


def upward_imports(edges: dict[tuple[str, str], list[str]], layers: dict[str, int]) -> list[str]:
    out = []
    for (low, high), pairs in sorted(edges.items()):
        low_layer, high_layer = layers.get(low, 0), layers.get(high, 0)
        if low_layer < high_layer:
            out += [f"{pair} (layer {low_layer} {low} -> layer {high_layer} {high})" for pair in sorted(pairs)]
    return out


# --- the checks read what they should (they can fail) ---------------------------------------------


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    from import_graph import module_files

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .. import low\n")  # a module of the parent
    (package / "low.py").write_text("")
    (package / "top.py").write_text("")
    (package / "mid.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import pkg.low as low\n"
        "if TYPE_CHECKING:\n    from .sub import Thing\n"
        "def later():\n    from . import top\n"
        "JOB = 'pkg.top:run'\n"
        "def f():\n    '''pkg.sub is named in prose only'''\n")
    modules = module_files(package)
    known = set(modules)
    assert imports("pkg.mid", modules["pkg.mid"], known) == {"pkg.low", "pkg.sub", "pkg.top"}
    assert imports("pkg.sub", modules["pkg.sub"], known) == {"pkg.low"}
    assert named_modules("pkg.mid", modules["pkg.mid"], known) == {"pkg.top"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == [["a", "b", "c", "a"], ["e", "e"]]


def test_the_layer_checks_name_the_offenders() -> None:
    layers = read_layers(f"{LAYERS_HEADING}\n| layer | packages |\n|---|---|\n| 2 | `gates` |\n| 1 | `measure` |\n")
    assert layers == {"gates": 2, "measure": 1}
    edges = package_edges({"kernelopt_core.measure.traffic": {"kernelopt_core.gates.kernel"},
                           "kernelopt_core.gates.perf": {"kernelopt_core.measure.timing"}})
    assert upward_imports(edges, layers) == [
        "kernelopt_core.measure.traffic -> kernelopt_core.gates.kernel (layer 1 measure -> layer 2 gates)"]


def test_the_project_is_read() -> None:
    imported, named = _project()
    assert "kernelopt_core.gates.kernel" in imported["kernelopt_core.gates.tasks.graph"]  # inside a function
    assert "kernelopt_lsp.server" in imported["kernelopt_lsp.main"]
    assert "kernelopt_core.deploy.runtime_hook" in imported["kernelopt"]
    assert "kernelopt_core.cli.main" in named["kernelopt_core.job_runner"]  # the job runner runs the CLI by name


# --- the house ------------------------------------------------------------------------------------


def test_every_package_has_one_layer_in_architecture_md() -> None:
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    packages = {package_of(m) for m in project_modules()} - {ROOT_PACKAGE}
    assert sorted(packages - set(layers)) == [], "packages missing from the layer table of docs/architecture.md"
    assert sorted(set(layers) - packages) == [], "the layer table of docs/architecture.md names no such package"


def test_no_import_circle() -> None:
    imported, _ = _project()
    found = circles(imported)
    assert found == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_circle_between_packages() -> None:
    edges = package_edges(*_project())
    graph: dict[str, set[str]] = defaultdict(set)
    for low, high in edges:
        graph[low].add(high)
    found = circles(dict(graph))
    why = [f"  {pair}" for c in found for a, b in zip(c, c[1:], strict=False) for pair in sorted(edges[a, b])[:3]]
    assert found == [], "package circles:\n" + "\n".join([" -> ".join(c) for c in found] + why)


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    upward = upward_imports(package_edges(*_project()), layers)
    assert upward == [], "imports from a lower layer to a higher one (docs/architecture.md, " \
                         f"{LAYERS_HEADING[3:]}):\n" + "\n".join(upward)


@pytest.mark.parametrize("package", ["kernelopt_core", "kernelopt"])
def test_no_class_holds_a_subsystem(package: str) -> None:
    too_big = []
    for name, (_, tree) in _trees().items():
        if name.split(".")[0] != package:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > CLASS_MAX_LINES:
                too_big.append(f"{name}.{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert too_big == [], f"classes over {CLASS_MAX_LINES} lines: {too_big}"
