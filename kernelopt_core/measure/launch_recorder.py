"""Per-launch timers around a loaded wrapper's kernels and vendor calls. Runs inside a worker.

The wrapper looks its kernels and ``extern_kernels``/``aten`` up as module globals at call time,
so swapping those globals for timing proxies times every launch without editing the wrapper.
On a GPU each launch is bracketed by CUDA events on the current stream (the stream Inductor
launches on); on the CPU backend by ``time.perf_counter``. :func:`instrument` restores the
globals on exit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


@dataclass
class LaunchRecorder:
    """Collects (name, start, end) for every timed launch, in call order."""

    cuda: bool
    records: list[tuple[str, Any, Any]] = field(default_factory=list)
    enabled: bool = True

    def timed(self, name: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self.enabled:
            return call(*args, **kwargs)
        if self.cuda:
            import torch

            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            result = call(*args, **kwargs)
            end.record()
        else:
            begin = time.perf_counter()
            result = call(*args, **kwargs)
            end = time.perf_counter()
        self.records.append((name, begin, end))
        return result

    def take(self) -> list[tuple[str, float]]:
        """(name, ms) of every launch recorded since the last take, in call order."""
        records, self.records = self.records, []
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            return [(name, float(begin.elapsed_time(end))) for name, begin, end in records]
        return [(name, (end - begin) * 1000.0) for name, begin, end in records]


class _TimedKernel:
    """Stands in for a compiled Triton kernel (``k.run(...)`` or ``k[grid](...)``)."""

    def __init__(self, kernel: Any, name: str, recorder: LaunchRecorder):
        self._kernel, self._name, self._recorder = kernel, name, recorder

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorder.timed(self._name, self._kernel.run, *args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launcher = self._kernel[grid]
        return lambda *args, **kwargs: self._recorder.timed(self._name, launcher, *args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._kernel, attribute)


class _TimedNamespace:
    """Stands in for ``extern_kernels`` or ``aten``: attribute chains are timed when called."""

    def __init__(self, target: Any, name: str, recorder: LaunchRecorder):
        self._target, self._name, self._recorder = target, name, recorder

    def __getattr__(self, attribute: str) -> Any:
        return _TimedNamespace(getattr(self._target, attribute), f"{self._name}.{attribute}", self._recorder)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorder.timed(self._name, self._target, *args, **kwargs)


def replace_kernels(namespace: dict[str, Any], kernel_names: list[str],
                    wrap: Callable[[Any, str], Any]) -> dict[str, Any]:
    """Put ``wrap(kernel, name)`` in the place of each launchable kernel named in a module's
    ``namespace``; returns the kernels replaced, for the caller to put back."""
    saved: dict[str, Any] = {}
    for name in kernel_names:
        kernel = namespace.get(name)
        if kernel is not None and (hasattr(kernel, "run") or hasattr(kernel, "__getitem__")):
            saved[name] = kernel
            namespace[name] = wrap(kernel, name)
    return saved


@contextmanager
def instrument(module: ModuleType, kernel_names: list[str], cuda: bool) -> Iterator[LaunchRecorder]:
    """Time every launch of ``kernel_names`` and every extern/aten call while inside."""
    recorder = LaunchRecorder(cuda=cuda)
    namespace = module.__dict__
    saved = replace_kernels(namespace, kernel_names, lambda kernel, name: _TimedKernel(kernel, name, recorder))
    for name in ("extern_kernels", "aten"):
        if name in namespace:
            saved[name] = namespace[name]
            namespace[name] = _TimedNamespace(namespace[name], name, recorder)
    try:
        yield recorder
    finally:
        namespace.update(saved)


def match_to_timeline(recorded: list[tuple[str, float]], timeline_keys: list[tuple[int, str]]) -> dict[int, float]:
    """Assign recorded launches to timeline items by name, in order (the n-th call of a name
    is that name's n-th item). ``timeline_keys`` is (order, name) per launch/extern call."""
    by_name: dict[str, list[float]] = {}
    for name, ms in recorded:
        by_name.setdefault(name, []).append(ms)
    result: dict[int, float] = {}
    used: dict[str, int] = {}
    for order, name in timeline_keys:
        index = used.get(name, 0)
        times = by_name.get(name, [])
        if index < len(times):
            result[order] = times[index]
            used[name] = index + 1
    return result
