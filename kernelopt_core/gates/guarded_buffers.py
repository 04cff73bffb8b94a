"""Tensors with guard regions, poisoned outputs, and the bit patterns that tell them apart.
Runs inside a worker (imports torch inside the functions).

Gate 2 places every tensor argument inside a larger allocation whose extra elements (before,
after, and in the holes of a strided view) hold a *guard* pattern. A kernel that writes outside
its tensors changes a guard; one that reads outside them reads the guard, a NaN, which spoils
what it computes. Output buffers are filled with a different NaN, the *poison*, before each run:
an element still holding the poison afterwards was never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GUARD_ELEMENTS = 4096

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


@dataclass
class GuardedTensor:
    view: Any  # the tensor the kernel gets (same size and strides as the original argument)
    flat: Any  # the whole allocation
    outside: Any  # bool mask over ``flat``: True where the view has no element
    guard_bits: Any  # what ``bits(flat)[outside]`` held before the launch

    def guard_intact(self) -> bool:
        import torch

        return bool(torch.equal(bits(self.flat)[self.outside], self.guard_bits))


def bits(tensor: Any) -> Any:
    """The tensor's raw bits as integers (so NaN payloads compare exactly)."""
    import torch

    name = _INT_VIEW.get(str(tensor.dtype))
    if name is None:
        if tensor.dtype == torch.bool:
            return tensor.to(torch.uint8)
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


def _fill_bits(tensor: Any, value: int) -> None:
    bits(tensor).fill_(value)


def fill_poison(tensor: Any) -> None:
    import torch

    key = str(tensor.dtype)
    if key in _FLOAT_BITS:
        _fill_bits(tensor, _FLOAT_BITS[key][0])
    elif key in _INT_POISON:
        tensor.fill_(_INT_POISON[key])
    elif str(tensor.dtype).startswith("torch.float8"):
        tensor.view(torch.uint8).fill_(0x7F)
    # bool outputs cannot be poisoned: only their values are compared


def guard_like(flat: Any) -> Any:
    import torch

    key = str(flat.dtype)
    expected = torch.empty_like(flat)
    if key in _FLOAT_BITS:
        _fill_bits(expected, _FLOAT_BITS[key][1])
    elif key in _INT_GUARD:
        expected.fill_(_INT_GUARD[key])
    elif flat.dtype == torch.bool:
        expected.fill_(True)
    elif flat.element_size() == 1:
        expected.view(torch.uint8).fill_(0x7F)
    else:
        return None
    return expected


def storage_span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements from the first to the last element of a strided view, inclusive."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))


def guarded_copy(value: Any, guard: int = GUARD_ELEMENTS) -> GuardedTensor:
    """A copy of ``value`` (same size, strides, dtype, device) inside a guarded allocation."""
    import torch

    span = storage_span(tuple(value.size()), tuple(value.stride()))
    flat = torch.empty(span + 2 * guard, dtype=value.dtype, device=value.device)
    expected = guard_like(flat)
    if expected is not None:
        flat.copy_(expected)
    view = flat.as_strided(value.size(), value.stride(), guard)
    view.copy_(value)
    outside = torch.ones(flat.shape, dtype=torch.bool, device=value.device)
    outside.as_strided(value.size(), value.stride(), guard).fill_(False)
    return GuardedTensor(view=view, flat=flat, outside=outside, guard_bits=bits(flat)[outside].clone())
