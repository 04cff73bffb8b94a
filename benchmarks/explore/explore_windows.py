"""Windowed ops and strided access: hand-written Triton strategies against Inductor's max-autotune (issue 16).

    PYTHONPATH=.:server python3 benchmarks/gpu/run_all.py --out $OUT explore/explore_windows:180
    python3 benchmarks/explore/explore_windows.py OUT_DIR          (directly; budget from KERNELOPT_GPU_BUDGET_S)

For each pattern (pooling, transposes, a row scan) at KernelBench scale (0.5-8 GB on the device):

1. the torch op compiled with ``torch.compile(mode="max-autotune-no-cudagraphs")`` (and eager torch),
   Inductor's kernels recorded (name, chosen config, loads per output, the full output code);
2. each hand-written variant (a plain function ``variant(x, out, **config) -> None``, easy to lift into a
   rewrite family) over a small config sweep: checked against eager torch on two input sets with the
   output poisoned (NaN) first, then timed;
3. every timing is a ``triton.testing.do_bench`` median per input set, over several random input sets
   (never zeros); the spread is (max - min) / median over the sets. Inductor is timed at the start and at
   the end of each pattern (A/A), so a difference smaller than that spread is noise;
4. ideal bytes = each input read once + each output written once; SOL % = ideal bytes / (time x the copy
   bandwidth measured here with a 2 GiB device-to-device copy, bytes read + written).

Writes ``explore_windows.json`` (everything) and ``explore_windows.md`` (tables) into OUT_DIR after every
step, so a run stopped by its budget keeps what it measured; skipped patterns and configs are recorded
with the reason. ``KERNELOPT_WINDOWS_CASES=name,name`` runs a subset (see ``CASE_ORDER``). Two background
processes (this file with ``--warm``) compile every variant launch into Triton's on-disk cache while the
main process waits on Inductor's autotuning; ``KERNELOPT_WINDOWS_WARM=0`` turns them off.

The kernels at the top import only triton; ``tests/test_explore_windows.py`` runs every variant on tiny
shapes in the Triton interpreter (TRITON_INTERPRET=1) against torch.
"""

# No `from __future__ import annotations`: run_all.py loads this file without registering it in
# sys.modules, and dataclasses with string annotations look their module up there.
import json
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

# =====================================================================================================
# Kernels. Compute is float32; K (window), S (stride), P (padding) are constexpr: one compiled kernel per
# pooling configuration, which lets Triton prove the alignment of the window loads.
# =====================================================================================================


# Kept flat on purpose: no nested @triton.jit calls inside the row loops. Compiled code inlines them
# anyway, but the interpreter the CPU tests use pays milliseconds per nested call. `X if IS_MAX else Y`
# with a constexpr IS_MAX is resolved at compile time; NaN propagates like torch's max pooling.


@triton.jit
def _hwin_shifted(row_ptr, ow, mask, W, K: tl.constexpr, SW: tl.constexpr, PW: tl.constexpr,
                  IS_MAX: tl.constexpr):
    """Window op along a row: K loads shifted by one element each (the shifted ones hit L1)."""
    iw = ow * SW - PW
    acc = tl.load(row_ptr + iw, mask=mask & (iw >= 0) & (iw < W),
                  other=float("-inf") if IS_MAX else 0.0).to(tl.float32)
    for j in tl.static_range(1, K):
        v = tl.load(row_ptr + iw + j, mask=mask & (iw + j >= 0) & (iw + j < W),
                    other=float("-inf") if IS_MAX else 0.0).to(tl.float32)
        acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else acc + v
    return acc


@triton.jit
def _pool2d_tile_kernel(x_ptr, y_ptr, H, W, OH, OW, n_tw, n_th,
                        K: tl.constexpr, S: tl.constexpr, P: tl.constexpr, D: tl.constexpr,
                        IS_MAX: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """A [BH, BW] output tile per program; K*K shifted 2D loads (Inductor's algorithm without its
    flat-index div/mod, in a 2D tile so the halo stays in L1)."""
    pid = tl.program_id(0)
    tw = pid % n_tw
    rest = pid // n_tw
    th = rest % n_th
    plane = (rest // n_th).to(tl.int64)
    oh = th * BH + tl.arange(0, BH)[:, None]
    ow = tw * BW + tl.arange(0, BW)[None, :]
    omask = (oh < OH) & (ow < OW)
    x_plane = x_ptr + plane * H * W
    acc = tl.full([BH, BW], float("-inf") if IS_MAX else 0.0, tl.float32)
    for i in tl.static_range(K):
        ih = oh * S - P + i * D
        row_ok = omask & (ih >= 0) & (ih < H)
        for j in tl.static_range(K):
            iw = ow * S - P + j * D
            v = tl.load(x_plane + ih * W + iw, mask=row_ok & (iw >= 0) & (iw < W),
                        other=float("-inf") if IS_MAX else 0.0).to(tl.float32)
            acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else acc + v
    if not IS_MAX:
        acc = acc / (K * K)  # count_include_pad=True, ceil_mode=False: every window counts K*K
    tl.store(y_ptr + plane * OH * OW + oh * OW + ow, acc.to(y_ptr.dtype.element_ty), mask=omask)


@triton.jit
def _pool2d_rolling_kernel(x_ptr, y_ptr, H, W, OH, OW, n_tw, n_tr,
                           K: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
                           PW: tl.constexpr, IS_MAX: tl.constexpr, BW: tl.constexpr, ROWS: tl.constexpr):
    """Separable pooling in registers: a program owns BW output columns x ROWS output rows and walks its
    input rows once; each row's horizontal window op (K shifted loads) enters a ring of the last K-1
    rows, so the vertical op reloads nothing. K loads per input row instead of K*K per output."""
    pid = tl.program_id(0)
    tw = pid % n_tw
    rest = pid // n_tw
    tr = rest % n_tr
    plane = (rest // n_tr).to(tl.int64)
    ow = tw * BW + tl.arange(0, BW)
    omask = ow < OW
    x_plane = x_ptr + plane * H * W
    y_plane = y_ptr + plane * OH * OW
    oh0 = tr * ROWS
    n_in = (tl.minimum(ROWS, OH - oh0) - 1) * SH + K
    ih0 = oh0 * SH - PH
    p1 = tl.full([BW], float("-inf") if IS_MAX else 0.0, tl.float32)
    p2 = p1
    p3 = p1
    for t in range(0, n_in):
        # Tensor-wide row tests: the interpreter mishandles scalar-bool & tensor masks; `ow * 0` folds away.
        ih = ow * 0 + (ih0 + t)
        h = _hwin_shifted(x_plane + (ih0 + t) * W, ow, omask & (ih >= 0) & (ih < H), W, K, SW, PW, IS_MAX)
        win = h
        if K >= 2:
            win = tl.maximum(win, p1, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p1
        if K >= 3:
            win = tl.maximum(win, p2, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p2
        if K >= 4:
            win = tl.maximum(win, p3, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p3
        if not IS_MAX:
            win = win / (K * K)
        tt = ow * 0 + (t - (K - 1))  # input row t closes the window of output row oh0 + tt / SH
        tl.store(y_plane + (oh0 + tt // SH) * OW + ow, win.to(y_ptr.dtype.element_ty),
                 mask=omask & (tt >= 0) & (tt % SH == 0))
        p3 = p2
        p2 = p1
        p1 = h


@triton.jit
def _hwin_quad(row_ptr, col, mA, mB, K: tl.constexpr, PHASE: tl.constexpr, SW: tl.constexpr,
               NPQ: tl.constexpr, BQ: tl.constexpr, IS_MAX: tl.constexpr):
    """Window op along a row from aligned 16-byte loads: quad A = columns 4g..4g+3 and quad B = the next
    (an L1 hit), split into registers; the NPQ windows starting in quad g (at PHASE + k*SW) are built
    from e = a0..a3, b0..b2. Returns [BQ, NPQ]."""
    A = tl.load(row_ptr + col, mask=mA, other=float("-inf") if IS_MAX else 0.0).to(tl.float32)
    B = tl.load(row_ptr + col + 4, mask=mB, other=float("-inf") if IS_MAX else 0.0).to(tl.float32)
    a_even, a_odd = tl.split(tl.reshape(A, [BQ, 2, 2]))  # reshape [BQ, 2, 2]: (j, k) = column 2j + k
    a0, a2 = tl.split(a_even)
    a1, a3 = tl.split(a_odd)
    b_even, b_odd = tl.split(tl.reshape(B, [BQ, 2, 2]))
    b0, b2 = tl.split(b_even)
    b1, b3 = tl.split(b_odd)
    e = (a0, a1, a2, a3, b0, b1, b2)
    w0 = e[PHASE]
    for t in tl.static_range(1, K):
        w0 = tl.maximum(w0, e[PHASE + t], propagate_nan=tl.PropagateNan.ALL) if IS_MAX else w0 + e[PHASE + t]
    if NPQ == 1:
        h = tl.expand_dims(w0, 1)
    else:
        w1 = e[PHASE + SW]
        for t in tl.static_range(1, K):
            w1 = tl.maximum(w1, e[PHASE + SW + t], propagate_nan=tl.PropagateNan.ALL) if IS_MAX \
                else w1 + e[PHASE + SW + t]
        if NPQ == 2:
            h = tl.join(w0, w1)
        else:  # SW == 1, PHASE == 0
            w2 = e[2]
            w3 = e[3]
            for t in tl.static_range(1, K):
                w2 = tl.maximum(w2, e[2 + t], propagate_nan=tl.PropagateNan.ALL) if IS_MAX else w2 + e[2 + t]
                w3 = tl.maximum(w3, e[3 + t], propagate_nan=tl.PropagateNan.ALL) if IS_MAX else w3 + e[3 + t]
            # join(join(w0, w2), join(w1, w3))[q, j, k] = w(2j + k): reshaped back to column order
            h = tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), [BQ, 4])
    return h


@triton.jit
def _pool2d_quad_kernel(x_ptr, y_ptr, H, W, OH, OW, G_MIN, n_tw, n_tr,
                        K: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
                        PHASE: tl.constexpr, E: tl.constexpr, NPQ: tl.constexpr, IS_MAX: tl.constexpr,
                        BQ: tl.constexpr, ROWS: tl.constexpr):
    """The rolling kernel with vectorised horizontal windows: input quad g (columns 4g..4g+3) holds the
    NPQ = 4 / SW window starts 4g + PHASE + k*SW, i.e. outputs g*NPQ + E + k. Loads are 16-byte aligned
    whatever the padding; the (possibly misaligned) shift moves to the stores."""
    pid = tl.program_id(0)
    tw = pid % n_tw
    rest = pid // n_tw
    tr = rest % n_tr
    plane = (rest // n_tr).to(tl.int64)
    g = G_MIN + tw * BQ + tl.arange(0, BQ)
    col = 4 * g[:, None] + tl.arange(0, 4)[None, :]
    mA = (col >= 0) & (col < W)
    mB = (col + 4 >= 0) & (col + 4 < W)
    ow = g[:, None] * NPQ + E + tl.arange(0, NPQ)[None, :]
    omask = (ow >= 0) & (ow < OW)
    x_plane = x_ptr + plane * H * W
    y_plane = y_ptr + plane * OH * OW
    oh0 = tr * ROWS
    n_in = (tl.minimum(ROWS, OH - oh0) - 1) * SH + K
    ih0 = oh0 * SH - PH
    p1 = tl.full([BQ, NPQ], float("-inf") if IS_MAX else 0.0, tl.float32)
    p2 = p1
    p3 = p1
    for t in range(0, n_in):
        ih = col * 0 + (ih0 + t)
        row_ok = (ih >= 0) & (ih < H)
        h = _hwin_quad(x_plane + (ih0 + t) * W, col, mA & row_ok, mB & row_ok, K, PHASE, SW, NPQ, BQ, IS_MAX)
        win = h
        if K >= 2:
            win = tl.maximum(win, p1, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p1
        if K >= 3:
            win = tl.maximum(win, p2, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p2
        if K >= 4:
            win = tl.maximum(win, p3, propagate_nan=tl.PropagateNan.ALL) if IS_MAX else win + p3
        if not IS_MAX:
            win = win / (K * K)
        tt = ow * 0 + (t - (K - 1))
        tl.store(y_plane + (oh0 + tt // SH) * OW + ow, win.to(y_ptr.dtype.element_ty),
                 mask=omask & (tt >= 0) & (tt % SH == 0))
        p3 = p2
        p2 = p1
        p1 = h


@triton.jit
def _pool1d_shifted_kernel(x_ptr, y_ptr, L, OL, n_t, K: tl.constexpr, S: tl.constexpr, P: tl.constexpr,
                           IS_MAX: tl.constexpr, BW: tl.constexpr):
    """1D pooling, a [BW] output tile per program, K shifted loads per output (no flat-index div/mod)."""
    pid = tl.program_id(0)
    t = pid % n_t
    row = (pid // n_t).to(tl.int64)
    ow = t * BW + tl.arange(0, BW)
    omask = ow < OL
    acc = _hwin_shifted(x_ptr + row * L, ow, omask, L, K, S, P, IS_MAX)
    if not IS_MAX:
        acc = acc / K
    tl.store(y_ptr + row * OL + ow, acc.to(y_ptr.dtype.element_ty), mask=omask)


@triton.jit
def _avgpool1d_blockscan_kernel(x_ptr, y_ptr, L, OL, G_MIN, n_t, K: tl.constexpr, P: tl.constexpr,
                                BQ: tl.constexpr):
    """Stride-1 window sums from two aligned block loads (block g = columns Kg..Kg+K-1, and the next):
    the window starting at Kg + r is suffix_A(r) + prefix_B(r-1) = (sum A - cumA[r] + A[r]) + (cumB[r] - B[r]),
    with the scans of length K inside a thread."""
    pid = tl.program_id(0)
    t = pid % n_t
    row = (pid // n_t).to(tl.int64)
    g = G_MIN + t * BQ + tl.arange(0, BQ)
    col = K * g[:, None] + tl.arange(0, K)[None, :]
    x_row = x_ptr + row * L
    A = tl.load(x_row + col, mask=(col >= 0) & (col < L), other=0.0).to(tl.float32)
    B = tl.load(x_row + col + K, mask=(col + K >= 0) & (col + K < L), other=0.0).to(tl.float32)
    cA = tl.cumsum(A, axis=1)
    cB = tl.cumsum(B, axis=1)
    sA = tl.sum(A, axis=1, keep_dims=True)
    w = ((sA - cA + A) + (cB - B)) / K
    ow = col + P
    tl.store(y_ptr + row * OL + ow, w.to(y_ptr.dtype.element_ty), mask=(ow >= 0) & (ow < OL))


@triton.jit
def _avgpool1d_tilescan_kernel(x_ptr, y_ptr, L, OL, n_t, K: tl.constexpr, P: tl.constexpr, BW: tl.constexpr):
    """Stride-1 window sums of any K from one prefix scan per tile: with A = x[c0 + i], B = x[c0 + K + i],
    sum(x[c0+i .. c0+i+K-1]) = sum(A[:K]) + (cumB[i] - B[i]) - (cumA[i] - A[i])."""
    pid = tl.program_id(0)
    t = pid % n_t
    row = (pid // n_t).to(tl.int64)
    i = tl.arange(0, BW)
    c = t * BW - P + i
    x_row = x_ptr + row * L
    A = tl.load(x_row + c, mask=(c >= 0) & (c < L), other=0.0).to(tl.float32)
    B = tl.load(x_row + c + K, mask=(c + K >= 0) & (c + K < L), other=0.0).to(tl.float32)
    head = tl.sum(tl.where(i < K, A, 0.0), axis=0)
    w = (head + (tl.cumsum(B, axis=0) - B) - (tl.cumsum(A, axis=0) - A)) / K
    ow = t * BW + i
    tl.store(y_ptr + row * OL + ow, w.to(y_ptr.dtype.element_ty), mask=ow < OL)


@triton.jit
def _transpose_kernel(x_ptr, y_ptr, M, N, n_tm, n_tn, BM: tl.constexpr, BN: tl.constexpr,
                      GROUP_M: tl.constexpr, USE_TRANS: tl.constexpr):
    """y[b, n, m] = x[b, m, n] through a [BM, BN] register tile: coalesced loads along n, coalesced
    stores along m (Triton moves the tile through shared memory). GROUP_M row-tiles are swept together."""
    pid = tl.program_id(0)
    per_batch = n_tm * n_tn
    b = (pid // per_batch).to(tl.int64)
    t = pid % per_batch
    width = GROUP_M * n_tn
    first_m = (t // width) * GROUP_M
    gsize = tl.minimum(n_tm - first_m, GROUP_M)
    tm = first_m + (t % width) % gsize
    tn = (t % width) // gsize
    rm = tm * BM + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    x_b = x_ptr + b * M * N
    y_b = y_ptr + b * M * N
    tile = tl.load(x_b + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N))
    if USE_TRANS:
        tl.store(y_b + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=(rn[:, None] < N) & (rm[None, :] < M))
    else:
        tl.store(y_b + rn[None, :] * M + rm[:, None], tile, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _cumsum_rowloop_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    """One program per row, one pass: scan a block, add the carry, carry += block sum."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    carry = tl.zeros([1], tl.float32)
    for off in range(0, N, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        m = idx < N
        v = tl.load(x_row + idx, mask=m, other=0.0).to(tl.float32)
        tl.store(y_row + idx, (tl.cumsum(v, axis=0) + carry).to(y_ptr.dtype.element_ty), mask=m)
        carry += tl.sum(v, axis=0, keep_dims=True)


@triton.jit
def _chunk_sum_kernel(x_ptr, s_ptr, N, n_chunks, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // n_chunks).to(tl.int64)
    ch = pid % n_chunks
    idx = ch * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(x_ptr + row * N + idx, mask=idx < N, other=0.0).to(tl.float32)
    tl.store(s_ptr + row * n_chunks + ch, tl.sum(v, axis=0))


@triton.jit
def _exclusive_scan_rows_kernel(s_ptr, n_chunks, NC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    idx = tl.arange(0, NC)
    m = idx < n_chunks
    v = tl.load(s_ptr + row * n_chunks + idx, mask=m, other=0.0)
    tl.store(s_ptr + row * n_chunks + idx, tl.cumsum(v, axis=0) - v, mask=m)


@triton.jit
def _chunk_scan_add_kernel(x_ptr, s_ptr, y_ptr, N, n_chunks, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // n_chunks).to(tl.int64)
    ch = pid % n_chunks
    idx = ch * CHUNK + tl.arange(0, CHUNK)
    m = idx < N
    v = tl.load(x_ptr + row * N + idx, mask=m, other=0.0).to(tl.float32)
    offset = tl.load(s_ptr + row * n_chunks + ch)
    tl.store(y_ptr + row * N + idx, (tl.cumsum(v, axis=0) + offset).to(y_ptr.dtype.element_ty), mask=m)


# =====================================================================================================
# Variants: plain functions variant(x, out, **config) -> None. Each checks what it supports and raises
# ValueError otherwise, so a rewrite family can ask before it rewrites.
# =====================================================================================================

POOL_OPS = ("max", "avg")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(why)


def pool_out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output length of a pooling window (ceil_mode=False), as torch computes it."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _check_pool2d(x: torch.Tensor, out: torch.Tensor, kernel: int, stride: int, padding: int,
                  dilation: int, op: str) -> tuple[int, int, int, int, int]:
    _require(op in POOL_OPS, f"op must be one of {POOL_OPS}, not {op!r}")
    _require(x.dim() == 4 and x.is_contiguous(), "x must be a contiguous (N, C, H, W) tensor")
    _require(x.dtype == torch.float32, "float32 only in this prototype")
    _require(kernel >= 1 and stride >= 1 and 0 <= 2 * padding <= kernel, "torch needs padding <= kernel / 2")
    n, c, h, w = x.shape
    oh = pool_out_size(h, kernel, stride, padding, dilation)
    ow = pool_out_size(w, kernel, stride, padding, dilation)
    _require(tuple(out.shape) == (n, c, oh, ow) and out.is_contiguous() and out.dtype == x.dtype,
             f"out must be a contiguous {x.dtype} tensor of shape {(n, c, oh, ow)}")
    return n * c, h, w, oh, ow


def pool2d_tile(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                dilation: int = 1, op: str = "max", BH: int = 16, BW: int = 64, num_warps: int = 4) -> None:
    """max/avg pooling (square window, count_include_pad) with a 2D output tile and K*K shifted loads."""
    planes, h, w, oh, ow = _check_pool2d(x, out, kernel, stride, padding, dilation, op)
    n_tw, n_th = _cdiv(ow, BW), _cdiv(oh, BH)
    _require(op == "max" or dilation == 1, "avg pooling has no dilation")
    _pool2d_tile_kernel[(planes * n_th * n_tw,)](
        x, out, h, w, oh, ow, n_tw, n_th, K=kernel, S=stride, P=padding, D=dilation, IS_MAX=op == "max",
        BH=BH, BW=BW, num_warps=num_warps)


def pool2d_rolling(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                   op: str = "max", BW: int = 256, ROWS: int = 64, num_warps: int = 4) -> None:
    """Separable pooling with a ring of K-1 rows in registers; horizontal windows from shifted loads."""
    planes, h, w, oh, ow = _check_pool2d(x, out, kernel, stride, padding, 1, op)
    _require(kernel <= 4, "the register ring holds at most 3 earlier rows: kernel <= 4")
    n_tw, n_tr = _cdiv(ow, BW), _cdiv(oh, ROWS)
    _pool2d_rolling_kernel[(planes * n_tr * n_tw,)](
        x, out, h, w, oh, ow, n_tw, n_tr, K=kernel, SH=stride, SW=stride, PH=padding, PW=padding,
        IS_MAX=op == "max", BW=BW, ROWS=ROWS, num_warps=num_warps)


@dataclass(frozen=True)
class QuadGeometry:
    """Where the windows of a horizontal stride-S pooling fall in aligned quads of 4 input columns."""
    phase: int  # window starts in a quad: 4g + phase + k*S, k < per_quad
    first_output: int  # E: quad g produces outputs g*per_quad + E + k
    per_quad: int
    g_min: int  # first quad holding a window of output 0
    n_quads: int


def quad_geometry(kernel: int, stride: int, padding: int, out_width: int) -> QuadGeometry:
    _require(stride in (1, 2, 4), "quad windows need a horizontal stride of 1, 2 or 4")
    _require(kernel <= 4, "quad windows reach at most 3 columns into the next quad: kernel <= 4")
    phase = (-padding) % stride
    e = (phase + padding) // stride
    per_quad = 4 // stride
    g_min = (-e) // per_quad
    g_max = (out_width - 1 - e) // per_quad
    return QuadGeometry(phase, e, per_quad, g_min, g_max - g_min + 1)


def pool2d_rolling_quad(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                        op: str = "max", BQ: int = 64, ROWS: int = 64, num_warps: int = 4) -> None:
    """Separable pooling with a register ring of rows; horizontal windows from aligned 16-byte quads."""
    planes, h, w, oh, ow = _check_pool2d(x, out, kernel, stride, padding, 1, op)
    geo = quad_geometry(kernel, stride, padding, ow)
    n_tw, n_tr = _cdiv(geo.n_quads, BQ), _cdiv(oh, ROWS)
    _pool2d_quad_kernel[(planes * n_tr * n_tw,)](
        x, out, h, w, oh, ow, geo.g_min, n_tw, n_tr, K=kernel, SH=stride, SW=stride, PH=padding,
        PHASE=geo.phase, E=geo.first_output, NPQ=geo.per_quad, IS_MAX=op == "max", BQ=BQ, ROWS=ROWS,
        num_warps=num_warps)


def _check_pool1d(x: torch.Tensor, out: torch.Tensor, kernel: int, stride: int,
                  padding: int) -> tuple[int, int, int]:
    _require(x.dim() == 3 and x.is_contiguous() and x.dtype == torch.float32,
             "x must be a contiguous float32 (N, C, L) tensor")
    _require(kernel >= 1 and stride >= 1 and 0 <= 2 * padding <= kernel, "torch needs padding <= kernel / 2")
    n, c, length = x.shape
    ol = pool_out_size(length, kernel, stride, padding)
    _require(tuple(out.shape) == (n, c, ol) and out.is_contiguous() and out.dtype == x.dtype,
             f"out must be a contiguous {x.dtype} tensor of shape {(n, c, ol)}")
    return n * c, length, ol


def avgpool1d_shifted(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                      BW: int = 1024, num_warps: int = 4) -> None:
    """avg_pool1d (count_include_pad) with K shifted loads per output on a contiguous row tile."""
    rows, length, ol = _check_pool1d(x, out, kernel, stride, padding)
    n_t = _cdiv(ol, BW)
    _pool1d_shifted_kernel[(rows * n_t,)](x, out, length, ol, n_t, K=kernel, S=stride, P=padding,
                                          IS_MAX=False, BW=BW, num_warps=num_warps)


def avgpool1d_blockscan(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                        BQ: int = 128, num_warps: int = 4) -> None:
    """Stride-1 avg_pool1d, power-of-two kernel: two aligned block loads and in-thread block scans."""
    rows, length, ol = _check_pool1d(x, out, kernel, stride, padding)
    _require(stride == 1, "stride 1 only")
    _require(kernel >= 2 and kernel & (kernel - 1) == 0, "kernel must be a power of two")
    g_min = (-padding) // kernel
    g_max = (ol - 1 - padding) // kernel
    n_t = _cdiv(g_max - g_min + 1, BQ)
    _avgpool1d_blockscan_kernel[(rows * n_t,)](x, out, length, ol, g_min, n_t, K=kernel, P=padding, BQ=BQ,
                                               num_warps=num_warps)


def avgpool1d_tilescan(x: torch.Tensor, out: torch.Tensor, *, kernel: int, stride: int, padding: int,
                       BW: int = 1024, num_warps: int = 4) -> None:
    """Stride-1 avg_pool1d, any kernel <= BW: window sums from one prefix scan per tile."""
    rows, length, ol = _check_pool1d(x, out, kernel, stride, padding)
    _require(stride == 1, "stride 1 only")
    _require(kernel <= BW, "kernel must fit in the tile")
    n_t = _cdiv(ol, BW)
    _avgpool1d_tilescan_kernel[(rows * n_t,)](x, out, length, ol, n_t, K=kernel, P=padding, BW=BW,
                                              num_warps=num_warps)


def transpose_tiled(x: torch.Tensor, out: torch.Tensor, *, BM: int = 64, BN: int = 64, GROUP_M: int = 1,
                    use_trans: bool = True, num_warps: int = 4) -> None:
    """out[b, n, m] = x[b, m, n] for contiguous (B, M, N) -> (B, N, M), or 2D (M, N) -> (N, M)."""
    _require(x.dim() in (2, 3) and x.is_contiguous() and out.is_contiguous() and x.dtype == out.dtype,
             "x and out must be contiguous (M, N) / (B, M, N) tensors of one dtype")
    b, m, n = (1, *x.shape) if x.dim() == 2 else tuple(x.shape)
    _require(tuple(out.shape) == ((n, m) if x.dim() == 2 else (b, n, m)), "out must be x transposed")
    n_tm, n_tn = _cdiv(m, BM), _cdiv(n, BN)
    _transpose_kernel[(b * n_tm * n_tn,)](x, out, m, n, n_tm, n_tn, BM=BM, BN=BN, GROUP_M=GROUP_M,
                                          USE_TRANS=use_trans, num_warps=num_warps)


def nchw_to_nhwc(x: torch.Tensor, out: torch.Tensor, **config: Any) -> None:
    """out = x.permute(0, 2, 3, 1).contiguous(): a batched (C, H*W) -> (H*W, C) transpose."""
    _require(x.dim() == 4 and out.dim() == 4, "x must be (N, C, H, W) and out (N, H, W, C)")
    n, c, h, w = x.shape
    _require(tuple(out.shape) == (n, h, w, c), "out must be (N, H, W, C)")
    transpose_tiled(x.view(n, c, h * w), out.view(n, h * w, c), **config)


def transpose_2d(x: torch.Tensor, out: torch.Tensor, **config: Any) -> None:
    """out = x.t().contiguous()."""
    _require(x.dim() == 2, "x must be 2D")
    transpose_tiled(x, out, **config)


def _check_rows(x: torch.Tensor, out: torch.Tensor) -> tuple[int, int]:
    _require(x.dim() == 2 and x.is_contiguous() and x.dtype == torch.float32, "x must be contiguous float32 2D")
    _require(out.shape == x.shape and out.is_contiguous() and out.dtype == x.dtype, "out must be like x")
    return x.shape[0], x.shape[1]


def cumsum_rowloop(x: torch.Tensor, out: torch.Tensor, *, BLOCK: int = 2048, num_warps: int = 8) -> None:
    """torch.cumsum(x, dim=1): one program per row, one read and one write of each element."""
    rows, n = _check_rows(x, out)
    _cumsum_rowloop_kernel[(rows,)](x, out, n, BLOCK=BLOCK, num_warps=num_warps)


def cumsum_twolevel(x: torch.Tensor, out: torch.Tensor, *, CHUNK: int = 4096, num_warps: int = 8) -> None:
    """torch.cumsum(x, dim=1) in three launches: chunk sums -> exclusive scan of them -> scan + offset.
    Reads x twice (1.5x the ideal bytes) but has rows * chunks programs: for few long rows."""
    rows, n = _check_rows(x, out)
    n_chunks = _cdiv(n, CHUNK)
    sums = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
    _chunk_sum_kernel[(rows * n_chunks,)](x, sums, n, n_chunks, CHUNK=CHUNK, num_warps=num_warps)
    _exclusive_scan_rows_kernel[(rows,)](sums, n_chunks, NC=max(16, triton.next_power_of_2(n_chunks)))
    _chunk_scan_add_kernel[(rows * n_chunks,)](x, sums, out, n, n_chunks, CHUNK=CHUNK, num_warps=num_warps)


# =====================================================================================================
# The GPU campaign.
# =====================================================================================================

NSETS = 3  # random input sets per pattern
COPY_BYTES = 2 << 30
BENCH_WARMUP_MS = 10
BENCH_REP_MS = 40
FINAL_RESERVE_S = 8.0  # kept to write the results; run_all.py kills the process at its budget
INDUCTOR_COMPILE_EST_S = 25.0  # a max-autotune compile of one pointwise/scan kernel: about 10-30 s
CONFIG_EST_S = 2.5  # one config: JIT compile, two checks, NSETS timings
MODE = "max-autotune-no-cudagraphs"


@dataclass
class Variant:
    name: str
    fn: Callable[..., None]  # fn(x, out, **config)
    configs: list[dict[str, Any]]
    prediction: str


@dataclass
class Case:
    name: str
    op: str  # the torch op, described
    shape: tuple[int, ...]
    torch_fn: Callable[[torch.Tensor], torch.Tensor]
    variants: list[Variant]
    exact: bool  # max pooling and copies must match bit for bit
    prediction: str
    why_size: str
    tolerance: float = 1e-5  # on |out - ref|_2 / |ref|_2 when not exact

    @property
    def description(self) -> str:
        return f"{self.op} of {tuple(self.shape)} fp32"


@dataclass
class Timing:
    per_set_ms: list[float]
    median_ms: float
    spread: float  # (max - min) / median over the input sets


@dataclass
class Row:
    variant: str
    config: dict[str, Any]
    status: str  # ok | wrong | error | skipped
    first_call_s: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    norm_rel_err: float | None = None
    timing: Timing | None = None
    sol_pct: float | None = None
    speedup_vs_inductor: float | None = None
    detail: str = ""


@dataclass
class CaseResult:
    name: str
    description: str
    shape: list[int]
    out_shape: list[int] = field(default_factory=list)
    ideal_bytes: int = 0
    floor_ms_at_copy_bw: float = 0.0
    status: str = "pending"
    detail: str = ""
    compile_s: float | None = None
    inductor_kernels: list[dict[str, Any]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    wall_s: float = 0.0


def _pool2d_case(name: str, kernel: int, stride: int, padding: int, op: str, shape: tuple[int, ...],
                 prediction: str, why: str, tile_cfgs: list[dict], roll_cfgs: list[dict],
                 quad_cfgs: list[dict], predictions: dict[str, str]) -> Case:
    def bind(fn: Callable[..., None]) -> Callable[..., None]:
        def variant(x: torch.Tensor, out: torch.Tensor, **cfg: Any) -> None:
            fn(x, out, kernel=kernel, stride=stride, padding=padding, op=op, **cfg)
        return variant

    if op == "max":
        torch_fn = lambda x: torch.nn.functional.max_pool2d(x, kernel, stride, padding)  # noqa: E731
    else:
        torch_fn = lambda x: torch.nn.functional.avg_pool2d(x, kernel, stride, padding)  # noqa: E731
    variants = [Variant("rolling_quad", bind(pool2d_rolling_quad), quad_cfgs, predictions["rolling_quad"]),
                Variant("rolling_shifted", bind(pool2d_rolling), roll_cfgs, predictions["rolling_shifted"]),
                Variant("tile_shifted", bind(pool2d_tile), tile_cfgs, predictions["tile_shifted"])]
    desc = f"{op}_pool2d(kernel={kernel}, stride={stride}, padding={padding})"
    return Case(name, desc, shape, torch_fn, [v for v in variants if v.configs], exact=op == "max",
                prediction=prediction, why_size=why)


def _avgpool1d_case() -> Case:
    k, s, p = 8, 1, 4

    def bind(fn: Callable[..., None]) -> Callable[..., None]:
        def variant(x: torch.Tensor, out: torch.Tensor, **cfg: Any) -> None:
            fn(x, out, kernel=k, stride=s, padding=p, **cfg)
        return variant

    return Case(
        "avgpool1d_k8s1p4", "avg_pool1d(kernel=8, stride=1, padding=4)",
        (64, 128, 65536), lambda x: torch.nn.functional.avg_pool1d(x, k, s, p),
        [Variant("blockscan", bind(avgpool1d_blockscan),
                 [{"BQ": 128, "num_warps": 4}, {"BQ": 256, "num_warps": 8}],
                 "2 aligned 16-byte block loads per 8 outputs and in-thread scans: about 85-90% SOL, "
                 "about 1.5x Inductor"),
         Variant("tilescan", bind(avgpool1d_tilescan),
                 [{"BW": 1024, "num_warps": 4}, {"BW": 2048, "num_warps": 8}],
                 "same bytes as blockscan, plus two cross-warp scans per tile: 75-85% SOL"),
         Variant("shifted", bind(avgpool1d_shifted), [{"BW": 1024, "num_warps": 4}],
                 "Inductor's 8 shifted scalar loads without its div/mod: 60-70% SOL, at most 1.15x")],
        exact=False,
        prediction="Inductor: one flat pointwise kernel, 8 masked scalar loads per output at offsets -4..+3 "
                   "(misaligned, so no 16-byte loads): L1-bound near 59% SOL (the earlier user's figure)",
        why_size="KernelBench L1 'Average_Pooling_1D' scaled to 2 GB: 8192 rows of 65536, kernel 8, stride 1, "
                 "padding 4 (the brief's suggestion)")


def _rows_case(name: str, desc: str, shape: tuple[int, ...], torch_fn: Callable, variants: list[Variant],
               exact: bool, prediction: str, why: str, tolerance: float = 1e-5) -> Case:
    return Case(name, desc, shape, torch_fn, variants, exact, prediction, why, tolerance)


POOL_SHAPE = (32, 64, 512, 512)
POOL_WHY = ("KernelBench L1 'Max_Pooling_2D' at its large size: batch 32, 64 channels, 512 x 512 fp32 "
            "(2.1 GB), 2048 planes: many waves, every plane row 2 KB (16-byte aligned rows)")


TINY_SHAPES = {  # the dry run's shapes: ragged against every block size
    "maxpool2d_k4s1p1": (2, 3, 13, 22), "avgpool1d_k8s1p4": (2, 3, 70), "avgpool2d_k3s1p1": (2, 3, 13, 22),
    "transpose_16384": (40, 72), "maxpool2d_k3s2p1": (2, 3, 13, 22), "nchw_to_nhwc": (2, 8, 5, 6),
    "maxpool2d_k2s2": (2, 3, 13, 22), "cumsum_32768": (4, 300),
}


def build_cases(tiny: bool = False) -> dict[str, Case]:
    # BQ >= 32 * num_warps: each thread then holds whole quads (16-byte loads, splits in registers); with
    # less, Triton gives 8-byte loads and 7 layout conversions per row (seen in the sm_90 TTGIR).
    quad_cfgs = [{"BQ": 128, "ROWS": 32, "num_warps": 4}, {"BQ": 128, "ROWS": 64, "num_warps": 4},
                 {"BQ": 256, "ROWS": 32, "num_warps": 8}]
    roll_cfgs = [{"BW": 256, "ROWS": 64, "num_warps": 4}, {"BW": 512, "ROWS": 32, "num_warps": 8}]
    tile_cfgs = [{"BH": 16, "BW": 64, "num_warps": 4}, {"BH": 8, "BW": 128, "num_warps": 4}]
    cases = [
        _pool2d_case(
            "maxpool2d_k4s1p1", 4, 1, 1, "max", POOL_SHAPE,
            "Inductor: flat pointwise kernel, 16 masked scalar loads per output (offsets -1..+2 in each of 4 "
            "rows: misaligned), div/mod by 511 per element: L1-bound, about 23% SOL (the earlier user's figure)",
            POOL_WHY, tile_cfgs, roll_cfgs, quad_cfgs,
            {"rolling_quad": "2 aligned 16-byte loads per 4 positions per row, each row loaded once: "
                             "80-90% SOL, 3.5x Inductor",
             "rolling_shifted": "4 scalar loads per output instead of 16: 70-85% SOL, about 3x Inductor",
             "tile_shifted": "Inductor's 16 loads without its div/mod: 25-40% SOL, 1.1-1.6x Inductor"}),
        _avgpool1d_case(),
        _pool2d_case(
            "avgpool2d_k3s1p1", 3, 1, 1, "avg", POOL_SHAPE,
            "Inductor: 9 masked scalar loads per output: L1-bound, 35-50% SOL",
            POOL_WHY, tile_cfgs[:1], roll_cfgs[:1], quad_cfgs[:2],
            {"rolling_quad": "80-90% SOL, about 2x Inductor",
             "rolling_shifted": "3 loads per output instead of 9: 70-85% SOL",
             "tile_shifted": "same loads as Inductor: 40-55% SOL"}),
        _rows_case(
            "transpose_16384", "x.t().contiguous()", (16384, 16384),
            lambda x: x.t().contiguous(),
            [Variant("tiled_trans", transpose_2d,
                     [{"BM": 64, "BN": 64, "num_warps": 4}, {"BM": 128, "BN": 64, "num_warps": 8},
                      {"BM": 64, "BN": 64, "GROUP_M": 8, "num_warps": 4}],
                     "Inductor's algorithm: within 5% of it (80-90% SOL); grouping changes little"),
             Variant("tiled_implicit", transpose_2d, [{"BM": 64, "BN": 64, "use_trans": False, "num_warps": 4}],
                     "the same kernel as tl.trans after Triton's layout pass: equal to tiled_trans")],
            exact=True,
            prediction="Inductor: a 2D-tiled pointwise kernel (YBLOCK x XBLOCK, tile_hint SQUARE) whose "
                       "load/store layouts Triton converts through shared memory: already a tiled "
                       "transpose, 80-90% SOL",
            why="KernelBench-style square transpose, 1 GB each way (the brief's size)"),
        _pool2d_case(
            "maxpool2d_k3s2p1", 3, 2, 1, "max", POOL_SHAPE,
            "Inductor: 9 stride-2 scalar loads per output (each input element loaded 2.25 times, mostly "
            "from L1), output a quarter of the input: 60-75% SOL (72% on the suite's 224 x 224 problem)",
            POOL_WHY + "; the ResNet-stem pooling configuration", tile_cfgs[:1], roll_cfgs[:1], quad_cfgs[:2],
            {"rolling_quad": "each input row loaded once with 16-byte loads: 85-90% SOL, 1.2-1.4x Inductor",
             "rolling_shifted": "3 stride-2 loads per output: 75-85% SOL",
             "tile_shifted": "same loads as Inductor: 60-75% SOL"}),
        _rows_case(
            "nchw_to_nhwc", "x.permute(0, 2, 3, 1).contiguous()", (64, 256, 128, 128),
            lambda x: x.permute(0, 2, 3, 1).contiguous(),
            [Variant("tiled_trans", nchw_to_nhwc,
                     [{"BM": 64, "BN": 64, "num_warps": 4}, {"BM": 64, "BN": 128, "num_warps": 8}],
                     "within 5% of Inductor (80-90% SOL)")],
            exact=True,
            prediction="Inductor: 2D-tiled pointwise kernel over (N*H*W, C): a batched tiled transpose, "
                       "80-90% SOL",
            why="the suite's nchw_to_nhwc_add size without the bias: 64 x 256 channels x 128 x 128, 1 GB"),
        _pool2d_case(
            "maxpool2d_k2s2", 2, 2, 0, "max", POOL_SHAPE,
            "Inductor: 4 stride-2 scalar loads per output, each input element loaded once: 75-90% SOL",
            POOL_WHY, tile_cfgs[:1], [], quad_cfgs[:2],
            {"rolling_quad": "16-byte loads and stores: 85-92% SOL, at most 1.15x Inductor",
             "rolling_shifted": "", "tile_shifted": "same loads as Inductor: about Inductor"}),
        _rows_case(
            "cumsum_32768", "torch.cumsum(x, dim=1)", (32768, 32768),
            lambda x: torch.cumsum(x, dim=1),
            [Variant("rowloop", cumsum_rowloop,
                     [{"BLOCK": 2048, "num_warps": 8}, {"BLOCK": 4096, "num_warps": 16}],
                     "Inductor's algorithm with larger blocks: within 10% of Inductor"),
             Variant("twolevel", cumsum_twolevel, [{"CHUNK": 4096, "num_warps": 8}],
                     "reads x twice: 1.5x the ideal bytes, at best 67% SOL: slower than Inductor here "
                     "(32768 rows already fill the chip); a family for few long rows only")],
            exact=False, tolerance=1e-4,
            prediction="Inductor: triton_red looped scan, one row per program, carry between R0_BLOCK "
                       "chunks; 32768 programs fill the chip: 75-85% SOL",
            why="the brief's 32768 x 32768 (4.3 GB each way); the suite's cumsum_rows is 32768 x 16384"),
    ]
    if tiny:
        for case in cases:
            case.shape = TINY_SHAPES[case.name]
    return {c.name: c for c in cases}


CASE_ORDER = ("maxpool2d_k4s1p1", "avgpool1d_k8s1p4", "avgpool2d_k3s1p1", "transpose_16384",
              "maxpool2d_k3s2p1", "nchw_to_nhwc", "maxpool2d_k2s2", "cumsum_32768")


# --- measurement helpers -------------------------------------------------------------------------------


def median_ms(fn: Callable[[], Any], device: str) -> float:
    """do_bench's median on a GPU (events, warm-up, L2 flushed between runs); on the CPU dry run, a
    single perf_counter run (the numbers mean nothing there)."""
    if device == "cuda":
        return float(triton.testing.do_bench(fn, warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS, return_mode="median"))
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


def copy_bandwidth_gbs(device: str, nbytes: int = COPY_BYTES) -> float:
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / (median_ms(lambda: dst.copy_(src), device) * 1e-3) / 1e9


def time_on_sets(fn: Callable[[torch.Tensor], Any], inputs: list[torch.Tensor]) -> Timing:
    per_set = [median_ms(lambda x=x: fn(x), inputs[0].device.type) for x in inputs]
    median = sorted(per_set)[len(per_set) // 2]
    return Timing([round(t, 5) for t in per_set], round(median, 5), round((max(per_set) - min(per_set)) / median, 4))


def compare(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, float, int]:
    """max abs error, max error relative to max |ref|, norm-relative error, unwritten (NaN) elements.
    The difference stays float32 (exact enough for these magnitudes); norms accumulate in float64."""
    unwritten = int(torch.isnan(out).sum().item())
    diff = (out - ref).abs()
    max_abs = float(diff.max().item())
    ref_max = float(ref.abs().max().item()) or 1.0
    ref_norm = float(torch.linalg.vector_norm(ref, dtype=torch.float64).item()) or 1.0
    norm_rel = float(torch.linalg.vector_norm(diff, dtype=torch.float64).item()) / ref_norm
    return max_abs, max_abs / ref_max, norm_rel, unwritten


def parse_inductor_code(codes: list[str]) -> list[dict[str, Any]]:
    """Kernel name, kind, loads and stores per output (Inductor's own num_load count), and launch line."""
    kernels: list[dict[str, Any]] = []
    for code in codes:
        for match in re.finditer(r"def (triton_\w+)\(", code):
            name = match.group(1)
            body = code[match.end():]
            end = body.find("''', device_str")
            body = body[:end if end > 0 else len(body)]
            meta = re.search(rf"'kernel_name': '{name}'.*?'num_load': (\d+), 'num_store': (\d+)", code, re.S)
            launch = re.search(rf"^\s*({name}\.run\(.*)$", code, re.M)
            kernels.append({
                "name": name,
                "kind": name.split("_")[1],
                "num_load": int(meta.group(1)) if meta else body.count("tl.load("),
                "num_store": int(meta.group(2)) if meta else body.count("tl.store("),
                "scan": "associative_scan" in body,
                "loop": "for r0_offset" in body,
                "launch": launch.group(1).strip() if launch else None,
            })
    return kernels


def _config_text(cfg: Any) -> str:
    return f"{getattr(cfg, 'kwargs', cfg)} num_warps={getattr(cfg, 'num_warps', '?')} " \
           f"num_stages={getattr(cfg, 'num_stages', '?')}"


def inductor_configs(names: list[str]) -> dict[str, str]:
    """The config each Inductor kernel runs with: its CachingAutotuner's launcher after autotuning (the
    object lives in the output-code module Inductor loaded), else the candidates it was given."""
    found: dict[str, str] = {}
    try:
        from torch._inductor.codecache import PyCodeCache

        modules = list(getattr(PyCodeCache, "modules", []))
        modules += list(getattr(PyCodeCache, "modules_no_attr", {}).values())
        for mod in modules:
            for name in names:
                kernel = getattr(mod, name, None)
                launchers = getattr(kernel, "launchers", None)
                if launchers:
                    found[name] = "ran with " + _config_text(launchers[0].config)
                elif name not in found and getattr(kernel, "configs", None):
                    configs = kernel.configs
                    found[name] = f"no launcher yet; {len(configs)} candidate(s), first {_config_text(configs[0])}"
    except Exception as exc:  # noqa: BLE001 - a private API: say why, do not fail the run
        found["error"] = repr(exc)
    return found


# --- background compilation ------------------------------------------------------------------------------


@dataclass
class Launch:
    kernel_name: str
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def collect_launches(case_names: list[str], tiny: bool = False) -> list[Launch]:
    """Every kernel launch the variants of these cases make, recorded on meta tensors (nothing runs):
    the kernel, its grid, arguments and constexprs, in campaign order."""
    launches: list[Launch] = []
    names = [n for n, obj in globals().items()
             if n.startswith("_") and n.endswith("_kernel") and hasattr(obj, "warmup")]
    originals = {n: globals()[n] for n in names}

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
            return lambda *args, **kwargs: launches.append(Launch(self.name, tuple(grid), args, kwargs))

    cases = build_cases(tiny)
    try:
        globals().update({n: Recorder(n) for n in names})
        for name in case_names:
            case = cases[name]
            x = torch.empty(case.shape, device="meta")
            out = torch.empty(case.torch_fn(x).shape, device="meta")
            for variant in case.variants:
                for config in variant.configs:
                    variant.fn(x, out, **config)
    finally:
        globals().update(originals)
    return launches


def warm_kernels(case_names: list[str], part: int, parts: int) -> None:
    """Compile launches part, part + parts, ... into Triton's on-disk cache with ``warmup`` (pointer
    arguments as dtypes: the same specialisation as 16-byte aligned tensors). A background process runs
    this while the main one waits on Inductor's autotuning; the main process then loads instead of
    compiling. A key that differs only costs the main process its own compile."""
    seen: set[str] = set()
    for i, launch in enumerate(collect_launches(case_names)):
        key = repr((launch.kernel_name, [a if not isinstance(a, torch.Tensor) else str(a.dtype)
                                         for a in launch.args], sorted(launch.kwargs.items())))
        if key in seen or i % parts != part:
            continue
        seen.add(key)
        started = time.perf_counter()
        try:
            args = [a.dtype if isinstance(a, torch.Tensor) else a for a in launch.args]
            globals()[launch.kernel_name].warmup(*args, grid=launch.grid, **launch.kwargs)
            print(f"warm {launch.kernel_name} {launch.kwargs} {time.perf_counter() - started:.2f} s", flush=True)
        except Exception as exc:  # noqa: BLE001 - the main process compiles what this could not
            print(f"warm {launch.kernel_name} {launch.kwargs} failed: {_tail(exc)}", flush=True)


def start_warmers(case_names: list[str], out_dir: str, parts: int = 2) -> list[tuple[Any, Any]]:
    """Background compile processes (this file with --warm); each logs to warm_<part>.txt."""
    import subprocess

    warmers = []
    for part in range(parts):
        log = open(os.path.join(out_dir, f"warm_{part}.txt"), "w")  # noqa: SIM115 - closed in stop_warmers
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--warm", str(part), str(parts),
                                 ",".join(case_names)], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        warmers.append((proc, log))
    return warmers


def stop_warmers(warmers: list[tuple[Any, Any]]) -> list[str]:
    states = []
    for proc, log in warmers:
        code = proc.poll()
        if code is None:
            proc.terminate()
            proc.wait(timeout=10)
            states.append(f"pid {proc.pid}: still compiling at the end, stopped")
        else:
            states.append(f"pid {proc.pid}: exit {code}")
        log.close()
    return states


# --- the run -------------------------------------------------------------------------------------------


class Budget:
    def __init__(self, seconds: float) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds

    def left(self) -> float:
        return self.seconds - FINAL_RESERVE_S - (time.perf_counter() - self.start)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _cfg_text(cfg: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items()) or "-"


def render_markdown(report: dict[str, Any]) -> str:
    lines = ["# Windowed ops and strided access: Triton strategies vs Inductor max-autotune", "",
             f"- device: {report['device']}; torch {report['torch']}, triton {report['triton']}",
             f"- copy bandwidth (2 GiB D2D, read + write): {_fmt(report.get('copy_gbs'), 0)} GB/s",
             f"- Inductor mode: `{MODE}`; times are do_bench medians per input set ({NSETS} random sets), "
             "spread = (max - min) / median over the sets",
             f"- wall {report['wall_s']:.0f} s of a {report['budget_s']:.0f} s budget", "",
             "## Verdict", "",
             "Inductor's time is the faster of its two timings (before and after the variants); speedup = that "
             "time / the best correct variant's; A/A spread = how much Inductor's two timings differ: a speedup "
             "within it is noise.", "",
             "| pattern | ideal GB | floor ms | Inductor ms | Inductor SOL | best variant | best ms | best SOL "
             "| speedup | Inductor A/A spread |", "|---|---|---|---|---|---|---|---|---|---|"]
    for case in report["cases"]:
        ind = [r for r in case["rows"] if r["variant"].startswith("inductor") and r["timing"]]
        mine = [r for r in case["rows"] if r["status"] == "ok" and r["timing"]
                and not r["variant"].startswith(("inductor", "eager"))]
        if case["status"] != "done" and not ind:
            lines.append(f"| {case['name']} | {case['ideal_bytes'] / 1e9:.2f} | {_fmt(case['floor_ms_at_copy_bw'])} "
                         f"| - | - | {case['status']}: {case['detail'][:80]} | | | | |")
            continue
        ind_ms = [r["timing"]["median_ms"] for r in ind]
        ind_best = min(ind_ms) if ind_ms else None  # the baseline: the faster of Inductor's two timings
        aa = (max(ind_ms) - min(ind_ms)) / min(ind_ms) if len(ind_ms) > 1 else None
        best = min(mine, key=lambda r: r["timing"]["median_ms"]) if mine else None
        ind_sol = max(r["sol_pct"] for r in ind) if ind else None
        lines.append(
            f"| {case['name']} | {case['ideal_bytes'] / 1e9:.2f} | {_fmt(case['floor_ms_at_copy_bw'])} "
            f"| {_fmt(ind_best)} | {_fmt(ind_sol, 0)}% "
            f"| {best['variant'] + ' ' + _cfg_text(best['config']) if best else '-'} "
            f"| {_fmt(best['timing']['median_ms']) if best else '-'} | {_fmt(best['sol_pct'], 0) if best else '-'}% "
            f"| {_fmt(best['speedup_vs_inductor'], 2) if best else '-'}x | {_fmt(aa, 3)} |")
    for case in report["cases"]:
        lines += ["", f"## {case['name']}: {case['description']}", "",
                  f"ideal bytes {case['ideal_bytes'] / 1e9:.3f} GB; floor {_fmt(case['floor_ms_at_copy_bw'])} ms at "
                  f"the measured copy bandwidth; status {case['status']} {case['detail']}; "
                  f"max-autotune compile {_fmt(case['compile_s'], 1)} s", ""]
        for k in case["inductor_kernels"]:
            lines.append(f"- Inductor kernel `{k['name']}` ({k['kind']}): {k.get('num_load')} loads, "
                         f"{k.get('num_store')} stores per output element; config {k.get('config', '?')}; "
                         f"launch `{k.get('launch')}`")
        lines += ["", "| variant | config | status | ms (median) | spread | SOL % | vs Inductor | max abs err "
                  "| norm rel err | first call s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in case["rows"]:
            t = r["timing"]
            abs_err = "-" if r["max_abs_err"] is None else f"{r['max_abs_err']:.2e}"
            rel_err = "-" if r["norm_rel_err"] is None else f"{r['norm_rel_err']:.1e}"
            lines.append(f"| {r['variant']} | {_cfg_text(r['config'])} | {r['status']} "
                         f"| {_fmt(t['median_ms']) if t else '-'} | {_fmt(t['spread'], 3) if t else '-'} "
                         f"| {_fmt(r['sol_pct'], 1)} | {_fmt(r['speedup_vs_inductor'], 3)} | {abs_err} | {rel_err} "
                         f"| {_fmt(r['first_call_s'], 2)} |" + (f" {r['detail'][:120]}" if r["detail"] else ""))
    if report.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {s}" for s in report["skipped"]]
    return "\n".join(lines) + "\n"


class CudaContextLost(RuntimeError):
    """A kernel broke the CUDA context (illegal address): nothing after it can be measured."""


def _sol(ideal_bytes: int, ms: float, copy_gbs: float) -> float:
    return round(100.0 * ideal_bytes / (ms * 1e-3 * copy_gbs * 1e9), 2)


def _sync_or_lost() -> None:
    if not torch.cuda.is_available():
        return
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        raise CudaContextLost(repr(exc)) from exc


def _tail(exc: BaseException) -> str:
    return " | ".join(traceback.format_exception_only(type(exc), exc)).strip()[-400:]


def check_and_time(name: str, config: dict[str, Any], fn: Callable[[torch.Tensor, torch.Tensor], None],
                   inputs: list[torch.Tensor], refs: dict[int, torch.Tensor], case: Case,
                   timed: bool = True) -> Row:
    """Poison, run, compare on each reference input set; time on every set only when all checks pass."""
    row = Row(name, config, "error")
    try:
        out = torch.empty_like(refs[0])
        worst = (0.0, 0.0, 0.0)
        for i, ref in refs.items():
            out.fill_(float("nan"))
            started = time.perf_counter()
            fn(inputs[i], out)
            _sync_or_lost()
            if row.first_call_s is None:
                row.first_call_s = round(time.perf_counter() - started, 3)
            max_abs, max_rel, norm_rel, unwritten = compare(out, ref)
            worst = (max(worst[0], max_abs), max(worst[1], max_rel), max(worst[2], norm_rel))
            if unwritten or math.isnan(max_abs):
                row.status, row.detail = "wrong", f"{unwritten} output elements unwritten (NaN) on set {i}"
                break
        row.max_abs_err, row.max_rel_err, row.norm_rel_err = worst
        if row.status != "wrong":
            ok = worst[0] == 0.0 if case.exact else worst[2] <= case.tolerance
            if not ok:
                row.status = "wrong"
                row.detail = "not bit-exact" if case.exact else f"norm rel error above {case.tolerance:g}"
            else:
                row.timing = time_on_sets(lambda x: fn(x, out), inputs) if timed else None
                row.status = "ok"
    except CudaContextLost:
        raise
    except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the campaign
        row.status, row.detail = "error", _tail(exc)
        _sync_or_lost()
    return row


def run_case(case: Case, budget: Budget, copy_gbs: float, result: CaseResult, out_dir: str,
             save: Callable[[], None], device: str = "cuda") -> None:
    started = time.perf_counter()
    gen = torch.Generator(device=device)
    gen.manual_seed(1234)
    inputs = [torch.randn(case.shape, device=device, generator=gen) for _ in range(NSETS)]
    refs = {0: case.torch_fn(inputs[0]), NSETS - 1: case.torch_fn(inputs[NSETS - 1])}
    out_numel = refs[0].numel()
    result.out_shape = list(refs[0].shape)
    result.ideal_bytes = inputs[0].numel() * inputs[0].element_size() + out_numel * refs[0].element_size()
    result.floor_ms_at_copy_bw = round(result.ideal_bytes / (copy_gbs * 1e9) * 1e3, 4)
    result.status = "running"

    def add(row: Row) -> None:
        if row.timing:
            row.sol_pct = _sol(result.ideal_bytes, row.timing.median_ms, copy_gbs)
        result.rows.append(row)
        flag = f"{row.timing.median_ms:.3f} ms, SOL {row.sol_pct:.0f}%" if row.timing else row.detail[:160]
        print(f"  {row.variant:16s} {_cfg_text(row.config):40s} {row.status:6s} {flag}", flush=True)
        save()

    add(Row("eager", {}, "ok", timing=time_on_sets(case.torch_fn, inputs)))

    compiled: Callable | None = None
    try:
        from torch._inductor.utils import run_and_get_code

        compiled = torch.compile(case.torch_fn, mode=MODE, dynamic=False)
        t0 = time.perf_counter()
        _, codes = run_and_get_code(compiled, inputs[0])
        _sync_or_lost()
        result.compile_s = round(time.perf_counter() - t0, 2)
        with open(os.path.join(out_dir, f"inductor_{case.name}.txt"), "w") as handle:
            handle.write("\n\n# ----- next graph -----\n\n".join(codes))
        result.inductor_kernels = parse_inductor_code(codes)
        configs = inductor_configs([k["name"] for k in result.inductor_kernels])
        for kernel in result.inductor_kernels:
            kernel["config"] = configs.get(kernel["name"], configs.get("error", "not found"))
        row = check_and_time("inductor", {}, lambda x, out: out.copy_(compiled(x)), inputs, refs, case,
                             timed=False)
        if row.status == "ok":  # timed alone: the check above copies its result into the poisoned buffer
            row.timing = time_on_sets(compiled, inputs)
        add(row)
    except CudaContextLost:
        raise
    except Exception as exc:  # noqa: BLE001
        compiled = None
        add(Row("inductor", {}, "error", detail=f"torch.compile failed: {_tail(exc)}"))

    for variant in case.variants:
        for config in variant.configs:
            if budget.left() < CONFIG_EST_S + 1.5:
                add(Row(variant.name, config, "skipped", detail=f"budget: {budget.left():.0f} s left"))
                continue
            add(check_and_time(variant.name, config, lambda x, out, v=variant, c=config: v.fn(x, out, **c),
                               inputs, refs, case))

    if compiled is not None and budget.left() > 1.5:  # A/A: the same Inductor kernel timed again
        add(Row("inductor_again", {}, "ok", timing=time_on_sets(compiled, inputs)))
    ind = [r.timing.median_ms for r in result.rows if r.variant.startswith("inductor") and r.timing]
    if ind:
        for row in result.rows:
            if row.timing:
                row.speedup_vs_inductor = round(min(ind) / row.timing.median_ms, 4)
    result.status = "done"
    result.wall_s = round(time.perf_counter() - started, 1)
    save()


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {"copy_gbs": report.get("copy_gbs"), "skipped": report["skipped"], "cases": {}}
    for case in report["cases"]:
        ind = [r for r in case["rows"] if r["variant"].startswith("inductor") and r["timing"]]
        mine = [r for r in case["rows"] if r["status"] == "ok" and r["timing"]
                and not r["variant"].startswith(("inductor", "eager"))]
        best = min(mine, key=lambda r: r["timing"]["median_ms"]) if mine else None
        summary["cases"][case["name"]] = {
            "status": case["status"],
            "inductor_ms": min((r["timing"]["median_ms"] for r in ind), default=None),
            "inductor_sol_pct": max((r["sol_pct"] for r in ind), default=None),
            "best": f"{best['variant']} {_cfg_text(best['config'])}" if best else None,
            "best_ms": best["timing"]["median_ms"] if best else None,
            "best_sol_pct": best["sol_pct"] if best else None,
            "speedup_vs_inductor": best["speedup_vs_inductor"] if best else None,
        }
    return summary


def run(out_dir: str, device: str | None = None, tiny: bool = False) -> dict[str, Any]:
    """The campaign on the GPU. ``device="cpu", tiny=True`` is the dry run of the same code paths
    (tests/test_explore_windows.py): Inductor through the CPU Triton backend, kernels interpreted."""
    os.makedirs(out_dir, exist_ok=True)
    budget = Budget(float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "180")))
    cases = build_cases(tiny)
    device = device or "cuda"
    wanted = [c.strip() for c in os.environ.get("KERNELOPT_WINDOWS_CASES", "").split(",") if c.strip()]
    order = [c for c in CASE_ORDER if not wanted or c in wanted]
    unknown = sorted(set(wanted) - set(CASE_ORDER))
    report: dict[str, Any] = {"torch": torch.__version__, "triton": triton.__version__, "mode": MODE,
                              "budget_s": budget.seconds, "wall_s": 0.0, "cases": [], "skipped": [],
                              "device": None, "copy_gbs": None, "predictions": {}}
    if unknown:
        report["skipped"].append(f"unknown case names in KERNELOPT_WINDOWS_CASES: {unknown} (known: {CASE_ORDER})")

    def save() -> None:
        report["wall_s"] = round(budget.elapsed(), 1)
        with open(os.path.join(out_dir, "explore_windows.json"), "w") as handle:
            json.dump(report, handle, indent=1, default=str)
        with open(os.path.join(out_dir, "explore_windows.md"), "w") as handle:
            handle.write(render_markdown(report))

    if device == "cuda" and not torch.cuda.is_available():
        report["skipped"].append("no CUDA device: nothing measured (run tests/test_explore_windows.py on the CPU)")
        save()
        return summarize(report)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        report["device"] = (f"{props.name}, {props.multi_processor_count} SMs, "
                            f"L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB")
        report["copy_gbs"] = round(copy_bandwidth_gbs(device), 1)
    else:
        report["device"] = f"{device} (dry run: the times mean nothing)"
        report["copy_gbs"] = round(copy_bandwidth_gbs(device, 64 << 20), 1)
    print(f"{report['device']}; copy bandwidth {report['copy_gbs']:.0f} GB/s", flush=True)
    warmers = []
    if device == "cuda" and os.environ.get("KERNELOPT_WINDOWS_WARM", "1") != "0":
        warmers = start_warmers(order, out_dir)
        report["warmers"] = [f"pid {proc.pid}" for proc, _ in warmers]
    for name in order:
        case = cases[name]
        report["predictions"][name] = {"inductor": case.prediction, "why_size": case.why_size,
                                       **{v.name: v.prediction for v in case.variants}}
        result = CaseResult(name, case.description, list(case.shape))
        report["cases"].append(asdict(result))
        need = INDUCTOR_COMPILE_EST_S + 2 * CONFIG_EST_S
        if budget.left() < need:
            result.status, result.detail = "skipped", f"budget: {budget.left():.0f} s left, about {need:.0f} s needed"
            report["skipped"].append(f"{name}: {result.detail}")
            report["cases"][-1] = asdict(result)
            save()
            continue
        print(f"[{budget.elapsed():5.0f} s] {name}: {case.description}", flush=True)

        def save_case(result: CaseResult = result) -> None:
            report["cases"][-1] = asdict(result)
            save()

        try:
            run_case(case, budget, report["copy_gbs"], result, out_dir, save_case, device)
            torch.cuda.empty_cache()  # the pattern's inputs died with run_case
        except CudaContextLost as exc:
            result.status, result.detail = "error", f"CUDA context lost: {exc}"
            save_case()
            report["skipped"] += [f"{n}: CUDA context lost in {name}" for n in order[order.index(name) + 1:]]
            break
        except Exception as exc:  # noqa: BLE001 - record and go on to the next pattern
            result.status, result.detail = "error", _tail(exc)
            save_case()
            torch.cuda.empty_cache()
    if warmers:
        report["warmers"] = stop_warmers(warmers)
    save()
    summary = summarize(report)
    md = render_markdown(report)
    verdict = md[md.index("## Verdict"):]
    print(verdict[:verdict.find("\n## ", 5) if "\n## " in verdict[5:] else len(verdict)], flush=True)
    return summary


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--warm":  # a background compile process (start_warmers)
        warm_kernels(sys.argv[4].split(","), int(sys.argv[2]), int(sys.argv[3]))
    else:
        print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "explore_windows_out"), indent=1, default=str))
