"""Split a long row: a persistent reduction rewritten as a loop over R0_BLOCK chunks.

A persistent kernel holds the whole row in registers; for long rows that spills and limits
occupancy. This rewrite keeps one program per row block but walks the row in chunks, one
pass per reduction level (what Inductor's looped reductions do): each pass recomputes the
row values it needs, accumulates the reduction in a [XBLOCK, R0_BLOCK] accumulator, and
the last pass writes the outputs.

Splitting a row across programs (partials in scratch, a finalize) is the ``split_programs`` family,
a launcher candidate; this one keeps one program per row and only relieves register pressure.
"""

from __future__ import annotations

import ast
import re

from .base import Rewrite, RewriteContext, RewriteFamily, call_spans, split_args
from .kernel_source import (
    KernelModule,
    KernelSourceError,
    LaunchConfig,
    next_pow2,
    parse_kernel_module,
    with_launch_config,
)

MIN_ROW = 512
_SETUP = {"xnumel", "r0_numel", "rnumel", "RBLOCK", "R0_BLOCK", "xoffset", "xindex", "xmask", "r0_index",
          "r0_offset", "r0_mask", "roffset", "rindex"}
# reduction call -> (accumulate expression, identity)
_REDUCTIONS = {
    "tl.sum": ("{acc} + {value}", "0"),
    "triton_helpers.max2": ("triton_helpers.maximum({acc}, {value})", "float('-inf')"),
    "triton_helpers.min2": ("triton_helpers.minimum({acc}, {value})", "float('inf')"),
    "triton_helpers.any": ("{acc} | {value}", "False"),
}
_REDUCTION = re.compile(r"^(tl\.sum|triton_helpers\.max2|triton_helpers\.min2|triton_helpers\.any)\((\w+), 1\)"
                        r"\[:, None\]\.to\((tl\.\w+)\)$")


class _Statement:
    def __init__(self, node: ast.stmt, text: str):
        self.node = node
        self.text = text.strip()
        # Tuple targets (``tmp2, tmp3 = online_softmax_reduce(...)``) are not split: see split_row.
        self.unpacks = isinstance(node, ast.Assign) and not (
            len(node.targets) == 1 and isinstance(node.targets[0], ast.Name))
        first = node.targets[0] if isinstance(node, ast.Assign) else None
        self.target = first.id if isinstance(first, ast.Name) and not self.unpacks else None
        self.names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        self.reduction = _REDUCTION.match(ast.unparse(node.value)) if isinstance(node, ast.Assign) else None
        self.is_store = isinstance(node, ast.Expr) and ast.unparse(node.value).startswith("tl.store(")


def split_row(module: KernelModule, row_block: int) -> str:
    """The persistent kernel rewritten to loop over the row in ``row_block`` chunks."""
    func = module.func
    assert func is not None
    statements = [_Statement(s, ast.get_source_segment(module.text, s) or "") for s in func.body]
    unpacking = next((st for st in statements if st.unpacks), None)
    if unpacking is not None:
        raise KernelSourceError(f"multiple assignment targets: {unpacking.text}")
    setup, r0_names, body = [], ["r0_index"], []
    for st in statements:
        if st.target in _SETUP or (st.target is None and isinstance(st.node, ast.AnnAssign)):
            setup.append(st)
        elif st.target and not st.target.startswith("tmp") and st.names & set(r0_names):
            r0_names.append(st.target)  # r0_1 = r0_index and the like: recomputed inside each loop
        elif st.target and not st.target.startswith("tmp"):
            setup.append(st)  # x0 = xindex and other row-independent index names
        elif st.target or st.is_store:
            body.append(st)
        else:
            raise KernelSourceError(f"unsupported statement: {st.text}")
    row_vars = set(r0_names)
    row: dict[str, bool] = {}
    level: dict[str, int] = {}
    for st in body:
        if st.target is None:
            continue
        if st.reduction:
            row[st.target] = False
            level[st.target] = 1 + max((level.get(n, 0) for n in st.names), default=0)
            continue
        is_row = bool(st.names & row_vars) or any(row.get(n) for n in st.names) or "R0_BLOCK" in st.names
        row[st.target] = is_row
        level[st.target] = max((level.get(n, 0) for n in st.names), default=0)
    by_name = {st.target: st for st in body if st.target}
    passes = sorted({level[st.target] for st in body if st.reduction and st.target})
    lines: list[str] = []
    for st in setup:
        if st.target in ("r0_index", "r0_offset", "r0_mask", "roffset", "rindex"):
            continue
        if isinstance(st.node, ast.AnnAssign) and getattr(st.node.target, "id", "") == "R0_BLOCK":
            continue
        lines.append(st.text)
    lines.append("r0_base = tl.arange(0, R0_BLOCK)[None, :]")
    emitted: set[str] = set()

    def loop_header() -> list[str]:
        head = ["for r0_offset in tl.range(0, r0_numel, R0_BLOCK):", "    r0_index = r0_offset + r0_base",
                "    r0_mask = r0_index < r0_numel", "    roffset = r0_offset", "    rindex = r0_index"]
        for name in r0_names[1:]:
            head.append("    " + next(st.text for st in statements if st.target == name))
        return head

    def needed(names: set[str], done: set[str]) -> list[_Statement]:
        want: set[str] = set()
        stack = [n for n in names if n in by_name and row.get(n)]
        while stack:
            name = stack.pop()
            if name in want or name in done:
                continue
            want.add(name)
            stack.extend(n for n in by_name[name].names if n in by_name and row.get(n))
        return [st for st in body if st.target in want]

    def row_text(st: _Statement) -> str:
        return _masked(st.text)

    def emit_scalars(available_level: int) -> None:
        for st in body:
            if (st.target and not row[st.target] and not st.reduction and st.target not in emitted
                    and level[st.target] <= available_level
                    and all(n in emitted or n not in by_name for n in st.names)):
                lines.append(st.text)
                emitted.add(st.target)
        for st in body:
            if st.is_store and id(st) not in emitted_stores and not any(row.get(n) for n in st.names) \
                    and all(n in emitted or n not in by_name for n in st.names):
                lines.append(st.text)
                emitted_stores.add(id(st))

    emitted_stores: set[int] = set()
    emit_scalars(0)
    for p in passes:
        reductions = [st for st in body if st.reduction and st.target and level[st.target] == p]
        inputs = {st.reduction.group(2) for st in reductions if st.reduction}
        for st in reductions:
            assert st.reduction and st.target
            _, identity = _REDUCTIONS[st.reduction.group(1)]
            lines.append(f"_{st.target} = tl.full([XBLOCK, R0_BLOCK], {identity}, {st.reduction.group(3)})")
        lines += loop_header()
        for st in needed(inputs, set()):
            lines.append("    " + row_text(st))
        for st in reductions:
            assert st.reduction and st.target
            combine, _ = _REDUCTIONS[st.reduction.group(1)]
            acc = combine.format(acc=f"_{st.target}", value=st.reduction.group(2))
            lines.append(f"    _{st.target} = tl.where(r0_mask & xmask, {acc}, _{st.target})")
        for st in reductions:
            assert st.reduction and st.target
            lines.append(f"{st.target} = {st.reduction.group(1)}(_{st.target}, 1)[:, None]"
                         f".to({st.reduction.group(3)})")
            emitted.add(st.target)
        emit_scalars(p)
    row_stores = [st for st in body if st.is_store and id(st) not in emitted_stores]
    if row_stores:
        lines += loop_header()
        names = set().union(*(st.names for st in row_stores))
        for st in needed(names, set()):
            lines.append("    " + row_text(st))
        for st in row_stores:
            lines.append("    " + row_text(st))
    indent = " " * func.body[0].col_offset
    new_body = "".join(indent + line + "\n" for line in lines)
    text_lines = module.text.splitlines(keepends=True)
    head = "".join(text_lines[:func.body[0].lineno - 1])
    tail = "".join(text_lines[(func.end_lineno or len(text_lines)):])
    head, count = re.subn(r"(XBLOCK\s*:\s*tl\.constexpr)\)", r"\1, R0_BLOCK : tl.constexpr)", head, count=1)
    if not count:
        raise KernelSourceError("XBLOCK is not the last meta-parameter")
    return head + new_body + tail


def _masked(text: str) -> str:
    """Inside a chunk loop every row access also needs the row mask."""
    text = text.replace("tl.where(xmask,", "tl.where(r0_mask & xmask,")
    for prefix, position in (("tl.load(", 1), ("tl.store(", 2)):
        for start, end in reversed(call_spans(text, prefix)):
            args = split_args(text[start + len(prefix):end - 1])
            if not args or not re.search(r"\br0_\w+|\brindex\b", args[0]):
                continue
            if len(args) > position and "=" not in args[position].split("(")[0]:
                mask = args[position]
                if mask == "None":
                    args[position] = "r0_mask"
                elif "r0_mask" not in mask:
                    args[position] = f"r0_mask & {mask}"
            else:
                args.insert(position, "r0_mask")
            if prefix == "tl.load(" and not any(a.replace(" ", "").startswith("other=") for a in args):
                args.append("other=0.0")
            text = text[:start] + prefix + ", ".join(args) + ")" + text[end:]
    return text


class SplitReductionFamily(RewriteFamily):
    name = "split_reduction"
    summary = "split long rows of a persistent reduction into R0_BLOCK chunks walked by a loop"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        module = ctx.module
        if not module.is_persistent:
            return "not a persistent reduction"
        rnumel = module.numels.get("r0_numel")
        if rnumel is None or rnumel < MIN_ROW:
            return f"rows shorter than {MIN_ROW} fit in registers"
        if "XBLOCK" not in module.block_params or "R0_BLOCK" in module.block_params:
            return "unexpected meta-parameters"
        try:
            split_row(module, 256)
        except (KernelSourceError, StopIteration, AssertionError) as exc:
            return f"kernel shape not supported: {exc}"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        module = ctx.module
        rnumel = module.numels["r0_numel"]
        out: list[Rewrite] = []
        seen: set[str] = set()
        for chunk in (512, 1024, 2048, 256):
            if chunk >= next_pow2(rnumel):
                continue
            try:
                looped = parse_kernel_module(split_row(module, chunk), module.name)
            except (KernelSourceError, StopIteration):
                continue
            for xblock, warps in ((1, 4), (1, 8), (2, 4)):
                config = LaunchConfig.of({"XBLOCK": xblock, "R0_BLOCK": chunk}, 4 if ctx.on_cpu else warps, 1)
                try:
                    source = with_launch_config(looped, config)
                except KernelSourceError:
                    continue
                if source in seen:
                    continue
                seen.add(source)
                out.append(Rewrite(self.name, f"row split into chunks, {config.label()}",
                                   "persistent reduction -> chunked loop, one pass per reduction level",
                                   source, {"R0_BLOCK": chunk, **config.to_json()}))
        return out[:8]
