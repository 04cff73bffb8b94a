"""Gate 2's comparison figures of a float32 output pair in one pass (a Triton reduction on the GPU).

The eager figures (:func:`.kernel._float_figures`) run about 27 elementwise kernels per chunk; at a
12.9 GB working set they were most of gate 2's compare time. This kernel reads each element of both
outputs once and writes one row of partial figures per program. It computes what the eager path does
(torch.isclose's float32 arithmetic, with fp contraction off) and gives way to it wherever it does not
apply: another dtype, views that are not both contiguous, or |c - o| overflowing float32 (the eager
path redoes that in float64). The magnitude sweep's two passes are fused the same way: the floor per
window of outputs (:func:`fused_magnitude_floor`) and the comparison against it, which also finds the
element furthest beyond its floor; eager, their per-chunk temporaries set gate 2's device peak (40 GB
for a 12.9 GB working set). ``tests/test_fused_tally.py`` holds each equal to its eager twin.
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
    """The Triton kernel, defined on first use (importing triton is for the worker, not the server).
    ``USE_FLOOR``: the magnitude sweep's comparison, each element against its window's floor (where both are
    finite), and per program the largest ratio beyond a floor and its flat index."""
    import triton
    import triton.language as tl

    @triton.jit
    def tally(c_ptr, o_ptr, counts_ptr, maxima_ptr, n, atol, rtol, poison, floor_ptr, ratio_ptr, at_ptr, factor,
              factor_wide_ptr, magnitude_rtol, USE_POISON: tl.constexpr, USE_FLOOR: tl.constexpr,
              WINDOW: tl.constexpr, BLOCK: tl.constexpr):
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
        diff_both = tl.where(inside & both, diff, 0.0)
        if USE_FLOOR:
            limit = tl.load(floor_ptr + offsets // WINDOW, mask=inside, other=1.0) * factor
            within = (diff_both <= limit) | (diff_both <= magnitude_rtol * tl.abs(o))
            close = tl.where(both, within, close)
            ratio = tl.where(inside & both & (within == 0),
                             diff_both.to(tl.float64) / (limit.to(tl.float64) / tl.load(factor_wide_ptr)), 0.0)
            tl.store(ratio_ptr + pid, tl.max(ratio, axis=0))
            tl.store(at_ptr + pid, pid.to(tl.int64) * BLOCK + tl.argmax(ratio, axis=0).to(tl.int64))
        not_close = inside & (close == 0)
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
    if not applies(cand, orig, force):
        return None
    figures, _ = _tally(cand, orig, poison, atol, rtol, None, 0.0)
    return figures


def _tally(cand: Any, orig: Any, poison: int | None, atol: float, rtol: float, floor: Any,
           magnitude_rtol: float) -> tuple[dict[str, float] | None, tuple[Any, Any] | None]:
    """The kernel over a pair that applies: the figures (None where |c - o| overflowed float32: the eager
    path widens), and with a floor the per-program largest ratios and their flat indices."""
    import torch
    import triton

    n = cand.numel()
    programs = triton.cdiv(n, BLOCK)
    counts = torch.empty((programs, len(COUNTS)), dtype=torch.int32, device=cand.device)
    maxima = torch.empty((programs, len(MAXIMA)), dtype=torch.float32, device=cand.device)
    if floor is None:  # the floor's arguments go unread: any buffer stands in
        floor_values, ratios, places, factor, factor_wide, window = counts, counts, counts, 1.0, counts, 1
    else:
        floor_values, factor, window = floor.values, float(floor.factor), floor.window
        ratios = torch.empty(programs, dtype=torch.float64, device=cand.device)
        places = torch.empty(programs, dtype=torch.int64, device=cand.device)
        factor_wide = torch.tensor([factor], dtype=torch.float64, device=cand.device)
    _kernel()[(programs,)](cand, orig, counts, maxima, n, float(atol), float(rtol), int(poison or 0), floor_values,
                           ratios, places, factor, factor_wide, float(magnitude_rtol), USE_POISON=poison is not None,
                           USE_FLOOR=floor is not None, WINDOW=window, BLOCK=BLOCK, enable_fp_fusion=False)
    totals = counts.sum(0, dtype=torch.int64).tolist()
    tops = maxima.amax(0).tolist()
    figures = {name: float(value) for name, value in zip(COUNTS, totals, strict=True)}
    figures.update({name: float(value) for name, value in zip(MAXIMA, tops, strict=True)})
    if not math.isfinite(figures["max_abs_diff"]):  # |c - o| overflowed float32: the eager path widens
        return None, None
    return figures, (ratios, places) if floor is not None else None


@functools.cache
def _floor_kernel() -> Any:
    """The magnitude floor per window of outputs (``error_structure.magnitude_floor``), one pass."""
    import triton
    import triton.language as tl

    @triton.jit
    def floor_of_windows(nudged_ptr, original_ptr, floor_ptr, n, windows, scale, tiny, WINDOW: tl.constexpr,
                         WINDOWS: tl.constexpr):
        pid = tl.program_id(0)
        window = pid.to(tl.int64) * WINDOWS + tl.arange(0, WINDOWS)
        offsets = window[:, None] * WINDOW + tl.arange(0, WINDOW)[None, :]
        inside = offsets < n
        moved = tl.load(nudged_ptr + offsets, mask=inside, other=0.0)
        o = tl.load(original_ptr + offsets, mask=inside, other=0.0)
        finite = (tl.abs(moved) < float("inf")) & (tl.abs(o) < float("inf"))
        difference = tl.where(finite, tl.abs(moved - o), 0.0)
        difference = tl.where(difference < float("inf"), difference, 0.0)
        change = tl.max(difference, axis=1)
        largest = tl.max(tl.where(finite, tl.abs(o), 0.0), axis=1)
        floor = tl.maximum(change, largest * scale)
        floor = tl.maximum(floor, tiny)
        tl.store(floor_ptr + window, floor, mask=window < windows)

    return floor_of_windows


FLOOR_WINDOWS = 512  # windows per program of the floor pass


def _power_of_two(window: int) -> bool:
    """The kernels' windows: a power of two (a block of the kernel holds whole windows)."""
    return window >= 1 and window & (window - 1) == 0


def _is_float32(value: float) -> bool:
    import struct

    return struct.unpack("f", struct.pack("f", value))[0] == value


def fused_magnitude_floor(nudged: Any, original: Any, window: int, scale: float, tiny: float,
                          force: bool = False) -> Any | None:
    """``magnitude_floor``'s floor values (one float32 per window of ``window`` outputs) in one pass;
    None where the eager path must compute them (the pair does not apply, or ``window`` is not a power
    of two)."""
    import torch
    import triton

    if not applies(nudged, original, force) or not _power_of_two(window):
        return None
    n = original.numel()
    windows = -(-n // window)
    floor = torch.empty(windows, dtype=torch.float32, device=original.device)
    _floor_kernel()[(triton.cdiv(windows, FLOOR_WINDOWS),)](
        nudged, original, floor, n, windows, float(scale), float(tiny), WINDOW=window, WINDOWS=FLOOR_WINDOWS,
        enable_fp_fusion=False)
    return floor


def fused_floor_figures(cand: Any, orig: Any, poison: int | None, atol: float, rtol: float, floor: Any,
                        magnitude_rtol: float, force: bool = False) -> dict[str, float] | None:
    """``_float_figures`` against a :class:`.error_structure.MagnitudeFloor` in one pass: the counts, the
    maxima and the element furthest beyond its floor (its ratio, flat index, values and floor); None where
    the eager path must compute them."""
    import torch

    window = floor.window
    if (not applies(cand, orig, force) or floor.values.dtype != torch.float32 or not _power_of_two(window)
            or not _is_float32(floor.factor) or floor.values.device != cand.device):
        return None
    figures, per_program = _tally(cand, orig, poison, atol, rtol, floor, magnitude_rtol)
    if figures is None or per_program is None:
        return None
    ratios, places = per_program
    best = int(ratios.argmax())  # the first program holding the largest ratio, as the eager chunks' order
    at = int(places[best])
    limit = floor.values[at // window] * floor.factor  # float32, as the eager limits
    figures.update(worst_ratio=float(ratios[best]), worst_at=float(at),
                   worst_got=float(cand.reshape(-1)[at].double()), worst_want=float(orig.reshape(-1)[at].double()),
                   worst_floor=float((limit / floor.factor).double()))
    return figures
