"""The magnitude sweep's floor judges with gate 3's relative tolerance too: an element beyond a few rounding
units of its magnitude but within 1e-4 of the original's value is a correct reordering (on an H100, a windowed
avg-pool candidate's prefix differences put 1 of 536,879,104 elements at 11.2x the floor, 7e-6 relative, and
three correct 1.27x candidates were rejected), while a precision drop misses both and is still rejected."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.error_structure import MAGNITUDE_RTOL, MagnitudeFloor  # noqa: E402
from kernelopt_core.gates.kernel import _float_figures  # noqa: E402


def _original(n: int = 4096) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return (torch.rand(n, generator=generator, dtype=torch.float64) + 0.5).mul(1.3e22).to(torch.float32)


def _one_ulp_floor(original: torch.Tensor) -> MagnitudeFloor:
    windows = original.numel() // 8
    largest = original.abs().reshape(windows, 8).amax(dim=1)
    return MagnitudeFloor(8, largest * torch.finfo(torch.float32).eps)


def _bad(candidate: torch.Tensor, original: torch.Tensor) -> int:
    figures = _float_figures(candidate, original, None, atol=1e-4, rtol=1e-4, floor=_one_ulp_floor(original))
    return int(figures["bad"])


def test_a_few_units_of_relative_error_on_rare_elements_pass() -> None:
    original = _original()
    candidate = original.clone()
    candidate[::997] = (original[::997].double() * (1 + 7e-6)).float()  # ~60 ulps, 7e-6 relative
    assert _bad(candidate, original) == 0


def test_twelve_mantissa_bits_are_still_rejected() -> None:
    original = _original()
    truncated = (original.view(torch.int32) & ~((1 << 11) - 1)).view(torch.float32)
    assert _bad(truncated, original) > 0
    relative = ((truncated.double() - original.double()).abs() / original.double().abs()).max().item()
    assert relative > MAGNITUDE_RTOL


def test_beyond_the_relative_tolerance_is_rejected_even_where_the_floor_is_tiny() -> None:
    original = _original()
    candidate = original.clone()
    candidate[5] = float(original[5].double() * (1 + 3e-4))
    assert _bad(candidate, original) == 1
