"""Per-launch and whole-graph times of one compiled graph, measured in a worker.

``kernelopt inspect --time`` and ``kernelopt profile`` use this; besides the times it carries each
launch's arguments (for the ideal bytes) and the graph's ideal bytes. Nothing here
imports torch; the timing itself runs in :mod:`kernelopt_core.measure.graph_tasks` inside a worker.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.model import CompiledGraph
from ..dispatch import OverheadItem
from .devices import device_for_graph
from .task_context import in_worker, worker_device
from .traffic import IdealBytes, LaunchTraffic
from .worker import TaskFailure, Worker, get_worker

LAUNCH_TASK = "kernelopt_core.measure.graph_tasks:time_launches_task"
# Above this share of the graph's time outside kernels and vendor calls, a graph is launch-bound.
LAUNCH_BOUND_SHARE = 0.20


class MeasurementError(RuntimeError):
    """A measurement task failed; ``failure`` says how (timeout, crash, oom, ...)."""

    def __init__(self, what: str, failure: TaskFailure):
        self.failure = failure
        super().__init__(f"{what} failed ({failure.kind}): {failure.message}")


@dataclass
class LaunchTiming:
    graph: str
    launch_times_ms: dict[int, float]  # keyed by launch/extern call ``order``
    total_ms: float
    overheads: list[OverheadItem]
    path: str
    device: str
    iters: int
    notes: list[str] = field(default_factory=list)
    launch_traffic: dict[int, LaunchTraffic] = field(default_factory=dict)  # by launch ``order``
    graph_ideal: IdealBytes | None = None  # the graph's inputs and outputs, each once

    @property
    def share_basis_ms(self) -> float:
        """What a launch's time share is of: the graph total, or the sum of the launches if larger.

        The per-launch times come from timers around each launch, the total from untimed runs;
        on a small graph the timers' own cost can make the launches add up to more than the total,
        and a share over 100% would mislead.
        """
        return max(self.total_ms, sum(self.launch_times_ms.values()))

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "launch_times_ms": {str(k): v for k, v in self.launch_times_ms.items()},
                "total_ms": self.total_ms, "overheads": [o.to_json() for o in self.overheads],
                "path": self.path, "device": self.device, "iters": self.iters, "notes": self.notes,
                "launch_traffic": [item.to_json() for _, item in sorted(self.launch_traffic.items())],
                "graph_ideal": self.graph_ideal.to_json() if self.graph_ideal is not None else None}


def time_launches(graph: CompiledGraph, device: str = "auto", *, worker: Worker | None = None,
                  iters: int | None = None, timeout_s: float = 600.0,
                  cancel: threading.Event | None = None) -> LaunchTiming:
    """Time every launch of ``graph`` (median over ``iters`` runs) and the whole graph."""
    resolved = device_for_graph(device, graph.device, graph.name)
    from .graph_tasks import LaunchTimingRequest

    payload = LaunchTimingRequest(graph.path, resolved, iters).to_json()
    if worker is None and in_worker() and worker_device() == resolved:
        # Already inside the worker that owns this device (a task timing a graph): no nested worker.
        from .graph_tasks import time_launches_task

        try:
            return launch_timing_from_json(time_launches_task(payload))
        except Exception as exc:  # noqa: BLE001 - the same typed error the worker path gives
            raise MeasurementError(f"timing the launches of {graph.name}",
                                   TaskFailure("error", f"{type(exc).__name__}: {exc}")) from exc
    runner = worker or get_worker(resolved)
    outcome = runner.call(LAUNCH_TASK, payload, timeout_s=timeout_s, cancel=cancel)
    if not outcome.ok or outcome.failure is not None:
        assert outcome.failure is not None
        raise MeasurementError(f"timing the launches of {graph.name}", outcome.failure)
    return launch_timing_from_json(outcome.value)


def launch_timing_from_json(value: dict[str, Any]) -> LaunchTiming:
    launch_ms = {int(order): float(ms) for order, ms in value["launch_times_ms"].items()}
    total = float(value["total_ms"])
    if value.get("overheads"):
        from .accounting import overheads_from_json

        overheads = overheads_from_json(value["overheads"])
    else:
        overheads = wrapper_overheads(launch_ms, total, value.get("device", ""))
    traffic = [LaunchTraffic.from_json(item) for item in value.get("launch_traffic") or []]
    ideal = value.get("graph_ideal")
    return LaunchTiming(
        graph=value.get("graph", ""), launch_times_ms=launch_ms, total_ms=total,
        overheads=overheads, path=value["path"],
        device=value.get("device", ""), iters=int(value.get("iters", 0)), notes=list(value.get("notes", [])),
        launch_traffic={item.order: item for item in traffic},
        graph_ideal=IdealBytes(int(ideal["read_bytes"]), int(ideal["write_bytes"]), str(ideal.get("source", "")))
        if isinstance(ideal, dict) else None,
    )


def wrapper_overheads(launch_ms: dict[int, float], total_ms: float, device: str) -> list[OverheadItem]:
    """The graph time not spent inside any timed launch: Python wrapper, allocations, launch gaps."""
    gap = total_ms - sum(launch_ms.values())
    if gap <= 0 or total_ms <= 0:
        return []
    share = gap / total_ms
    suggestion = ""
    if share >= LAUNCH_BOUND_SHARE and device.startswith("cuda"):
        suggestion = ("launch-bound: CUDA-graph replay (torch.compile mode='reduce-overhead' or 'max-autotune') "
                      "removes most wrapper and launch time")
    return [OverheadItem(
        name="wrapper overhead", time_ms=gap, share=share,
        detail=f"{gap:.3f} ms of {total_ms:.3f} ms outside kernels and vendor calls "
               "(Python wrapper, allocations, launch gaps)",
        suggestion=suggestion,
    )]
