"""Where a campaign's time went: each problem's optimizer time split, and their totals.

A problem keeps a compact copy of its optimize run's time split (seconds per stage, candidates
screened, every screen's seconds); the campaign adds the stages up, and takes the screening rate
and the screens' median and p90 over all problems (docs/benchmarks.md gives the targets they are
held to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..search.time_split import percentile
from .results import ProblemResult


def compact_time_split(split: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a problem's result keeps of ``TimeSplit.to_json()``: all but the per-candidate rows,
    plus every measured screen's and finalist's seconds."""
    if not isinstance(split, dict) or not split.get("stages"):
        return None
    measured = [c for c in split.get("candidates") or [] if isinstance(c, dict) and not c.get("replayed")]
    keep = ("total_s", "stages", "screened", "replayed", "search_s", "screened_per_minute", "screen_s", "finalize_s",
            "final_gates_s")
    return {**{k: split.get(k) for k in keep}, "screens": [float(c.get("screen_s") or 0.0) for c in measured]}


@dataclass
class TimeTotals:
    problems: int = 0  # problems with a time split (they reached the optimizer)
    budget_reached: int = 0
    stages: dict[str, float] = field(default_factory=dict)  # seconds, summed over problems
    total_s: float = 0.0
    screened: int = 0
    search_s: float = 0.0
    screened_per_minute: float | None = None
    screen_median_s: float | None = None
    screen_p90_s: float | None = None
    screen_max_s: float | None = None
    finalize_median_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def total_time(results: Sequence[ProblemResult]) -> TimeTotals:
    totals = TimeTotals(budget_reached=sum(1 for r in results if r.budget_reached))
    screens: list[float] = []
    finals: list[float] = []
    for r in results:
        split = r.time_split
        if not isinstance(split, dict):
            continue
        totals.problems += 1
        for name, seconds in (split.get("stages") or {}).items():
            totals.stages[name] = round(totals.stages.get(name, 0.0) + float(seconds or 0.0), 3)
        totals.total_s += float(split.get("total_s") or 0.0)
        totals.search_s += float(split.get("search_s") or 0.0)
        screens += [float(s) for s in split.get("screens") or []]
        finals += [float(s) for s in split.get("finalize_s") or []]
    totals.screened = len(screens)
    totals.total_s, totals.search_s = round(totals.total_s, 3), round(totals.search_s, 3)
    if screens and totals.search_s > 0:
        totals.screened_per_minute = round(60.0 * len(screens) / totals.search_s, 3)
    totals.screen_median_s, totals.screen_p90_s = _round(percentile(screens, 50)), _round(percentile(screens, 90))
    totals.screen_max_s = _round(max(screens) if screens else None)
    totals.finalize_median_s = _round(percentile(finals, 50))
    return totals


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def _s(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "–"


def time_section(results: Sequence[ProblemResult], totals: TimeTotals) -> list[str]:
    """report.md's "Time" section: the totals, then one row per problem."""
    rows = [r for r in results if isinstance(r.time_split, dict) or r.budget_s is not None]
    if not rows:
        return []
    lines = ["## Time", ""]
    if totals.problems:
        stages = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in totals.stages.items() if seconds >= 0.5)
        lines.append(f"The optimizer's time over {totals.problems} problem(s): {totals.total_s:.0f} s ({stages}). "
                     f"{totals.screened} candidate(s) screened in {totals.search_s:.0f} s of search: "
                     f"{_s(totals.screened_per_minute)} per minute; screen median {_s(totals.screen_median_s)} s, "
                     f"p90 {_s(totals.screen_p90_s)} s, max {_s(totals.screen_max_s)} s; final gates median "
                     f"{_s(totals.finalize_median_s)} s. Budget reached on {totals.budget_reached} problem(s).")
        lines.append("")
    lines += ["| problem | budget s | optimizer got s | wall s | budget reached | optimize s | screened | per minute "
              "| screen median s | screen p90 s | final gates s | stages (s) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        split = r.time_split or {}
        screen = split.get("screen_s") or {}
        finals = split.get("finalize_s") or []
        stages = ", ".join(f"{k} {v:.0f}" for k, v in (split.get("stages") or {}).items()
                           if isinstance(v, (int, float)) and v >= 0.5)
        lines.append(f"| `{r.name}` | {_s(r.budget_s)} | {_s(r.optimize_budget_s)} | {r.wall_s:.1f} "
                     f"| {'yes' if r.budget_reached else 'no'} | {_s(r.stage_seconds.get('optimize'))} "
                     f"| {split.get('screened', '–')} | {_s(split.get('screened_per_minute'))} "
                     f"| {_s(screen.get('median'))} | {_s(screen.get('p90'))} "
                     f"| {', '.join(f'{s:.0f}' for s in finals) or '–'} | {stages or '–'} |")
    lines += ["", "Budget: the problem's time (`--timeout`), compile and search included; the optimizer got what "
                  "was left after the problem's own stages, less a reserve for the confirmation. Screened per minute "
                  "counts the search stages (beam, screen, time).", ""]
    return lines
