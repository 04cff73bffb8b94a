"""Gate 4, end-to-end performance. Runs inside a worker (imports torch inside the functions).

The re-stitched graph and the baseline graph are timed interleaved (A, B, B, A, ...) through the
same path, the wrapper's ``call(args)`` (``TimingPath.MODULE_CALL``), on the same fresh input sets,
with the L2 flushed before every call on a GPU. Each side runs in its own process (the candidate's
is contained, :mod:`kernelopt_core.sandbox`) and the checker times every request on its own clock
(:func:`time_processes`): a request runs the graph n times and synchronizes, with n chosen so one
request lasts tens of milliseconds. The constant cost of a request (the round trip, the flushes)
is paid by both sides alike, so it can only pull a speedup towards 1, never inflate it.
The candidate is accepted only if the median speedup is at least ``min_speedup`` *and* the lower
end of its bootstrap confidence interval is too. The kernel-alone speedup on the captured launch
arguments is reported beside it and never decides. On the CPU backend the times are the Triton
interpreter's wall-clock times: real, but not GPU times.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..measure.paths import TimingPath, require_same_path


@dataclass
class PerfDecision:
    passed: bool
    reason: str


def perf_decision(speedup: float, ci_low: float, ci_high: float, min_speedup: float, path: str) -> PerfDecision:
    """Both the median speedup and the interval's lower bound must clear ``min_speedup``."""
    margin = (min_speedup - 1.0) * 100.0
    text = f"speedup {speedup:.3f}x (95% CI {ci_low:.3f}-{ci_high:.3f}) through {path}"
    if speedup < min_speedup:
        return PerfDecision(False, f"{text}: below the {min_speedup:.2f}x gate ({margin:.0f}% faster required)")
    if ci_low < min_speedup:
        return PerfDecision(False, f"{text}: the interval's lower bound does not clear {min_speedup:.2f}x "
                                   "(the gain is not distinguishable from noise)")
    return PerfDecision(True, f"{text}: clears the {min_speedup:.2f}x gate")


CPU_ROUNDS = 15
CPU_ROUND_S = 0.05  # each side of a CPU round lasts at least this long (a single ms-scale call is noise)
GPU_ROUNDS = 30
GPU_REQUEST_S = 0.025  # each timed request on a GPU lasts about this long
MAX_REPS = 500


def time_processes(baseline: Any, candidate: Any, device: str, rounds: int | None, request: dict[str, Any],
                   path: str = TimingPath.MODULE_CALL.value, timeout_s: float = 600.0,
                   candidate_request: dict[str, Any] | None = None) -> Any:
    """Interleaved A/B of the same request to two processes, timed on this process's clock.

    ``request`` is a ``repeat`` request of :mod:`kernelopt_core.sandbox.child` (``what`` is
    "graph" or "kernel"); each side answers after running it ``reps`` times and synchronizing.
    ``candidate_request``, when given, is the candidate's (the same work on its own copy of the
    arguments). Raises RuntimeError when a side fails (the caller turns it into a verdict).
    """
    from ..measure.statistics import ab_speedup

    cuda = device.startswith("cuda")
    sides = {"a": baseline, "b": candidate}
    requests = {"a": request, "b": candidate_request or request}

    def timed(side: str, reps: int) -> float:
        reply, seconds = sides[side].timed_call("repeat", timeout_s=timeout_s, reps=reps, flush_l2=cuda,
                                                **requests[side])
        if not reply.get("ok"):
            who = "the baseline" if side == "a" else "the candidate"
            raise RuntimeError(f"{who} failed while being timed: {reply.get('error')}")
        return seconds

    for side in ("a", "b"):  # warm-up: compiles, autotuning and first-call costs stay out
        timed(side, 2)
    once = max(min(timed("a", 1) for _ in range(2)), min(timed("b", 1) for _ in range(2)), 1e-6)
    target = GPU_REQUEST_S if cuda else CPU_ROUND_S
    reps = max(1, min(MAX_REPS, math.ceil(target / once)))
    count = rounds or (GPU_ROUNDS if cuda else CPU_ROUNDS)
    a_samples: list[float] = []
    b_samples: list[float] = []
    for index in range(max(1, count)):
        order = ("a", "b") if index % 2 == 0 else ("b", "a")
        for side in order:
            per_call_ms = timed(side, reps) * 1000.0 / reps
            (a_samples if side == "a" else b_samples).append(per_call_ms)
    return ab_speedup(a_samples, b_samples, require_same_path(path, path).value)



def time_graphs(baseline: ModuleType, candidate: ModuleType, device: str, rounds: int | None,
                input_seed: int = 1000) -> Any:
    """Interleaved A/B of two loaded wrappers through the module-call path."""
    from ..graph_module import call_graph, make_inputs
    from ..measure.timing import ab_compare

    path = require_same_path(TimingPath.MODULE_CALL, TimingPath.MODULE_CALL).value
    reps_per_round = None
    if not device.startswith("cuda"):
        # The GPU timing effort sizes rounds by time; the CPU one takes one call per round, too few
        # for graphs that run in milliseconds on the interpreter.
        inputs = make_inputs(baseline, seed=input_seed)
        for module in (baseline, candidate, baseline, candidate):
            call_graph(module, inputs)
        begin = time.perf_counter()
        call_graph(baseline, inputs)
        once = max(time.perf_counter() - begin, 1e-5)
        reps_per_round = max(1, min(25, math.ceil(CPU_ROUND_S / once)))
        rounds = rounds or CPU_ROUNDS
    return ab_compare(
        lambda inputs: call_graph(baseline, inputs), lambda inputs: call_graph(candidate, inputs),
        device=device, path_a=path, path_b=path, rounds=rounds, reps_per_round=reps_per_round,
        make_inputs=lambda i: make_inputs(baseline, seed=input_seed + i),
    )


def time_kernels(original: Any, candidate: Any, args: list[Any], kwargs: dict[str, Any], device: str,
                 rounds: int | None) -> Any:
    """Interleaved A/B of one kernel alone on (copies of) its captured launch arguments."""
    from ..measure.timing import ab_compare
    from .launch_capture import clone_value

    args_a = [clone_value(a) for a in args]
    args_b = [clone_value(a) for a in args]
    path = TimingPath.KERNEL.value
    return ab_compare(lambda: original.run(*args_a, **kwargs), lambda: candidate.run(*args_b, **kwargs),
                      device=device, path_a=path, path_b=path, rounds=rounds)
