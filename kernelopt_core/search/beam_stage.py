"""The beam over one kernel: B nodes x N plans per iteration, each plan executed with up to K attempts
(:mod:`.candidates`), UCB selection with diversity, meltdown detection and early stop (:mod:`.beam`).

The budget decides what starts next: no candidate starts once the time left is less than one more
candidate and what the run keeps (a finalist's time only once a candidate is worth finalizing), or once
this kernel's share of the search time is spent. When what the run keeps is all that stops the next
candidate, the work it is kept for runs first (``make_room``: the final gates of the candidates worth it,
the configuration check) and the search goes on with what that left. A candidate that clears a clear
margin goes through the final gates at once (:meth:`FinalistStage.early`). A beam that ends before its
budget says why: it had nothing left to try.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .agents import KernelBrief, PlanRequest
from .beam import BeamNode, EarlyStop, MeltdownDetector, record_visit, select_beam
from .candidates import CandidateStage
from .finalists import FinalistStage
from .kernel_search import KernelSearch, at_speed_of_light
from .llm import ProviderError
from .rewrites.kernel_source import KernelSourceError, source_digest
from .run_context import RunContext

# stages timed on their own while the beam runs: its screens, timings, finalists, and a configuration check
_INNER_STAGES = ("screen", "time", "finalize", "config")


class BeamStage:
    def __init__(self, ctx: RunContext, finalists: FinalistStage,
                 make_room: Callable[[KernelSearch], bool] = lambda search: False):
        self.ctx = ctx
        self.candidates = CandidateStage(ctx)
        self.finalists = finalists
        # runs the work the reserve is kept for; True when it ran some (what the schedule keeps changed)
        self.make_room = make_room

    def search(self, brief: KernelBrief, avoid: set[str], index: int, count: int,
               weight: float | None = None) -> KernelSearch:
        """Search kernel ``index`` of ``count``; ``weight`` is its share of the graph time among the kernels left,
        which sets its share of the search time."""
        return self._timed(lambda: self._search(brief, avoid, index, count, weight))

    def resume(self, search: KernelSearch, avoid: set[str]) -> KernelSearch:
        """Go on with a beam that its share of the time stopped, from where it was, as the last kernel (all
        the time but what the run keeps): the kernels after it left time unused."""
        return self._timed(lambda: self._search(search.brief, avoid, 0, 1, None, resumed=search))

    def _timed(self, run: Callable[[], KernelSearch]) -> KernelSearch:
        ctx = self.ctx
        times = ctx.times
        begin, inner = times.clock(), {name: times.stages.get(name, 0.0) for name in _INNER_STAGES}
        try:
            return run()
        finally:  # the loop's own time (plans, proposals, memory): the whole less the stages run inside it
            spent = times.clock() - begin - sum(times.stages.get(name, 0.0) - before for name, before in inner.items())
            times.add("beam", max(0.0, spent))

    def _search(self, brief: KernelBrief, avoid: set[str], index: int, count: int,
                weight: float | None, resumed: KernelSearch | None = None) -> KernelSearch:
        ctx, config = self.ctx, self.ctx.config
        baseline = brief.baseline_ms if brief.baseline_ms and brief.baseline_ms > 0 else 1.0
        if resumed is not None:
            search = resumed
            search.stopped_by_budget = False
            search.passed_over = 0
            first = max(1, search.iteration)  # the iteration it was in, planned again from its beam
        else:
            search = KernelSearch(brief)
            self.finalists.track(search)  # its candidates worth finalizing make the schedule keep a finalist's time
            root = BeamNode("root", brief.original_source, source_digest(brief.original_source), baseline, 1.0,
                            "root")
            search.nodes.append(root)
            search.beam, search.tried, first = [root], {root.source_hash}, 1
            try:
                self.candidates.context(brief, brief.original_source)
            except KernelSourceError as exc:
                ctx.journal.record("note", message=f"{brief.name}: cannot be rewritten ({exc})")
                return search
            at_limit = None if config.force else at_speed_of_light(brief)
            if at_limit:  # its time goes to the next kernel and the final gates (--force searches it anyway)
                search.not_searched = at_limit
                ctx.journal.record("not_searched", kernel=brief.name, reason=at_limit)
                ctx.progress(f"{brief.name}: {at_limit}", stage="iteration", kernel=brief.name)
                return search
        root = search.root
        kernels_left = count - index
        deadline = ctx.schedule.kernel_deadline(kernels_left, weight)
        if math.isfinite(deadline):
            ctx.journal.record("budget_share", kernel=brief.name, seconds=round(deadline - ctx.budget.now(), 3),
                               left_s=round(ctx.budget.left(), 3), reserve_s=round(ctx.schedule.reserve_s(kernels_left), 3))

        def may_start(family: str | None = None, quiet: bool = False) -> bool:
            schedule = ctx.schedule
            while not schedule.may_start_candidate(brief.name, kernels_left, deadline, quiet=True, family=family):
                if not (schedule.blocked_by_reserve(kernels_left, deadline, family) and self.make_room(search)):
                    # says why not, unless only asked
                    return schedule.may_start_candidate(brief.name, kernels_left, deadline, quiet=quiet,
                                                        family=family)
            return True

        width = config.beam_width if config.use_beam else 1
        iterations = config.iterations if config.multi_iteration else 1
        beam, tried = search.beam, search.tried
        meltdown = MeltdownDetector(config.meltdown_window, config.meltdown_unique)
        stopper = EarlyStop(config.patience, best_latency=root.latency_ms)  # improvement over Inductor counts
        iteration, found = 0, 0  # the last iteration, and the new candidates it found
        for iteration in range(first, iterations + 1):
            search.iteration = iteration
            ctx.sink.check_cancelled()
            best = min(n.latency_ms for n in search.nodes)
            ctx.progress(f"{brief.name}: iteration {iteration}/{iterations}, beam of {len(beam)}", stage="iteration",
                         iteration=iteration, iterations=iterations, kernel=brief.name,
                         best_speedup=round(baseline / best, 4),
                         percentage=int(5 + 85 * (index + (iteration - 1) / iterations) / count))
            children: list[BeamNode] = []
            for node in beam:
                if search.stopped_by_budget or not may_start():  # planning costs time too (an LLM's answer)
                    search.stopped_by_budget = True
                    break
                context = self.candidates.context(brief, node.source)
                request = PlanRequest(
                    brief=brief, node_source=node.source, context=context, n=config.plans, recent=list(meltdown.recent),
                    banned=meltdown.banned() if config.meltdown else set(),
                    avoid=avoid if config.use_memory else set(), boosted=ctx.experience.boosts(), history=ctx.history)
                try:
                    plans = ctx.planner.plan(request)
                except ProviderError as exc:
                    ctx.journal.record("llm_error", agent="planner", message=str(exc))
                    plans = []
                best_child: BeamNode | None = None
                for plan in plans:
                    if search.stopped_by_budget:
                        break
                    meltdown.observe(plan.family or plan.direction)
                    ctx.journal.record("plan", kernel=brief.name, iteration=iteration, node=node.id,
                                       plan=plan.to_json(), melted=meltdown.melted)
                    search.counter += 1
                    child = self.candidates.execute(search, plan, node, context, tried, iteration,
                                                    f"i{iteration}c{search.counter}", may_start)
                    if child is not None:
                        children.append(child)
                        if best_child is None or child.latency_ms < best_child.latency_ms:
                            best_child = child
                        self.finalists.early(search, child)
                record_visit(search.nodes, node.id, best_child.speedup if best_child else 0.0)
            search.nodes.extend(children)
            found = len(children)
            pool = search.nodes
            if config.use_beam:
                beam = select_beam(pool, width, c=config.ucb_c, diversity=config.diversity)
            else:
                beam = sorted(pool, key=lambda n: (n.latency_ms, n.id))[:1]
            search.beam = beam
            iteration_best = min((c.latency_ms for c in children), default=None)
            ctx.journal.record("iteration_done", kernel=brief.name, iteration=iteration,
                               beam=[n.id for n in beam], children=[c.id for c in children],
                               best_latency_ms=min(n.latency_ms for n in search.nodes))
            best_now = min(n.latency_ms for n in search.nodes)
            ctx.progress(f"{brief.name}: iteration {iteration} done, best kernel speedup {baseline / best_now:.2f}x",
                         stage="iteration", iteration=iteration, iterations=iterations, kernel=brief.name,
                         best_speedup=round(baseline / best_now, 4))
            if search.stopped_by_budget:
                reason = ("the budget keeps the time left for the final gates" if ctx.schedule.finalist_pending()
                          else "the time left is less than one more candidate")
                ctx.journal.record("budget_end", kernel=brief.name, iteration=iteration, reason=reason)
                break
            if stopper.update(iteration_best) and config.early_stop and iteration < iterations:
                if ctx.budget.limited:  # the budget decides: its time goes to the search while there is more to try
                    ctx.journal.record("early_stop_skipped", kernel=brief.name, iteration=iteration,
                                       reason=f"{config.patience} iterations without a faster candidate, but the "
                                              "budget has time for more")
                    continue
                ctx.journal.record("early_stop", kernel=brief.name, iteration=iteration,
                                   reason=f"{config.patience} iterations without a faster candidate")
                break
        if search.passed_over and not search.stopped_by_budget:
            search.stopped_by_budget = True  # the budget, not the plans, ended it: plans were passed over for time
        if not search.stopped_by_budget and ctx.budget.limited:
            # under a budget the beam ends before it only when its iterations (--iterations) have all run
            search.nothing_left = f"all {iterations} iterations ran (--iterations)" + (
                ", the last with no new candidate" if found == 0 else "")
            ctx.journal.record("nothing_left", kernel=brief.name, iteration=iteration, reason=search.nothing_left,
                               left_s=round(ctx.budget.left(), 3))
        return search
