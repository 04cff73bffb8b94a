"""Finalists: the candidates that go through the final gates (gate 2's full battery, then gates 3-4).

* **Early**: a candidate whose kernel speedup clears ``EARLY_MARGIN`` (its confidence interval's
  lower bound included) goes through the final gates as soon as it is timed; the run writes a
  verified result at once and the search goes on. A later candidate replaces an accepted one only
  through the same gates, when its kernel is clearly faster and its end-to-end speedup at least as high.
* **Final**: when a kernel's beam ends, its fastest screened candidates not yet finalized go through,
  the first accepted winning, while the budget leaves time for one more; also mid-search, when only the
  finalist's kept time stops the next candidate (:meth:`FinalistStage.finalize_waiting`).
* **Combined**: several accepted kernels are verified together; if that fails, only the best stands.

A candidate whose kernel speedup cannot give the end-to-end gate's speedup is never a finalist: its
share of the graph time bounds what it can give (Amdahl's law, at the upper end of its confidence
interval; docs/optimizer.md, "What the priors rest on").
"""

from __future__ import annotations

from collections.abc import Callable

from ..gates.verdict import CascadeResult
from .beam import BeamNode
from .deadline import confirmation_s
from .kernel_search import KernelSearch
from .run_context import RunContext

EARLY_MARGIN = 1.15  # kernel speedup (and its CI's lower bound) that sends a candidate to the final gates at once


def end_to_end_bound(kernel_speedup: float, share: float | None) -> float:
    """The most a kernel ``kernel_speedup`` times faster can speed up the whole when it takes ``share`` of
    the time (None: all of it) and the rest is unchanged (Amdahl's law)."""
    part = 1.0 if share is None else min(1.0, max(0.0, share))
    if kernel_speedup <= 0:
        return 0.0
    return 1.0 / ((1.0 - part) + part / kernel_speedup)


def final_gates_split(cascade: CascadeResult) -> dict[str, float]:
    """Each gate's seconds in a finalist's cascade ("2", "3", "4"), and "sanitizer": its longest tool run
    (part of gate 3's, or of gate 2's when it started beside the battery)."""
    split = {str(v.gate): round(v.seconds, 3) for v in cascade.gates}
    model = cascade.verdict(3)
    runs = model.numbers.get("sanitizer") if model is not None else None
    seconds = [float(r["seconds"]) for r in runs or [] if isinstance(r, dict) and isinstance(r.get("seconds"), (int, float))]
    if seconds:
        split["sanitizer"] = round(max(seconds), 3)
    return split


class FinalistStage:
    def __init__(self, ctx: RunContext, on_verified: Callable[[KernelSearch], None] = lambda search: None):
        self.ctx = ctx
        self.on_verified = on_verified  # writes the run's result as soon as one is verified
        self.searches: list[KernelSearch] = []  # every kernel's search, the one in progress included
        self.done: list[KernelSearch] = []  # the kernels whose final gates have run
        ctx.schedule.finalist_pending = self.pending

    def track(self, search: KernelSearch) -> None:
        if search not in self.searches:
            self.searches.append(search)

    def waiting(self, search: KernelSearch) -> list[BeamNode]:
        """The screened candidates worth finalizing that have not been: faster than Inductor's kernel (and
        than an accepted one), within reach of the end-to-end gate; fastest first."""
        accepted = search.accepted
        ranked = sorted((n for n in search.nodes if n.id != "root" and n.speedup > 1.0 and n.id not in search.finalized
                         and (accepted is None or n.speedup > accepted.speedup)),
                        key=lambda n: (n.latency_ms, n.id))
        return [n for n in ranked if n.id not in search.out_of_reach and self.out_of_reach(search, n) is None]

    def pending(self) -> bool:
        """A candidate of a kernel still searched waits for the final gates: the schedule keeps a finalist's time
        from then on (a kernel whose final gates have run keeps none: what they left is not tried again)."""
        return any(self.waiting(search) for search in self.searches if search not in self.done)

    def gates(self) -> tuple[int, ...]:
        return (3, 4) if self.ctx.config.use_perf_gate else (3,)

    def final_gates_text(self) -> str:
        """The gates a finalist goes through, as they will show: an Inductor kernel's screen ran part of
        gate 2's battery, so its finalists run the full battery first; a user kernel's screen ran all of it."""
        later = "gates 3-4" if self.gates() == (3, 4) else "gate 3"
        inner = getattr(self.ctx.evaluator, "inner", self.ctx.evaluator)
        screen_is_lighter = getattr(getattr(inner, "gates", None), "gate2_screen", True)
        return f"gate 2's full battery and {later}" if screen_is_lighter else later

    def out_of_reach(self, search: KernelSearch, node: BeamNode) -> str | None:
        """Why ``node`` cannot pass the end-to-end gate whatever the other gates say (None: it can). With
        gate 4 off (an ablation), the kernel speedup itself must reach ``min_speedup``."""
        config, brief = self.ctx.config, search.brief
        need = config.min_speedup
        if not config.use_perf_gate:
            if node.speedup >= need:
                return None
            return f"kernel speedup {node.speedup:.3f}x, below the {need:.2f}x that decides with gate 4 off"
        high = max(node.speedup, node.ci_high or 0.0)
        share = brief.share if brief.share_timed else None  # a share of launches bounds nothing: take all of it
        bound = end_to_end_bound(high, share)
        if bound >= need:
            return None
        where = f" at its {share:.0%} of graph time" if share is not None else ""
        return (f"kernel speedup {node.speedup:.3f}x (at most {high:.3f}x){where} gives at most {bound:.3f}x end to "
                f"end, below the {need:.2f}x gate")

    def clears_margin(self, search: KernelSearch, node: BeamNode) -> bool:
        """A clear win, by its confidence interval, that can clear the end-to-end gate; and clearly faster
        than an accepted candidate."""
        low = node.ci_low
        if low is None or node.speedup < EARLY_MARGIN or low < EARLY_MARGIN or node.id in search.finalized:
            return False
        if self.out_of_reach(search, node):
            return False
        return search.accepted is None or low > search.accepted.speedup

    def early(self, search: KernelSearch, node: BeamNode) -> None:
        """Finalize ``node`` now when it clears the margin and the budget has a finalist's time."""
        if not self.clears_margin(search, node):
            return
        if not self.ctx.schedule.may_finalize(search.brief.name):
            return
        self._finalize(search, node, "early finalist")

    def finalize_waiting(self, search: KernelSearch) -> bool:
        """The final gates now, on this kernel's candidates worth finalizing (fastest first, at most ``finalists``,
        the first accepted ending it) while a finalist's time is left; the search goes on after them with what
        they left. True when any ran (what the schedule keeps has changed)."""
        ran = False
        for node in self.waiting(search)[: max(1, self.ctx.config.finalists)]:
            self.ctx.sink.check_cancelled()
            if not self.ctx.schedule.may_finalize(search.brief.name, quiet=True):
                break  # the beam's end reports it (found, not verified) if no time comes free
            ran = True
            if self._finalize(search, node, "finalist") and search.accepted is node:
                break
        return ran

    def reopen(self, search: KernelSearch) -> None:
        """The kernel's beam goes on (:meth:`BeamStage.resume`): its candidates worth finalizing count again."""
        if search in self.done:
            self.done.remove(search)

    def final(self, search: KernelSearch) -> None:
        """Gates 3-4 on the fastest screened candidates not yet finalized; the first accepted wins."""
        self.done.append(search)
        accepted = search.accepted
        ranked = sorted((n for n in search.nodes if n.id != "root" and n.speedup > 1.0 and n.id not in search.finalized
                         and (accepted is None or n.speedup > accepted.speedup)),
                        key=lambda n: (n.latency_ms, n.id))
        reachable = []
        for node in ranked:
            why = search.out_of_reach.get(node.id) or self.out_of_reach(search, node)
            if why is None:
                reachable.append(node)
            elif node.id not in search.out_of_reach:
                search.out_of_reach[node.id] = why
                self.ctx.journal.record("finalist_skipped", kernel=search.brief.name, node=node.id, reason=why)
        for node in reachable[: max(1, self.ctx.config.finalists)]:
            self.ctx.sink.check_cancelled()
            if not self.ctx.schedule.may_finalize(search.brief.name):
                self._found_too_late(search, node)
                return
            if self._finalize(search, node, "finalist") and search.accepted is node:
                return

    def _found_too_late(self, search: KernelSearch, node: BeamNode) -> None:
        """``node`` was worth finalizing but the budget had no finalist's time left: it is reported with its
        kernel speedup, "found, not verified within the budget" (beside an accepted one only when faster)."""
        accepted = search.accepted
        if (accepted is not None and node.speedup <= accepted.speedup) or \
                any(n.id == node.id for n in search.found_unverified):
            return
        search.found_unverified.append(node)
        ci = f" [{node.ci_low:.3f}, {node.ci_high:.3f}]" if node.ci_low is not None and node.ci_high is not None else ""
        self.ctx.journal.record("found_unverified", kernel=search.brief.name, node=node.id,
                                title=search.titles.get(node.id, node.id), kernel_speedup=node.speedup,
                                ci=[node.ci_low, node.ci_high] if ci else None)
        self.ctx.progress(f"{search.brief.name}: {node.id} ({search.titles.get(node.id, node.id)}) found, kernel "
                          f"speedup {node.speedup:.3f}x{ci}, not verified within the budget", stage="budget",
                          kernel=search.brief.name, candidate=node.id, best_speedup=node.speedup)

    def _finalize(self, search: KernelSearch, node: BeamNode, what: str) -> bool:
        """Run the final gates on ``node``; True when it passed them (whether or not it replaced another)."""
        ctx, name = self.ctx, search.brief.name
        inner = getattr(ctx.evaluator, "inner", ctx.evaluator)
        if hasattr(inner, "sanitizer_timeout_s"):  # the sanitizers' share of what the budget leaves
            inner.sanitizer_timeout_s = ctx.schedule.sanitizer_limit_s()
        title = search.titles.get(node.id, node.id)
        ctx.progress(f"{name}: {what} {node.id} ({title}) through {self.final_gates_text()}", stage="gate",
                     kernel=name, candidate=node.id)
        search.finalized.add(node.id)
        before = ctx.evaluator.replayed
        with ctx.times.stage("finalize", replayed=lambda: ctx.evaluator.replayed > before) as seconds:
            cascade = ctx.evaluator.finalize({name: node.source}, self.gates())
        timing = next((c for c in ctx.times.candidates if c.label == node.id and c.kernel == name), None)
        split = final_gates_split(cascade)
        if timing is not None:
            timing.finalize_s = seconds[0]
            timing.final_gates_s = split
        model = cascade.verdict(3)  # compute-sanitizer's runs and times, for every finalist
        ctx.journal.record("finalist", kernel=name, node=node.id, accepted=cascade.accepted,
                           final_gates_s=split, steps_s={str(v.gate): v.numbers.get("steps_s") for v in cascade.gates
                                                         if isinstance(v.numbers.get("steps_s"), dict)},
                           failed_gate=cascade.failed_gate, reason=cascade.reason, speedup=cascade.speedup,
                           could_not_verify=cascade.could_not_verify, early=what == "early finalist",
                           sanitizer=model.numbers.get("sanitizer") if model is not None else None,
                           sanitizer_note=model.numbers.get("sanitizer_note") if model is not None else None)
        if cascade.could_not_verify:
            search.unverified += 1
            return False
        verdict = cascade.verdict(3)
        if verdict is not None and verdict.passed:
            search.correct = True
        accepted = cascade.accepted
        if accepted and not ctx.config.use_perf_gate:
            accepted = node.speedup >= ctx.config.min_speedup  # ablation: kernel timing decides
        if not accepted:
            if cascade.failed_gate == 4:
                search.perf_rejected += 1
            elif cascade.failed_gate == 2:  # gate 2's full battery: a rejection the screen did not make
                search.rejections[2] = search.rejections.get(2, 0) + 1
            if search.accepted is None:
                search.cascade = cascade
            return False
        if search.accepted is not None and (cascade.speedup or 0.0) < (search.cascade.speedup if search.cascade
                                                                          and search.cascade.speedup else 0.0):
            ctx.journal.record("note", message=f"{name}: {node.id} passed the final gates but is not faster end to "
                                               f"end than {search.accepted.id}; {search.accepted.id} stays")
            return True
        search.accepted, search.cascade = node, cascade
        if ctx.config.keep_for_confirmation:  # the caller's A/B of it follows the run: keep its time from now on
            gate4 = cascade.verdict(4)
            ctx.schedule.confirm_s = max(ctx.schedule.confirm_s, confirmation_s(gate4.seconds if gate4 else None))
        ctx.progress(f"{name}: {node.id} verified through all gates"
                     + (f", {cascade.speedup:.3f}x end to end" if cascade.speedup else ""),
                     stage="verified", kernel=name, candidate=node.id, best_speedup=cascade.speedup)
        self.on_verified(search)
        return True

    def combine(self, searches: list[KernelSearch]) -> CascadeResult | None:
        """The final cascade: several accepted kernels verified together, else the accepted one's."""
        ctx = self.ctx
        accepted = [s for s in searches if s.accepted is not None]
        if len(accepted) >= 2:
            candidates = {s.brief.name: s.accepted.source for s in accepted if s.accepted is not None}
            combined: CascadeResult | None = None
            if ctx.schedule.may_finalize("combined"):
                ctx.progress(f"{len(candidates)} accepted kernels verified together", stage="gate")
                with ctx.times.stage("combine"):
                    combined = ctx.evaluator.finalize(candidates, self.gates())
                ctx.journal.record("combined", kernels=sorted(candidates), accepted=combined.accepted,
                                   reason=combined.reason, speedup=combined.speedup)
            if combined is not None and combined.accepted:
                return combined
            best = max(accepted, key=lambda s: (s.cascade.speedup or 0.0) if s.cascade else 0.0)
            for other in accepted:
                if other is not best:
                    other.accepted = None  # only the best one stands on its own
            return best.cascade
        if accepted:
            return accepted[0].cascade
        tried = [s.cascade for s in searches if s.cascade is not None]
        return tried[-1] if tried else None
