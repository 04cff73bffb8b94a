"""Measure where a compiled callable's time goes. Runs in a worker subprocess or the CLI (imports torch).

:func:`account_compiled_callable` compiles a model as the user would (``torch.compile(model,
mode=...)``), times the full callable, each compiled module's ``call()`` and the alternatives
(eager, the same mode with or without CUDA graphs), traces single calls (profiler on a GPU,
wrapped launchers on the CPU backend) and splits the callable's time into kernels and named
overheads (:mod:`kernelopt_core.measure.accounting`).

Every timing here is synchronous per call: the device is idle when the timer starts, so host
work (guards, wrappers, launches) is inside the measurement, as it is for a user who calls the
model once per step. GPU timings flush the L2 first. :func:`account_problem` runs the whole thing
in a worker for a KernelBench-format problem file; :func:`overheads_for_graph` is the hook for a
dump, where only the module's ``call()`` can be run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from ..artifacts.model import CompiledGraph
from ..dispatch import OverheadItem
from .accounting import (
    COPY_ITEM,
    CallableAccounting,
    GraphAccounting,
    MeasuredParts,
    PathTiming,
    callable_path,
    format_bytes,
    mode_uses_cudagraphs,
    split_overheads,
)
from .accounting_intervals import (
    CallTrace,
    TimelineItem,
    TraceSummary,
    durations_by_name,
    map_launch_times,
    median_launch_times,
    median_summary,
    summarize_trace,
)
from .paths import TimingPath
from .statistics import TimingStats, summarize

MIN_FLUSH_BYTES = 64 << 20
TRACED_CALLS = {"cuda": 5, "cpu": 3}
WARMUP_CALLS = 3  # cudagraph trees warm up, record, then replay


class AccountingError(RuntimeError):
    """The accounting could not be measured (compile failure, worker failure, bad input)."""


# --- timing -------------------------------------------------------------------------------------


class SyncedTimer:
    """Times one call at a time with the device idle at the start (host overhead included)."""

    def __init__(self, device: str, flush_l2: bool = True, measure_ms: float | None = None,
                 reps: tuple[int, int] | None = None):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.measure_ms = measure_ms if measure_ms is not None else (200.0 if self.cuda else 1500.0)
        self.reps = reps or ((10, 100) if self.cuda else (3, 15))
        self._flush: Any = None
        if self.cuda:
            import torch

            self._torch = torch
            if flush_l2:
                index = torch.device(device).index
                props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
                size = max(2 * int(getattr(props, "L2_cache_size", 0) or 0), MIN_FLUSH_BYTES)
                self._flush = torch.empty(size, dtype=torch.int8, device=device)

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def once(self, fn: Callable[[], Any]) -> float:
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1000.0
        torch = self._torch
        self.flush()
        torch.cuda.synchronize(self.device)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        return float(begin.elapsed_time(end))

    def samples(self, fn: Callable[[], Any], reps: int | None = None, warmup: int = 2) -> list[float]:
        estimate = statistics.median([self.once(fn) for _ in range(max(1, warmup))])
        if reps is None:
            reps = self._reps_for(estimate)
        return [self.once(fn) for _ in range(reps)]

    def rep_count(self, fn: Callable[[], Any]) -> int:
        """How many calls fit ``measure_ms``, from one more call of ``fn``."""
        return self._reps_for(self.once(fn))

    def _reps_for(self, estimate_ms: float) -> int:
        low, high = self.reps
        return int(max(low, min(high, round(self.measure_ms / max(estimate_ms, 1e-3)))))

    def stats(self, fn: Callable[[], Any], path: TimingPath, reps: int | None = None) -> TimingStats:
        return summarize(self.samples(fn, reps), path.value)


# --- compiling and finding the modules ----------------------------------------------------------


@contextlib.contextmanager
def _capturing_wrapper_modules() -> Iterator[list[ModuleType]]:
    """Collect every Inductor wrapper module loaded meanwhile (fresh compile or cache hit alike)."""
    from torch._inductor.codecache import PyCodeCache

    loaded: list[ModuleType] = []
    original = PyCodeCache.__dict__["load_by_key_path"]

    def capture(cls: Any, *args: Any, **kwargs: Any) -> ModuleType:
        module = original.__func__(cls, *args, **kwargs)
        if all(hasattr(module, attr) for attr in ("call", "get_args", "benchmark_compiled_module")):
            if all(module is not seen for seen in loaded):
                loaded.append(module)
        return module

    PyCodeCache.load_by_key_path = classmethod(capture)
    try:
        yield loaded
    finally:
        PyCodeCache.load_by_key_path = original


def _cudagraph_skips() -> int:
    from torch._dynamo.utils import counters

    return int(sum(counters["inductor"].get(key, 0) for key in ("cudagraph_skips",)))


def compile_callable(model: Any, inputs: list[Any], mode: str) -> tuple[Callable[..., Any], list[ModuleType], bool]:
    """``torch.compile(model, mode)`` warmed up; its wrapper modules; whether CUDA graphs were skipped."""
    import torch

    torch._dynamo.reset()
    skips = _cudagraph_skips()
    compiled = torch.compile(model, mode=None if mode == "default" else mode)
    with _capturing_wrapper_modules() as modules:
        for _ in range(WARMUP_CALLS):
            compiled(*inputs)
    _synchronize(inputs)
    return compiled, list(modules), _cudagraph_skips() > skips


def _synchronize(inputs: list[Any]) -> None:
    import torch

    if torch.cuda.is_available() and any(getattr(x, "is_cuda", False) for x in inputs):
        torch.cuda.synchronize()


def _parse_module(module: ModuleType) -> CompiledGraph | None:
    from ..artifacts import parse_output_code
    from ..artifacts.model import DumpError

    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    try:
        return parse_output_code(path)
    except DumpError:
        return None


def non_static_input_bytes(inputs: list[Any]) -> int:
    """Bytes cudagraph trees copy per call: CUDA tensors that are neither parameters nor marked static."""
    import torch

    total = 0
    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_cuda or isinstance(x, torch.nn.Parameter):
            continue
        if getattr(x, "_dynamo_static_input_type", None) is not None:  # torch._dynamo.mark_static_address
            continue
        total += x.numel() * x.element_size()
    return total


def equivalent_copy_ms(inputs: list[Any], timer: SyncedTimer) -> float:
    """The median time of copying the same non-static inputs the way cudagraph trees do."""
    import torch

    sources = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda
               and not isinstance(x, torch.nn.Parameter) and getattr(x, "_dynamo_static_input_type", None) is None]
    if not sources:
        return 0.0
    targets = [torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device) for x in sources]

    def copy() -> None:
        torch._foreach_copy_(targets, sources)

    return statistics.median(timer.samples(copy, reps=10))


# --- tracing ------------------------------------------------------------------------------------


def timed_traces(fn: Callable[[], Any], timer: SyncedTimer, modules: list[tuple[ModuleType, CompiledGraph]],
                 path: TimingPath, calls: int | None = None) -> tuple[TimingStats, TraceSummary, list[CallTrace]]:
    """The timing of ``fn`` through ``path``, the split of a typical call, and the traces.

    GPU: the timing is untraced (the profiler slows the host) and the split is the field-wise
    median over ``calls`` profiled calls. CPU backend: wrapping the launchers costs microseconds
    against milliseconds of interpreted kernels, so the traced calls *are* the timing samples and
    the split is that of the median call: kernels + gaps + edges add up to the median exactly.
    """
    from .accounting_trace import trace_device_calls, trace_host_calls

    if timer.cuda:
        stats = timer.stats(fn, path)
        traces = trace_device_calls(fn, timer.device, calls or TRACED_CALLS["cuda"], before_each=timer.flush)
        return stats, median_summary([summarize_trace(t) for t in traces]), traces
    timer.samples(fn, reps=0)  # warm-up only
    traces = trace_host_calls(fn, modules, (calls or timer.rep_count(fn)) | 1)  # odd: the median is a call
    stats = summarize([t.outer_ms or 0.0 for t in traces], path.value)
    middle = sorted(traces, key=lambda t: t.outer_ms or 0.0)[(len(traces) - 1) // 2]
    return stats, summarize_trace(middle), traces


def fresh_module(graph: CompiledGraph, device: str) -> ModuleType:
    """A fresh import of the graph's wrapper, so ``call()`` launches its kernels directly.

    The module torch.compile loaded may have had its partitions wrapped by cudagraph trees
    (``recursively_apply_fns``); its ``call()`` would then replay graphs and copy inputs.
    """
    from ..graph_module import load_graph_module

    return load_graph_module(graph.path, device, module_name=f"kernelopt_accounting_{graph.text_hash[:16]}")


def _timeline(graph: CompiledGraph) -> list[TimelineItem]:
    from ..artifacts.model import Launch

    return [TimelineItem(item.order, item.kernel if isinstance(item, Launch) else item.op, isinstance(item, Launch))
            for item in graph.timeline()]


def account_module_call(module: ModuleType, graph: CompiledGraph, timer: SyncedTimer,
                        args: list[Any] | None = None) -> tuple[GraphAccounting, TraceSummary]:
    """Time and trace one compiled module's ``call()`` on its own ``get_args()`` (seed 0)."""
    from ..graph_module import make_inputs

    if args is None:
        args = make_inputs(module, 0)

    def call() -> Any:
        return module.call(list(args))

    stats, summary, traces = timed_traces(call, timer, [(module, graph)], TimingPath.MODULE_CALL)
    timeline = _timeline(graph)
    launch_times = median_launch_times([map_launch_times(timeline, durations_by_name(t)) for t in traces])
    accounting = GraphAccounting(
        path=graph.path, call=PathTiming("module call()", None, stats), kernel_ms=summary.kernel_ms,
        gaps_ms=summary.gaps_ms, launch_times_ms=launch_times if len(launch_times) == len(timeline) else {},
    )
    return accounting, summary


# --- the accounting of a callable ---------------------------------------------------------------


def alternative_modes(mode: str, device: str) -> list[str]:
    """What the user could call instead: eager, and the same mode with CUDA graphs toggled (GPU)."""
    if not device.startswith("cuda"):
        return ["eager"]  # every mode compiles as "default" on the CPU backend
    other = {"max-autotune": "max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs": "max-autotune",
             "reduce-overhead": "default", "default": "reduce-overhead"}.get(mode)
    return ["eager", *([other] if other else [])]


def _label(mode: str) -> str:
    return "eager" if mode == "eager" else f"{mode} (full callable)"


def account_compiled_callable(
    model: Any, inputs: list[Any], mode: str = "max-autotune", *, device: str | None = None,
    name: str = "model", alternatives: bool = True, traced_calls: int | None = None, flush_l2: bool = True,
) -> CallableAccounting:
    """The accounting of ``torch.compile(model, mode=mode)`` called on ``inputs``."""
    import torch

    device = device or _device_of(inputs)
    notes: list[str] = []
    compile_mode = mode
    if not device.startswith("cuda") and mode != "default":
        notes.append(f"mode {mode!r} compiles as 'default' on the CPU backend (no autotuning, no CUDA graphs)")
        compile_mode = "default"
    if not device.startswith("cuda"):
        notes.append("on the CPU backend compiled graphs run in the Triton interpreter: their times against "
                     "eager say nothing about a GPU; the split of the callable's own time still holds")
    timer = SyncedTimer(device, flush_l2)
    measurement: dict[str, Any] = {"timer": "synchronous per call" + (", L2 flushed" if timer._flush is not None else ""),
                                   "trace": "torch.profiler (CUPTI)" if timer.cuda else "wrapped launchers"}
    with torch.no_grad():
        try:
            compiled, modules, skipped = compile_callable(model, inputs, compile_mode)
        except Exception as exc:  # noqa: BLE001 - user code: say what failed
            raise AccountingError(f"torch.compile(mode={compile_mode!r}) failed: {type(exc).__name__}: {exc}") from exc
        wants_graphs = timer.cuda and mode_uses_cudagraphs(compile_mode)
        cudagraphs = wants_graphs and not skipped
        if wants_graphs and skipped:
            notes.append("cudagraph trees skipped this graph (see TORCH_LOGS=perf_hints); timed without CUDA graphs")
        path = TimingPath.COMPILED_CALLABLE_CUDAGRAPHS if cudagraphs else TimingPath.COMPILED_CALLABLE

        def user_call() -> Any:
            return compiled(*inputs)

        graphs = [(m, g) for m in modules if (g := _parse_module(m)) is not None]
        if len(graphs) < len(modules):
            notes.append(f"{len(modules) - len(graphs)} compiled module(s) could not be parsed")
        if not graphs:
            notes.append("no Inductor wrapper module was captured: module call() is not timed"
                         + ("" if timer.cuda else ", and on the CPU backend kernels cannot be told from overheads"))
        stats, summary, _ = timed_traces(user_call, timer, graphs, path, traced_calls)
        graph_accounts = [account_module_call(fresh_module(g, device), g, timer)[0] for _, g in graphs]
        kernel_ms, copy_ms = summary.kernel_ms, summary.copy_ms
        copy_bytes = non_static_input_bytes(inputs) if cudagraphs else 0
        if cudagraphs and copy_bytes:
            equivalent = equivalent_copy_ms(inputs, timer)
            measurement.update(copy_ms_traced=copy_ms, copy_ms_equivalent=equivalent)
            if copy_ms <= 0:
                module_kernels = sum(g.kernel_ms for g in graph_accounts)
                if kernel_ms - module_kernels >= 0.5 * equivalent:  # the copy is in the trace, unnamed
                    kernel_ms = max(0.0, kernel_ms - equivalent)
                copy_ms = equivalent
                notes.append("no input copy found in the trace; used an equivalent _foreach_copy_ of the same tensors")
        parts = MeasuredParts(
            callable_ms=stats.median_ms, kernel_ms=kernel_ms, gaps_ms=summary.gaps_ms, copy_ms=copy_ms,
            copy_bytes=copy_bytes, guard_ms=None if timer.cuda else summary.edge_ms,
            launches=summary.launches, cudagraphs=cudagraphs,
        )
        overheads, split_notes = split_overheads(parts)
        notes.extend(split_notes)
        timed_alternatives = _time_alternatives(model, inputs, mode, device, timer, notes) if alternatives else []
    return CallableAccounting(
        name=name, device=device, mode=mode, cudagraphs=cudagraphs, callable=PathTiming(_label(mode), mode, stats),
        kernel_ms=kernel_ms, overheads=overheads, graphs=graph_accounts, alternatives=timed_alternatives,
        copy_bytes=copy_bytes, notes=notes, measurement=measurement,
    )


def _time_alternatives(model: Any, inputs: list[Any], mode: str, device: str, timer: SyncedTimer,
                       notes: list[str]) -> list[PathTiming]:
    import torch

    timed = []
    for other in alternative_modes(mode, device):
        try:
            if other == "eager":
                torch._dynamo.reset()
                stats = timer.stats(lambda: model(*inputs), TimingPath.EAGER)
            else:
                compiled, _, skipped = compile_callable(model, inputs, other)
                graphs = mode_uses_cudagraphs(other) and not skipped
                path = callable_path(other if graphs else "default", device)
                stats = timer.stats(functools.partial(compiled, *inputs), path)
            timed.append(PathTiming(_label(other), None if other == "eager" else other, stats))
        except Exception as exc:  # noqa: BLE001 - an alternative is extra information: record, go on
            notes.append(f"timing {other} failed: {type(exc).__name__}: {exc}")
    torch._dynamo.reset()
    return timed


def _device_of(inputs: list[Any]) -> str:
    for x in inputs:
        device = getattr(x, "device", None)
        if device is not None:
            return "cuda:" + str(device.index or 0) if device.type == "cuda" else str(device.type)
    return "cpu"


# --- entry points: a problem file, a dump ------------------------------------------------------


def account_problem_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker task: ``{"problem", "mode", "alternatives"}`` -> the accounting as JSON."""
    from ..compile import build_problem, load_problem
    from .task_context import worker_device

    device = payload.get("device") or worker_device()
    if device == "auto":
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    problem = load_problem(str(payload["problem"]))
    model, inputs = build_problem(problem, device)
    name = os.path.splitext(os.path.basename(str(payload["problem"])))[0]
    accounting = account_compiled_callable(model, inputs, str(payload.get("mode") or "max-autotune"),
                                           device=device, name=name,
                                           alternatives=bool(payload.get("alternatives", True)))
    return accounting.to_json()


def account_problem(problem: str, mode: str = "max-autotune", device: str = "auto", *, alternatives: bool = True,
                    worker: Any = None, timeout_s: float = 600.0) -> CallableAccounting:
    """Run :func:`account_problem_task` in the device's worker; raises :class:`AccountingError`."""
    if not os.path.isfile(problem):
        raise AccountingError(f"{problem}: no such problem file")
    if worker is None:
        from .worker import get_worker

        worker = get_worker(device)
    outcome = worker.call("kernelopt_core.measure.accounting_run:account_problem_task",
                          {"problem": os.path.abspath(problem), "mode": mode, "alternatives": alternatives},
                          timeout_s=timeout_s)
    if not outcome.ok:
        failure = outcome.failure
        detail = f"{failure.kind}: {failure.message}" if failure else "unknown failure"
        raise AccountingError(f"{problem}: accounting failed ({detail})")
    return CallableAccounting.from_json(outcome.value)


def dump_uses_cudagraphs(graph: CompiledGraph) -> bool:
    """Whether the dump's recorded Inductor config had CUDA graphs on (from fx_graph_runnable.py)."""
    if not graph.fx_graph_runnable or not os.path.isfile(graph.fx_graph_runnable):
        return False
    with open(graph.fx_graph_runnable, encoding="utf-8", errors="replace") as handle:
        return any(line.replace(" ", "") == "torch._inductor.config.triton.cudagraphs=True"
                   for line in handle.read().splitlines())


def overheads_for_graph(graph: CompiledGraph, device: str, module: ModuleType | None = None,
                        args: list[Any] | None = None) -> list[OverheadItem]:
    """Overhead items of a dump, measured through its module's ``call()`` (the hook for launch timing).

    A dump carries no model, so guards and the cudagraph-tree wrapper cannot be run: the items
    are the launch gaps and the host time of ``call()`` outside its launches, and, when the dump
    was compiled with CUDA graphs (on a GPU), the copy of its tensor inputs, an upper bound since
    parameters (static, never copied) cannot be told from inputs in a dump.
    """
    from ..graph_module import load_graph_module, make_inputs

    if module is None:
        module = load_graph_module(graph.path, device)
    if args is None:
        args = make_inputs(module, 0)
    timer = SyncedTimer(device)
    accounting, summary = account_module_call(module, graph, timer, args)
    call_ms = accounting.call.stats.median_ms
    cudagraphs = timer.cuda and dump_uses_cudagraphs(graph)
    copy_bytes = sum(spec.nbytes or 0 for spec in graph.inputs if spec.kind == "tensor") if cudagraphs else 0
    copy_ms = equivalent_copy_ms(args, timer) if copy_bytes else 0.0
    parts = MeasuredParts(callable_ms=call_ms + copy_ms, kernel_ms=summary.kernel_ms, gaps_ms=summary.gaps_ms,
                          copy_ms=copy_ms, copy_bytes=copy_bytes, guard_ms=None if timer.cuda else summary.edge_ms,
                          launches=summary.launches, cudagraphs=cudagraphs)
    items, _ = split_overheads(parts)
    for item in items:
        if item.name == COPY_ITEM:
            item.detail = (f"up to {format_bytes(copy_bytes)} per call (every tensor input of the dump; "
                           "parameters are static and not copied)")
        else:
            item.detail += " (through module-call)"
    return items


def overheads_for_graph_task(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Worker task: ``{"path": output_code.py}`` -> overhead items as JSON."""
    from ..artifacts import parse_output_code
    from .task_context import worker_device

    graph = parse_output_code(str(payload["path"]))
    return [item.to_json() for item in overheads_for_graph(graph, payload.get("device") or worker_device())]
