"""What the search optimizes: the :class:`Target` protocol, and :class:`DumpTarget`, a dump's graph.

A target is one of two kinds, and a third (an op of a kernel library, say) needs only a new
implementation: a kernel in an Inductor dump (:class:`DumpTarget`), or a user's own
``@triton.jit`` kernel with its harness (:class:`kernelopt_core.userkernels.target.UserKernelTarget`).
Every stage reads the target through this protocol; the evaluator (:mod:`.evaluation`) gates and
measures it through the target's cascade view and its measurements. Nothing here imports torch.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..artifacts import CompiledGraph
from ..gates.cascade import TaskCaller
from ..gates.cascade_target import CascadeTarget, GraphGates
from ..gates.restitch import restitch
from .kernel_tasks import GraphFactsRequest

LAUNCHER_CONTRACT = "launcher_contract.md"
_KERNEL_TASKS = "kernelopt_core.search.kernel_tasks"


class TargetUnavailable(RuntimeError):
    """The target cannot be measured on the device asked for (the message says why)."""


class Target(Protocol):
    """A kernel the search optimizes, what it is measured with, and how an accepted rewrite is written."""

    # Read-only, so that an implementation may set them on the class.
    @property
    def users_own(self) -> bool: ...  # a project's own kernel: its file is the user's, no configuration advised

    @property
    def compile_probes(self) -> bool: ...  # families may compile candidates for sm_90 to read their registers

    @property
    def contract_prompt(self) -> str: ...  # the prompt file that tells the agents what a candidate must keep

    @property
    def times_kernel_in_gate4(self) -> bool: ...  # gate 4 also times the kernel alone (reported, never decides)

    @property
    def cascade_timeout_s(self) -> float | None: ...  # each gate task's limit in the worker (None: the default)

    def graph(self) -> CompiledGraph: ...  # the pipeline's view: its kernels and launches

    def resume_record(self) -> dict[str, Any] | None: ...  # what a resumed run needs beyond the graph's path

    def timing_step(self) -> str: ...  # the progress line while its launches are timed

    def dispatch_evidence(self, report: Any, timing: dict[str, Any] | None) -> str: ...

    def rewrite(self, text: str, sources: dict[str, str]) -> str: ...  # the file text with accepted kernels

    def rewritten_name(self) -> str: ...  # the run folder's copy of the rewritten file

    # --- measured through the evaluator, on the target's device ---------------------------------------

    def device_for(self, requested: str) -> str: ...  # raises TargetUnavailable

    def gates(self) -> CascadeTarget: ...  # the cascade's view (one per evaluator)

    def facts(self, call: TaskCaller, device: str, kernels: list[str], rounds: int | None) -> dict[str, Any]: ...

    def launch_timing(self, call: TaskCaller, worker: Any, device: str, workdir: str) -> dict[str, Any] | None: ...

    def profile(self, kernel: str, sections: tuple[str, ...], device: str, cancel: threading.Event | None,
                together: tuple[str, ...] = ()) -> dict[str, Any] | None: ...

    def time_candidate(self, call: TaskCaller, device: str, kernel: str, source: str, written: str | None,
                       rounds: int | None, workdir: str) -> dict[str, Any]: ...


class DumpTarget:
    """Kernels of one graph in an Inductor dump (its ``output_code.py``)."""

    users_own = False
    contract_prompt = LAUNCHER_CONTRACT
    times_kernel_in_gate4 = False
    cascade_timeout_s: float | None = None

    def __init__(self, graph: CompiledGraph):
        self._graph = graph
        self.compile_probes = True

    def graph(self) -> CompiledGraph:
        return self._graph

    def resume_record(self) -> dict[str, Any] | None:
        return None  # the graph's path and kernel, journaled for every run, find it again

    def timing_step(self) -> str:
        return "timing the graph's launches (the first measurement also starts the worker)"

    def dispatch_evidence(self, report: Any, timing: dict[str, Any] | None) -> str:
        return str(report.evidence)

    def rewrite(self, text: str, sources: dict[str, str]) -> str:
        return restitch(self._graph, sources, text)

    def rewritten_name(self) -> str:
        return "optimized_output_code.py"

    def device_for(self, requested: str) -> str:
        from ..measure.devices import DeviceMismatch, device_for_graph

        try:
            return device_for_graph(requested, self._graph.device, self._graph.name)
        except DeviceMismatch as exc:
            raise TargetUnavailable(str(exc)) from None

    def gates(self) -> CascadeTarget:
        return GraphGates(self._graph)

    def facts(self, call: TaskCaller, device: str, kernels: list[str], rounds: int | None) -> dict[str, Any]:
        # Configs only: the kernel's own time comes with every candidate's A/B (baseline_ms).
        request = GraphFactsRequest(self._graph.path, device, tuple(kernels), time=False, rounds=rounds)
        return call(f"{_KERNEL_TASKS}:graph_facts", request.to_json())

    def launch_timing(self, call: TaskCaller, worker: Any, device: str, workdir: str) -> dict[str, Any] | None:
        from ..measure.launch_timing import time_launches

        try:
            return time_launches(self._graph, device, worker=worker).to_json()
        except Exception as exc:  # noqa: BLE001 - the shares fall back to launch counts
            return {"error": f"{type(exc).__name__}: {exc}"}

    def profile(self, kernel: str, sections: tuple[str, ...], device: str, cancel: threading.Event | None,
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        from ..measure.ncu import NcuError
        from ..measure.ncu_profile import profile_graph

        names = [kernel, *(k for k in together if k != kernel)]
        try:
            profile = profile_graph(self._graph, kernels=names, device=device, sections=sections)
        except (NcuError, OSError, ValueError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        measured = {m.name for m in profile.kernels}
        metrics = next((m for m in profile.kernels if m.name == kernel or kernel in (m.name or "")), None)
        return {"metrics": metrics.to_json() if metrics else None, "notes": profile.notes,
                "wall_s": profile.wall_s, "steps_s": profile.steps_s, "tuned": profile.tuned,
                "profiled_together": sorted(n for n in names[1:] if n in measured)}

    def time_candidate(self, call: TaskCaller, device: str, kernel: str, source: str, written: str | None,
                       rounds: int | None, workdir: str) -> dict[str, Any]:
        if not written:
            return {"error": "no re-stitched graph to time"}
        value = call(f"{_KERNEL_TASKS}:time_candidates", {"graph_path": self._graph.path, "device": device,
                                                         "kernel": kernel, "candidates": {"c": written},
                                                         "rounds": rounds})
        entry: dict[str, Any] = (value.get("candidates") or {}).get("c") or \
            {"error": value.get("error", "no timing returned")}
        return entry


__all__ = ["LAUNCHER_CONTRACT", "DumpTarget", "Target", "TargetUnavailable"]
