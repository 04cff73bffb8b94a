"""Across a campaign's problems: geomeans per level, fast_p, outcome counts, the regression check.

Conventions (also written into every report):
- geomeans are over problems that ran (errors excluded); a fallback or match counts as 1.0;
- fast_p is the share of ALL problems (errors included) that ran and are faster than p, strictly
  (KernelBench's definition: a problem that did not run is not fast);
- a regression is an accepted (optimized) result whose measured speedup over max-autotune is
  below 1.0. There must be none; any is reported loudly and fails the command;
- the geomean "with configuration changes" takes, per problem, the better of its kernel figure
  and its verified configuration change (:mod:`.config_change`), never their product; the
  kernel-only geomean beside it is unchanged by configuration changes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .config_change import config_figure, with_config_figure
from .results import OUTCOMES, ProblemResult, Speedup
from .time_totals import TimeTotals, total_time

FAST_P = (1.0, 1.03, 1.1)
RESAMPLES = 2000
SEED = 20261130


def geomean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("the geometric mean of nothing is undefined")
    if any(v <= 0 or not math.isfinite(v) for v in values):
        raise ValueError(f"geometric means need positive finite values, got {list(values)[:5]}")
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def geomean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Bootstrap over problems: how much the geomean depends on which problems are in the suite."""
    logs = np.log(np.asarray(values, dtype=float))
    if logs.size == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, logs.size, size=(RESAMPLES, logs.size))
    means = np.exp(logs[picks].mean(axis=1))
    tail = (1.0 - confidence) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def _figure(result: ProblemResult, key: str) -> Speedup | None:
    return getattr(result, key)


def fast_p(results: Sequence[ProblemResult], p: float, key: str = "vs_max_autotune") -> float:
    if not results:
        return 0.0
    fast = sum(1 for r in results if r.outcome != "error" and (f := _figure(r, key)) is not None and f.value > p)
    return fast / len(results)


@dataclass
class GroupSummary:
    """One level (or all levels together)."""

    problems: int
    ran: int
    counts: dict[str, int]
    geomean_vs_max_autotune: float | None
    geomean_vs_max_autotune_ci: tuple[float, float] | None
    geomean_vs_eager: float | None
    geomean_vs_eager_ci: tuple[float, float] | None
    geomean_max_autotune_vs_eager: float | None
    max_vs_max_autotune: float | None
    fast_p: dict[str, float]
    fast_p_vs_eager: dict[str, float]
    # beside the kernel-only figures: counting verified configuration changes (never multiplied in)
    geomean_with_config_changes: float | None = None
    geomean_with_config_changes_ci: tuple[float, float] | None = None
    config_changes_accepted: int = 0


def summarize_group(results: Sequence[ProblemResult]) -> GroupSummary:
    ran = [r for r in results if r.outcome != "error"]
    counts = Counter(r.outcome for r in results)

    def values(key: str) -> list[float]:
        return [f.value for r in ran if (f := _figure(r, key)) is not None and f.value > 0]

    vs_ma, vs_eager, ma_vs_eager = values("vs_max_autotune"), values("vs_eager"), values("max_autotune_vs_eager")
    with_config = [f.value for r in ran if (f := with_config_figure(r)) is not None and f.value > 0]
    return GroupSummary(
        problems=len(results), ran=len(ran), counts={o: counts.get(o, 0) for o in OUTCOMES},
        geomean_vs_max_autotune=geomean(vs_ma) if vs_ma else None,
        geomean_vs_max_autotune_ci=geomean_ci(vs_ma) if vs_ma else None,
        geomean_vs_eager=geomean(vs_eager) if vs_eager else None,
        geomean_vs_eager_ci=geomean_ci(vs_eager) if vs_eager else None,
        geomean_max_autotune_vs_eager=geomean(ma_vs_eager) if ma_vs_eager else None,
        max_vs_max_autotune=max(vs_ma) if vs_ma else None,
        fast_p={_p_key(p): fast_p(results, p) for p in FAST_P},
        fast_p_vs_eager={_p_key(p): fast_p(results, p, "vs_eager") for p in FAST_P},
        geomean_with_config_changes=geomean(with_config) if with_config else None,
        geomean_with_config_changes_ci=geomean_ci(with_config) if with_config else None,
        config_changes_accepted=sum(1 for r in ran if config_figure(r) is not None),
    )


def _p_key(p: float) -> str:
    return f"{p:g}" if p != 1.0 else "1.0"


@dataclass
class RegressionCheck:
    regressions: list[str]  # accepted and measured slower than max-autotune: must be empty
    unconfirmed: list[str]  # accepted, but the interval reaches below 1.0 or no A/B confirmed it
    checked: int  # accepted results looked at

    @property
    def passed(self) -> bool:
        return not self.regressions


def regression_check(results: Sequence[ProblemResult]) -> RegressionCheck:
    regressions: list[str] = []
    unconfirmed: list[str] = []
    accepted = [r for r in results if r.outcome == "optimized"]
    for result in accepted:
        figure = result.vs_max_autotune
        if figure is None or not math.isfinite(figure.value):
            unconfirmed.append(result.name)
        elif figure.value < 1.0:
            regressions.append(result.name)
        elif figure.ci_low < 1.0 or result.confirm is None:
            unconfirmed.append(result.name)
    return RegressionCheck(regressions, unconfirmed, len(accepted))


@dataclass
class CampaignSummary:
    total: int
    counts: dict[str, int]
    fallback_reasons: dict[str, int]
    error_reasons: dict[str, int]
    overall: GroupSummary
    levels: dict[int, GroupSummary]  # by level number (0: problems outside level folders); str keys in JSON
    regression: RegressionCheck
    not_reached: list[str] = field(default_factory=list)
    wall_s_total: float = 0.0
    time: TimeTotals = field(default_factory=TimeTotals)  # the optimizer's time split over all problems

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["levels"] = {str(level): group for level, group in data["levels"].items()}  # JSON keys are text
        data["regression"]["passed"] = self.regression.passed
        data["regression_count"] = len(self.regression.regressions)
        return data


def summarize_campaign(results: Sequence[ProblemResult], not_reached: Sequence[str] = ()) -> CampaignSummary:
    by_level: dict[int, list[ProblemResult]] = {}
    for result in results:
        by_level.setdefault(result.level, []).append(result)
    return CampaignSummary(
        total=len(results),
        counts={o: sum(1 for r in results if r.outcome == o) for o in OUTCOMES},
        fallback_reasons=dict(Counter(r.category or "other" for r in results if r.outcome == "fallback")),
        error_reasons=dict(Counter(r.category or "other" for r in results if r.outcome == "error")),
        overall=summarize_group(results),
        levels={level: summarize_group(group) for level, group in sorted(by_level.items())},
        regression=regression_check(results),
        not_reached=list(not_reached),
        wall_s_total=round(sum(r.wall_s for r in results), 3),
        time=total_time(results),
    )
