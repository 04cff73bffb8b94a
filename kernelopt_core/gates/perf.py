"""Gate 4, end-to-end performance. Runs inside a worker (imports torch inside the functions).

The re-stitched graph and the baseline graph are timed interleaved (A, B, B, A, ...) through the
same path, the wrapper's ``call(args)`` (``TimingPath.MODULE_CALL``), on the same fresh input sets,
with the L2 flushed between trials on a GPU (:func:`kernelopt_core.measure.timing.ab_compare`).
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


def time_graphs(baseline: ModuleType, candidate: ModuleType, device: str, rounds: int | None,
                input_seed: int = 1000) -> Any:
    """Interleaved A/B of two loaded wrappers through the module-call path."""
    from ..graph_module import call_graph, make_inputs
    from ..measure.timing import ab_compare

    path = require_same_path(TimingPath.MODULE_CALL, TimingPath.MODULE_CALL).value
    reps_per_round = None
    if not device.startswith("cuda"):
        # The GPU budget sizes rounds by time; the CPU budget takes one call per round, too few
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
