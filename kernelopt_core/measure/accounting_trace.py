"""Traces of single calls: when each launch of a compiled graph ran, on the device's own timeline.

Runs only in a worker subprocess or the CLI (it imports torch inside its functions).

* CPU backend: the Triton interpreter runs each kernel synchronously on the host, so wrapping
  every kernel's launcher and every ``extern_kernels.*``/``aten.*`` call of the loaded module with
  ``time.perf_counter`` gives the busy intervals; the call's own wall time is on the same clock.
* GPU: the PyTorch profiler (CUPTI) gives the device intervals of every kernel and memcpy,
  including those replayed from a CUDA graph, which no launcher wrapper can see.

The arithmetic on traces (busy time, gaps, leading input copies) is in
:mod:`kernelopt_core.measure.accounting_intervals`, which is pure Python.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..artifacts.model import CompiledGraph
from .accounting_intervals import CallTrace, Interval

COPY_MARKERS = ("memcpy dtod", "memcpy d2d", "copyfunctor", "copy_kernel", "multi_tensor_apply")
_RANGE_PREFIX = "kernelopt_accounting_call_"


class _Recorder:
    def __init__(self) -> None:
        self.intervals: list[Interval] = []
        self.origin = time.perf_counter()

    def now_ms(self) -> float:
        return (time.perf_counter() - self.origin) * 1000.0

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = self.now_ms()
            try:
                return fn(*args, **kwargs)
            finally:
                self.intervals.append(Interval(start, self.now_ms(), name, "kernel"))

        return run


class _TimedLauncher:
    """Stands in for a kernel global: ``kernel.run(...)`` and ``kernel[grid](...)`` are timed."""

    def __init__(self, inner: Any, name: str, recorder: _Recorder):
        self._inner, self._name, self._recorder = inner, name, recorder

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorder.timed(self._name, self._inner.run)(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return self._recorder.timed(self._name, self._inner[grid])

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)


class _TimedNamespace:
    """Stands in for ``extern_kernels`` or ``aten``: calls reached through it are timed by dotted name."""

    def __init__(self, inner: Any, dotted: str, recorder: _Recorder, wanted: set[str]):
        self._inner, self._dotted, self._recorder, self._wanted = inner, dotted, recorder, wanted

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        dotted = f"{self._dotted}.{attr}"
        if any(w == dotted or w.startswith(dotted + ".") for w in self._wanted):
            return _TimedNamespace(value, dotted, self._recorder, self._wanted)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorder.timed(self._dotted, self._inner)(*args, **kwargs)


@contextlib.contextmanager
def instrumented(module: ModuleType, graph: CompiledGraph, recorder: _Recorder) -> Iterator[None]:
    """Wrap the module's kernel globals and vendor namespaces; restore them on exit."""
    saved: dict[str, Any] = {}
    try:
        for kernel in graph.kernels:
            if hasattr(module, kernel.name):
                saved[kernel.name] = getattr(module, kernel.name)
                setattr(module, kernel.name, _TimedLauncher(saved[kernel.name], kernel.name, recorder))
        for namespace in ("extern_kernels", "aten"):
            wanted = {c.op for c in graph.extern_calls if c.op.startswith(namespace + ".")}
            if wanted and hasattr(module, namespace):
                saved[namespace] = getattr(module, namespace)
                setattr(module, namespace, _TimedNamespace(saved[namespace], namespace, recorder, wanted))
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def trace_host_calls(fn: Callable[[], Any], modules: list[tuple[ModuleType, CompiledGraph]],
                     calls: int) -> list[CallTrace]:
    """CPU backend: ``calls`` traced calls of ``fn`` with every launch of ``modules`` timed."""
    traces: list[CallTrace] = []
    for _ in range(calls):
        recorder = _Recorder()
        with contextlib.ExitStack() as stack:
            for module, graph in modules:
                stack.enter_context(instrumented(module, graph, recorder))
            start = recorder.now_ms()
            fn()
            end = recorder.now_ms()
        traces.append(CallTrace(outer_ms=end - start, intervals=recorder.intervals, origin_ms=start))
    return traces


def is_copy_event(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in COPY_MARKERS)


def trace_device_calls(fn: Callable[[], Any], device: str, calls: int,
                       before_each: Callable[[], None] | None = None) -> list[CallTrace]:
    """GPU: ``calls`` profiled calls of ``fn``; each trace holds that call's device intervals.

    Each call runs inside a ``record_function`` range that ends after a synchronize, so every
    device event of the call falls inside its range. ``outer_ms`` is left None: under the
    profiler the host side is slowed, so the caller uses an untraced timing for the total.
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            if before_each is not None:
                before_each()
            torch.cuda.synchronize(device)
            with record_function(f"{_RANGE_PREFIX}{i}"):
                fn()
                torch.cuda.synchronize(device)
    ranges: dict[int, tuple[float, float]] = {}
    device_events: list[tuple[float, float, str]] = []
    for event in _profiled_events(prof):
        if event.device_type == DeviceType.CPU and event.name.startswith(_RANGE_PREFIX):
            ranges[int(event.name[len(_RANGE_PREFIX):])] = (event.start_ms, event.end_ms)
        elif event.device_type == DeviceType.CUDA and is_device_work(event):
            device_events.append((event.start_ms, event.end_ms, event.name))
    if len(ranges) != calls:
        raise RuntimeError(f"the profiler recorded {len(ranges)} of {calls} call ranges")
    traces = []
    for i in range(calls):
        low, high = ranges[i]
        # overlap rather than containment: the GPU clock is mapped onto the host's, to within microseconds
        inside = [Interval(max(s, low), min(e, high), n, "copy" if is_copy_event(n) else "kernel")
                  for s, e, n in device_events if e > low and s < high]
        traces.append(CallTrace(outer_ms=None, intervals=inside, origin_ms=low))
    return traces


@dataclass
class ProfiledEvent:
    name: str
    device_type: Any
    start_ms: float
    end_ms: float
    activity: str | None  # kineto's activity type ("kernel", "gpu_memcpy", ...) where the release has it
    annotation: bool  # a record_function range mirrored on the GPU timeline


DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset", "concurrent_kernel")


def is_device_work(event: ProfiledEvent) -> bool:
    """Kernels, memcpys and memsets; not the GPU mirrors of record_function ranges.

    Inductor wraps graph calls in ``record_function("## Call CompiledFxGraph ... ##")``; kineto
    mirrors such ranges on the GPU timeline, where they would cover every kernel of the call.
    """
    if event.annotation or event.name.startswith((_RANGE_PREFIX, "## ")):
        return False
    return event.activity is None or event.activity in DEVICE_WORK


def _profiled_events(prof: Any) -> Iterator[ProfiledEvent]:
    """Every profiled event, from kineto's raw list where available."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is not None:
        for event in results.events():
            start = event.start_ns()
            end = event.end_ns() if hasattr(event, "end_ns") else start + event.duration_ns()
            activity = event.activity_type() if hasattr(event, "activity_type") else None
            annotation = bool(event.is_user_annotation()) if hasattr(event, "is_user_annotation") else False
            yield ProfiledEvent(event.name(), event.device_type(), start / 1e6, end / 1e6,
                                str(activity) if activity is not None else None, annotation)
        return
    for event in prof.events():  # older releases: FunctionEvents in microseconds
        yield ProfiledEvent(event.name, event.device_type, event.time_range.start / 1e3,
                            event.time_range.end / 1e3, getattr(event, "activity_type", None),
                            bool(getattr(event, "is_user_annotation", False)))
