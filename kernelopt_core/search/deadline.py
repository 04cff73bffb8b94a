"""The search's deadline and schedule: a deadline on one clock, and what the stages still need before it.

A :class:`Budget` is an argument of the search, never a global: tests hand it a stand-in clock and
the run's decisions follow that clock. :class:`Schedule` answers the questions the stages ask:

* may another candidate start? While the time left covers one more candidate and what must stay in
  hand: a finalist once a candidate is worth finalizing (none before), the configuration check's slot;
* how long may this kernel's beam run? Its share, by graph time, of what is left after that reserve;
* is it the reserve alone that stops the next candidate (:meth:`Schedule.blocked_by_reserve`)? Then what
  it is kept for runs now, and the search goes on with what that leaves (docs/optimizer.md);
* is there time for a finalist (full gate 2, gates 3-4), an ncu profile, a configuration check?

Durations are this run's own measurements (:class:`TimeSplit`), else the priors per device below
(measured figures: docs/optimizer.md). No torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .time_split import TimeSplit, seconds_text

# What a user accepts for one optimize run when they set nothing: a few minutes. `--budget 0` is no limit.
DEFAULT_BUDGET_S = 600.0

# Priors per device, used until this run has measured the stage itself. A finalist runs gate 2's full
# battery and gates 3-4: until one has run, it is estimated as SCREEN_FACTOR screens (the slowest of the
# last few), at least FINALIZE_FLOOR_S; before any screen, the prior. The CPU figures (the Triton
# interpreter) let a small problem's first candidate start within a few minutes' budget; the GPU figures
# let one start within a problem's 180-s budget less its compile. A loaded machine is slower, and the
# first measured screen carries that into the estimates. The measurements behind each figure:
# docs/optimizer.md, "What the priors rest on".
PRIORS_S: dict[str, dict[str, float]] = {
    "cpu": {"finalize": 60.0, "candidate": 20.0, "profile": 0.0, "config": 240.0},
    "cuda": {"finalize": 40.0, "candidate": 15.0, "profile": 35.0, "config": 30.0},
}
# The configuration check's slot is at most this share of the budget: the kernel search keeps the rest.
# A check that does not fit its slot is reported with the accounting's measured figure, "not verified".
CONFIG_SHARE = 0.4
FINALIZE_FLOOR_S = {"cpu": 30.0, "cuda": 40.0}  # on a GPU a finalist also runs compute-sanitizer
# compute-sanitizer's two tools run side by side on a GPU finalist, each limited to this share of the time
# the budget leaves (at least SANITIZER_MIN_S, at most
# SANITIZER_MAX_S): a tool that does not finish is a note in the verdict, and the finalist's other gates
# still have their time. The floor covers a tool's target's start: importing torch, loading and running
# the graph and compiling the candidate under the tool (measured: docs/optimizer.md).
SANITIZER_SHARE = 0.4
SANITIZER_MIN_S, SANITIZER_MAX_S = 45.0, 600.0
# A finalist against a screen: gates 3-4 plus gate 2's full battery, which the fast screen leaves out.
# The measured time split (finalize_s against screen_s in results.json) is what to tune this and PRIORS_S by.
SCREEN_FACTOR = 1.5
# Until a second candidate is measured, the next is planned at this share of the first (at least the
# prior): the first paid the run's one-time costs.
FIRST_CANDIDATE_SHARE = 0.5
# A measured finalist is taken at this factor (the next one may run a larger battery or a busier machine).
MEASURED_MARGIN = 1.25
# A candidate is taken at the slowest of the last few of its kind, at this factor: the estimate is already a
# maximum, and a larger factor leaves the budget's last candidate's time unused (docs/optimizer.md).
CANDIDATE_MARGIN = 1.1
# Writing result.json, report.md and final.diff, and the decision itself.
CLOSING_S = 2.0
# A caller's own A/B of an accepted rewrite after the run (the bench's confirmation): the same two graphs
# through the same path as gate 4's A/B, which loaded them in warm processes; the caller loads them fresh.
# Kept once a rewrite is accepted, at this factor of gate 4's measured seconds (at least the floor).
CONFIRM_FACTOR = 2.0
CONFIRM_FLOOR_S = 3.0


def confirmation_s(gate4_s: float | None) -> float:
    """The time a confirmation A/B of an accepted rewrite takes, from gate 4's A/B of it."""
    if gate4_s is None or not math.isfinite(gate4_s) or gate4_s < 0:
        return CONFIRM_FLOOR_S
    return max(CONFIRM_FLOOR_S, CONFIRM_FACTOR * gate4_s)


@dataclass
class Budget:
    """A deadline ``seconds`` after :meth:`start` on ``clock``; ``seconds`` None or <= 0 is no limit."""

    seconds: float | None = DEFAULT_BUDGET_S
    clock: Callable[[], float] = time.monotonic
    started: float | None = None

    def __post_init__(self) -> None:
        if self.seconds is not None and (not math.isfinite(self.seconds) or self.seconds <= 0):
            self.seconds = None

    def start(self) -> Budget:
        if self.started is None:
            self.started = self.clock()
        return self

    @property
    def limited(self) -> bool:
        return self.seconds is not None

    def now(self) -> float:
        return self.clock()

    def elapsed(self) -> float:
        started = self.start().started
        assert started is not None  # start() sets it
        return self.clock() - started

    def left(self) -> float:
        return math.inf if self.seconds is None else self.seconds - self.elapsed()

    @property
    def reached(self) -> bool:
        return self.left() <= 0

    def label(self) -> str:
        return "no limit" if self.seconds is None else seconds_text(self.seconds)


@dataclass
class BudgetStop:
    """Why and when the budget cut the search short (journaled and reported)."""

    stage: str  # "beam", "profile", "finalists", "config"
    kernel: str | None
    left_s: float
    needed_s: float
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "kernel": self.kernel, "left_s": round(self.left_s, 3),
                "needed_s": round(self.needed_s, 3), "detail": self.detail}


@dataclass
class Schedule:
    """The budget's answers to the stages, from the run's measured durations or the device's priors."""

    budget: Budget
    times: TimeSplit
    device_kind: str = "cpu"
    config_check: bool = False  # a configuration change will be verified at the end (its slot is kept)
    stops: list[BudgetStop] = field(default_factory=list)
    on_stop: Callable[[BudgetStop], None] | None = None  # told of each new stop (the journal, the progress)
    # whether a screened candidate worth finalizing waits for the final gates: only then is a finalist's
    # time kept back from the search (the pipeline asks its finalist stage)
    finalist_pending: Callable[[], bool] = lambda: False
    config_measured: list[float] = field(default_factory=list)  # this run's configuration checks, in seconds
    config_slot_used: bool = False  # the check ran while the search went on: its slot is no longer kept
    # kept for the caller's confirmation A/B once a rewrite is accepted (0: none accepted, or no caller's A/B)
    confirm_s: float = 0.0
    # kernels whose beam ended with budget left, and why: they had nothing left to try
    nothing_left: list[dict[str, str]] = field(default_factory=list)

    def _prior(self, what: str) -> float:
        return PRIORS_S.get(self.device_kind, PRIORS_S["cuda"])[what]

    def finalize_s(self) -> float:
        """One finalist: the largest this run measured (with a margin); else SCREEN_FACTOR of its slowest
        recent screen (at least the floor); else the device's prior."""
        measured = self.times.durations("finalize")
        if measured:
            return max(measured) * MEASURED_MARGIN
        screens = self.times.durations("screen")[-8:]
        if screens:
            return max(FINALIZE_FLOOR_S.get(self.device_kind, 20.0), SCREEN_FACTOR * max(screens))
        return self._prior("finalize")

    def candidate_s(self, family: str | None = None) -> float:
        """One candidate from plan to timing: the slowest of the last few of ``family`` this run measured
        after its first (a launch-config variant takes a fraction of a rewrite's time), else of any family,
        else a share of the first, else the prior. The run's first candidate pays its one-time costs (the
        compile pool's and the worker's start, loading the baseline graph; docs/optimizer.md has the
        figures); taking the first for the next one's cost leaves room for too few."""
        measured = self.times.measured_candidates()
        if len(measured) >= 2:
            same = [c.total_s for c in measured[1:] if family is not None and c.family == family]
            return max((same or [c.total_s for c in measured[1:]])[-8:]) * CANDIDATE_MARGIN
        if measured:
            return max(self._prior("candidate"), FIRST_CANDIDATE_SHARE * measured[0].total_s)
        return self._prior("candidate")

    def cheapest_candidate_s(self) -> float:
        """The least any candidate is expected to take (the cheapest family measured): below it, nothing that
        could be planned fits."""
        families = {c.family for c in self.times.measured_candidates()[1:]}
        return min([self.candidate_s(f) for f in families] or [self.candidate_s()])

    def profile_s(self) -> float:
        measured = self.times.durations("profile")
        return max(measured) * MEASURED_MARGIN if measured else self._prior("profile")

    def config_s(self) -> float:
        """One configuration check: the longest this run measured (with a margin), else the prior."""
        if self.config_measured:
            return max(self.config_measured) * MEASURED_MARGIN
        return self._prior("config")

    def config_slot_s(self) -> float:
        """What the search leaves for the configuration check: its estimate, at most CONFIG_SHARE of the
        budget (0 when no check will run)."""
        if not self.config_check or self.config_slot_used:
            return 0.0
        if not self.budget.limited:
            return self.config_s()
        return min(self.config_s(), CONFIG_SHARE * float(self.budget.seconds or 0.0))

    def reserve_s(self, kernels_left: int) -> float:
        """What must stay in hand while ``kernels_left`` kernels (this one included) are still to search:
        one finalist once a candidate is worth finalizing (before that, nothing: the time goes to the
        search), the configuration check's slot, the decision and the files."""
        finalists = 1 if kernels_left > 0 and self.finalist_pending() else 0
        return finalists * self.finalize_s() + self.config_slot_s() + self.confirm_s + CLOSING_S

    def kernel_deadline(self, kernels_left: int, weight: float | None = None) -> float:
        """The clock time this kernel's beam stops starting candidates: its ``weight`` (its share of the
        graph time among the kernels left; default an equal share) of what the reserve leaves. The last
        kernel has no deadline of its own: it may use everything but the reserve, measured at each start."""
        if not self.budget.limited or kernels_left <= 1:
            return math.inf
        share = 1.0 / kernels_left if weight is None else min(1.0, max(0.0, weight))
        spare = max(0.0, self.budget.left() - self.reserve_s(kernels_left))
        return self.budget.now() + spare * share

    def may_start_candidate(self, kernel: str, kernels_left: int, deadline: float, quiet: bool = False,
                            family: str | None = None) -> bool:
        """Time for one more candidate of this kernel (of ``family``; None: of the cheapest family measured, as
        before a plan is made); ``quiet``: only ask (no stop is recorded)."""
        if not self.budget.limited:
            return True
        need = self._need(family)
        left = self.budget.left() - self.reserve_s(kernels_left)
        slice_left = deadline - self.budget.now()
        if left >= need and slice_left >= need:
            return True
        if quiet:
            return False
        share = f", {max(0.0, slice_left):.0f} s of this kernel's share" if math.isfinite(slice_left) else ""
        kept = "the final gates' reserve" if self.finalist_pending() else "what the run keeps"
        detail = f"{max(0.0, left):.0f} s left after {kept}{share}; a candidate takes about {need:.0f} s"
        self._stop("beam", kernel, max(0.0, left), need, detail)
        return False

    def _need(self, family: str | None) -> float:
        return self.cheapest_candidate_s() if family is None else self.candidate_s(family)

    def blocked_by_reserve(self, kernels_left: int, deadline: float, family: str | None = None) -> bool:
        """The next candidate would fit but for what the run keeps beyond the files (a finalist's time, the
        configuration check's slot): running that work now, and searching on with what it leaves, uses the
        time its estimate would otherwise leave idle."""
        if not self.budget.limited:
            return False
        need = self._need(family)
        kept = self.reserve_s(kernels_left) - CLOSING_S
        free = self.budget.left() - CLOSING_S
        return kept > 0 and free - kept < need <= free and deadline - self.budget.now() >= need

    def profile_blocked_by_reserve(self, kernels_left: int) -> bool:
        """An ncu profile and one candidate would fit but for what the run keeps beyond the files."""
        if not self.budget.limited:
            return False
        kept = self.reserve_s(kernels_left) - CLOSING_S
        free, need = self.budget.left() - CLOSING_S, self.profile_s() + self.candidate_s()
        return kept > 0 and free - kept < need <= free

    def may_profile(self, kernel: str, kernels_left: int, quiet: bool = False) -> bool:
        if not self.budget.limited:
            return True
        need = self.profile_s() + self.candidate_s()
        left = self.budget.left() - self.reserve_s(kernels_left)
        if left >= need:
            return True
        if quiet:
            return False
        self._stop("profile", kernel, max(0.0, left), need,
                   f"ncu skipped: {max(0.0, left):.0f} s left after the final gates' reserve, a profile and one "
                   f"candidate take about {need:.0f} s")
        return False

    def may_finalize(self, kernel: str, quiet: bool = False) -> bool:
        """Time for one more finalist of this kernel. A kernel in hand goes before the kernels after it:
        they are searched with whatever its finalists leave. A found kernel win also goes before the
        configuration check's slot: a check left without time is still reported, "not verified", with the
        accounting's measured figure, while a win dropped here would be lost."""
        if not self.budget.limited:
            return True
        need = self.finalize_s()
        left = self.budget.left() - CLOSING_S
        if left >= need:
            return True
        if quiet:
            return False
        self._stop("finalists", kernel, max(0.0, left), need,
                   f"{max(0.0, left):.0f} s left, a finalist (full gate 2, gates 3-4) takes about {need:.0f} s")
        return False

    def sanitizer_limit_s(self) -> float:
        """Each compute-sanitizer tool's limit on the next finalist: its share of what the budget leaves."""
        if not self.budget.limited:
            return SANITIZER_MAX_S
        left = self.budget.left() - self.reserve_s(0)
        return min(SANITIZER_MAX_S, max(SANITIZER_MIN_S, SANITIZER_SHARE * left))

    def config_time_s(self) -> float:
        """The time the next configuration check may take: all that is left but the files."""
        return max(0.0, self.budget.left() - CLOSING_S)

    def may_check_config(self) -> bool:
        """Time for a configuration check: its slot (what the search left for it) or its estimate, whichever
        is less; it runs with :meth:`config_time_s` as its limit."""
        if not self.budget.limited:
            return True
        need = min(self.config_s(), self.config_slot_s() or self.config_s())
        left = self.config_time_s()
        if left >= need and left > 0:
            return True
        self._stop("config", None, left, self.config_s(),
                   f"{left:.0f} s left, a configuration check takes about {self.config_s():.0f} s")
        return False

    @property
    def reached(self) -> bool:
        """The budget cut something short (a candidate not started, a finalist or check not run)."""
        return bool(self.stops) or (self.budget.limited and self.budget.reached)

    def _stop(self, stage: str, kernel: str | None, left: float, need: float, detail: str) -> None:
        if not any(s.stage == stage and s.kernel == kernel for s in self.stops):
            stop = BudgetStop(stage, kernel, left, need, detail)
            self.stops.append(stop)
            if self.on_stop is not None:
                self.on_stop(stop)

    def to_json(self) -> dict[str, Any]:
        ended = {"nothing_left": list(self.nothing_left),
                 "left_s": round(max(0.0, self.budget.left()), 3)} if self.nothing_left and not self.reached else {}
        return {"seconds": self.budget.seconds, "elapsed_s": round(self.budget.elapsed(), 3),
                "reached": self.reached, "stops": [s.to_json() for s in self.stops], **ended,
                "estimates_s": {"finalize": round(self.finalize_s(), 3), "candidate": round(self.candidate_s(), 3),
                                "profile": round(self.profile_s(), 3),
                                **({"config": round(self.config_s(), 3), "config_slot": round(self.config_slot_s(), 3)}
                                   if self.config_check else {}),
                                **({"confirm": round(self.confirm_s, 3)} if self.confirm_s else {})},
                "measured": {"finalize": bool(self.times.durations("finalize")),
                             "candidate": bool(self.times.candidate_seconds())}}
