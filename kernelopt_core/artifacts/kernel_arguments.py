"""Which argument of an Inductor kernel is what, read from its source (pure Python, :mod:`ast`).

Gate 2 poisons the outputs and compares what a kernel writes; the traffic model counts what it
reads and writes once each (:mod:`kernelopt_core.measure.traffic`). Both ask here, so they agree.
"""

from __future__ import annotations

import ast
from typing import Literal

Role = Literal["output", "inout", "input", "scalar"]


def runtime_parameters(kernel_source: str, kernel_name: str) -> list[str]:
    """The parameters the wrapper passes (everything but the constexpr meta-parameters)."""
    func = _kernel_def(kernel_source, kernel_name)
    if func is None:
        return []
    return [a.arg for a in func.args.args if not _is_constexpr(a)]


def argument_roles(kernel_source: str, kernel_name: str, mutated: list[str]) -> dict[str, Role]:
    """Output/in-out/input roles of the pointer parameters, from the original kernel.

    ``out_ptr*`` are outputs, ``in_out_ptr*`` and ``mutated_arg_names`` are in-out; an in-out the
    original never loads from is poisoned like an output (Inductor reuses a dead buffer in place).
    """
    func = _kernel_def(kernel_source, kernel_name)
    params = runtime_parameters(kernel_source, kernel_name)
    loaded = _loaded_pointers(func) if func is not None else set(params)
    roles: dict[str, Role] = {}
    for name in params:
        if name.startswith("in_out_ptr") or name in mutated:
            roles[name] = "inout" if name in loaded else "output"
        elif name.startswith("out_ptr"):
            roles[name] = "inout" if name in loaded else "output"
        else:
            roles[name] = "input"
    return roles


def _kernel_def(source: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return next((f for f in funcs if f.name == name), funcs[0] if funcs else None)


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _loaded_pointers(func: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
            if node.args:
                names.update(n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name))
    return names
