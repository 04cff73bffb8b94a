"""The brief of a kernel before its search: facts, an ncu profile (when the budget allows one), the
analyst's tier, directions and speed-of-light evidence. Its output is the :class:`KernelBrief`
the agents read.

The first profile asks ncu for the kernels still to search as well: one runner start and one graph
load serve them all (most of a profile's time), and the later briefs read ncu's cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..artifacts import TritonKernel
from .agents import KernelBrief
from .run_context import RunContext


class BriefStage:
    def __init__(self, ctx: RunContext, launch_timing: dict[str, Any] | None,
                 make_room: Callable[[], bool] = lambda: False, kernels: tuple[str, ...] = ()):
        self.ctx = ctx
        self.kernels = kernels  # the run's targets in search order: profiled together
        self.profiled: set[str] = set()  # kernels an earlier profile already measured (ncu's cache has them)
        self.launch_timing = launch_timing or {}  # the dispatch timing: launch times and arguments
        # runs the work the reserve is kept for (the configuration check); True when it ran
        self.make_room = make_room

    def make(self, kernel: TritonKernel, share: float, facts: dict[str, Any], kernels_left: int,
             share_timed: bool = False) -> KernelBrief:
        """``share_timed``: ``share`` is of measured graph time (else of the launch count)."""
        ctx = self.ctx
        brief = KernelBrief(name=kernel.name, kind=kernel.kind, device=ctx.device_kind, original_source=kernel.source,
                            share=share, share_timed=share_timed, baseline_ms=facts.get("ms"),
                            inductor_configs=facts.get("configs", []),
                            aten_ops=list(kernel.aten_ops))
        metrics = None
        if ctx.config.use_ncu and ctx.device_kind == "cuda":
            if self._may_profile(kernel.name, kernels_left):
                metrics = self._profile(brief)
            else:
                brief.evidence.append("ncu skipped: the budget keeps its time for candidates and the final gates")
        with ctx.times.stage("brief"):
            analysis = self._analyse(kernel, metrics)
        brief.tier = analysis.get("tier", "unknown")
        brief.evidence += analysis.get("evidence", [])
        brief.directions = analysis.get("directions", [])
        brief.top_rules = analysis.get("top_rules", [])
        brief.metrics = metrics
        brief.speed_of_light = analysis.get("rewrite_evidence") or {}
        brief.paper_tier = analysis.get("paper_tier", "unknown")
        if brief.baseline_ms is not None:
            brief.evidence.append(f"kernel alone: {brief.baseline_ms:.4f} ms on its captured arguments")
        ctx.journal.record("brief", kernel=kernel.name, value=brief.to_json())
        return brief

    def _may_profile(self, name: str, kernels_left: int) -> bool:
        """Time for a profile and one candidate; when what the run keeps is all that stops them, that work
        runs first (the configuration check) and the profile has what it left. A kernel an earlier profile
        measured costs a cache read."""
        if name in self.profiled:
            return True
        schedule = self.ctx.schedule
        if schedule.may_profile(name, kernels_left, quiet=True):
            return True
        if schedule.profile_blocked_by_reserve(kernels_left) and self.make_room():
            return schedule.may_profile(name, kernels_left)
        return schedule.may_profile(name, kernels_left)  # says why not

    def _profile(self, brief: KernelBrief) -> dict[str, Any] | None:
        ctx = self.ctx
        request = ctx.profiler.choose(brief)
        ctx.journal.record("ncu_request", kernel=brief.name, request=request.to_json())
        before = ctx.evaluator.replayed
        together = () if brief.name in self.profiled else self._still_to_profile(brief.name)
        with ctx.times.stage("profile", replayed=lambda: ctx.evaluator.replayed > before):
            profile = ctx.evaluator.profile(brief.name, request.sections, together=together) or {}
        if profile.get("error"):
            brief.evidence.append(f"ncu unavailable: {profile['error']}")
        else:
            self.profiled.update(profile.get("profiled_together") or ())
            ctx.run_folder.write_json(f"ncu/{brief.name}.json", profile)
        return profile.get("metrics")

    def _still_to_profile(self, name: str) -> tuple[str, ...]:
        """The targets after ``name`` that no profile has measured yet."""
        later = self.kernels[self.kernels.index(name) + 1:] if name in self.kernels else ()
        return tuple(k for k in later if k not in self.profiled)

    def _peaks(self) -> Any:
        """The device's measured peaks (cached per GPU, measured once) from the evaluator, journaled
        for a resumed run. None on the CPU backend, or when the evaluator cannot measure them."""
        ctx = self.ctx
        if ctx.device_kind != "cuda":
            return None
        from ..measure.peaks import DevicePeaks

        entry = ctx.journal.lookup("peaks", "device")
        if entry is None:
            measure = getattr(getattr(ctx.evaluator, "inner", ctx.evaluator), "peaks", None)
            try:
                found = measure() if measure is not None else None
                value = found.to_json() if found is not None else {"error": "the evaluator measured no peaks"}
            except Exception as exc:  # noqa: BLE001 - no peaks means SOL unknown, never a failed run
                value = {"error": f"{type(exc).__name__}: {exc}"}
            entry = ctx.journal.append("peaks", "device", value=value)
        value = entry["value"]
        return DevicePeaks.from_json(value) if isinstance(value, dict) and "error" not in value else None

    def _launch(self, kernel: TritonKernel) -> tuple[Any, float | None, str | None]:
        """The launch standing for the kernel (recorded in the dispatch timing, else read from the
        wrapper), its timed duration and that time's source."""
        from ..measure.traffic import LaunchTraffic, kernel_launch, static_graph_traffic

        timing = self.launch_timing
        recorded = [LaunchTraffic.from_json(item) for item in timing.get("launch_traffic") or []]
        launch = kernel_launch(recorded, kernel.name) or kernel_launch(static_graph_traffic(self.ctx.graph), kernel.name)
        times = timing.get("launch_times_ms") or {}
        ms = times.get(str(launch.order)) if launch is not None else None
        source = f"timed launch, {timing.get('path', 'module-call')} path (no ncu)" if ms is not None else None
        return launch, (float(ms) if ms is not None else None), source

    def _analyse(self, kernel: TritonKernel, metrics: dict[str, Any] | None) -> dict[str, Any]:
        try:
            from ..analyst import analyze_kernel, rewrite_evidence
            from ..measure.ncu import KernelMetrics

            parsed = KernelMetrics.from_json(metrics) if metrics else None
            launch, launch_ms, source = self._launch(kernel)
            analysis = analyze_kernel(parsed, None, self._peaks(), kernel, launch_args=launch, duration_ms=launch_ms,
                                      duration_source=source, cpu=self.ctx.device_kind == "cpu")
            return {**analysis.to_json(), "rewrite_evidence": rewrite_evidence(analysis, launch)}
        except Exception as exc:  # noqa: BLE001 - no analysis means tier unknown, never a failed run
            return {"tier": "unknown", "evidence": [f"analyst unavailable: {exc}"]}
