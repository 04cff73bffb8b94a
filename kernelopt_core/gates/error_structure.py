"""Error structure, not only size: a systematic bias, and the worst element against a rounding floor.

``atol``/``rtol`` bound each element's error, but accept an error that is small and always of one
sign, or small per element where it matters downstream. :func:`error_structure` reports two more
figures and rejects when either is too large:

* the bias, ``mean(candidate - original)``, when it is both significant (``BIAS_Z`` standard errors
  across rows) and large (``BIAS_FACTOR`` x the original's own error, floored at a rounding unit);
* the worst element, ``max |candidate - reference|``, beyond ``ELEMENT_FACTOR`` x the original's worst
  error (floored at a rounding unit of the output's magnitude, grown with the reduction length).

Gate 3 passes the float64 reference; gate 2, which has none, passes the original's output and the
inputs' largest magnitude. Chunked; worker-side (torch is imported inside). The references, floors
and the calibration of the thresholds: docs/design-notes.md, "gates/error_structure.py".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .chunks import DEFAULT_CHUNK, aligned_flat, flat_pieces, read_flat

if TYPE_CHECKING:
    from .fused_structure import StructureSums

ELEMENT_FACTOR = 10.0
BIAS_FACTOR = 4.0
BIAS_Z = 5.0
MIN_ROWS = 3


@dataclass
class ErrorStructure:
    passed: bool
    reason: str
    reference: str  # "float64" (gate 3) or "original" (gate 2)
    count: int  # elements finite in candidate, original (and reference)
    rows: int  # groups the bias' standard error is taken over
    bias: float  # mean(candidate - original)
    bias_z: float  # bias / its standard error
    bias_scale: float  # the error scale the bias is measured in
    bias_ratio: float  # |bias| / bias_scale
    original_mean_error: float | None  # mean(original - reference), gate 3
    candidate_mean_error: float | None  # mean(candidate - reference), gate 3
    worst_error: float  # max |candidate - reference|
    worst_original_error: float  # max |original - reference| (0 in gate 2)
    element_floor: float
    worst_ratio: float  # worst_error / max(worst_original_error, element_floor)
    element_factor: float = ELEMENT_FACTOR
    bias_factor: float = BIAS_FACTOR
    bias_z_limit: float = BIAS_Z

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


class _Moments:
    """Chan's parallel mean/variance over chunks (float64)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, n: int, mean: float, m2: float) -> None:
        if n == 0:
            return
        total = self.n + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.n * n / total
        self.n = total

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0


def error_structure(candidate: Any, original: Any, reference: Any | None = None, *, row_length: int | None = None,
                    input_scale: float | None = None, chunk: int = DEFAULT_CHUNK,
                    sensitivity: tuple[float, float] | None = None,
                    reduction_length: int | None = None) -> ErrorStructure:
    """Bias and worst-element checks of ``candidate`` against ``original`` (and ``reference``, float64).

    All three have one shape; ``row_length``: outputs that share one reduction (the kernel's
    ``r0_numel`` when its output keeps the reduced dimension), None for independent outputs. When
    that is not known (gate 3, at the graph's outputs), pass the output's last dimension: grouping
    independent outputs only costs significance, not grouping correlated ones costs false rejections.
    Non-finite elements are skipped (their positions are checked by :func:`.input_sets.compare_outputs`).
    ``sensitivity``: (max, mean) of |original(inputs moved by one ulp) - original(inputs)| (gate 2): how far
    rounding alone moves the original's outputs, which floors the element and bias scales where the
    outputs amplify rounding (a layer norm of rows at mean 1000 with weights of 1000).
    ``reduction_length``: how many terms each output reduces (gate 2: the kernel's ``r0_numel``): a
    reduction's outputs rarely keep the reduced dimension (one mean per group of a group norm), and their
    rounding grows with the terms all the same; given, the bias's rounding unit grows by its fourth root
    (what a reordering shares across rows grows more slowly than its size), not the square root.
    """

    if tuple(candidate.shape) != tuple(original.shape) or (
            reference is not None and tuple(reference.shape) != tuple(original.shape)):
        raise ValueError("candidate, original and reference must have one shape")
    if not original.dtype.is_floating_point:
        raise ValueError(f"error structure is for floating outputs, not {original.dtype}")
    if reference is None:
        return _against_original(candidate, original, row_length=row_length, input_scale=input_scale, chunk=chunk,
                                 sensitivity=sensitivity, reduction_length=reduction_length)
    from .fused_structure import fused_structure_sums

    eps, numel, use_rows, group, growth = _output_layout(original, row_length, reduction_length)
    bias_growth = math.sqrt(growth) if reduction_length else growth
    sums = fused_structure_sums(candidate, original, group if use_rows else None, reference)
    if sums is None:
        sums = _eager_reference_sums(candidate, original, reference, use_rows, group, numel, chunk)
    count = sums.count
    if count == 0:
        return ErrorStructure(True, "no element is finite in both outputs (positions are compared elsewhere)",
                              "float64", 0, 0, 0.0, 0.0, 0.0, 0.0, None, None, 0.0, 0.0, 0.0, 0.0)
    bias = sums.mean
    element_spread = math.sqrt(sums.m2 / (count - 1)) if count > 1 else 0.0
    groups, spread = count, element_spread
    if use_rows and sums.present_rows >= MIN_ROWS:
        groups, spread = sums.present_rows, math.sqrt(sums.row_spread_squares / (sums.present_rows - 1))
    standard_error = spread / math.sqrt(groups) if groups > 0 else 0.0
    bias_z = bias / standard_error if standard_error > 0 else (math.inf if bias else 0.0)
    # The bias is measured against the output's own rounding unit: rounding inherited from large inputs
    # is random in sign, and the significance test across rows absorbs what it shares within a row.
    sensitive_max, sensitive_mean = sensitivity or (0.0, 0.0)
    bias_scale = max(sums.sum_abs_orig_err / count, eps * (sums.sum_abs_ref / count) * bias_growth, sensitive_mean,
                     1e-300)
    bias_ratio = abs(bias) / bias_scale
    element_floor = max(eps * max(sums.max_abs_ref, max(input_scale or 0.0, 0.0)) * growth, sensitive_max, 1e-300)
    worst_ratio = sums.worst / max(sums.worst_orig, element_floor)
    return _judged(bias, bias_z, bias_scale, bias_ratio, sums.worst, sums.worst_orig, element_floor, worst_ratio,
                   count, groups, "float64", sums.sum_orig_err / count, sums.sum_cand_err / count, sensitive_max)


def _eager_reference_sums(candidate: Any, original: Any, reference: Any, use_rows: bool, group: int, numel: int,
                          chunk: int) -> StructureSums:
    """:class:`.fused_structure.StructureSums` against a float64 reference, one chunk at a time in float64
    (any dtype, layout and device: a reference built on the host meets the outputs a chunk at a time)."""
    import torch

    from .fused_structure import StructureSums

    rows = numel // group if numel else 0
    device = original.device
    row_sum = torch.zeros(rows if use_rows else 0, dtype=torch.float64, device=device)
    row_count = torch.zeros(rows if use_rows else 0, dtype=torch.float64, device=device)
    diff_moments = _Moments()
    sum_orig_err = sum_cand_err = sum_abs_orig_err = sum_abs_ref = 0.0
    worst = worst_orig = max_abs_ref = 0.0
    for start, pieces in aligned_flat([candidate, original, reference], chunk):
        c = pieces[0].to(torch.float64)
        o = pieces[1].to(device=c.device, dtype=torch.float64)
        r = pieces[2].to(device=c.device, dtype=torch.float64)
        finite = torch.isfinite(c) & torch.isfinite(o) & torch.isfinite(r)
        n = int(finite.sum())
        if n == 0:
            continue
        if n < c.numel():  # non-finite elements count as equal here: zero them in all three
            zero = torch.zeros_like(c)
            c, o, r = torch.where(finite, c, zero), torch.where(finite, o, zero), torch.where(finite, r, zero)
        d = c - o
        mean = float(d.sum()) / n
        centred = torch.where(finite, d - mean, torch.zeros_like(d)) if n < c.numel() else d - mean
        diff_moments.add(n, mean, float((centred * centred).sum()))
        e_c = c - r
        e_o = o - r
        ref_abs = r.abs()
        sum_orig_err += float(e_o.sum())
        sum_cand_err += float(e_c.sum())
        sum_abs_orig_err += float(e_o.abs().sum())
        sum_abs_ref += float(ref_abs.sum())
        worst = max(worst, float(e_c.abs().max()))
        worst_orig = max(worst_orig, float(e_o.abs().max()))
        max_abs_ref = max(max_abs_ref, float(ref_abs.max()))
        if use_rows:  # by reshaped rows: an index_add_ over few long rows serialises on its atomics
            _add_by_rows(row_sum, d, start, group)
            _add_by_rows(row_count, finite, start, group)
    sums = StructureSums(diff_moments.n, diff_moments.mean, diff_moments.m2, worst, max_abs_ref, sum_abs_ref,
                         sum_orig_err=sum_orig_err, sum_cand_err=sum_cand_err, sum_abs_orig_err=sum_abs_orig_err,
                         worst_orig=worst_orig)
    if use_rows:
        present = row_count > 0
        means = row_sum[present] / row_count[present]
        sums.present_rows = int(present.sum())
        sums.row_spread_squares = float(((means - means.mean()) ** 2).sum()) if sums.present_rows else 0.0
    return sums


def _judged(bias: float, bias_z: float, bias_scale: float, bias_ratio: float, worst: float, worst_orig: float,
            element_floor: float, worst_ratio: float, count: int, groups: int, reference_name: str,
            original_mean_error: float | None, candidate_mean_error: float | None,
            sensitive_max: float) -> ErrorStructure:
    problems = []
    if worst_ratio > ELEMENT_FACTOR:
        problems.append(f"an element's error {worst:.3g} is {worst_ratio:.1f}x the "
                        + (f"original's worst error {worst_orig:.3g}" if worst_orig >= element_floor
                           else f"rounding floor {element_floor:.3g}"
                           + (" (the original's own change under one ulp of input rounding)"
                              if element_floor == sensitive_max else ""))
                        + f" (limit {ELEMENT_FACTOR:g}x)")
    if bias_ratio > BIAS_FACTOR and abs(bias_z) > BIAS_Z:
        problems.append(f"a systematic bias: mean(candidate - original) = {bias:.3g}, {bias_ratio:.1f}x the error "
                        f"scale {bias_scale:.3g} (limit {BIAS_FACTOR:g}x) and {abs(bias_z):.1f} standard errors "
                        f"from 0 (limit {BIAS_Z:g})")
    figures = (f"bias {bias:.3g} ({bias_ratio:.2f}x scale, z {bias_z:.1f}); worst error {worst:.3g} "
               f"({worst_ratio:.2f}x) against the {reference_name} reference")
    return ErrorStructure(
        passed=not problems, reason="; ".join(problems) if problems else figures, reference=reference_name,
        count=count, rows=groups, bias=bias, bias_z=bias_z, bias_scale=bias_scale, bias_ratio=bias_ratio,
        original_mean_error=original_mean_error, candidate_mean_error=candidate_mean_error,
        worst_error=worst, worst_original_error=worst_orig, element_floor=element_floor, worst_ratio=worst_ratio)


def _against_original(candidate: Any, original: Any, *, row_length: int | None, input_scale: float | None,
                      chunk: int, sensitivity: tuple[float, float] | None,
                      reduction_length: int | None = None) -> ErrorStructure:
    """Gate 2's case (the reference is the original's output): the same figures as the general path,
    in fewer passes over memory. The original's own error is 0, so only ``d = candidate - original``
    and the original's magnitudes are needed: one fused pass on a GPU (:mod:`.fused_structure`), else
    float64 one chunk at a time."""
    from .fused_structure import fused_structure_sums

    eps, numel, use_rows, group, growth = _output_layout(original, row_length, reduction_length)
    sums = fused_structure_sums(candidate, original, group if use_rows else None)
    if sums is None:
        sums = _eager_sums(candidate, original, use_rows, group, numel, chunk)
    count = sums.count
    if count == 0:
        return ErrorStructure(True, "no element is finite in both outputs (positions are compared elsewhere)",
                              "original", 0, 0, 0.0, 0.0, 0.0, 0.0, None, None, 0.0, 0.0, 0.0, 0.0)
    bias = sums.mean
    groups, spread = count, (math.sqrt(sums.m2 / (count - 1)) if count > 1 else 0.0)
    if use_rows and sums.present_rows >= MIN_ROWS:
        groups = sums.present_rows
        spread = math.sqrt(sums.row_spread_squares / (sums.present_rows - 1))
    standard_error = spread / math.sqrt(groups) if groups > 0 else 0.0
    bias_z = bias / standard_error if standard_error > 0 else (math.inf if bias else 0.0)
    sensitive_max, sensitive_mean = sensitivity or (0.0, 0.0)
    # A reordering's rounding is random in sign from row to row (the significance test's business); what it
    # shares across rows grows more slowly than its size: the fourth root of the terms, not the square root,
    # which would forgive a norm's eps off by 10x (docs/gates.md, "Reordered reductions")
    bias_growth = math.sqrt(growth) if reduction_length else growth
    bias_scale = max(eps * (sums.sum_abs_ref / count) * bias_growth, sensitive_mean, 1e-300)
    bias_ratio = abs(bias) / bias_scale
    element_floor = max(eps * max(sums.max_abs_ref, max(input_scale or 0.0, 0.0)) * growth, sensitive_max, 1e-300)
    worst_ratio = sums.worst / element_floor
    return _judged(bias, bias_z, bias_scale, bias_ratio, sums.worst, 0.0, element_floor, worst_ratio, count, groups,
                   "original", None, None, sensitive_max)


def _eager_sums(candidate: Any, original: Any, use_rows: bool, group: int, numel: int, chunk: int) -> StructureSums:
    """:class:`.fused_structure.StructureSums` in float64 one chunk at a time (any dtype and layout): rows are
    summed by reshaping the chunk along row boundaries (no scattered atomics); every per-chunk figure stays
    on the device until one read at the end."""
    import torch

    from .fused_structure import StructureSums

    device = original.device
    rows = numel // group if use_rows else 0
    row_sum = torch.zeros(rows, dtype=torch.float64, device=device)
    row_count = torch.zeros(rows, dtype=torch.int64, device=device)
    counts, sums, squares = [], [], []
    worst = max_abs_ref = sum_abs_ref = torch.zeros((), dtype=torch.float64, device=device)
    wide_input = original.dtype == torch.float64
    for start, (c, o) in aligned_flat([candidate, original], chunk):
        d = torch.sub(c.to(torch.float64), o)
        # from float32 or narrower, d is finite exactly where both are (float64 cannot overflow on them)
        finite = torch.isfinite(c) & torch.isfinite(o) if wide_input else torch.isfinite(d)
        outside = ~finite
        d.masked_fill_(outside, 0.0)
        n = finite.sum()
        total = d.sum()
        counts.append(n)
        sums.append(total)
        centred = (d - total / n.clamp_min(1)).masked_fill_(outside, 0.0)
        squares.append(torch.dot(centred, centred))
        if use_rows:
            _add_by_rows(row_sum, d, start, group)
            _add_by_rows(row_count, finite, start, group)
        worst = torch.maximum(worst, d.abs_().max())
        magnitude = o.abs().masked_fill_(outside, 0.0)
        max_abs_ref = torch.maximum(max_abs_ref, magnitude.max().to(torch.float64))
        sum_abs_ref = sum_abs_ref + magnitude.sum(dtype=torch.float64)
    figures = [worst, max_abs_ref, sum_abs_ref]
    if use_rows:
        present = row_count > 0
        groups = present.sum()
        means = (row_sum / row_count.clamp_min(1)).masked_fill_(~present, 0.0)
        centre = means.sum() / groups.clamp_min(1)
        spread_rows = (means - centre).masked_fill_(~present, 0.0)
        figures += [groups.to(torch.float64), torch.dot(spread_rows, spread_rows)]
    chunks_read = len(counts)
    numbers = torch.stack([f.to(torch.float64) for f in figures + counts + sums + squares]).tolist()
    offset = 5 if use_rows else 3
    moments = _Moments()
    for k in range(chunks_read):
        n = int(numbers[offset + k])
        if n:
            moments.add(n, numbers[offset + chunks_read + k] / n, numbers[offset + 2 * chunks_read + k])
    result = StructureSums(moments.n, moments.mean, moments.m2, numbers[0], numbers[1], numbers[2])
    if use_rows:
        result.present_rows, result.row_spread_squares = int(numbers[3]), numbers[4]
    return result


def _output_layout(original: Any, row_length: int | None,
                   reduction_length: int | None) -> tuple[float, int, bool, int, float]:
    """(the dtype's eps, the element count, whether rows are summed, elements per row group, the
    rounding growth of the reduction): what both passes read of the original's output."""
    import torch

    numel = original.numel()
    row_group = _row_group(row_length, numel)
    return (float(torch.finfo(original.dtype).eps), numel, row_group is not None, row_group or 1,
            reduction_growth(reduction_length or row_length))


def _row_group(row_length: int | None, numel: int) -> int | None:
    """How many consecutive outputs share a row: ``row_length`` when the outputs are at least
    :data:`MIN_ROWS` whole rows of it; None when they are taken one at a time."""
    if row_length is not None and row_length > 0 and numel % row_length == 0 and numel // row_length >= MIN_ROWS:
        return row_length
    return None


def _add_by_rows(target: Any, values: Any, start: int, group: int) -> None:
    """``target[row] += sum of values in that row`` for the flat elements [start, start + len(values)),
    rows of ``group`` consecutive elements: a partial row at each end, whole rows by a reshape."""
    count = values.numel()
    head = min(count, (-start) % group)
    if head:
        target[start // group] += values[:head].sum()
    whole = (count - head) // group
    first = (start + head) // group
    if whole:
        target[first:first + whole] += values[head:head + whole * group].view(whole, group).sum(1)
    tail = values[head + whole * group:]
    if tail.numel():
        target[first + whole] += tail.sum()


# --- the magnitude sweep's floor ------------------------------------------------------------------------

# Consecutive outputs that share one input magnitude in the sweep (its rows share a scale in groups of 8,
# so the 8 outputs of 8 rows of a reduction, or 8 neighbours of a pointwise output, do).
MAGNITUDE_WINDOW = 8
MAGNITUDE_FACTOR = ELEMENT_FACTOR
# An element beyond its floor is wrong only where it also misses gate 3's relative tolerance against the
# original's value: a correct reordering (a windowed sum as prefix differences) may exceed a few rounding
# units of its magnitude on rare elements, while a precision drop (12 mantissa bits, bfloat16) exceeds both.
MAGNITUDE_RTOL = 1e-4


@dataclass
class MagnitudeFloor:
    """Per window of ``window`` consecutive outputs (logical order): how much the original's own outputs
    move there under one ulp of input rounding, floored at a rounding unit of their largest magnitude and
    at the dtype's smallest normal. An element may differ from the original by ``factor`` times its
    window's floor."""

    window: int
    values: Any  # 1-D, ceil(numel / window) floors, on the outputs' device
    factor: float = MAGNITUDE_FACTOR

    def limits(self, start: int, count: int) -> Any:
        """The allowed |candidate - original| of flat elements [start, start + count)."""
        import torch

        index = torch.arange(start, start + count, device=self.values.device, dtype=torch.int64) // self.window
        return self.values[index] * self.factor


def magnitude_floor(nudged: Any, original: Any, row_length: int | None, window: int = MAGNITUDE_WINDOW,
                    chunk: int = DEFAULT_CHUNK, fused: bool = True) -> MagnitudeFloor:
    """The floor of each window of outputs from the original's outputs (``original``) and its outputs on
    the inputs moved by one ulp (``nudged``): ``max(max |nudged - original|, eps x max |original| x
    growth(row_length), smallest normal)`` over the window. Both tensors have one shape; chunked (memory:
    a chunk plus one float per window)."""
    import torch

    info = torch.finfo(original.dtype)
    scale = float(info.eps) * reduction_growth(row_length)
    if fused:  # one pass on a GPU where it applies (fused_tally.py); the same floor
        from .fused_tally import fused_magnitude_floor

        in_one_pass = fused_magnitude_floor(nudged, original, window, scale, float(info.tiny))
        if in_one_pass is not None:
            return MagnitudeFloor(window, in_one_pass)
    work = torch.float64 if original.dtype == torch.float64 else torch.float32
    windows = -(-original.numel() // window)
    change = torch.zeros(windows, dtype=work, device=original.device)
    largest = torch.zeros(windows, dtype=work, device=original.device)
    for start, (n, o) in aligned_flat([nudged, original], chunk):
        n, o = n.to(work), o.to(work)
        finite = torch.isfinite(n) & torch.isfinite(o)
        index = torch.arange(start, start + o.numel(), device=o.device, dtype=torch.int64) // window
        difference = torch.where(finite, (n - o).abs(), torch.zeros_like(o))
        difference = torch.where(torch.isfinite(difference), difference, torch.zeros_like(o))
        change.scatter_reduce_(0, index, difference, "amax")
        largest.scatter_reduce_(0, index, torch.where(finite, o.abs(), torch.zeros_like(o)), "amax")
    floor = torch.maximum(change, largest * scale)
    return MagnitudeFloor(window, floor.clamp_min_(float(info.tiny)))


def reduction_growth(row_length: int | None) -> float:
    """How many rounding units of its magnitude a correct reordering of a reduction of ``row_length``
    terms may differ by (see :func:`error_structure`)."""
    return math.sqrt(row_length) if row_length and row_length > 1 else 1.0


def max_finite_magnitude(tensors: list[Any], chunk: int = DEFAULT_CHUNK) -> float:
    """The largest finite |value| among floating tensors (gate 2's ``input_scale``), chunked, in the
    tensors' own dtype (a maximum needs no wider one), read once."""
    import torch

    largest = None
    for tensor in tensors:
        if not tensor.dtype.is_floating_point or tensor.numel() == 0:
            continue
        for _, piece in flat_pieces(tensor, chunk):
            values = read_flat(piece).abs()  # a new tensor: the input itself is never touched
            values.masked_fill_(~torch.isfinite(values), 0)
            top = values.max().to(torch.float64)
            largest = top if largest is None else torch.maximum(largest, top.to(largest.device))
    return float(largest) if largest is not None else 0.0


__all__ = ["BIAS_FACTOR", "BIAS_Z", "ELEMENT_FACTOR", "MAGNITUDE_FACTOR", "ErrorStructure", "MagnitudeFloor",
           "error_structure", "magnitude_floor", "max_finite_magnitude", "reduction_growth", "MAGNITUDE_RTOL"]
