"""The run's result and its files: result.json, report.md, final.diff and the kernels before and after.

They are written as soon as a candidate is verified (marked ``final: false`` while the search goes
on) and again at the end, so a run killed after a verification still leaves its best result.
Every write replaces the files atomically.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..gates.restitch import unified_diff
from ..gates.verdict import CascadeResult
from ..runs import render_report
from .agents import KernelBrief
from .decision import Decision
from .kernel_search import KernelSearch
from .result import OptimizeResult
from .rewrites.describe import describe_change
from .run_context import RunContext


class ResultWriter:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        # a project's kernel timed over its whole harness call: why its share is no figure (dispatch sets it)
        self.share_note: str | None = None

    def build(self, searches: list[KernelSearch], final: CascadeResult | None, decision: Decision, reason: str,
              *, done: bool = True, only: str | None = None) -> OptimizeResult:
        """The result of ``searches``; ``only`` names the one kernel whose accepted source counts (a result
        written while the search goes on: kernels accepted apart were not verified together)."""
        ctx = self.ctx
        accepted = {s.brief.name: s.accepted.source for s in searches
                    if s.accepted is not None and only in (None, s.brief.name)}
        if decision != "optimized":
            accepted = {}
        kernels = []
        for s in searches:
            best = s.accepted or s.best()
            kernels.append({
                "name": s.brief.name, "kind": s.brief.kind, "share": s.brief.share, "tier": s.brief.tier,
                "decision": "optimized" if s.brief.name in accepted else (
                    "matched" if s.screened_ok or s.not_searched else "fallback"),
                "not_searched": s.not_searched,
                "candidates": s.candidates, "screened_ok": s.screened_ok,
                "rejections": {str(k): v for k, v in sorted(s.rejections.items())},
                "kernel_speedup": best.speedup if best else None,
                "best_family": best.family if best else None,
                # what the best source changes against Inductor's, its ancestors' steps included
                "best_title": describe_change(s.brief.original_source, best.source, s.brief.name) if best else None,
                "baseline_kernel_ms": s.brief.baseline_ms,
                "could_not_verify": s.unverified,
                "quarantined": s.quarantined,
                "stopped_by_budget": s.stopped_by_budget,
                **sol_entry(s.brief, best.speedup if best and s.brief.name in accepted else None),
            })
        for entry in kernels if self.share_note else []:
            entry["share_note"] = self.share_note
        optimized = final if final is not None and decision == "optimized" else None
        return OptimizeResult(
            run_id=ctx.run_folder.id, run_dir=str(ctx.run_folder.path), decision=decision, reason=reason,
            speedup=optimized.speedup if optimized is not None else None,
            ci=optimized.ci if optimized is not None else None,
            timing_path=final.timing_path if final is not None else None,
            kernels=kernels, accepted_sources=accepted, cascade=final, graph_path=os.path.abspath(ctx.graph.path),
            device=ctx.evaluator.device, llm_usage=ctx.ledger.totals() if ctx.provider is not None else {},
            environment=environment(ctx.evaluator.device), budget=ctx.schedule.to_json(),
            time_split=ctx.times.to_json(), final=done,
            found_unverified=found_unverified(searches))

    def write(self, result: OptimizeResult, searches: list[KernelSearch], findings: Any = None) -> None:
        ctx = self.ctx
        with ctx.times.stage("outputs"):
            folder = ctx.run_folder
            original_text = Path(ctx.graph.path).read_text(encoding="utf-8")
            diff = ""
            if result.accepted_sources:  # the dump's graph re-stitched, or the user's own file edited
                new_text = ctx.target.rewrite(original_text, result.accepted_sources)
                diff = unified_diff(original_text, new_text, ctx.graph.path)
                folder.write_text(ctx.target.rewritten_name(), new_text)
            best = max(searches, key=lambda s: (s.accepted is not None, s.brief.share or 0.0), default=None)
            if best is not None:
                folder.write_text("original_kernel.py", best.brief.original_source)
                if best.brief.name in result.accepted_sources:
                    folder.write_text("optimized_kernel.py", result.accepted_sources[best.brief.name])
            result.time_split = ctx.times.to_json()
            data = result.to_json()
            # result.json last: a reader that finds it finds the diff and kernels it names
            folder.write_text("final.diff", diff)
            report = render_report(data, ctx.journal)
            # torch.compile's configuration and the dump's call() are not a project's own kernel's business
            if findings is not None and not ctx.target.users_own and (findings.overheads
                                                                or findings.recommendation is not None):
                report = report.rstrip("\n") + "\n\n" + findings.to_markdown()
            folder.write_text("report.md", report)
            folder.write_json("result.json", data)


FOUND_UNVERIFIED = "found, not verified within the budget"


def found_unverified(searches: list[KernelSearch]) -> list[dict[str, Any]]:
    """The candidates worth finalizing that the budget left no time to put through the final gates, each with
    its kernel speedup (kernel alone against Inductor's, never an end-to-end figure)."""
    found = []
    for s in searches:
        for node in s.found_unverified:
            ci = [node.ci_low, node.ci_high] if node.ci_low is not None and node.ci_high is not None else None
            found.append({"kernel": s.brief.name, "candidate": node.id, "title": s.titles.get(node.id, node.id),
                          "family": node.family, "kernel_speedup": node.speedup, "ci": ci,
                          "status": FOUND_UNVERIFIED})
    return found


def sol_entry(brief: KernelBrief, accepted_speedup: float | None) -> dict[str, Any]:
    """A kernel's speed of light in result.json: before, and after an accepted rewrite (the baseline
    figure times the kernel-alone A/B speedup: the same ideal bytes in less time)."""
    sol = brief.speed_of_light or {}
    before = sol.get("sol_pct")
    after = before * accepted_speedup if before is not None and accepted_speedup else None
    return {"ideal_bytes": sol.get("ideal_bytes"), "dram_bytes": sol.get("dram_bytes"),
            "traffic_ratio": sol.get("traffic_ratio"), "sol_pct": before, "sol_after_pct": after,
            "sol_after_source": "baseline SOL x kernel-alone A/B speedup" if after is not None else None,
            "causes": list(sol.get("causes") or []), "paper_tier": brief.paper_tier}


@lru_cache(maxsize=8)
def _environment(device: str) -> tuple[tuple[str, Any], ...]:
    return tuple(environment_of(device).items())


def environment(device: str) -> dict[str, Any]:
    """Versions and GPU behind the measurements (read once per device and process)."""
    return dict(_environment(device))


def environment_of(device: str) -> dict[str, Any]:
    """Versions and GPU behind the measurements, without importing torch (the caller may be an editor)."""
    from importlib.metadata import PackageNotFoundError, version

    info: dict[str, Any] = {"device": device}
    for package in ("torch", "triton"):
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            info[package] = None
    if device.startswith("cuda"):
        from ..measure.devices import cuda_index, gpu_name

        info["gpu"] = gpu_name(cuda_index(device))
    else:
        info["gpu"] = "cpu (Triton interpreter)"
    return info
