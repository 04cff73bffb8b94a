"""The search pipeline's evaluator for a user kernel: the same protocol as
:class:`kernelopt_core.search.evaluation.GateEvaluator`, on the harness instead of a graph.

The search makes it for a :class:`~kernelopt_core.userkernels.target.UserKernelTarget`
(:mod:`.run_context`); the target itself knows nothing of the search.

* ``launch_timing``: the kernel alone on its captured launch and the harness, timed in the
  worker; the harness's time outside the kernel is an overhead item, so the kernel's share is
  its share of the harness;
* ``profile``: ncu on a GPU, running the harness (:mod:`kernelopt_core.userkernels.ncu_run`);
* ``screen`` / ``finalize``: the user-kernel gates (:mod:`kernelopt_core.userkernels.cascade`);
* ``time``: kernel-alone A/B of a candidate against the original, each in its own process.

Nothing here imports torch.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ..events import EventSink
from ..gates.cascade import CascadeSetupError
from ..gates.verdict import CascadeConfig, CascadeResult
from ..userkernels.cascade import facts as capture_facts
from ..userkernels.cascade import job_caller, run_user_cascade
from ..userkernels.target import UserKernelTarget
from .evaluation import EvaluationError, KernelTime, Screen, start_gate1_compiler


class UserKernelEvaluator:
    def __init__(self, target: UserKernelTarget, workdir: str, *, ab_rounds: int | None = None,
                 kernel_rounds: int | None = None, sink: EventSink | None = None, worker: Any = None,
                 job_timeout_s: float = 900.0):
        self.target = target
        self.device = target.device
        self.workdir = workdir
        self.ab_rounds = ab_rounds
        self.kernel_rounds = kernel_rounds
        self.sink = sink
        self.job_timeout_s = job_timeout_s
        self._worker = worker
        self._call = job_caller(self.device, worker, job_timeout_s, sink)
        self._plan: dict[str, Any] | None = None
        self._profile: dict[str, Any] | None = None
        self.sanitizer_timeout_s = 600.0  # each compute-sanitizer tool's limit on a finalist (the search sets it)

    def warm_up(self) -> None:
        start_gate1_compiler()

    def _job(self, job: str, payload: dict[str, Any]) -> dict[str, Any]:
        reply = self._call(job, payload)
        if "setup_error" in reply:
            raise EvaluationError(str(reply["setup_error"]))
        if reply.get("could_not_verify") and job in ("profile_user_kernel", "user_kernel_facts"):
            raise EvaluationError(str(reply.get("reason")))
        return reply

    @property
    def plan(self) -> dict[str, Any] | None:
        if self._plan is None:
            try:
                self._plan = capture_facts(self.target, self._call, self._root()).get("plan")
            except CascadeSetupError as exc:
                raise EvaluationError(str(exc)) from None
        return self._plan

    def _root(self) -> str:
        return os.path.join(self.workdir, "user-kernel")

    def _config(self, gates: tuple[int, ...]) -> CascadeConfig:
        return CascadeConfig(device=self.device, run_gates=gates, ab_rounds=self.ab_rounds,
                             workdir=os.path.join(self._root(), "candidates"), job_timeout_s=self.job_timeout_s,
                             sanitizer_timeout_s=self.sanitizer_timeout_s,
                             spare_candidate=gates == (1, 2))  # the screens, one after another

    # --- the protocol -------------------------------------------------------------------------------

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        return {"kernels": {name: {"configs": []} for name in kernels}}

    def launch_timing(self) -> dict[str, Any] | None:
        try:
            profile = self.profile_run()
        except EvaluationError as exc:
            return {"error": str(exc)}
        return timing_from_profile(self.target, profile)

    def profile_run(self) -> dict[str, Any]:
        if self._profile is None:
            self._profile = self._job("profile_user_kernel", self.target.payload(workdir=self._root()))
            self._plan = self._profile.get("plan")
        return self._profile

    def peaks(self) -> Any:
        from ..measure.peaks import device_peaks

        if not self.device.startswith("cuda"):
            return None
        return device_peaks(self.device)

    def profile(self, kernel: str, sections: tuple[str, ...]) -> dict[str, Any] | None:
        if not self.device.startswith("cuda"):
            return {"error": "ncu needs a CUDA GPU; the CPU backend has no hardware counters"}
        from ..measure.ncu import NcuError
        from ..userkernels.ncu_run import profile_user_kernel_ncu

        try:
            metrics = profile_user_kernel_ncu(self.target, sections=sections,
                                              cancel=self.sink.cancel_event if self.sink else None)
        except (NcuError, OSError, ValueError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"metrics": metrics.to_json() if metrics else None, "notes": []}

    def screen(self, kernel: str, source: str) -> Screen:
        result = self._cascade(source, (1, 2))
        return Screen(result.accepted, result.failed_gate, result.reason, [v.to_json() for v in result.gates],
                      result.restitched_path, result.seconds, could_not_verify=result.could_not_verify,
                      quarantined=result.quarantined, containment=result.containment)

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        from ..userkernels.dialect import candidate_configs

        payload = self.target.payload(candidate=source, candidate_configs=candidate_configs(source, kernel),
                                      workdir=self._root(), rounds=self.kernel_rounds)
        value = self._call("time_user_candidate", payload)
        if "error" in value or "setup_error" in value:
            return KernelTime(None, None, None, None, str(value.get("error") or value.get("setup_error")))
        ci = value.get("ci")
        return KernelTime(value.get("speedup"), (ci[0], ci[1]) if ci else None, value.get("baseline_ms"),
                          value.get("ms"))

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        source = candidates.get(self.target.kernel)
        if source is None or len(candidates) != 1:
            raise EvaluationError(f"a user-kernel run optimizes {self.target.kernel} alone, not "
                                  f"{', '.join(sorted(candidates))}")
        return self._cascade(source, gates, passed_earlier=(1, 2))  # its screen ran gate 2's one battery

    def _cascade(self, source: str, gates: tuple[int, ...], passed_earlier: tuple[int, ...] = ()) -> CascadeResult:
        config = replace(self._config(gates), passed_earlier=passed_earlier)
        try:
            return run_user_cascade(self.target, source, config, self.sink, call=self._call, plan=self.plan)
        except CascadeSetupError as exc:
            if exc.partial is not None and exc.partial.gates and not exc.partial.gates[-1].passed:
                return exc.partial
            raise EvaluationError(str(exc)) from None


def timing_from_profile(target: UserKernelTarget, profile: dict[str, Any]) -> dict[str, Any]:
    """The dispatch timing the pipeline reads (``LaunchTiming.to_json()`` keys) from a profile reply."""
    from ..measure.traffic import LaunchArg, LaunchTraffic

    kernel_ms = float(profile.get("kernel_ms") or 0.0) * max(1, int(profile.get("launches_per_call") or 1))
    harness_ms = float(profile.get("harness_ms") or 0.0)
    rest = max(0.0, harness_ms - kernel_ms)
    traffic = LaunchTraffic(order=0, kernel=target.kernel,
                            args=[LaunchArg.from_json(a) for a in profile.get("launch_args") or []])
    overheads = []
    if rest > 0:
        overheads.append({"name": "harness", "time_ms": rest, "share": rest / harness_ms if harness_ms else 0.0,
                          "detail": "the harness's time outside this kernel (the wrapper, allocations, other ops)",
                          "suggestion": ""})
    return {"launch_times_ms": {"0": kernel_ms}, "overheads": overheads, "path": "harness",
            "launch_traffic": [traffic.to_json()], "total_ms": harness_ms, "share_basis_ms": harness_ms,
            "share_note": profile.get("share_note")}


__all__ = ["UserKernelEvaluator", "timing_from_profile"]
