"""What the cascade asks of what it verifies, and a dump's graph's answers.

The cascade (:mod:`.cascade`) is the same for every kind of target: the gates in order, the spare
process, the verdicts and the decision. A target supplies only what differs: its device, where the
candidate is written, its gate 1, and the module and payloads of its worker tasks for gates 2-4.
:class:`GraphGates` is a kernel in an Inductor dump; a user's own kernel is
:class:`kernelopt_core.userkernels.cascade.UserKernelGates`. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..artifacts.model import CompiledGraph
from .restitch import RestitchError, write_restitched
from .static import run_static_gate
from .task_payload import GraphCandidate, TaskTarget
from .verdict import CascadeConfig, CascadeResult, GateVerdict

# Calls a worker task by its full name ("package.module:function") with a payload; returns its reply.
TaskCaller = Callable[[str, dict[str, Any]], dict[str, Any]]


class CascadeSetupError(RuntimeError):
    """The cascade cannot run (unknown kernel, unreadable dump, no device for the graph).

    ``partial`` holds the verdicts reached before the problem showed (e.g. gate 1 when the
    graph's device is missing), or None.
    """

    def __init__(self, message: str, partial: CascadeResult | None = None):
        super().__init__(message)
        self.partial = partial


class TaskFailed(RuntimeError):
    """A worker task whose failure is no verdict on a candidate (a fact, a profile, a timing) failed."""


class CascadeTarget(Protocol):
    """What the cascade needs of a target; ``candidates`` maps kernel names to candidate sources."""

    tasks: str  # the module of its gate tasks ("package.module"): run_kernel_gate, run_model_gate, run_perf_gate
    retry_low_memory: bool  # a gate that ran out of memory may run again as a smaller check
    static_gate_uses_worker: bool  # gate 1 reads what the worker captured (the task caller is made for it)
    gate2_screen: bool  # gate 2 has a screen lighter than its full battery: a finalist runs gate 2 again in full

    @property
    def path(self) -> str: ...  # the file the result names (``graph_path``)

    def check(self, candidates: dict[str, str]) -> None: ...  # raises CascadeSetupError

    def resolve_device(self, requested: str, gates: tuple[int, ...]) -> str: ...  # raises CascadeSetupError

    def write_candidate(self, candidates: dict[str, str], config: CascadeConfig,
                        result: CascadeResult) -> str | None: ...

    def prepare(self, call: TaskCaller | None, config: CascadeConfig) -> None: ...

    def static_gate(self, candidates: dict[str, str],
                    config: CascadeConfig) -> tuple[GateVerdict, dict[str, Any] | None]:
        """Gate 1's verdict, and its compile numbers (gate 3's sanitizer reads their shared memory)."""
        ...

    def gate_payload(self, candidates: dict[str, str], written: str | None, device: str) -> TaskTarget:
        """What every gate task of the target reads about the candidate (the gates add their settings)."""
        ...


class GraphGates:
    """The cascade's view of kernels in an Inductor dump: the candidates re-stitched into a copy of the graph."""

    tasks = "kernelopt_core.gates.tasks.graph"
    retry_low_memory = True
    static_gate_uses_worker = False
    gate2_screen = True

    def __init__(self, graph: CompiledGraph):
        self.graph = graph

    @property
    def path(self) -> str:
        return os.path.abspath(self.graph.path)

    def check(self, candidates: dict[str, str]) -> None:
        if not candidates:
            raise CascadeSetupError("no candidate kernels given")
        unknown = sorted(name for name in candidates if self.graph.kernel(name) is None)
        if unknown:
            known = ", ".join(k.name for k in self.graph.kernels) or "none"
            raise CascadeSetupError(f"{self.graph.path} has no Triton kernel named {', '.join(unknown)} "
                                    f"(kernels: {known})")

    def resolve_device(self, requested: str, gates: tuple[int, ...]) -> str:
        """The graph's own device where a gate runs in the worker; gate 1 alone needs none."""
        from ..measure.devices import DeviceMismatch, device_for_graph

        if not any(g > 1 for g in gates):
            return requested or "auto"
        try:
            return device_for_graph(requested, self.graph.device, self.graph.name)
        except DeviceMismatch as exc:
            raise CascadeSetupError(str(exc)) from None

    def write_candidate(self, candidates: dict[str, str], config: CascadeConfig,
                        result: CascadeResult) -> str | None:
        """The re-stitched copy of the graph (the original dump is never modified)."""
        try:
            path, diff = write_restitched(self.graph, candidates, self._candidate_dir(candidates, config))
        except UnicodeError as exc:  # the candidate's own text (e.g. a lone surrogate): gate 1 names it
            result.notes.append(f"the candidate cannot be written as UTF-8: {exc}")
            return None
        except (RestitchError, OSError) as exc:
            raise CascadeSetupError(str(exc)) from None
        result.restitched_path, result.diff = path, diff
        return path

    def _candidate_dir(self, candidates: dict[str, str], config: CascadeConfig) -> str:
        root = config.workdir or os.path.join(tempfile.gettempdir(), "kernelopt-verify")
        digest = hashlib.sha256()
        digest.update(os.path.abspath(self.graph.path).encode())
        for name in sorted(candidates):
            digest.update(b"\0" + name.encode() + b"\0" + candidates[name].encode())
        return os.path.join(root, f"{self.graph.name}-{digest.hexdigest()[:12]}")

    def prepare(self, call: TaskCaller | None, config: CascadeConfig) -> None:
        return None

    def static_gate(self, candidates: dict[str, str],
                    config: CascadeConfig) -> tuple[GateVerdict, dict[str, Any] | None]:
        begin = time.monotonic()
        verdicts = {name: run_static_gate(self.graph, name, source, config.compile_timeout_s)
                    for name, source in sorted(candidates.items())}
        failed = next((v for v in verdicts.values() if not v.passed), None)
        numbers = {"kernels": {name: v.numbers for name, v in verdicts.items()}}
        if len(verdicts) == 1:
            only = next(iter(verdicts.values()))
            numbers = {**only.numbers}
        reason = failed.reason if failed else "; ".join(v.reason for v in verdicts.values())
        verdict = GateVerdict(1, "static", failed is None, reason, numbers, time.monotonic() - begin)
        compiled = {name: (numbers.get("kernels", {}).get(name, numbers) or {}).get("compile") for name in candidates}
        return verdict, compiled

    def gate_payload(self, candidates: dict[str, str], written: str | None, device: str) -> GraphCandidate:
        if written is None:
            raise CascadeSetupError("the re-stitched graph could not be written")
        return GraphCandidate(graph=self.path, restitched=written, kernels=tuple(sorted(candidates)), device=device,
                              sources=dict(candidates), fx_graph_runnable=self.graph.fx_graph_runnable)


__all__ = ["CascadeSetupError", "CascadeTarget", "GraphGates", "TaskCaller", "TaskFailed"]
