"""The error structure's sums in one pass over the outputs (a Triton kernel on the GPU).

:func:`.error_structure.error_structure` needs, over the elements finite in every output compared, the
count, the mean and centred square sum of ``d = candidate - original``, per row group the sum of ``d``
and the count, and the errors against the reference (gate 3's float64 output; gate 2 has none and
uses the original's): their sums, absolute sums and maxima. Eagerly that is fifteen to twenty float64
kernels per chunk, each a pass over a widened copy: at a 12.9 GB working set most of gate 2's compare
time. Here each program reads its elements once and writes one row of partials; the programs' counts,
sums and centred square sums are merged on the device by Chan's formula (a large mean never cancels a
small spread). Rows are laid out so that no program spans two: a program holds a tile of whole short
rows, or one piece of a long row. The sums agree with the eager path's to float64 rounding
(``tests/test_fused_structure.py``). Float64 outputs and views that are not all contiguous are left to
the eager path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BLOCK = 4096  # elements per program
PARTIALS = ("count", "sum", "m2", "worst", "max_abs_ref", "sum_abs_ref", "sum_orig_err", "sum_cand_err",
            "sum_abs_orig_err", "worst_orig")


@dataclass
class StructureSums:
    """What the error structure's judgement reads, over the elements finite in every output."""

    count: int
    mean: float  # of d = candidate - original
    m2: float  # centred square sum of d
    worst: float  # max |candidate - reference|
    max_abs_ref: float
    sum_abs_ref: float
    present_rows: int = 0  # rows with a finite element (row groups only)
    row_spread_squares: float = 0.0  # over those rows, the square sum of (row mean - mean of row means)
    sum_orig_err: float = 0.0  # sum (original - reference); these four are 0 without a reference
    sum_cand_err: float = 0.0
    sum_abs_orig_err: float = 0.0
    worst_orig: float = 0.0


def _kernels() -> tuple[Any, Any]:
    """The two Triton kernels (importing triton is for the worker, not the server)."""
    from .fused_structure_kernels import long_rows, short_rows

    return long_rows, short_rows


def applies(cand: Any, orig: Any, reference: Any | None = None, force: bool = False) -> bool:
    """Outputs of one float32 or narrower dtype and one shape, and a float64 reference of that shape if any,
    all contiguous on one GPU (``force``: anywhere Triton runs, the CPU interpreter included, for tests)."""
    import torch

    same = (cand.dtype == orig.dtype and cand.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and tuple(cand.shape) == tuple(orig.shape) and cand.numel() > 0 and cand.is_contiguous()
            and orig.is_contiguous() and cand.device == orig.device and (force or cand.is_cuda))
    return same and (reference is None or (reference.dtype == torch.float64 and reference.is_contiguous()
                                           and tuple(reference.shape) == tuple(orig.shape)
                                           and reference.device == orig.device))


def fused_structure_sums(cand: Any, orig: Any, group: int | None, reference: Any | None = None,
                         force: bool = False) -> StructureSums | None:
    """The sums over ``cand - orig`` (and against ``reference``), rows of ``group`` consecutive elements
    when given; None where the eager path must compute them."""
    if not applies(cand, orig, reference, force):
        return None
    import torch
    import triton

    numel = cand.numel()
    long_rows, short_rows = _kernels()
    c, o = cand.reshape(-1), orig.reshape(-1)
    r = reference.reshape(-1) if reference is not None else o
    row_figures = None
    if group is None or group > BLOCK:
        width = group or numel
        rows, pieces = numel // width, triton.cdiv(width, BLOCK)
        partials = torch.empty((rows * pieces, len(PARTIALS)), dtype=torch.float64, device=c.device)
        long_rows[(rows * pieces,)](c, o, r, partials, width, pieces, HAS_REF=reference is not None, BLOCK=BLOCK)
        if group is not None:
            by_row = partials.view(rows, pieces, len(PARTIALS))
            row_figures = (by_row[:, :, 1].sum(1), by_row[:, :, 0].sum(1))
    else:
        rows = numel // group
        width = triton.next_power_of_2(group)
        per_program = max(1, BLOCK // width)
        programs = triton.cdiv(rows, per_program)
        partials = torch.empty((programs, len(PARTIALS)), dtype=torch.float64, device=c.device)
        row_out = torch.empty((rows, 2), dtype=torch.float64, device=c.device)
        short_rows[(programs,)](c, o, r, partials, row_out, rows, group, HAS_REF=reference is not None,
                                ROWS=per_program, WIDTH=width)
        row_figures = (row_out[:, 0], row_out[:, 1])
    sums = _merged(partials, row_figures)
    if reference is None:  # the errors against a reference mean nothing against the original itself
        sums.sum_orig_err = sums.sum_cand_err = sums.sum_abs_orig_err = sums.worst_orig = 0.0
    return sums


def _merged(partials: Any, row_figures: tuple[Any, Any] | None) -> StructureSums:
    """Chan's parallel merge of the programs' (count, sum, m2), the other sums and maxima, and the spread
    of the row means, on the device; one read back."""
    import torch

    n, total, m2 = partials[:, 0], partials[:, 1], partials[:, 2]
    count = n.sum()
    mean = total.sum() / count.clamp_min(1.0)
    merged_m2 = m2.sum() + (n * (total / n.clamp_min(1.0) - mean) ** 2).sum()
    figures = [count, mean, merged_m2, partials[:, 3].max(), partials[:, 4].max(), partials[:, 5].sum(),
               partials[:, 6].sum(), partials[:, 7].sum(), partials[:, 8].sum(), partials[:, 9].max()]
    if row_figures is not None:
        row_sum, row_count = row_figures
        present = row_count > 0
        groups = present.sum().to(torch.float64)
        means = (row_sum / row_count.clamp_min(1.0)).masked_fill_(~present, 0.0)
        centre = means.sum() / groups.clamp_min(1.0)
        spread = (means - centre).masked_fill_(~present, 0.0)
        figures += [groups, torch.dot(spread, spread)]
    numbers = torch.stack(figures).tolist()
    sums = StructureSums(int(numbers[0]), numbers[1], numbers[2], numbers[3], numbers[4], numbers[5],
                         sum_orig_err=numbers[6], sum_cand_err=numbers[7], sum_abs_orig_err=numbers[8],
                         worst_orig=numbers[9])
    if row_figures is not None:
        sums.present_rows, sums.row_spread_squares = int(numbers[10]), numbers[11]
    return sums


__all__ = ["BLOCK", "PARTIALS", "StructureSums", "applies", "fused_structure_sums"]
