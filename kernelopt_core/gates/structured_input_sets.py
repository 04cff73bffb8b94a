"""Structured input sets, drawn per input: the shapes a fast path keys on, and a magnitude sweep.

A candidate that takes a shortcut when one input has some property (a block all positive, a row
sorted, a row equal to the previous one, a row that leads with its maximum, a sparse row, a value
equal to one of its constants, a magnitude past a threshold) is wrong only where the property holds.
Random normal inputs almost never have it; these input sets (:data:`STRUCTURED_INPUT_SETS`) make it
common, each in a random subset of blocks or rows chosen by the seed. Gate 2 fills every floating
input with its own seed, so every mix of "has it" and "has it not" across inputs occurs somewhere.
The magnitude sweep has no tolerance of its own: gate 2 compares it against the original's own
rounding at each scale (:func:`.error_structure.windowed_floor_check`). The sets, one by one:
docs/gates.md, "The input sets". Values depend only on the seed, the set and the flat index (as
:mod:`.input_sets`'s). Worker-side: torch is imported inside the functions only.
"""

from __future__ import annotations

import ast
import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from .input_sets import (
    INPUT_SETS,
    FillContext,
    InputSet,
    _hash_normal,
    _hash_uniform,
    _normal,
    _per_row,
    _uniform,
    input_sets_for,
    near_max_headroom,
    per_key,
    zero_block_size,
)

# Rows share a magnitude in groups of this many, so that consecutive outputs of a reduction (one per row)
# share a scale too: the sweep's floor is taken over windows of this many consecutive outputs.
SWEEP_GROUP_ROWS = 8
SWEEP_LOW, SWEEP_HIGH = 1e-30, 1e30
# Pointwise kernels: a scale per segment of this many elements (of the last dimension), so that a 1-D
# tensor still meets many scales.
SWEEP_POINTWISE_SEGMENT = 256
DENORMAL_EVERY = 11  # one group of rows in this many is denormal
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _index(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    return torch.arange(start, start + count, device=ctx.device, dtype=torch.int64)


def _columns(ctx: FillContext, start: int, count: int) -> Any:
    return _index(ctx, start, count) % ctx.row_length


def _row_uniform(ctx: FillContext, start: int, count: int, salt: int) -> Any:
    """A uniform (0, 1) value per row, hashed once per row (float64)."""
    return _per_row(ctx, start, count, lambda rows: _hash_uniform(rows, ctx.seed, salt))


def _row_kind(ctx: FillContext, start: int, count: int, salt: int, kinds: int) -> Any:
    """Which of ``kinds`` kinds each element's row is (float64 0.0, 1.0, ...)."""
    return _per_row(ctx, start, count, lambda rows: (_hash_uniform(rows, ctx.seed, salt) * kinds).floor())


# Per-element randomness comes from the seeded blocks of :func:`.input_sets._normal`/``_uniform`` (one
# pass each); per-row and per-block choices are hashed once per row or block (:func:`.input_sets.per_key`).


def _sign_blocks(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    magnitude = _normal(ctx, start, count, 21).abs()
    kind = per_key(ctx, start, count, zero_block_size(ctx.numel),  # 0 positive, 1 negative, 2 mixed
                   lambda blocks: (_hash_uniform(blocks, ctx.seed, 22) * 3).floor())
    if ctx.numel // ctx.row_length >= 4:  # whole rows of one sign in the mixed blocks: a 2-D tile lies in rows
        row_kind = _row_kind(ctx, start, count, 23, 4)
        kind = torch.where((kind == 2) & (row_kind < 2), row_kind, kind)
    mixed = torch.where(_uniform(ctx, start, count, 0.0, 1.0, 24) < 0.5, -1.0, 1.0).to(ctx.compute_dtype)
    sign = torch.where(kind == 0, 1.0, torch.where(kind == 1, -1.0, mixed)).to(ctx.compute_dtype)
    return sign * magnitude


def _sorted_rows(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    column = _columns(ctx, start, count)
    kind = _row_kind(ctx, start, count, 31, 3)  # 0 increasing, 1 decreasing, 2 random
    base = _per_row(ctx, start, count, lambda rows: _hash_normal(rows, ctx.seed, 32))
    spread = 1.0 + 3.0 * _row_uniform(ctx, start, count, 33)
    curve = 0.5 + 1.5 * _row_uniform(ctx, start, count, 34)
    # strictly increasing positions in (0, 1): the jitter stays below half a step
    jitter = _uniform(ctx, start, count, 0.0, 0.5, 35).to(torch.float64)
    t = (column.to(torch.float64) + jitter) / ctx.row_length
    shape = t + curve * t * t
    direction = torch.where(kind == 1, -1.0, 1.0).to(torch.float64)
    monotone = (base + direction * spread * shape).to(ctx.compute_dtype)
    return torch.where(kind == 2, _normal(ctx, start, count, 36), monotone)


def _previous_row(ctx: FillContext, start: int, count: int, salt: int) -> Any:
    """The values ``_normal(.., salt)`` holds one row earlier for each element (the first row's: zeros)."""
    import torch

    earlier = start - ctx.row_length
    if earlier >= 0:
        return _normal(ctx, earlier, count, salt)
    before = min(count, -earlier)  # elements of the first row: no row before them
    rest = _normal(ctx, 0, count - before, salt) if count > before else None
    zeros = torch.zeros(before, device=ctx.device, dtype=ctx.compute_dtype)
    return zeros if rest is None else torch.cat([zeros, rest])


def _repeated_rows(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    column = _columns(ctx, start, count)
    # per pair of rows: 0 the second repeats the first, 1 all but one element, 2 independent
    second = _per_row(ctx, start, count, lambda rows: rows % 2 == 1)
    kind = per_key(ctx, start, count, 2 * ctx.row_length,
                   lambda pairs: (_hash_uniform(pairs, ctx.seed, 41) * 3).floor())
    changed = per_key(ctx, start, count, 2 * ctx.row_length,
                      lambda pairs: (_hash_uniform(pairs, ctx.seed, 43) * ctx.row_length).floor().to(torch.int64))
    own = _normal(ctx, start, count, 42)
    values = torch.where(second & (kind < 2), _previous_row(ctx, start, count, 42), own)
    bump = 1.0 + _normal(ctx, start, count, 44).abs()
    return torch.where(second & (kind == 1) & (column == changed), values + bump, values)


LEADING_LARGE = 6.0  # the rest of a leading-max row stays within +-LEADING_REST
LEADING_REST = 5.5


def _leading_max_rows(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    column = _columns(ctx, start, count)
    # 0 leads with its maximum, 1 several leading elements above the rest, 2 those but the last larger
    # still, 3 random
    kind = _row_kind(ctx, start, count, 51, 4)
    leading = _per_row(ctx, start, count, lambda rows: torch.where(
        (_hash_uniform(rows, ctx.seed, 51) * 4).floor() == 0, 1,
        1 + (_hash_uniform(rows, ctx.seed, 52) * min(ctx.row_length, 32)).floor().to(torch.int64)))
    rest = _normal(ctx, start, count, 53)
    large = LEADING_LARGE + _normal(ctx, start, count, 54).abs()
    values = torch.where((kind < 3) & (column < leading), large, rest.clamp(-LEADING_REST, LEADING_REST))
    last = (kind == 2) & (column == ctx.row_length - 1) & (column >= leading)
    return torch.where(last, large + 2 * LEADING_LARGE, values)


def _sparse_rows(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    column = _columns(ctx, start, count)
    kind = _row_kind(ctx, start, count, 61, 4)  # 0 empty, 1 one element, 2 1/64, 3 1/8
    only = _per_row(ctx, start, count,
                    lambda rows: (_hash_uniform(rows, ctx.seed, 62) * ctx.row_length).floor().to(torch.int64))
    draw = _uniform(ctx, start, count, 0.0, 1.0, 63)
    keep = torch.where(kind == 1, column == only,
                       torch.where(kind == 2, draw < 1 / 64, (kind == 3) & (draw < 1 / 8)))
    values = _normal(ctx, start, count, 64)
    return torch.where(keep, values, torch.zeros_like(values))


# --- values at and beside the candidate's constants ---------------------------------------------------


def _ulp(value: float, eps: float, tiny: float) -> float:
    if value == 0.0 or not math.isfinite(value):
        return tiny * eps
    return max(2.0 ** math.floor(math.log2(abs(value))) * eps, tiny * eps)


def constant_values(constants: Iterable[float], eps: float, tiny: float, largest: float) -> list[float]:
    """Each constant, one ulp (of the dtype) above and below it, its negation, and near misses 1e-3
    away: the values a comparison with it (``x == c``, ``x < c``, bits equal to c's) turns on."""
    out: list[float] = []
    seen: set[str] = set()  # by text: 0.0 and -0.0 are equal, and a switch may key on the sign of a zero
    for c in constants:
        if not math.isfinite(c):
            continue
        ulp = _ulp(c, eps, tiny)
        for v in (c, c + ulp, c - ulp, -c, -c + ulp, -c - ulp, c * (1 + 1e-3), c * (1 - 1e-3)):
            if abs(v) <= largest and repr(v) not in seen:
                seen.add(repr(v))
                out.append(v)
    return out


def _constants(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    # zero always: +0.0 and -0.0 (``copysign(1, x)`` tells them apart with no comparison), and the smallest
    # denormals beside them
    values = constant_values([*ctx.constants, 0.0], ctx.eps, ctx.tiny, ctx.max)
    table = torch.tensor(values, device=ctx.device, dtype=torch.float64)
    block = zero_block_size(ctx.numel) // 8 or 1
    # per block: 0 every element one table value, 1 each element its own table value, 2 random values
    # with a quarter of the elements from the table
    kind = per_key(ctx, start, count, block, lambda blocks: (_hash_uniform(blocks, ctx.seed, 71) * 3).floor())
    per_block = per_key(ctx, start, count, block,
                        lambda blocks: (_hash_uniform(blocks, ctx.seed, 72) * len(values)).floor().to(torch.int64))
    # element by element through the whole table (from a seeded start): every value is drawn, however many
    shift = int(_hash_uniform(torch.zeros(1, dtype=torch.int64), ctx.seed, 73) * len(values))
    per_element = (_index(ctx, start, count) + shift) % len(values)
    chosen = torch.where(kind == 0, per_block, per_element).clamp(max=len(values) - 1)
    picked = table[chosen].to(ctx.compute_dtype)
    random = _normal(ctx, start, count, 74)
    from_table = (kind < 2) | (_uniform(ctx, start, count, 0.0, 1.0, 75) < 0.25)
    return torch.where(from_table, picked, random)


MAX_CONSTANTS = 32


def literal_constants(source: str, exclude: Iterable[float] = ()) -> list[float]:
    """The numeric literals of a kernel's source, floats first, each integer also read as a float32 bit
    pattern where that is a normal float (``x.to(tl.int32, bitcast=True) == 0x3F800000``); at most
    :data:`MAX_CONSTANTS`, those not in ``exclude`` (the original's own) first. A stand-in until gate 1
    lists the constants a candidate's added decisions compare with; unparsable source gives none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    floats: list[float] = []
    integers: list[float] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
            continue
        if isinstance(node.value, float):
            floats.append(node.value)
        elif isinstance(node.value, int):
            integers.append(float(node.value))
            if 0x00800000 <= node.value < 0x7F800000:
                integers.append(struct.unpack("<f", struct.pack("<I", node.value))[0])
    known = set(exclude)
    ordered = list(dict.fromkeys(v for v in floats + integers if math.isfinite(v)))
    fresh = [v for v in ordered if v not in known]
    return (fresh + [v for v in ordered if v in known])[:MAX_CONSTANTS]


# --- the magnitude sweep -------------------------------------------------------------------------------


def sweep_range(ctx: FillContext) -> tuple[float, float]:
    """log10 of the smallest and largest scale: 1e-30..1e30 within the dtype's normal range (a sum of
    1024 values at the top scale stays finite)."""
    low = max(SWEEP_LOW, ctx.tiny * 16)
    high = min(SWEEP_HIGH, ctx.max / near_max_headroom(ctx.max) / 8)
    return math.log10(low), math.log10(high)


def sweep_segment(ctx: FillContext) -> int:
    """Elements that share one scale: a group of rows for a reduction, a segment of a row otherwise."""
    if ctx.row_length > SWEEP_POINTWISE_SEGMENT:
        return ctx.row_length * SWEEP_GROUP_ROWS if ctx.reduction else SWEEP_POINTWISE_SEGMENT
    return ctx.row_length * SWEEP_GROUP_ROWS


# Scales each sweep meets however small the tensor: more draws when it has fewer groups, continuing one
# low-discrepancy sequence, so that 48 scales over 60 decades leave no gap of 1.3 decades; draws stop at
# SWEEP_DRAW_ELEMENTS elements in all (a large tensor has groups enough in one draw).
SWEEP_MIN_SCALES = 48
SWEEP_DRAW_ELEMENTS = 1 << 21


def sweep_draws(numel: int, row_length: int, reduction: bool) -> int:
    """How many draws of the magnitude sweep a tensor needs to meet SWEEP_MIN_SCALES scales: one scale per group
    (sweep_segment), so five rows of a layer norm meet one scale per draw, and a band of two decades between 1e-30
    and 1e30 is met by one draw in thirty."""
    if row_length > SWEEP_POINTWISE_SEGMENT:
        segment = row_length * SWEEP_GROUP_ROWS if reduction else SWEEP_POINTWISE_SEGMENT
    else:
        segment = row_length * SWEEP_GROUP_ROWS
    groups = max(1, -(-max(1, numel) // max(1, segment)))
    return max(1, min(-(-SWEEP_MIN_SCALES // groups), SWEEP_DRAW_ELEMENTS // max(1, numel)))


def sweep_groups(numel: int, row_length: int, reduction: bool) -> int:
    """Groups of one scale in one draw of a sweep (sweep_segment)."""
    if row_length > SWEEP_POINTWISE_SEGMENT:
        segment = row_length * SWEEP_GROUP_ROWS if reduction else SWEEP_POINTWISE_SEGMENT
    else:
        segment = row_length * SWEEP_GROUP_ROWS
    return max(1, -(-max(1, numel) // max(1, segment)))


def sweep_draw(input_set: InputSet, first_group: int, draw: int, total: int) -> InputSet:
    """A further draw of a sweep: its groups are ``first_group`` on of ``total`` groups over all further draws,
    each at the centre of its own stratum of the range (no denormal groups: the first draw has those), so that
    the draws together leave no gap wider than one stratum."""
    from functools import partial

    values = partial(_SWEEP_FILLS[input_set.name], first_group=first_group, total=total)
    return InputSet(input_set.name, f"{input_set.label} (draw {draw})", values, error_structure=False)


def _magnitude_sweep(ctx: FillContext, start: int, count: int, first_group: int = 0, total: int = 0) -> Any:
    import torch

    segment = sweep_segment(ctx)
    low, high = sweep_range(ctx)
    # a low-discrepancy sequence (golden-ratio steps from a seeded start, jittered): any few consecutive
    # groups spread over the whole range, so a small tensor meets large and small magnitudes too
    offset = float(_hash_uniform(torch.zeros(1, dtype=torch.int64), ctx.seed, 81))

    def group_scale(group: Any) -> Any:
        position = _position(group, first_group, total, offset, ctx.seed, 82)
        scale = torch.pow(10.0, low + (high - low) * position)
        denormal = ((group + int(offset * DENORMAL_EVERY)) % DENORMAL_EVERY == 0) & (total == 0)
        return torch.where(denormal, 0.0, scale)  # 0: the group is denormal

    scale = per_key(ctx, start, count, segment, group_scale)
    values = _normal(ctx, start, count, 82).to(torch.float64) * scale
    tiny = ctx.tiny * (0.01 + 0.98 * _uniform(ctx, start, count, 0.0, 1.0, 84).to(torch.float64))
    tiny = torch.where(_uniform(ctx, start, count, 0.0, 1.0, 85) < 0.5, -tiny, tiny)
    return torch.where(scale == 0, tiny, values).to(ctx.compute_dtype)


def _position(group: Any, first_group: int, total: int, offset: float, seed: int, salt: int) -> Any:
    """Where a group's scale lies in the sweep's range, in [0, 1): a low-discrepancy sequence from a seeded
    start (the first draw), or the centre of stratum ``first_group + group`` of ``total`` (further draws)."""
    import torch

    if total:
        return torch.frac(offset + ((group + first_group).to(torch.float64) + 0.5) / total)
    return torch.frac(offset + group.to(torch.float64) * _GOLDEN + 0.05 * _hash_uniform(group, seed, salt))


def _offset_sweep(ctx: FillContext, start: int, count: int, first_group: int = 0, total: int = 0) -> Any:
    """Rows of a common offset at a log-uniform magnitude per group (1e2 to 1e30, either sign) and a relative
    spread of 1e-1 to 1e-3 (ten thousand ulps at least: with less, a mean rounded once more, ``sum * 0.001`` for
    ``sum / 1000``, moves a norm's outputs past the original's own rounding floor, as on low-variance rows): a
    kernel that is invariant to a shift (a softmax, a norm) sees only the spread, so a
    precision drop keyed on the magnitude shows there and not in the sweep's zero-centred rows, whose spread is
    their magnitude."""
    import torch

    segment = sweep_segment(ctx)
    low, high = sweep_range(ctx)
    # offsets from 100 up: below it a norm's eps, not the rows' spread, sets its outputs, and a reworded mean
    # moves them past a floor that one-ulp moves of the inputs do not (a softmax of rows that close is uniform)
    low = max(low, min(OFFSET_SWEEP_LOW, high - 1.0))
    start_at = float(_hash_uniform(torch.zeros(1, dtype=torch.int64), ctx.seed, 91))

    def group_offset(group: Any) -> Any:
        position = _position(group, first_group, total, start_at, ctx.seed, 92)
        sign = torch.where(_hash_uniform(group, ctx.seed, 93) < 0.5, -1.0, 1.0).to(torch.float64)
        return sign * torch.pow(10.0, low + (high - low) * position)

    def group_spread(group: Any) -> Any:
        return torch.pow(10.0, -1.0 - 2.0 * _hash_uniform(group + first_group, ctx.seed, 94))

    centre = per_key(ctx, start, count, segment, group_offset)
    spread = per_key(ctx, start, count, segment, group_spread)
    values = centre + centre.abs() * spread * _normal(ctx, start, count, 95).to(torch.float64)
    return values.clamp(-ctx.max, ctx.max).to(ctx.compute_dtype)


OFFSET_SWEEP_LOW = 2.0  # log10 of the smallest offset the offset sweep draws


# The sets that meet many magnitudes: every candidate gets them (a precision drop needs no decision).
SWEEPS = ("magnitude-sweep", "offset-sweep")
_SWEEP_FILLS = {"magnitude-sweep": _magnitude_sweep, "offset-sweep": _offset_sweep}

STRUCTURED_INPUT_SETS: dict[str, InputSet] = {f.name: f for f in (
    InputSet("sign-blocks", "blocks and rows all positive, all negative or mixed", _sign_blocks),
    InputSet("sorted-rows", "rows sorted increasing, decreasing or not", _sorted_rows),
    InputSet("repeated-rows", "rows equal to the previous row (or all but one element)", _repeated_rows),
    InputSet("leading-max-rows", "rows that lead with their maximum", _leading_max_rows),
    InputSet("sparse-rows", "sparse rows (none, one, 1/64 or 1/8 non-zero)", _sparse_rows),
    InputSet("constants", "values at and one ulp beside the candidate's constants", _constants,
                error_structure=False),
    InputSet("magnitude-sweep", "a log-uniform magnitude per group of rows, 1e-30 to 1e30, and denormals",
                _magnitude_sweep, error_structure=False),
    InputSet("offset-sweep", "rows of a common offset at a log-uniform magnitude per group and a small spread",
             _offset_sweep, error_structure=False),
)}


def input_set_named(name: str) -> InputSet:
    """An input set of :data:`.input_sets.INPUT_SETS` or of :data:`STRUCTURED_INPUT_SETS`."""
    if name in INPUT_SETS:
        return INPUT_SETS[name]
    if name in STRUCTURED_INPUT_SETS:
        return STRUCTURED_INPUT_SETS[name]
    raise KeyError(f"no input set named {name!r}")


def adds_decisions(given: bool | None, original: str = "", candidate: str = "") -> bool:
    """Whether the candidate may take a path its original does not: ``given`` (the payload's pin) when not None,
    else read from the two sources: it adds a listed decision on data (:func:`.decisions.added_decisions`), or any
    of its kernel bodies differs from the original's (:func:`.decisions.jit_bodies_differ`: a switch needs no
    listed decision, ``rsqrt(1 + (k (x - c))^2)`` or ``(k d + 1) - k d`` are switches too). The structured input
    sets and the aliasing run go only to such candidates: a change of launch configuration alone is spared them.
    Unknown (no sources, or sources that do not parse) counts as yes."""
    if given is not None:
        return given
    if not original or not candidate:
        return True
    import ast

    from .decisions import added_decisions, jit_bodies_differ

    try:
        ast.parse(candidate)
        return bool(added_decisions(original, candidate).added) or jit_bodies_differ(original, candidate)
    except (SyntaxError, ValueError):
        return True


def candidate_constants(given: Sequence[float] | None, candidate: str, original: str) -> tuple[float, ...]:
    """The constants the ``constants`` input set draws at and beside: ``given`` (the payload's pin: gate 1's,
    those the candidate's added decisions compare with) or else the values the candidate computes from its
    constants and the original does not, then its literals, its own first."""
    if given is not None:
        return tuple(float(c) for c in given)
    from .decisions import computed_constants

    literals = literal_constants(candidate, exclude=literal_constants(original))
    # values the candidate computes from its constants (a loop that sums 0.25 three times) and the original does
    # not: a threshold no literal shows
    known = set(computed_constants(original)) | set(literals)
    computed = [c for c in computed_constants(candidate) if c not in known]
    return tuple(dict.fromkeys([*computed[:MAX_CONSTANTS // 4], *literals]))[:MAX_CONSTANTS]


def structured_input_sets_for(dtype: Any, constants: Iterable[float] = ()) -> list[InputSet]:
    """The structured input sets for a tensor of ``dtype`` (none for integer and boolean tensors); the
    constants input set only when there are constants."""
    if not input_sets_for(dtype, True):  # not floating
        return []
    return [f for f in STRUCTURED_INPUT_SETS.values() if f.name != "constants" or list(constants)]


__all__ = ["STRUCTURED_INPUT_SETS", "SWEEPS", "SWEEP_GROUP_ROWS", "SWEEP_MIN_SCALES", "adds_decisions", "candidate_constants",
           "constant_values", "input_set_named", "literal_constants", "structured_input_sets_for", "sweep_draw",
           "sweep_draws", "sweep_groups", "sweep_range"]
