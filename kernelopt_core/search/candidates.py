"""One plan of the beam: the executor's attempts, each a candidate screened by gates 1-2 and, when it
passes, timed alone against the original kernel. A timed candidate becomes a beam node.

Each attempt starts only while the budget allows one more candidate; each candidate's time (propose,
screen, timing) goes to the run's :class:`~kernelopt_core.search.time_split.TimeSplit` and journal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..runs import Journal
from .agents import KernelBrief, Plan, Proposal
from .beam import BeamNode
from .compile_probes import probe_sources
from .evaluation import KernelTime
from .kernel_search import KernelSearch, VariantTiming
from .llm import ProviderError
from .rewrites import RewriteContext
from .rewrites.kernel_source import LaunchConfig, parse_kernel_module, source_digest
from .run_context import RunContext
from .time_split import CandidateTime
from .variant_order import variant_order


def compile_probe(journal: Journal, source: str) -> dict[str, Any] | None:
    """Registers, spill bytes and shared memory of a plain kernel module compiled for sm_90 (its
    first launch config), or None when it does not compile. Journaled (search/compile_probes.py)."""
    return probe_sources(journal, [source])[0]


class CandidateStage:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def context(self, brief: KernelBrief, source: str) -> RewriteContext:
        """What the rewrite families read about ``source`` (a beam node's kernel)."""
        ctx = self.ctx
        module = parse_kernel_module(source, brief.name)
        original = parse_kernel_module(brief.original_source, brief.name)
        configs = []
        for item in brief.inductor_configs:
            blocks = {k: v for k, v in (item.get("blocks") or {}).items() if k in module.block_params}
            if blocks:
                configs.append(LaunchConfig.of(blocks, int(item.get("num_warps", 4)), int(item.get("num_stages", 1))))
        from ..analyst import EVIDENCE_KEYS

        evidence = {key: brief.speed_of_light.get(key) for key in EVIDENCE_KEYS}
        sms = evidence.get("sm_count")
        probe = (lambda text: compile_probe(ctx.journal, text)) if ctx.probe_enabled else None
        probes = (lambda texts: probe_sources(ctx.journal, texts)) if ctx.probe_enabled else None
        return RewriteContext(module=module, original=original, device=ctx.device_kind, tier=brief.tier,
                              inductor_configs=configs, evidence=evidence, compile_probe=probe,
                              compile_probes=probes,
                              **({"multiprocessors": int(sms)} if isinstance(sms, int) and sms > 0 else {}))

    def execute(self, search: KernelSearch, plan: Plan, node: BeamNode, context: RewriteContext, tried: set[str],
                iteration: int, label: str, may_start: Callable[..., bool]) -> BeamNode | None:
        """Up to K attempts at ``plan`` from ``node``: the first candidate that passes gates 1-2 and is
        timed becomes the returned child; None when every attempt failed (or the budget stopped them).
        ``may_start(family, quiet=False)``: time for a candidate of ``family`` (None: of the cheapest)."""
        ctx, brief = self.ctx, search.brief
        family = plan.family or "llm"  # what its proposals are recorded as: its estimate is of its kind
        # before the executor's work (a GPU family compiles its variants to read registers)
        if not may_start(family, quiet=True):
            if may_start(None, quiet=True):  # a cheaper family's plan may still fit: this one is passed over
                search.passed_over += 1
                ctx.journal.record("plan_skipped", kernel=brief.name, plan=plan.direction, family=family,
                                   reason="its family's candidates take longer than the time left")
                return None
            may_start(family)  # records why the search stops here
            search.stopped_by_budget = True
            return None
        clock = ctx.times.clock
        begin = clock()
        try:
            session = ctx.executor.start(plan, brief, node.source, context, tried,
                                         order=variant_order(ctx.device_kind, context, search.timings))
        except ProviderError as exc:
            ctx.journal.record("llm_error", agent="executor", message=str(exc))
            return None
        feedback: str | None = None
        for attempt in range(1, ctx.config.retries + 1):
            ctx.sink.check_cancelled()
            if attempt > 1 and not may_start(family):
                search.stopped_by_budget = True
                return None
            try:
                proposal = session.propose(feedback)
            except ProviderError as exc:
                ctx.journal.record("llm_error", agent="executor", message=str(exc))
                return None
            if proposal is None:
                ctx.journal.record("attempt_failed", kernel=brief.name, plan=plan.direction, attempt=attempt,
                                   reason=session.error)
                if session.exhausted:
                    return None
                feedback = session.error
                continue
            digest = source_digest(proposal.source)
            if digest in tried:
                feedback = "this kernel was already tried; change something else"
                ctx.journal.record("attempt_failed", kernel=brief.name, plan=plan.direction, attempt=attempt,
                                   reason="duplicate of an earlier candidate")
                continue
            tried.add(digest)
            timing = CandidateTime(label, brief.name, proposal.family, propose_s=clock() - begin)
            child, feedback = self._try(search, plan, node, proposal, digest, attempt, iteration, label, timing)
            ctx.times.candidates.append(timing)
            ctx.journal.record("candidate_time", **timing.to_json())
            begin = clock()
            if child is not None or feedback is None:
                return child
        return None

    def _try(self, search: KernelSearch, plan: Plan, node: BeamNode, proposal: Proposal, digest: str, attempt: int,
             iteration: int, label: str, timing: CandidateTime) -> tuple[BeamNode | None, str | None]:
        """Screen and time one candidate: (the child node, None), or (None, the feedback for the next
        attempt), or (None, None) when the plan ends here (its check could not run, or timing failed)."""
        ctx, brief = self.ctx, search.brief
        evaluator = ctx.evaluator
        search.candidates += 1
        path = ctx.run_folder.write_candidate(brief.name, digest, proposal.source)
        ctx.journal.record("candidate", kernel=brief.name, id=label, parent=node.id, iteration=iteration,
                           attempt=attempt, source_hash=digest, file=str(path.relative_to(ctx.run_folder.path)),
                           proposal=proposal.to_json())
        ctx.progress(f"{brief.name}: candidate {label} ({proposal.title})", stage="candidate", kernel=brief.name,
                     candidate=label, family=proposal.family, attempt=attempt)
        before = evaluator.replayed
        with ctx.times.stage("screen", replayed=lambda: evaluator.replayed > before) as seconds:
            screen = evaluator.screen(brief.name, proposal.source)
        timing.screen_s, timing.replayed = seconds[0], evaluator.replayed > before
        if screen.quarantined:
            entry = {"candidate": label, "title": proposal.title, "family": proposal.family,
                     "source_hash": digest, "reason": screen.reason, "containment": screen.containment}
            search.quarantined.append(entry)
            ctx.journal.record("quarantine", kernel=brief.name, **entry)
        if screen.could_not_verify:
            # The check failed, not the candidate: no rejection counted, nothing learnt from it.
            search.unverified += 1
            timing.verdict = "could not verify"
            ctx.journal.record("could_not_verify", kernel=brief.name, candidate=label, reason=screen.reason)
            ctx.history.append(f"{proposal.title}: could not be verified ({screen.reason[:200]})")
            return None, None
        if not screen.passed:
            gate = screen.failed_gate or 0
            timing.verdict = f"gate {gate}"
            search.rejections[gate] = search.rejections.get(gate, 0) + 1
            ctx.history.append(f"{proposal.title}: rejected by gate {gate}: {screen.reason[:200]}")
            ctx.experience.learn(ctx.summarizer, brief, plan, proposal, None, f"gate {gate}: {screen.reason[:300]}",
                                 label)
            return None, screen.reason
        timing.verdict = "passed"
        search.screened_ok += 1
        ctx.progress(f"{brief.name}: {label} passed gate 1 and the gate-2 screen; timing it against the original kernel",
                     stage="timing", kernel=brief.name, candidate=label)
        with ctx.times.stage("time", replayed=lambda: evaluator.replayed > before) as seconds:
            kernel_time = evaluator.time(brief.name, proposal.source, screen)
        timing.time_s = seconds[0]
        child = self._node(search, proposal, node, kernel_time, digest, iteration, label, plan)
        timing.speedup = child.speedup if child else None
        ctx.history.append(f"{proposal.title}: passed gate 1 and the gate-2 screen, kernel speedup {child.speedup:.3f}x"
                           if child else f"{proposal.title}: passed gate 1 and the gate-2 screen, timing failed")
        ctx.experience.learn(ctx.summarizer, brief, plan, proposal, child.speedup if child else None, None, label)
        return child, None

    def _node(self, search: KernelSearch, proposal: Proposal, parent: BeamNode, timing: KernelTime, digest: str,
              iteration: int, label: str, plan: Plan) -> BeamNode | None:
        ctx, brief = self.ctx, search.brief
        if timing.speedup is None or timing.ms is None or not math.isfinite(timing.speedup) or timing.speedup <= 0:
            ctx.journal.record("note", message=f"{label}: kernel timing failed: {timing.error}")
            return None
        if brief.baseline_ms is None and timing.baseline_ms:
            brief.baseline_ms = timing.baseline_ms  # for reports and the planner's context
        # Latency on the root's scale: the A/B ratio against the baseline kernel, taken in one worker task.
        latency = search.root.latency_ms / timing.speedup
        node = BeamNode(label, proposal.source, digest, latency, timing.speedup,
                        chain=label if parent.id == "root" else parent.chain, parent=parent.id, iteration=iteration,
                        family=proposal.family, direction=plan.direction,
                        ci_low=timing.ci[0] if timing.ci else None, ci_high=timing.ci[1] if timing.ci else None)
        search.titles[label] = proposal.title
        search.timings.append(VariantTiming(proposal.family, dict(proposal.params), timing.speedup))
        ctx.journal.record("node", kernel=brief.name, node=node.to_json(), title=proposal.title,
                           ci=list(timing.ci) if timing.ci else None)
        return node
