"""What a Triton kernel's source says about its memory access. Pure (ast and re; no torch).

* **passes:** how many ``for r0_offset`` loops load the same pointer. A looped reduction that
  reads its row once for the statistics and again to normalize makes 2 passes; unless the second
  pass hits L2 it moves each input byte twice.
* **windows:** pointers loaded at several different offsets in one scope: a pooling window or a
  stencil, read with one scalar load per tap.
* **strided loads:** loads whose index moves with a stride > 1 along every dimension Triton can
  coalesce over: the unit-stride ("innermost") variable of each block dimension (``x0 = xindex``,
  ``x0 = xindex % 64``, ``r0_1 = r0_index``) appears only multiplied by a constant of 2 or more.
  Triton picks each load's layout from its contiguity, so one unit-stride dimension is enough.

These are readings of the source, not measurements: the analyst labels them so, and prefers
ncu's sector efficiency where it has one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from typing import Any

WINDOW_LOADS = 4  # this many loads of one pointer at different offsets in one scope make a window
_LOOP_TARGET = re.compile(r"^r\d*_offset$|^roffset$")
_INNERMOST_VALUE = re.compile(r"^\(?\s*(?:[xyz]|r\d*_)index(?:\s*%\s*\w+)?\s*\)?$")


@dataclass
class AccessFacts:
    passes: int = 1  # the most reduction loops that load one pointer (1: each input read once)
    reread_pointers: list[str] = field(default_factory=list)  # pointers loaded in 2+ reduction loops
    windows: dict[str, int] = field(default_factory=dict)  # pointer -> loads at different offsets in one scope
    strided_loads: list[str] = field(default_factory=list)  # the index expressions, e.g. "in_ptr0 + (2*x0 + 512*x1)"
    loops: int = 0  # reduction loops in the kernel

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Load:
    pointer: str
    index: str  # the whole address expression
    scope: int  # id of the enclosing reduction loop (0: outside any)


def _kernel_function(source: str, name: str | None) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    jitted = [f for f in funcs if any("jit" in ast.unparse(d) for d in f.decorator_list)] or funcs
    return next((f for f in jitted if f.name == name), jitted[0] if jitted else None)


def _is_load(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
            and bool(node.args))


def _pointer_of(expression: ast.AST, pointers: set[str]) -> str | None:
    names = [n.id for n in ast.walk(expression) if isinstance(n, ast.Name) and n.id in pointers]
    return names[0] if names else None


def _collect_loads(func: ast.FunctionDef, pointers: set[str]) -> tuple[list[_Load], int]:
    loads: list[_Load] = []
    loops = 0

    def visit(node: ast.AST, scope: int) -> None:
        nonlocal loops
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.For) and isinstance(child.target, ast.Name) and _LOOP_TARGET.match(child.target.id):
                loops += 1
                visit(child, loops)
                continue
            if _is_load(child):
                assert isinstance(child, ast.Call)
                pointer = _pointer_of(child.args[0], pointers)
                if pointer is not None:
                    loads.append(_Load(pointer, ast.unparse(child.args[0]), scope))
            visit(child, scope)

    visit(func, 0)
    return loads, loops


def _innermost_variables(func: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if _INNERMOST_VALUE.match(ast.unparse(node.value)):
                names.add(node.targets[0].id)
    return names


def _strided(index: str, innermost: set[str]) -> bool:
    """Every occurrence of an innermost variable is ``K*var`` (K >= 2), and there is at least one."""
    found = False
    for var in innermost:
        for match in re.finditer(rf"(?<![\w.]){re.escape(var)}(?!\w)", index):
            found = True
            before = index[:match.start()].rstrip()
            after = index[match.end():].lstrip()
            coefficient = re.search(r"(\d+)\s*\*$", before)
            if after.startswith(("//", "%", "*")) or before.endswith(("//", "%")):
                return False  # not linear in the variable: no claim
            if coefficient is None or int(coefficient.group(1)) < 2:
                return False  # a unit-stride term: Triton coalesces along it
    return found


def access_facts(source: str, kernel_name: str | None = None) -> AccessFacts:
    """Passes, windows and strided loads of the kernel ``kernel_name`` (or the first @triton.jit)."""
    func = _kernel_function(source, kernel_name)
    if func is None:
        return AccessFacts()
    pointers = {a.arg for a in func.args.args if "ptr" in a.arg}
    loads, loops = _collect_loads(func, pointers)
    facts = AccessFacts(loops=loops)
    loops_per_pointer: dict[str, set[int]] = {}
    offsets: dict[tuple[str, int], set[str]] = {}
    for load in loads:
        if load.scope:
            loops_per_pointer.setdefault(load.pointer, set()).add(load.scope)
        offsets.setdefault((load.pointer, load.scope), set()).add(load.index)
    if loops_per_pointer:
        facts.passes = max(1, max(len(scopes) for scopes in loops_per_pointer.values()))
        facts.reread_pointers = sorted(p for p, scopes in loops_per_pointer.items() if len(scopes) >= 2)
    for (pointer, _), indexes in offsets.items():
        if len(indexes) >= WINDOW_LOADS:
            facts.windows[pointer] = max(facts.windows.get(pointer, 0), len(indexes))
    innermost = _innermost_variables(func)
    seen: set[str] = set()
    for load in loads:
        if load.index not in seen and _strided(load.index, innermost):
            facts.strided_loads.append(load.index)
        seen.add(load.index)
    return facts
