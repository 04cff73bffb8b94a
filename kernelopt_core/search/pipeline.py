"""``optimize``: the whole search for one compiled graph, from dispatch to decision, within a budget.

The stages, each in its own module, all reading one :class:`~.run_context.RunContext`::

    targets (dispatch) -> brief (profile, SOL) -> beam (plan -> candidate -> screen -> time)
        -> finalists (full gate 2, gates 3-4) -> decision -> outputs

Each target kernel (largest share first) gets its brief and its beam; finalists go through the
final gates as soon as they clear the margin or when the beam ends; the decision is ``optimized``,
``matched`` or ``fallback`` ("budget reached" when the budget cut the search short). The budget
(:mod:`.deadline`) is an argument. The result is written as soon as one is verified and again at
the end; everything is journaled in the run folder and a killed run resumes with ``resume=RUN``.
What each stage does: docs/optimizer.md, "What a run does". Nothing here imports torch.
"""

from __future__ import annotations

import math
from typing import Any

from ..events import EventSink
from .beam_stage import BeamStage
from .brief import BriefStage
from .callable_checks import CallableChecks
from .deadline import DEFAULT_BUDGET_S, Budget
from .decision import decide
from .evaluation import EvaluationError, Evaluator, Screen
from .finalists import FinalistStage
from .kernel_search import KernelSearch
from .options import OptimizeConfig, OptimizeError
from .outputs import ResultWriter
from .result import Decision, OptimizeResult
from .run_context import CallableSource, RunContext, open_run
from .target import Target
from .targets import choose_targets, dispatch


def optimize(path: str, *, kernel: str | None = None, config: OptimizeConfig, sink: EventSink | None = None,
             resume: str | None = None, evaluator: Evaluator | None = None,
             launch_timing: dict[str, Any] | None = None, problem: str | None = None,
             accounting: dict[str, Any] | None = None, target: Target | None = None,
             budget: Budget | None = None) -> OptimizeResult:
    """Optimize the graph at ``path`` (an output_code.py or a dump folder). ``evaluator`` replaces
    the gates and measurements (tests use a stand-in); by default they run on the graph's device.
    ``launch_timing`` is a per-launch timing of this graph the caller already measured
    (``LaunchTiming.to_json()``): dispatch uses it instead of timing the launches again.
    ``problem`` is the problem file the dump was compiled from (default: the one
    ``compile_report.json`` above the dump names); ``accounting`` is its whole-callable accounting
    the caller already measured (``CallableAccounting.to_json()``), used instead of measuring it.
    ``target`` is what is optimized (:class:`.target.Target`; default: the dump's graph at ``path``), e.g. a
    project's own kernel (:class:`kernelopt_core.userkernels.target.UserKernelTarget`).
    ``budget`` is the deadline the search plans against (default: ``config.budget_s`` from now, on
    the monotonic clock); a test passes one on a stand-in clock."""
    budget = (budget or Budget(config.budget_s)).start()
    ctx = open_run(path, kernel, config, sink or EventSink(), resume, evaluator, budget, launch_timing,
                   CallableSource(problem, accounting), target)
    try:
        return Pipeline(ctx).run()
    except EvaluationError as exc:  # the device or the graph, not a candidate: stop with the reason
        ctx.journal.record("error", message=str(exc))
        raise OptimizeError(f"{exc} (what was recorded is kept: --resume {ctx.run_folder.id})") from None
    finally:
        ctx.experience.close()


class Pipeline:
    """The stages in order, over one run context."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.searches: list[KernelSearch] = []
        self.writer = ResultWriter(ctx)
        self.finalists = FinalistStage(ctx, on_verified=self._write_verified)
        self.checks = CallableChecks(ctx)
        self.report: Any = None  # the dispatch report, for a configuration check run while the search goes on

    def run(self) -> OptimizeResult:
        ctx = self.ctx
        ctx.progress(f"run {ctx.run_folder.id}: {ctx.graph.name} (budget: {ctx.budget.label()})", stage="start",
                     percentage=0, run_id=ctx.run_folder.id, run_dir=str(ctx.run_folder.path),
                     budget_s=ctx.budget.seconds)
        report, timing = dispatch(ctx)
        self.report = report
        # a project's kernel timed over its whole harness call says why its share is no figure
        self.writer.share_note = (timing or {}).get("share_note")
        targets = choose_targets(ctx, report)
        if isinstance(targets, str):
            return self._finish(None, "fallback", targets, report)
        self.checks.plan(report)  # the configuration check's slot, kept only when a change is recommended
        ctx.evaluator.warm_up()  # there are kernels to search: candidates will be screened
        with ctx.times.stage("facts"):
            facts = ctx.evaluator.facts([k.name for k, _ in targets]).get("kernels", {})
        avoid = ctx.experience.avoid_snapshot()
        briefs = BriefStage(ctx, timing, make_room=lambda: self.checks.check_now(report),
                            kernels=tuple(k.name for k, _ in targets))
        beam = BeamStage(ctx, self.finalists, make_room=self._make_room)
        for index, (kernel, share) in enumerate(targets):
            ctx.sink.check_cancelled()
            kernels_left = len(targets) - index
            brief = briefs.make(kernel, share, facts.get(kernel.name, {}), kernels_left, share_timed=report.timed)
            ctx.experience.brief = brief
            rest = sum(s for _, s in targets[index:])
            search = beam.search(brief, avoid, index, len(targets), weight=share / rest if rest > 0 else None)
            self.searches.append(search)
            self._kernel_done(search)
        self._resume_stopped(beam, avoid)
        final = self.finalists.combine(self.searches)
        decision, reason = self._decide(final)
        return self._finish(final, decision, reason, report)

    def _kernel_done(self, search: KernelSearch) -> None:
        ctx = self.ctx
        self.finalists.final(search)
        ended = search.nothing_left or search.not_searched
        if ended and ctx.budget.limited:
            ctx.schedule.nothing_left.append({"kernel": search.brief.name, "reason": ended})
        ctx.journal.record("kernel_done", kernel=search.brief.name, accepted=search.accepted is not None,
                           candidates=search.candidates, screened_ok=search.screened_ok)

    def _resume_stopped(self, beam: BeamStage, avoid: set[str]) -> None:
        """After every kernel had its turn: a kernel whose beam its share of the time stopped goes on (largest
        first) while time for a candidate is left, the time the kernels after it did not use (one not searched
        at the speed of light, one with nothing left to try, final gates that took less than kept)."""
        ctx = self.ctx
        if not ctx.budget.limited:
            return
        for search in list(self.searches):
            if not search.stopped_by_budget or search.not_searched:
                continue
            schedule = ctx.schedule
            if not (schedule.may_start_candidate(search.brief.name, 1, math.inf, quiet=True)
                    or schedule.blocked_by_reserve(1, math.inf)):
                continue
            ctx.journal.record("search_resumed", kernel=search.brief.name, iteration=search.iteration,
                               left_s=round(ctx.budget.left(), 3))
            ctx.progress(f"{search.brief.name}: the search goes on with the time the other kernels left",
                         stage="iteration", kernel=search.brief.name)
            # its share's stop is history (journaled); where it stops now is recorded afresh
            schedule.stops[:] = [s for s in schedule.stops if (s.stage, s.kernel) != ("beam", search.brief.name)]
            self.finalists.reopen(search)
            beam.resume(search, avoid)
            self._kernel_done(search)

    def _make_room(self, search: KernelSearch) -> bool:
        """What the schedule keeps is all that stops the next candidate: run what it is kept for now, the
        final gates of this kernel's candidates worth it first (a win in hand), else the configuration check,
        and let the search go on with what they leave. True when something ran."""
        if self.finalists.finalize_waiting(search):
            return True
        return self.report is not None and self.checks.check_now(self.report)

    def _decide(self, final: Any) -> tuple[Decision, str]:
        stops = self.ctx.schedule.stops
        note = None
        if stops or self.ctx.schedule.reached:
            where = sorted({s.stage for s in stops}) or ["the deadline"]
            note = f"{self.ctx.budget.label()}; cut short: {', '.join(where)}"
        return decide(self.searches, final, self.ctx.config, note, user_kernel=self.ctx.target.users_own)

    def _write_verified(self, search: KernelSearch) -> None:
        """A finalist passed the final gates while the search goes on: write the best verified kernel
        now, as the run's result so far (a later kill or timeout keeps it)."""
        searches = self.searches if search in self.searches else [*self.searches, search]
        best = max((s for s in searches if s.accepted is not None and s.cascade is not None),
                   key=lambda s: s.cascade.speedup or 0.0 if s.cascade else 0.0, default=None)
        if best is None:
            return
        decision, reason = decide([best], best.cascade, self.ctx.config, user_kernel=self.ctx.target.users_own)
        result = self.writer.build(searches, best.cascade, decision, f"{reason} (verified while the search goes on)",
                                   done=False, only=best.brief.name)
        self.writer.write(result, searches)
        self.ctx.journal.record("result_written", decision=decision, speedup=result.speedup, final=False)

    def _finish(self, final: Any, decision: Decision, reason: str, report: Any) -> OptimizeResult:
        ctx = self.ctx
        result = self.writer.build(self.searches, final, decision, reason)
        findings = self.checks.findings(report)
        result.suggestions, result.config_change = findings.suggestions(), findings.config_change()
        result.accounting = self.checks.accounting_summary
        result.budget = ctx.schedule.to_json()
        self.writer.write(result, self.searches, findings)
        ctx.journal.record("time_split", value=result.time_split)
        ctx.journal.record("result", decision=decision, reason=reason, speedup=result.speedup)
        ctx.progress(f"{decision}: {reason}", stage="done", percentage=100, best_speedup=result.speedup,
                     decision=decision)
        return result


__all__ = ["DEFAULT_BUDGET_S", "Budget", "OptimizeConfig", "OptimizeError", "OptimizeResult", "Screen", "optimize"]
