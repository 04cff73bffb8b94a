"""Timing statistics on samples, with nothing timed here: medians, IQR, bootstrap intervals, A/B.

Kept apart from the timers so the statistics can be tested on synthetic samples. Pure Python
plus numpy; no torch. Bootstrap resampling uses a fixed RNG seed, so the same samples always
give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


@dataclass
class TimingStats:
    """A timing summary; every figure is in milliseconds."""

    median_ms: float
    iqr_ms: float
    ci_low_ms: float  # bootstrap confidence interval of the median
    ci_high_ms: float
    mean_ms: float
    min_ms: float
    n: int
    path: str  # the TimingPath value the samples were taken through
    samples_ms: list[float] = field(default_factory=list)

    @property
    def relative_iqr(self) -> float:
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else math.inf

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimingStats:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass
class ABResult:
    """An interleaved comparison of a baseline A with a candidate B."""

    speedup: float  # median time of A / median time of B; > 1 means B is faster
    ci_low: float  # bootstrap confidence interval of the speedup, resampling whole rounds
    ci_high: float
    a: TimingStats
    b: TimingStats
    rounds: int
    path: str
    confidence: float = 0.95

    @property
    def significant(self) -> bool:
        """The interval excludes 1.0: A and B differ at this confidence."""
        return self.ci_low > 1.0 or self.ci_high < 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "speedup": self.speedup, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "a": self.a.to_json(), "b": self.b.to_json(), "rounds": self.rounds, "path": self.path,
            "confidence": self.confidence,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ABResult:
        return cls(
            speedup=data["speedup"], ci_low=data["ci_low"], ci_high=data["ci_high"],
            a=TimingStats.from_json(data["a"]), b=TimingStats.from_json(data["b"]),
            rounds=data["rounds"], path=data["path"], confidence=data.get("confidence", 0.95),
        )


def _clean(samples: Sequence[float], what: str) -> list[float]:
    values = [float(s) for s in samples]
    if not values:
        raise ValueError(f"no {what} samples to summarize")
    bad = [v for v in values if not math.isfinite(v) or v < 0]
    if bad:
        raise ValueError(f"{what} samples must be finite and non-negative; got {bad[:3]}")
    return values


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), q in [0, 1]."""
    import numpy as np

    return float(np.quantile(np.asarray(samples, dtype=float), q))


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def bootstrap_median_ci(samples: Sequence[float], confidence: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the median."""
    import numpy as np

    data = np.asarray(samples, dtype=float)
    if data.size == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - confidence) / 2.0
    return float(np.quantile(medians, tail)), float(np.quantile(medians, 1.0 - tail))


def summarize(samples_ms: Sequence[float], path: str, confidence: float = 0.95) -> TimingStats:
    """Median, IQR, bootstrap CI of the median, mean and min of timing samples (ms)."""
    values = _clean(samples_ms, "timing")
    low, high = bootstrap_median_ci(values, confidence)
    return TimingStats(
        median_ms=median(values),
        iqr_ms=quantile(values, 0.75) - quantile(values, 0.25),
        ci_low_ms=low, ci_high_ms=high,
        mean_ms=sum(values) / len(values), min_ms=min(values),
        n=len(values), path=str(path), samples_ms=values,
    )


def ab_speedup(a_ms: Sequence[float], b_ms: Sequence[float], path: str, confidence: float = 0.95,
               resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> ABResult:
    """Speedup of B over A from paired rounds: median(A) / median(B), with a bootstrap interval.

    ``a_ms[i]`` and ``b_ms[i]`` were taken in the same round (interleaved), so the bootstrap
    resamples whole rounds: drift that hits both sides of a round cancels in the ratio.
    """
    import numpy as np

    a_values = _clean(a_ms, "baseline (A)")
    b_values = _clean(b_ms, "candidate (B)")
    if len(a_values) != len(b_values):
        raise ValueError(f"A/B rounds must pair up: {len(a_values)} A samples vs {len(b_values)} B samples")
    a_arr, b_arr = np.asarray(a_values), np.asarray(b_values)
    if float(np.median(b_arr)) <= 0:
        raise ValueError("the candidate's median time is zero; nothing was timed")
    speedup = float(np.median(a_arr) / np.median(b_arr))
    if a_arr.size == 1:
        low = high = speedup
    else:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, a_arr.size, size=(resamples, a_arr.size))
        b_medians = np.median(b_arr[picks], axis=1)
        ratios = np.median(a_arr[picks], axis=1) / np.where(b_medians > 0, b_medians, np.nan)
        ratios = ratios[np.isfinite(ratios)]
        tail = (1.0 - confidence) / 2.0
        low, high = float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1.0 - tail))
    return ABResult(
        speedup=speedup, ci_low=low, ci_high=high,
        a=summarize(a_values, path, confidence), b=summarize(b_values, path, confidence),
        rounds=len(a_values), path=str(path), confidence=confidence,
    )


def median_absolute_deviation(values: Sequence[float], center: float | None = None) -> float:
    """Median of |x - center| (center defaults to the median): the A/A noise figure."""
    data = _clean(values, "ratio")
    mid = median(data) if center is None else center
    return median([abs(v - mid) for v in data])
