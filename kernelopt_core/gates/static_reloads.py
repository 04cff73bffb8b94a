"""Gate 1's unsynchronised-reload rule: a program may not load, without a barrier, from a buffer it
stored to.

A store followed by a load of other addresses of the same buffer, in one program, reads what
*other threads of the program* wrote; Triton orders those only across ``tl.debug_barrier()``. The
race never shows on the CPU interpreter, and racecheck watches shared memory only, but the source
shows it: in each jit function, a load through a pointer parameter that an earlier store wrote
through, at a different address expression, with no barrier between, is rejected with both lines,
unless the original reloads it the same way.

Not seen: a store read back in the next loop iteration, stores inside a called helper; atomics are
synchronised. Pure :mod:`ast`. Details: docs/design-notes.md, "gates/static_reloads.py".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .static_dataflow import BARRIERS, LOADS, STORES, ModuleFlow, source_flow

RULE = "unsynchronised-reload"
_BLOCK_POINTERS = {"make_block_ptr": "base", "advance": "base"}


@dataclass(frozen=True)
class Reload:
    parameter: str
    load_line: int
    load_text: str
    store_line: int
    store_text: str


def unsynchronised_reloads(flow: ModuleFlow) -> list[Reload]:
    found: list[Reload] = []
    for function in flow.functions:
        params = set(function.params)
        bindings: dict[str, list[ast.AST]] = {}
        for binding in function.bindings:
            if binding.value is not None:
                bindings.setdefault(binding.name, []).append(binding.value)
        events: list[tuple[tuple[int, int], str, ast.Call]] = []
        for node in function.nodes:
            if not isinstance(node, ast.Call):
                continue
            name = flow.function(node)
            kind = "load" if name in LOADS else "store" if name in STORES else "barrier" if name in BARRIERS else None
            if kind is not None:
                # an inner call ends before the call around it runs: order by where each call ends
                events.append(((node.end_lineno or node.lineno, node.end_col_offset or 0), kind, node))
        events.sort(key=lambda event: event[0])
        stores: list[tuple[ast.Call, set[str]]] = []  # since the last barrier
        for _, kind, call in events:
            if kind == "barrier":
                stores.clear()
                continue
            pointer = _pointer(call)
            if pointer is None:
                continue
            roots = _roots(pointer, bindings, params, flow, set())
            if kind == "store":
                stores.append((call, roots))
                continue
            for store, stored in reversed(stores):
                shared = roots & stored
                store_pointer = _pointer(store)
                if shared and store_pointer is not None and ast.dump(store_pointer) != ast.dump(pointer):
                    found.append(Reload(sorted(shared)[0], call.lineno, ast.unparse(pointer), store.lineno,
                                        ast.unparse(store_pointer)))
                    break
    return found


def _pointer(call: ast.Call) -> ast.AST | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "pointer"), None)


def _roots(node: ast.AST, bindings: dict[str, list[ast.AST]], params: set[str], flow: ModuleFlow,
           seen: set[str]) -> set[str]:
    """The pointer parameters an address is based on: the additive terms of ``ptr + offsets``."""
    if isinstance(node, ast.Name):
        if node.id in params:
            return {node.id}
        if node.id in seen:
            return set()
        seen.add(node.id)
        return set().union(*(_roots(value, bindings, params, flow, seen) for value in bindings.get(node.id, [])))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _roots(node.left, bindings, params, flow, seen) | _roots(node.right, bindings, params, flow, seen)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return _roots(node.left, bindings, params, flow, seen)
    if isinstance(node, ast.Call):
        keyword = _BLOCK_POINTERS.get(flow.function(node) or "")
        if keyword is not None:
            base = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == keyword), None)
            return _roots(base, bindings, params, flow, seen) if base is not None else set()
    if isinstance(node, ast.IfExp):
        return _roots(node.body, bindings, params, flow, seen) | _roots(node.orelse, bindings, params, flow, seen)
    return set()


def check_reloads(original_source: str, candidate: ModuleFlow) -> list[tuple[str, int]]:
    """(message, line) for each unsynchronised reload the original does not make too."""
    flow = source_flow(original_source)
    original = {r.parameter for r in unsynchronised_reloads(flow)} if flow is not None else set()
    problems = []
    for reload in unsynchronised_reloads(candidate):
        if reload.parameter in original:
            continue
        problems.append((f"loads `{_short(reload.load_text)}` after line {reload.store_line} stored to "
                         f"`{_short(reload.store_text)}` in the same program, with no tl.debug_barrier() between: its "
                         f"threads read elements of {reload.parameter} that other threads write (an intra-program "
                         "race: the CPU interpreter runs a block as one step and hides it, racecheck watches shared "
                         "memory only); put tl.debug_barrier() between them or keep the values in registers",
                         reload.load_line))
    return problems


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["RULE", "Reload", "check_reloads", "unsynchronised_reloads"]
