"""Gate 2's machinery on plain tensors: guards, poison, roles, argument sets, comparisons.

The whole gate (real kernels in the CPU interpreter) runs in tests/adversarial; these tests pin
down each detector on its own, with no Triton involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.artifacts.kernel_arguments import argument_roles, runtime_parameters
from kernelopt_core.gates.kernel import (
    KernelRun,
    compare_reruns,
    compare_runs,
    fingerprint,
    random_arguments,
)
from kernelopt_core.sandbox.guarded_buffers import bits, fill_poison, guarded_copy, poison_bits

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"


def _kernel(name: str):
    return parse_output_code(str(H200 / name / "output_code.py")).kernels[0]


def test_roles_from_the_original_kernel() -> None:
    elementwise = _kernel("elementwise")
    roles = argument_roles(elementwise.source, elementwise.name, [])
    assert roles == {"in_ptr0": "input", "in_ptr1": "input", "out_ptr0": "output", "xnumel": "input"}
    attention = _kernel("attention")  # in_out_ptr0 is read (scores) and written (probabilities)
    assert argument_roles(attention.source, attention.name, ["in_out_ptr0"])["in_out_ptr0"] == "inout"
    assert runtime_parameters(attention.source, attention.name) == ["in_out_ptr0", "xnumel", "r0_numel"]


def test_an_in_out_buffer_that_is_never_read_is_poisoned_like_an_output() -> None:
    source = '''
@triton.jit
def k(in_out_ptr0, in_ptr0, xnumel, XBLOCK: tl.constexpr):
    x = tl.load(in_ptr0 + xnumel)
    tl.store(in_out_ptr0 + xnumel, x)
'''
    assert argument_roles(source, "k", ["in_out_ptr0"])["in_out_ptr0"] == "output"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_poison_is_a_recognisable_nan(dtype: torch.dtype) -> None:
    t = torch.zeros(5, dtype=dtype)
    fill_poison(t)
    assert bool((bits(t) == poison_bits(dtype)).all())
    if dtype.is_floating_point:
        assert bool(torch.isnan(t).all())
        computed = torch.tensor([float("nan")], dtype=dtype)  # a NaN a kernel computes is not the poison
        assert not bool((bits(computed) == poison_bits(dtype)).any())


def test_guarded_copy_keeps_values_and_detects_writes_outside() -> None:
    value = torch.randn(4, 6)[:, ::2]  # a strided view with holes
    guarded = guarded_copy(value)
    assert guarded.view.stride() == value.stride() and torch.equal(guarded.view, value)
    assert guarded.guard_intact()
    guarded.view.add_(1.0)  # inside the view: fine
    assert guarded.guard_intact()
    hole = int(guarded.holes.nonzero()[3])  # a hole between strided elements
    guarded.flat[guarded.guard + hole] = 0.0
    assert not guarded.guard_intact()
    guarded.restore_guard()
    assert guarded.guard_intact() and torch.equal(guarded.view, value + 1.0)
    tail = guarded_copy(value)
    tail.flat[-1] = 1.0  # past the end
    assert not tail.guard_intact()


def test_guards_reach_far_past_a_tensor() -> None:
    """A store thousands of elements past the end still lands in the guard (issue 20: 5,000 went unseen)."""
    value = torch.randn(100_000)
    guarded = guarded_copy(value)
    assert guarded.guard >= 8192 and guarded.nbytes <= 1.3 * value.numel() * 4
    far = guarded.guard + guarded.span + 5_000
    guarded.flat[far] = 1.0
    assert not guarded.guard_intact()
    small = guarded_copy(torch.randn(10))
    assert small.guard == 8192
    small.flat[small.guard + small.span + 5_000] = 1.0
    assert not small.guard_intact()


def test_guarded_allocation_in_a_given_buffer_and_chunked_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelopt_core.sandbox.guarded_buffers as gb

    monkeypatch.setattr(gb, "CHUNK_ELEMENTS", 7)  # many chunks, even on a small tensor
    pool = torch.empty(1 << 20, dtype=torch.uint8)
    guarded = gb.guarded_allocation((5, 9), torch.float32, "cpu", (9, 1), allocate=lambda n: pool[:n])
    assert guarded.flat.untyped_storage().data_ptr() == pool.untyped_storage().data_ptr()
    guarded.view.copy_(torch.randn(5, 9))
    assert guarded.guard_intact()
    guarded.flat[guarded.guard + guarded.span + 3] = 2.0
    assert not guarded.guard_intact()
    pieces = list(gb.chunks(torch.randn(6, 10)[:, ::3]))
    assert sum(p.numel() for p in pieces) == 24 and all(p.numel() <= 7 for p in pieces)


def test_random_arguments_vary_floats_only() -> None:
    values = [torch.randn(3, 4), torch.arange(5), torch.empty(2, 2).fill_(7.0), 12]
    roles = ["input", "input", "output", "input"]
    sets = {d: random_arguments(values, roles, 0, d) for d in ("randn", "uniform", "small-ints", "large")}
    for data in sets.values():
        assert data[0].shape == values[0].shape and not torch.equal(data[0], values[0])
        assert torch.equal(data[1], values[1])  # integer inputs (indices) keep their values
        assert torch.equal(data[2], values[2])  # outputs are poisoned later, not randomised
        assert data[3] == 12
        assert bool((data[0] != 0).any())
    assert bool((sets["uniform"][0] >= -3).all()) and float(sets["uniform"][0].mean()) > 0.0
    assert torch.equal(sets["small-ints"][0], sets["small-ints"][0].round())
    assert float(sets["large"][0].abs().max()) > 50.0
    again = random_arguments(values, roles, 0, "randn")
    assert torch.equal(again[0], sets["randn"][0])  # seeded


def _run(*outputs: torch.Tensor) -> KernelRun:
    run = KernelRun()
    for index, value in enumerate(outputs):
        run.guarded[index] = guarded_copy(value)
    return run


def test_compare_runs_detectors() -> None:
    names, roles = ["out_ptr0"], ["output"]
    reference = torch.randn(8)
    poisoned = reference.clone()
    fill_poison(poisoned[5:])
    check = compare_runs("t", _run(reference), _run(poisoned), [reference], roles, names, poisoned=True)
    assert "left 3 of 8 elements of out_ptr0 unwritten" in check.problems[0]

    nan = reference.clone()
    nan[2] = float("inf")
    check = compare_runs("t", _run(reference), _run(nan), [reference], roles, names, poisoned=True)
    assert "produced NaN/Inf in 1 of 8" in check.problems[0]

    close = reference + 5e-4 * reference.abs()
    assert compare_runs("t", _run(reference), _run(close), [reference], roles, names, poisoned=True).passed
    far = reference + 3e-3 * (reference.abs() + 1)
    check = compare_runs("t", _run(reference), _run(far), [reference], roles, names, poisoned=True)
    assert "differ beyond atol=0.001, rtol=0.001" in check.problems[0]

    stale = torch.randn(8)
    check = compare_runs("t", _run(reference), _run(stale), [reference], roles, names, poisoned=False,
                         stale={0: fingerprint(stale)})
    assert "stale result" in check.problems[0]

    escaped = _run(reference.clone())
    escaped.guarded[0].flat[-1] = 0.0
    check = compare_runs("t", _run(reference), escaped, [reference], roles, names, poisoned=True)
    assert "wrote outside out_ptr0" in check.problems[0]


def test_half_precision_uses_the_looser_tolerance() -> None:
    reference = torch.randn(16).to(torch.float16)
    off = reference + (5e-3 * (reference.abs() + 1)).to(torch.float16)
    assert compare_runs("t", _run(reference), _run(off), [reference], ["output"], ["o"], poisoned=True).passed
    worse = reference + (3e-2 * (reference.abs() + 1)).to(torch.float16)
    assert not compare_runs("t", _run(reference), _run(worse), [reference], ["output"], ["o"], poisoned=True).passed


def test_inputs_must_not_be_modified() -> None:
    value = torch.randn(6)
    original = KernelRun(guarded={0: guarded_copy(value)})
    candidate = KernelRun(guarded={0: guarded_copy(value)})
    candidate.guarded[0].view[1] = 99.0
    check = compare_runs("t", original, candidate, [value], ["input"], ["in_ptr0"], poisoned=True)
    assert "modified its input in_ptr0" in check.problems[0]


def test_reruns_are_compared_bit_for_bit() -> None:
    first = torch.randn(10)
    assert compare_reruns("r", _run(first), _run(first.clone()), ["output"], ["o"], bitwise=True).passed
    nudged = first.clone()
    nudged[3] = torch.nextafter(nudged[3], torch.tensor(1e9))
    check = compare_reruns("r", _run(first), _run(nudged), ["output"], ["o"], bitwise=True)
    assert "nondeterministic" in check.problems[0] and "changed 1 elements" in check.problems[0]
    assert compare_reruns("r", _run(first), _run(nudged), ["output"], ["o"], bitwise=False).passed


def test_a_failing_run_is_reported_not_raised() -> None:
    failed = KernelRun(error="RuntimeError: boom")
    check = compare_runs("t", _run(torch.ones(2)), failed, [torch.ones(2)], ["output"], ["o"], poisoned=True)
    assert "the candidate failed to run: RuntimeError: boom" in check.problems[0]


def test_special_values_that_change_kind_are_named() -> None:
    """A compensated sum turns +Inf into NaN (inf - inf): the verdict says which special value became
    which and where, not "differ ... (max |diff| 0)" (issue 28)."""
    reference = torch.randn(333)
    reference[[46, 100, 200, 300]] = float("inf")
    candidate = reference.clone()
    candidate[[46, 100, 200, 300]] = float("nan")
    check = compare_runs("t", _run(reference), _run(candidate), [reference], ["output"], ["out_ptr0"], poisoned=True)
    assert check.problems == ["4 of 333 elements of out_ptr0 differ in their special values: 4 are NaN where the "
                              "original gives +Inf (first at index (46,))"]

    flipped = reference.clone()
    flipped[300] = float("-inf")
    check = compare_runs("t", _run(reference), _run(flipped), [reference], ["output"], ["o"], poisoned=True)
    assert "1 is -Inf where the original gives +Inf (first at index (300,))" in check.problems[0]

    finite = reference.clone()
    finite[100] = 2.5
    check = compare_runs("t", _run(reference), _run(finite), [reference], ["output"], ["o"], poisoned=True)
    assert "are finite where the original is NaN/Inf (1 is finite (2.5) where the original gives +Inf (first at " \
           "index (100,)))" in check.problems[0]


def test_one_input_sets_vary_one_input_and_draw_the_others() -> None:
    from kernelopt_core.gates.kernel import ONE_INPUT_SET_NAMES, kernel_input_sets, one_input_sets

    values = [torch.randn(8, 16), torch.randn(8, 16), torch.empty(8, 16), torch.arange(8), 16]
    roles = ["input", "input", "output", "input", "scalar"]
    names = ["in_ptr0", "in_ptr1", "out_ptr0", "in_ptr2", "xnumel"]
    sets = one_input_sets(values, roles, names, reduction=False, row_length=None)
    assert len(sets) == 2 * len(ONE_INPUT_SET_NAMES)  # the integer input keeps its values
    zeros_in_y = next(s for s in sets if s.label == "inputs: all zeros in in_ptr1 alone, the others randn")
    zeros_in_y.fill(values, roles)
    assert not values[1].any() and values[0].std() > 0.5 and torch.equal(values[3], torch.arange(8))
    first_x = values[0].clone()
    zeros_in_y.fill(values, roles)
    assert torch.equal(values[0], first_x)  # the others are drawn from a fixed seed
    # one floating input: the all-input sets are the same runs
    assert one_input_sets(values[1:], roles[1:], names[1:], reduction=False, row_length=None) == []
    labels = [s.label for s in kernel_input_sets(values, roles, names, reduction=False, row_length=None)]
    assert "inputs: all zeros" in labels and len(labels) == len(set(labels))
