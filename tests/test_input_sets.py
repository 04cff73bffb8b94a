"""Input sets: in place, seeded, chunked, and what each one promises (and docs/gates.md lists each)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.input_sets import (  # noqa: E402
    INPUT_SETS,
    compare_outputs,
    fill,
    input_sets_for,
    near_max_headroom,
    special_positions,
    zero_block_size,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # many small tensors


def _filled(name: str, shape=(12, 300), dtype=torch.float32, seed: int = 0, row_length: int | None = None,
            chunk: int = 1 << 20) -> torch.Tensor:
    tensor = torch.full(shape, 7.0, dtype=dtype)
    fill(tensor, name, seed=seed, row_length=row_length, chunk=chunk)
    return tensor


def test_input_sets_by_dtype() -> None:
    pointwise = {f.name for f in input_sets_for(torch.float32, reduction=False)}
    assert pointwise == set(INPUT_SETS) - {"tail-extreme"}
    assert "tail-extreme" in {f.name for f in input_sets_for(torch.float32, reduction=True)}
    assert {f.name for f in input_sets_for(torch.float16, reduction=True)} == set(INPUT_SETS)
    assert input_sets_for(torch.int32, reduction=True) == [] and input_sets_for(torch.bool, reduction=False) == []
    fp8 = {f.name for f in input_sets_for(torch.float8_e4m3fn, reduction=True)}
    assert "nan-inf" not in fp8 and "offset-rows" not in fp8 and "low-variance-rows" not in fp8 and "zeros" in fp8
    assert all(f.label for f in INPUT_SETS.values())


def test_docs_list_every_input_set() -> None:
    """The tables of docs/gates.md, "The input sets", name exactly the registered sets."""
    from kernelopt_core.gates.structured_input_sets import STRUCTURED_INPUT_SETS

    text = (Path(__file__).resolve().parents[1] / "docs" / "gates.md").read_text()
    section = text.split("### The input sets", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.MULTILINE)
    assert sorted(listed) == sorted([*INPUT_SETS, *STRUCTURED_INPUT_SETS])


@pytest.mark.parametrize("name", sorted(INPUT_SETS))
def test_every_input_set_fills_in_place_deterministically(name: str) -> None:
    tensor = torch.full((12, 300), 7.0)
    pointer = tensor.data_ptr()
    fill(tensor, name, seed=3, row_length=300)
    assert tensor.data_ptr() == pointer
    assert not (tensor == 7.0).any()
    again = _filled(name, seed=3, row_length=300)
    assert torch.equal(torch.nan_to_num(tensor), torch.nan_to_num(again))
    # the values depend on the flat index only: any chunking, any layout gives the same tensor
    chunked = _filled(name, seed=3, row_length=300, chunk=37)
    assert torch.equal(torch.nan_to_num(tensor), torch.nan_to_num(chunked))
    strided = torch.full((300, 12), 7.0).t()  # the same logical shape, transposed memory
    fill(strided, name, seed=3, row_length=300, chunk=50)
    assert torch.equal(torch.nan_to_num(tensor), torch.nan_to_num(strided))


@pytest.mark.parametrize("name", ["nan-inf", "zero-blocks", "constant-rows", "offset-rows", "all-negative",
                                  "tail-extreme"])
def test_seeds_differ(name: str) -> None:
    a, b = _filled(name, seed=0, row_length=300), _filled(name, seed=1, row_length=300)
    assert not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))


def test_nan_inf_positions() -> None:
    tensor = _filled("nan-inf", seed=5)
    flat = tensor.view(-1)
    expected = special_positions(tensor.numel(), 5)
    assert len(expected) == 6
    for position, value in expected:
        got = float(flat[position])
        assert (math.isnan(got) and math.isnan(value)) or got == value
    assert int((~torch.isfinite(flat)).sum()) == 6


def test_zeros_and_zero_blocks() -> None:
    assert (_filled("zeros") == 0).all()
    tensor = _filled("zero-blocks", shape=(16, 1024), row_length=1024).view(-1)
    block = zero_block_size(tensor.numel())
    assert block == 1024
    index = torch.arange(tensor.numel())
    assert (tensor[(index // block) % 3 == 1] == 0).all()  # whole aligned blocks
    assert (tensor[(index // 1024) % 4 == 2] == 0).all()  # whole rows
    assert (tensor != 0).float().mean() > 0.3


@pytest.mark.parametrize("row_length", [None, 100])
def test_row_input_sets_follow_the_rows(row_length: int | None) -> None:
    length = row_length or 300  # None: rows are the last dimension
    constant = _filled("constant-rows", row_length=row_length).view(-1, length)
    assert (constant == constant[:, :1]).all() and constant[:, 0].unique().numel() == constant.shape[0]
    low = _filled("low-variance-rows", row_length=row_length).view(-1, length).double()
    assert ((low.std(1) / low.mean(1).abs().clamp_min(1.0)) < 1e-5).all() and (low.std(1) > 0).all()
    offset = _filled("offset-rows", row_length=row_length).view(-1, length).double()
    assert ((offset.mean(1) - 1000).abs() < 50).all() and ((offset.std(1) - 1).abs() < 0.3).all()


def test_value_ranges() -> None:
    negative = _filled("all-negative")
    assert (negative <= -110).all() and (negative >= -130).all()
    assert (torch.exp(negative) == 0).all()  # every exp underflows, as a softmax of such rows needs
    positive = _filled("all-positive")
    assert (positive >= 0.5).all() and (positive <= 100).all()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        info = torch.finfo(dtype)
        near = _filled("near-max", dtype=dtype).float()
        top = info.max / near_max_headroom(info.max)
        assert torch.isfinite(near).all() and (near.abs() >= 0.49 * top).all() and (near.abs() <= top).all()
        assert torch.isinf(near.to(dtype) * near.to(dtype)).all()  # squares still overflow
        assert torch.isfinite((near.flatten()[:32].abs().to(dtype) * 32 / 33).sum(dtype=dtype))
        assert (near > 0).any() and (near < 0).any()
        tiny = _filled("denormals", dtype=dtype).float()
        assert (tiny.abs() < info.tiny).all() and (tiny != 0).float().mean() > 0.9


def test_the_row_extreme_is_the_last_element() -> None:
    tensor = _filled("tail-extreme", shape=(8, 1500), row_length=1500)
    assert (tensor.abs().argmax(1) == 1499).all()
    assert (tensor[0::2, -1] == 30).all() and (tensor[1::2, -1] == -30).all()


def test_integer_tensors_are_refused() -> None:
    with pytest.raises(ValueError, match="floating"):
        fill(torch.zeros(4, dtype=torch.int32), "zeros")
    with pytest.raises(ValueError, match="does not apply"):
        fill(torch.zeros(4, dtype=torch.float8_e4m3fn), "nan-inf")


def test_special_values_must_sit_where_the_original_has_them() -> None:
    original = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 2.0])
    same = compare_outputs(original.clone(), original, atol=1e-4, rtol=1e-4)
    assert same.ok, same.reason
    dropped = original.clone()
    dropped[1] = 0.0  # a reduction that silently drops NaN
    verdict = compare_outputs(dropped, original, atol=1e-4, rtol=1e-4)
    assert not verdict.ok and verdict.nan_mismatches == 1 and verdict.first_index == (1,)
    assert "NaN positions differ" in verdict.reason
    flipped = original.clone()
    flipped[2] = -float("inf")
    verdict = compare_outputs(flipped, original, atol=1e-4, rtol=1e-4)
    assert not verdict.ok and verdict.posinf_mismatches == 1 and verdict.neginf_mismatches == 1
    new_nan = original.clone()
    new_nan[0] = float("nan")
    assert "NaN" in compare_outputs(new_nan, original, atol=1e-4, rtol=1e-4).reason


def test_finite_elements_use_the_tolerances_and_name_the_first_index() -> None:
    original = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    candidate = original.clone()
    candidate[4, 7] += 0.01
    verdict = compare_outputs(candidate, original, atol=1e-3, rtol=1e-3, chunk=17)
    assert not verdict.ok and verdict.finite_mismatches == 1 and verdict.first_index == (4, 7)
    assert verdict.max_abs_diff == pytest.approx(0.01, rel=1e-3)
    assert compare_outputs(candidate, original, atol=0.02, rtol=0.0).ok
    strided = candidate.t().contiguous().t()
    assert compare_outputs(strided, original, atol=1e-3, rtol=1e-3, chunk=17).first_index == (4, 7)


def test_integer_outputs_must_be_equal() -> None:
    original = torch.arange(10)
    candidate = original.clone()
    candidate[3] = 4
    verdict = compare_outputs(candidate, original, atol=1.0, rtol=1.0)
    assert not verdict.ok and verdict.first_index == (3,)


def test_near_max_tolerance_follows_the_outputs_beyond_the_cap() -> None:
    """An average of values near 3e35 whose terms cancel rounds by ~1e28 when reordered: a correct rewrite.
    At the old cap (an absolute tolerance of 1e6 x 1e-3) it was rejected; scaled by the original's outputs it
    passes, a wrong result still fails, and a normalising kernel (outputs near 1) keeps the cap."""
    from kernelopt_core.gates.kernel_gate import INPUT_SCALE_CAP, input_set_tolerance_scale

    big = 3.3e35
    assert input_set_tolerance_scale(1.0, big, 2.9e35) == pytest.approx(2.9e35)
    assert input_set_tolerance_scale(1.0, big, 1.0) == INPUT_SCALE_CAP  # a softmax's outputs: the cap stands
    assert input_set_tolerance_scale(1.0, big, 1e38) == big  # never beyond the inputs
    assert input_set_tolerance_scale(8.0, 4.0, 1e9) == 8.0  # below the cap: the inputs, as before
    generator = torch.Generator().manual_seed(0)
    window = (torch.rand(4096, 3, generator=generator) * 2 - 1) * big
    window[:64, 2] = -(window[:64, 0] + window[:64, 1])  # rows whose terms cancel
    original = (window[:, 0] + window[:, 1] + window[:, 2]) / 3
    reordered = window[:, 2] / 3 + (window[:, 1] / 3 + window[:, 0] / 3)  # the same average, in another order
    wrong = original * 1.01
    tol = 1e-3
    assert not compare_outputs(reordered, original, atol=tol * INPUT_SCALE_CAP, rtol=tol).ok
    scale = input_set_tolerance_scale(1.0, big, float(original.abs().max()))
    assert compare_outputs(reordered, original, atol=tol * scale, rtol=tol).ok
    assert not compare_outputs(wrong, original, atol=tol * scale, rtol=tol).ok


def test_random_blocks_are_a_chunk_on_a_gpu_and_no_larger_than_the_tensor() -> None:
    """On a GPU a seeded block is a whole chunk (one generator per chunk, not one per Mi elements), capped
    at the tensor's size rounded up to a power of two; on the CPU it stays 1 Mi elements."""
    import torch

    from kernelopt_core.gates.input_sets import FillContext, _block_size

    def context(device: str, numel: int) -> FillContext:
        return FillContext(numel=numel, row_length=1, seed=0, device=torch.device(device),
                           compute_dtype=torch.float32, max=3e38, tiny=1e-38, eps=1e-7)

    assert _block_size(context("cpu", 1 << 30)) == 1 << 20
    assert _block_size(context("cpu", 100)) == 1 << 20  # the CPU's values are what they were
    assert _block_size(context("cuda:0", 1_610_612_736)) == 1 << 24
    assert _block_size(context("cuda:0", 5_000_000)) == 1 << 23
    assert _block_size(context("cuda:0", 100)) == 1024
