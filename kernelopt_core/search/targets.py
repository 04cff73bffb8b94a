"""The first stage: classify the graph (dispatch) and choose the kernels worth a search.

A graph is optimizable, vendor-dominated or has no Triton kernels, from measured time shares when
the launches are timed (by the caller, else here) and from launch counts otherwise. The targets are
the Triton kernels above ``min_share`` of the graph, the largest first, at most ``max_kernels``.
"""

from __future__ import annotations

from typing import Any

from ..artifacts import TritonKernel
from ..dispatch import DispatchReport, OverheadItem, analyze
from .run_context import RunContext


def dispatch(ctx: RunContext) -> tuple[DispatchReport, dict[str, Any] | None]:
    """The dispatch report and the launch timing behind it (None when the launches were not timed)."""
    with ctx.times.stage("dispatch"):
        timing = ctx.given_launch_timing
        if timing is not None and "error" not in timing:
            ctx.journal.record("note", message="dispatch uses the launch timing the caller measured")
        else:
            ctx.progress(ctx.target.timing_step(), stage="timing", percentage=1)
            timing = ctx.evaluator.launch_timing()
        if timing and "error" not in timing:
            times = {int(k): float(v) for k, v in timing["launch_times_ms"].items()}
            overheads = [OverheadItem(name=o["name"], time_ms=o["time_ms"], share=o.get("share", 0.0),
                                      detail=o.get("detail", ""), suggestion=o.get("suggestion", ""),
                                      bytes_per_call=o.get("bytes_per_call"))
                         for o in timing.get("overheads", [])]
            report = analyze(ctx.graph, times, overheads, timing.get("path"))
        else:
            timing = None
            report = analyze(ctx.graph)
        report.evidence = ctx.target.dispatch_evidence(report, timing)  # in the target's own words
    ctx.journal.record("dispatch", classification=report.classification, evidence=report.evidence,
                       timed=report.timed)
    ctx.progress(f"{report.classification}: {report.evidence}", stage="dispatch", percentage=2)
    return report, timing


def choose_targets(ctx: RunContext, report: DispatchReport) -> list[tuple[TritonKernel, float]] | str:
    """The kernels to search with their time shares, or why none is searched."""
    config = ctx.config
    if report.classification == "no-triton":
        return f"no Triton kernels to rewrite ({report.evidence})"
    if report.classification == "vendor-dominated" and not config.force:
        return (f"vendor-dominated: {report.evidence}; vendor libraries already run near peak, so the graph "
                "was not searched (use --force to search its Triton kernels anyway)")
    if ctx.kernel_name:
        kernel = ctx.graph.kernel(ctx.kernel_name)
        assert kernel is not None
        return [(kernel, report.share_of(kernel.name))]
    ranked = sorted(ctx.graph.kernels, key=lambda k: (-report.share_of(k.name), k.name))
    chosen = [(k, report.share_of(k.name)) for k in ranked if report.share_of(k.name) >= config.min_share]
    chosen = chosen[: max(1, config.max_kernels)]
    return chosen or f"no Triton kernel takes at least {config.min_share:.0%} of the graph"
