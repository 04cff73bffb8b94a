"""How the search measures things: gates, kernel timings, dispatch timing, ncu profiles.

:class:`GateEvaluator` is the real one (the gates' cascade and worker jobs on the graph's device).
:class:`RecordedEvaluator` wraps any evaluator with the run's journal: every result is written
before it is used and looked up first on a resumed run, so nothing recorded is measured twice.
Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from ..artifacts.model import CompiledGraph
from ..events import EventSink
from ..gates.verdict import CascadeConfig, CascadeResult
from ..runs import Journal
from .rewrites.kernel_source import source_digest


class EvaluationError(RuntimeError):
    """The graph cannot be evaluated at all (not a candidate's fault): wrong device, broken dump."""


@dataclass
class Screen:
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Screen:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class KernelTime:
    """Kernel-alone interleaved A/B against the baseline kernel (ranks the beam; never accepts)."""

    speedup: float | None
    ci: tuple[float, float] | None
    baseline_ms: float | None
    ms: float | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"speedup": self.speedup, "ci": list(self.ci) if self.ci else None, "baseline_ms": self.baseline_ms,
                "ms": self.ms, "error": self.error}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelTime:
        ci = data.get("ci")
        return cls(data.get("speedup"), (float(ci[0]), float(ci[1])) if ci else None, data.get("baseline_ms"),
                   data.get("ms"), data.get("error"))


def start_gate1_compiler() -> None:
    """Start gate 1's compile zygote in the background: its imports (seconds) overlap the dispatch and
    the profile instead of adding to the first candidate's screen."""
    from ..gates.ptx_compile import shared_compiler

    shared_compiler().start_in_background()


class Evaluator(Protocol):
    device: str

    def facts(self, kernels: list[str]) -> dict[str, Any]: ...

    def launch_timing(self) -> dict[str, Any] | None: ...

    def profile(self, kernel: str, sections: tuple[str, ...]) -> dict[str, Any] | None: ...

    def screen(self, kernel: str, source: str) -> Screen: ...

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime: ...

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult: ...


class GateEvaluator:
    """Gates and measurements on the graph's own device, through the shared worker."""

    def __init__(self, graph: CompiledGraph, device: str, workdir: str, *, ab_rounds: int | None = None,
                 kernel_rounds: int | None = None, sink: EventSink | None = None, worker: Any = None,
                 kernel_timing_in_gate4: bool = False, job_timeout_s: float = 900.0):
        from ..measure.devices import DeviceMismatch, device_for_graph

        try:
            self.device = device_for_graph(device, graph.device, graph.name)
        except DeviceMismatch as exc:
            raise EvaluationError(str(exc)) from None
        self.graph = graph
        self.workdir = workdir
        self.ab_rounds = ab_rounds
        self.kernel_rounds = kernel_rounds
        self.sink = sink
        self._worker = worker
        self.kernel_timing_in_gate4 = kernel_timing_in_gate4
        self.job_timeout_s = job_timeout_s
        self.sanitizer_timeout_s = 600.0  # each compute-sanitizer tool's limit on a finalist (the search sets it)

    @property
    def worker(self) -> Any:
        if self._worker is None:
            from ..measure.worker import get_worker

            self._worker = get_worker(self.device)
        return self._worker

    def _job(self, function: str, payload: dict[str, Any]) -> Any:
        outcome = self.worker.call(f"kernelopt_core.search.kernel_jobs:{function}", payload,
                                   timeout_s=self.job_timeout_s,
                                   cancel=self.sink.cancel_event if self.sink else None)
        if not outcome.ok:
            failure = outcome.failure
            kind = failure.kind if failure else "error"
            if kind == "cancelled":
                from ..events import CancelledError

                raise CancelledError("cancelled by the user")
            raise EvaluationError(f"{function} failed ({kind}): {failure.message if failure else ''}")
        return outcome.value

    def _config(self, gates: tuple[int, ...], gate2_battery: str = "full") -> CascadeConfig:
        return CascadeConfig(device=self.device, run_gates=gates, ab_rounds=self.ab_rounds,
                             workdir=os.path.join(self.workdir, "restitched"),
                             kernel_timing=self.kernel_timing_in_gate4, gate2_battery=gate2_battery,
                             keep_candidate=gates == (1, 2), sanitizer_timeout_s=self.sanitizer_timeout_s,  # the kernel timing that follows reuses it
                             spare_candidate=gate2_battery == "screen")  # screens follow one another

    def warm_up(self) -> None:
        """Start, in the background, the processes the first screen needs: gate 1's compile zygote here and
        gate 2's spare candidate process in the worker. Both start during the profile (on a GPU, 25-30 s of
        ncu) instead of adding their start (about 9 s and 4 s on the H100) to the first candidate's screen.
        Neither launches a kernel: the profile's and the peaks' timings do not share the GPU with them."""
        start_gate1_compiler()
        # only a head start: where it fails, the first screen starts its process itself and says so
        self.worker.call("kernelopt_core.gates.jobs:begin_spare", {"device": self.device}, timeout_s=60.0)

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        # Configs only: the kernel's own time comes with every candidate's A/B (baseline_ms).
        return self._job("graph_facts", {"graph_path": self.graph.path, "device": self.device, "kernels": kernels,
                                         "rounds": self.kernel_rounds, "time": False})

    def launch_timing(self) -> dict[str, Any] | None:
        from ..measure.launch_timing import time_launches

        try:
            return time_launches(self.graph, self.device, worker=self.worker).to_json()
        except Exception as exc:  # noqa: BLE001 - the shares fall back to launch counts
            return {"error": f"{type(exc).__name__}: {exc}"}

    def peaks(self) -> Any:
        """The device's measured copy and matmul peaks (cached per GPU; None on the CPU backend)."""
        from ..measure.peaks import device_peaks

        return device_peaks(self.device, worker=self.worker if self.device.startswith("cuda") else None)

    def profile(self, kernel: str, sections: tuple[str, ...]) -> dict[str, Any] | None:
        if not self.device.startswith("cuda"):
            return {"error": "ncu needs a CUDA GPU; the CPU backend has no hardware counters"}
        from ..measure.ncu import NcuError
        from ..measure.ncu_profile import profile_graph

        try:
            profile = profile_graph(self.graph, kernels=[kernel], device=self.device, sections=sections)
        except (NcuError, OSError, ValueError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        metrics = next((m for m in profile.kernels if m.name == kernel or kernel in (m.name or "")), None)
        return {"metrics": metrics.to_json() if metrics else None, "notes": profile.notes,
                "wall_s": profile.wall_s}

    def screen(self, kernel: str, source: str) -> Screen:
        from ..gates.cascade import CascadeSetupError, run_cascade

        try:
            result = run_cascade(self.graph, {kernel: source}, self._config((1, 2), "screen"), self.sink,
                                 self._worker)
        except CascadeSetupError as exc:
            if exc.partial is not None and exc.partial.gates and not exc.partial.gates[-1].passed:
                result = exc.partial
            else:
                raise EvaluationError(str(exc)) from None
        return Screen(result.accepted, result.failed_gate, result.reason, [v.to_json() for v in result.gates],
                      result.restitched_path, result.seconds, could_not_verify=result.could_not_verify,
                      quarantined=result.quarantined, containment=result.containment)

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        if not screen.restitched_path:
            return KernelTime(None, None, None, None, "no re-stitched graph to time")
        value = self._job("time_candidates", {"graph_path": self.graph.path, "device": self.device, "kernel": kernel,
                                              "candidates": {"c": screen.restitched_path},
                                              "rounds": self.kernel_rounds})
        entry = (value.get("candidates") or {}).get("c") or {"error": value.get("error", "no timing returned")}
        if "error" in entry:
            return KernelTime(None, None, None, None, str(entry["error"]))
        ci = entry.get("ci")
        return KernelTime(entry.get("speedup"), (ci[0], ci[1]) if ci else None, entry.get("baseline_ms"),
                          entry.get("ms"))

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        """Gate 2's full battery, then ``gates`` (the pipeline's final gates, e.g. (3, 4)): the screen ran
        gate 2 on the captured launch and one seed only, and no candidate is accepted without the rest."""
        from ..gates.cascade import CascadeSetupError, run_cascade

        final = tuple(sorted({2, *(g for g in gates if g > 2)}))
        config = replace(self._config(final, "full"), passed_earlier=(1,))  # gate 1 passed at the screen
        try:
            return run_cascade(self.graph, candidates, config, self.sink, self._worker)
        except CascadeSetupError as exc:
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

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        return self._memo("facts", ",".join(kernels), lambda: self.inner.facts(kernels))

    def launch_timing(self) -> dict[str, Any] | None:
        return self._memo("launch_timing", "graph", self.inner.launch_timing)

    def profile(self, kernel: str, sections: tuple[str, ...]) -> dict[str, Any] | None:
        return self._memo("profile", f"{kernel}:{','.join(sections)}", lambda: self.inner.profile(kernel, sections))

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
