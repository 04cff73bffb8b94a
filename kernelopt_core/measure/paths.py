"""The path a timing was taken through. Speedups compare like with like, or not at all.

See docs/measurement.md and the measurement notes: ``torch.compile(mode="max-autotune")``
copies non-static inputs into CUDA-graph buffers before each replay, which can double a
memory-bound graph's time. Timing a re-stitched ``call()`` against that would show a fake win.
"""

from __future__ import annotations

from enum import Enum


class TimingPath(str, Enum):
    MODULE_CALL = "module-call"  # the compiled module's call(args), as Inductor wrote it
    COMPILED_CALLABLE_CUDAGRAPHS = "compiled-callable-cudagraphs"  # torch.compile(..., max-autotune)
    COMPILED_CALLABLE = "compiled-callable"  # torch.compile without CUDA graphs
    EAGER = "eager"
    KERNEL = "kernel"  # one Triton kernel on its captured arguments
    HARNESS = "harness"  # a user kernel's harness: its callable on its inputs (docs/user-kernels.md)
    # The callable captured once in a torch.cuda.CUDAGraph and replayed (launch-bound graphs):
    # no Python wrapper or launch cost, so never comparable with module-call.
    GRAPH_REPLAY = "graph-replay"


class CrossPathComparison(ValueError):
    """Two timings taken through different paths were about to be compared."""


def require_same_path(a: TimingPath | str, b: TimingPath | str) -> TimingPath:
    """Refuse a comparison across paths; return the common path."""
    pa, pb = TimingPath(a), TimingPath(b)
    if pa is not pb:
        raise CrossPathComparison(
            f"refusing to compare a timing through {pa.value!r} with one through {pb.value!r}: "
            "a speedup only counts when both are timed through the same path"
        )
    return pa
