"""Windowed ops: pooling rewritten so that each input element is loaded once, with contiguous loads.

Inductor computes max/avg pooling one output at a time, KH x KW masked scalar loads per output. This
family recognises the exact window from the kernel (:mod:`.window_model`: taps, padding masks,
divisor, checked at every edge) and writes a launcher (docs/launchers.md) whose kernel walks the
input rows of a band of output rows once: a row op (``blockscan`` for stride 1, ``shifted`` for any
stride and dilation) computes each input row's horizontal windows, and a column op keeps the last
rows' results in registers so the vertical window reloads nothing. Each input row of a band is
loaded once (plus a halo), each output written once: the plan targets the ideal bytes.

Pure Python; the generated module imports torch and triton only where the gates run it. The
algorithm and its measurements: docs/design-notes.md, "search/rewrites/windowed.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Rewrite, RewriteContext
from .kernel_source import next_pow2
from .launcher_source import HEADER, RecognisingLauncherFamily, bytes_label, runtime_params, sol_text
from .window_model import PoolWindow, recognise_window

MAX_RING = 16  # row results kept in registers: (KH - 1) * DH + 1
MAX_WINDOW_W = 64  # KW: a blockscan block of KW columns must fit a thread's registers
CAUSE = "strided-access"


@dataclass(frozen=True)
class WindowPlan:
    """How the launcher tiles the output: ``method`` blockscan or shifted; ``block`` = BQ (blocks of
    KW columns per program, blockscan) or BW (output columns per program, shifted); ``rows`` =
    output rows per program."""

    method: str
    block: int
    rows: int
    num_warps: int

    def label(self) -> str:
        size = "BQ" if self.method == "blockscan" else "BW"
        return f"{self.method}, {size}={self.block}, ROWS={self.rows}, num_warps={self.num_warps}"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, indent: int, text: str) -> None:
        for line in text.splitlines():
            self.lines.append(" " * indent + line if line else "")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _combine(window: PoolWindow) -> str:
    if window.op == "max":
        return ("@triton.jit\n"
                "def _combine(a, b):\n"
                "    # Inductor's (and torch's) max: a NaN anywhere in the window wins\n"
                "    return tl.where((a > b) | (a != a), a, b)\n")
    return "@triton.jit\ndef _combine(a, b):\n    return a + b\n"


_EXCLUSIVE = (
    "@triton.jit\n"
    "def _exclusive(s1, v1, s2, v2):\n"
    "    # Pairs (everything before the last element combined, the last element): scanning them gives\n"
    "    # the exclusive prefix in the first component, without subtracting (inf and NaN stay exact).\n"
    "    return _combine(_combine(s1, v1), s2), v2\n"
)


def ring_size(window: PoolWindow) -> int:
    return (window.kernel[0] - 1) * window.dilation[0] + 1


def grid_size(window: PoolWindow, plan: WindowPlan) -> tuple[int, int, int]:
    """(column tiles, row bands, programs)."""
    if plan.method == "blockscan":
        q, pw = window.kernel[1], window.padding[1]
        groups = (window.out_w - 1 - pw) // q - (-pw) // q + 1
        tiles = _cdiv(groups, plan.block)
    else:
        tiles = _cdiv(window.out_w, plan.block)
    bands = _cdiv(window.out_h, plan.rows)
    return tiles, bands, window.planes * tiles * bands


def generate_launcher(window: PoolWindow, plan: WindowPlan, kernel_name: str, params: list[str]) -> str:
    """The launcher module's source for ``window`` tiled by ``plan``."""
    kh, kw = window.kernel
    sh, sw = window.stride
    ph, pw = window.padding
    dh, dw = window.dilation
    h, w, oh, ow = window.in_h, window.in_w, window.out_h, window.out_w
    ident = window.identity
    ring = ring_size(window) - 1  # slots 0..ring
    prologue = max(0, ring - sh + 1)
    tiles, bands, programs = grid_size(window, plan)
    blockscan = plan.method == "blockscan"
    q = kw
    qp = next_pow2(q)
    shape = f"[BQ, {qp}]" if blockscan else "[BW]"
    out = _Lines()
    out.add(0, HEADER)
    out.add(0, "\n")
    out.add(0, _combine(window))
    if blockscan:
        out.add(0, "\n")
        out.add(0, _EXCLUSIVE)
    out.add(0, "\n")
    meta = "BQ: tl.constexpr" if blockscan else "BW: tl.constexpr"
    out.add(0, "@triton.jit")
    out.add(0, f"def _pool_window(x_ptr, y_ptr, {meta}, ROWS: tl.constexpr):")
    out.add(4, f"# {window.describe()}; {plan.label()}")
    out.add(4, "pid = tl.program_id(0)")
    out.add(4, f"tile = pid % {tiles}")
    out.add(4, f"rest = pid // {tiles}")
    out.add(4, f"band = rest % {bands}")
    out.add(4, f"plane = (rest // {bands}).to(tl.int64)")
    out.add(4, f"x_plane = x_ptr + plane * {h * w}")
    out.add(4, f"y_plane = y_ptr + plane * {oh * ow}")
    lane_mask = ""
    if blockscan:
        g_min = (-pw) // q
        out.add(4, f"g = {g_min} + tile * BQ + tl.arange(0, BQ)[:, None]")
        out.add(4, f"lane = tl.arange(0, {qp})[None, :]")
        out.add(4, f"col_a = g * {q} + lane")
        out.add(4, f"col_b = col_a + {q}")
        out.add(4, f"ow = col_a + {pw}")
        lane_mask = f" & (lane < {q})" if qp != q else ""
        out.add(4, f"a_ok = (col_a >= 0) & (col_a < {w}){lane_mask}")
        out.add(4, f"b_ok = (col_b >= 0) & (col_b < {w}){lane_mask}")
        out.add(4, f"out_ok = (ow >= 0) & (ow < {ow}){lane_mask}")
        out.add(4, "zero = col_a * 0")
    else:
        out.add(4, "ow = tile * BW + tl.arange(0, BW)")
        out.add(4, f"out_ok = ow < {ow}")
        out.add(4, "zero = ow * 0")
        out.add(4, f"iw = ow * {sw} - {pw}")
        for j in range(kw):
            out.add(4, f"tap_ok{j} = out_ok & (iw >= {-j * dw}) & (iw < {w - j * dw})")
    divisor = _divisor_setup(window)
    for line in divisor["setup"]:
        out.add(4, line)
    out.add(4, "oh0 = band * ROWS")
    first = ring - sh + 1 - prologue - ph  # the first input row a band reads, relative to oh0 * SH
    out.add(4, f"ih_first = oh0 * {sh} + ({first})")
    # One tl.full per slot, never `slot1 = slot0`: Triton's front end decides which variables a
    # loop carries by comparing each one's value before and after the body, so slots that start
    # as the same value would look unchanged and be dropped (the interpreter would not notice).
    for k in range(ring + 1):
        out.add(4, f"slot{k} = tl.full({shape}, {ident}, tl.float32)")

    def row_op(indent: int, ih: str) -> None:
        out.add(indent, f"ih = {ih}")
        out.add(indent, "ihv = zero + ih")
        out.add(indent, f"row_ok = (ihv >= 0) & (ihv < {h})")
        out.add(indent, f"row_ptr = x_plane + ih * {w}")
        if blockscan:
            out.add(indent, f"va = tl.load(row_ptr + col_a, mask=row_ok & a_ok, other={ident}).to(tl.float32)")
            out.add(indent, f"vb = tl.load(row_ptr + col_b, mask=row_ok & b_ok, other={ident}).to(tl.float32)")
            out.add(indent, "suffix = tl.associative_scan(va, 1, _combine, reverse=True)")
            out.add(indent, f"prefix = tl.associative_scan((tl.full([BQ, {qp}], {ident}, tl.float32), vb), 1, "
                            "_exclusive)[0]")
            out.add(indent, "row = _combine(suffix, prefix)")
        else:
            for j in range(kw):
                load = (f"tl.load(row_ptr + iw + {j * dw}, mask=row_ok & tap_ok{j}, other={ident})"
                        ".to(tl.float32)")
                out.add(indent, f"row = {load}" if j == 0 else f"row = _combine(row, {load})")
        for k in range(ring, 0, -1):
            out.add(indent, f"slot{k} = slot{k - 1}")
        out.add(indent, "slot0 = row")

    def emit_output(indent: int, r: str) -> None:
        terms = [f"slot{i * dh}" for i in range(kh)]
        expr = terms[0]
        for term in terms[1:]:
            expr = f"_combine({expr}, {term})"
        out.add(indent, f"win = {expr}")
        for line in divisor["apply"]:
            out.add(indent, line.replace("{r}", r))
        out.add(indent, f"tl.store(y_plane + (oh0 + {r}) * {ow} + ow, win.to(y_ptr.dtype.element_ty), mask=out_ok)")

    if prologue:
        out.add(4, f"for i in tl.static_range({prologue}):")
        row_op(8, "ih_first + i")
    if oh == 1:
        out.add(4, "r = 0")
        for s in range(sh):
            row_op(4, f"ih_first + {prologue + s}")
        emit_output(4, "r")
    else:
        out.add(4, f"for r in range(0, tl.minimum(ROWS, {oh} - oh0)):")
        out.add(8, f"for s in tl.static_range({sh}):")
        row_op(12, f"ih_first + {prologue} + r * {sh} + s")
        emit_output(8, "r")
    out.add(0, "\n")
    args = ", ".join(params)
    size = "BQ" if blockscan else "BW"
    out.add(0, f"def {kernel_name}({args}):")
    out.add(4, f"_pool_window[({programs},)]({window.in_param}, {window.out_param}, {size}={plan.block}, "
               f"ROWS={plan.rows}, num_warps={plan.num_warps})")
    return out.text()


def _divisor_setup(window: PoolWindow) -> dict[str, list[str]]:
    """Lines before the row loop and lines after ``win`` is combined, for avg's division."""
    if window.op != "avg":
        return {"setup": [], "apply": []}
    if window.divisor == "scale":
        return {"setup": [], "apply": [f"win = win * {window.scale!r}"]}
    if window.divisor == "const":
        return {"setup": [], "apply": [f"win = win / {window.scale!r}"]}
    constant = window.divisor_constant()
    if constant is not None:
        return {"setup": [], "apply": [f"win = win / {constant!r}"]}
    (kh, kw), (sh, sw), (ph, pw) = window.kernel, window.stride, window.padding
    h, w = window.in_h, window.in_w

    def extent(start: str, k: int, size: int, pad: int) -> str:
        end = f"tl.minimum({start} + {k}, {size + pad})"
        if window.divisor == "include_pad":
            return f"({end} - ({start}))"
        return f"(tl.minimum({end}, {size}) - tl.maximum({start}, 0))"

    setup = [f"w_start = ow * {sw} - {pw}", f"w_count = {extent('w_start', kw, w, pw)}"]
    apply = [f"h_start = zero + (oh0 + {{r}}) * {sh} - {ph}",
             f"h_count = {extent('h_start', kh, h, ph)}",
             "win = win / (h_count * w_count).to(tl.float32)"]
    return {"setup": setup, "apply": apply}


def plans_for(window: PoolWindow, on_cpu: bool) -> list[WindowPlan]:
    """Tilings to try, best first. On the CPU interpreter few large programs win. On a GPU, 1D windows
    try block scans first and 2D windows shifted rows with a ring of row results, as measured
    (docs/design-notes.md, "Measurements")."""
    kh, kw = window.kernel
    blockscan_ok = window.stride[1] == 1 and window.dilation[1] == 1 and 2 <= kw <= MAX_WINDOW_W
    qp = next_pow2(kw)
    if on_cpu:
        rows = window.out_h
        plans: list[WindowPlan] = []
        if blockscan_ok:
            blocks = min(max(1, next_pow2(_cdiv(window.out_w + kw, kw))), max(1, 1024 // qp))
            plans.append(WindowPlan("blockscan", blocks, rows, 4))
        plans.append(WindowPlan("shifted", min(next_pow2(window.out_w), 1024), rows, 4))
        return plans
    width = next_pow2(window.out_w)
    if window.out_h == 1:
        scans = [WindowPlan("blockscan", max(1, 1024 // qp), 1, 4), WindowPlan("blockscan", max(1, 2048 // qp), 1, 8)]
        shifted = [WindowPlan("shifted", min(1024, width), 1, 4), WindowPlan("shifted", min(2048, width), 1, 8)]
        plans = (scans if blockscan_ok else []) + shifted
    else:
        short, tall = min(32, window.out_h), min(64, window.out_h)
        plans = [WindowPlan("shifted", min(256, width), short, 4), WindowPlan("shifted", min(256, width), tall, 4),
                 WindowPlan("shifted", min(512, width), tall, 8)]
        if blockscan_ok:
            plans.append(WindowPlan("blockscan", max(1, 512 // qp), short, 4))
    return list(dict.fromkeys(plans))  # without repeats, in order


class WindowedFamily(RecognisingLauncherFamily[PoolWindow]):
    name = "windowed"
    summary = ("pooling windows rewritten as a launcher that loads each input row once with contiguous loads "
               "(block scans along the row, a ring of row results down the column)")
    causes = (CAUSE,)
    recognises = "pooling window"

    def recognise_kernel(self, ctx: RewriteContext) -> PoolWindow:
        return recognise_window(ctx.original if ctx.module.text == ctx.original.text else ctx.module,
                                ctx.evidence.get("launch_args"))

    def declines(self, ctx: RewriteContext, found: PoolWindow) -> str | None:
        if ring_size(found) > MAX_RING:
            return f"the vertical window spans {ring_size(found)} rows (more than {MAX_RING} row results to hold)"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        window = self.recognise(ctx)
        params = runtime_params(ctx.module)
        target = self.target_bytes(ctx, window.in_param, window.out_param)
        out: list[Rewrite] = []
        for plan in plans_for(window, ctx.on_cpu):
            source = generate_launcher(window, plan, ctx.module.name, params)
            _, _, programs = grid_size(window, plan)
            detail = (f"{window.describe()}: Inductor loads {window.kernel[0] * window.kernel[1]} taps per output; "
                      f"this launcher ({plan.label()}, {programs} programs) loads each input row of a band once "
                      f"({'two aligned block loads and in-register scans' if plan.method == 'blockscan' else 'shifted row loads'}"
                      f", a ring of {ring_size(window)} row results down the column). Targets the ideal "
                      f"{bytes_label(target)} (every input read once, every output written once); {sol_text(ctx)}.")
            out.append(Rewrite(self.name, f"{window.op} window as a launcher: {plan.label()}", detail, source,
                               {"launcher": True, "method": plan.method, "block": plan.block, "rows": plan.rows,
                                "num_warps": plan.num_warps, "programs": programs, "ideal_bytes": target,
                                "sol_pct_before": ctx.evidence.get("sol_pct"), "window": window.to_json()}))
        return out


__all__ = ["WindowPlan", "WindowedFamily", "generate_launcher", "grid_size", "plans_for", "ring_size"]
