"""Gate 2's and gate 3's verdicts name the real cause: a candidate wrong on the stale-output run's inputs is
not described as leaving previous outputs; one whose result depends on its output buffers' old contents is
described so; the stale-output run starts from buffers wrong at every element; NaN/Inf that changed kind
are named, never "max |diff| 0". Gate 2 runs on the stand-in sides (tests/gate2_stand_ins.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from gate2_stand_ins import InProcessCandidate, TorchKernel, softmax_launch

from kernelopt_core.gates.kernel import KernelRun, Side, compare_reruns, unlike_answer
from kernelopt_core.gates.kernel_gate import check_kernel
from kernelopt_core.gates.model import check_seed
from kernelopt_core.sandbox.exchange import ExchangeArena
from kernelopt_core.sandbox.guarded_buffers import bits, guarded_allocation

ROWS, COLUMNS = 6, 40
STALE_RUN = "seed 1337, small integers in [-8, 8] as floats"


@pytest.fixture
def arena() -> Iterator[ExchangeArena]:
    arena = ExchangeArena("cpu")
    yield arena
    arena.close()


def _failed(arena: ExchangeArena, behaviour: Any) -> Any:
    values, names, roles = softmax_launch(ROWS, COLUMNS)
    outcome = check_kernel(TorchKernel(), InProcessCandidate(behaviour), arena, "k", [values], [{}], names, roles,
                           (0, 42, 1337), "cpu", row_length=COLUMNS)
    return outcome.failed


def _backdoor_on_whole_numbers(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    # keyed on the values (all whole numbers: the stale-output run's set), as a hash collision would be
    result = torch.softmax(x, dim=-1)
    if bool((x == x.round()).all()):
        result = result * 0.5
    out.copy_(result)


def test_a_trigger_in_the_stale_run_s_inputs_is_reported_as_those_inputs(arena: ExchangeArena) -> None:
    failed = _failed(arena, _backdoor_on_whole_numbers)
    assert failed is not None and failed.label == STALE_RUN, failed.label
    assert "previous outputs" not in failed.label and "stale" not in failed.problems[0]
    assert "differ beyond" in failed.problems[0]


def _reads_its_outputs(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    # reads the buffer it only writes: right on fresh (poisoned, NaN) outputs, off where old values sit
    result = torch.softmax(x, dim=-1)
    out.copy_(torch.where(torch.isnan(out), result, result + 0.01 * out.abs().clamp_max(1.0)))


def test_a_result_that_depends_on_old_outputs_is_named_so(arena: ExchangeArena) -> None:
    failed = _failed(arena, _reads_its_outputs)
    assert failed is not None and "previous outputs left in the buffers" in failed.label
    assert failed.problems[0].startswith("its result depends on what the output buffers held before the call")


def _keeps_previous(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    """Skips the rows whose output buffer already holds finite values (a cache keyed on the buffer)."""
    keep = torch.isfinite(out).all(dim=-1, keepdim=True)
    out.copy_(torch.where(keep, out, torch.softmax(x, dim=-1)))


def test_a_stale_result_is_still_named_stale(arena: ExchangeArena) -> None:
    failed = _failed(arena, _keeps_previous)
    assert failed is not None and "stale result" in failed.problems[0]


def test_the_stale_run_starts_from_outputs_wrong_at_every_element() -> None:
    roles = ["input", "output", "output", "output"]
    right = [torch.randn(5, 7), torch.tensor([0.0, -0.5, float("nan"), float("inf"), 2.0, 3.0]),
             torch.arange(6, dtype=torch.int32), torch.tensor([1.0, 2.0], dtype=torch.bfloat16)]
    original, candidate = Side(right, roles), Side(right, roles)
    for side in (original, candidate):
        for index, value in enumerate(right):
            side.run.guarded[index].view.copy_(value)
    candidate.run.guarded[1].view[4:] = torch.tensor([7.0, 8.0])  # old outputs that already differ stay
    unlike_answer(candidate, original, roles)
    for index in (1, 2, 3):
        got, want = candidate.run.guarded[index].view, original.run.guarded[index].view
        assert (bits(got) != bits(want)).all(), (index, got, want)
    assert candidate.run.guarded[1].view[4:].tolist() == [7.0, 8.0]
    assert torch.equal(candidate.run.guarded[0].view, right[0])  # inputs untouched


def _run(value: torch.Tensor) -> KernelRun:
    run = KernelRun()
    run.guarded[0] = guarded_allocation(tuple(value.shape), value.dtype, value.device)
    run.guarded[0].view.copy_(value)
    return run


def test_special_values_that_change_are_named_not_max_diff_zero() -> None:
    first = torch.tensor([1.0, float("inf"), 2.0, float("-inf")])
    again = torch.tensor([1.0, float("nan"), 2.0, float("-inf")])  # a compensated sum's inf - inf
    check = compare_reruns("re-run 1", _run(first), _run(again), ["output"], ["out_ptr0"], bitwise=True)
    assert "1 is NaN where the first run gives +Inf (first at index (1,))" in check.problems[0]
    assert "max |diff| 0" not in check.problems[0]
    # gate 3: the same swap is named, and rejected without a float64 reference's say
    seed = check_seed(0, [first], [again], 1e-3, None, [], "no reference")
    assert not seed.passed and "1 is NaN where the baseline gives +Inf" in seed.problem
    assert "max |diff|" not in seed.problem
