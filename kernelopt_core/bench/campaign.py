"""A whole campaign: resume, run every problem (local slots or Ray), gather, report.

Results are written per problem as they finish (``<out>/problems/<name>.json``), the report is
refreshed after each one (without the plot), and the final report adds the plot. With
``resume`` every problem that already has a result file is skipped, except one that was cancelled
(it never finished), which runs again.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ..events import EventSink
from .config import CampaignConfig
from .config_change import config_figure
from .device_memory import MemoryReader
from .outcome import counts_text, outcome_text
from .problem_process import run_problem_process
from .report import PLOT_NAME, CampaignInfo, write_reports
from .results import ProblemResult, load_result, result_path, write_result
from .scheduler import ProblemRunner, make_slots, resolve_device, run_on_slots
from .suite import ProblemSpec
from .summary import CampaignSummary


@dataclass
class CampaignResult:
    out_dir: str
    info: CampaignInfo
    results: list[ProblemResult]
    summary: CampaignSummary
    resumed: list[str] = field(default_factory=list)
    not_reached: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        return self.summary.regression.regressions

    def to_json(self) -> dict[str, Any]:
        plot = os.path.join(self.out_dir, PLOT_NAME)
        return {
            "out_dir": self.out_dir,
            "results_json": os.path.join(self.out_dir, "results.json"),
            "report_md": os.path.join(self.out_dir, "report.md"),
            "plot": plot if os.path.exists(plot) else None,
            "campaign": self.info.to_json(),
            "summary": self.summary.to_json(),
            "resumed": self.resumed,
            "not_reached": self.not_reached,
            "problems": [{"name": r.name, "level": r.level, "outcome": r.outcome, "category": r.category,
                          "reason": r.reason, "wall_s": r.wall_s,
                          "vs_max_autotune": r.vs_max_autotune.to_json() if r.vs_max_autotune else None,
                          "vs_eager": r.vs_eager.to_json() if r.vs_eager else None,
                          "config_change": figure.to_json() if (figure := config_figure(r)) else None}
                         for r in self.results],
        }


def _versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "triton", "kernelopt"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def run_campaign(problems: Sequence[ProblemSpec], config: CampaignConfig, out_dir: str,
                 sink: EventSink | None = None, suite: str = "", runner: ProblemRunner = run_problem_process,
                 memory_reader: MemoryReader | None = None) -> CampaignResult:
    """Run ``problems`` and write the reports into ``out_dir``. Never raises for a problem's failure.
    ``memory_reader`` stands in for nvidia-smi (tests; see :mod:`.device_memory`)."""
    sink = sink or EventSink()
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    started = time.monotonic()
    deadline = started + config.deadline_s if config.deadline_s else None
    finished: dict[str, ProblemResult] = {}
    resumed: list[str] = []
    for spec in problems:
        previous = load_result(out_dir, spec.name) if config.resume else None
        if previous is not None and previous.category == "cancelled":
            previous = None  # stopped before it finished: a resumed campaign runs it again
        if previous is not None:
            finished[spec.name] = previous
            resumed.append(spec.name)
        elif os.path.exists(result_path(out_dir, spec.name)):
            os.unlink(result_path(out_dir, spec.name))  # a fresh campaign: old results must not mix in
    todo = [spec for spec in problems if spec.name not in finished]
    info = CampaignInfo(suite=suite or out_dir, device=config.device, dtype=config.dtype, provider=config.provider,
                        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                        runner="ray" if config.ray_address else "local", config=config.to_json(),
                        environment=_versions(), resumed=len(resumed))
    total = len(problems)
    lock = threading.Lock()
    sink.progress(f"{len(todo)} problem(s) to run, {len(resumed)} resumed", stage="campaign",
                  percentage=int(100 * len(finished) / total) if total else 100, done=len(finished), total=total)

    def on_result(result: ProblemResult) -> None:
        with lock:
            write_result(out_dir, result)
            finished[result.name] = result
            done = len(finished)
            write_reports(out_dir, info, list(finished.values()), plot=False)
        figure = result.vs_max_autotune
        sink.progress(f"{result.name}: {outcome_text(result.outcome, result.category)}"
                      + (f", {figure.value:.2f}x vs max-autotune" if figure else "")
                      + (f", rewrote {', '.join(result.kernels_changed)}" if result.kernels_changed else ""),
                      stage="problem-done", problem=result.name, outcome=result.outcome, category=result.category,
                      percentage=int(100 * done / total), done=done, total=total)

    if config.ray_address:
        from .ray_runner import run_on_ray

        ran, not_reached, device = run_on_ray(todo, config, out_dir, sink, on_result, deadline)
        info.device = device
        info.workers = 0  # the cluster decides
    else:
        slots = make_slots(config, memory_reader=memory_reader)
        info.device = resolve_device(config.device)
        info.workers = len(slots)
        ran, not_reached = run_on_slots(todo, config, out_dir, slots, sink, on_result, runner, deadline)
    gpus = sorted({r.gpu for r in ran if r.gpu})
    if gpus:
        info.environment["gpus"] = "; ".join(gpus)
    info.wall_s = round(time.monotonic() - started, 3)
    results = sorted(finished.values(), key=lambda r: (r.level, r.name))
    summary = write_reports(out_dir, info, results, not_reached, plot=config.plot)
    not_optimized = summary.fallback_reasons.get("not-optimized", 0)
    sink.progress(f"campaign done: {counts_text(summary.counts, not_optimized)}", stage="campaign", percentage=100,
                  done=len(results), total=total, counts=summary.counts)
    return CampaignResult(out_dir, info, results, summary, resumed, list(not_reached))
