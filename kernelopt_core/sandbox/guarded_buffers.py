"""Tensors with guard regions, poisoned outputs, and the bit patterns that tell them apart.
Runs inside a worker or a candidate process (imports torch inside the functions).

Gate 2 places every tensor argument inside a larger allocation whose extra elements (before, after,
and in the holes of a strided view) hold a *guard* pattern. A kernel that writes outside its tensors
changes a guard; one that reads outside them reads the guard, a NaN, which spoils what it computes.
Output buffers are filled with a different NaN, the *poison*, before each run: an element still
holding the poison afterwards was never written. The guards are wide: an eighth of the tensor, at
least 8,192 and at most 1 Mi elements on each side, so a store thousands of elements past the end
still lands in a guard (a stray store further away is for compute-sanitizer on a GPU, or crashes the
candidate's process), while a large tensor grows by at most a quarter. Guards are compared against
the constant pattern in chunks; no copy is kept, so a guarded tensor costs its size plus its guards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

GUARD_MIN_ELEMENTS = 8192
GUARD_MAX_ELEMENTS = 1 << 20
GUARD_FRACTION = 8  # a guard is at most 1/GUARD_FRACTION of the tensor (above the minimum)
CHUNK_ELEMENTS = 1 << 24  # comparisons touch at most this many elements at a time

# Quiet NaNs with payloads a kernel does not produce: (poison bits, guard bits), as signed ints.
_FLOAT_BITS: dict[str, tuple[int, int]] = {
    "torch.float32": (0x7FDEAD01, 0x7FE5A5A5),
    "torch.float16": (0x7EAD, 0x7F5A),
    "torch.bfloat16": (0x7FED, 0x7FDA),
    "torch.float64": (0x7FFDEAD0DEAD0001, 0x7FFA5A5A5A5A5A5A),
}
_INT_VIEW = {"torch.float32": "int32", "torch.float16": "int16", "torch.bfloat16": "int16",
             "torch.float64": "int64"}
_INT_POISON = {"torch.int64": -0x5EADBEEF5EADBEEF, "torch.int32": -0x5EADBEEF, "torch.int16": -0x5EAD,
               "torch.int8": -0x5E, "torch.uint8": 0xA5}
_INT_GUARD = {"torch.int64": 0x5A5A5A5A5A5A5A5A, "torch.int32": 0x5A5A5A5A, "torch.int16": 0x5A5A,
              "torch.int8": 0x5A, "torch.uint8": 0x5A}

Allocate = Callable[[int], Any]  # nbytes -> a flat uint8 tensor on the right device


def bits(tensor: Any) -> Any:
    """The tensor's raw bits as integers (so NaN payloads compare exactly)."""
    import torch

    name = _INT_VIEW.get(str(tensor.dtype))
    if name is None:
        if tensor.dtype == torch.bool:
            return tensor.view(torch.uint8)
        if tensor.element_size() == 1:
            return tensor.view(torch.uint8)
        return tensor
    return tensor.view(getattr(torch, name))


def poison_bits(dtype: Any) -> int | None:
    """The integer the poison reads as through :func:`bits`, or None where there is none (bool)."""
    key = str(dtype)
    if key in _FLOAT_BITS:
        return _FLOAT_BITS[key][0]
    return _INT_POISON.get(key)


def guard_value(dtype: Any) -> int | None:
    """The integer the guard reads as through :func:`bits`."""
    key = str(dtype)
    if key in _FLOAT_BITS:
        return _FLOAT_BITS[key][1]
    if key in _INT_GUARD:
        return _INT_GUARD[key]
    if key == "torch.bool":
        return 0x7F
    return 0x7F if key.startswith("torch.float8") else None


def fill_poison(tensor: Any) -> None:
    import torch

    key = str(tensor.dtype)
    if key in _FLOAT_BITS:
        bits(tensor).fill_(_FLOAT_BITS[key][0])
    elif key in _INT_POISON:
        tensor.fill_(_INT_POISON[key])
    elif key.startswith("torch.float8"):
        tensor.view(torch.uint8).fill_(0x7F)
    # bool outputs cannot be poisoned: only their values are compared


def _fill_guard(flat: Any) -> None:
    value = guard_value(flat.dtype)
    if value is not None:
        bits(flat).fill_(value)


def storage_span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements from the first to the last element of a strided view, inclusive."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def guard_elements(span: int) -> int:
    return max(GUARD_MIN_ELEMENTS, min(GUARD_MAX_ELEMENTS, span // GUARD_FRACTION))


def chunks(tensor: Any, limit: int | None = None, by_rows: bool = False) -> Iterator[Any]:
    """Sub-views of ``tensor`` covering it once, each of at most ``limit`` elements (no copies).

    The split depends on the tensor's layout; ``by_rows`` splits along leading dimensions only,
    so two tensors of one shape and different strides split alike.
    """
    limit = limit or CHUNK_ELEMENTS
    if tensor.numel() <= limit or tensor.dim() == 0:
        yield tensor
        return
    if tensor.is_contiguous() and not by_rows:
        flat = tensor.view(-1)
        for start in range(0, flat.numel(), limit):
            yield flat[start:start + limit]
        return
    rows = tensor.shape[0]
    per_row = max(1, tensor[0].numel())
    step = max(1, limit // per_row)
    for start in range(0, rows, step):
        piece = tensor[start:start + step]
        if piece.numel() <= limit or piece.shape[0] > 1:
            yield piece
        else:
            yield from chunks(piece[0], limit, by_rows)


def _dense(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """True when the view covers every element of its span (no holes between elements)."""
    return storage_span(size, stride) == _numel(size) or _numel(size) == 0


def _numel(size: tuple[int, ...]) -> int:
    total = 1
    for s in size:
        total *= s
    return total


@dataclass
class GuardedTensor:
    view: Any  # the tensor the kernel gets (same size and strides as the original argument)
    flat: Any  # the whole allocation, in the view's dtype
    guard: int  # guard elements before and after the span
    span: int
    holes: Any = None  # bool mask over the span: True where the view has no element (strided views)

    @property
    def nbytes(self) -> int:
        return self.flat.numel() * self.flat.element_size()

    def guard_intact(self) -> bool:
        value = guard_value(self.flat.dtype)
        if value is None:
            return True
        regions = [self.flat[: self.guard], self.flat[self.guard + self.span:]]
        for region in regions:
            for piece in chunks(region):
                if not bool((bits(piece) == value).all()):
                    return False
        if self.holes is not None:
            inside = self.flat[self.guard: self.guard + self.span]
            for start in range(0, self.span, CHUNK_ELEMENTS):
                part = inside[start:start + CHUNK_ELEMENTS]
                mask = self.holes[start:start + CHUNK_ELEMENTS]
                if not bool((bits(part)[mask] == value).all()):
                    return False
        return True

    def restore_guard(self) -> None:
        """Put the guard pattern back (between runs that reuse this allocation)."""
        _fill_guard(self.flat[: self.guard])
        _fill_guard(self.flat[self.guard + self.span:])
        if self.holes is not None:
            value = guard_value(self.flat.dtype)
            if value is not None:
                inside = self.flat[self.guard: self.guard + self.span]
                bits(inside)[self.holes] = value


def guarded_allocation(size: tuple[int, ...], dtype: Any, device: Any, stride: tuple[int, ...] | None = None,
                       allocate: Allocate | None = None) -> GuardedTensor:
    """A guarded allocation holding a view of ``size`` (and ``stride``); the view is uninitialised."""
    import torch

    size = tuple(int(s) for s in size)
    if stride is None:
        stride = tuple(torch.empty(size, device="meta").stride()) if size else ()
    stride = tuple(int(s) for s in stride)
    span = storage_span(size, stride)
    guard = guard_elements(span)
    total = span + 2 * guard
    element = torch.empty((), dtype=dtype).element_size()
    if allocate is None:
        flat = torch.empty(total, dtype=dtype, device=device)
    else:
        flat = allocate(total * element)[: total * element].view(dtype)
    _fill_guard(flat)
    view = flat.as_strided(size, stride, guard)
    holes = None
    if not _dense(size, stride) and span:
        mask = torch.ones(span, dtype=torch.bool, device=flat.device)
        mask.as_strided(size, stride, 0).fill_(False)
        holes = mask
    return GuardedTensor(view=view, flat=flat, guard=guard, span=span, holes=holes)


def guarded_copy(value: Any, allocate: Allocate | None = None) -> GuardedTensor:
    """A copy of ``value`` (same size, strides, dtype, device) inside a guarded allocation."""
    guarded = guarded_allocation(tuple(value.size()), value.dtype, value.device, tuple(value.stride()), allocate)
    guarded.view.copy_(value)
    return guarded
