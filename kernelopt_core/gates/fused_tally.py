"""Gate 2's comparison figures of a float32 output pair in one pass (a Triton reduction on the GPU).

The eager figures (:func:`.kernel._float_figures`) run about 27 elementwise kernels per chunk; at a
12.9 GB working set they were most of gate 2's compare time. This kernel reads each element of both
outputs once and writes one row of partial figures per program. It computes what the eager path does
(torch.isclose's float32 arithmetic, with fp contraction off) and gives way to it wherever it does not
apply: another dtype, views that are not both contiguous, a magnitude floor, or |c - o| overflowing
float32 (the eager path redoes that in float64). ``tests/test_fused_tally.py`` holds the two equal.
"""

from __future__ import annotations

import functools
import math
from typing import Any

BLOCK = 4096  # elements per program: the partials stay a small fraction of the outputs
COUNTS = ("unwritten", "bad", "nonfinite", "lost")
MAXIMA = ("max_abs_diff", "worst_bad")

@functools.cache
def _kernel() -> Any:
    """The Triton kernel, defined on first use (importing triton is for the worker, not the server)."""
    import triton
    import triton.language as tl

    @triton.jit
    def tally(c_ptr, o_ptr, counts_ptr, maxima_ptr, n, atol, rtol, poison,
              USE_POISON: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        c = tl.load(c_ptr + offsets, mask=inside, other=0.0)
        o = tl.load(o_ptr + offsets, mask=inside, other=0.0)
        c_finite = tl.abs(c) < float("inf")  # NaN compares false
        o_finite = tl.abs(o) < float("inf")
        both = c_finite & o_finite
        diff = tl.abs(c - o)
        # torch.isclose(c, o, atol, rtol, equal_nan=True), in float32
        allowed = atol + tl.abs(rtol * o)
        close = (c == o) | ((c != c) & (o != o)) | ((diff < float("inf")) & (diff <= allowed))
        not_close = inside & (close == 0)
        diff_both = tl.where(inside & both, diff, 0.0)
        if USE_POISON:
            unwritten = inside & (c.to(tl.int32, bitcast=True) == poison) & (o.to(tl.int32, bitcast=True) != poison)
        else:
            unwritten = offsets < 0  # no poison: nothing counts as unwritten
        row = counts_ptr + pid.to(tl.int64) * 4
        tl.store(row, tl.sum(unwritten.to(tl.int32), axis=0))
        tl.store(row + 1, tl.sum(not_close.to(tl.int32), axis=0))
        tl.store(row + 2, tl.sum((inside & o_finite & (c_finite == 0)).to(tl.int32), axis=0))
        tl.store(row + 3, tl.sum((inside & c_finite & (o_finite == 0)).to(tl.int32), axis=0))
        top = maxima_ptr + pid.to(tl.int64) * 2
        tl.store(top, tl.max(diff_both, axis=0))
        tl.store(top + 1, tl.max(tl.where(not_close, diff_both, 0.0), axis=0))

    return tally


def applies(cand: Any, orig: Any, force: bool = False) -> bool:
    """Whether the fused pass computes these figures: float32 pairs of one shape, both contiguous, on a GPU
    (``force``: anywhere Triton runs, the CPU interpreter included, for tests)."""
    import torch

    return (cand.dtype == torch.float32 and orig.dtype == torch.float32 and tuple(cand.shape) == tuple(orig.shape)
            and cand.numel() > 0 and cand.is_contiguous() and orig.is_contiguous()
            and cand.device == orig.device and (force or cand.is_cuda))


def fused_float_figures(cand: Any, orig: Any, poison: int | None, atol: float, rtol: float,
                        force: bool = False) -> dict[str, float] | None:
    """``_float_figures``' unwritten, bad, nonfinite, lost, max_abs_diff and worst_bad in one pass; None
    where the eager path must compute them (see the module's docstring)."""
    import torch
    import triton

    if not applies(cand, orig, force):
        return None
    n = cand.numel()
    programs = triton.cdiv(n, BLOCK)
    counts = torch.empty((programs, len(COUNTS)), dtype=torch.int32, device=cand.device)
    maxima = torch.empty((programs, len(MAXIMA)), dtype=torch.float32, device=cand.device)
    _kernel()[(programs,)](cand, orig, counts, maxima, n, float(atol), float(rtol), int(poison or 0),
                           USE_POISON=poison is not None, BLOCK=BLOCK, enable_fp_fusion=False)
    totals = counts.sum(0, dtype=torch.int64).tolist()
    tops = maxima.amax(0).tolist()
    figures = {name: float(value) for name, value in zip(COUNTS, totals, strict=True)}
    figures.update({name: float(value) for name, value in zip(MAXIMA, tops, strict=True)})
    if not math.isfinite(figures["max_abs_diff"]):  # |c - o| overflowed float32: the eager path widens
        return None
    return figures
