"""Gate 4 on a busy machine: an A/B whose median clears the bar while its interval does not runs
more rounds before it is judged; an A/A never gets that far (issue 21: a real 2.5x gain was rejected
as noise on two busy cores, with a 95% interval of 0.81-3.38 from 15 rounds)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from kernelopt_core.gates.perf import CPU_ROUNDS, MAX_EXTENSIONS, perf_decision, time_processes, undecided


class FakeSide:
    """A candidate process whose `repeat` takes `per_call_s` per call, times a load factor per request."""

    def __init__(self, per_call_s: float, load: Iterator[float]):
        self.per_call_s = per_call_s
        self.load = load
        self.requests = 0

    def timed_call(self, command: str, timeout_s: float = 600.0, **request: object) -> tuple[dict, float]:
        assert command == "repeat"
        self.requests += 1
        reps = int(request["reps"])  # type: ignore[arg-type]
        return {"ok": True}, self.per_call_s * reps * next(self.load)


def _steady() -> Iterator[float]:
    return itertools.cycle([1.0, 1.01, 0.99, 1.02, 0.98])


def test_a_gain_hidden_by_busy_rounds_is_decided_by_more_rounds() -> None:
    # The first batch: every other candidate round lands on a busy core (4x slower).
    first = [1.0] * 4 + [4.0 if i % 2 else 1.0 for i in range(CPU_ROUNDS)]  # 4 warm-up/sizing requests, then rounds
    candidate = FakeSide(0.004, itertools.chain(first, _steady()))
    baseline = FakeSide(0.010, _steady())
    once = time_processes(baseline, candidate, "cpu", None, {"what": "graph"})
    assert once.rounds == CPU_ROUNDS and undecided(once, 1.03)  # the failure seen in CI

    candidate = FakeSide(0.004, itertools.chain(first, _steady()))
    baseline = FakeSide(0.010, _steady())
    result = time_processes(baseline, candidate, "cpu", None, {"what": "graph"}, decide_at=1.03)
    assert CPU_ROUNDS < result.rounds <= CPU_ROUNDS * (MAX_EXTENSIONS + 1)
    decision = perf_decision(result.speedup, result.ci_low, result.ci_high, 1.03, result.path)
    assert decision.passed, decision.reason
    assert 2.0 < result.speedup < 3.0


def test_an_unchanged_kernel_gets_no_extra_rounds_and_stays_rejected() -> None:
    baseline = FakeSide(0.010, _steady())
    candidate = FakeSide(0.010, itertools.cycle([0.99, 1.02, 1.0, 0.98, 1.01]))
    result = time_processes(baseline, candidate, "cpu", None, {"what": "graph"}, decide_at=1.03)
    assert result.rounds == CPU_ROUNDS  # the median does not clear the bar: nothing to decide
    assert not perf_decision(result.speedup, result.ci_low, result.ci_high, 1.03, result.path).passed


def test_an_interval_that_never_narrows_is_rejected_after_the_last_extension() -> None:
    baseline = FakeSide(0.010, _steady())
    candidate = FakeSide(0.004, itertools.chain([1.0] * 4, itertools.cycle([1.0, 4.0])))  # busy for good
    result = time_processes(baseline, candidate, "cpu", None, {"what": "graph"}, decide_at=1.03)
    assert result.rounds == CPU_ROUNDS * (MAX_EXTENSIONS + 1)
    decision = perf_decision(result.speedup, result.ci_low, result.ci_high, 1.03, result.path)
    assert not decision.passed and "lower bound" in decision.reason
