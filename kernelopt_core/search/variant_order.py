"""The best variants first: order a family's variants by what the device and this run measured.

Within a search's time only a family's first variants are reached, so their order decides the
result. Each variant's score, in log speedup, is a prior from the device's measurements
(:mod:`kernelopt_core.search.rewrites.measured`, GPU runs only) plus an adjustment from this run's
timings of the family's variants:

    prior(v)  = (sum_m w_m * log(speedup_m / best_m) + w_0 * log(0.85)) / (sum_m w_m + w_0)
                w_m = source weight * exp(-shape distance - 2 * parameter distance)
    adjust(v) = sum_t u_t * log(speedup_t / ref) / (sum_t u_t + u_0),  u_t = exp(-parameter distance)

Distances are in octaves. Scores are compared in steps of 5% (timing noise); ties keep the
family's own order. What each term means, and the measurement that called for it:
docs/design-notes.md, "search/variant_order.py".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .kernel_search import VariantTiming
from .rewrites import Rewrite, RewriteContext
from .rewrites.measured import Measured, measured_for

PROTOTYPE_WEIGHT = 1.0
OWN_CODE_WEIGHT = 2.0
UNTRIED_SCORE = math.log(0.85)  # what nothing measured says about a configuration
UNTRIED_WEIGHT = 0.25
RUN_SHRINK = 0.25  # u_0: a timing far from a variant says little about it
METHOD_DISTANCE = 2.0
STEP = 0.05  # scores closer than this (about 5%) are ties: the family's order decides
# Parameters that describe a variant rather than choose it (they follow from the chosen ones).
DESCRIPTIVE = {"launcher", "registers", "efficiency", "programs", "ideal_bytes", "planned_bytes", "expected_sol_pct",
               "sol_pct_before", "traffic_ratio_before", "window", "masks", "group", "chunk_bytes", "written_out"}


def flat_params(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"blocks": {"XBLOCK": 64}, "num_warps": 4}`` -> ``{"blocks.XBLOCK": 64, "num_warps": 4}``, choosing
    parameters only (numbers and names)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if key in DESCRIPTIVE:
            continue
        if isinstance(value, dict):
            out.update(flat_params(value, f"{name}."))
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            out[name] = value
    return out


def _octaves(a: Any, b: Any) -> float:
    if isinstance(a, str) or isinstance(b, str):
        return 0.0 if a == b else METHOD_DISTANCE
    if a <= 0 or b <= 0:
        return 0.0 if a == b else METHOD_DISTANCE
    return abs(math.log2(a / b))


def distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Octaves between two parameter (or shape) sets, over the keys both have."""
    return sum(_octaves(a[k], b[k]) for k in a.keys() & b.keys())


def kernel_shape(ctx: RewriteContext, variants: Sequence[Rewrite]) -> dict[str, int]:
    """The shape the measurements are compared on: rows and row length; for windows the outputs and
    output rows (from the recognised window)."""
    numels = ctx.module.numels
    shape = {k: v for k, v in numels.items() if k in ("xnumel", "r0_numel") and isinstance(v, int)}
    window = next((v.params.get("window") for v in variants if isinstance(v.params.get("window"), dict)), None)
    if window is not None and isinstance(window.get("out_h"), int):
        shape["out_h"] = window["out_h"]
    return shape


def _experiments(entries: list[Measured]) -> dict[str, float]:
    best: dict[str, float] = {}
    for m in entries:
        best[m.experiment] = max(best.get(m.experiment, 0.0), m.speedup)
    return best


def prior(params: dict[str, Any], shape: dict[str, int], measured: list[Measured]) -> float:
    """What the device's measurements say of a variant: its log speedup relative to the best configuration."""
    chosen = flat_params(params)
    total, weight_sum = UNTRIED_WEIGHT * UNTRIED_SCORE, UNTRIED_WEIGHT
    best = _experiments(measured)
    for m in measured:
        keys = m.params_dict
        if not keys.keys() & chosen.keys():
            continue
        w = (OWN_CODE_WEIGHT if m.own_code else PROTOTYPE_WEIGHT) * math.exp(
            -distance(shape, m.shape_dict) - 2.0 * distance(chosen, keys))
        total += w * math.log(m.speedup / best[m.experiment])
        weight_sum += w
    return total / weight_sum


def adjustment(params: dict[str, Any], timings: Sequence[VariantTiming]) -> float:
    """What this run's timings of the family say of a variant, against their mean and Inductor's kernel."""
    speedups = [t.speedup for t in timings if t.speedup > 0]
    if not speedups:
        return 0.0
    ref = math.exp(sum(math.log(s) for s in speedups) / (len(speedups) + 1))  # with Inductor's 1.0
    chosen = flat_params(params)
    total, weight_sum = 0.0, RUN_SHRINK
    for t in timings:
        timed = flat_params(t.params)
        if t.speedup <= 0 or not timed.keys() & chosen.keys():
            continue
        u = math.exp(-distance(chosen, timed))
        total += u * math.log(t.speedup / ref)
        weight_sum += u
    return total / weight_sum


def score(params: dict[str, Any], shape: dict[str, int], measured: list[Measured],
          timings: Sequence[VariantTiming]) -> float:
    """The variant's expected log speedup relative to the best configuration, as this run knows it now."""
    return prior(params, shape, measured) + adjustment(params, timings)


def rank_variants(variants: list[Rewrite], ctx: RewriteContext, device_kind: str,
                  timings: Sequence[VariantTiming]) -> list[Rewrite]:
    """``variants`` best first (a stable sort: without evidence the family's order stands)."""
    if len(variants) < 2:
        return list(variants)
    family = variants[0].family
    measured = measured_for(family) if device_kind == "cuda" else []
    own = [t for t in timings if t.family == family]
    if not measured and not own:
        return list(variants)
    shape = kernel_shape(ctx, variants)
    keyed = [(-round(score(v.params, shape, measured, own) / STEP), i) for i, v in enumerate(variants)]
    return [variants[i] for _, i in sorted(keyed)]


def variant_order(device_kind: str, ctx: RewriteContext,
                  timings: Sequence[VariantTiming]) -> Callable[[list[Rewrite]], list[Rewrite]]:
    """The executor's ordering of a family's remaining variants, as of now (``timings`` grows as the
    run times more of them)."""
    return lambda variants: rank_variants(variants, ctx, device_kind, timings)
