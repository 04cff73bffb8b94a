"""The best variants first: order a family's variants by what the device and this run measured.

Within a budget only a family's first variants are reached, so their order decides the result
(issue 25: on the held-out softmax, cooperative rows' first variant ran at 0.30x while the
prototype's configuration had measured 1.26x). Each variant gets a score: how far behind the best
configuration of its experiment a measurement at (or near) its parameters and shape came,

    score(v) = (sum_m w_m * log(speedup_m / best_m) + w_0 * log(0.85)) / (sum_m w_m + w_0)
    w_m = source weight * exp(-shape distance - 2 * parameter distance)

where best_m is the best configuration of m's experiment (a recorded experiment transfers its
ratios, not its level: the code measured then may have changed since), and for this run's timings
the best of them or Inductor's kernel (1.0), whichever is faster.
with distances in octaves (|log2| of the ratio; another method costs 2). The sources are the H200's
measurements (:mod:`kernelopt_core.search.rewrites.measured`, GPU runs only; the family's own
launchers count twice a prototype) and **this run's timings** of the family's variants on the
kernel (four times a prototype): the run re-orders what remains as it learns. The ``w_0`` term is
what nothing measured says: a configuration 15% behind the best one. It pulls a variant with
little evidence towards that, so a variant measured far behind goes after an untried one, and one
only near a good measurement ranks after the measured one. Ties keep the family's own order (the
sort is stable).
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
RUN_WEIGHT = 4.0
UNTRIED_SCORE = math.log(0.85)  # what nothing measured says about a configuration
UNTRIED_WEIGHT = 0.25
METHOD_DISTANCE = 2.0
# Parameters that describe a variant rather than choose it (they follow from the chosen ones).
DESCRIPTIVE = {"launcher", "registers", "efficiency", "programs", "ideal_bytes", "planned_bytes", "expected_sol_pct",
               "sol_pct_before", "traffic_ratio_before", "window", "masks", "group", "chunk_bytes"}


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


def score(params: dict[str, Any], shape: dict[str, int], measured: list[Measured],
          timings: Sequence[VariantTiming]) -> float:
    """The variant's expected log speedup relative to the best measured configuration."""
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
    run_best = max([1.0, *(t.speedup for t in timings)])  # Inductor's kernel is always there to keep
    for t in timings:
        timed = flat_params(t.params)
        if not timed.keys() & chosen.keys() or t.speedup <= 0:
            continue
        w = RUN_WEIGHT * math.exp(-2.0 * distance(chosen, timed))
        total += w * math.log(t.speedup / run_best)
        weight_sum += w
    return total / weight_sum


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
    keyed = [(-score(v.params, shape, measured, own), i) for i, v in enumerate(variants)]
    return [variants[i] for _, i in sorted(keyed)]


def variant_order(device_kind: str, ctx: RewriteContext,
                  timings: Sequence[VariantTiming]) -> Callable[[list[Rewrite]], list[Rewrite]]:
    """The executor's ordering of a family's remaining variants, as of now (``timings`` grows as the
    run times more of them)."""
    return lambda variants: rank_variants(variants, ctx, device_kind, timings)
