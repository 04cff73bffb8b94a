"""Error structure (issue 20, item 5): correct reorderings pass, small systematic errors do not."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.error_structure import (  # noqa: E402
    BIAS_FACTOR,
    ELEMENT_FACTOR,
    error_structure,
    max_finite_magnitude,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # many small tensors


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def blocked_sum(x: torch.Tensor, block: int) -> torch.Tensor:
    """Row sums the way a Triton reduction loop forms them: ``block`` lane accumulators, then a tree."""
    pad = (-x.shape[-1]) % block
    padded = torch.nn.functional.pad(x, (0, pad))
    acc = torch.zeros(x.shape[:-1] + (block,), dtype=x.dtype)
    for k in range(0, padded.shape[-1], block):
        acc = acc + padded[..., k:k + block]
    return acc.sum(-1)


def rows(family: str, shape: tuple[int, int], seed: int = 0) -> torch.Tensor:
    g = _generator(seed)
    r, n = shape
    if family == "randn":
        return torch.randn(shape, generator=g)
    if family == "offset":
        return 1000 + torch.randn(shape, generator=g)
    if family == "low-variance":
        return torch.randn(r, 1, generator=g) + 5e-7 * torch.randn(shape, generator=g)
    if family == "negative":
        return -60 - 40 * torch.rand(shape, generator=g)
    if family == "constant":
        return torch.randn(r, 1, generator=g).expand(shape).contiguous()
    raise ValueError(family)


FAMILIES = ["randn", "offset", "low-variance", "negative", "constant"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", [(6, 1500), (16, 4096)])
def test_sums_in_another_order_pass(family: str, shape: tuple[int, int]) -> None:
    x = rows(family, shape)
    r64 = x.double().sum(-1)
    for original_block in (128, 1024):
        original = blocked_sum(x, original_block)
        for block in (32, 256, 512, 2048):
            candidate = blocked_sum(x, block)
            for verdict in (error_structure(candidate, original, r64, row_length=None),
                            error_structure(candidate, original, input_scale=max_finite_magnitude([x]))):
                assert verdict.passed, (family, shape, original_block, block, verdict.reason)


def softmax(x: torch.Tensor, variant: str = "exp") -> torch.Tensor:
    shifted = x - x.max(-1, keepdim=True).values
    e = torch.exp2(shifted * 1.4426950408889634) if variant == "exp2" else torch.exp(shifted)
    total = e.sum(-1, keepdim=True)
    if variant == "reciprocal":
        return e * (1.0 / total)
    probabilities = e / total
    if variant == "flush":
        return torch.where(probabilities < 1e-5, torch.zeros_like(probabilities), probabilities)
    return probabilities


@pytest.mark.parametrize("family", ["randn", "offset", "negative", "constant"])
@pytest.mark.parametrize("variant", ["exp2", "reciprocal"])
@pytest.mark.parametrize("shape", [(10, 37), (64, 1000), (8, 8192)])
def test_softmax_with_exp2_or_a_reciprocal_passes(family: str, variant: str, shape: tuple[int, int]) -> None:
    x = rows(family, shape)
    r64 = torch.softmax(x.double(), -1)
    original = softmax(x)
    candidate = softmax(x, variant)
    for verdict in (error_structure(candidate, original, r64, row_length=shape[1]),
                    error_structure(candidate, original, row_length=shape[1], input_scale=max_finite_magnitude([x]))):
        assert verdict.passed, (family, variant, shape, verdict.reason)


def layer_norm(x: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "blocked":  # the row mean from partial sums of 8 (another summation order)
        n = x.shape[1]
        mean = x.view(x.shape[0], -1, 8).sum(-1).sum(-1, keepdim=True) / n
    else:
        mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5)


@pytest.mark.parametrize("family", ["randn", "offset", "negative"])
def test_layer_norm_with_another_mean_order_passes(family: str) -> None:
    x = rows(family, (64, 1024))
    r64 = layer_norm(x.double(), "two-pass")
    original = layer_norm(x, "two-pass")
    candidate = layer_norm(x, "blocked")
    for verdict in (error_structure(candidate, original, r64, row_length=1024),
                    error_structure(candidate, original, row_length=1024, input_scale=max_finite_magnitude([x]))):
        assert verdict.passed, (family, verdict.reason)


def test_constant_rows_make_a_norm_amplify_rounding_so_that_family_skips_the_check() -> None:
    """A norm of constant rows divides rounding by sqrt(eps): Inductor's Welford is exact there, a two-pass
    candidate is off by ~1e-4, a difference no rounding floor predicts. Hence the family's flag."""
    from kernelopt_core.gates.input_sets import INPUT_SETS

    x = rows("constant", (64, 1024))
    exact = torch.zeros_like(x)  # what the original (Welford: mean exact, m2 = 0) stores
    candidate = layer_norm(x, "blocked")
    verdict = error_structure(candidate, exact, exact.double(), row_length=1024,
                              input_scale=max_finite_magnitude([x]))
    assert not verdict.passed and verdict.worst_ratio > ELEMENT_FACTOR
    assert not INPUT_SETS["constant-rows"].error_structure
    assert not INPUT_SETS["low-variance-rows"].error_structure
    assert INPUT_SETS["offset-rows"].error_structure and INPUT_SETS["all-negative"].error_structure


def test_a_clamp_bound_moved_by_8e5_is_rejected() -> None:
    x = torch.randn(4096, generator=_generator(1))
    r64 = x.double().clamp(-1.0, 1.0)
    original = x.clamp(-1.0, 1.0)
    candidate = x.clamp(-1.0, 1.0 - 8e-5)
    # inside the model tolerance: atol and rtol alone accept it
    assert torch.allclose(candidate, original, atol=1e-4, rtol=1e-4)
    gate3 = error_structure(candidate, original, r64)
    assert not gate3.passed
    assert gate3.worst_ratio > ELEMENT_FACTOR and gate3.bias_ratio > BIAS_FACTOR and gate3.bias < 0
    assert "systematic bias" in gate3.reason and "rounding floor" in gate3.reason
    gate2 = error_structure(candidate, original, input_scale=max_finite_magnitude([x]))
    assert not gate2.passed and gate2.reference == "original"
    assert gate3.original_mean_error is not None and gate2.original_mean_error is None


def test_a_softmax_that_stores_small_probabilities_as_zero_is_rejected() -> None:
    # rows spread over [-60, -100]: most probabilities are far below 1e-5, a few columns live on them
    x = -60 - 40 * torch.rand(512, 37, generator=_generator(2))
    x[:, 5] = -60.0 - 11.0 - 2.0 * torch.rand(512, generator=_generator(3))  # column 5: p ~ 1e-5 and below
    x[:, 0] = -60.0
    r64 = torch.softmax(x.double(), -1)
    original = softmax(x)
    candidate = softmax(x, "flush")
    assert torch.allclose(candidate, original, atol=1e-4, rtol=1e-4)
    column = r64.sum(0)
    downstream = ((candidate.double().sum(0) - column).abs() / column).max()
    assert downstream > 0.3  # the column sums it feeds are off by more than 30%
    gate3 = error_structure(candidate, original, r64, row_length=37)
    assert not gate3.passed and gate3.bias < 0, gate3.reason
    gate2 = error_structure(candidate, original, row_length=37, input_scale=max_finite_magnitude([x]))
    assert not gate2.passed, gate2.reason


def test_the_verdict_is_the_same_in_small_chunks_and_on_strided_outputs() -> None:
    x = torch.randn(64, 96, generator=_generator(4))
    r64 = x.double().clamp(-1, 1)
    original, candidate = x.clamp(-1, 1), x.clamp(-1, 1 - 8e-5)
    whole = error_structure(candidate, original, r64, row_length=96)
    small = error_structure(candidate, original, r64, row_length=96, chunk=100)
    strided = error_structure(candidate.t().contiguous().t(), original.t().contiguous().t(), r64, row_length=96,
                              chunk=100)
    for other in (small, strided):
        assert other.passed == whole.passed
        assert other.bias == pytest.approx(whole.bias, rel=1e-9)
        assert other.bias_z == pytest.approx(whole.bias_z, rel=1e-6)
        assert other.worst_error == whole.worst_error


def test_non_finite_elements_are_left_to_the_position_check() -> None:
    x = torch.randn(1000, generator=_generator(5))
    original = x.clone()
    candidate = x.clone()
    original[3] = float("nan")
    candidate[3] = float("nan")
    candidate[7] = float("inf")
    verdict = error_structure(candidate, original, x.double())
    assert verdict.passed and verdict.count == 998


def test_figures_are_reported() -> None:
    x = torch.randn(100, generator=_generator(6))
    verdict = error_structure(x + 1e-9, x, x.double()).to_json()
    for key in ("bias", "bias_z", "bias_ratio", "worst_error", "worst_original_error", "worst_ratio", "element_floor",
                "original_mean_error", "candidate_mean_error", "reference"):
        assert key in verdict
