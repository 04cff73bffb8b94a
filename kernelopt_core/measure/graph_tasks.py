"""Worker tasks that time whole compiled graphs. Runs only inside a worker (imports torch there).

Call them through a worker: ``worker.call("kernelopt_core.measure.graph_tasks:time_graph", {...})``.
All times are on the module-call path (the wrapper's ``call(args)``), or graph-replay when
``cuda_graph`` is set. Inputs come from the wrapper's own ``get_args()`` under a seed per input set.
"""

from __future__ import annotations

import statistics
from typing import Any

from .paths import TimingPath
from .task_context import worker_device


def _load(dump: str, device: str) -> Any:
    from ..graph_module import load_graph_module

    return load_graph_module(dump, device)


def _graph_callables(module: Any) -> tuple[Any, Any]:
    from ..graph_module import call_graph, make_inputs

    return (lambda inputs: call_graph(module, inputs)), (lambda i: make_inputs(module, seed=i))


def _path(payload: dict[str, Any]) -> str:
    return (TimingPath.GRAPH_REPLAY if payload.get("cuda_graph") else TimingPath.MODULE_CALL).value


def time_graph(payload: dict[str, Any]) -> dict[str, Any]:
    """{"dump", "warmup"?, "reps"?, "input_sets"?, "cuda_graph"?, "flush_l2"?} -> TimingStats JSON."""
    from .timing import time_callable

    device = payload.get("device") or worker_device()
    module = _load(payload["dump"], device)
    call, inputs = _graph_callables(module)
    stats = time_callable(
        call, device=device, path=_path(payload), warmup=payload.get("warmup"), reps=payload.get("reps"),
        flush_l2=payload.get("flush_l2", True), make_inputs=inputs, input_sets=payload.get("input_sets", 3),
        cuda_graph=bool(payload.get("cuda_graph")),
    )
    return {**stats.to_json(), "device": device, "dump": payload["dump"]}


def ab_graphs(payload: dict[str, Any]) -> dict[str, Any]:
    """{"baseline", "candidate", "rounds"?, "reps_per_round"?, ...} -> ABResult JSON.

    Both wrappers get the same input sets (made by the baseline's ``get_args``) in every round.
    """
    from .timing import ab_compare

    device = payload.get("device") or worker_device()
    baseline = _load(payload["baseline"], device)
    candidate = _load(payload["candidate"], device)
    call_a, inputs = _graph_callables(baseline)
    call_b, _ = _graph_callables(candidate)
    path = _path(payload)
    result = ab_compare(
        call_a, call_b, device=device, path_a=path, path_b=path, rounds=payload.get("rounds"),
        flush_l2=payload.get("flush_l2", True), confidence=payload.get("confidence", 0.95),
        reps_per_round=payload.get("reps_per_round"), warmup=payload.get("warmup"), make_inputs=inputs,
        input_sets=payload.get("input_sets", 3), cuda_graph=bool(payload.get("cuda_graph")),
    )
    return {**result.to_json(), "device": device}


def time_launches_task(payload: dict[str, Any]) -> dict[str, Any]:
    """{"dump", "iters"?} -> per-launch median times keyed by launch order, and the graph total.

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

    device = payload.get("device") or worker_device()
    cuda = is_cuda(device)
    graph = parse_output_code(payload["dump"])
    module = _load(payload["dump"], device)
    iters = int(payload.get("iters") or (20 if cuda else 3))
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
    if payload.get("overheads", True):
        # Named wrapper-level overheads (launch gaps, host time, CUDA-graph input copies).
        from .accounting_run import overheads_for_graph

        try:
            overheads = [item.to_json() for item in
                         overheads_for_graph(graph, device, module=module, args=input_sets[0])]
        except Exception as exc:  # noqa: BLE001 - overheads are an addition; keep the launch times
            notes.append(f"overhead accounting failed: {type(exc).__name__}: {exc}")
    return {
        "graph": graph.name, "dump": payload["dump"], "device": device, "iters": iters,
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
