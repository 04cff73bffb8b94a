"""Program order: the programs that read one block of shared data run back to back.

A pointwise kernel over R rows of C elements that reads a weight or bias through ``x0 = xindex % C``
alone (layer norm's apply pass) runs its programs in program-id order: row 0's blocks, then row 1's,
so each block of the shared data is streamed through L2 once per row and evicted before the next row
needs it (ncu measures that traffic: docs/design-notes.md, "Measurements").
The rewrite remaps the program id, keeping the grid and the launcher: program p handles row ``p % R``
and column block ``p // R``, so the R programs of one block run together (one DRAM read, R-1 L2 hits),
like a matmul's grouped ordering. That is a bijection over the grid's cdiv(R*C, XBLOCK) programs
exactly when XBLOCK divides C: a ``tl.static_assert`` refuses any other block size at compile time,
and a marker comment (``# kernelopt: XBLOCK divides C``) keeps later launch-config rewrites to
divisors of C (launch_config.block_choices).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from .base import Rewrite, RewriteContext, RewriteFamily, call_spans, split_args
from .describe import change_parts
from .eviction import INDEX_NAMES, rewrite_hints
from .kernel_source import DIVIDES_MARKER, KernelModule, LaunchConfig, parse_kernel_module, with_launch_config
from .launch_config import GPU_MAX_XBLOCK

# ``xoffset = tl.program_id(0) * XBLOCK``, optionally through int64 (Inductor's form for big indices).
_XOFFSET = re.compile(r"^([ \t]*)xoffset = (tl\.program_id\(0\)(?:\.to\(tl\.int64\))?) \* XBLOCK[ \t]*$",
                      re.MULTILINE)
_XINDEX = re.compile(r"^[ \t]*xindex = xoffset \+ tl\.arange\(0, XBLOCK\)(?:\[:\])?[ \t]*$", re.MULTILINE)
# ``x0 = (xindex % 4096)``: the column of an element in a row of 4096 (not ``(xindex // 64) % 64``).
_COLUMN = re.compile(r"^[ \t]*(x\d+) = \(*\s*xindex\s*%\s*(\d+)\s*\)*[ \t]*$", re.MULTILINE)
_IDENTIFIERS = re.compile(r"\b[A-Za-z_]\w*\b")
# Element bytes by Triton's signature type (without the pointer star).
_ELEMENT_BYTES = {"fp64": 8, "i64": 8, "u64": 8, "fp32": 4, "i32": 4, "u32": 4, "tf32": 4, "fp16": 2, "bf16": 2,
                  "i16": 2, "u16": 2, "i8": 1, "u8": 1, "i1": 1, "fp8e4nv": 1, "fp8e5": 1, "fp8e4b15": 1,
                  "fp8e4b8": 1, "fp8e5b16": 1}
MAX_ROWS = 4096
MIN_TRAFFIC_RATIO = 1.15  # below it the shared data is not re-read from DRAM enough to matter
DEFAULT_L2_BYTES = 50 * 2**20  # the H100's L2, when the evidence has no measured size


@dataclass(frozen=True)
class Remap:
    """What the remap needs: R rows of C columns, and the shared data it keeps in L2."""

    rows: int
    columns: int
    column_name: str  # x0
    shared_bytes: int  # C x element size, summed over the distinct shared pointers
    pointers: tuple[str, ...]  # the shared data's pointer parameters


def _signature_types(module: KernelModule) -> dict[str, str] | None:
    """triton_meta['signature'] as {param: type}, or None when it is not a literal."""
    source = module.decorator_kwarg_source("triton_meta")
    if source is None:
        return None
    try:
        body = ast.parse(source, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(body, ast.Dict):
        return None
    for key, value in zip(body.keys, body.values, strict=False):
        if isinstance(key, ast.Constant) and key.value == "signature":
            try:
                signature = ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError):
                return None
            return {str(k): str(v) for k, v in signature.items()} if isinstance(signature, dict) else None
    return None


def _shared_loads(module: KernelModule, types: dict[str, str]) -> dict[str, tuple[int, dict[str, int]]]:
    """Per column name: (C, {pointer: element bytes}) of the loads indexed by that name alone.

    A load through ``xindex // C`` alone reads a row's scalar (a mean): not shared across rows, so not here.
    """
    columns = {name: int(size) for name, size in _COLUMN.findall(module.text)}
    found: dict[str, tuple[int, dict[str, int]]] = {}
    for start, end in call_spans(module.text, "tl.load("):
        args = split_args(module.text[start + len("tl.load("):end - 1])
        if not args:
            continue
        names = set(INDEX_NAMES.findall(args[0]))
        if len(names) != 1 or (name := next(iter(names))) not in columns:
            continue
        pointers = [p for p in dict.fromkeys(_IDENTIFIERS.findall(args[0])) if types.get(p, "").startswith("*")]
        if len(pointers) != 1:
            continue
        size = _ELEMENT_BYTES.get(types[pointers[0]].lstrip("*"))
        if size is None:
            continue
        found.setdefault(name, (columns[name], {}))[1][pointers[0]] = size
    return found


def _launch_xblocks(ctx: RewriteContext) -> list[int] | None:
    """Every XBLOCK the kernel may run with; None when no config says (Inductor's heuristic decides)."""
    module = ctx.module
    if "XBLOCK" in module.fixed_blocks:
        return [module.fixed_blocks["XBLOCK"]]
    if module.explicit_config is not None:
        value = module.explicit_config.block("XBLOCK")
        return [value] if value else []
    values = [c.block("XBLOCK") for c in ctx.inductor_configs]
    return [v for v in values if v] if values else None


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def find_remap(ctx: RewriteContext) -> Remap | str:
    """The remap for this kernel, or why there is none."""
    module = ctx.module
    if ctx.on_cpu:
        return "program order matters only for a GPU's L2; the interpreter runs programs one by one"
    if not module.is_pointwise:
        return f"not a pointwise kernel ({module.heuristic})"
    text = module.text
    if "yindex" in text or "YBLOCK" in text:
        return "a two-dimensional kernel (yindex/YBLOCK)"
    numel = module.numels.get("xnumel")
    if numel is None:
        return "no static `xnumel = N` in the kernel"
    if len(_XOFFSET.findall(text)) != 1 or text.count("tl.program_id(") != 1:
        return "not exactly one `xoffset = tl.program_id(0) * XBLOCK` line (already remapped?)"
    if not _XINDEX.search(text):
        return "no `xindex = xoffset + tl.arange(0, XBLOCK)` line"
    types = _signature_types(module)
    if types is None:
        return "no literal triton_meta signature to read element sizes from"
    shared = _shared_loads(module, types)
    if not shared:
        return "no load of shared data (a pointer indexed by `xindex % C` alone)"

    def weight(name: str) -> tuple[int, int, str]:
        size, pointers = shared[name]
        return (size * sum(pointers.values()), size, name)

    name = max(shared, key=weight)  # the most shared bytes, then the longest row: deterministic
    columns, pointers = shared[name]
    if columns <= 0 or numel % columns:
        return f"xnumel {numel} is not a whole number of rows of {columns}"
    rows = numel // columns
    if not 2 <= rows <= MAX_ROWS:
        return f"{rows} row(s) of {columns}: outside 2..{MAX_ROWS}"
    xblocks = _launch_xblocks(ctx)
    if xblocks is None:
        if columns % GPU_MAX_XBLOCK:
            return f"no launch config known and {columns} is not a multiple of XBLOCK={GPU_MAX_XBLOCK}"
    elif not xblocks or any(columns % v for v in xblocks):
        return f"a launch config's XBLOCK ({', '.join(map(str, xblocks)) or 'none'}) does not divide {columns}"
    shared_bytes = columns * sum(pointers.values())
    evidence = ctx.evidence or {}
    ratio = evidence.get("traffic_ratio")
    if _is_number(ratio):
        if ratio < MIN_TRAFFIC_RATIO:
            return f"DRAM traffic {ratio:.2f}x the ideal: the shared data is not re-read (< {MIN_TRAFFIC_RATIO})"
    else:
        l2 = evidence.get("l2_bytes")
        l2 = int(l2) if _is_number(l2) and l2 > 0 else DEFAULT_L2_BYTES
        if shared_bytes < l2 // 8:
            return f"{shared_bytes} bytes of shared data stay in an L2 of {l2} bytes"
    return Remap(rows, columns, name, shared_bytes, tuple(sorted(pointers)))


def remap_source(text: str, remap: Remap) -> str:
    """The text with its ``xoffset`` line replaced by the (row p % R, block p // R) order."""
    match = _XOFFSET.search(text)
    assert match is not None
    indent, pid = match.group(1), match.group(2)
    rows, columns = remap.rows, remap.columns
    marker = DIVIDES_MARKER.format(block="XBLOCK", numel=columns)
    lines = [
        f"# kernelopt: the {rows} programs that read one block of shared data run back to back "
        f"(row p % {rows}, block p // {rows})",
        f"xpid = {pid}",
        f"tl.static_assert({columns} % XBLOCK == 0)  {marker}",
        f"xoffset = (xpid % {rows}) * {columns} + (xpid // {rows}) * XBLOCK",
    ]
    return text[:match.start()] + "\n".join(indent + line for line in lines) + text[match.end():]


def _pinned_config(ctx: RewriteContext, remap: Remap) -> LaunchConfig | None:
    """Inductor's first config, fixed, when its heuristic would tune at run time over blocks that may not divide
    the row: max-autotune's coordinate descent steps to any power of two up to its largest block, and the
    static_assert would fail that compile. None when the kernel already runs one config or every block divides."""
    module = ctx.module
    if "XBLOCK" in module.fixed_blocks or module.explicit_config is not None or remap.columns % GPU_MAX_XBLOCK == 0:
        return None
    return ctx.inductor_configs[0] if ctx.inductor_configs else None


class ProgramOrderFamily(RewriteFamily):
    name = "program_order"
    summary = ("program order: the programs that read one block of shared data (a weight, a bias) run back to "
               "back, so it is read from DRAM once instead of once per row")

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        found = find_remap(ctx)
        return found if isinstance(found, str) else None

    def variants(self, ctx: RewriteContext) -> list[Rewrite]:
        remap = find_remap(ctx)
        if isinstance(remap, str):
            return []
        text = ctx.module.text
        title = f"programs of one shared block back to back ({remap.rows} rows per block of {remap.columns})"
        params: dict[str, Any] = {"rows": remap.rows, "columns": remap.columns}
        detail = (f"program p runs row p % {remap.rows}, column block p // {remap.rows}: "
                  f"{remap.shared_bytes} bytes of {', '.join(remap.pointers)} read from DRAM once; same grid")
        remapped = remap_source(text, remap)
        pinned = _pinned_config(ctx, remap)
        if pinned is not None:
            remapped = with_launch_config(parse_kernel_module(remapped, ctx.module.name), pinned)
            title += f"; fixed config {pinned.label()}"
            params["fixed_config"] = pinned.to_json()
        out = [Rewrite(self.name, title, detail, remapped, params)]
        # Streamed rows evict_first, the shared block evict_last: it must survive its R programs.
        hinted = rewrite_hints(remapped, "evict_first", "evict_last", None, None)
        if hinted != remapped:
            changes = change_parts(remapped, hinted, ctx.module.name)
            out.append(Rewrite(self.name, "; ".join([title, *changes]), detail + "; stream rows, keep shared data",
                               hinted, {**params, "streaming": "evict_first", "reused": "evict_last"}))
        return out
