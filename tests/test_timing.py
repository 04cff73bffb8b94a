"""Timing statistics on synthetic samples, and the timers on the CPU (perf_counter) path."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from kernelopt_core.measure.paths import CrossPathComparison
from kernelopt_core.measure.statistics import (
    ABResult,
    TimingStats,
    ab_speedup,
    bootstrap_median_ci,
    median_absolute_deviation,
    summarize,
)
from kernelopt_core.measure.timing import ab_compare, time_callable


def _rounds(rng: np.random.Generator, mean: float, noise: float, n: int) -> list[float]:
    return list(mean * (1.0 + noise * rng.standard_normal(n)))


def test_summary_of_known_samples() -> None:
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0], "module-call")
    assert stats.median_ms == 3.0
    assert stats.iqr_ms == pytest.approx(4.0 - 2.0)
    assert stats.mean_ms == pytest.approx(22.0)
    assert stats.min_ms == 1.0 and stats.n == 5 and stats.path == "module-call"
    assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms
    many = summarize([*range(1, 21), 1000.0], "module-call")
    assert many.ci_high_ms < 16.0  # the median's interval is not dragged by one outlier


def test_summary_is_deterministic_and_round_trips_json() -> None:
    samples = list(np.random.default_rng(1).normal(5.0, 0.3, 40))
    first, second = summarize(samples, "kernel"), summarize(samples, "kernel")
    assert (first.ci_low_ms, first.ci_high_ms) == (second.ci_low_ms, second.ci_high_ms)
    assert TimingStats.from_json(first.to_json()) == first


def test_ci_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(3)
    small = bootstrap_median_ci(rng.normal(1.0, 0.05, 10))
    large = bootstrap_median_ci(rng.normal(1.0, 0.05, 400))
    assert (large[1] - large[0]) < (small[1] - small[0]) / 2


def test_bad_samples_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="no timing samples"):
        summarize([], "kernel")
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, math.nan], "kernel")
    with pytest.raises(ValueError, match="pair up"):
        ab_speedup([1.0, 1.0], [1.0], "kernel")


@pytest.mark.parametrize("seed", range(20))
def test_one_percent_difference_with_point_two_percent_noise_is_detected(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _rounds(rng, 1.01, 0.002, 30)  # baseline 1% slower
    b = _rounds(rng, 1.00, 0.002, 30)
    result = ab_speedup(a, b, "module-call")
    assert result.ci_low > 1.0, (result.speedup, result.ci_low, result.ci_high)
    assert result.significant
    assert result.speedup == pytest.approx(1.01, abs=0.002)


def test_a_versus_a_reports_no_difference() -> None:
    contained = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        a = _rounds(rng, 1.0, 0.002, 30)
        b = _rounds(rng, 1.0, 0.002, 30)
        result = ab_speedup(a, b, "module-call")
        assert abs(result.speedup - 1.0) < 0.003
        contained += result.ci_low <= 1.0 <= result.ci_high
    assert contained >= 34  # ~95% nominal coverage; at least 85% of 40 runs


def test_paired_rounds_cancel_shared_drift() -> None:
    # Both sides drift by 20% over the run (clock ramp); B is truly 2% faster.
    drift = np.linspace(1.0, 1.2, 30)
    rng = np.random.default_rng(7)
    a = list(drift * 1.02 * (1 + 0.001 * rng.standard_normal(30)))
    b = list(drift * (1 + 0.001 * rng.standard_normal(30)))
    result = ab_speedup(a, b, "module-call")
    assert result.ci_low > 1.0 and result.speedup == pytest.approx(1.02, abs=0.01)


def test_ab_result_round_trips_json() -> None:
    result = ab_speedup([2.0, 2.1, 2.0], [1.0, 1.1, 1.0], "kernel")
    assert ABResult.from_json(result.to_json()) == result
    assert result.speedup == pytest.approx(2.0)


def test_median_absolute_deviation() -> None:
    assert median_absolute_deviation([1.0, 1.01, 0.99, 1.0, 1.5]) == pytest.approx(0.01)


# --- the timers on the CPU path --------------------------------------------------------------


def _sleeper(seconds: float):
    def run(*_args) -> None:
        time.sleep(seconds)

    return run


def test_time_callable_cpu_measures_wall_time() -> None:
    stats = time_callable(_sleeper(0.004), device="cpu", path="module-call", warmup=1, reps=7)
    assert stats.n == 7 and stats.path == "module-call"
    assert 3.5 <= stats.median_ms < 40.0
    assert stats.min_ms >= 3.5


def test_time_callable_rotates_fresh_inputs() -> None:
    made: list[int] = []
    seen: list[int] = []

    def make(i: int) -> dict:
        made.append(i)
        return {"set": i}

    stats = time_callable(lambda inputs: seen.append(inputs["set"]), device="cpu", path="kernel",
                          make_inputs=make, input_sets=3, warmup=1, reps=6)
    assert made == [0, 1, 2]
    assert stats.n == 6
    assert set(seen[1:]) == {0, 1, 2}  # after warm-up every input set is used
    assert seen[1:] == [0, 1, 2, 0, 1, 2]


def test_time_callable_checks_paths() -> None:
    with pytest.raises(ValueError):
        time_callable(_sleeper(0), device="cpu", path="not-a-path", reps=1)
    with pytest.raises(ValueError, match="graph-replay"):
        time_callable(_sleeper(0), device="cpu", path="graph-replay", reps=1)
    with pytest.raises(ValueError, match="CUDA"):
        time_callable(_sleeper(0), device="cpu", path="graph-replay", cuda_graph=True, reps=1)


def test_ab_compare_cpu_finds_the_faster_callable_and_interleaves() -> None:
    order: list[str] = []

    def a() -> None:
        order.append("a")
        time.sleep(0.006)

    def b() -> None:
        order.append("b")
        time.sleep(0.002)

    result = ab_compare(a, b, device="cpu", path_a="module-call", path_b="module-call", rounds=6,
                        reps_per_round=2, warmup=1)
    assert result.rounds == 6 and result.path == "module-call"
    assert result.speedup > 1.5 and result.ci_low > 1.0
    timed = order[2:]  # after one warm-up call each
    assert len(timed) == 24
    pairs = [timed[i:i + 2] for i in range(0, len(timed), 2)]
    assert all(sorted(p) == ["a", "b"] for p in pairs)  # A and B alternate trial by trial
    assert ["a", "b"] in pairs and ["b", "a"] in pairs  # and neither always goes first


def test_ab_compare_refuses_different_paths() -> None:
    with pytest.raises(CrossPathComparison):
        ab_compare(_sleeper(0), _sleeper(0), device="cpu", path_a="module-call",
                   path_b="compiled-callable-cudagraphs", rounds=2)


def test_recorded_launches_match_the_timeline_by_name_and_order() -> None:
    from kernelopt_core.measure.launch_recorder import match_to_timeline

    recorded = [("extern_kernels.mm", 2.0), ("k0", 0.5), ("k1", 0.25), ("k0", 0.75), ("surprise", 9.0)]
    timeline = [(0, "extern_kernels.mm"), (1, "k0"), (2, "k1"), (3, "k0"), (4, "k2")]
    assert match_to_timeline(recorded, timeline) == {0: 2.0, 1: 0.5, 2: 0.25, 3: 0.75}


def test_launch_recorder_proxies_time_and_restore() -> None:
    import types

    from kernelopt_core.measure.launch_recorder import instrument

    class Kernel:
        def run(self, *args, **kwargs):
            time.sleep(0.002)
            return "ran"

    module = types.ModuleType("fake_wrapper")
    kernel = Kernel()
    module.k0 = kernel
    module.extern_kernels = types.SimpleNamespace(mm=lambda a, b: a * b)
    with instrument(module, ["k0", "absent"], cuda=False) as recorder:
        assert module.k0.run(1, stream=0) == "ran"
        assert module.extern_kernels.mm(3, 4) == 12
        taken = recorder.take()
    assert [name for name, _ in taken] == ["k0", "extern_kernels.mm"]
    assert taken[0][1] >= 2.0
    assert module.k0 is kernel and not hasattr(module, "absent")
    assert isinstance(module.extern_kernels, types.SimpleNamespace)  # the real namespace is back
    assert module.extern_kernels.mm(2, 2) == 4
    assert recorder.take() == []  # nothing recorded after the block
