"""How the search measures things: gates, kernel timings, dispatch timing, ncu profiles.

:class:`GateEvaluator` is the real one, for every kind of target (:mod:`.target`): the gates' cascade
and the target's measurements, in the worker of its device.
:class:`RecordedEvaluator` wraps any evaluator with the run's journal: every result is written
before it is used and looked up first on a resumed run, so nothing recorded is measured twice.
Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..artifacts.model import CompiledGraph
from ..events import EventSink
from ..gates.cascade_target import TaskCaller
from ..gates.verdict import CascadeConfig, CascadeResult
from ..json_records import JsonRecord
from ..runs import Journal
from .rewrites.kernel_source import source_digest
from .target import DumpTarget, Target, TargetUnavailable


class EvaluationError(RuntimeError):
    """The graph cannot be evaluated at all (not a candidate's fault): wrong device, broken dump."""


@dataclass
class Screen(JsonRecord):
    """Gate 1 and gate 2's screen (the captured launch and one seed) on one candidate."""

    passed: bool
    failed_gate: int | None
    reason: str
    gates: list[dict[str, Any]] = field(default_factory=list)
    restitched_path: str | None = None
    seconds: float = 0.0
    could_not_verify: bool = False  # the check itself failed: no verdict on the candidate
    quarantined: bool = False  # the candidate tried what its contained process may not do
    containment: dict[str, Any] | None = None  # which process it ran in, and what held there


@dataclass
class KernelTime:
    """Kernel-alone interleaved A/B against the baseline kernel (ranks the beam; never accepts)."""

    speedup: float | None
    ci: tuple[float, float] | None
    baseline_ms: float | None
    ms: float | None
    error: str | None = None
    steps_s: dict[str, float] | None = None  # where the timing's seconds went (capture, loading, the A/B)

    def to_json(self) -> dict[str, Any]:
        return {"speedup": self.speedup, "ci": list(self.ci) if self.ci else None, "baseline_ms": self.baseline_ms,
                "ms": self.ms, "error": self.error, **({"steps_s": self.steps_s} if self.steps_s else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelTime:
        ci = data.get("ci")
        steps = data.get("steps_s")
        return cls(data.get("speedup"), (float(ci[0]), float(ci[1])) if ci else None, data.get("baseline_ms"),
                   data.get("ms"), data.get("error"), dict(steps) if isinstance(steps, dict) else None)


def start_gate1_compiler() -> None:
    """Start gate 1's compile zygote in the background: its imports (seconds) overlap the dispatch and
    the profile instead of adding to the first candidate's screen."""
    from ..gates.ptx_compile import shared_compiler

    shared_compiler().start_in_background()


class Evaluator(Protocol):
    device: str

    def facts(self, kernels: list[str]) -> dict[str, Any]: ...

    def launch_timing(self) -> dict[str, Any] | None: ...

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None: ...

    def screen(self, kernel: str, source: str) -> Screen: ...

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime: ...

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult: ...


class GateEvaluator:
    """Gates and measurements of one target on its device, through the shared worker: the cascade through
    the target's view of it (:meth:`.target.Target.gates`), the measurements through the target's own."""

    def __init__(self, target: Target | CompiledGraph, device: str, workdir: str, *, ab_rounds: int | None = None,
                 kernel_rounds: int | None = None, sink: EventSink | None = None, worker: Any = None,
                 kernel_timing_in_gate4: bool | None = None, job_timeout_s: float = 900.0):
        self.target: Target = DumpTarget(target) if isinstance(target, CompiledGraph) else target
        try:
            self.device = self.target.device_for(device)
        except TargetUnavailable as exc:
            raise EvaluationError(str(exc)) from None
        self.gates = self.target.gates()
        self.workdir = workdir
        self.ab_rounds = ab_rounds
        self.kernel_rounds = kernel_rounds
        self.sink = sink
        self._worker = worker
        self.kernel_timing_in_gate4 = self.target.times_kernel_in_gate4 if kernel_timing_in_gate4 is None \
            else kernel_timing_in_gate4
        self.job_timeout_s = job_timeout_s
        self.sanitizer_timeout_s = 600.0  # each compute-sanitizer tool's limit on a finalist (the search sets it)
        self._compiled: dict[str, Any] = {}  # (kernel, source digest) -> gate 1's compile numbers from its screen

    @property
    def worker(self) -> Any:
        if self._worker is None:
            from ..measure.worker import get_worker

            self._worker = get_worker(self.device)
        return self._worker

    def _measure(self) -> TaskCaller:
        from ..gates.cascade import measurement_caller

        return measurement_caller(self.device, self.worker, self.job_timeout_s, self.sink)

    def _config(self, gates: tuple[int, ...], gate2_battery: str = "full") -> CascadeConfig:
        config = CascadeConfig(device=self.device, run_gates=gates, ab_rounds=self.ab_rounds,
                               workdir=os.path.join(self.workdir, "restitched"),
                               kernel_timing=self.kernel_timing_in_gate4, gate2_battery=gate2_battery,
                               # the kernel timing that follows a screen reuses the candidate's process
                               keep_candidate=gates == (1, 2), sanitizer_timeout_s=self.sanitizer_timeout_s,
                               spare_candidate=gates == (1, 2))  # screens follow one another
        if self.target.cascade_timeout_s is not None:
            config.job_timeout_s = self.target.cascade_timeout_s
        return config

    def warm_up(self) -> None:
        """Start, in the background, the processes the first screen needs: gate 1's compile zygote here and
        gate 2's spare candidate process in the worker. Both start during the profile (on a GPU, 25-30 s of
        ncu) instead of adding their start (seconds each: docs/optimizer.md) to the first candidate's screen.
        Neither launches a kernel: the profile's and the peaks' timings do not share the GPU with them."""
        from ..gates.cascade import SHARED_TASKS, TaskFailed

        start_gate1_compiler()
        try:  # only a head start: where it fails, the first screen starts its process itself and says so
            self._measure()(f"{SHARED_TASKS}:begin_spare", {"device": self.device})
        except TaskFailed:
            pass
        if self.device.startswith("cuda") and not self.target.users_own:  # the baseline's timing process too
            try:
                self._measure()(f"{self.gates.tasks}:begin_baseline_timing",
                                {"graph": self.target.graph().path, "device": self.device})
            except TaskFailed:
                pass

    def _measured(self, measure: Any) -> Any:
        from ..gates.cascade import TaskFailed

        try:
            return measure(self._measure())
        except TaskFailed as exc:
            raise EvaluationError(str(exc)) from None

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        return self._measured(lambda call: self.target.facts(call, self.device, kernels, self.kernel_rounds))

    def launch_timing(self) -> dict[str, Any] | None:
        return self._measured(lambda call: self.target.launch_timing(call, self.worker, self.device, self.workdir))

    def peaks(self) -> Any:
        """The device's measured copy and matmul peaks (cached per GPU; None on the CPU backend)."""
        from ..measure.peaks import device_peaks

        return device_peaks(self.device, worker=self.worker if self.device.startswith("cuda") else None)

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        """ncu's metrics of ``kernel``; ``together``: kernels measured in the same run where the target
        can (the reply's ``profiled_together`` names them; ncu's cache keeps their figures)."""
        if not self.device.startswith("cuda"):
            return {"error": "ncu needs a CUDA GPU; the CPU backend has no hardware counters"}
        return self.target.profile(kernel, sections, self.device, self.sink.cancel_event if self.sink else None,
                                   together=together)

    def screen(self, kernel: str, source: str) -> Screen:
        from ..gates import cascade

        try:
            result = cascade.run_cascade(self.gates, {kernel: source}, self._config((1, 2), "screen"), self.sink,
                                         self._worker)
        except cascade.CascadeSetupError as exc:
            if exc.partial is not None and exc.partial.gates and not exc.partial.gates[-1].passed:
                result = exc.partial
            else:
                raise EvaluationError(str(exc)) from None
        static = next((v for v in result.gates if v.gate == 1), None)
        if static is not None and isinstance(static.numbers.get("compile"), dict):  # the finalist's sanitizer reads it
            self._compiled[candidate_key(kernel, source)] = static.numbers["compile"]
        return Screen(result.accepted, result.failed_gate, result.reason, [v.to_json() for v in result.gates],
                      result.restitched_path, result.seconds, could_not_verify=result.could_not_verify,
                      quarantined=result.quarantined, containment=result.containment)

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        entry = self._measured(lambda call: self.target.time_candidate(
            call, self.device, kernel, source, screen.restitched_path, self.kernel_rounds, self.workdir))
        if "error" in entry:
            return KernelTime(None, None, None, None, str(entry["error"]), entry.get("steps_s"))
        ci = entry.get("ci")
        return KernelTime(entry.get("speedup"), (ci[0], ci[1]) if ci else None, entry.get("baseline_ms"),
                          entry.get("ms"), steps_s=entry.get("steps_s"))

    def release(self) -> dict[str, Any]:
        """Give back the working sets the gate tasks keep between candidates (the candidate's, the spare's and
        the baseline's timing processes), before a task that needs the device to itself."""
        return self._task_in("kernelopt_core.gates.working_sets:release_working_sets", {"device": self.device})

    def verify_config(self, problem: str, option: Any, baseline_mode: str, timeout_s: float) -> Any:
        """A configuration change checked in this evaluator's worker (after :meth:`release`): one process
        holds a working set on the device at a time."""
        from ..recommend import verify_option

        return verify_option(problem, option, baseline_mode, device=self.device, worker=self.worker,
                             timeout_s=timeout_s)

    def _task_in(self, task: str, payload: dict[str, Any]) -> Any:
        outcome = self.worker.call(task, payload, timeout_s=120.0)
        if not outcome.ok:  # nothing was held, or the worker is gone (and its processes with it)
            return {"error": outcome.failure.message if outcome.failure else "failed"}
        return outcome.value

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        """``gates`` (the pipeline's final gates, e.g. (3, 4)), after gate 2's full battery where the screen ran
        a lighter one (the captured launch and one seed): no candidate is accepted without the rest."""
        from ..gates import cascade

        final = tuple(sorted({2, *(g for g in gates if g > 2)})) if self.gates.gate2_screen else gates
        # its screen passed gates 1-2: an acceptance names them (a gate run again here is named as run here)
        config = replace(self._config(final, "full"), passed_earlier=(1, 2))
        compiled = {name: self._compiled.get(candidate_key(name, source)) for name, source in candidates.items()}
        config.compiled = {name: numbers for name, numbers in compiled.items() if numbers is not None}
        try:
            return cascade.run_cascade(self.gates, candidates, config, self.sink, self._worker)
        except cascade.CascadeSetupError as exc:
            if exc.partial is not None:
                return exc.partial
            raise EvaluationError(str(exc)) from None


def candidate_key(kernel: str, source: str) -> str:
    return f"{kernel}:{source_digest(source)[:20]}"


def _final_key(candidates: dict[str, str], gates: tuple[int, ...]) -> str:
    # "+gate2-full": a final verdict recorded before finalists ran gate 2's full battery is not replayed
    digest = hashlib.sha256(json.dumps(sorted((k, source_digest(v)) for k, v in candidates.items())).encode())
    return f"{digest.hexdigest()[:20]}:{','.join(map(str, gates))}+gate2-full"


class RecordedEvaluator:
    """Journal-backed memo: record each result (fsynced) before use; replay it on resume."""

    def __init__(self, inner: Evaluator, journal: Journal):
        self.inner = inner
        self.journal = journal
        self.device = inner.device
        self.replayed = 0

    def warm_up(self) -> None:
        """Start what the first screen needs ahead of it, where the inner evaluator can (stand-ins need not)."""
        warm_up = getattr(self.inner, "warm_up", None)
        if callable(warm_up):
            warm_up()

    def _memo(self, kind: str, key: str, compute: Any) -> Any:
        entry = self.journal.lookup(kind, key)
        if entry is not None:
            self.replayed += 1
            return entry["value"]
        value = compute()
        self.journal.append(kind, key, value=value)
        return value

    def release(self) -> dict[str, Any]:
        """Give back the inner evaluator's working sets, where it keeps any (stand-ins need not)."""
        release = getattr(self.inner, "release", None)
        return release() if callable(release) else {}

    def verify_config(self, problem: str, option: Any, baseline_mode: str, timeout_s: float) -> Any:
        """The inner evaluator's configuration check (its worker); the caller journals the verdict."""
        verify = getattr(self.inner, "verify_config", None)
        if not callable(verify):
            from ..recommend import verify_option

            return verify_option(problem, option, baseline_mode, device=self.device, timeout_s=timeout_s)
        return verify(problem, option, baseline_mode, timeout_s)

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        return self._memo("facts", ",".join(kernels), lambda: self.inner.facts(kernels))

    def launch_timing(self) -> dict[str, Any] | None:
        return self._memo("launch_timing", "graph", self.inner.launch_timing)

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        return self._memo("profile", f"{kernel}:{','.join(sections)}",
                          lambda: self.inner.profile(kernel, sections, together=together))

    def screen(self, kernel: str, source: str) -> Screen:
        key = candidate_key(kernel, source)
        entry = self.journal.lookup("screen", key)
        if entry is not None:
            self.replayed += 1
            return Screen.from_json(entry["value"])
        screen = self.inner.screen(kernel, source)
        self.journal.append("screen", key, value=screen.to_json(), passed=screen.passed,
                            failed_gate=screen.failed_gate, kernel=kernel)
        return screen

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        value = self._memo("timing", candidate_key(kernel, source),
                           lambda: self.inner.time(kernel, source, screen).to_json())
        return KernelTime.from_json(value)

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        value = self._memo("final", _final_key(candidates, gates),
                           lambda: self.inner.finalize(candidates, gates).to_json())
        return CascadeResult.from_json(value)
