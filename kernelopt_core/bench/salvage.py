"""What a problem had when its process was killed at the backstop (its budget plus a grace period).

The problem's process writes what it has after each stage (``partial_result.json`` in its work
folder, with the optimize run's folder once the search starts), and the optimizer writes its
result as soon as a candidate is verified. When the parent has to kill the process, a problem that
had reached the optimizer keeps that: its best verified outcome (optimized, matched or fallback),
labelled "budget reached", instead of an error. A problem killed before the optimizer (a hang in
import, compile, ...) stays an error.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .figures import fill_baseline_figures
from .outcome import classify_decision
from .results import ProblemResult, partial_path
from .time_totals import compact_time_split

# Stages at which the optimizer had started: what it verified is the problem's result.
SEARCHED_STAGES = ("optimize", "confirm")


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def salvage(work_dir: str, why: str, wall_s: float) -> ProblemResult | None:
    """The problem's result from what its killed process left in ``work_dir``, or None when it had not
    reached the optimizer (or left nothing readable). ``why`` says how the process was stopped."""
    data = _read_json(partial_path(work_dir))
    if data is None:
        return None
    try:
        result = ProblemResult.from_json({**data, "outcome": "error"})
    except (TypeError, ValueError, KeyError):
        return None
    if result.stage not in SEARCHED_STAGES:
        return None
    run = _read_json(os.path.join(result.run_dir, "result.json")) if result.run_dir else None
    result.budget_reached = True
    result.wall_s = round(wall_s, 3)
    result.error = None
    if run is None or run.get("decision") not in ("optimized", "matched", "fallback"):
        result.outcome, result.category = "fallback", "budget"
        result.reason = (f"budget reached: {why} before the search verified a candidate; "
                         "the compiler's code is kept")
    else:
        cascade = run.get("cascade") if isinstance(run.get("cascade"), dict) else None
        result.outcome, result.category = classify_decision(str(run["decision"]), str(run.get("reason") or ""),
                                                            cascade, result.classification)
        state = "its result so far" if run.get("final") is False else "its final result"
        result.reason = f"budget reached: {why}; the search had written {state}: {run.get('reason')}"
        result.kernels_changed = sorted(run.get("accepted_kernels") or [])
        result.time_split = compact_time_split(run.get("time_split"))
        speedup, ci = run.get("speedup"), run.get("ci")
        if result.outcome == "optimized" and isinstance(speedup, (int, float)):
            low, high = (ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else (speedup, speedup)
            result.gate4 = {"speedup": speedup, "ci_low": low, "ci_high": high, "path": run.get("timing_path")}
    result.confirm = None  # an interrupted confirmation measured nothing to keep
    result.notes.append(f"{why}; the result is what the run had verified (report: "
                        f"{os.path.join(result.run_dir, 'report.md') if result.run_dir else '-'})")
    eager = (result.eager or {}).get("samples_ms") or []
    compiled = (result.max_autotune or {}).get("samples_ms") or []
    fill_baseline_figures(result, eager, compiled, (result.max_autotune or {}).get("path"))
    return result
