"""The search within a budget, on a stand-in clock: it stops starting candidates when the time left is
what the final gates need, runs its finalists, and reports at the deadline; a budget too small for any
finalist reports matched/fallback "budget reached"; an early finalist is verified (and written) before
the search ends and survives a later kill; the time split adds up. No device, no wall clock: the
stand-in evaluator moves the clock by a fixed time per measurement."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_search_pipeline import ELEMENTWISE, StandInEvaluator, kinds

from kernelopt_core.gates.verdict import CascadeResult
from kernelopt_core.search.deadline import CLOSING_S, FINALIZE_FLOOR_S, Budget
from kernelopt_core.search.evaluation import KernelTime, Screen
from kernelopt_core.search.pipeline import OptimizeConfig, optimize

# seconds each measurement takes on the stand-in clock
COSTS = {"launch_timing": 5.0, "facts": 3.0, "profile": 20.0, "screen": 10.0, "time": 2.0, "finalize": 30.0}


class StandInClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ClockedEvaluator(StandInEvaluator):
    """The stand-in evaluator, each measurement moving the clock by its cost (``screen_costs`` gives the
    screens' costs in turn, the last one repeating)."""

    def __init__(self, clock: StandInClock, screen_costs: list[float] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.clock = clock
        self.screen_costs = list(screen_costs or [COSTS["screen"]])

    def _spend(self, what: str) -> None:
        if what == "screen":
            self.clock.now += self.screen_costs.pop(0) if len(self.screen_costs) > 1 else self.screen_costs[0]
        else:
            self.clock.now += COSTS[what]

    def launch_timing(self) -> dict[str, Any] | None:
        self._spend("launch_timing")
        return super().launch_timing()

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        self._spend("facts")
        return super().facts(kernels)

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        self._spend("profile")
        return super().profile(kernel, sections, together)

    def screen(self, kernel: str, source: str) -> Screen:
        self._spend("screen")
        return super().screen(kernel, source)

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        self._spend("time")
        return super().time(kernel, source, screen)

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        self._spend("finalize")
        return super().finalize(candidates, gates)


def fixed_configs(faster: float = 0.9) -> Callable[[str], float]:
    """Every launch-config candidate ``faster`` (as a share of Inductor's time), everything else equal."""
    return lambda source: faster if "fixed_config" in source else 1.0


def run(tmp_path: Path, evaluator: StandInEvaluator, budget: Budget | None, **overrides: Any):
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"), **overrides)
    result = optimize(ELEMENTWISE, config=config, evaluator=evaluator, budget=budget)
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    return result, journal


def test_the_search_runs_its_finalists_when_their_reserve_stops_it_goes_on_and_reports_at_the_deadline(
        tmp_path: Path) -> None:
    from kernelopt_core.search.deadline import CANDIDATE_MARGIN

    BUDGET_S = 250.0  # noqa: N806 - a stand-in budget in which the finalist runs with a candidate's time to spare
    clock = StandInClock()
    unlimited = ClockedEvaluator(StandInClock(), latency=fixed_configs())
    _, _ = run(tmp_path / "unlimited", unlimited, None, early_stop=False)
    evaluator = ClockedEvaluator(clock, latency=fixed_configs())
    start = clock.now
    result, journal = run(tmp_path / "budget", evaluator, Budget(BUDGET_S, clock), early_stop=False)

    assert clock.now - start <= BUDGET_S  # the result was reported by the deadline
    assert 0 < evaluator.calls["screen"] < unlimited.calls["screen"]  # the budget, not the beam, ended the search
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "beam"]
    assert "a candidate takes about" in stop["detail"]
    assert evaluator.finalized and kinds(journal, "finalist")
    assert result.decision == "optimized" and result.reason.startswith("budget reached")
    assert result.budget["reached"] and result.budget["seconds"] == BUDGET_S
    # the finalist's kept time (the GPU's floor of 40 s, x 1 before one ran) stopped the next candidate: the
    # finalist ran then (30 s), and the search went on with the time it left, not leaving it idle
    kinds_in_order = [e["kind"] for e in journal]
    first_finalist = kinds_in_order.index("finalist")
    assert "screen" in kinds_in_order[first_finalist:kinds_in_order.index("budget_stop")]
    (reserve_stop,) = [e for e in journal if e["kind"] == "budget_stop"]  # recorded once, at the real end
    assert reserve_stop is stop
    # planned from this run's own measurements: a candidate 12 s (x 1.1); nothing more kept than the files
    assert stop["needed_s"] == pytest.approx(12.0 * CANDIDATE_MARGIN) and stop["left_s"] < 12.0 * CANDIDATE_MARGIN
    assert stop["detail"].startswith(f"{stop['left_s']:.0f} s left after what the run keeps")
    assert BUDGET_S - (clock.now - start) == pytest.approx(stop["left_s"] + CLOSING_S)  # less than a candidate idle
    assert BUDGET_S - (clock.now - start) < FINALIZE_FLOOR_S["cuda"] - COSTS["finalize"] + 12.0 * CANDIDATE_MARGIN + CLOSING_S

    split = result.time_split
    screens, timings = evaluator.calls["screen"], evaluator.calls["time"]
    assert split["stages"]["screen"] == pytest.approx(10.0 * screens)
    assert split["stages"]["time"] == pytest.approx(2.0 * timings)
    assert split["stages"]["finalize"] == pytest.approx(30.0 * evaluator.calls["finalize"])
    assert split["stages"]["dispatch"] == pytest.approx(5.0) and split["stages"]["profile"] == pytest.approx(20.0)
    assert split["total_s"] == pytest.approx(clock.now - start)
    assert split["screened"] == screens and split["screen_s"]["median"] == pytest.approx(10.0)
    assert split["screened_per_minute"] == pytest.approx(60.0 * screens / (10.0 * screens + 2.0 * timings))
    assert len(split["candidates"]) == screens and all(c["screen_s"] == 10.0 for c in split["candidates"])
    assert kinds(journal, "time_split") and len(kinds(journal, "candidate_time")) == screens
    saved = json.loads(Path(result.run_dir, "result.json").read_text())
    assert saved["budget_reached"] is True and saved["time_split"]["screened"] == screens
    report = Path(result.run_dir, "report.md").read_text()
    assert "budget reached" in report and "## Time" in report and "per minute" in report


def test_a_budget_too_small_for_a_finalist_reports_matched_budget_reached(tmp_path: Path) -> None:
    clock = StandInClock()
    # the second screen takes 100 s: the final gates now look like 150 s, more than is left
    evaluator = ClockedEvaluator(clock, screen_costs=[10.0, 100.0, 100.0], latency=fixed_configs())
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(200.0, clock), use_ncu=False)
    assert evaluator.calls["screen"] == 2 and not evaluator.finalized
    assert result.decision == "matched" and result.reason.startswith("budget reached")
    assert "did not go through the final gates within the budget" in result.reason
    assert {s["stage"] for s in result.budget["stops"]} == {"beam", "finalists"}
    assert clock.now - start <= 200.0


def test_a_budget_too_small_for_any_candidate_reports_fallback_budget_reached(tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=fixed_configs())
    # dispatch and facts take 8 s: 12 s are left, less than one candidate (the GPU's 15-s prior) and the files
    result, _ = run(tmp_path, evaluator, Budget(20.0, clock))
    assert evaluator.calls["screen"] == 0 and evaluator.calls["profile"] == 0  # not even ncu: no time to use it
    assert result.decision == "fallback" and result.reason.startswith("budget reached")
    assert "no rewrite applied" in result.reason


def test_no_budget_never_stops_the_search(tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=fixed_configs())
    result, journal = run(tmp_path, evaluator, Budget(None, clock), iterations=2, early_stop=False)
    assert not kinds(journal, "budget_stop") and not result.budget["reached"]
    assert "budget reached" not in result.reason and result.budget["seconds"] is None


def two_wins(source: str) -> float:
    """Launch configs at XBLOCK=2048 are 1.67x faster than Inductor's kernel, the other ones 1.25x."""
    if "'XBLOCK': 2048" in source:
        return 0.6
    return 0.8 if "fixed_config" in source else 1.0


def test_an_early_finalist_is_verified_before_the_search_ends_and_a_better_one_replaces_it(tmp_path: Path) -> None:
    evaluator = StandInEvaluator(latency=two_wins)
    # three iterations: fast_math (the kernel's tanh) takes one of the first plans
    result, journal = run(tmp_path, evaluator, None, early_stop=False, iterations=3)
    finalists = kinds(journal, "finalist")
    early = [f for f in finalists if f["early"]]
    assert len(early) >= 2 and early[0]["accepted"] and early[0]["speedup"] == pytest.approx(1.25)
    positions = {id(e): i for i, e in enumerate(journal)}
    last_candidate = max(i for i, e in enumerate(journal) if e["kind"] == "candidate")
    assert positions[id(early[0])] < last_candidate  # verified while the search went on
    written = kinds(journal, "result_written")
    assert written[0]["final"] is False and written[0]["speedup"] == pytest.approx(1.25)
    assert written[-1]["speedup"] == pytest.approx(1 / 0.6)  # the better one, through the same gates
    assert result.decision == "optimized" and result.speedup == pytest.approx(1 / 0.6)
    assert "'XBLOCK': 2048" in result.accepted_sources[result.kernels[0]["name"]]
    assert json.loads(Path(result.run_dir, "result.json").read_text())["final"] is True


def test_an_early_finalist_survives_a_later_kill(tmp_path: Path) -> None:
    killed = StandInEvaluator(latency=two_wins, stop_after_screens=3)
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"))
    with pytest.raises(KeyboardInterrupt):  # the hard kill, in the middle of the search
        optimize(ELEMENTWISE, config=config, evaluator=killed)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    saved = json.loads((run_dir / "result.json").read_text())
    assert saved["decision"] == "optimized" and saved["final"] is False
    assert saved["speedup"] == pytest.approx(1.25) and saved["accepted_kernels"]
    assert (run_dir / "final.diff").read_text().startswith("---")
    assert "fixed_config" in (run_dir / "optimized_kernel.py").read_text()
    report = (run_dir / "report.md").read_text()
    assert "provisional" in report and "**decision: optimized**" in report


class SanitizerLimitSeen(ClockedEvaluator):
    """Records the compute-sanitizer limit each finalist was given (GateEvaluator's field of that name)."""

    sanitizer_timeout_s = 600.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits: list[tuple[float, float]] = []  # (limit, seconds left on the clock) at each finalist

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        self.limits.append((self.sanitizer_timeout_s, self.deadline - self.clock.now))
        return super().finalize(candidates, gates)


def test_a_finalists_sanitizers_get_their_share_of_what_the_budget_leaves(tmp_path: Path) -> None:
    from kernelopt_core.search.deadline import SANITIZER_MAX_S, SANITIZER_MIN_S, SANITIZER_SHARE

    clock = StandInClock()
    evaluator = SanitizerLimitSeen(clock, latency=fixed_configs())
    evaluator.deadline = clock.now + 400.0
    result, _ = run(tmp_path, evaluator, Budget(400.0, clock), early_stop=False)
    assert evaluator.limits, "no finalist ran"
    for limit, left in evaluator.limits:
        # one kernel, so no other kernel's reserve: the share of what is left, within the bounds
        assert limit == pytest.approx(min(SANITIZER_MAX_S, max(SANITIZER_MIN_S, SANITIZER_SHARE * (left - 2.0))))
        assert limit < left  # the tools run side by side and leave the finalist's other gates their time
    unlimited = SanitizerLimitSeen(StandInClock(), latency=fixed_configs())
    unlimited.deadline = float("inf")
    run(tmp_path / "unlimited", unlimited, None, iterations=1, budget_s=0)  # --budget 0: no limit
    assert unlimited.limits and all(limit == SANITIZER_MAX_S for limit, _ in unlimited.limits)


def test_the_runs_first_candidate_does_not_set_the_cost_of_the_next() -> None:
    """The first candidate pays the run's one-time costs (on the H200 the compile zygote's 16 s start, in
    its gate-1 compile); planning the next at that cost leaves room for too few."""
    from kernelopt_core.search.deadline import CANDIDATE_MARGIN, FIRST_CANDIDATE_SHARE, PRIORS_S, Schedule
    from kernelopt_core.search.time_split import CandidateTime, TimeSplit

    clock = StandInClock()
    times = TimeSplit(clock)
    schedule = Schedule(Budget(600.0, clock).start(), times, device_kind="cuda")
    prior = PRIORS_S["cuda"]["candidate"]
    assert schedule.candidate_s() == prior
    times.candidates.append(CandidateTime("c1", "k", "f", screen_s=4.0 * prior))  # a cold first one
    assert schedule.candidate_s() == pytest.approx(max(prior, FIRST_CANDIDATE_SHARE * 4.0 * prior))
    assert schedule.candidate_s() < 4.0 * prior
    times.candidates.append(CandidateTime("c2", "k", "f", screen_s=0.5 * prior))
    # from the second on, the measured ones after the first (with the margin), the cold first left out
    assert schedule.candidate_s() == pytest.approx(0.5 * prior * CANDIDATE_MARGIN)
    times.candidates.append(CandidateTime("c3", "k", "f", screen_s=0.8 * prior, replayed=True))
    assert schedule.candidate_s() == pytest.approx(0.5 * prior * CANDIDATE_MARGIN)  # a replayed one costs nothing


def test_a_cheap_familys_candidate_uses_the_tail_a_dear_one_no_longer_fits() -> None:
    """On the H100 layer_norm stopped with 10 s left because its slowest candidate took 14 s, while its
    launch-config variants took 8 s: each family is planned at its own measured cost."""
    from kernelopt_core.search.deadline import CANDIDATE_MARGIN, CLOSING_S, Schedule
    from kernelopt_core.search.time_split import CandidateTime, TimeSplit

    clock = StandInClock()
    times = TimeSplit(clock)
    budget = Budget(100.0, clock).start()
    schedule = Schedule(budget, times, device_kind="cuda")
    times.candidates.append(CandidateTime("c1", "k", "program_order", screen_s=30.0))  # the run's cold first
    for label, family, seconds in (("c2", "program_order", 14.0), ("c3", "launch_config", 6.0),
                                   ("c4", "launch_config", 8.0), ("c5", "eviction_hints", 12.0)):
        times.candidates.append(CandidateTime(label, "k", family, screen_s=seconds))
    assert schedule.candidate_s("launch_config") == pytest.approx(8.0 * CANDIDATE_MARGIN)
    assert schedule.candidate_s("program_order") == pytest.approx(14.0 * CANDIDATE_MARGIN)
    assert schedule.candidate_s("llm") == pytest.approx(14.0 * CANDIDATE_MARGIN)  # unmeasured: the slowest of any
    assert schedule.cheapest_candidate_s() == pytest.approx(8.0 * CANDIDATE_MARGIN)
    clock.now += 100.0 - (10.0 + CLOSING_S)  # 10 s left after the files
    assert schedule.may_start_candidate("k", 1, float("inf"), quiet=True, family="launch_config")
    assert schedule.may_start_candidate("k", 1, float("inf"), quiet=True)  # before planning: the cheapest fits
    assert not schedule.may_start_candidate("k", 1, float("inf"), family="program_order")
    (stop,) = schedule.stops
    assert "a candidate takes about 15 s" in stop.detail


def test_the_reserve_holds_one_finalist_once_one_is_worth_it_and_the_largest_kernel_gets_its_share() -> None:
    """On the H200, a finalist reserved for each of three kernels (152 s) was more than the 128 s the run had:
    layer_norm_16_rows' main kernel (77% of the graph) got no candidate and 67 s went unused. The reserve
    holds at most one finalist, and only once a candidate is worth finalizing; its beam gets its share of
    the graph time of the kernels left; a finalist of the kernel in hand is not held back for the kernels
    after it."""
    from kernelopt_core.search.deadline import CLOSING_S, Schedule
    from kernelopt_core.search.time_split import TimeSplit

    clock = StandInClock()
    pending = [False]
    schedule = Schedule(Budget(128.0, clock).start(), TimeSplit(clock), device_kind="cuda",
                        finalist_pending=lambda: pending[0])
    finalist = schedule.finalize_s()
    # nothing worth finalizing yet: nothing is kept from the search but the files
    assert schedule.reserve_s(3) == schedule.reserve_s(1) == pytest.approx(CLOSING_S)
    assert schedule.kernel_deadline(3, weight=0.77) - clock.now == pytest.approx(0.77 * (128.0 - CLOSING_S))
    pending[0] = True
    assert schedule.reserve_s(3) == schedule.reserve_s(1) == pytest.approx(finalist + CLOSING_S)
    assert schedule.reserve_s(0) == pytest.approx(CLOSING_S)
    assert schedule.may_start_candidate("main", 3, schedule.kernel_deadline(3, weight=0.77))
    spare = 128.0 - finalist - CLOSING_S
    assert schedule.kernel_deadline(3, weight=0.77) - clock.now == pytest.approx(0.77 * spare)
    assert schedule.kernel_deadline(3) - clock.now == pytest.approx(spare / 3)  # no shares known: equal ones
    assert schedule.kernel_deadline(1, weight=0.1) == float("inf")  # the last kernel: all but the reserve
    clock.now += 128.0 - finalist - CLOSING_S  # exactly one finalist left
    assert schedule.may_finalize("main")
    assert not schedule.may_start_candidate("main", 2, float("inf"))
    assert not schedule.stops[-1].detail.startswith("-")
    assert "the final gates' reserve" in schedule.stops[-1].detail


class FamilyCostEvaluator(ClockedEvaluator):
    """Launch-config candidates screen in 2 s, every other family's in 20 s."""

    def screen(self, kernel: str, source: str) -> Screen:
        self.screen_costs = [2.0 if "fixed_config" in source else 20.0]
        return super().screen(kernel, source)


def test_at_the_tail_a_dear_familys_plan_is_passed_over_for_a_cheap_one(tmp_path: Path) -> None:
    """With 20 s left a 22-s eviction-hints candidate no longer fits, but a 4-s launch-config one does: the
    first plan is passed over, not the end of the search."""
    clock = StandInClock()
    evaluator = FamilyCostEvaluator(clock, latency=lambda source: 1.0)
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(170.0, clock), early_stop=False, iterations=20)
    skipped = kinds(journal, "plan_skipped")
    assert skipped and all(e["family"] != "launch_config" for e in skipped)
    order = [e["kind"] for e in journal]
    after = [e for e in journal[order.index("plan_skipped"):] if e["kind"] == "candidate"]
    assert after, "a cheaper candidate ran after a dear plan was passed over"
    assert clock.now - start <= 170.0
    assert result.budget["reached"]  # the budget, not the plans, ended the search
    assert not kinds(journal, "nothing_left")
