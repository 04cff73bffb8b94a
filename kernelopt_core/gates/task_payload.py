"""What the cascade sends a gate task, typed on both sides and JSON only across the process boundary.

A :class:`GateRequest` is the target's part (what its tasks read about the candidate: a dump's
:class:`GraphCandidate`, a user kernel's :class:`kernelopt_core.userkernels.payload.UserKernelPayload`),
the settings every gate takes (:class:`.registry.CommonSettings`), the gate's own settings (its
class in :data:`.registry.GATES`) and gate 1's compile numbers. On the wire it is one flat JSON
object, the keys the GPU scripts and older callers use; a task reads it back with
:meth:`GateRequest.from_json`, and a payload that lacks a key or holds a value of the wrong type
raises :class:`PayloadError` (the task answers "could not verify", naming the key). Nothing here
imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..payload_fields import PayloadError, PayloadReader
from .registry import CommonSettings


class TaskTarget(Protocol):
    """A target's part of a gate task's payload: what its tasks read about the candidate."""

    @property
    def device(self) -> str | None: ...

    def to_json(self) -> dict[str, Any]: ...


class TaskSettings(Protocol):
    def to_json(self) -> dict[str, Any]: ...


T = TypeVar("T", bound=TaskTarget)
S = TypeVar("S", bound=TaskSettings)


@dataclass(frozen=True)
class Pins:
    """What a caller (a test, a script) may fix instead of what gate 2 works out; the cascade sends none,
    and none goes on the wire at its default."""

    adds_decisions: bool | None = None  # whether the candidate adds decisions on data (None: read the sources)
    constants: tuple[float, ...] | None = None  # where the constants input set draws (None: the candidate's literals)
    decisions: bool = True  # False: no instrumented copy, no evidence for added decisions
    error_structure: bool = True  # False: the error structure is not judged

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.adds_decisions is not None:
            data["adds_decisions"] = self.adds_decisions
        if self.constants is not None:
            data["constants"] = list(self.constants)
        if not self.decisions:
            data["decisions"] = False
        if not self.error_structure:
            data["error_structure"] = False
        return data

    @classmethod
    def read(cls, fields: PayloadReader) -> Pins:
        return cls(adds_decisions=fields.flag("adds_decisions", None), constants=fields.numbers("constants", None),
                   decisions=fields.flag("decisions", True), error_structure=fields.flag("error_structure", True))


@dataclass(frozen=True)
class GateRequest(Generic[T, S]):
    """One gate task's payload: the target's part, the common settings, the gate's own and gate 1's numbers."""

    target: T
    common: CommonSettings
    settings: S
    compiled: dict[str, Any] | None = None  # gate 1's compile numbers by kernel (gate 3's sanitizer reads them)
    pins: Pins = field(default_factory=Pins)
    scratch_root: str | None = None  # where the candidate's process keeps its scratch (None: the worker's)

    @property
    def device(self) -> str:
        """The target's device, or the worker's own."""
        from ..measure.task_context import worker_device

        return self.target.device or worker_device()

    def to_json(self) -> dict[str, Any]:
        data = {**self.target.to_json(), **self.common.to_json(), **self.settings.to_json(),
                "compiled": self.compiled, **self.pins.to_json()}
        if self.scratch_root is not None:
            data["scratch_root"] = self.scratch_root
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], read_target: Callable[[PayloadReader], T],
                  read_settings: Callable[[dict[str, Any]], S]) -> GateRequest[T, S]:
        fields = PayloadReader(data, "the gate task's payload")
        try:
            settings = read_settings(dict(data))
        except PayloadError:
            raise
        except (TypeError, ValueError) as exc:
            raise PayloadError(f"the gate's settings in the payload: {exc}") from None
        return cls(target=read_target(fields), common=CommonSettings.read(fields), settings=settings,
                   compiled=fields.mapping("compiled", None), pins=Pins.read(fields),
                   scratch_root=fields.text("scratch_root", None))


@dataclass(frozen=True)
class GraphCandidate:
    """A dump's graph's part of a gate task's payload: the candidate re-stitched into a copy of the graph."""

    graph: str  # the original output_code.py
    restitched: str  # the candidate's re-stitched copy
    kernels: tuple[str, ...]  # the replaced kernels
    sources: dict[str, str]  # their candidate sources, by name
    device: str | None = None  # None: the worker's
    fx_graph_runnable: str | None = None  # gate 3's float64 reference, when the dump names one

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "restitched": self.restitched, "kernels": list(self.kernels),
                "device": self.device, "sources": dict(self.sources), "fx_graph_runnable": self.fx_graph_runnable}

    @classmethod
    def read(cls, fields: PayloadReader) -> GraphCandidate:
        sources = fields.mapping("sources", {})
        if not all(isinstance(v, str) for v in sources.values()):
            raise PayloadError(f"{fields.what}'s 'sources' holds a value that is not a kernel's source text")
        return cls(graph=fields.text("graph"), restitched=fields.text("restitched"),
                   kernels=fields.texts("kernels", ()), sources={str(k): v for k, v in sources.items()},
                   device=fields.text("device", None), fx_graph_runnable=fields.text("fx_graph_runnable", None))


@dataclass(frozen=True)
class KernelTimingRequest:
    """One kernel of a dump, its candidate re-stitched: a kernel-alone timing or an output comparison
    (the search's ranking; never a verdict)."""

    graph: str  # the original output_code.py
    restitched: str
    kernel: str
    device: str | None = None
    rounds: int | None = None  # None: the device's timing budget
    seed: int = 0  # the comparison's inputs

    def to_json(self) -> dict[str, Any]:
        return {"graph_path": self.graph, "restitched": self.restitched, "kernel": self.kernel,
                "device": self.device, "rounds": self.rounds, "seed": self.seed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelTimingRequest:
        fields = PayloadReader(data, "the kernel timing's payload")
        graph = fields.text("graph", None) or fields.text("graph_path")
        return cls(graph=graph, restitched=fields.text("restitched"), kernel=fields.text("kernel"),
                   device=fields.text("device", None), rounds=fields.integer("rounds", None),
                   seed=fields.integer("seed", 0))


__all__ = ["GateRequest", "GraphCandidate", "KernelTimingRequest", "PayloadError", "PayloadReader", "Pins",
           "TaskSettings", "TaskTarget"]
