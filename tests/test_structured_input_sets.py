"""Gate 2's inputs drawn per input: each input set gives same-shaped inputs their own values, the aliasing run
passes one tensor twice, and each structured input set produces what its name says, per input."""

from __future__ import annotations

import math
import struct

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.input_sets import fill, zero_block_size  # noqa: E402
from kernelopt_core.gates.kernel import alias_sets, all_input_sets, kernel_input_sets  # noqa: E402
from kernelopt_core.gates.structured_input_sets import (  # noqa: E402
    LEADING_LARGE,
    LEADING_REST,
    STRUCTURED_INPUT_SETS,
    SWEEP_GROUP_ROWS,
    SWEEPS,
    constant_values,
    literal_constants,
    structured_input_sets_for,
    sweep_range,
)

ROWS, COLUMNS = 64, 96


def _filled(name: str, seed: int = 3, shape: tuple[int, ...] = (ROWS, COLUMNS), dtype=torch.float32,
            constants: tuple[float, ...] = (), reduction: bool = True) -> torch.Tensor:
    tensor = torch.full(shape, 7.0, dtype=dtype)
    fill(tensor, STRUCTURED_INPUT_SETS[name], seed=seed, row_length=shape[-1], constants=constants,
         reduction=reduction)
    return tensor


def _two_inputs() -> tuple[list, list[str], list[str]]:
    values = [torch.zeros(ROWS, COLUMNS), torch.zeros(ROWS, COLUMNS), torch.empty(ROWS, COLUMNS), ROWS]
    return values, ["input", "input", "output", "scalar"], ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]


def test_every_input_set_draws_each_same_shaped_input_on_its_own() -> None:
    values, roles, _ = _two_inputs()
    for extra in all_input_sets(torch.float32, True, COLUMNS, input_sets=[*STRUCTURED_INPUT_SETS.values()],
                             constants=(0.7,)) + all_input_sets(torch.float32, True, COLUMNS):
        extra.fill(values, roles)
        if extra.label == "inputs: all zeros":
            assert not values[0].any() and not values[1].any()
            continue
        x, y = torch.nan_to_num(values[0]), torch.nan_to_num(values[1])
        assert not torch.equal(x, y), extra.label
        share = 0.02 if "sparse" in extra.label else 0.2  # not merely a few positions apart
        assert (x != y).float().mean() > share, extra.label


def test_the_aliasing_run_passes_one_tensor_twice_with_equal_values() -> None:
    values, roles, names = _two_inputs()
    [extra] = alias_sets(values, roles, names)
    assert extra.aliases == {1: 0} and "in_ptr1 is in_ptr0" in extra.label
    extra.fill(values, roles)
    assert torch.equal(values[0], values[1]) and values[0].std() > 0.5
    # inputs of another layout or dtype, outputs and in-out buffers are never aliased
    other = [torch.zeros(ROWS, COLUMNS), torch.zeros(COLUMNS, ROWS).t(), torch.zeros(ROWS, COLUMNS, dtype=torch.float16),
             torch.empty(ROWS, COLUMNS)]
    assert alias_sets(other, ["input", "input", "input", "output"], ["a", "b", "c", "d"]) == []


def test_the_expensive_input_sets_go_to_candidates_that_add_decisions() -> None:
    values, roles, names = _two_inputs()
    plain = [s.label for s in kernel_input_sets(values, roles, names, True, COLUMNS, adds_decisions=False)]
    added = [s.label for s in kernel_input_sets(values, roles, names, True, COLUMNS, adds_decisions=True,
                                                constants=(16384.0,))]
    sweeps = [STRUCTURED_INPUT_SETS[name] for name in SWEEPS]  # a precision drop needs no decision: every candidate
    for sweep in sweeps:
        assert f"inputs: {sweep.label}" in plain
    for input_set in STRUCTURED_INPUT_SETS.values():
        if input_set not in sweeps:
            assert f"inputs: {input_set.label}" not in plain
    assert not any("the same tensor" in label for label in plain)
    extra = set(added) - set(plain)
    for input_set in STRUCTURED_INPUT_SETS.values():
        if input_set not in sweeps:
            assert f"inputs: {input_set.label}" in extra
    assert any("the same tensor passed twice" in label for label in extra)
    # no constants: no constants run
    assert "constants" not in {f.name for f in structured_input_sets_for(torch.float32, ())}
    assert structured_input_sets_for(torch.int32, (1.0,)) == []


def test_sign_blocks_are_all_positive_or_all_negative_per_block_and_differ_per_input() -> None:
    shape = (256, COLUMNS)
    x, y = _filled("sign-blocks", seed=1, shape=shape), _filled("sign-blocks", seed=2, shape=shape)
    block = zero_block_size(x.numel())
    signs = torch.sign(x.reshape(-1, block))
    positive, negative = (signs > 0).all(1), (signs < 0).all(1)
    assert positive.any() and negative.any() and (~positive & ~negative).any()
    rows = torch.sign(x)
    assert (rows > 0).all(1).any() and (rows < 0).all(1).any()  # whole rows of one sign too
    y_positive = (torch.sign(y.reshape(-1, block)) > 0).all(1)
    assert not torch.equal(positive, y_positive)  # x's positive blocks are not y's


def test_sorted_rows_are_strictly_sorted_curved_or_random() -> None:
    x = _filled("sorted-rows").double()
    steps = x[:, 1:] - x[:, :-1]
    increasing, decreasing = (steps > 0).all(1), (steps < 0).all(1)
    assert increasing.sum() >= 8 and decreasing.sum() >= 8 and (~increasing & ~decreasing).sum() >= 8
    sorted_rows = x[increasing | decreasing]
    ends = (sorted_rows[:, 0] + sorted_rows[:, -1]) / 2
    assert ((sorted_rows.mean(1) - ends).abs() > 0.05).all()  # the mean is not the mean of the ends


def test_repeated_rows_repeat_the_previous_row_or_all_but_one_element() -> None:
    x = _filled("repeated-rows")
    pairs = x.reshape(-1, 2, COLUMNS)
    differing = (pairs[:, 0] != pairs[:, 1]).sum(1)
    assert (differing == 0).sum() >= 4 and (differing == 1).sum() >= 4 and (differing > COLUMNS // 2).sum() >= 4


def test_leading_max_rows_lead_with_their_maximum() -> None:
    x = _filled("leading-max-rows")
    leads = x.argmax(1) == 0
    above = x >= LEADING_LARGE
    several = (above[:, 0] & above[:, 1]) & (x[:, 0] > x[:, 2:].max(1).values.clamp_max(LEADING_REST))
    last_larger = above[:, 0] & (x.argmax(1) == COLUMNS - 1)
    assert leads.sum() >= 8 and several.sum() >= 4 and last_larger.sum() >= 4 and (~above.any(1)).sum() >= 4


def test_sparse_rows_have_none_one_or_few_non_zero_elements() -> None:
    x = _filled("sparse-rows", shape=(64, 1024))
    non_zero = (x != 0).sum(1)
    assert (non_zero == 0).sum() >= 4 and (non_zero == 1).sum() >= 4
    assert ((non_zero > 4) & (non_zero < 40)).sum() >= 4 and ((non_zero > 80) & (non_zero < 200)).sum() >= 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_constants_are_drawn_at_and_one_ulp_beside_each_constant(dtype: torch.dtype) -> None:
    constant = 0.7
    x = _filled("constants", shape=(64, 512), dtype=dtype, constants=(constant, 16384.0))
    at = torch.tensor(constant, dtype=dtype)
    above = torch.nextafter(at.float(), torch.tensor(math.inf)).to(dtype) if dtype == torch.float32 else None
    values = set(x.float().reshape(-1).tolist())
    assert float(at) in values and -float(at) in values and 16384.0 in values
    if above is not None:
        assert float(above) in values
    info = torch.finfo(dtype)
    table = constant_values([constant], info.eps, info.tiny, info.max)
    assert len({float(torch.tensor(v, dtype=dtype)) for v in table} & values) >= 6  # the neighbours exist in dtype
    blocks = x.reshape(-1, max(1, zero_block_size(x.numel()) // 8))
    assert ((blocks == blocks[:, :1]).all(1)).any()  # whole blocks of one value (a block min/max equal to it)


def test_literal_constants_include_bit_patterns_and_put_new_constants_first() -> None:
    source = "def k(x):\n    if x > 0.7:\n        return 0x3F800000\n    return x * 2.0 + 16384\n"
    found = literal_constants(source, exclude=(2.0,))
    assert found[0] == 0.7 and 2.0 in found and found.index(2.0) > found.index(16384.0)
    assert struct.unpack("<f", struct.pack("<I", 0x3F800000))[0] in found  # 1.0, the bits' float
    assert literal_constants("def broken(:") == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_magnitude_sweep_spans_the_range_per_group_of_rows(dtype: torch.dtype) -> None:
    x = _filled("magnitude-sweep", shape=(512, 64), dtype=dtype).double()
    assert torch.isfinite(x).all()
    per_row = x.abs().amax(1)
    groups = per_row.reshape(-1, SWEEP_GROUP_ROWS)
    # rows of one group share a scale: their largest elements lie within a few of its standard deviations
    spread = groups.max(1).values / groups.min(1).values.clamp_min(1e-300)
    assert (spread[groups.min(1).values > 0] < 1e3).float().mean() > 0.9
    info = torch.finfo(dtype)
    low, high = (math.log10(max(1e-30, info.tiny * 16)), math.log10(min(1e30, info.max / 1024 / 8)))
    exponents = torch.log10(per_row[per_row >= info.tiny])
    assert exponents.min() < low + 0.2 * (high - low) and exponents.max() > high - 0.2 * (high - low)
    denormal = (x != 0) & (x.abs() < info.tiny)
    assert denormal.any(), "denormal rows"
    if dtype == torch.float32:
        assert sweep_range.__doc__ and exponents.min() < -20 and exponents.max() > 20
    # a pointwise 1-D tensor still meets many scales
    flat = _filled("magnitude-sweep", shape=(1 << 14,), dtype=dtype, reduction=False).double().abs()
    segments = flat.reshape(-1, 256).amax(1)
    assert (segments.log10().max() - segments[segments > 0].log10().min()) > 0.5 * (high - low)


class _TwoInputs:
    """Gate 2's two sides for ``out = x * y + x`` of two same-shaped inputs (original and candidate run in this
    process, on the exchange buffers the checker lays out)."""

    closed, pid = False, 0

    def __init__(self, shortcut: bool):
        self.shortcut = shortcut
        self.pointers: list[tuple[int, int]] = []

    def run(self, x, y, out, *_: object, **__: object) -> None:  # the original
        out.copy_(x * y + x)

    def call(self, command: str, timeout_s: float = 600.0, **payload: object) -> dict:  # the candidate
        from kernelopt_core.sandbox.exchange import SharedRef, TensorView, open_shared, view_of

        if command == "memory":
            return {"ok": True, "peak_bytes": None}
        shared = [SharedRef.from_json(r) for r in payload["refs"]]  # type: ignore[union-attr]
        mapped: dict[int, object] = {}
        args = []
        for a in payload["args"]:  # type: ignore[union-attr]
            if isinstance(a, dict) and "view" in a:
                buffer = a["view"]["buffer"]
                mapped.setdefault(buffer, open_shared(shared[buffer]))  # one mapping per buffer, as a process has
                args.append(view_of(mapped[buffer], TensorView.from_json(a["view"])))
            else:
                args.append(a)
        x, y, out = args[:3]
        self.pointers.append((x.data_ptr(), y.data_ptr()))
        out.copy_(x + x if self.shortcut and x.data_ptr() == y.data_ptr() else x * y + x)
        return {"ok": True}


@pytest.mark.parametrize("shortcut", [False, True])
def test_the_aliasing_run_passes_one_buffer_twice_through_gate_2(shortcut: bool) -> None:
    from kernelopt_core.gates.kernel_gate import check_kernel
    from kernelopt_core.sandbox.exchange import ExchangeArena

    values, roles, names = _two_inputs()
    values[:2] = [torch.randn(ROWS, COLUMNS), torch.randn(ROWS, COLUMNS)]
    sides = _TwoInputs(shortcut)
    arena = ExchangeArena("cpu")
    try:
        outcome = check_kernel(sides, sides, arena, "k", [values], [{}], names, roles, (0,), "cpu", reruns=0,
                               extra_sets=alias_sets(values, roles, names))
    finally:
        arena.close()
    assert sides.pointers[-1][0] == sides.pointers[-1][1]  # the last run passed one buffer twice
    assert all(x != y for x, y in sides.pointers[:-1])
    if shortcut:
        # wrong only when x is y (x + x): every other run passes it
        assert outcome.failed is not None and "the same tensor passed twice" in outcome.failed.label
    else:
        assert outcome.failed is None, outcome.failed


def _row_mean(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    out.copy_(x.mean(-1, keepdim=True).expand_as(out))


def _mean_from_ends_when_sorted(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    steps = x[:, 1:] - x[:, :-1]
    ends = ((x[:, :1] + x[:, -1:]) / 2)
    out.copy_(torch.where((steps > 0).all(-1, keepdim=True), ends, x.mean(-1, keepdim=True)).expand_as(out))


def _previous_row_reused(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    mean = x.mean(-1, keepdim=True)
    # a row whose first 4 elements equal the previous row's (and are not one constant) takes that row's result
    same = torch.zeros_like(mean, dtype=torch.bool)
    same[1:] = (x[1:, :4] == x[:-1, :4]).all(-1, keepdim=True) & (x[1:, :4] != x[1:, 1:5]).all(-1, keepdim=True)
    reused = torch.cat([mean[:1], mean[:-1]])
    out.copy_(torch.where(same, reused, mean).expand_as(out))


@pytest.mark.parametrize(("original", "candidate", "input_set"), [
    (_row_mean, _mean_from_ends_when_sorted, "sorted-rows"),
    (_row_mean, _previous_row_reused, "repeated-rows"),
])
def test_a_shortcut_keyed_on_a_row_shape_passes_the_other_input_sets_and_not_its_own(original, candidate,
                                                                                    input_set: str) -> None:
    from gate2_stand_ins import InProcessCandidate, TorchKernel

    from kernelopt_core.gates.kernel_gate import check_kernel
    from kernelopt_core.sandbox.exchange import ExchangeArena

    def gate2(input_sets: list) -> object:
        values = [torch.randn(32, COLUMNS), torch.empty(32, COLUMNS), 32, COLUMNS]
        names, roles = ["in_ptr0", "out_ptr0", "xnumel", "r0_numel"], ["input", "output", "scalar", "scalar"]
        arena = ExchangeArena("cpu")
        try:
            return check_kernel(TorchKernel(original), InProcessCandidate(candidate), arena, "k", [values], [{}],
                                names, roles, (0, 42, 1337), "cpu", extra_sets=input_sets, row_length=COLUMNS).failed
        finally:
            arena.close()

    assert gate2(all_input_sets(torch.float32, True, COLUMNS)) is None  # the seeds and the other input sets pass it
    failed = gate2(all_input_sets(torch.float32, True, COLUMNS, input_sets=[STRUCTURED_INPUT_SETS[input_set]]))
    assert failed is not None and STRUCTURED_INPUT_SETS[input_set].label in failed.label, failed


def test_whether_a_candidate_adds_decisions_is_read_from_its_source_when_the_payload_does_not_say() -> None:
    from kernelopt_core.gates.structured_input_sets import adds_decisions

    original = """
import triton
import triton.language as tl

@triton.jit
def k(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tl.store(out_ptr0 + xindex, tmp0 * 2.0, xmask)
"""
    fast_path = original.replace("tmp0 * 2.0", "tl.where(tmp0 > 3.0, tmp0 + tmp0, tmp0 * 2.0)")
    assert adds_decisions(None, original, original) is False  # the same kernel: no extra runs
    assert adds_decisions(None, original, fast_path) is True
    assert adds_decisions(None, original, "def (") is True  # unreadable: assume it does
    assert adds_decisions(False, original, fast_path) is False  # the payload's pin decides
    assert adds_decisions(None) is True


@pytest.mark.parametrize("name", sorted(STRUCTURED_INPUT_SETS))
@pytest.mark.parametrize("chunk", [37, 96 * 3 + 5])
def test_each_structured_set_depends_on_the_flat_index_only_not_the_chunking(name: str, chunk: int) -> None:
    # chunks shorter than a row and across row and pair boundaries against the whole tensor at once:
    # per-row, per-block and previous-row values must not move with the chunk's edges
    shape = (8, COLUMNS)
    whole = torch.full(shape, 7.0)
    fill(whole, STRUCTURED_INPUT_SETS[name], seed=5, row_length=COLUMNS, constants=(0.5, 3.0), reduction=True)
    pieces = torch.full(shape, 7.0)
    fill(pieces, STRUCTURED_INPUT_SETS[name], seed=5, row_length=COLUMNS, constants=(0.5, 3.0), reduction=True,
         chunk=chunk)
    assert not (whole == 7.0).all()
    assert torch.equal(torch.nan_to_num(whole), torch.nan_to_num(pieces))


def test_the_offset_sweep_puts_a_small_spread_on_offsets_of_every_magnitude() -> None:
    """A kernel invariant to a shift (a softmax, a norm) sees only a row's spread: a precision drop keyed on the
    magnitude (whole numbers only where |x| lies in (1e5, 2e6)) shows on rows of a large offset and a small
    spread, which the zero-centred sweep never draws."""
    x = _filled("offset-sweep", shape=(512, 64), dtype=torch.float32).double()
    groups = x.view(-1, 64 * SWEEP_GROUP_ROWS)
    centre = groups.mean(dim=1)
    relative = groups.std(dim=1) / centre.abs()
    assert bool(((relative > 5e-4) & (relative < 0.5)).all())
    decades = torch.log10(centre.abs())
    assert decades.min() > 1.9 and decades.min() < 6 and decades.max() > 20 and bool((centre < 0).any() and (centre > 0).any())


def test_small_tensors_meet_many_scales_and_both_signed_zeros() -> None:
    from kernelopt_core.gates.structured_input_sets import sweep_draws

    assert sweep_draws(5 * 1000, 1000, True) == 48  # five rows of a layer norm: one group a draw
    assert sweep_draws(1 << 20, 64, True) == 1 and sweep_draws(1 << 24, 4096, True) == 1
    values, roles, names = _two_inputs()
    plain = [s.label for s in kernel_input_sets(values, roles, names, True, COLUMNS, adds_decisions=False)]
    assert not any("(draw" in label for label in plain)  # a launch configuration cannot key a band: one draw
    labels = [s.label for s in kernel_input_sets(values, roles, names, True, COLUMNS, adds_decisions=True)]
    # 64 rows of 96: eight groups a draw, so each sweep is drawn six times (48 scales)
    assert sum("(draw 6)" in label for label in labels) == len(SWEEPS)
    assert not any("(draw 7)" in label for label in labels)
    signs = {math.copysign(1.0, v) for v in constant_values([0.0], 1.2e-7, 1.2e-38, 3e38) if v == 0.0}
    assert signs == {1.0, -1.0}
    zeros = torch.empty(ROWS, COLUMNS)
    fill(zeros, "zeros", seed=3)
    assert bool((zeros == 0).all()) and 0.3 < float(torch.signbit(zeros).double().mean()) < 0.7


def test_the_draws_of_a_sweep_continue_one_sequence_of_scales() -> None:
    """Five rows of a layer norm are one group a draw: over its further draws the scales leave no gap of 1.3
    decades (each at the centre of its own stratum of the range)."""
    from kernelopt_core.gates.structured_input_sets import sweep_draw, sweep_draws

    sweep = STRUCTURED_INPUT_SETS["magnitude-sweep"]
    draws = sweep_draws(5000, 1000, True)
    scales = []
    for draw in range(1, draws):
        variant = sweep_draw(sweep, draw - 1, draw + 1, draws - 1)
        x = torch.empty(5, 1000)
        fill(x, variant, seed=7, row_length=1000, reduction=True)
        scales.append(float(x.abs().max()) / 3.0)
    decades = sorted(math.log10(s) for s in scales if s > 1e-35)
    assert decades[0] < -25 and decades[-1] > 25
    assert max(b - a for a, b in zip(decades, decades[1:], strict=False)) < 1.3


def test_the_aliasing_run_is_repeated_with_the_sweep_and_the_constants() -> None:
    """A shortcut may want equal inputs and something more (x == y and |x| > 9): the aliasing run is repeated
    with the sweep's magnitudes and the candidate's constants, the aliased inputs equal in each."""
    values, roles, names = _two_inputs()
    fills = [STRUCTURED_INPUT_SETS["magnitude-sweep"], STRUCTURED_INPUT_SETS["constants"]]
    runs = alias_sets(values, roles, names, fills=fills, row_length=COLUMNS, reduction=True, constants=(0.75,))
    assert len(runs) == 3 and [r.comparison for r in runs] == ["tolerance", "magnitude", "magnitude"]
    for run in runs[1:]:
        run.fill(values, roles)
        assert torch.equal(values[0], values[1])
    assert float(values[0].abs().max()) > 1e3 or bool((values[0] == 0.75).any())
    assert bool((values[0] == 0.75).any())
