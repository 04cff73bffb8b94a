"""Input sets for gates 2 and 3: named, seeded inputs that find wrong kernels.

Random normal inputs never show a kernel that drops a norm's eps (constant rows), divides by N-1,
computes a one-pass variance (mean >> std), takes a softmax's row max over padded lanes (rows
below -60), drops NaN, skips blocks of zeros or misbehaves outside a value range. Each input set
here (:data:`INPUT_SETS`) fills a floating tensor **in place**, seeded, on the tensor's own device,
a bounded chunk at a time: gate 2 fills the kernel's captured floating inputs with it, gate 3 the
graph's inputs, and both compare the outputs under :func:`compare_outputs`. A *row* is
``row_length`` consecutive elements (a reduction's length, or the last dimension). Values depend
only on the seed, the set and the flat index. What each set holds: docs/gates.md, "The input sets";
the comparison rule: "Gate 2, multi-seed kernel correctness". Torch is imported inside functions only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .chunks import DEFAULT_CHUNK, aligned_flat, flat_pieces, write_flat

_MASK32 = 0xFFFFFFFF
_NO_INF = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")


@dataclass(frozen=True)
class FillContext:
    """What a generator knows: the whole tensor's size and rows, the seed, the dtype's range."""

    numel: int
    row_length: int
    seed: int
    device: Any
    compute_dtype: Any  # torch.float32, or float64 for float64 tensors
    max: float  # the dtype's largest finite value
    tiny: float  # its smallest normal value
    eps: float
    constants: tuple[float, ...] = ()  # the candidate's comparison constants (the ``constants`` input set)
    reduction: bool = False  # rows are reduced (their elements meet in one output)


@dataclass(frozen=True)
class InputSet:
    name: str
    label: str  # for verdicts: "inputs: constant rows"
    values: Callable[[FillContext, int, int], Any]  # (context, flat start, count) -> 1-D tensor
    reductions_only: bool = False
    applies: Callable[[str, Any], bool] = lambda name, info: True  # (dtype name, finfo) -> usable
    # False where outputs can amplify rounding without bound (a norm of constant rows divides rounding
    # by sqrt(eps)): compare positions and tolerances only, not error_structure (see error_structure.py)
    error_structure: bool = True


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def is_floating(dtype: Any) -> bool:
    name = dtype_name(dtype)
    return name.startswith(("float", "bfloat")) or name in ("half", "double")


# --- deterministic per-row randomness (the same row gets the same value in every chunk) ---------


def _hash_uniform(index: Any, seed: int, salt: int) -> Any:
    """Uniform (0, 1) float64 per integer index, from a 32-bit integer hash (no overflow in int64)."""
    import torch

    x = (index & _MASK32) * 0x45D9F3B + ((seed * 0x2545F49 + salt * 0x9E37) & _MASK32)
    x = x & _MASK32
    for _ in range(3):
        x = x ^ (x >> 16)
        x = (x * 0x45D9F3B) & _MASK32
    return (x.to(torch.float64) + 0.5) / 4294967296.0


def _hash_normal(index: Any, seed: int, salt: int) -> Any:
    import torch

    u1 = _hash_uniform(index, seed, salt)
    u2 = _hash_uniform(index, seed, salt + 7919)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)


def per_key(ctx: FillContext, start: int, count: int, divisor: int, of_keys: Callable[[Any], Any]) -> Any:
    """Each element of [start, start + count) gets ``of_keys(key)`` of its key ``flat index // divisor``,
    computed once per key and repeated: a hash per key, not per element (a GPU chunk of 16 Mi elements is a
    few passes, where a hash of every element's key is a dozen passes over int64)."""
    import torch

    first, last = start // divisor, (start + count - 1) // divisor
    values = of_keys(torch.arange(first, last + 1, device=ctx.device, dtype=torch.int64))
    if first == last:
        return values.expand(count)
    if divisor == 1:
        return values
    repeats = torch.full((last - first + 1,), divisor, dtype=torch.int64, device=ctx.device)
    repeats[0] = divisor - start % divisor
    repeats[-1] = (start + count - 1) % divisor + 1
    return torch.repeat_interleave(values, repeats, output_size=count)


def _per_row(ctx: FillContext, start: int, count: int, of_rows: Callable[[Any], Any]) -> Any:
    """Each element of [start, start + count) gets ``of_rows(row index)`` of its row, computed once per row."""
    return per_key(ctx, start, count, ctx.row_length, of_rows)


# Random values come in aligned blocks, each drawn from its own seeded generator, so they depend on the
# flat index, not on the chunking. A block costs a generator, a seed and a launch, dispatched from the
# host: on a GPU a block is a whole chunk (16 Mi elements), so a fill's time is the device's passes, not
# the host's dispatch of a draw per Mi; on a CPU a block is small enough to draw whole for a small piece.
# (A device's generator draws its own values anyway: the values are the same for any chunking or layout
# on one device.)
_BLOCK = 1 << 20
_DEVICE_BLOCK = 1 << 24


def _block_size(ctx: FillContext) -> int:
    """Elements per seeded block: on a GPU a chunk, or the tensor's size rounded up to a power of two
    where that is smaller (a small tensor draws what it holds, not 16 Mi values)."""
    if not str(getattr(ctx.device, "type", ctx.device)).startswith("cuda"):
        return _BLOCK
    return min(_DEVICE_BLOCK, 1 << max(10, (ctx.numel - 1).bit_length()))


def _random(ctx: FillContext, start: int, count: int, salt: int, kind: str) -> Any:
    """Random values for flat indices [start, start + count): the same for any chunking or layout."""
    import torch

    pieces = []
    size = _block_size(ctx)
    first, last = start // size, (start + count - 1) // size
    for block in range(first, last + 1):
        generator = torch.Generator(device=ctx.device)
        generator.manual_seed((ctx.seed * 1_000_003 + salt * 7_919 + block * 104_729) % (2**63 - 1))
        draw = torch.randn if kind == "normal" else torch.rand
        pieces.append(draw(size, generator=generator, device=ctx.device, dtype=ctx.compute_dtype))
    values = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
    offset = start - first * size
    return values[offset:offset + count]


def _normal(ctx: FillContext, start: int, count: int, salt: int) -> Any:
    return _random(ctx, start, count, salt, "normal")


def _uniform(ctx: FillContext, start: int, count: int, low: float, high: float, salt: int) -> Any:
    return low + (high - low) * _random(ctx, start, count, salt, "uniform")


def _signs(ctx: FillContext, start: int, count: int, salt: int) -> Any:
    import torch

    uniform = _random(ctx, start, count, salt + 100, "uniform")
    return torch.where(uniform < 0.5, -1.0, 1.0).to(ctx.compute_dtype)


# --- the generators ------------------------------------------------------------------------------


def special_positions(numel: int, seed: int) -> list[tuple[int, float]]:
    """Where ``nan-inf`` puts NaN, +Inf, -Inf (two of each, spread over the tensor; fewer if it is tiny)."""
    values = [math.nan, math.inf, -math.inf, math.nan, math.inf, -math.inf]
    out: dict[int, float] = {}
    for k, value in enumerate(values[: max(1, min(len(values), numel))]):
        base = (k * numel) // len(values)
        span = max(1, numel // len(values))
        position = (base + (seed * 7919 + k * 104729) % span) % numel
        while position in out:
            position = (position + 1) % numel
        out[position] = value
    return sorted(out.items())


def _nan_inf(ctx: FillContext, start: int, count: int) -> Any:
    values = _normal(ctx, start, count, 1)
    for position, special in special_positions(ctx.numel, ctx.seed):
        if start <= position < start + count:
            values[position - start] = special
    return values


def _zeros(ctx: FillContext, start: int, count: int) -> Any:
    """Zeros, half of them -0.0 (at random elements): ``copysign`` tells the two apart with no comparison."""
    import torch

    zeros = torch.zeros(count, device=ctx.device, dtype=ctx.compute_dtype)
    return torch.where(_uniform(ctx, start, count, 0.0, 1.0, 5) < 0.5, -zeros, zeros)


def zero_block_size(numel: int) -> int:
    """Aligned blocks of zeros: 1024 elements (any kernel block lies inside one), smaller for tiny tensors."""
    block = 1024
    while block > 1 and block * 3 > numel:
        block //= 2
    return block


def _zero_blocks(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    values = _normal(ctx, start, count, 2)
    zero = per_key(ctx, start, count, zero_block_size(ctx.numel), lambda blocks: blocks % 3 == 1)
    if ctx.numel // ctx.row_length >= 4:
        zero = zero | _per_row(ctx, start, count, lambda rows: rows % 4 == 2)
    return torch.where(zero, torch.zeros_like(values), values)


def _constant_rows(ctx: FillContext, start: int, count: int) -> Any:
    return _per_row(ctx, start, count, lambda rows: _hash_normal(rows, ctx.seed, 3).to(ctx.compute_dtype))


def _low_variance_rows(ctx: FillContext, start: int, count: int) -> Any:
    mean = _per_row(ctx, start, count, lambda rows: _hash_normal(rows, ctx.seed, 4).to(ctx.compute_dtype))
    std = 4.0 * ctx.eps * mean.abs().clamp_min(1.0)
    return mean + std * _normal(ctx, start, count, 4)


def _offset_rows(ctx: FillContext, start: int, count: int) -> Any:
    mean = 1000.0 + 10.0 * _per_row(ctx, start, count,
                                    lambda rows: _hash_normal(rows, ctx.seed, 5).to(ctx.compute_dtype))
    return mean + _normal(ctx, start, count, 5)


def _all_negative(ctx: FillContext, start: int, count: int) -> Any:
    return _uniform(ctx, start, count, -130.0, -110.0, 6)


def _all_positive(ctx: FillContext, start: int, count: int) -> Any:
    return _uniform(ctx, start, count, 0.5, 100.0, 7)


def near_max_headroom(dtype_max: float) -> float:
    """How far below the dtype's maximum ``near-max`` stays: sums of that many of its values stay finite
    in any order (a correct reordered sum must not overflow where the original's order did not), while
    squares and exponentials still overflow (1024 for fp32/bf16, 32 for fp16)."""
    return float(min(1024, 2 ** int(math.log2(math.sqrt(dtype_max))) // 4))


def _near_max(ctx: FillContext, start: int, count: int) -> Any:
    top = ctx.max / near_max_headroom(ctx.max)
    return _signs(ctx, start, count, 8) * _uniform(ctx, start, count, 0.5, 1.0, 8) * top


def _denormals(ctx: FillContext, start: int, count: int) -> Any:
    return _signs(ctx, start, count, 9) * _uniform(ctx, start, count, 0.01, 0.99, 9) * ctx.tiny


def _tail_extreme(ctx: FillContext, start: int, count: int) -> Any:
    import torch

    values = _normal(ctx, start, count, 10)
    index = torch.arange(start, start + count, device=ctx.device, dtype=torch.int64)
    last = index % ctx.row_length == ctx.row_length - 1
    extreme = _per_row(ctx, start, count, lambda rows: torch.where(rows % 2 == 0, 30.0, -30.0).to(ctx.compute_dtype))
    return torch.where(last, extreme, values)


INPUT_SETS: dict[str, InputSet] = {f.name: f for f in (
    InputSet("nan-inf", "NaN, +Inf and -Inf at a few positions", _nan_inf,
                applies=lambda name, info: name not in _NO_INF),
    InputSet("zeros", "all zeros", _zeros),
    InputSet("zero-blocks", "blocks of zeros amid random values", _zero_blocks),
    InputSet("constant-rows", "constant rows", _constant_rows, error_structure=False),
    InputSet("low-variance-rows", "low-variance rows (std of a few ulps)", _low_variance_rows,
                applies=lambda name, info: info.eps <= 1e-2, error_structure=False),
    InputSet("offset-rows", "rows with a large common offset (mean ~1000, std 1)", _offset_rows,
                applies=lambda name, info: info.max >= 1e4),
    InputSet("all-negative", "all negative (-130 to -110)", _all_negative),
    InputSet("all-positive", "all positive (0.5 to 100)", _all_positive),
    InputSet("near-max", "magnitudes near the dtype's largest finite value (/1024 for fp32)", _near_max, error_structure=False),
    InputSet("denormals", "denormal magnitudes", _denormals, error_structure=False),
    InputSet("tail-extreme", "the row extreme in the last (masked) chunk", _tail_extreme, reductions_only=True),
)}


def input_sets_for(dtype: Any, reduction: bool) -> list[InputSet]:
    """The input sets that make sense for a tensor of ``dtype`` (none for integer and boolean tensors)."""
    import torch

    if not is_floating(dtype):
        return []
    info = torch.finfo(dtype)
    name = dtype_name(dtype)
    return [f for f in INPUT_SETS.values() if (reduction or not f.reductions_only) and f.applies(name, info)]


def fill(tensor: Any, input_set: InputSet | str, *, seed: int = 0, row_length: int | None = None,
         chunk: int = DEFAULT_CHUNK, constants: tuple[float, ...] = (), reduction: bool = False) -> None:
    """Overwrite ``tensor`` (floating, any layout, any device) with ``input_set``'s values, in place.

    ``row_length``: the reduction length; ``None`` makes rows the last dimension. ``constants``: the
    values the ``constants`` input set draws at and beside; ``reduction``: the kernel reduces rows. Extra memory is one chunk. Raises
    ``ValueError`` for an input set that does not apply to the tensor's dtype.
    """
    import torch

    input_set = INPUT_SETS[input_set] if isinstance(input_set, str) else input_set
    if not is_floating(tensor.dtype):
        raise ValueError(f"input set {input_set.name} fills floating tensors, not {dtype_name(tensor.dtype)}")
    info = torch.finfo(tensor.dtype)
    if not input_set.applies(dtype_name(tensor.dtype), info):
        raise ValueError(f"input set {input_set.name} does not apply to {dtype_name(tensor.dtype)}")
    numel = tensor.numel()
    if numel == 0:
        return
    rows = row_length if row_length and row_length > 0 else (tensor.shape[-1] if tensor.dim() else 1) or 1
    ctx = FillContext(numel=numel, row_length=max(1, rows), seed=int(seed), device=tensor.device,
                      compute_dtype=torch.float64 if tensor.dtype == torch.float64 else torch.float32,
                      max=float(info.max), tiny=float(info.tiny), eps=float(info.eps),
                      constants=tuple(float(c) for c in constants), reduction=reduction)
    for start, piece in flat_pieces(tensor, chunk):
        values = input_set.values(ctx, start, piece.numel())
        write_flat(piece, values.to(tensor.dtype))


# --- the comparison rule ---------------------------------------------------------------------------


@dataclass
class InputSetComparison:
    """The candidate's output against the original's, on one input set."""

    ok: bool
    reason: str
    checked: int = 0
    nan_mismatches: int = 0
    posinf_mismatches: int = 0
    neginf_mismatches: int = 0
    finite_mismatches: int = 0
    max_abs_diff: float = 0.0  # over the elements finite in both
    first_index: tuple[int, ...] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "checked": self.checked,
                "nan_mismatches": self.nan_mismatches, "posinf_mismatches": self.posinf_mismatches,
                "neginf_mismatches": self.neginf_mismatches, "finite_mismatches": self.finite_mismatches,
                "max_abs_diff": self.max_abs_diff,
                "first_index": list(self.first_index) if self.first_index is not None else None}


def unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return tuple(reversed(out))


def compare_outputs(candidate: Any, original: Any, *, atol: float, rtol: float,
                    chunk: int = DEFAULT_CHUNK) -> InputSetComparison:
    """NaN and +-Inf positions must match the original's; finite elements within atol/rtol.

    Integer and boolean outputs must be equal. Chunked: memory is a few chunks.
    """
    import torch

    if tuple(candidate.shape) != tuple(original.shape):
        return InputSetComparison(False, f"shape {tuple(candidate.shape)} where the original has "
                                       f"{tuple(original.shape)}")
    shape = tuple(original.shape)
    floating = is_floating(original.dtype)
    result = InputSetComparison(True, "", checked=original.numel())
    first: dict[str, tuple[int, float, float]] = {}
    for start, (c, o) in aligned_flat([candidate, original], chunk):
        if not floating:
            bad = c != o
            result.finite_mismatches += int(bad.sum())
            _first(first, "value", bad, start, c, o)
            continue
        c = c.to(torch.float64)
        o = o.to(torch.float64)
        c_nan, o_nan = torch.isnan(c), torch.isnan(o)
        c_pos, o_pos = torch.isposinf(c), torch.isposinf(o)
        c_neg, o_neg = torch.isneginf(c), torch.isneginf(o)
        nan_bad, pos_bad, neg_bad = c_nan != o_nan, c_pos != o_pos, c_neg != o_neg
        result.nan_mismatches += int(nan_bad.sum())
        result.posinf_mismatches += int(pos_bad.sum())
        result.neginf_mismatches += int(neg_bad.sum())
        _first(first, "nan", nan_bad, start, c, o)
        _first(first, "posinf", pos_bad, start, c, o)
        _first(first, "neginf", neg_bad, start, c, o)
        finite = torch.isfinite(c) & torch.isfinite(o)
        diff = torch.where(finite, (c - o).abs(), torch.zeros_like(c))
        if diff.numel():
            result.max_abs_diff = max(result.max_abs_diff, float(diff.max()))
        outside = finite & (diff > atol + rtol * o.abs())
        result.finite_mismatches += int(outside.sum())
        _first(first, "value", outside, start, c, o)
    result.ok = not (result.nan_mismatches or result.posinf_mismatches or result.neginf_mismatches
                     or result.finite_mismatches)
    if result.ok:
        result.reason = f"matches the original (max |diff| {result.max_abs_diff:.3g})"
        return result
    kind = next(k for k in ("nan", "posinf", "neginf", "value") if k in first)
    index, got, want = first[kind]
    result.first_index = unravel(index, shape)
    count = {"nan": result.nan_mismatches, "posinf": result.posinf_mismatches, "neginf": result.neginf_mismatches,
             "value": result.finite_mismatches}[kind]
    where = f"at {count} position(s), first at index {result.first_index}"
    if kind == "value":
        result.reason = (f"{count} element(s) outside atol={atol:g}, rtol={rtol:g} (first at index "
                         f"{result.first_index}: {got:.6g} where the original has {want:.6g}); max |diff| "
                         f"{result.max_abs_diff:.3g}")
    else:
        special = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf"}[kind]
        result.reason = (f"the {special} positions differ from the original's {where} "
                         f"({got:.6g} where the original has {want:.6g})")
    result.details = {k: {"index": list(unravel(v[0], shape)), "candidate": v[1], "original": v[2]}
                      for k, v in first.items()}
    return result


def _first(first: dict[str, tuple[int, float, float]], kind: str, mask: Any, start: int, c: Any, o: Any) -> None:
    if kind in first or not bool(mask.any()):
        return
    position = int(mask.nonzero()[0, 0]) if mask.dim() else 0
    first[kind] = (start + position, float(c[position]), float(o[position]))


__all__ = ["INPUT_SETS", "InputSetComparison", "InputSet", "compare_outputs", "input_sets_for", "fill",
           "is_floating", "special_positions", "unravel", "zero_block_size"]
