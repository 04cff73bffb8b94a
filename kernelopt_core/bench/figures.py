"""Per-problem speedup figures from timing samples: what the campaign reports and how it got it.

Three figures per problem, each naming its timing path:
- **vs max-autotune**: an interleaved A/B of the accepted graph against Inductor's own graph,
  both through ``module-call`` (the compiled module's ``call()``). A fallback or a match keeps the
  compiler's code, so its speedup is exactly 1 by construction, and says so.
- **max-autotune vs eager**: the full ``torch.compile`` callable (``compiled-callable-cudagraphs``
  on a GPU) against the eager module (``eager``): two paths, timed separately, so the ratio is a
  ratio of independent medians with a bootstrap interval, labelled as such.
- **vs eager**: eager time over the compiled callable's time less the kernel time the accepted
  rewrite saved in the module-call A/B. The saving is measured, its effect on the full callable
  is derived, and the label says "derived".
Pure Python and numpy; bootstrap seeds are fixed, so the same samples give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .results import ProblemResult, Speedup

RESAMPLES = 2000
SEED = 20261130
IDENTITY_SOURCE = "fallback: the compiler's own code (identical graph, 1.0 by construction)"


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    return float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail))


def _medians(samples: Sequence[float], rng: np.random.Generator, resamples: int) -> np.ndarray:
    data = np.asarray(samples, dtype=float)
    if data.size == 1:
        return np.full(resamples, data[0])
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    return np.median(data[picks], axis=1)


def identity_speedup(path: str) -> Speedup:
    return Speedup(1.0, 1.0, 1.0, path, IDENTITY_SOURCE)


def ratio_of_medians(numerator_ms: Sequence[float], denominator_ms: Sequence[float], path: str, source: str,
                     confidence: float = 0.95) -> Speedup:
    """median(numerator) / median(denominator) from two independently timed sample sets."""
    if not numerator_ms or not denominator_ms:
        raise ValueError("a ratio needs samples on both sides")
    value = float(np.median(numerator_ms) / np.median(denominator_ms))
    rng = np.random.default_rng(SEED)
    ratios = _medians(numerator_ms, rng, RESAMPLES) / _medians(denominator_ms, rng, RESAMPLES)
    low, high = _interval(ratios, confidence)
    return Speedup(value, low, high, path, source)


def derived_eager_speedup(eager_ms: Sequence[float], compiled_ms: Sequence[float],
                          baseline_call_ms: Sequence[float], candidate_call_ms: Sequence[float],
                          path: str, confidence: float = 0.95) -> Speedup | None:
    """eager / (compiled callable - kernel time saved), the saving from paired module-call A/B rounds.

    None when the estimate is meaningless (the saving exceeds the compiled callable's time, which
    happens only when the two paths disagree wildly).
    """
    a = np.asarray(baseline_call_ms, dtype=float)
    b = np.asarray(candidate_call_ms, dtype=float)
    if a.size == 0 or a.size != b.size or not eager_ms or not compiled_ms:
        raise ValueError("need eager and compiled samples and paired A/B rounds")
    saved = float(np.median(a) - np.median(b))
    denominator = float(np.median(compiled_ms)) - saved
    if denominator <= 0:
        return None
    value = float(np.median(eager_ms)) / denominator
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, a.size, size=(RESAMPLES, a.size))  # A/B rounds resample as pairs
    saved_draws = np.median(a[picks], axis=1) - np.median(b[picks], axis=1)
    denominators = _medians(compiled_ms, rng, RESAMPLES) - saved_draws
    ratios = np.where(denominators > 0, _medians(eager_ms, rng, RESAMPLES) / np.where(denominators > 0, denominators, 1.0),
                      np.nan)
    low, high = _interval(ratios, confidence)
    return Speedup(value, low, high, path, "derived: eager / (compiled callable - kernel time saved in the A/B)")


MODULE_CALL = "module-call"


def fill_baseline_figures(result: ProblemResult, eager_samples: Sequence[float], compiled_samples: Sequence[float],
                          compiled_path: str | None) -> None:
    """vs max-autotune, vs eager and max-autotune vs eager on ``result``, each naming its path and source
    (from the confirmation A/B, else gate 4's, of an optimized result; 1.0 otherwise)."""
    if result.outcome == "error":
        return
    confirm = result.confirm
    if result.outcome == "optimized":
        if confirm:
            result.vs_max_autotune = Speedup(confirm["speedup"], confirm["ci_low"], confirm["ci_high"], MODULE_CALL,
                                             "confirmation A/B (independent of the perf gate)")
        elif result.gate4:
            result.vs_max_autotune = Speedup(result.gate4["speedup"], result.gate4["ci_low"], result.gate4["ci_high"],
                                             str(result.gate4.get("path") or MODULE_CALL),
                                             "gate 4 A/B (no confirmation A/B)")
    else:
        result.vs_max_autotune = identity_speedup(MODULE_CALL)
    if not eager_samples or not compiled_samples:
        return
    pair = f"eager vs {compiled_path}"
    result.max_autotune_vs_eager = ratio_of_medians(eager_samples, compiled_samples, pair,
                                                    "ratio of independently timed medians")
    if result.outcome == "optimized" and confirm:
        derived = derived_eager_speedup(eager_samples, compiled_samples, confirm["a"]["samples_ms"],
                                        confirm["b"]["samples_ms"], f"{pair}, less the {MODULE_CALL} A/B saving")
        if derived is None:
            result.notes.append("vs eager not derived: the A/B saving exceeds the compiled callable's time")
        result.vs_eager = derived
    elif result.outcome != "optimized":
        result.vs_eager = Speedup(**{**result.max_autotune_vs_eager.to_json(),
                                     "source": "the compiler's own code: max-autotune vs eager"})
