"""Where a run's time goes: seconds per stage, per candidate, and candidates screened per minute.

Every stage of the search measures itself on the run's clock (the budget's, so a test's stand-in
clock gives exact figures). A result looked up in the journal of a resumed run is marked
``replayed``: it counts in no duration estimate and in no screening rate. Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

# The stages in the order a run meets them; "beam" is the search loop's own overhead (planning,
# proposing a candidate, the memory), apart from its screens and timings.
STAGES = ("setup", "dispatch", "facts", "profile", "brief", "beam", "screen", "time", "finalize", "combine",
          "config", "outputs")
# The stages of the search loop: the screening rate is candidates screened per minute of them.
SEARCH_STAGES = ("beam", "screen", "time")


def seconds_text(seconds: float) -> str:
    """600 -> "10 min", 90 -> "1 min 30 s", 45 -> "45 s", 2.5 -> "2.5 s"."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class CandidateTime:
    """One candidate's time: proposing it, its screen (gates 1-2), its kernel timing, and its finalist run
    when it went through gates 3-4."""

    label: str
    kernel: str
    family: str
    propose_s: float = 0.0
    screen_s: float = 0.0
    time_s: float = 0.0
    finalize_s: float | None = None
    # Where the final gates' time went: each gate's seconds, and the sanitizer's longest tool run
    final_gates_s: dict[str, float] | None = None
    verdict: str = ""  # "passed", "gate N", "could not verify"
    speedup: float | None = None  # kernel alone, when it was timed
    replayed: bool = False  # its screen came from the journal of an earlier invocation

    @property
    def total_s(self) -> float:
        return self.propose_s + self.screen_s + self.time_s

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("propose_s", "screen_s", "time_s", "finalize_s"):
            if data[key] is not None:
                data[key] = round(data[key], 3)
        return data


@dataclass
class TimeSplit:
    clock: Callable[[], float]
    started: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    candidates: list[CandidateTime] = field(default_factory=list)
    _measured: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @contextmanager
    def stage(self, name: str, replayed: Callable[[], bool] = lambda: False) -> Iterator[list[float]]:
        """Time the block as stage ``name``; the yielded list receives its seconds when it ends.
        ``replayed`` (asked at the end) says whether the block only looked its result up."""
        box: list[float] = []
        begin = self.clock()
        try:
            yield box
        finally:
            seconds = max(0.0, self.clock() - begin)
            box.append(seconds)
            self.add(name, seconds, replayed=replayed())

    def add(self, name: str, seconds: float, *, replayed: bool = False) -> None:
        self.stages[name] = self.stages.get(name, 0.0) + seconds
        if not replayed:
            self._measured.setdefault(name, []).append(seconds)

    def durations(self, name: str) -> list[float]:
        """The measured (not replayed) durations of a stage, in order."""
        return list(self._measured.get(name, []))

    def candidate_seconds(self) -> list[float]:
        return [c.total_s for c in self.measured_candidates()]

    def measured_candidates(self) -> list[CandidateTime]:
        """The candidates this invocation proposed, screened and timed (not read back from a journal)."""
        return [c for c in self.candidates if not c.replayed]

    def total_s(self) -> float:
        return max(0.0, self.clock() - self.started)

    def to_json(self) -> dict[str, Any]:
        total = self.total_s()
        stages = {name: round(self.stages[name], 3) for name in (*STAGES, *sorted(set(self.stages) - set(STAGES)))
                  if name in self.stages}
        stages["other"] = round(max(0.0, total - sum(self.stages.values())), 3)
        measured = self.measured_candidates()
        screens = [c.screen_s for c in measured]
        search_s = sum(self.stages.get(name, 0.0) for name in SEARCH_STAGES)
        return {
            "total_s": round(total, 3), "stages": stages,
            "candidates": [c.to_json() for c in self.candidates],
            "screened": len(measured), "replayed": len(self.candidates) - len(measured),
            "search_s": round(search_s, 3),
            "screened_per_minute": round(60.0 * len(measured) / search_s, 3) if search_s > 0 and measured else None,
            "screen_s": {"median": _round(percentile(screens, 50)), "p90": _round(percentile(screens, 90)),
                         "max": _round(max(screens) if screens else None)},
            "finalize_s": [round(s, 3) for s in self.durations("finalize")],
            "final_gates_s": [c.final_gates_s for c in measured if c.final_gates_s],
        }


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def summary_line(split: dict[str, Any]) -> str:
    """One line of a run's time split (``TimeSplit.to_json()``): the stages that took time, the
    screening rate and the screens' median and p90."""
    stages = split.get("stages") or {}
    parts = [f"{name} {seconds_text(seconds)}" for name, seconds in stages.items() if name != "other" and seconds >= 1]
    line = f"time {seconds_text(float(split.get('total_s') or 0.0))}" + (f": {', '.join(parts)}" if parts else "")
    screened = split.get("screened") or 0
    if screened:
        rate = split.get("screened_per_minute")
        screen = split.get("screen_s") or {}
        line += (f"; {screened} candidate(s) screened" + (f", {rate:.1f} per minute" if rate else "")
                 + (f" (screen median {screen['median']:.1f} s, p90 {screen['p90']:.1f} s)"
                    if screen.get("median") is not None else ""))
    return line
