"""The magnitude floor's nudge on inputs whose terms cancel: a windowed sum of 8 taps over the constants set
(532480 and -532480 beside unit values) rounds differently in another order, by up to an ulp of 532480, and the
original does too. Moved by a flipped last bit, x and -x moved alike and the original's outputs did not move, so
the floor stayed at a few ulps of the output and a correct blockscan was rejected (14280 elements at 12.9 GB on
an H100, results/h100/session17). Every input moved up, a sum rises whatever cancels, and the floor sees it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.error_structure import MAGNITUDE_RTOL, magnitude_floor  # noqa: E402
from kernelopt_core.gates.input_sets import fill  # noqa: E402
from kernelopt_core.gates.kernel import nudge_last_bit, nudge_up, undo_nudge  # noqa: E402
from kernelopt_core.gates.structured_input_sets import structured_input_sets_for  # noqa: E402

# the windowed avg-pool candidate's constants (65536 columns, blocks of 8, 65 tiles of 128 groups)
CONSTANTS = (65.0, 128.0, 532480.0, 0.0, 8.0, 1.0, 4.0, 65536.0, 65537.0)


def _pool(x: torch.Tensor, order: str) -> torch.Tensor:
    """avg_pool1d(kernel 8, stride 1, padding 4) as float32 sums in a given order of the 8 taps."""
    padded = torch.nn.functional.pad(x, (4, 4))
    taps = [padded[:, k:k + x.shape[1] + 1] for k in range(8)]
    if order == "left to right":  # Inductor's
        total = taps[0].clone()
        for tap in taps[1:]:
            total = total + tap
    else:  # a scan's tree
        total = ((taps[0] + taps[1]) + (taps[2] + taps[3])) + ((taps[4] + taps[5]) + (taps[6] + taps[7]))
    return total / 8


def _beyond_floor(nudge: str) -> int:
    x = torch.empty(24, 65536)
    constants_set = {s.name: s for s in structured_input_sets_for(torch.float32, CONSTANTS)}["constants"]
    fill(x, constants_set, seed=3, row_length=None, chunk=1 << 20, constants=CONSTANTS, reduction=False)
    original, reordered = _pool(x, "left to right"), _pool(x, "tree")
    if nudge == "up":
        undo = nudge_up(x)
        assert undo is not None
        nudged = _pool(x, "left to right")
        undo_nudge(x, undo)
    else:
        nudge_last_bit(x)
        nudged = _pool(x, "left to right")
        nudge_last_bit(x)
    floor = magnitude_floor(nudged, original, None, fused=False)
    limit = floor.limits(0, original.numel()).reshape(original.shape)
    difference = (reordered - original).abs()
    return int(((difference > limit) & (difference > MAGNITUDE_RTOL * original.abs())).sum())


def test_a_reordered_window_sum_of_cancelling_taps_is_within_the_floor_of_the_nudge_up() -> None:
    assert _beyond_floor("flipped bit") > 0  # the set does hold such windows: the old nudge rejected them
    assert _beyond_floor("up") == 0
