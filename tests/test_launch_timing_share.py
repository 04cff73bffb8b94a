"""Time shares never exceed 100% when timed launches add up to more than the untimed total."""

from kernelopt_core.measure.launch_timing import LaunchTiming


def _timing(launches: dict[int, float], total: float) -> LaunchTiming:
    return LaunchTiming(graph="g", launch_times_ms=launches, total_ms=total, overheads=[], path="module-call",
                        device="cuda:0", iters=10)


def test_share_basis_is_the_total_when_launches_fit_inside_it():
    assert _timing({0: 0.2, 1: 0.3}, 1.0).share_basis_ms == 1.0


def test_share_basis_is_the_launch_sum_when_timers_inflate_it():
    # H200, rmsnorm: one launch timed at 0.0707 ms inside a graph timed at 0.0683 ms without timers.
    timing = _timing({0: 0.0707}, 0.0683)
    assert timing.share_basis_ms == 0.0707
    assert timing.launch_times_ms[0] / timing.share_basis_ms <= 1.0
