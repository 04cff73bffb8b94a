"""Hand-written Triton alternatives to Inductor's reduction kernels, timed against max-autotune (issue 16).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT explore/explore_reductions:240
    python3 benchmarks/explore/explore_reductions.py OUT_DIR [--patterns a,b]   # directly, on the GPU
    python3 benchmarks/explore/explore_reductions.py --plan                      # the plan; no GPU needed

For each pattern (a KernelBench-scale reduction, inputs of 0.5-8.6 GB) the torch reference is compiled
with ``torch.compile(mode="max-autotune-no-cudagraphs")`` and timed; then each variant (a plain
``variant(*inputs, out) -> None`` launcher of one or more Triton kernels) is checked against the
compiled output (output poisoned with NaN first) and timed the same way: CUDA events around every
call, inputs rotated among several sets, median and spread. Speed of light (SOL) is ideal bytes (each
input read once, each output written once) over time times the copy bandwidth measured here (a 2 GiB
device-to-device copy). Inductor's kernels are recorded from their first launch: name, launch
config, loops over the reduction and whether they read the input in more than one pass.

Strategy families: ``split`` (chunk partials to scratch, finalize, parallel apply), ``l2_rows`` (two
passes per row with at most P rows in flight so the second pass can hit L2), ``coop`` (G co-resident
programs per row hold their chunk in registers, exchange partials through scratch and an atomic
counter: one read; GPU only), ``single_read`` (a whole row in one program's registers),
``column_tiled`` (programs own column blocks and walk rows), ``control`` (Inductor's own algorithm,
hand-written, to tell a better algorithm from a better kernel).

Patterns run in order of expected value; each one checks the time left (``KERNELOPT_GPU_BUDGET_S``)
and what does not fit is recorded as skipped. Results are written after every pattern. While the
first pattern compiles, child processes compile this script's kernels into the shared Triton cache
(no GPU launches; ``KERNELOPT_EXPLORE_PRECOMPILE=0`` turns that off). Imports torch, triton, numpy.
No ``from __future__ import annotations``: run_all.py loads this file without registering it in
sys.modules, and dataclasses cannot resolve string annotations then.
"""

import argparse
import datetime
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

DEFAULT_BUDGET_S = 240.0
FLOOR_BANDWIDTH = 4.2e12  # bytes/s, read + written: the H200 copy peak seen before; only for the plan
WIN = 1.10  # a variant at least this much faster than Inductor is a win
TIE = 1.03
REL_TOLERANCE = 1e-4  # ||out - ref|| / ||ref|| for float32 reductions in another order

# ----------------------------------------------------------------------------------------------
# Operation codes: host ints, mirrored as Triton constexpr globals for the kernels.
SOFTMAX, LOG_SOFTMAX, L1, L2, MOMENTS, SUM = 0, 1, 2, 3, 4, 5
AFFINE_NONE, AFFINE_ELEM, AFFINE_CHANNEL = 0, 1, 2
_SOFTMAX = tl.constexpr(SOFTMAX)
_LOG_SOFTMAX = tl.constexpr(LOG_SOFTMAX)
_L1 = tl.constexpr(L1)
_L2 = tl.constexpr(L2)
_MOMENTS = tl.constexpr(MOMENTS)
_SUM = tl.constexpr(SUM)
_AFFINE_ELEM = tl.constexpr(AFFINE_ELEM)
_AFFINE_CHANNEL = tl.constexpr(AFFINE_CHANNEL)

# Partials are (a, b, n): softmax-like (max, sum of exp(x - max), n); L1/L2 (sum, 0, n);
# moments (mean, sum of squared deviations, n). Row coefficients (c0, c1) then give the output.


@triton.jit
def _stream_partial(base, start, end, shift, OP: tl.constexpr, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """Partial of x[start:end] streamed in tiles with per-lane accumulators."""
    offs = tl.arange(0, BLOCK)
    if OP <= _LOG_SOFTMAX:
        acc_a = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc_a = tl.zeros([BLOCK], tl.float32)
    acc_b = tl.zeros([BLOCK], tl.float32)
    for off in range(start, end, BLOCK):
        idx = off + offs
        mask = idx < end
        x = tl.load(base + idx, mask=mask, other=0.0, eviction_policy=EVICT)
        if OP <= _LOG_SOFTMAX:
            # online max/sum with one exp per element: exp(-|x - m|) rescales whichever side is smaller
            d = x - acc_a
            bigger = d > 0
            e = tl.exp(tl.where(bigger, -d, d))
            acc_b = tl.where(mask, tl.where(bigger, acc_b * e + 1.0, acc_b + e), acc_b)
            acc_a = tl.where(mask & bigger, x, acc_a)
        elif OP == _L1:
            acc_b += tl.abs(x)
        elif OP == _L2:
            acc_b += x * x
        else:
            # shifted sums (shift = a sample of the row) keep the variance free of cancellation
            d = tl.where(mask, x - shift, 0.0)
            acc_a += d
            acc_b += d * d
    n = (end - start).to(tl.float32)
    if OP <= _LOG_SOFTMAX:
        a = tl.max(acc_a, 0)
        b = tl.sum(acc_b * tl.exp(acc_a - a), 0)
    elif OP == _MOMENTS:
        s1 = tl.sum(acc_a, 0)
        a = shift + s1 / n
        b = tl.maximum(tl.sum(acc_b, 0) - s1 * s1 / n, 0.0)
    else:
        a = tl.sum(acc_b, 0)
        b = a * 0.0
    return a, b, n


@triton.jit
def _block_partial(x, mask, OP: tl.constexpr):
    """Partial of a block held in registers, and what to keep of it for the apply step."""
    n = tl.sum(mask.to(tl.float32), 0)
    if OP == _SOFTMAX:
        a = tl.max(tl.where(mask, x, float("-inf")), 0)
        kept = tl.where(mask, tl.exp(x - a), 0.0)  # one exp per element in all: apply only rescales
        b = tl.sum(kept, 0)
    elif OP == _LOG_SOFTMAX:
        a = tl.max(tl.where(mask, x, float("-inf")), 0)
        b = tl.sum(tl.where(mask, tl.exp(x - a), 0.0), 0)
        kept = x
    elif OP == _L1:
        a = tl.sum(tl.where(mask, tl.abs(x), 0.0), 0)
        b = a * 0.0
        kept = x
    elif OP == _L2:
        a = tl.sum(tl.where(mask, x * x, 0.0), 0)
        b = a * 0.0
        kept = x
    else:
        a = tl.sum(tl.where(mask, x, 0.0), 0) / tl.maximum(n, 1.0)
        d = tl.where(mask, x - a, 0.0)
        b = tl.sum(d * d, 0)
        kept = x
    return a, b, n, kept


@triton.jit
def _combine(a, b, n, mask, OP: tl.constexpr):
    """Combine a vector of partials (masked lanes ignored) into one."""
    total = tl.sum(tl.where(mask, n, 0.0), 0)
    if OP <= _LOG_SOFTMAX:
        big_a = tl.max(tl.where(mask, a, float("-inf")), 0)
        big_b = tl.sum(tl.where(mask, b * tl.exp(a - big_a), 0.0), 0)
    elif OP == _MOMENTS:
        big_a = tl.sum(tl.where(mask, n * a, 0.0), 0) / total
        d = a - big_a
        big_b = tl.sum(tl.where(mask, b + n * d * d, 0.0), 0)
    else:
        big_a = tl.sum(tl.where(mask, a, 0.0), 0)
        big_b = big_a * 0.0
    return big_a, big_b, total


@triton.jit
def _coefs(a, b, n, eps, OP: tl.constexpr):
    if OP == _SOFTMAX:
        c0 = a
        c1 = 1.0 / b
    elif OP == _LOG_SOFTMAX:
        c0 = a + tl.log(b)
        c1 = c0 * 0.0
    elif OP == _L1:
        c1 = 1.0 / a
        c0 = c1 * 0.0
    elif OP == _L2:
        c1 = 1.0 / tl.sqrt(a)
        c0 = c1 * 0.0
    else:
        c0 = a
        c1 = 1.0 / tl.sqrt(b / n + eps)
    return c0, c1


@triton.jit
def _apply(x, c0, c1, OP: tl.constexpr):
    if OP == _SOFTMAX:
        y = tl.exp(x - c0) * c1
    elif OP == _LOG_SOFTMAX:
        y = x - c0
    elif OP == _MOMENTS:
        y = (x - c0) * c1
    else:
        y = x * c1
    return y


@triton.jit
def _apply_kept(kept, a_local, c0, c1, OP: tl.constexpr):
    if OP == _SOFTMAX:
        y = kept * (tl.exp(a_local - c0) * c1)
    else:
        y = _apply(kept, c0, c1, OP)
    return y


@triton.jit
def _affine(y, idx, row, mask, w_ptr, b_ptr, HW, CPG, GROUPS, AFFINE: tl.constexpr):
    if AFFINE == _AFFINE_ELEM:  # layer norm: one weight per element of the row
        y = y * tl.load(w_ptr + idx, mask=mask, other=0.0) + tl.load(b_ptr + idx, mask=mask, other=0.0)
    elif AFFINE == _AFFINE_CHANNEL:  # group norm: a row is CPG channels of HW elements
        ch = (row % GROUPS) * CPG + idx // HW
        y = y * tl.load(w_ptr + ch, mask=mask, other=0.0) + tl.load(b_ptr + ch, mask=mask, other=0.0)
    return y


@triton.jit
def _split_stats_kernel(x_ptr, part_ptr, N, CHUNK, S, OP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    base = x_ptr + tl.cast(row, tl.int64) * N
    start = c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    shift = tl.load(base + start)
    a, b, n = _stream_partial(base, start, end, shift, OP, BLOCK, "evict_first")
    slot = part_ptr + (row * S + c) * 3
    tl.store(slot, a)
    tl.store(slot + 1, b)
    tl.store(slot + 2, n)


@triton.jit
def _split_finalize_kernel(part_ptr, coef_ptr, S, eps, OP: tl.constexpr, S_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, S_BLOCK)
    mask = i < S
    slots = part_ptr + (row * S + i) * 3
    a = tl.load(slots, mask=mask, other=0.0)
    b = tl.load(slots + 1, mask=mask, other=0.0)
    n = tl.load(slots + 2, mask=mask, other=0.0)
    big_a, big_b, total = _combine(a, b, n, mask, OP)
    c0, c1 = _coefs(big_a, big_b, total, eps, OP)
    tl.store(coef_ptr + row * 2, c0)
    tl.store(coef_ptr + row * 2 + 1, c1)


@triton.jit
def _split_apply_kernel(x_ptr, coef_ptr, w_ptr, b_ptr, y_ptr, N, CHUNK, HW, CPG, GROUPS,
                        OP: tl.constexpr, AFFINE: tl.constexpr, BLOCK: tl.constexpr):
    # grid (rows, chunks) with rows fastest: the rows of one chunk run together and share its weights in L2
    row = tl.program_id(0)
    c = tl.program_id(1)
    c0 = tl.load(coef_ptr + row * 2)
    c1 = tl.load(coef_ptr + row * 2 + 1)
    row_off = tl.cast(row, tl.int64) * N
    start = c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    offs = tl.arange(0, BLOCK)
    for off in range(start, end, BLOCK):
        idx = off + offs
        mask = idx < end
        x = tl.load(x_ptr + row_off + idx, mask=mask, other=0.0, eviction_policy="evict_first")
        y = _affine(_apply(x, c0, c1, OP), idx, row, mask, w_ptr, b_ptr, HW, CPG, GROUPS, AFFINE)
        tl.store(y_ptr + row_off + idx, y, mask=mask)


@triton.jit
def _twopass_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, N, eps, HW, CPG, GROUPS,
                         OP: tl.constexpr, AFFINE: tl.constexpr, BLOCK: tl.constexpr):
    # P programs own rows pid, pid + P, ...: at most P rows in flight, so the second pass can find its row in L2
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    n_tiles = tl.cdiv(N, BLOCK)
    for row in range(pid, R, programs):
        row_off = tl.cast(row, tl.int64) * N
        base = x_ptr + row_off
        shift = tl.load(base)
        a, b, n = _stream_partial(base, 0, N, shift, OP, BLOCK, "evict_last")
        c0, c1 = _coefs(a, b, n, eps, OP)
        for t in range(0, n_tiles):
            idx = (n_tiles - 1 - t) * BLOCK + offs  # newest tiles first: they are likeliest still in L2
            mask = idx < N
            x = tl.load(base + idx, mask=mask, other=0.0, eviction_policy="evict_first")
            y = _affine(_apply(x, c0, c1, OP), idx, row, mask, w_ptr, b_ptr, HW, CPG, GROUPS, AFFINE)
            tl.store(y_ptr + row_off + idx, y, mask=mask)


@triton.jit
def _single_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, HW, CPG, GROUPS,
                        OP: tl.constexpr, AFFINE: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0)
    row_off = tl.cast(row, tl.int64) * N
    idx = tl.arange(0, BLOCK)
    if EVEN:  # no tail: a constant mask costs no registers
        mask = tl.full([BLOCK], 1, tl.int1)
    else:
        mask = idx < N
    x = tl.load(x_ptr + row_off + idx, mask=mask, other=0.0, eviction_policy="evict_first")
    a, b, n, kept = _block_partial(x, mask, OP)
    c0, c1 = _coefs(a, b, n, eps, OP)
    y = _affine(_apply_kept(kept, a, c0, c1, OP), idx, row, mask, w_ptr, b_ptr, HW, CPG, GROUPS, AFFINE)
    tl.store(y_ptr + row_off + idx, y, mask=mask)


@triton.jit
def _coop_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, cnt_ptr, err_ptr, R, N, eps, HW, CPG, GROUPS,
                      OP: tl.constexpr, AFFINE: tl.constexpr, G: tl.constexpr, G_BLOCK: tl.constexpr,
                      CHUNK: tl.constexpr, MAX_SPIN: tl.constexpr, EVEN: tl.constexpr):
    # A persistent grid of co-resident programs; G adjacent programs share a row, each holding its chunk
    # in registers. They publish partials, count themselves in on the row's counter, wait for the others,
    # and normalise from registers: the row is read once. MAX_SPIN bounds the total wait, so a grid that
    # is not co-resident ends with a wrong answer and err set, never a hang.
    pid = tl.program_id(0)
    n_groups = tl.num_programs(0) // G
    group = pid // G
    member = pid % G
    idx = member * CHUNK + tl.arange(0, CHUNK)
    if EVEN:
        mask = tl.full([CHUNK], 1, tl.int1)
    else:
        mask = idx < N
    gi = tl.arange(0, G_BLOCK)
    gmask = gi < G
    spins = pid * 0
    for row in range(group, R, n_groups):
        row_off = tl.cast(row, tl.int64) * N
        x = tl.load(x_ptr + row_off + idx, mask=mask, other=0.0, eviction_policy="evict_first")
        a, b, n, kept = _block_partial(x, mask, OP)
        slot = part_ptr + (tl.cast(row, tl.int64) * G + member) * 3
        tl.store(slot, a)
        tl.store(slot + 1, b)
        tl.store(slot + 2, n)
        tl.debug_barrier()  # every thread's partial store before the release below
        arrived = tl.atomic_add(cnt_ptr + row, 1, sem="release", scope="gpu") + 1
        while (arrived < G) & (spins < MAX_SPIN):
            arrived = tl.atomic_add(cnt_ptr + row, 0, sem="acquire", scope="gpu")
            spins += 1
        tl.debug_barrier()
        slots = part_ptr + (tl.cast(row, tl.int64) * G + gi) * 3
        pa = tl.load(slots, mask=gmask, other=0.0, volatile=True)
        pb = tl.load(slots + 1, mask=gmask, other=0.0, volatile=True)
        pn = tl.load(slots + 2, mask=gmask, other=0.0, volatile=True)
        big_a, big_b, total = _combine(pa, pb, pn, gmask, OP)
        c0, c1 = _coefs(big_a, big_b, total, eps, OP)
        y = _affine(_apply_kept(kept, a, c0, c1, OP), idx, row, mask, w_ptr, b_ptr, HW, CPG, GROUPS, AFFINE)
        tl.store(y_ptr + row_off + idx, y, mask=mask)
    tl.store(err_ptr, spins, mask=spins >= MAX_SPIN)


@triton.jit
def _cross_entropy_rows_kernel(logit_ptr, target_ptr, part_ptr, R, C, ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    rmask = rows < R
    cols = tl.arange(0, BLOCK_C)
    row_off = rows.to(tl.int64) * C
    x = tl.load(logit_ptr + row_off[:, None] + cols[None, :], mask=rmask[:, None] & (cols < C)[None, :],
                other=float("-inf"), eviction_policy="evict_first")
    m = tl.max(x, 1)
    s = tl.sum(tl.exp(x - m[:, None]), 1)
    target = tl.load(target_ptr + rows, mask=rmask, other=0)
    picked = tl.load(logit_ptr + row_off + target, mask=rmask, other=0.0)  # just read: an L2 hit
    loss = tl.where(rmask, m + tl.log(s) - picked, 0.0)
    tl.store(part_ptr + pid, tl.sum(loss, 0))


@triton.jit
def _sum_scale_kernel(part_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, n, BLOCK):
        idx = off + offs
        acc += tl.load(part_ptr + idx, mask=idx < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, 0) * scale)


@triton.jit
def _cols_partial_kernel(x_ptr, part_ptr, R, C, ROWS_PER_SPLIT, OP: tl.constexpr,
                         BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # programs own BLOCK_C contiguous columns and walk a slice of rows: every load is a coalesced row segment
    cb = tl.program_id(0)
    s = tl.program_id(1)
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    r_start = s * ROWS_PER_SPLIT
    r_end = tl.minimum(r_start + ROWS_PER_SPLIT, R)
    rr = tl.arange(0, BLOCK_R)
    if OP <= _LOG_SOFTMAX:
        acc_a = tl.full([BLOCK_R, BLOCK_C], float("-inf"), tl.float32)
    else:
        acc_a = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    acc_b = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for r in range(r_start, r_end, BLOCK_R):
        rows = r + rr
        mask = (rows < r_end)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * C + cols[None, :], mask=mask, other=0.0,
                    eviction_policy="evict_first")
        if OP <= _LOG_SOFTMAX:
            d = x - acc_a
            bigger = d > 0
            e = tl.exp(tl.where(bigger, -d, d))
            acc_b = tl.where(mask, tl.where(bigger, acc_b * e + 1.0, acc_b + e), acc_b)
            acc_a = tl.where(mask & bigger, x, acc_a)
        else:
            acc_b += x
    if OP <= _LOG_SOFTMAX:
        a = tl.max(acc_a, 0)
        b = tl.sum(acc_b * tl.exp(acc_a - a[None, :]), 0)
        tl.store(part_ptr + (s * 2) * C + cols, a, mask=cmask)
        tl.store(part_ptr + (s * 2 + 1) * C + cols, b, mask=cmask)
    else:
        tl.store(part_ptr + s * C + cols, tl.sum(acc_b, 0), mask=cmask)


@triton.jit
def _cols_finalize_kernel(part_ptr, out_ptr, S, C, OP: tl.constexpr, S_BLOCK: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    si = tl.arange(0, S_BLOCK)
    mask = (si < S)[:, None] & cmask[None, :]
    if OP <= _LOG_SOFTMAX:
        a = tl.load(part_ptr + (si * 2)[:, None] * C + cols[None, :], mask=mask, other=float("-inf"))
        b = tl.load(part_ptr + (si * 2 + 1)[:, None] * C + cols[None, :], mask=mask, other=0.0)
        big_a = tl.max(a, 0)
        total = tl.sum(tl.where(mask, b * tl.exp(a - big_a[None, :]), 0.0), 0)
        tl.store(out_ptr + cols, big_a + tl.log(total), mask=cmask)  # log-sum-exp of each column
    else:
        part = tl.load(part_ptr + si[:, None] * C + cols[None, :], mask=mask, other=0.0)
        tl.store(out_ptr + cols, tl.sum(part, 0), mask=cmask)


@triton.jit
def _cols_subtract_kernel(x_ptr, lse_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    mask = (rows < R)[:, None] & cmask[None, :]
    offs = rows.to(tl.int64)[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    lse = tl.load(lse_ptr + cols, mask=cmask, other=0.0)
    tl.store(y_ptr + offs, x - lse[None, :], mask=mask)


# ----------------------------------------------------------------------------------------------
# Launching: "run" launches; "warmup" only compiles into Triton's cache (the precompile children,
# with meta tensors standing in for the inputs).

_MODE = "run"
_LAST_COOP_ERROR: list[torch.Tensor] = []
_RESIDENT_CACHE: dict[tuple, int] = {}


class VariantUnfit(Exception):
    """The variant cannot run at this size on this device (e.g. not enough co-resident programs)."""


def _launch(kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> Any:
    if _MODE == "warmup":
        return kernel.warmup(*args, grid=grid, **meta)
    return kernel[grid](*args, **meta)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _resident_blocks_per_sm(compiled: Any, num_warps: int, device: torch.device) -> int:
    """How many blocks of this compiled kernel fit on one multiprocessor at once (registers, threads, smem)."""
    init = getattr(compiled, "_init_handles", None)
    if callable(init):
        init()
    props = torch.cuda.get_device_properties(device)
    regs_sm = int(getattr(props, "regs_per_multiprocessor", 65536) or 65536)
    threads_sm = int(getattr(props, "max_threads_per_multi_processor", 2048) or 2048)
    smem_sm = int(getattr(props, "shared_memory_per_multiprocessor", 233472) or 233472)
    by_threads = threads_sm // (num_warps * 32)
    regs = getattr(compiled, "n_regs", None)
    if not regs:
        return 1  # unknown: one block per multiprocessor always fits if the launch succeeds
    per_warp = math.ceil(regs * 32 / 256) * 256  # registers are allocated per warp in units of 256
    by_regs = (regs_sm // per_warp) // num_warps
    shared = int(getattr(getattr(compiled, "metadata", None), "shared", 0) or 0)
    by_smem = smem_sm // (shared + 1024) if shared else by_threads
    return max(0, min(by_threads, by_regs, by_smem, 32))


def _co_resident_programs(kernel: Any, args: Sequence[Any], meta: dict[str, Any], device: torch.device) -> int:
    key = (id(kernel), tuple(sorted(meta.items())), device.index)
    if key not in _RESIDENT_CACHE:
        compiled = kernel.warmup(*args, grid=(1,), **meta)
        per_sm = _resident_blocks_per_sm(compiled, int(meta["num_warps"]), device)
        _RESIDENT_CACHE[key] = per_sm * torch.cuda.get_device_properties(device).multi_processor_count
    return _RESIDENT_CACHE[key]


# ----------------------------------------------------------------------------------------------
# Generic row launchers: x2 and y2 are contiguous (rows, N) views.


@dataclass(frozen=True)
class Affine:
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    mode: int = AFFINE_NONE
    hw: int = 1  # elements per channel (group norm)
    cpg: int = 1  # channels per group
    groups: int = 1


NO_AFFINE = Affine()


def _affine_args(x2: torch.Tensor, affine: Affine) -> tuple[Any, ...]:
    w = affine.weight if affine.weight is not None else x2  # never read without an affine mode
    b = affine.bias if affine.bias is not None else x2
    return w, b


def rows_split(x2: torch.Tensor, y2: torch.Tensor, op: int, *, splits: int, block: int = 4096, num_warps: int = 8,
               eps: float = 0.0, affine: Affine = NO_AFFINE) -> None:
    """Chunk partials into scratch, one finalize program per row, then an apply grid over all chunks."""
    rows, n = x2.shape
    chunk = triton.cdiv(triton.cdiv(n, splits), block) * block
    chunks = triton.cdiv(n, chunk)
    part = torch.empty((rows, chunks, 3), dtype=torch.float32, device=x2.device)
    coef = torch.empty((rows, 2), dtype=torch.float32, device=x2.device)
    _launch(_split_stats_kernel, (rows, chunks), x2, part, n, chunk, chunks, OP=op, BLOCK=block, num_warps=num_warps)
    _launch(_split_finalize_kernel, (rows,), part, coef, chunks, eps, OP=op,
            S_BLOCK=max(2, triton.next_power_of_2(chunks)), num_warps=4)
    w, b = _affine_args(x2, affine)
    _launch(_split_apply_kernel, (rows, chunks), x2, coef, w, b, y2, n, chunk, affine.hw, affine.cpg, affine.groups,
            OP=op, AFFINE=affine.mode, BLOCK=block, num_warps=num_warps)


def rows_twopass(x2: torch.Tensor, y2: torch.Tensor, op: int, *, programs: int, block: int = 8192,
                 num_warps: int = 16, eps: float = 0.0, affine: Affine = NO_AFFINE) -> None:
    """Two passes per row, `programs` programs each owning rows pid, pid + programs, ..."""
    rows, n = x2.shape
    w, b = _affine_args(x2, affine)
    _launch(_twopass_rows_kernel, (max(1, min(programs, rows)),), x2, w, b, y2, rows, n, eps, affine.hw,
            affine.cpg, affine.groups, OP=op, AFFINE=affine.mode, BLOCK=block, num_warps=num_warps)


def rows_single(x2: torch.Tensor, y2: torch.Tensor, op: int, *, num_warps: int, eps: float = 0.0,
                affine: Affine = NO_AFFINE) -> None:
    """One program per row, the whole row in registers: one read."""
    rows, n = x2.shape
    w, b = _affine_args(x2, affine)
    _launch(_single_rows_kernel, (rows,), x2, w, b, y2, n, eps, affine.hw, affine.cpg, affine.groups,
            OP=op, AFFINE=affine.mode, BLOCK=max(2, triton.next_power_of_2(n)),
            EVEN=n == triton.next_power_of_2(n), num_warps=num_warps)


def rows_coop(x2: torch.Tensor, y2: torch.Tensor, op: int, *, group: int, num_warps: int, eps: float = 0.0,
              affine: Affine = NO_AFFINE, max_programs: int | None = None, max_spin: int = 1 << 22) -> None:
    """G co-resident programs per row exchange partials through scratch and a counter; one read."""
    rows, n = x2.shape
    chunk = max(2, triton.next_power_of_2(triton.cdiv(n, group)))
    part = torch.empty(rows * group * 3, dtype=torch.float32, device=x2.device)
    counters = torch.zeros(rows, dtype=torch.int32, device=x2.device)
    err = torch.zeros(1, dtype=torch.int32, device=x2.device)
    w, b = _affine_args(x2, affine)
    args = (x2, w, b, y2, part, counters, err, rows, n, eps, affine.hw, affine.cpg, affine.groups)
    meta = {"OP": op, "AFFINE": affine.mode, "G": group, "G_BLOCK": max(2, triton.next_power_of_2(group)),
            "CHUNK": chunk, "MAX_SPIN": max_spin, "EVEN": n == chunk * group, "num_warps": num_warps}
    if _MODE == "warmup":
        _launch(_coop_rows_kernel, (group,), *args, **meta)
        return
    if max_programs is not None:
        capacity = max_programs
    elif _interpreting():
        capacity = rows * group
    else:
        capacity = _co_resident_programs(_coop_rows_kernel, args, meta, x2.device)
    n_groups = min(rows, capacity // group)
    if n_groups < 1:
        raise VariantUnfit(f"{group} programs per row but only {capacity} co-resident")
    _LAST_COOP_ERROR[:] = [err]
    _launch(_coop_rows_kernel, (n_groups * group,), *args, **meta)


def coop_spin_limit_hit() -> bool:
    """After a synchronised coop launch: did any program give up waiting (a grid that was not co-resident)?"""
    return bool(_LAST_COOP_ERROR) and int(_LAST_COOP_ERROR[0].item()) != 0


def _rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return t.view(rows, t.numel() // rows)


# ----------------------------------------------------------------------------------------------
# Variants: plain launchers, variant(*inputs, out) -> None.


def layer_norm_split(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, splits: int,
                     eps: float = 1e-5, block: int = 4096, num_warps: int = 8) -> None:
    rows = x.numel() // weight.numel()
    rows_split(_rows(x, rows), _rows(out, rows), MOMENTS, splits=splits, block=block, num_warps=num_warps, eps=eps,
               affine=Affine(weight.reshape(-1), bias.reshape(-1), AFFINE_ELEM))


def layer_norm_coop(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, group: int,
                    num_warps: int, eps: float = 1e-5, max_programs: int | None = None) -> None:
    rows = x.numel() // weight.numel()
    rows_coop(_rows(x, rows), _rows(out, rows), MOMENTS, group=group, num_warps=num_warps, eps=eps,
              affine=Affine(weight.reshape(-1), bias.reshape(-1), AFFINE_ELEM), max_programs=max_programs)


def _group_affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups: int) -> Affine:
    channels = x.shape[1]
    return Affine(weight, bias, AFFINE_CHANNEL, hw=x[0, 0].numel(), cpg=channels // groups, groups=groups)


def group_norm_split(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, groups: int,
                     splits: int, eps: float = 1e-5, block: int = 4096, num_warps: int = 8) -> None:
    rows = x.shape[0] * groups
    rows_split(_rows(x, rows), _rows(out, rows), MOMENTS, splits=splits, block=block, num_warps=num_warps, eps=eps,
               affine=_group_affine(x, weight, bias, groups))


def group_norm_coop(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, groups: int,
                    group: int, num_warps: int, eps: float = 1e-5, max_programs: int | None = None) -> None:
    rows = x.shape[0] * groups
    rows_coop(_rows(x, rows), _rows(out, rows), MOMENTS, group=group, num_warps=num_warps, eps=eps,
              affine=_group_affine(x, weight, bias, groups), max_programs=max_programs)


def instance_norm_split(x: torch.Tensor, out: torch.Tensor, *, splits: int, eps: float = 1e-5, block: int = 4096,
                        num_warps: int = 8) -> None:
    rows = x.shape[0] * x.shape[1]
    rows_split(_rows(x, rows), _rows(out, rows), MOMENTS, splits=splits, block=block, num_warps=num_warps, eps=eps)


def instance_norm_twopass(x: torch.Tensor, out: torch.Tensor, *, programs: int, eps: float = 1e-5,
                          block: int = 8192, num_warps: int = 16) -> None:
    rows = x.shape[0] * x.shape[1]
    rows_twopass(_rows(x, rows), _rows(out, rows), MOMENTS, programs=programs, block=block, num_warps=num_warps,
                 eps=eps)


def instance_norm_coop(x: torch.Tensor, out: torch.Tensor, *, group: int, num_warps: int, eps: float = 1e-5,
                       max_programs: int | None = None) -> None:
    rows = x.shape[0] * x.shape[1]
    rows_coop(_rows(x, rows), _rows(out, rows), MOMENTS, group=group, num_warps=num_warps, eps=eps,
              max_programs=max_programs)


def row_split(x: torch.Tensor, out: torch.Tensor, *, op: int, splits: int, block: int = 4096,
              num_warps: int = 8) -> None:
    rows_split(x, out, op, splits=splits, block=block, num_warps=num_warps)


def row_twopass(x: torch.Tensor, out: torch.Tensor, *, op: int, programs: int, block: int = 8192,
                num_warps: int = 16) -> None:
    rows_twopass(x, out, op, programs=programs, block=block, num_warps=num_warps)


def row_single(x: torch.Tensor, out: torch.Tensor, *, op: int, num_warps: int) -> None:
    rows_single(x, out, op, num_warps=num_warps)


def row_coop(x: torch.Tensor, out: torch.Tensor, *, op: int, group: int, num_warps: int,
             max_programs: int | None = None) -> None:
    rows_coop(x, out, op, group=group, num_warps=num_warps, max_programs=max_programs)


def cross_entropy_rows(logits: torch.Tensor, targets: torch.Tensor, out: torch.Tensor, *, rows_per_program: int,
                       num_warps: int) -> None:
    """Mean cross-entropy: each program reads its rows once and writes one partial sum; one program adds them."""
    rows, classes = logits.shape
    programs = triton.cdiv(rows, rows_per_program)
    part = torch.empty(programs, dtype=torch.float32, device=logits.device)
    _launch(_cross_entropy_rows_kernel, (programs,), logits, targets, part, rows, classes, ROWS=rows_per_program,
            BLOCK_C=max(2, triton.next_power_of_2(classes)), num_warps=num_warps)
    _launch(_sum_scale_kernel, (1,), part, out, programs, 1.0 / rows, BLOCK=1024, num_warps=4)


def _column_splits(rows: int, splits: int, block_r: int) -> tuple[int, int]:
    per_split = triton.cdiv(triton.cdiv(rows, splits), block_r) * block_r
    return per_split, triton.cdiv(rows, per_split)


def col_sum_tiled(x: torch.Tensor, out: torch.Tensor, *, splits: int, block_r: int = 32, block_c: int = 128,
                  num_warps: int = 8) -> None:
    rows, cols = x.shape
    per_split, n_splits = _column_splits(rows, splits, block_r)
    grid = (triton.cdiv(cols, block_c), n_splits)
    if n_splits == 1:
        _launch(_cols_partial_kernel, grid, x, out, rows, cols, per_split, OP=SUM, BLOCK_R=block_r,
                BLOCK_C=block_c, num_warps=num_warps)
        return
    part = torch.empty((n_splits, cols), dtype=torch.float32, device=x.device)
    _launch(_cols_partial_kernel, grid, x, part, rows, cols, per_split, OP=SUM, BLOCK_R=block_r, BLOCK_C=block_c,
            num_warps=num_warps)
    _launch(_cols_finalize_kernel, (triton.cdiv(cols, 128),), part, out, n_splits, cols, OP=SUM,
            S_BLOCK=max(2, triton.next_power_of_2(n_splits)), BLOCK_C=128, num_warps=4)


def col_log_softmax_tiled(x: torch.Tensor, out: torch.Tensor, *, splits: int, block_r: int = 32,
                          block_c: int = 128, num_warps: int = 8) -> None:
    """Column max/sum partials over row slices, per-column log-sum-exp, then x - lse: two reads of x."""
    rows, cols = x.shape
    per_split, n_splits = _column_splits(rows, splits, block_r)
    part = torch.empty((n_splits, 2, cols), dtype=torch.float32, device=x.device)
    lse = torch.empty(cols, dtype=torch.float32, device=x.device)
    _launch(_cols_partial_kernel, (triton.cdiv(cols, block_c), n_splits), x, part, rows, cols, per_split,
            OP=LOG_SOFTMAX, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=num_warps)
    _launch(_cols_finalize_kernel, (triton.cdiv(cols, 128),), part, lse, n_splits, cols, OP=LOG_SOFTMAX,
            S_BLOCK=max(2, triton.next_power_of_2(n_splits)), BLOCK_C=128, num_warps=4)
    sub_r, sub_c = 16, 256
    _launch(_cols_subtract_kernel, (triton.cdiv(rows, sub_r), triton.cdiv(cols, sub_c)), x, lse, out, rows, cols,
            BLOCK_R=sub_r, BLOCK_C=sub_c, num_warps=8)


# ----------------------------------------------------------------------------------------------
# Patterns


@dataclass(frozen=True)
class DeviceFacts:
    sms: int = 132
    l2_bytes: int = 60 * 1024 * 1024  # what torch reports on the H200s here (62,914,560 B)


@dataclass(frozen=True)
class Variant:
    name: str
    family: str  # split | l2_rows | coop | single_read | column_tiled | control
    fn: Callable[..., None]  # fn(*inputs, out)
    predicted: float  # predicted speedup over Inductor, written before any measurement
    extra_reads: float = 0.0  # extra full reads of the first input beyond the ideal bytes (traffic model)
    gpu_only: bool = False  # needs co-resident programs: the CPU interpreter runs programs one by one
    note: str = ""


@dataclass(frozen=True)
class Pattern:
    name: str
    what: str
    shapes: dict[str, dict[str, Any]]  # scale ("h200" | "tiny") -> shape parameters
    make_inputs: Callable[[dict[str, Any], str, int], tuple[torch.Tensor, ...]]
    reference: Callable[..., torch.Tensor]
    variants: Callable[[dict[str, Any], DeviceFacts], list[Variant]]
    inductor_expected: str
    inductor_predicted_sol: float  # percent, written before measuring
    tolerance: float = REL_TOLERANCE


def _randn(shape: Sequence[int], device: str, seed: int, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    gen = torch.Generator(device=device if device != "meta" else "cpu")
    gen.manual_seed(1000 + seed)
    if device == "meta":
        return torch.empty(tuple(shape), dtype=torch.float32, device="meta")
    return torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32) * scale + offset


def _partial(fn: Callable[..., None], **kwargs: Any) -> Callable[..., None]:
    def variant(*args: torch.Tensor) -> None:
        fn(*args, **kwargs)

    variant.__name__ = fn.__name__
    return variant


def _rows_fitting(fraction: float, row_bytes: int, facts: DeviceFacts) -> int:
    return max(1, int(fraction * facts.l2_bytes // row_bytes))


# --- references (what KernelBench's models compute) ---


def ref_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, tuple(weight.shape), weight, bias, 1e-5)


def ref_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def ref_log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, dim=1)


def ref_l1_norm(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def ref_l2_norm(x: torch.Tensor) -> torch.Tensor:
    return x / torch.norm(x, p=2, dim=1, keepdim=True)


GROUP_NORM_GROUPS = 8


def ref_group_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.group_norm(x, GROUP_NORM_GROUPS, weight, bias, 1e-5)


def ref_instance_norm(x: torch.Tensor) -> torch.Tensor:
    return F.instance_norm(x, eps=1e-5)


def ref_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, targets)


def ref_col_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=0)


def ref_col_log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, dim=0)


# --- inputs ---


def _inputs_layer_norm(p: dict[str, Any], device: str, seed: int) -> tuple[torch.Tensor, ...]:
    return (_randn(p["x"], device, seed), _randn(p["x"][1:], device, seed + 50, 0.5, 1.0),
            _randn(p["x"][1:], device, seed + 60, 0.5))


def _inputs_one(p: dict[str, Any], device: str, seed: int) -> tuple[torch.Tensor, ...]:
    return (_randn(p["x"], device, seed),)


def _inputs_group_norm(p: dict[str, Any], device: str, seed: int) -> tuple[torch.Tensor, ...]:
    channels = p["x"][1]
    return (_randn(p["x"], device, seed), _randn((channels,), device, seed + 50, 0.5, 1.0),
            _randn((channels,), device, seed + 60, 0.5))


def _inputs_cross_entropy(p: dict[str, Any], device: str, seed: int) -> tuple[torch.Tensor, ...]:
    rows, classes = p["x"]
    if device == "meta":
        targets = torch.empty(rows, dtype=torch.int64, device="meta")
    else:
        gen = torch.Generator(device=device)
        gen.manual_seed(2000 + seed)
        targets = torch.randint(0, classes, (rows,), generator=gen, device=device)
    return (_randn(p["x"], device, seed, 2.0), targets)


# --- variant lists (sizes: see EXPLORE_reductions.md) ---


def _variants_layer_norm(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    # No coop variant: a row is 16.8 MB, half the register file of 132 SMs, and at the registers the
    # compiled coop kernel needs (174 per thread at 64 floats per thread) only 132 of 256 programs fit.
    return [Variant(f"split_s{s}", "split", _partial(layer_norm_split, splits=s), pred, extra_reads=1.0,
                    note=f"{s} chunks per row; shifted-sum partials")
            for s, pred in ((64, 1.30), (256, 1.35), (1024, 1.30))]


def _variants_softmax_long(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    rows, n = p["x"]
    row_bytes = n * 4
    half, full = _rows_fitting(0.5, row_bytes, facts), _rows_fitting(1.0, row_bytes, facts)
    out = [Variant(f"split_s{s}", "split", _partial(row_split, op=SOFTMAX, splits=s), 0.95, extra_reads=1.0)
           for s in (16, 48)]
    out += [
        Variant(f"l2rows_p{half}", "l2_rows", _partial(row_twopass, op=SOFTMAX, programs=half), 0.45,
                note="rows in flight fill half of L2"),
        Variant(f"l2rows_p{full}", "l2_rows", _partial(row_twopass, op=SOFTMAX, programs=full), 0.60,
                note="rows in flight fill L2"),
        Variant(f"l2rows_p{facts.sms}", "l2_rows", _partial(row_twopass, op=SOFTMAX, programs=facts.sms), 0.95,
                extra_reads=1.0, note="one program per SM"),
        Variant("twopass_rows", "control", _partial(row_twopass, op=SOFTMAX, programs=rows), 0.95, extra_reads=1.0,
                note="one program per row, two passes: Inductor's algorithm"),
    ]
    out += [Variant(f"coop_g{g}_w{w}", "coop", _partial(row_coop, op=SOFTMAX, group=g, num_warps=w), pred,
                    gpu_only=True)
            for g, w, pred in ((24, 8, 1.25), (48, 8, 1.25), (96, 4, 1.20), (48, 4, 1.20))]
    return out


def _variants_rows(op: int, singles: Sequence[tuple[int, float]], coops: Sequence[tuple[int, int, float]] = (),
                   control: bool = False) -> Callable[..., list[Variant]]:
    """Single-read rows at several warp counts, coop groups for rows too wide for one program, a control."""
    def build(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
        out = [Variant(f"single_w{w}", "single_read", _partial(row_single, op=op, num_warps=w), pred)
               for w, pred in singles]
        out += [Variant(f"coop_g{g}_w{w}", "coop", _partial(row_coop, op=op, group=g, num_warps=w), pred,
                        gpu_only=True) for g, w, pred in coops]
        if control:
            out.append(Variant("twopass_rows", "control", _partial(row_twopass, op=op, programs=p["x"][0]), 0.95,
                               extra_reads=1.0, note="one program per row, two passes: Inductor's algorithm"))
        return out

    return build


def _variants_group_norm(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    g = GROUP_NORM_GROUPS
    return [
        Variant("split_s16", "split", _partial(group_norm_split, groups=g, splits=16), 1.35, extra_reads=1.0),
        Variant("split_s64", "split", _partial(group_norm_split, groups=g, splits=64), 1.40, extra_reads=1.0),
        Variant("coop_g128_w8", "coop", _partial(group_norm_coop, groups=g, group=128, num_warps=8), 1.50,
                gpu_only=True),
    ]


def _variants_instance_norm(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    row_bytes = p["x"][2] * p["x"][3] * 4
    half = _rows_fitting(0.5, row_bytes, facts)
    return [
        Variant("split_s4", "split", _partial(instance_norm_split, splits=4), 0.92, extra_reads=1.0),
        Variant(f"l2rows_p{half}", "l2_rows", _partial(instance_norm_twopass, programs=half), 0.50,
                note="rows in flight fill half of L2"),
        Variant(f"l2rows_p{facts.sms}", "l2_rows", _partial(instance_norm_twopass, programs=facts.sms), 0.95,
                extra_reads=1.0),
        Variant("coop_g16_w8", "coop", _partial(instance_norm_coop, group=16, num_warps=8), 1.25, gpu_only=True),
        Variant("coop_g32_w8", "coop", _partial(instance_norm_coop, group=32, num_warps=8), 1.20, gpu_only=True),
    ]


def _variants_cross_entropy(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    return [
        Variant("rows1_w4", "single_read", _partial(cross_entropy_rows, rows_per_program=1, num_warps=4), 1.40),
        Variant("rows4_w8", "single_read", _partial(cross_entropy_rows, rows_per_program=4, num_warps=8), 1.40),
    ]


def _variants_col_log_softmax(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    return [Variant(f"tiled_s{s}", "column_tiled", _partial(col_log_softmax_tiled, splits=s), pred, extra_reads=1.0)
            for s, pred in ((1, 1.05), (8, 1.10))]


def _variants_col_sum(p: dict[str, Any], facts: DeviceFacts) -> list[Variant]:
    return [Variant(f"tiled_s{s}", "column_tiled", _partial(col_sum_tiled, splits=s), pred)
            for s, pred in ((1, 0.95), (8, 1.00), (32, 1.00))]


# In order of expected value: the largest predicted headroom and the decisions it informs first.
PATTERNS: list[Pattern] = [
    Pattern("layernorm_16x4M", "F.layer_norm over (64,256,256), affine; x (16,64,256,256) = 16 rows of 4,194,304",
            {"h200": {"x": (16, 64, 256, 256)}, "tiny": {"x": (3, 4, 5, 7)}}, _inputs_layer_norm, ref_layer_norm,
            _variants_layer_norm, "16 programs (one per row), looped Welford then normalize", 44.0),
    Pattern("softmax_4096x393216", "torch.softmax(x, dim=1), 6.4 GB", {"h200": {"x": (4096, 393216)},
            "tiny": {"x": (5, 300)}}, _inputs_one, ref_softmax, _variants_softmax_long,
            "one program per row, online max/sum loop then a second read to normalize", 65.0),
    Pattern("l1norm_32768x65535", "x / x.abs().sum(dim=1, keepdim=True), 8.6 GB",
            {"h200": {"x": (32768, 65535)}, "tiny": {"x": (6, 257)}}, _inputs_one, ref_l1_norm,
            _variants_rows(L1, ((32, 1.15),), ((8, 8, 1.30), (4, 16, 1.30)), control=True), "looped sum, then a second read to divide", 65.0),
    Pattern("groupnorm_16x64x512x512_g8", "F.group_norm(x, 8, w, b); 128 rows of 2,097,152, 1.07 GB",
            {"h200": {"x": (16, 64, 512, 512)}, "tiny": {"x": (2, 16, 3, 5)}}, _inputs_group_norm, ref_group_norm,
            _variants_group_norm, "128 row programs (under one wave) or an Inductor split reduction", 45.0),
    Pattern("softmax_4096x65536", "torch.softmax(x, dim=1), 1.07 GB", {"h200": {"x": (4096, 65536)},
            "tiny": {"x": (4, 200)}}, _inputs_one, ref_softmax, _variants_rows(SOFTMAX, ((32, 1.10),), ((8, 8, 1.25), (4, 16, 1.25))),
            "looped online softmax, two reads", 70.0),
    Pattern("instancenorm_32x64x512x512", "F.instance_norm(x); 2048 rows of 262,144, 2.1 GB",
            {"h200": {"x": (32, 64, 512, 512)}, "tiny": {"x": (2, 3, 6, 7)}}, _inputs_one, ref_instance_norm,
            _variants_instance_norm, "one program per row, looped Welford then a second read", 65.0),
    Pattern("cross_entropy_32768x4096", "F.cross_entropy(logits, targets), mean; logits 0.54 GB",
            {"h200": {"x": (32768, 4096)}, "tiny": {"x": (7, 33)}}, _inputs_cross_entropy, ref_cross_entropy,
            _variants_cross_entropy, "a per-row reduction kernel then a mean kernel", 60.0),
    Pattern("col_log_softmax_8192x16384", "torch.log_softmax(x, dim=0), 0.54 GB",
            {"h200": {"x": (8192, 16384)}, "tiny": {"x": (37, 20)}}, _inputs_one, ref_col_log_softmax,
            _variants_col_log_softmax, "outer reduction (column stats), then a pointwise kernel", 55.0),
    Pattern("log_softmax_8192x32768", "torch.log_softmax(x, dim=1), 1.07 GB", {"h200": {"x": (8192, 32768)},
            "tiny": {"x": (4, 100)}}, _inputs_one, ref_log_softmax, _variants_rows(LOG_SOFTMAX, ((16, 1.20), (32, 1.20))),
            "looped online softmax, two reads", 72.0),
    Pattern("l2norm_32768x65535", "x / x.norm(dim=1, keepdim=True), 8.6 GB",
            {"h200": {"x": (32768, 65535)}, "tiny": {"x": (5, 129)}}, _inputs_one, ref_l2_norm,
            _variants_rows(L2, ((32, 1.15),), ((8, 8, 1.30),)), "looped sum of squares, then a second read", 65.0),
    Pattern("softmax_32768x16384", "torch.softmax(x, dim=1), 2.1 GB", {"h200": {"x": (32768, 16384)},
            "tiny": {"x": (9, 64)}}, _inputs_one, ref_softmax, _variants_rows(SOFTMAX, ((8, 1.05), (16, 1.05))),
            "possibly persistent already (row of 64 KB)", 85.0),
    Pattern("col_sum_16384x16384", "x.sum(dim=0), 1.07 GB", {"h200": {"x": (16384, 16384)},
            "tiny": {"x": (50, 19)}}, _inputs_one, ref_col_sum, _variants_col_sum,
            "outer reduction, near the copy peak", 90.0),
]
PATTERN_NAMES = [p.name for p in PATTERNS]


def pattern_by_name(name: str) -> Pattern:
    for pattern in PATTERNS:
        if pattern.name == name:
            return pattern
    raise KeyError(f"unknown pattern {name!r}; known: {', '.join(PATTERN_NAMES)}")


def tensor_bytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def ideal_bytes(inputs: Sequence[torch.Tensor], out: torch.Tensor) -> int:
    """Each input read once, the output written once."""
    return tensor_bytes(inputs) + tensor_bytes([out])


def plan(facts: DeviceFacts = DeviceFacts(), bandwidth: float = FLOOR_BANDWIDTH,
         names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The patterns at H200 size, their ideal bytes and floor time, and each variant's prediction (meta tensors)."""
    rows = []
    for pattern in [pattern_by_name(n) for n in names] if names else PATTERNS:
        params = pattern.shapes["h200"]
        inputs = pattern.make_inputs(params, "meta", 0)
        out = pattern.reference(*inputs)
        ideal = ideal_bytes(inputs, out)
        floor_us = ideal / bandwidth * 1e6
        inductor_us = floor_us / (pattern.inductor_predicted_sol / 100)
        variants = []
        for v in pattern.variants(params, facts):
            model = ideal + v.extra_reads * tensor_bytes(inputs[:1])
            variants.append({"name": v.name, "family": v.family, "predicted_speedup": v.predicted,
                             "predicted_us": round(inductor_us / v.predicted, 1),
                             "traffic_model_bytes": int(model), "gpu_only": v.gpu_only, "note": v.note})
        rows.append({"pattern": pattern.name, "what": pattern.what, "ideal_bytes": ideal,
                     "floor_us": round(floor_us, 1), "inductor_expected": pattern.inductor_expected,
                     "inductor_predicted_sol_pct": pattern.inductor_predicted_sol,
                     "inductor_predicted_us": round(inductor_us, 1), "variants": variants})
    return rows


# ----------------------------------------------------------------------------------------------
# Inductor's kernels, recorded at their first launch


def analyse_inductor_source(src: str, numels: dict[str, int], config: dict[str, Any]) -> dict[str, Any]:
    """Loops over the reduction, and which input pointers are loaded in more than one of them."""
    import re

    marker = re.compile(r"for r0?_?offset in")
    starts = [m.start() for m in marker.finditer(src)]
    ends = [*starts[1:], len(src)] if starts else []  # a persistent kernel has no loop at all
    segments = [src[s:e] for s, e in zip(starts, ends, strict=True)]
    loaded = [set(re.findall(r"tl\.load\((in_ptr\d+)", seg)) for seg in segments]
    counts: dict[str, int] = {}
    for pointers in loaded:
        for pointer in pointers:
            counts[pointer] = counts.get(pointer, 0) + 1
    reread = sorted(p for p, c in counts.items() if c > 1)
    r_numel = numels.get("r0_numel", numels.get("rnumel"))
    r_block = config.get("R0_BLOCK", config.get("RBLOCK"))
    iterations = math.ceil(r_numel / r_block) if r_numel and r_block else None
    return {"reduction_loops": len(starts), "inputs_loaded_in_several_loops": reread,
            "loop_iterations": iterations,
            "reads_rows_twice": bool(reread) and (iterations is None or iterations > 1)}


def describe_inductor_launch(autotuner: Any, args: Sequence[Any]) -> tuple[dict[str, Any], str]:
    name = getattr(getattr(autotuner, "fn", None), "__name__", None) or \
        getattr(autotuner, "inductor_meta", {}).get("kernel_name", "?")
    signature = list(getattr(autotuner, "triton_meta", {}).get("signature", {}).keys())
    numels = {k: int(v) for k, v in zip(signature, args, strict=False) if k.endswith("numel") and isinstance(v, int)}
    info: dict[str, Any] = {"name": name, "numels": numels,
                            "kind": "persistent reduction" if "_per_" in name else
                            "looped reduction" if "_red_" in name else "pointwise" if "_poi_" in name else "other"}
    launchers = getattr(autotuner, "launchers", [])
    config: dict[str, Any] = {}
    if len(launchers) == 1:
        launcher = launchers[0]
        cfg = getattr(launcher, "config", None)
        config = dict(getattr(cfg, "kwargs", {}) or {})
        info["config"] = config
        info["num_warps"] = getattr(cfg, "num_warps", None)
        info["num_stages"] = getattr(cfg, "num_stages", None)
        for attr in ("n_regs", "n_spills", "shared"):
            if getattr(launcher, attr, None) is not None:
                info[attr] = getattr(launcher, attr)
    grid_type = getattr(autotuner, "inductor_meta", {}).get("grid_type")
    info["grid_type"] = grid_type
    if "xnumel" in numels and "XBLOCK" in config:
        info["programs"] = math.ceil(numels["xnumel"] / config["XBLOCK"]) * (
            math.ceil(numels["ynumel"] / config["YBLOCK"]) if "ynumel" in numels and "YBLOCK" in config else 1)
    src = getattr(getattr(autotuner, "fn", None), "src", "") or ""
    info.update(analyse_inductor_source(src, numels, config))
    info["source_chars"] = len(src)
    return info, src


class InductorLaunchRecorder:
    """Records each of Inductor's kernel launches while active (patches CachingAutotuner.run; restored after)."""

    def __init__(self) -> None:
        self.launches: list[dict[str, Any]] = []
        self.sources: dict[str, str] = {}
        self._cls: Any = None
        self._original: Any = None

    def __enter__(self) -> "InductorLaunchRecorder":
        try:
            from torch._inductor.runtime.triton_heuristics import CachingAutotuner
        except ImportError:
            return self
        self._cls, self._original = CachingAutotuner, CachingAutotuner.run
        original, launches, sources = self._original, self.launches, self.sources

        def run(autotuner: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(autotuner, *args, **kwargs)
            try:
                info, src = describe_inductor_launch(autotuner, args)
                launches.append(info)
                sources[info["name"]] = src
            except Exception as exc:  # noqa: BLE001 - recording must never break the reference
                launches.append({"error": repr(exc)})
            return result

        CachingAutotuner.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cls is not None:
            self._cls.run = self._original


# ----------------------------------------------------------------------------------------------
# Measuring


class Deadline:
    def __init__(self, budget_s: float) -> None:
        self.start = time.monotonic()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()


def time_calls(fn: Callable[..., Any], arg_sets: Sequence[tuple[Any, ...]], target_s: float = 0.25,
               min_reps: int = 8, max_reps: int = 60) -> dict[str, Any]:
    """CUDA events around every call, inputs rotated; median and spread in ms."""
    for i in range(2):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    probe_start, probe_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_start.record()
    fn(*arg_sets[0])
    probe_end.record()
    torch.cuda.synchronize()
    probe_ms = max(probe_start.elapsed_time(probe_end), 1e-3)
    reps = int(min(max_reps, max(min_reps, target_s * 1e3 / probe_ms)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        args = arg_sets[i % len(arg_sets)]
        starts[i].record()
        fn(*args)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    pick = lambda q: times[min(len(times) - 1, int(q * (len(times) - 1) + 0.5))]  # noqa: E731
    median = statistics.median(times)
    return {"median_ms": round(median, 5), "p10_ms": round(pick(0.1), 5), "p90_ms": round(pick(0.9), 5),
            "spread_pct": round(100 * (pick(0.9) - pick(0.1)) / median, 2), "reps": reps}


def copy_bandwidth() -> dict[str, Any]:
    """A 2 GiB device-to-device copy; bytes read plus bytes written over the median time."""
    src = torch.empty(2 * 1024**3 // 4, dtype=torch.float32, device="cuda").uniform_()
    pair = [src, torch.empty_like(src)]
    timing = time_calls(lambda: pair[1].copy_(pair[0]), [()], target_s=0.05, min_reps=10, max_reps=20)
    bandwidth = 2 * src.numel() * 4 / (timing["median_ms"] * 1e-3)
    pair.clear()
    del src
    torch.cuda.empty_cache()
    return {"bytes_per_s": bandwidth, "tb_per_s": round(bandwidth / 1e12, 3), **timing}


def compare(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """Max abs / rel error and ||out - ref|| / ||ref||; differences in float32, norms accumulated in float64."""
    diff = (out - ref).abs()
    max_abs = float(diff.max())
    rel_l2 = float(torch.linalg.vector_norm(diff, dtype=torch.float64) /
                   torch.linalg.vector_norm(ref, dtype=torch.float64))
    ref_max = float(ref.abs().max())
    nan = bool(torch.isnan(out).any())
    del diff
    return {"max_abs_err": max_abs, "max_rel_err": max_abs / ref_max if ref_max else float("inf"),
            "rel_l2_err": rel_l2, "has_nan": nan}


def _sol(ideal: int, ms: float, bandwidth: float) -> float:
    return round(100 * ideal / (ms * 1e-3 * bandwidth), 1)


def _estimate_pattern_s(pattern: Pattern, facts: DeviceFacts, compile_s: float, bandwidth: float) -> float:
    params = pattern.shapes["h200"]
    # inputs read and about as much written: close enough to plan time (no meta-tensor reference call here)
    floor_s = 2 * tensor_bytes(pattern.make_inputs(params, "meta", 0)) / bandwidth
    variants = len(pattern.variants(params, facts))
    calls = (variants + 2) * 70  # reps, warm-ups and checks per timed callable
    return compile_s + 4.0 + calls * floor_s * 1.6 + 1.5 * variants


def run_pattern(pattern: Pattern, facts: DeviceFacts, bandwidth: float, deadline: Deadline, out_dir: str,
                device: str = "cuda", scale: str = "h200") -> dict[str, Any]:
    params = pattern.shapes[scale]
    result: dict[str, Any] = {"pattern": pattern.name, "what": pattern.what, "shape": params,
                              "inductor_expected": pattern.inductor_expected,
                              "inductor_predicted_sol_pct": pattern.inductor_predicted_sol, "variants": []}
    first = pattern.make_inputs(params, device, 0)
    n_sets = 3 if tensor_bytes(first) < 3e9 else 2
    sets = [first] + [pattern.make_inputs(params, device, i) for i in range(1, n_sets)]
    result["input_sets"] = n_sets
    torch._dynamo.reset()
    compiled = torch.compile(pattern.reference, mode="max-autotune-no-cudagraphs", dynamic=False)
    started = time.monotonic()
    with InductorLaunchRecorder() as recorder:
        ref = compiled(*sets[0])
        torch.cuda.synchronize()
    result["compile_s"] = round(time.monotonic() - started, 1)
    result["inductor_kernels"] = recorder.launches
    sources = os.path.join(out_dir, "inductor_kernels")
    os.makedirs(sources, exist_ok=True)
    for name, src in recorder.sources.items():
        with open(os.path.join(sources, f"{pattern.name}__{name}.txt"), "w") as handle:
            handle.write(src)
    ideal = ideal_bytes(sets[0], ref)
    result["ideal_bytes"] = ideal
    result["floor_ms"] = round(ideal / bandwidth * 1e3, 4)
    eager = pattern.reference(*sets[0])
    result["inductor_vs_eager"] = compare(ref, eager)
    del eager
    inductor = time_calls(compiled, sets)
    result["inductor"] = {**inductor, "sol_pct": _sol(ideal, inductor["median_ms"], bandwidth)}
    print(f"  [{pattern.name}] inductor {inductor['median_ms']:.4f} ms "
          f"({result['inductor']['sol_pct']}% SOL), compile {result['compile_s']} s", flush=True)
    out = torch.empty(ref.shape, dtype=ref.dtype, device=ref.device)  # contiguous, as the variants assume
    for variant in pattern.variants(params, facts):
        if deadline.left() < 6.0:
            result["variants"].append({"name": variant.name, "skipped": "out of time"})
            continue
        result["variants"].append(_run_variant(variant, sets, ref, out, ideal, inductor["median_ms"], bandwidth))
        if result["variants"][-1].get("cuda_broken"):
            result["cuda_broken"] = True
            return result
    again = time_calls(compiled, sets)
    result["inductor_again"] = again
    result["inductor_aa_pct"] = round(100 * abs(again["median_ms"] - inductor["median_ms"]) / inductor["median_ms"], 2)
    del sets, first, ref, out, compiled
    return result


def _run_variant(variant: Variant, sets: Sequence[tuple[torch.Tensor, ...]], ref: torch.Tensor, out: torch.Tensor,
                 ideal: int, inductor_ms: float, bandwidth: float) -> dict[str, Any]:
    row: dict[str, Any] = {"name": variant.name, "family": variant.family, "predicted": variant.predicted,
                           "note": variant.note}
    model = ideal + variant.extra_reads * tensor_bytes(sets[0][:1])
    row["traffic_model_bytes"] = int(model)
    started = time.monotonic()
    try:
        out.fill_(float("nan"))  # poison: an unwritten element fails the check
        variant.fn(*sets[0], out)
        torch.cuda.synchronize()
        row["first_call_s"] = round(time.monotonic() - started, 2)  # includes compiling (or loading) its kernels
        check = compare(out, ref)
        if variant.family == "coop" and coop_spin_limit_hit():
            check["spin_limit_hit"] = True
        row.update(check)
        row["ok"] = (not check["has_nan"] and check["rel_l2_err"] <= REL_TOLERANCE
                     and not check.get("spin_limit_hit"))
        if not row["ok"]:
            return row
        timing = time_calls(lambda *args: variant.fn(*args, out), sets)
        row.update(timing)
        row["speedup"] = round(inductor_ms / timing["median_ms"], 3)
        row["sol_pct"] = _sol(ideal, timing["median_ms"], bandwidth)
        row["model_sol_cap_pct"] = round(100 * ideal / model, 1)
    except VariantUnfit as exc:
        row["unfit"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the others
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc()[-2000:]
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky CUDA error: nothing after this can be measured
            row["cuda_broken"] = True
    return row


# ----------------------------------------------------------------------------------------------
# Report


def verdict(speedup: float | None) -> str:
    if speedup is None:
        return "no correct variant"
    return "WIN" if speedup >= WIN else "marginal" if speedup >= TIE else "no gain"


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    per_pattern: list[dict[str, Any]] = []
    families: dict[str, list[tuple[str, float]]] = {}
    for res in results["patterns"]:
        good = [v for v in res.get("variants", []) if v.get("speedup") is not None]
        best = max(good, key=lambda v: v["speedup"], default=None)
        per_pattern.append({"pattern": res["pattern"], "inductor_ms": res.get("inductor", {}).get("median_ms"),
                            "inductor_sol_pct": res.get("inductor", {}).get("sol_pct"),
                            "best": best["name"] if best else None, "best_ms": best["median_ms"] if best else None,
                            "speedup": best["speedup"] if best else None,
                            "best_sol_pct": best["sol_pct"] if best else None,
                            "verdict": verdict(best["speedup"] if best else None)})
        by_family: dict[str, float] = {}
        for v in good:
            by_family[v["family"]] = max(by_family.get(v["family"], 0.0), v["speedup"])
        for family, speedup in by_family.items():
            families.setdefault(family, []).append((res["pattern"], speedup))
    family_rows = []
    for family, hits in families.items():
        geo = math.exp(sum(math.log(s) for _, s in hits) / len(hits))
        family_rows.append({"family": family, "patterns": len(hits), "wins": sum(s >= WIN for _, s in hits),
                            "best": max(s for _, s in hits), "geomean_best": round(geo, 3),
                            "won_on": [p for p, s in hits if s >= WIN]})
    family_rows.sort(key=lambda r: (-r["wins"], -r["best"]))
    return {"per_pattern": per_pattern, "families": family_rows}


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-2 else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def markdown(results: dict[str, Any]) -> str:
    bw = results.get("copy_bandwidth") or {}
    lines = ["# Reduction strategies against max-autotune (explore_reductions.py)", "",
             f"- {results.get('environment', {}).get('gpu')}, torch {results.get('environment', {}).get('torch')}, "
             f"triton {results.get('environment', {}).get('triton')}; {results.get('environment', {}).get('date')}",
             f"- copy bandwidth (2 GiB device-to-device, read + written): {_fmt(bw.get('tb_per_s'))} TB/s; "
             "SOL % = ideal bytes / (time x that bandwidth)",
             "- reference: torch.compile(mode=\"max-autotune-no-cudagraphs\"); every variant checked against it "
             f"(output poisoned with NaN; pass = no NaN and ||out-ref||/||ref|| <= {REL_TOLERANCE:g})", ""]
    summary = results.get("summary") or summarise(results)
    lines += ["## Verdict per pattern", "",
              "| pattern | Inductor ms | Inductor SOL % | best variant | ms | speedup | SOL % | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for row in summary["per_pattern"]:
        lines.append(f"| {row['pattern']} | {_fmt(row['inductor_ms'], 4)} | {_fmt(row['inductor_sol_pct'])} | "
                     f"{_fmt(row['best'])} | {_fmt(row['best_ms'], 4)} | {_fmt(row['speedup'])} | "
                     f"{_fmt(row['best_sol_pct'])} | {row['verdict']} |")
    lines += ["", f"## Families (win = at least {WIN}x over Inductor)", "",
              "| family | patterns | wins | best | geomean of best | won on |", "|---|---|---|---|---|---|"]
    for row in summary["families"]:
        lines.append(f"| {row['family']} | {row['patterns']} | {row['wins']} | {_fmt(row['best'])} | "
                     f"{_fmt(row['geomean_best'])} | {', '.join(row['won_on']) or '-'} |")
    for res in results["patterns"]:
        lines += ["", f"## {res['pattern']}", "", f"{res.get('what', '')}", ""]
        if "error" in res:
            lines += [f"error: `{res['error']}`"]
            continue
        lines.append(f"- ideal bytes {res.get('ideal_bytes', 0) / 1e9:.3f} GB, floor {_fmt(res.get('floor_ms'), 4)} ms;"
                     f" compile {res.get('compile_s')} s; {res.get('input_sets')} input sets; Inductor A/A "
                     f"{_fmt(res.get('inductor_aa_pct'))} %; Inductor vs eager rel err "
                     f"{_fmt(res.get('inductor_vs_eager', {}).get('rel_l2_err'))}")
        lines.append(f"- expected of Inductor: {res.get('inductor_expected')} "
                     f"(predicted SOL {res.get('inductor_predicted_sol_pct')} %)")
        for k in res.get("inductor_kernels", []):
            lines.append(f"- Inductor kernel `{k.get('name')}`: {k.get('kind')}, config {k.get('config')}, "
                         f"warps {k.get('num_warps')}, programs {k.get('programs')}, numels {k.get('numels')}, "
                         f"loops {k.get('reduction_loops')}, iterations {k.get('loop_iterations')}, "
                         f"re-read inputs {k.get('inputs_loaded_in_several_loops')}, regs {k.get('n_regs')}, "
                         f"spills {k.get('n_spills')}")
        ind = res.get("inductor", {})
        lines += ["", "| variant | family | ms | spread % | speedup | predicted | SOL % | traffic cap % | "
                  "rel err | status |", "|---|---|---|---|---|---|---|---|---|---|",
                  f"| Inductor | - | {_fmt(ind.get('median_ms'), 4)} | {_fmt(ind.get('spread_pct'))} | 1 | 1 | "
                  f"{_fmt(ind.get('sol_pct'))} | - | - | reference |"]
        for v in res.get("variants", []):
            status = ("ok" if v.get("ok") else "skipped: " + v["skipped"] if "skipped" in v else
                      "unfit: " + v["unfit"] if "unfit" in v else "error: " + v["error"][:80] if "error" in v else
                      "WRONG" + (" (spin limit)" if v.get("spin_limit_hit") else ""))
            lines.append(f"| {v['name']} | {v.get('family', '-')} | {_fmt(v.get('median_ms'), 4)} | "
                         f"{_fmt(v.get('spread_pct'))} | {_fmt(v.get('speedup'))} | {_fmt(v.get('predicted'))} | "
                         f"{_fmt(v.get('sol_pct'))} | {_fmt(v.get('model_sol_cap_pct'))} | "
                         f"{_fmt(v.get('rel_l2_err'), 2)} | {status} |")
    if results.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {s}" for s in results["skipped"]]
    if results.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {e}" for e in results["errors"]]
    return "\n".join(lines) + "\n"


def short_summary(results: dict[str, Any]) -> str:
    """A few lines that fit the tail run_all prints (1,500 characters)."""
    summary = results.get("summary") or summarise(results)
    bw = (results.get("copy_bandwidth") or {}).get("tb_per_s")
    lines = [f"copy {bw} TB/s; pattern: inductor ms (SOL%) -> best variant ms x speedup (SOL%) verdict"]
    for row in summary["per_pattern"]:
        lines.append(f"{row['pattern'][:26]}: {_fmt(row['inductor_ms'], 4)} ({_fmt(row['inductor_sol_pct'])}) -> "
                     f"{row['best']} {_fmt(row['best_ms'], 4)} x{_fmt(row['speedup'])} "
                     f"({_fmt(row['best_sol_pct'])}) {row['verdict']}")
    lines.append("families: " + "; ".join(f"{r['family']} {r['wins']}/{r['patterns']} best x{_fmt(r['best'])}"
                                          for r in summary["families"]))
    if results.get("skipped"):
        lines.append(f"skipped: {len(results['skipped'])} (see explore_reductions.md)")
    return "\n".join(lines)


def _save(out_dir: str, results: dict[str, Any]) -> None:
    results["summary"] = summarise(results)
    with open(os.path.join(out_dir, "explore_reductions.json"), "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    with open(os.path.join(out_dir, "explore_reductions.md"), "w") as handle:
        handle.write(markdown(results))


# ----------------------------------------------------------------------------------------------
# Precompile children: compile this script's kernels into the shared Triton cache, no GPU launches.


def _selected_patterns() -> list[str]:
    chosen = os.environ.get("KERNELOPT_EXPLORE_PATTERNS", "").strip()
    names = [n.strip() for n in chosen.split(",") if n.strip()] if chosen else list(PATTERN_NAMES)
    for name in names:
        pattern_by_name(name)  # unknown names fail early, with the list of known ones
    return names


def precompile(index: int, count: int, names: Sequence[str], facts: DeviceFacts) -> int:
    """Child process: warm up every count-th variant (in pattern order) on meta tensors."""
    global _MODE
    _MODE = "warmup"
    parent = os.getppid()
    done = 0
    k = -1
    for name in names:
        pattern = pattern_by_name(name)
        params = pattern.shapes["h200"]
        inputs = pattern.make_inputs(params, "meta", 0)
        out = pattern.reference(*inputs)
        for variant in pattern.variants(params, facts):
            k += 1
            if k % count != index:
                continue
            if os.getppid() != parent:
                return done  # the measuring process is gone
            started = time.monotonic()
            try:
                variant.fn(*inputs, out)
                done += 1
                print(f"{name}/{variant.name}: {time.monotonic() - started:.1f} s", flush=True)
            except Exception as exc:  # noqa: BLE001 - the measuring process compiles it again if needed
                print(f"{name}/{variant.name}: {type(exc).__name__}: {exc}", flush=True)
    return done


def _start_precompile(names: Sequence[str], facts: DeviceFacts, out_dir: str) -> list[subprocess.Popen]:
    setting = os.environ.get("KERNELOPT_EXPLORE_PRECOMPILE", "auto")
    count = max(1, min(6, (os.cpu_count() or 4) // 3)) if setting == "auto" else int(setting)
    children = []
    for index in range(count):
        log = open(os.path.join(out_dir, f"precompile_{index}.log"), "w")
        children.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--precompile", f"{index}/{count}",
             "--patterns", ",".join(names), "--sms", str(facts.sms), "--l2", str(facts.l2_bytes)],
            stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()))
        log.close()
    return children


def _stop(children: Sequence[subprocess.Popen]) -> list[int | None]:
    codes = []
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        codes.append(child.returncode)
    return codes


# ----------------------------------------------------------------------------------------------


def _environment() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0],
            "gpu": props.name, "sms": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None), "memory_gb": round(props.total_memory / 1e9, 1),
            "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR")}


def run(out_dir: str, budget_s: float | None = None) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    budget = budget_s or float(os.environ.get("KERNELOPT_GPU_BUDGET_S", str(DEFAULT_BUDGET_S)))
    deadline = Deadline(budget - min(12.0, 0.08 * budget))  # leave time to write the results
    results: dict[str, Any] = {"budget_s": budget, "patterns": [], "skipped": [], "errors": []}
    if not torch.cuda.is_available():
        results["error"] = "CUDA is not available: this script measures on a GPU (see --plan for the plan)"
        _save(out_dir, results)
        return {"error": results["error"]}
    # One Triton cache for Inductor, this process and the precompile children.
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tempfile.gettempdir(), "kernelopt-explore-triton"))
    results["environment"] = _environment()
    facts = DeviceFacts(sms=results["environment"]["sms"],
                        l2_bytes=results["environment"]["l2_bytes"] or DeviceFacts().l2_bytes)
    names = _selected_patterns()
    # the copy peak first, on a quiet GPU; then the children (their contexts come after this process's)
    try:
        results["copy_bandwidth"] = copy_bandwidth()
    except Exception as exc:  # noqa: BLE001 - SOL then uses the copy peak seen before, and says so
        results["copy_bandwidth"] = {"bytes_per_s": FLOOR_BANDWIDTH, "tb_per_s": FLOOR_BANDWIDTH / 1e12,
                                     "error": f"{type(exc).__name__}: {exc}; using the earlier 4.2 TB/s"}
        torch.cuda.empty_cache()
    bandwidth = results["copy_bandwidth"]["bytes_per_s"]
    print(f"copy bandwidth {results['copy_bandwidth']['tb_per_s']} TB/s", flush=True)
    children = _start_precompile(names, facts, out_dir)
    results["precompile_children"] = len(children)
    _save(out_dir, results)
    try:
        compile_times: list[float] = []
        broken = False
        for name in names:
            pattern = pattern_by_name(name)
            # the first compile also starts Inductor's worker pool: the median of what was seen, with a margin
            compile_guess = 1.25 * statistics.median(compile_times) if compile_times else 35.0
            need = _estimate_pattern_s(pattern, facts, compile_guess, bandwidth)
            if broken or deadline.left() < need:
                why = "CUDA context broken by an earlier error" if broken else \
                    f"out of time (needs ~{need:.0f} s, {deadline.left():.0f} s left)"
                results["skipped"].append(f"{name}: {why}")
                continue
            print(f"[{name}] starting at {deadline.elapsed():.0f} s", flush=True)
            try:
                res = run_pattern(pattern, facts, bandwidth, deadline, out_dir)
                compile_times.append(res.get("compile_s", 35.0))
                broken = bool(res.get("cuda_broken"))
            except Exception as exc:  # noqa: BLE001 - recorded; the next pattern still runs
                res = {"pattern": name, "what": pattern.what, "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-3000:]}
                results["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            results["patterns"].append(res)
            gc.collect()
            torch.cuda.empty_cache()
            _save(out_dir, results)
            best = summarise({"patterns": [res]})["per_pattern"][0]
            print(f"[{name}] done at {deadline.elapsed():.0f} s: best {best['best']} x{_fmt(best['speedup'])} "
                  f"({best['verdict']})", flush=True)
    finally:
        results["precompile_exit_codes"] = _stop(children)
    results["elapsed_s"] = round(deadline.elapsed(), 1)
    _save(out_dir, results)
    print(short_summary(results), flush=True)
    return results["summary"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default=None)
    parser.add_argument("--patterns", default=None, help="comma-separated pattern names (default: all, in order)")
    parser.add_argument("--plan", action="store_true", help="print the plan (ideal bytes, floors, predictions)")
    parser.add_argument("--precompile", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sms", type=int, default=DeviceFacts().sms, help=argparse.SUPPRESS)
    parser.add_argument("--l2", type=int, default=DeviceFacts().l2_bytes, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.patterns:
        os.environ["KERNELOPT_EXPLORE_PATTERNS"] = args.patterns
    if args.precompile:
        index, count = (int(v) for v in args.precompile.split("/"))
        started = time.monotonic()
        done = precompile(index, count, _selected_patterns(), DeviceFacts(args.sms, args.l2))
        print(f"precompiled {done} variants in {time.monotonic() - started:.1f} s", flush=True)
        return 0
    if args.plan:
        print(json.dumps(plan(DeviceFacts(args.sms, args.l2)), indent=1))
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is required (or --plan)")
    run(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
