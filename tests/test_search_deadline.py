"""The budget goes to the search, on a stand-in clock: no finalist's time is kept before a candidate is worth
finalizing, so a run with nothing worth finalizing searches until its deadline less one candidate; a candidate
found too late for the final gates is reported "found, not verified within the budget" with its kernel speedup;
with configuration changes allowed the search still screens candidates and the check runs in its slot, in the
search's worker once the working sets the search keeps are released (a stand-in allocator counts who holds
one); a check that cannot fit is reported "not verified" with the accounting's measured figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_search_budget import COSTS, ClockedEvaluator, StandInClock, fixed_configs, run
from test_search_pipeline import kinds

from kernelopt_core.gates.verdict import CascadeResult
from kernelopt_core.recommend import ConfigNotVerified, ConfigVerdict
from kernelopt_core.search.deadline import CANDIDATE_MARGIN, CLOSING_S, Budget
from kernelopt_core.search.evaluation import KernelTime, Screen

ROOT = Path(__file__).resolve().parents[1]
RELU = json.loads((ROOT / "benchmarks" / "results" / "h200" / "accounting.json").read_text())["accountings"][
    "relu_6p4GB"]  # the H200's accounting of a graph whose CUDA-graph input copy is half of the callable
# The stand-in run finds its win with 69 s left: a finalist (60 s, the GPU floor) fits, a finalist and the
# configuration check's 30-s slot together do not.
BUDGET_WIN_BEFORE_CHECK_S = 145.0
CANDIDATE_S = COSTS["screen"] + COSTS["time"]  # one stand-in candidate: its screen and its kernel timing


def slower(source: str) -> float:
    """Every candidate 10% slower than Inductor's kernel: nothing is worth finalizing."""
    return 1.1 if "fixed_config" in source else 1.0


def test_with_nothing_worth_finalizing_the_search_goes_on_until_its_deadline_less_one_candidate(
        tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=slower)
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(200.0, clock), early_stop=False, iterations=20)
    used = clock.now - start
    # it stopped only when one more candidate (12 s measured, planned at x 1.25) and the files no longer fit
    assert 200.0 - used < CANDIDATE_S * CANDIDATE_MARGIN + CLOSING_S
    assert used <= 200.0
    assert not evaluator.finalized and not kinds(journal, "finalist")  # no finalist's time was kept, none ran
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "beam"]
    assert "after what the run keeps" in stop["detail"]
    (end,) = kinds(journal, "budget_end")
    assert end["reason"] == "the time left is less than one more candidate"
    assert result.decision == "matched" and result.found_unverified == []
    # the old reserve (a GPU finalist: at least 60 s) would have stopped it more than 60 s before its deadline
    assert evaluator.calls["screen"] >= (200.0 - 8.0 - 20.0 - 62.0) // CANDIDATE_S + 3


def test_a_candidate_found_too_late_for_the_final_gates_is_reported_with_its_kernel_speedup(tmp_path: Path) -> None:
    clock = StandInClock()
    # 1.111x, below the early-finalist margin: it waits for the beam's end, when a finalist (60 s) no longer fits
    evaluator = ClockedEvaluator(clock, latency=fixed_configs(0.9))
    result, journal = run(tmp_path, evaluator, Budget(100.0, clock), early_stop=False)
    assert evaluator.calls["screen"] >= 1 and not evaluator.finalized
    (found,) = result.found_unverified
    assert found["status"] == "found, not verified within the budget"
    assert found["kernel_speedup"] == pytest.approx(1 / 0.9) and found["ci"] == pytest.approx([1.1, 1 / 0.9 * 1.01])
    assert found["candidate"] in {c["label"] for c in result.time_split["candidates"]}
    assert result.decision == "matched" and "found, not verified within the budget" in result.reason
    assert "kernel speedup 1.111x" in result.reason
    (entry,) = kinds(journal, "found_unverified")
    assert entry["node"] == found["candidate"]
    saved = json.loads(Path(result.run_dir, "result.json").read_text())
    assert saved["found_unverified"] == result.found_unverified
    report = Path(result.run_dir, "report.md").read_text()
    line = next(line for line in report.splitlines() if "found, not verified within the budget" in line)
    assert found["candidate"] in line and "1.111x" in line


def later_win() -> Any:
    """Launch-config candidates 1.25x faster than Inductor's kernel, from the third distinct one on 1.67x."""
    seen: list[str] = []

    def latency(source: str) -> float:
        if "fixed_config" not in source:
            return 1.0
        if source not in seen:
            seen.append(source)
        return 0.8 if seen.index(source) < 2 else 0.6
    return latency


def test_a_faster_candidate_found_too_late_is_reported_beside_the_accepted_one(tmp_path: Path) -> None:
    """Problem 92 on the H100 (session 20): a second fast-math candidate (kernel 1.279x against the accepted
    1.249x) came with 9 s left, too little for its gates, and went unreported."""
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=later_win())
    result, journal = run(tmp_path, evaluator, Budget(140.0, clock), early_stop=False, iterations=3)
    assert result.decision == "optimized" and result.speedup == pytest.approx(1.25)
    (found,) = result.found_unverified
    assert found["kernel_speedup"] == pytest.approx(1 / 0.6) and found["status"] == "found, not verified within the budget"
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "finalists"]
    assert stop["left_s"] < stop["needed_s"]
    report = Path(result.run_dir, "report.md").read_text()
    line = next(line for line in report.splitlines() if "found, not verified within the budget" in line)
    assert found["candidate"] in line and "1.667x" in line
    # one no faster than the accepted one is not reported
    clock = StandInClock()
    same = ClockedEvaluator(clock, latency=fixed_configs(0.8))
    result, _ = run(tmp_path / "same", same, Budget(140.0, clock), early_stop=False, iterations=3)
    assert result.decision == "optimized" and result.found_unverified == []


def test_a_candidate_worth_finalizing_in_time_is_finalized_not_reported_unverified(tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=fixed_configs(0.9))
    result, journal = run(tmp_path, evaluator, Budget(250.0, clock), early_stop=False)
    assert evaluator.finalized and result.decision == "optimized" and result.found_unverified == []
    # the finalist's time was kept from the first candidate worth it on; when that alone stopped the next
    # candidate, the finalist ran, and the search went on with what it left (until less than a candidate)
    order = [e["kind"] for e in journal]
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "beam"]
    assert order.index("finalist") < order.index("budget_stop")
    assert "screen" in order[order.index("finalist"):order.index("budget_stop")]
    assert "after what the run keeps" in stop["detail"] and stop["left_s"] < stop["needed_s"]


class DeviceLedger:
    """A stand-in allocator: which processes hold a working set on the device, and the most at once."""

    def __init__(self) -> None:
        self.holders: set[str] = set()
        self.most = 0
        self.events: list[str] = []

    def hold(self, who: str) -> None:
        self.holders.add(who)
        self.most = max(self.most, len(self.holders))
        self.events.append(f"hold {who}")

    def drop(self, who: str) -> None:
        self.holders.discard(who)
        self.events.append(f"drop {who}")


class ConfigEvaluator(ClockedEvaluator):
    """The clocked stand-in with the search's kept working sets (the baseline's timing process and the kept
    candidate) and a configuration check in the same worker; ``check_s`` is what a check takes."""

    def __init__(self, clock: StandInClock, ledger: DeviceLedger, check_s: float = 30.0, **kwargs: Any):
        super().__init__(clock, **kwargs)
        self.ledger = ledger
        self.check_s = check_s
        self.checks: list[tuple[str, float]] = []  # (option, the time it was given)

    def screen(self, kernel: str, source: str) -> Screen:
        self.ledger.hold("candidate process")  # kept for the kernel timing that follows
        return super().screen(kernel, source)

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        self.ledger.hold("baseline timing process")  # the original graph and its arguments, kept per graph
        return super().time(kernel, source, screen)

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        self.ledger.hold("candidate process")
        return super().finalize(candidates, gates)

    def release(self) -> dict[str, Any]:
        held = sorted(self.ledger.holders)
        for who in held:
            self.ledger.drop(who)
        return {"closed": held}

    def verify_config(self, problem: str, option: Any, baseline_mode: str, timeout_s: float) -> ConfigVerdict:
        self.checks.append((option.name, timeout_s))
        self.ledger.hold("configuration check")
        try:
            if self.check_s > timeout_s:  # the worker's limit ends it, as a real worker's timeout does
                self.clock.now += timeout_s
                raise ConfigNotVerified(f"the check ran past the {timeout_s:.0f} s that were left for it")
            self.clock.now += self.check_s
            return ConfigVerdict(accepted=option.name == "mode", reason="stand-in", change=dict(option.change),
                                 baseline_mode=baseline_mode, gates=[{"gate": 3, "passed": True}],
                                 speedup=2.1, ci=(2.05, 2.15), baseline_path="compiled-callable-cudagraphs",
                                 candidate_path="compiled-callable", option=option.name)
        finally:
            self.ledger.drop("configuration check")


def config_run(tmp_path: Path, evaluator: ConfigEvaluator, budget: Budget, **overrides: Any):
    from test_search_pipeline import ELEMENTWISE

    from kernelopt_core.search.pipeline import OptimizeConfig, optimize

    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"),
                            allow_config_changes=True, **overrides)
    result = optimize(ELEMENTWISE, config=config, evaluator=evaluator, budget=budget, problem=__file__,
                      accounting=RELU)
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    return result, journal


def test_with_configuration_changes_the_search_still_screens_and_the_check_runs_alone(tmp_path: Path) -> None:
    clock, ledger = StandInClock(), DeviceLedger()
    evaluator = ConfigEvaluator(clock, ledger, check_s=12.0, latency=slower)  # the H100: 9-23 s for both
    start = clock.now
    result, journal = config_run(tmp_path, evaluator, Budget(180.0, clock), early_stop=False, iterations=20)
    assert clock.now - start <= 180.0
    # the search got what the check's slot left: several candidates, not none
    assert evaluator.calls["screen"] >= 5
    (plan,) = kinds(journal, "config_plan")
    assert plan["recommended"] and plan["slot_s"] == pytest.approx(30.0)  # the GPU's prior, under 40% of 180 s
    # both options were checked, each after the search's working sets were given back
    assert [name for name, _ in evaluator.checks] == ["mode", "static-inputs"]
    assert ledger.most == 2  # the search's own two processes, never a third beside the check
    first_check = ledger.events.index("hold configuration check")
    assert not {e for e in ledger.events[:first_check] if e.startswith("hold")} - {
        f"hold {who}" for who in ("candidate process", "baseline timing process")}
    held_at_check = {e[5:] for e in ledger.events[:first_check] if e.startswith("hold")} - {
        e[5:] for e in ledger.events[:first_check] if e.startswith("drop")}
    assert held_at_check == set()  # nothing of the search's was still held when the check took the device
    change = result.config_change
    assert change["chosen"] == "mode" and change["verified"]["accepted"]
    assert any(s.startswith("verified:") for s in result.suggestions)
    assert kinds(journal, "released")


def test_memory_the_check_and_the_search_never_hold_a_working_set_at_once(tmp_path: Path) -> None:
    """The property itself, checked at every hold: the configuration check never sees another holder."""
    clock, ledger = StandInClock(), DeviceLedger()
    seen: list[set[str]] = []

    class Watching(ConfigEvaluator):
        def verify_config(self, problem: str, option: Any, baseline_mode: str, timeout_s: float) -> ConfigVerdict:
            seen.append(set(ledger.holders))
            return super().verify_config(problem, option, baseline_mode, timeout_s)

    evaluator = Watching(clock, ledger, latency=fixed_configs(0.9))  # with a finalist too
    config_run(tmp_path, evaluator, Budget(400.0, clock), early_stop=False)
    assert evaluator.finalized and seen and all(holders == set() for holders in seen)


def test_a_check_that_cannot_fit_reports_the_recommendation_not_verified_with_its_measured_figure(
        tmp_path: Path) -> None:
    clock, ledger = StandInClock(), DeviceLedger()
    evaluator = ConfigEvaluator(clock, ledger, check_s=500.0, latency=slower)  # longer than the whole budget
    start = clock.now
    result, journal = config_run(tmp_path, evaluator, Budget(180.0, clock), early_stop=False, iterations=20)
    assert clock.now - start <= 180.0 and evaluator.calls["screen"] >= 5
    change = result.config_change
    verified = change["verified"]
    assert change["chosen"] is None and verified["not_verified"] is True
    assert verified["measured_speedup"] == pytest.approx(6.9094719886779785 / 3.222000002861023)
    assert "measured 2.14x through the full callable" in verified["reason"]
    assert any(s.startswith("not verified") and "2.14x" in s for s in result.suggestions)
    report = Path(result.run_dir, "report.md").read_text()
    assert "not verified:" in report and "2.14x" in report
    assert not [e for e in journal if e["kind"] == "config_change"]  # a resumed run with time left checks it


def test_a_kernel_win_goes_to_the_final_gates_before_the_configuration_checks_slot(tmp_path: Path) -> None:
    """A candidate worth finalizing, with less time left than a finalist and the check's slot together: the
    finalist runs (a check left without time is still reported with its measured figure, a win dropped here
    would be lost). Before, the slot was kept from the finalist, which was reported found-unverified while
    the search stopped for a finalist that never ran (an H100 bench run of avg_pool1d)."""
    clock, ledger = StandInClock(), DeviceLedger()
    evaluator = ConfigEvaluator(clock, ledger, check_s=10.0, latency=fixed_configs(0.9))
    result, journal = config_run(tmp_path, evaluator, Budget(BUDGET_WIN_BEFORE_CHECK_S, clock), early_stop=False)
    assert evaluator.finalized and result.decision == "optimized" and result.found_unverified == []
    assert not [e for e in kinds(journal, "budget_stop") if e["stage"] == "finalists"]
    assert result.config_change is not None and result.config_change["verified"] is not None


def test_the_configuration_check_runs_when_its_slot_alone_stops_the_search_and_the_search_goes_on(
        tmp_path: Path) -> None:
    """The check's slot (30 s, the GPU's prior) is larger than the check (12 s): when only the slot stops the
    next candidate, the check runs then, alone on the device, and the search screens on with what it left;
    at the end its verdicts are read back, not checked again."""
    clock, ledger = StandInClock(), DeviceLedger()
    warm_ups: list[float] = []

    class Warming(ConfigEvaluator):
        def warm_up(self) -> None:
            warm_ups.append(self.clock.now)

    evaluator = Warming(clock, ledger, check_s=6.0, latency=slower)
    start = clock.now
    result, journal = config_run(tmp_path, evaluator, Budget(180.0, clock), early_stop=False, iterations=20)
    used = clock.now - start
    order = [e["kind"] for e in journal]
    (now,) = kinds(journal, "config_now")
    assert now["left_s"] >= CANDIDATE_S  # it would have stopped here with a candidate's time and more unused
    check_at = order.index("config_now")
    assert order.index("released") > check_at and "config_change" in order[check_at:]
    assert order[check_at:].count("screen") >= 2  # the search went on after the check
    assert [name for name, _ in evaluator.checks] == ["mode", "static-inputs"]  # once each, read back at the end
    assert len(warm_ups) == 2  # the search's processes started again after the check gave them back
    # what is left at the end is less than one more candidate and the files: the slot's unused part was searched
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "beam"]
    assert "after what the run keeps" in stop["detail"]
    assert 180.0 - used < CANDIDATE_S * CANDIDATE_MARGIN + CLOSING_S and used <= 180.0
    assert result.config_change["chosen"] == "mode" and result.config_change["verified"]["accepted"]
    split = result.time_split  # the check inside the beam is counted once, as "config"
    assert sum(split["stages"].values()) == pytest.approx(split["total_s"], abs=0.01)
    assert split["stages"]["config"] >= 2 * 6.0


def test_a_run_with_nothing_left_to_try_ends_early_and_says_so(tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=slower)
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(600.0, clock), early_stop=False, iterations=1, plans=1,
                          beam_width=1, retries=1)
    used = clock.now - start
    assert used < 100.0 and evaluator.calls["screen"] >= 1  # one plan of one node: nothing more to try
    assert not result.budget["reached"] and not result.budget["stops"]
    (ended,) = result.budget["nothing_left"]
    assert ended["reason"] == "all 1 iterations ran (--iterations)"
    assert result.budget["left_s"] == pytest.approx(600.0 - used)
    (entry,) = kinds(journal, "nothing_left")
    assert entry["kernel"] == ended["kernel"] and entry["reason"] == ended["reason"]
    report = Path(result.run_dir, "report.md").read_text()
    assert f"nothing left to try for `{ended['kernel']}` (all 1 iterations ran (--iterations))" in report


def test_a_beam_whose_last_iteration_found_nothing_says_so(tmp_path: Path) -> None:
    clock = StandInClock()
    evaluator = ClockedEvaluator(clock, latency=slower)
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(3600.0, clock), early_stop=False, iterations=60, plans=1,
                          retries=1, use_beam=False)  # greedy: one node, one plan an iteration
    assert clock.now - start < 1800.0 and not result.budget["reached"]
    (ended,) = result.budget["nothing_left"]
    assert ended["reason"] == "all 60 iterations ran (--iterations), the last with no new candidate"
    last = kinds(journal, "iteration_done")[-1]
    assert last["children"] == [] and last["iteration"] == 60


def test_an_accepted_rewrite_keeps_the_callers_confirmation_time_sized_from_gate_4(tmp_path: Path) -> None:
    """The bench confirms an accepted graph with an A/B of its own after the run: nothing is kept for it
    before a rewrite is accepted, then twice gate 4's measured A/B (the floor when that is shorter)."""
    from kernelopt_core.search.deadline import CONFIRM_FACTOR, CONFIRM_FLOOR_S, confirmation_s

    class TimedGate4(ClockedEvaluator):
        def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
            cascade = super().finalize(candidates, gates)
            for verdict in cascade.gates:
                if verdict.gate == 4:
                    verdict.seconds = 4.0
            return cascade

    clock = StandInClock()
    evaluator = TimedGate4(clock, latency=fixed_configs(0.9))
    start = clock.now
    result, journal = run(tmp_path, evaluator, Budget(240.0, clock), early_stop=False, keep_for_confirmation=True)
    assert result.decision == "optimized"
    assert result.budget["estimates_s"]["confirm"] == pytest.approx(CONFIRM_FACTOR * 4.0)
    (stop,) = [e for e in kinds(journal, "budget_stop") if e["stage"] == "beam"]
    left = 240.0 - (clock.now - start)
    assert left == pytest.approx(stop["left_s"] + CONFIRM_FACTOR * 4.0 + CLOSING_S)  # kept for the caller's A/B
    assert stop["left_s"] < stop["needed_s"]
    # without a caller's A/B nothing is kept for one
    other = StandInClock()
    plain, _ = run(tmp_path / "plain", TimedGate4(other, latency=fixed_configs(0.9)), Budget(240.0, other),
                   early_stop=False)
    assert "confirm" not in plain.budget["estimates_s"]
    assert confirmation_s(None) == confirmation_s(0.5) == CONFIRM_FLOOR_S


def test_the_configuration_check_runs_first_when_its_slot_alone_stops_the_ncu_profile(tmp_path: Path) -> None:
    """A profile and one candidate (35 s + 15 s, the GPU's priors) fit only without the check's 30-s slot: the
    check (two options, 6 s each) runs first, and the profile has what it left, instead of the kernel going unprofiled."""
    clock, ledger = StandInClock(), DeviceLedger()
    evaluator = ConfigEvaluator(clock, ledger, check_s=6.0, latency=slower)
    result, journal = config_run(tmp_path, evaluator, Budget(76.0, clock), early_stop=False)
    order = [e["kind"] for e in journal]
    assert evaluator.calls["profile"] == 1 and order.index("config_now") < order.index("profile")
    assert not [e for e in kinds(journal, "budget_stop") if e["stage"] == "profile"]
    assert [name for name, _ in evaluator.checks][:1] == ["mode"]


def test_the_reserve_alone_blocks_only_when_a_candidate_fits_without_it_and_the_kernels_share_allows() -> None:
    import math

    from kernelopt_core.search.deadline import Schedule
    from kernelopt_core.search.time_split import TimeSplit

    clock = StandInClock()
    schedule = Schedule(Budget(50.0, clock).start(), TimeSplit(clock), device_kind="cuda", config_check=True)
    # 50 s left: the check's 20-s slot (40% of 50) and the files leave 28 s, more than a candidate (15 s prior)
    assert schedule.may_start_candidate("k", 1, math.inf) and not schedule.blocked_by_reserve(1, math.inf)
    clock.now += 25.0  # 25 s left: 3 s after the slot, but 23 s without it
    assert not schedule.may_start_candidate("k", 1, math.inf, quiet=True) and not schedule.stops
    assert schedule.blocked_by_reserve(1, math.inf)
    assert not schedule.blocked_by_reserve(2, clock.now + 10.0)  # this kernel's share is spent: nothing to free
    assert schedule.profile_blocked_by_reserve(1) is False  # a profile (35 s) and a candidate do not fit anyway
    schedule.config_slot_used = True  # the check ran: nothing beyond the files is kept
    assert schedule.may_start_candidate("k", 1, math.inf) and not schedule.blocked_by_reserve(1, math.inf)
    clock.now += 15.0  # 10 s left: no candidate, and nothing kept to free
    assert not schedule.blocked_by_reserve(1, math.inf) and not schedule.may_start_candidate("k", 1, math.inf)
    assert [s.stage for s in schedule.stops] == ["beam"]
    assert not Schedule(Budget(None, clock), TimeSplit(clock)).blocked_by_reserve(1, math.inf)


def test_the_bench_sizes_its_confirmation_from_gate_4_and_keeps_only_the_files_before_the_run() -> None:
    from types import SimpleNamespace

    from kernelopt_core.bench import problem_main
    from kernelopt_core.bench.config import AFTER_OPTIMIZE_RESERVE_S
    from kernelopt_core.gates.verdict import GateVerdict
    from kernelopt_core.search.deadline import CONFIRM_FACTOR, CONFIRM_FLOOR_S

    accepted = CascadeResult(True, None, "ok", [GateVerdict(3, "model", True, "ok"),
                                                GateVerdict(4, "perf", True, "1.5x", seconds=2.9)])
    state = SimpleNamespace(optimize_result=SimpleNamespace(cascade=accepted), device="cuda:0")
    assert problem_main._confirmation_s(state) == pytest.approx(CONFIRM_FACTOR * 2.9)  # H100: 3.8 s measured
    state.optimize_result = SimpleNamespace(cascade=None)
    assert problem_main._confirmation_s(state) == CONFIRM_FLOOR_S
    # before the run only the result's writing is kept; the confirmation is kept by the run once it accepts
    assert problem_main._reserve_after_optimize(state) == AFTER_OPTIMIZE_RESERVE_S["cuda"] < 15.0


SUM_REDUCE = str(ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11" / "sum_reduce" / "output_code.py")


class TwoKernels(ClockedEvaluator):
    """sum_reduce's two kernels: the first's candidates take 12 s each, the second's 3 s (and none is faster)."""

    def _baseline(self, kernel: str) -> float:
        from kernelopt_core.artifacts import parse_output_code

        if kernel not in self.baselines:
            found = parse_output_code(SUM_REDUCE).kernel(kernel)
            assert found is not None
            self.baselines[kernel] = found.source
        return self.latency(self.baselines[kernel])

    def screen(self, kernel: str, source: str) -> Screen:
        self.screen_costs = [10.0 if kernel.endswith("_0") else 1.0]
        return super().screen(kernel, source)


def test_a_kernel_its_share_stopped_goes_on_with_the_time_the_next_kernel_left(tmp_path: Path) -> None:
    from kernelopt_core.search.pipeline import OptimizeConfig, optimize

    clock = StandInClock()
    evaluator = TwoKernels(clock, latency=slower)
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"),
                            early_stop=False, iterations=1, plans=4, use_ncu=False)
    start = clock.now
    result = optimize(SUM_REDUCE, config=config, evaluator=evaluator, budget=Budget(90.0, clock))
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    first, second = (k["name"] for k in result.kernels)
    share_stop = next(e for e in kinds(journal, "budget_stop") if e["kernel"] == first)
    assert "of this kernel's share" in share_stop["detail"]  # the first kernel stopped at its share
    (ended,) = [e for e in kinds(journal, "nothing_left") if e["kernel"] == second]  # the second ran out early
    (resumed,) = kinds(journal, "search_resumed")
    assert resumed["kernel"] == first and resumed["left_s"] > CANDIDATE_S
    order = [e["kind"] for e in journal]
    after = [e for e in journal[order.index("search_resumed"):] if e["kind"] == "candidate"]
    assert after and {e["kernel"] for e in after} == {first}  # it screened more candidates with that time
    labels = [e["id"] for e in kinds(journal, "candidate") if e["kernel"] == first]
    assert len(labels) == len(set(labels))  # labels stay unique when a beam goes on
    assert 90.0 - (clock.now - start) < CANDIDATE_S * CANDIDATE_MARGIN + CLOSING_S  # and left less than one
    (last_stop,) = [s for s in result.budget["stops"] if s["kernel"] == first]  # where it stopped in the end
    assert "share" not in last_stop["detail"] and last_stop["left_s"] < last_stop["needed_s"]
