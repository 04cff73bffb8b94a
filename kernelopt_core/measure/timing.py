"""Timers for callables: warm-up, L2 flush, fresh inputs, CUDA-graph replay, interleaved A/B.

Usable inside a worker. torch is imported inside the functions only. On a GPU a trial is timed
with CUDA events after writing a buffer twice the L2 size (so every trial starts with a cold
L2, as a real model step would); on the CPU backend with ``time.perf_counter``. Both give the
same statistics (:mod:`kernelopt_core.measure.statistics`).

Inputs: with ``make_inputs`` the callable is called as ``fn(inputs)``; ``input_sets`` input sets
are made up front (``make_inputs(0)``, ``make_inputs(1)``, ...) and trials rotate among them, so
no trial sees the exact buffers of the one before. Without ``make_inputs`` it is called as ``fn()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .paths import TimingPath, require_same_path
from .statistics import ABResult, TimingStats, ab_speedup, summarize

__all__ = ["ABResult", "TimingStats", "ab_compare", "time_callable", "TimingEffort"]

MIN_FLUSH_BYTES = 64 << 20


@dataclass(frozen=True)
class TimingEffort:
    """How much to time on one kind of device (repetitions adapt to the callable's speed)."""

    warmup_ms: float
    warmup_min: int
    warmup_max: int
    measure_ms: float
    reps_min: int
    reps_max: int
    rounds: int  # A/B rounds
    round_ms: float  # time per side per A/B round (sets the trials per round)


GPU_EFFORT = TimingEffort(warmup_ms=25.0, warmup_min=3, warmup_max=200, measure_ms=100.0, reps_min=10,
                          reps_max=1000, rounds=30, round_ms=10.0)
# The CPU backend is the Triton interpreter: one small graph call takes ~0.1-1 s.
CPU_EFFORT = TimingEffort(warmup_ms=0.0, warmup_min=1, warmup_max=1, measure_ms=1000.0, reps_min=3,
                          reps_max=50, rounds=10, round_ms=0.0)


def is_cuda(device: str) -> bool:
    return device.startswith("cuda")


def effort_for(device: str) -> TimingEffort:
    return GPU_EFFORT if is_cuda(device) else CPU_EFFORT


class _Trials:
    """Times single calls on one device; GPU trials are resolved in batches to avoid syncs."""

    def __init__(self, device: str, flush_l2: bool):
        self.device = device
        self.cuda = is_cuda(device)
        self._flush_buffer: Any = None
        self._pending: list[tuple[Any, Any]] = []
        if self.cuda:
            import torch

            self._torch = torch
            self._index = torch.device(device).index
            if self._index is None:
                self._index = torch.cuda.current_device()
            if flush_l2:
                props = torch.cuda.get_device_properties(self._index)
                l2 = int(getattr(props, "L2_cache_size", 0) or 0)
                size = max(2 * l2, MIN_FLUSH_BYTES)
                self._flush_buffer = torch.empty(size, dtype=torch.int8, device=f"cuda:{self._index}")

    def start(self, call: Callable[[], Any]) -> int:
        """Run one trial; returns a ticket for :meth:`resolve`."""
        if not self.cuda:
            begin = time.perf_counter()
            call()
            self._pending.append((begin, time.perf_counter()))
            return len(self._pending) - 1
        torch = self._torch
        if self._flush_buffer is not None:
            self._flush_buffer.zero_()  # a write bigger than L2 evicts what the last trial left
        begin_event = torch.cuda.Event(enable_timing=True)
        end_event = torch.cuda.Event(enable_timing=True)
        begin_event.record()
        call()
        end_event.record()
        self._pending.append((begin_event, end_event))
        return len(self._pending) - 1

    def resolve(self) -> list[float]:
        """Milliseconds of every trial started since the last resolve, in order."""
        pending, self._pending = self._pending, []
        if not self.cuda:
            return [(end - begin) * 1000.0 for begin, end in pending]
        self._torch.cuda.synchronize(self._index)
        return [float(begin.elapsed_time(end)) for begin, end in pending]


class _Calls:
    """The callable bound to rotating input sets, optionally captured as CUDA graphs."""

    def __init__(self, fn: Callable[..., Any], device: str, make_inputs: Callable[[int], Any] | None,
                 input_sets: int, cuda_graph: bool):
        self._inputs = [make_inputs(i) for i in range(max(1, input_sets))] if make_inputs else [None]
        if make_inputs is None:
            bound = [fn]
        else:
            bound = [(lambda inputs=inputs: fn(inputs)) for inputs in self._inputs]
        self._calls: list[Callable[[], Any]] = [_capture(call, device) for call in bound] if cuda_graph else bound
        self._next = 0

    def __len__(self) -> int:
        return len(self._calls)

    def at(self, i: int) -> Callable[[], Any]:
        return self._calls[i % len(self._calls)]

    def next(self) -> Callable[[], Any]:
        call = self.at(self._next)
        self._next += 1
        return call


def _capture(call: Callable[[], Any], device: str) -> Callable[[], Any]:
    """Capture ``call`` into a CUDA graph; the returned callable replays it."""
    if not is_cuda(device):
        raise ValueError("CUDA-graph replay needs a CUDA device; the CPU backend cannot capture graphs")
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream, as capture requires
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            call()
    except Exception as exc:  # noqa: BLE001 - explain which callable could not be captured
        raise ValueError(f"cannot capture the callable in a CUDA graph ({type(exc).__name__}: {exc}); "
                         "time it without cuda_graph") from exc
    return graph.replay


def _check_path(path: str, cuda_graph: bool) -> str:
    value = TimingPath(path).value
    if cuda_graph and value != TimingPath.GRAPH_REPLAY.value:
        raise ValueError(f"cuda_graph=True times a graph replay; pass path={TimingPath.GRAPH_REPLAY.value!r}, "
                         f"not {value!r}")
    if not cuda_graph and value == TimingPath.GRAPH_REPLAY.value:
        raise ValueError("path 'graph-replay' needs cuda_graph=True")
    return value


def _warm_up(trials: _Trials, calls: _Calls, warmup: int | None, effort: TimingEffort) -> float:
    """Run warm-up calls; returns the estimated time of one call (ms)."""
    first = max(1, effort.warmup_min if warmup is None else warmup)
    for i in range(first):
        trials.start(calls.at(i))
    times = trials.resolve()
    estimate = sorted(times)[len(times) // 2]
    if warmup is None and effort.warmup_ms > 0:
        extra = min(effort.warmup_max - first, int(effort.warmup_ms / max(estimate, 1e-3)))
        for i in range(max(0, extra)):
            trials.start(calls.at(i))
        more = trials.resolve()
        if more:
            estimate = sorted(more)[len(more) // 2]
    return estimate


def _clamp(value: float, low: int, high: int) -> int:
    return int(max(low, min(high, round(value))))


def time_callable(
    fn: Callable[..., Any], *, device: str, path: str, warmup: int | None = None, reps: int | None = None,
    flush_l2: bool = True, make_inputs: Callable[[int], Any] | None = None, input_sets: int = 3,
    cuda_graph: bool = False, confidence: float = 0.95,
) -> TimingStats:
    """Time ``fn`` on ``device`` through ``path``; ``warmup``/``reps`` of None adapt to its speed."""
    path_value = _check_path(path, cuda_graph)
    effort = effort_for(device)
    trials = _Trials(device, flush_l2)
    calls = _Calls(fn, device, make_inputs, input_sets, cuda_graph)
    estimate = _warm_up(trials, calls, warmup, effort)
    count = reps if reps is not None else _clamp(effort.measure_ms / max(estimate, 1e-3),
                                                 effort.reps_min, effort.reps_max)
    for _ in range(max(1, count)):
        trials.start(calls.next())
    return summarize(trials.resolve(), path_value, confidence)


def ab_compare(
    fn_a: Callable[..., Any], fn_b: Callable[..., Any], *, device: str, path_a: str, path_b: str,
    rounds: int | None = None, flush_l2: bool = True, confidence: float = 0.95,
    reps_per_round: int | None = None, warmup: int | None = None,
    make_inputs: Callable[[int], Any] | None = None, input_sets: int = 3, cuda_graph: bool = False,
) -> ABResult:
    """Interleaved comparison of a baseline A with a candidate B, both timed through one path.

    Each round times A and B ``reps_per_round`` times each, alternating A,B / B,A trial by trial
    so neither side always goes first; a round's sample is the median of its trials. The speedup
    is median(A) / median(B) over rounds, its interval a bootstrap over whole rounds.
    """
    path = require_same_path(path_a, path_b).value
    path = _check_path(path, cuda_graph)
    effort = effort_for(device)
    trials = _Trials(device, flush_l2)
    inputs_shared = [make_inputs(i) for i in range(max(1, input_sets))] if make_inputs else None

    def shared(i: int) -> Any:  # A and B see the same input sets, made once
        assert inputs_shared is not None
        return inputs_shared[i]

    factory = shared if inputs_shared is not None else None
    calls_a = _Calls(fn_a, device, factory, input_sets, cuda_graph)
    calls_b = _Calls(fn_b, device, factory, input_sets, cuda_graph)
    estimate = max(_warm_up(trials, calls_a, warmup, effort), _warm_up(trials, calls_b, warmup, effort))
    count = rounds if rounds is not None else effort.rounds
    per_round = reps_per_round if reps_per_round is not None else (
        _clamp(effort.round_ms / max(estimate, 1e-3), 1, 50) if effort.round_ms > 0 else 1)
    a_samples: list[float] = []
    b_samples: list[float] = []
    trial = 0
    for round_index in range(max(1, count)):
        tickets: list[str] = []
        for k in range(max(1, per_round)):
            order = ("a", "b") if (round_index + k) % 2 == 0 else ("b", "a")
            for side in order:
                trials.start((calls_a if side == "a" else calls_b).at(trial))
                tickets.append(side)
            trial += 1
        times = trials.resolve()
        a_round = sorted(t for t, side in zip(times, tickets, strict=True) if side == "a")
        b_round = sorted(t for t, side in zip(times, tickets, strict=True) if side == "b")
        a_samples.append(_middle(a_round))
        b_samples.append(_middle(b_round))
    return ab_speedup(a_samples, b_samples, path, confidence)


def _middle(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2.0
