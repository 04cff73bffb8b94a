"""AST edits the algorithmic reduction families make to Inductor's statements when they rebuild a
kernel from its passes (reduction_passes.py): renaming a recomputed chunk's names, making Welford's
first-iteration flag the chunk's, replacing the program id by a row, and-ing a mask into a store,
and sharing a load the row already made. Pure ``ast``; nothing here imports torch or triton.
"""

from __future__ import annotations

import ast
import copy

from .reduction_passes import Stmt, is_call, names_assigned, names_read, pointer_base


def with_chunk_start(node: ast.AST, start: str) -> ast.AST:
    """``roffset == 0`` (Welford's first-iteration flag) becomes ``roffset == <start>``: the first
    iteration of this chunk rather than of the row, so each chunk is reduced as Inductor reduces a row."""

    class Flag(ast.NodeTransformer):
        def visit_Compare(self, cmp: ast.Compare) -> ast.AST:
            self.generic_visit(cmp)
            if (isinstance(cmp.left, ast.Name) and cmp.left.id in ("roffset", "r0_offset") and len(cmp.ops) == 1
                    and isinstance(cmp.ops[0], ast.Eq) and isinstance(cmp.comparators[0], ast.Constant)
                    and cmp.comparators[0].value == 0):
                return ast.Compare(cmp.left, cmp.ops, [ast.Name(start, ast.Load())])
            return cmp

    return Flag().visit(copy.deepcopy(node))


def with_row(node: ast.AST, row: str) -> ast.AST:
    """``xoffset = tl.program_id(0) * XBLOCK`` with the program id replaced by ``row``."""

    class Row(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            if is_call(call, "tl.program_id"):
                return ast.Name(row, ast.Load())
            return self.generic_visit(call)

    return Row().visit(copy.deepcopy(node))


def with_store_mask(stmt: Stmt, extra: str) -> str:
    """The store with ``extra`` and-ed into its mask (``tl.store(ptr, value, mask)``)."""
    store = stmt.store_call
    if store is None:
        raise ValueError(f"not a tl.store: {stmt.text()}")
    call = copy.deepcopy(store)
    extra_node = ast.parse(extra, mode="eval").body
    mask_kw = next((k for k in call.keywords if k.arg == "mask"), None)
    if mask_kw is not None:
        mask_kw.value = _conjoin(mask_kw.value, extra_node)
    elif len(call.args) >= 3:
        call.args[2] = _conjoin(call.args[2], extra_node)
    else:
        call.args.append(extra_node)
    return ast.unparse(call)


def _conjoin(mask: ast.expr, extra: ast.expr) -> ast.expr:
    if isinstance(mask, ast.Constant) and mask.value is None:
        return extra
    return ast.BinOp(mask, ast.BitAnd(), extra)


def share_loads(stmts: list[ast.stmt]) -> int:
    """Replace, in place, each load identical to an earlier one (same address, mask and ``other``,
    nothing it depends on reassigned, its pointer not stored to in between) by the earlier value.
    A load whose value is reused streams (``evict_last`` becomes ``evict_first``): the later passes read
    registers, so Inductor's request to keep the data in L2 for them would only crowd out the rest.

    Compound statements (``if``/``for``) are not looked into: what they assign or store forgets
    the loads that depend on it. Returns the number of loads shared.
    """
    seen: dict[str, tuple[str, str | None, frozenset[str]]] = {}  # key -> (value name, pointer, names used)
    calls: dict[str, ast.Call] = {}  # key -> the load kept
    values: dict[str, str] = {}  # name -> dump of the expression last assigned to it
    shared = 0

    def forget(names: set[str], pointers: set[str]) -> None:
        for key in list(seen):
            value, base, used = seen[key]
            if used & names or value in names or (base is not None and base in pointers):
                del seen[key]

    for node in stmts:
        if not isinstance(node, (ast.Assign, ast.Expr, ast.AnnAssign)):
            stored = {pointer_base(c.args[0]) for c in ast.walk(node)
                      if isinstance(c, ast.Call) and is_call(c, "tl.store") and c.args}
            forget(set(names_assigned(node)), {s for s in stored if s})
            for name in names_assigned(node):
                values.pop(name, None)
            continue
        if isinstance(node, ast.Expr):
            if is_call(node.value, "tl.store") and node.value.args:
                base = pointer_base(node.value.args[0])
                forget(set(), {base} if base else {"*"})
                if base is None:
                    seen.clear()
            continue
        targets = names_assigned(node)
        value = node.value
        dumped = ast.dump(value) if value is not None else ""
        # A name redefined to the very expression it held (each pass recomputes r0_index, ...) is unchanged.
        changed = {name for name in targets if values.get(name) != dumped or len(targets) > 1}
        forget(changed, set())
        for name in targets:
            values[name] = dumped if len(targets) == 1 else "<tuple>"
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and isinstance(value, ast.Call) and is_call(value, "tl.load") and value.args):
            continue
        key = _load_key(value)
        target = node.targets[0].id
        if key in seen and seen[key][0] != target:
            node.value = ast.Name(seen[key][0], ast.Load())
            values[target] = ast.dump(node.value)
            _stream(calls[key])
            shared += 1
        else:
            seen[key] = (target, pointer_base(value.args[0]), names_read(value))
            calls[key] = value
    return shared


def _stream(call: ast.Call) -> None:
    """``eviction_policy='evict_last'`` -> ``'evict_first'`` on a load read once for every pass."""
    for keyword in call.keywords:
        if (keyword.arg == "eviction_policy" and isinstance(keyword.value, ast.Constant)
                and keyword.value.value == "evict_last"):
            keyword.value = ast.Constant("evict_first")


def _load_key(call: ast.Call) -> str:
    mask = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mask"), None)
    other = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "other"), None)
    return "|".join(ast.dump(n) if n is not None else "-" for n in (call.args[0], mask, other))
