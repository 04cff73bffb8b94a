"""Strided and transposed access: tiled copies and column reductions over the contiguous dimension.

For kernels whose loads walk a non-contiguous dimension (the analyst's cause "strided-access"):

* a **permuted copy** (:class:`~.strided_model.PermuteCopy`) becomes a launcher whose kernel moves one
  [BJ, BK] tile per program, loaded along the input's contiguous dimension (coalesced, vectorised) and
  stored along the output's (Triton moves the tile through shared memory): each element read and
  written once.
* a **column reduction** (:class:`~.strided_model.ColumnReduction`) becomes a launcher whose programs
  each own BC contiguous columns and walk the rows in [BR, BC] tiles. With too few column tiles to
  fill the GPU the rows are split across programs: partials go to a scratch buffer (every element
  written before it is read) and a second kernel combines them and applies the epilogue.

Each plan names the ideal bytes it targets. Pure Python: the generated module is text.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Rewrite, RewriteContext
from .kernel_source import next_pow2
from .launcher_source import HEADER, RecognisingLauncherFamily, bytes_label, runtime_params, sol_text
from .strided_model import (
    ColumnReduction,
    PermuteCopy,
    recognise_columns,
    recognise_permute,
)

CAUSES = ("strided-access", "low-parallelism")
MAX_SPLIT = 256
INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class TilePlan:
    bj: int
    bk: int
    num_warps: int

    def label(self) -> str:
        return f"tile {self.bj}x{self.bk}, num_warps={self.num_warps}"


@dataclass(frozen=True)
class ColumnPlan:
    bc: int  # columns per program
    br: int  # rows per tile
    split: int  # programs sharing one column tile's rows (1: no scratch)
    num_warps: int

    def label(self) -> str:
        return f"BC={self.bc}, BR={self.br}, split={self.split}, num_warps={self.num_warps}"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _combine_source(op: str) -> str:
    if op == "max":
        body = "    return tl.where((a > b) | (a != a), a, b)\n"
    elif op == "min":
        body = "    return tl.where((a < b) | (a != a), a, b)\n"
    else:
        body = "    return a + b\n"
    return "@triton.jit\ndef _combine(a, b):\n" + body


def _identity(op: str) -> str:
    return {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}[op]


# --- permuted copies ---------------------------------------------------------------------------


def generate_transpose(copy: PermuteCopy, plan: TilePlan, kernel_name: str, params: list[str]) -> str:
    shape, strides = list(copy.shape), list(copy.in_strides)
    rank = len(shape)
    j, k = copy.inner, rank - 1
    out_strides = [1] * rank
    for d in range(rank - 2, -1, -1):
        out_strides[d] = out_strides[d + 1] * shape[d + 1]
    batch_dims = [d for d in range(rank) if d not in (j, k)]
    n_j, n_k = _cdiv(shape[j], plan.bj), _cdiv(shape[k], plan.bk)
    batch = 1
    for d in batch_dims:
        batch *= shape[d]
    programs = batch * n_j * n_k
    wide = copy.in_elements > INT32_LIMIT or batch * shape[j] * shape[k] > INT32_LIMIT
    lines = [HEADER, "", "@triton.jit", "def _tile_copy(x_ptr, y_ptr, BJ: tl.constexpr, BK: tl.constexpr):",
             f"    # {copy.describe()}; {plan.label()}",
             "    pid = tl.program_id(0)",
             f"    tk = pid % {n_k}",
             f"    rest = pid // {n_k}",
             f"    tj = rest % {n_j}",
             f"    b = (rest // {n_j}).to(tl.int64)",
             "    x_off = b * 0",
             "    y_off = b * 0"]
    for d in reversed(batch_dims):
        lines += [f"    c = b % {shape[d]}", f"    b = b // {shape[d]}",
                  f"    x_off += c * {strides[d]}", f"    y_off += c * {out_strides[d]}"]
    cast = ".to(tl.int64)" if wide else ""
    lines += [f"    jj = (tj * BJ + tl.arange(0, BJ)){cast}",
              f"    kk = (tk * BK + tl.arange(0, BK)){cast}",
              f"    mask = (jj[:, None] < {shape[j]}) & (kk[None, :] < {shape[k]})",
              "    # loads run along jj (the input's contiguous dimension), stores along kk (the output's)",
              f"    tile = tl.load(x_ptr + x_off + jj[:, None] + kk[None, :] * {strides[k]}, mask=mask)",
              f"    tl.store(y_ptr + y_off + jj[:, None] * {out_strides[j]} + kk[None, :], "
              "tile.to(y_ptr.dtype.element_ty), mask=mask)",
              "", "",
              f"def {kernel_name}({', '.join(params)}):",
              f"    _tile_copy[({programs},)]({copy.in_param}, {copy.out_param}, BJ={plan.bj}, BK={plan.bk}, "
              f"num_warps={plan.num_warps})"]
    return "\n".join(lines) + "\n"


def transpose_plans(copy: PermuteCopy, on_cpu: bool) -> list[TilePlan]:
    j_size, k_size = copy.shape[copy.inner], copy.shape[-1]
    if on_cpu:
        return [TilePlan(min(next_pow2(j_size), 64), min(next_pow2(k_size), 64), 4)]
    plans = [TilePlan(64, 64, 4), TilePlan(64, 128, 8), TilePlan(128, 64, 8), TilePlan(32, 32, 4)]
    return [TilePlan(min(p.bj, next_pow2(j_size)), min(p.bk, next_pow2(k_size)), p.num_warps) for p in plans]


# --- column reductions -------------------------------------------------------------------------


def _epilogue(red: ColumnReduction, value: str) -> str:
    if red.epilogue is None:
        return value
    kind, constant = red.epilogue
    return f"{value} {'/' if kind == 'div' else '*'} {constant!r}"


def _tiles_kernel(name: str, red: ColumnReduction, rows: int, chunk: int, split: int, bc: int, final: bool,
                  comment: str) -> list[str]:
    """A kernel reducing ``rows`` x ``red.cols`` per batch in [BR, BC] tiles; program (batch, part,
    column tile) reduces rows [part * chunk, (part + 1) * chunk). ``final``: apply the epilogue
    and write the output; else write one fp32 partial row per part."""
    n_c = _cdiv(red.cols, bc)
    ident = _identity(red.op)
    lines = ["@triton.jit",
             f"def {name}(src_ptr, dst_ptr, BC: tl.constexpr, BR: tl.constexpr):",
             f"    # {comment}",
             "    pid = tl.program_id(0)",
             f"    tc = pid % {n_c}",
             f"    rest = pid // {n_c}",
             f"    part = rest % {split}",
             f"    b = (rest // {split}).to(tl.int64)",
             "    cols = tc * BC + tl.arange(0, BC)",
             f"    col_ok = cols < {red.cols}",
             f"    src = src_ptr + b * {rows * red.cols}",
             f"    row_lo = part * {chunk}",
             f"    row_hi = tl.minimum(row_lo + {chunk}, {rows})",
             f"    acc = tl.full([BR, BC], {ident}, tl.float32)",
             "    for r0 in tl.range(row_lo, row_hi, BR):",
             "        rows = r0 + tl.arange(0, BR)",
             "        ok = (rows[:, None] < row_hi) & col_ok[None, :]",
             f"        v = tl.load(src + rows[:, None] * {red.cols} + cols[None, :], mask=ok, other={ident})",
             "        acc = _combine(acc, v.to(tl.float32))",
             f"    total = {'tl.sum(acc, 0)' if red.op == 'sum' else 'tl.reduce(acc, 0, _combine)'}"]
    if final:
        lines.append(f"    tl.store(dst_ptr + b * {red.cols} + cols, ({_epilogue(red, 'total')})"
                     ".to(dst_ptr.dtype.element_ty), mask=col_ok)")
    else:
        lines.append(f"    tl.store(dst_ptr + (b * {split} + part) * {red.cols} + cols, total, mask=col_ok)")
    return lines


def generate_columns(red: ColumnReduction, plan: ColumnPlan, kernel_name: str, params: list[str]) -> str:
    n_c = _cdiv(red.cols, plan.bc)
    chunk = _cdiv(_cdiv(red.rows, plan.split), plan.br) * plan.br
    split = _cdiv(red.rows, chunk)  # the programs per column tile actually needed
    lines = [HEADER, "", _combine_source(red.op), ""]
    lines += _tiles_kernel("_column_tiles", red, red.rows, chunk, split, plan.bc, split == 1,
                           f"{red.describe()}; {plan.label()}")
    call = [f"def {kernel_name}({', '.join(params)}):"]
    if split == 1:
        call.append(f"    _column_tiles[({red.batch * n_c},)]({red.in_param}, {red.out_param}, BC={plan.bc}, "
                    f"BR={plan.br}, num_warps={plan.num_warps})")
    else:
        # The partials are (batch, split, cols): a second column reduction over `split` rows.
        finish_bc, finish_br = min(plan.bc, 128), min(32, next_pow2(split))
        lines += ["", ""] + _tiles_kernel("_column_finish", red, split, split, 1, finish_bc, True,
                                          f"combine the {split} partial rows of each column")
        call += [f"    partials = torch.empty(({red.batch * split}, {red.cols}), dtype=torch.float32, "
                 f"device={red.in_param}.device)",
                 f"    _column_tiles[({red.batch * split * n_c},)]({red.in_param}, partials, BC={plan.bc}, "
                 f"BR={plan.br}, num_warps={plan.num_warps})",
                 f"    _column_finish[({red.batch * _cdiv(red.cols, finish_bc)},)](partials, {red.out_param}, "
                 f"BC={finish_bc}, BR={finish_br}, num_warps=4)"]
    return "\n".join(lines + ["", ""] + call) + "\n"


def column_plans(red: ColumnReduction, on_cpu: bool, multiprocessors: int) -> list[ColumnPlan]:
    if on_cpu:
        return [ColumnPlan(min(next_pow2(red.cols), 256), min(next_pow2(red.rows), 64), 1, 4)]
    plans = []
    for bc, br, warps in ((128, 32, 4), (256, 16, 8), (64, 64, 4)):
        bc = min(bc, next_pow2(red.cols))
        tiles = red.batch * _cdiv(red.cols, bc)
        want = 4 * multiprocessors  # enough programs for several waves
        split = 1 if tiles >= want else min(MAX_SPLIT, _cdiv(want, tiles), max(1, red.rows // br))
        plans.append(ColumnPlan(bc, br, split, warps))
        if split > 1:
            plans.append(ColumnPlan(bc, br, 1, warps))
    return list(dict.fromkeys(plans))  # without repeats, in order


# --- the family --------------------------------------------------------------------------------


class StridedAccessFamily(RecognisingLauncherFamily[PermuteCopy | ColumnReduction]):
    name = "strided_access"
    summary = ("strided loads made contiguous in a launcher: tiled transposes through a 2D block, column "
               "reductions over contiguous row segments (rows split across programs with a scratch buffer "
               "when there are few columns)")
    causes = CAUSES
    recognises = "strided access"

    def recognise_kernel(self, ctx: RewriteContext) -> PermuteCopy | ColumnReduction:
        args = ctx.evidence.get("launch_args")
        if ctx.module.heuristic == "pointwise":
            return recognise_permute(ctx.module, args)
        return recognise_columns(ctx.module, args)

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        found = self.recognise(ctx)
        params = runtime_params(ctx.module)
        target = self.target_bytes(ctx, found.in_param, found.out_param)
        out: list[Rewrite] = []
        if isinstance(found, PermuteCopy):
            for plan in transpose_plans(found, ctx.on_cpu):
                detail = (f"{found.describe()}: one [{plan.bj}, {plan.bk}] tile per program, loaded along the input's "
                          f"contiguous dimension and stored along the output's. Targets the ideal {bytes_label(target)} "
                          f"(every element read once and written once); {sol_text(ctx)}.")
                out.append(Rewrite(self.name, f"tiled transpose as a launcher: {plan.label()}", detail,
                                   generate_transpose(found, plan, ctx.module.name, params),
                                   {"launcher": True, "shape": "transpose", "bj": plan.bj, "bk": plan.bk,
                                    "num_warps": plan.num_warps, "ideal_bytes": target,
                                    "sol_pct_before": ctx.evidence.get("sol_pct"), "copy": found.to_json()}))
            return out
        for columns in column_plans(found, ctx.on_cpu, ctx.multiprocessors):
            scratch = (f"; rows split {columns.split} ways, partials in a {found.batch * columns.split} x {found.cols} fp32 "
                       "scratch buffer combined by a second kernel" if columns.split > 1 else "")
            detail = (f"{found.describe()}: each program owns {columns.bc} contiguous columns and walks the rows in "
                      f"[{columns.br}, {columns.bc}] tiles{scratch}. Targets the ideal {bytes_label(target)} (the input read "
                      f"once, the output written once); {sol_text(ctx)}.")
            out.append(Rewrite(self.name, f"column {found.op} as a launcher: {columns.label()}", detail,
                               generate_columns(found, columns, ctx.module.name, params),
                               {"launcher": True, "shape": "columns", "bc": columns.bc, "br": columns.br, "split": columns.split,
                                "num_warps": columns.num_warps, "ideal_bytes": target,
                                "sol_pct_before": ctx.evidence.get("sol_pct"), "reduction": found.to_json()}))
        return out


__all__ = ["ColumnPlan", "StridedAccessFamily", "TilePlan", "column_plans", "generate_columns", "generate_transpose",
           "transpose_plans"]
