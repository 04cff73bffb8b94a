"""Gate 2's bounded wait for a hung candidate, and its one-ulp sensitivity floor for outputs that
amplify rounding (kernelopt_core.gates.kernel_gate / kernel / error_structure)."""

from __future__ import annotations

import pytest

from kernelopt_core.gates.kernel_gate import FIRST_LAUNCH_FLOOR_S, LATER_LAUNCH_FLOOR_S, launch_limits

torch = pytest.importorskip("torch")


def test_launch_limits_follow_the_original_between_floor_and_job_limit() -> None:
    assert launch_limits(0.001, "cpu", 480.0) == (FIRST_LAUNCH_FLOOR_S["cpu"], LATER_LAUNCH_FLOOR_S["cpu"])
    assert launch_limits(0.001, "cuda:0", 480.0) == (180.0, 60.0)  # a GPU first launch compiles
    assert launch_limits(1.0, "cpu", 480.0) == (100.0, 100.0)  # 100x the original
    assert launch_limits(10.0, "cuda", 480.0) == (480.0, 480.0)  # never past the task's own limit
    assert launch_limits(-1.0, "cpu", 5.0) == (5.0, 5.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_nudge_moves_every_finite_element_up_and_restores_exactly(dtype: torch.dtype) -> None:
    from kernelopt_core.gates.kernel import nudge_up, undo_nudge

    info = torch.finfo(dtype)
    base = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)).to(dtype)
    base[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, info.max]).to(dtype)
    base[1, :3] = torch.tensor([-info.smallest_normal * info.eps, info.smallest_normal * info.eps, -info.max]).to(dtype)
    base[2, :4] = torch.tensor([65536.0, -65536.0, 2.0, -1.0]).to(dtype)
    view = base.t()[::2]  # strided: no contiguous flat view exists
    before = base.clone()
    undo = nudge_up(view)
    assert undo is not None
    touched = torch.zeros(base.shape, dtype=torch.bool)
    touched.t()[::2] = True
    kept = ~torch.isfinite(before) | (before == 0) | (before == info.max) | (before == -info.smallest_normal * info.eps)
    rose = base.double() > before.double()
    assert bool((rose == (touched & ~kept)).all())  # every finite non-zero element of the view went up, no other
    spacing = (before.double().abs() * info.eps).clamp_min(info.smallest_normal * info.eps)
    assert bool(((base.double() - before.double())[rose] <= 2 * spacing[rose] * 1.01).all())  # one or two ulps
    undo_nudge(view, undo)
    assert torch.equal(base.view(torch.int8), before.view(torch.int8))  # bit for bit, NaN and -0.0 included
    assert nudge_up(torch.arange(4)) is None


def test_the_nudge_moves_a_cancelling_sum_whatever_its_terms() -> None:
    """x and -x, or two terms and a third, moved by a flipped bit can cancel; moved up, a sum always rises."""
    from kernelopt_core.gates.kernel import nudge_up

    generator = torch.Generator().manual_seed(3)
    big = 65536.0 + torch.randint(0, 64, (3000,), generator=generator).float() * 2 ** -7  # one binade, ulp 2^-7
    triples = torch.stack([big[:1000], big[1000:2000], -(big[:1000] + big[1000:2000] - big[2000:])], 1)
    exact = triples.double().sum(1)
    assert nudge_up(triples) is not None
    assert bool((triples.double().sum(1) > exact).all())  # every sum rose by at least an ulp of its terms


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_nudge_moves_finite_elements_one_ulp_and_restores_exactly(dtype: torch.dtype) -> None:
    from kernelopt_core.gates.kernel import nudge_last_bit

    base = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)).to(dtype)
    base[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0]).to(dtype)
    base[1, 0] = torch.finfo(dtype).max
    view = base.t()[::2]  # strided: no contiguous flat view exists
    before = base.clone()
    assert nudge_last_bit(view)
    width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[base.element_size()]
    changed = base.view(width) != before.view(width)  # bits: NaN != NaN would say it changed
    touched = torch.zeros_like(changed)
    touched.t()[::2] = True
    finite = torch.isfinite(before)
    assert bool((changed == (touched & finite)).all())  # every finite element of the view, nothing else
    spacing = (before.double().abs() * torch.finfo(dtype).eps).clamp_min(torch.finfo(dtype).tiny)
    moved = (base.double() - before.double()).abs()
    assert bool((moved[finite] <= spacing[finite] * 1.01).all())
    assert bool(torch.isfinite(base[finite]).all())  # the largest finite value stays finite
    assert nudge_last_bit(view)
    assert torch.equal(base.view(torch.int8), before.view(torch.int8))  # bit for bit, NaN included
    assert not nudge_last_bit(torch.arange(4))


def test_the_sensitivity_floor_accepts_amplified_rounding_and_still_sees_real_errors() -> None:
    from kernelopt_core.gates.error_structure import error_structure

    generator = torch.Generator().manual_seed(1)
    original = 1000.0 * torch.randn(2, 1200, generator=generator)
    # another correct order of the row's mean: the whole row moves by ~0.3 (1000x amplified rounding)
    shifted = original + torch.tensor([[0.3], [-0.2]]) + 0.01 * torch.randn(2, 1200, generator=generator)
    plain = error_structure(shifted, original, row_length=1200, input_scale=1000.0)
    assert not plain.passed
    sensitivity = (0.06, 0.03)  # what one ulp of input rounding moved the original's outputs
    judged = error_structure(shifted, original, row_length=1200, input_scale=1000.0, sensitivity=sensitivity)
    assert judged.passed, judged.reason
    wrong = original + 30.0 * torch.randn(2, 1200, generator=generator)  # a one-pass variance's size of error
    rejected = error_structure(wrong, original, row_length=1200, input_scale=1000.0, sensitivity=sensitivity)
    assert not rejected.passed and "one ulp of input rounding" in rejected.reason


def test_a_sensitivity_run_that_does_not_fit_is_not_a_verdict() -> None:
    from types import SimpleNamespace

    from kernelopt_core.gates.kernel_gate import original_sensitivity

    class TooBig:
        def is_floating_point(self) -> bool:
            return True

        def clone(self) -> None:
            raise torch.OutOfMemoryError("out of memory (fake)")

    orig = SimpleNamespace(run=SimpleNamespace(guarded={0: SimpleNamespace(view=TooBig())}))
    assert original_sensitivity(None, orig, [None], {}, ["output"], ["out_ptr0"], "cpu") is None
    nothing = SimpleNamespace(run=SimpleNamespace(guarded={}))
    assert original_sensitivity(None, nothing, [None], {}, ["output"], ["out_ptr0"], "cpu") == {}


def test_the_sensitivity_run_restores_every_output_integer_ones_too() -> None:
    """The comparison that follows it (and the next check on the same inputs) reads all of the original's
    outputs: an integer output left poisoned would read as a mismatch."""
    from kernelopt_core.gates.kernel import Side
    from kernelopt_core.gates.kernel_gate import original_sensitivity

    class MaxAndArgmax:
        def run(self, x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor) -> None:
            values.copy_(x.max(dim=-1).values)
            indices.copy_(x.argmax(dim=-1))

    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(0))
    values = [x, torch.empty(4), torch.empty(4, dtype=torch.int64)]
    roles, names = ["input", "output", "output"], ["in_ptr0", "out_ptr0", "out_ptr1"]
    side = Side(values, roles)
    side.fill(values)
    values[0] = side.run.guarded[0].view
    MaxAndArgmax().run(*side.arguments(values))
    before = [side.run.guarded[i].view.clone() for i in (0, 1, 2)]
    sensitivity = original_sensitivity(MaxAndArgmax(), side, values, {}, roles, names, "cpu")
    assert sensitivity is not None and set(sensitivity) == {"out_ptr0"}
    for i in (0, 1, 2):
        assert torch.equal(side.run.guarded[i].view, before[i]), names[i]
