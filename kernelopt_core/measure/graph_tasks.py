"""Worker jobs that time whole compiled graphs. Runs only inside a worker (imports torch there).

Call them through a worker: ``worker.call("kernelopt_core.measure.graph_tasks:time_graph", {...})``;
each task reads its JSON payload into a dataclass of its own (:class:`GraphTimingRequest`,
:class:`GraphABRequest`, :class:`LaunchTimingRequest`) before it starts. All times are on the
module-call path (the wrapper's ``call(args)``), or graph-replay when ``cuda_graph`` is set. Inputs
come from the wrapper's own ``get_args()`` under a seed per input set.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..payload_fields import PayloadReader
from .paths import TimingPath
from .task_context import worker_device


@dataclass(frozen=True)
class GraphTimingRequest:
    """``time_graph``'s payload: one dump's module-call (or graph-replay) time."""

    dump: str
    device: str | None = None  # None: the worker's
    warmup: int | None = None
    reps: int | None = None
    input_sets: int = 3
    cuda_graph: bool = False
    flush_l2: bool = True

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphTimingRequest:
        fields = PayloadReader(data, "time_graph's payload")
        return cls(dump=fields.text("dump"), device=fields.text("device", None), warmup=fields.integer("warmup", None),
                   reps=fields.integer("reps", None), input_sets=fields.integer("input_sets", 3),
                   cuda_graph=fields.flag("cuda_graph", False), flush_l2=fields.flag("flush_l2", True))


@dataclass(frozen=True)
class GraphABRequest:
    """``ab_graphs``'s payload: an interleaved A/B of two dumps on the same inputs."""

    baseline: str
    candidate: str
    device: str | None = None
    rounds: int | None = None  # None: the device's timing budget
    reps_per_round: int | None = None
    warmup: int | None = None
    input_sets: int = 3
    cuda_graph: bool = False
    flush_l2: bool = True
    confidence: float = 0.95

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphABRequest:
        fields = PayloadReader(data, "ab_graphs's payload")
        return cls(baseline=fields.text("baseline"), candidate=fields.text("candidate"),
                   device=fields.text("device", None), rounds=fields.integer("rounds", None),
                   reps_per_round=fields.integer("reps_per_round", None), warmup=fields.integer("warmup", None),
                   input_sets=fields.integer("input_sets", 3), cuda_graph=fields.flag("cuda_graph", False),
                   flush_l2=fields.flag("flush_l2", True), confidence=fields.number("confidence", 0.95))


@dataclass(frozen=True)
class LaunchTimingRequest:
    """``time_launches_task``'s payload: every launch of one dump timed, and the whole graph."""

    dump: str
    device: str | None = None
    iters: int | None = None  # None: 20 on a GPU, 3 on the CPU
    overheads: bool = True  # also the wrapper-level overheads (launch gaps, host time, input copies)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dump": self.dump, "device": self.device}
        if self.iters:
            data["iters"] = self.iters
        if not self.overheads:
            data["overheads"] = False
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaunchTimingRequest:
        fields = PayloadReader(data, "time_launches_task's payload")
        return cls(dump=fields.text("dump"), device=fields.text("device", None), iters=fields.integer("iters", None),
                   overheads=fields.flag("overheads", True))


def _load(dump: str, device: str) -> Any:
    from ..graph_module import load_graph_module

    return load_graph_module(dump, device)


def _graph_callables(module: Any) -> tuple[Any, Any]:
    from ..graph_module import call_graph, make_inputs

    return (lambda inputs: call_graph(module, inputs)), (lambda i: make_inputs(module, seed=i))


def _path(cuda_graph: bool) -> str:
    return (TimingPath.GRAPH_REPLAY if cuda_graph else TimingPath.MODULE_CALL).value


def time_graph(payload: dict[str, Any]) -> dict[str, Any]:
    """A :class:`GraphTimingRequest`'s JSON -> TimingStats JSON."""
    from .timing import time_callable

    request = GraphTimingRequest.from_json(payload)
    device = request.device or worker_device()
    module = _load(request.dump, device)
    call, inputs = _graph_callables(module)
    stats = time_callable(
        call, device=device, path=_path(request.cuda_graph), warmup=request.warmup, reps=request.reps,
        flush_l2=request.flush_l2, make_inputs=inputs, input_sets=request.input_sets, cuda_graph=request.cuda_graph,
    )
    return {**stats.to_json(), "device": device, "dump": request.dump}


def ab_graphs(payload: dict[str, Any]) -> dict[str, Any]:
    """A :class:`GraphABRequest`'s JSON -> ABResult JSON.

    Both wrappers get the same input sets (made by the baseline's ``get_args``) in every round.
    """
    from .timing import ab_compare

    request = GraphABRequest.from_json(payload)
    device = request.device or worker_device()
    baseline = _load(request.baseline, device)
    candidate = _load(request.candidate, device)
    call_a, inputs = _graph_callables(baseline)
    call_b, _ = _graph_callables(candidate)
    path = _path(request.cuda_graph)
    result = ab_compare(
        call_a, call_b, device=device, path_a=path, path_b=path, rounds=request.rounds, flush_l2=request.flush_l2,
        confidence=request.confidence, reps_per_round=request.reps_per_round, warmup=request.warmup,
        make_inputs=inputs, input_sets=request.input_sets, cuda_graph=request.cuda_graph,
    )
    return {**result.to_json(), "device": device}


def time_launches_task(payload: dict[str, Any]) -> dict[str, Any]:
    """A :class:`LaunchTimingRequest`'s JSON -> per-launch median times keyed by launch order, and the graph total.

    The total is timed separately without the per-launch timers on a GPU (their event records
    add host time on launch-bound graphs); on the CPU backend the instrumented runs' wall time is
    the total, since perf_counter costs nothing next to the interpreter.

    The first (untimed) call also records every Triton launch's arguments as metadata (shape,
    stride, dtype, storage extent; named and given read/write roles from the kernel source) and
    the graph's inputs and outputs: ``launch_traffic`` and ``graph_ideal`` (see
    :mod:`kernelopt_core.measure.traffic`).
    """
    from ..artifacts import parse_output_code
    from ..graph_module import call_graph, make_inputs
    from .launch_recorder import instrument, match_to_timeline
    from .timing import is_cuda, time_callable

    request = LaunchTimingRequest.from_json(payload)
    device = request.device or worker_device()
    cuda = is_cuda(device)
    graph = parse_output_code(request.dump)
    module = _load(request.dump, device)
    iters = request.iters or (20 if cuda else 3)
    input_sets = [make_inputs(module, seed=i) for i in range(3 if cuda else 1)]
    keys: list[tuple[int, str]] = [(item.order, getattr(item, "kernel", "") or getattr(item, "op", ""))
                                   for item in graph.timeline()]
    notes: list[str] = []
    # first call: lazy compilation and autotuning, untimed; it records the launch arguments
    launch_traffic, graph_ideal = _call_recording_arguments(graph, module, input_sets[0], keys, notes)
    flush = _flush_buffer(device) if cuda else None
    per_launch: dict[int, list[float]] = {}
    totals: list[float] = []
    unmatched: set[str] = set()
    with instrument(module, [k.name for k in graph.kernels], cuda) as recorder:
        for i in range(iters):
            if flush is not None:
                flush.zero_()  # each run starts with a cold L2, as in time_callable
            recorded_total = _timed_total(lambda i=i: call_graph(module, input_sets[i % len(input_sets)]), cuda)
            recorded = recorder.take()
            if recorded_total is not None:
                totals.append(recorded_total)
            matched = match_to_timeline(recorded, keys)
            for order, ms in matched.items():
                per_launch.setdefault(order, []).append(ms)
            unmatched |= {name for name, _ in recorded} - {name for _, name in keys}
    launch_ms = {order: statistics.median(values) for order, values in per_launch.items()}
    if cuda:
        total = time_callable(lambda inputs: call_graph(module, inputs), device=device,
                              path=TimingPath.MODULE_CALL.value, make_inputs=lambda i: input_sets[i % 3],
                              input_sets=3, flush_l2=True)
        total_ms = total.median_ms
    else:
        total_ms = statistics.median(totals)
    missing = [name for order, name in keys if order not in launch_ms]
    if missing:
        notes.append(f"no time recorded for {len(missing)} launch(es): {', '.join(sorted(set(missing)))}")
    if unmatched:
        notes.append(f"timed calls not in the parsed timeline: {', '.join(sorted(unmatched))}")
    overheads: list[dict[str, Any]] = []
    if request.overheads:
        # Named wrapper-level overheads (launch gaps, host time, CUDA-graph input copies).
        from .accounting_run import overheads_for_graph

        try:
            overheads = [item.to_json() for item in
                         overheads_for_graph(graph, device, module=module, args=input_sets[0])]
        except Exception as exc:  # noqa: BLE001 - overheads are an addition; keep the launch times
            notes.append(f"overhead accounting failed: {type(exc).__name__}: {exc}")
    return {
        "graph": graph.name, "dump": request.dump, "device": device, "iters": iters,
        "path": TimingPath.MODULE_CALL.value,
        "launch_times_ms": {str(order): ms for order, ms in launch_ms.items()},
        "total_ms": total_ms, "notes": notes, "overheads": overheads,
        "launch_traffic": launch_traffic, "graph_ideal": graph_ideal,
    }


def _call_recording_arguments(graph: Any, module: Any, inputs: list[Any], keys: list[tuple[int, str]],
                              notes: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Call the graph once, recording launch arguments and the graph's inputs and outputs."""
    from ..graph_module import call_graph
    from .launch_args import describe_all, match_launches, recording_arguments
    from .traffic import LaunchTraffic, graph_ideal_bytes, name_and_role

    with recording_arguments(module, [k.name for k in graph.kernels]) as records:
        output = call_graph(module, inputs)
    try:
        traffic = []
        for order, (name, args) in sorted(match_launches(records, keys).items()):
            kernel = graph.kernel(name)
            mutated = list(kernel.inductor_meta.get("mutated_arg_names") or []) if kernel else []
            if kernel is not None:
                name_and_role(args, kernel.source, name, mutated)
            traffic.append(LaunchTraffic(order=order, kernel=name, args=args).to_json())
        ideal = graph_ideal_bytes(describe_all(inputs), describe_all(output)).to_json()
    except Exception as exc:  # noqa: BLE001 - launch arguments are an addition; keep the times
        notes.append(f"launch arguments not recorded: {type(exc).__name__}: {exc}")
        return [], None
    return traffic, ideal


def _flush_buffer(device: str) -> Any:
    import torch

    from .timing import MIN_FLUSH_BYTES

    torch.cuda.synchronize()
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return torch.empty(max(2 * l2, MIN_FLUSH_BYTES), dtype=torch.int8, device=device)


def _timed_total(call: Any, cuda: bool) -> float | None:
    import time

    if cuda:
        call()
        return None
    begin = time.perf_counter()
    call()
    return (time.perf_counter() - begin) * 1000.0
