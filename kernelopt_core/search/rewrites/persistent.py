"""A looped reduction turned persistent: one block covers the whole row, the loops disappear,
and loads the loops repeated (Inductor re-reads the row in every pass) are read once.

The transformation the ``single_read`` family (single_read.py) proposes, with its register limit.
"""

from __future__ import annotations

import ast
import re
import textwrap

from .kernel_source import KernelModule, KernelSourceError


def unroll_row_loops(module: KernelModule, row_block: int) -> str:
    """The kernel text with R0_BLOCK fixed to ``row_block`` and each ``for r0_offset`` loop inlined."""
    func = module.func
    assert func is not None
    text = module.text
    lines = text.splitlines(keepends=True)
    loops = [s for s in func.body if isinstance(s, ast.For) and isinstance(s.target, ast.Name)
             and s.target.id == "r0_offset"]
    if not loops:
        raise KernelSourceError("no r0_offset loop to unroll")
    for loop in reversed(loops):
        first = loop.body[0].lineno - 1
        last = loop.end_lineno or loop.lineno
        body = textwrap.dedent("".join(lines[first:last]))
        indent = " " * loop.col_offset
        new = indent + "r0_offset = 0\n" + textwrap.indent(body, indent)
        lines[loop.lineno - 1:last] = [new]
    text = "".join(lines)
    # R0_BLOCK becomes a constant of the body instead of a meta-parameter.
    text, count = re.subn(r",\s*R0_BLOCK\s*:\s*tl\.constexpr", "", text, count=1)
    if not count:
        raise KernelSourceError("R0_BLOCK is not a meta-parameter of this kernel")
    text, count = re.subn(r"^(\s*)(r0_numel = \d+\n)", rf"\1\2\1R0_BLOCK: tl.constexpr = {row_block}\n", text,
                          count=1, flags=re.MULTILINE)
    if not count:
        raise KernelSourceError("r0_numel is not fixed in the kernel body")
    return share_repeated_loads(text)


def share_repeated_loads(text: str) -> str:
    """Replace a load identical to an earlier one (same pointer, mask and ``other``, no store in
    between) by the earlier value: what a persistent kernel gains over Inductor's multi-pass loop.
    The load kept streams (``evict_last`` -> ``evict_first``): Inductor asked L2 to keep the row for its
    next pass, which now reads registers; the hint would only hold the row in L2 against the output."""
    tree = ast.parse(text)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    seen: dict[str, tuple[str, str, set[str], int]] = {}  # load key -> (value, pointer base, names used, line)
    values: dict[str, str] = {}  # name -> the expression last assigned to it
    edits: list[tuple[int, str]] = []
    kept: set[int] = set()  # lines of the loads whose value is reused
    for stmt in func.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, dumped = stmt.targets[0].id, ast.dump(stmt.value)
            if name in values and values[name] != dumped:
                # A name the earlier loads depend on now means something else: forget those loads.
                seen = {k: v for k, v in seen.items() if name not in v[2]}
            values[name] = dumped
        if isinstance(stmt, ast.Expr) and _is_call(stmt.value, "store"):
            store = stmt.value
            assert isinstance(store, ast.Call)
            bases = {n.id for n in ast.walk(store.args[0]) if isinstance(n, ast.Name) and "ptr" in n.id}
            seen = {k: v for k, v in seen.items() if v[1] not in bases}
            continue
        if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
            seen = {}  # control flow: keep it simple and share nothing across it
            continue
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and _is_call(stmt.value, "load")):
            continue
        call = stmt.value
        assert isinstance(call, ast.Call)
        mask = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mask"), None)
        other = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "other"),
                                                             None)
        # Masked-off lanes hold `other`: loads that differ in it are different values.
        key = "|".join(ast.dump(n) if n is not None else "" for n in (call.args[0], mask, other))
        base = next((n.id for n in ast.walk(call.args[0]) if isinstance(n, ast.Name) and "ptr" in n.id), "")
        used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
        if key in seen:
            edits.append((stmt.lineno, f"{stmt.targets[0].id} = {seen[key][0]}"))
            kept.add(seen[key][3])
        else:
            seen[key] = (stmt.targets[0].id, base, used, stmt.lineno)
    lines = text.splitlines(keepends=True)
    for lineno in kept:
        lines[lineno - 1] = _KEEP_IN_L2.sub("eviction_policy='evict_first'", lines[lineno - 1])
    for lineno, replacement in edits:
        old = lines[lineno - 1]
        indent = old[: len(old) - len(old.lstrip())]
        lines[lineno - 1] = f"{indent}{replacement}  # kernelopt: reuses the row already loaded\n"
    return "".join(lines)


_KEEP_IN_L2 = re.compile(r"eviction_policy\s*=\s*['\"]evict_last['\"]")


def _is_call(node: ast.expr, attr: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl")
