"""Gate 3, model level: the whole re-stitched graph against the compiled baseline. Runs inside a
worker (imports torch inside the functions).

For each seed the baseline and the re-stitched graph run on the same inputs (the wrapper's own
``get_args()`` under that seed); every tensor output must match at atol = rtol = 1e-4. Where one
does not, the float64 fallback decides for that seed (:mod:`.float64_reference`):

* d_ref = ||r32 - r64||inf and d_opt = ||o32 - r64||inf;
* if d_ref >= 1e-8 it passes when rho = d_opt / d_ref <= 10;
* otherwise it passes when d_opt / max(||r32||inf, 1e-12) <= 1e-4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

D_REF_FLOOR = 1e-8
RHO_LIMIT = 10.0
RELATIVE_LIMIT = 1e-4


@dataclass
class Float64Decision:
    d_ref: float
    d_opt: float
    rho: float | None
    passed: bool
    rule: str

    def to_json(self) -> dict[str, Any]:
        return {"d_ref": self.d_ref, "d_opt": self.d_opt, "rho": self.rho, "passed": self.passed, "rule": self.rule}


def float64_decision(d_ref: float, d_opt: float, r32_inf_norm: float) -> Float64Decision:
    """The issue's float64 rule, on numbers already measured (pure arithmetic, testable alone)."""
    if math.isnan(d_opt) or math.isinf(d_opt):
        return Float64Decision(d_ref, d_opt, None, False, "the re-stitched graph is not finite where the float64 "
                                                          "reference is")
    if d_ref >= D_REF_FLOOR:
        rho = d_opt / d_ref
        return Float64Decision(d_ref, d_opt, rho, rho <= RHO_LIMIT,
                               f"rho = d_opt/d_ref = {rho:.3g} {'<=' if rho <= RHO_LIMIT else '>'} {RHO_LIMIT:g}")
    relative = d_opt / max(r32_inf_norm, 1e-12)
    return Float64Decision(d_ref, d_opt, None, relative <= RELATIVE_LIMIT,
                           f"d_ref < {D_REF_FLOOR:g}: d_opt/||r32|| = {relative:.3g} "
                           f"{'<=' if relative <= RELATIVE_LIMIT else '>'} {RELATIVE_LIMIT:g}")


def _chunk_pairs(a: Any, b: Any) -> Any:
    """Matching chunks of two same-shaped tensors, the second brought to the first's device a chunk
    at a time (a float64 reference built on the host never moves to the GPU whole)."""
    from ..sandbox.guarded_buffers import chunks

    by_rows = a.stride() != b.stride() or a.is_contiguous() != b.is_contiguous()
    for x, y in zip(chunks(a.detach(), by_rows=by_rows), chunks(b.detach(), by_rows=by_rows), strict=True):
        yield x, (y if y.device == x.device else y.to(x.device))


def inf_norm_diff(a: Any, b: Any) -> float:
    """max |a - b| in float64, chunk by chunk; positions where both are NaN (or the same infinity)
    count as equal; a NaN on one side only makes the distance infinite."""
    import torch

    worst = 0.0
    for x, y in _chunk_pairs(a, b):
        x64, y64 = x.double(), y.double()
        same = (torch.isnan(x64) & torch.isnan(y64)) | (torch.isinf(x64) & (x64 == y64))
        diff = (x64 - y64).abs()
        diff = torch.where(same, torch.zeros_like(diff), diff)
        if diff.numel() == 0:
            continue
        if torch.isnan(diff).any():
            return math.inf
        worst = max(worst, float(diff.max()))
    return worst


def inf_norm(a: Any) -> float:
    import torch

    from ..sandbox.guarded_buffers import chunks

    worst = 0.0
    for piece in chunks(a.detach()):
        finite = piece.double()
        finite = finite[torch.isfinite(finite)]
        if finite.numel():
            worst = max(worst, float(finite.abs().max()))
    return worst


def all_close(a: Any, b: Any, tolerance: float) -> bool:
    """torch.allclose(b, a, atol=rtol=tolerance, equal_nan=True), chunk by chunk (exact for integers)."""
    import torch

    for x, y in _chunk_pairs(a, b):
        if x.is_floating_point():
            if not bool(torch.allclose(y, x, atol=tolerance, rtol=tolerance, equal_nan=True)):
                return False
        elif not bool(torch.equal(x, y)):
            return False
    return True


@dataclass
class SeedCheck:
    seed: int
    passed: bool
    max_abs_diff: float
    allclose: bool
    outputs: int
    fallback: Float64Decision | None = None
    problem: str | None = None
    notes: list[str] = field(default_factory=list)
    label: str | None = None  # the input set, when the inputs were not the graph's own random ones
    error_structure: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "label": self.label, "passed": self.passed, "max_abs_diff": self.max_abs_diff,
                "allclose": self.allclose, "outputs": self.outputs,
                "fallback": self.fallback.to_json() if self.fallback else None, "problem": self.problem,
                "notes": self.notes, "error_structure": self.error_structure}


def judge_structure(check: SeedCheck, baseline_out: Any, candidate_out: Any, reference_out: Any) -> SeedCheck:
    """Gate 3's error-structure check (:mod:`.error_structure`) against the float64 reference: the
    candidate's systematic bias and worst element, next to the original's own, per floating output."""
    from .error_structure import error_structure

    base, cand, ref = tensor_outputs(baseline_out), tensor_outputs(candidate_out), tensor_outputs(reference_out)
    if len(ref) != len(base) or len(cand) != len(base):
        check.notes.append("error structure not measured: the float64 reference returns other outputs")
        return check
    for index, (r32, o32, r64) in enumerate(zip(base, cand, ref, strict=True)):
        if not r32.is_floating_point() or r32.numel() == 0 or tuple(r64.shape) != tuple(r32.shape):
            continue
        rows = int(r32.shape[-1]) if r32.dim() else None
        from .kernel import device_chunk

        figures = error_structure(o32, r32, r64, row_length=rows, chunk=device_chunk(o32))
        check.error_structure.append({"output": index, **figures.to_json()})
        if not figures.passed and check.passed:
            check.passed = False
            check.problem = f"output {index}: {figures.reason}"
    return check


def tensor_outputs(out: Any) -> list[Any]:
    import torch

    items = out if isinstance(out, (tuple, list)) else [out]
    return [x for x in items if isinstance(x, torch.Tensor)]


def check_seed(seed: int, baseline_out: Any, candidate_out: Any, tolerance: float,
               reference: Any | None, inputs: Any, reference_error: str | None) -> SeedCheck:
    """One seed of gate 3: allclose, else the float64 fallback.

    ``inputs`` are the seed's inputs for the float64 reference, or a function that makes them
    again (so they need not stay alive while the graphs run).
    """

    base = tensor_outputs(baseline_out)
    cand = tensor_outputs(candidate_out)
    if len(base) != len(cand):
        return SeedCheck(seed, False, math.inf, False, len(base),
                         problem=f"the re-stitched graph returns {len(cand)} tensors, the baseline {len(base)}")
    worst = 0.0
    mismatched: list[int] = []
    for i, (r, o) in enumerate(zip(base, cand, strict=True)):
        if r.shape != o.shape or r.dtype != o.dtype:
            return SeedCheck(seed, False, math.inf, False, len(base),
                             problem=f"output {i} is {tuple(o.shape)} {o.dtype}, the baseline's {tuple(r.shape)} {r.dtype}")
        worst = max(worst, inf_norm_diff(r, o))
        if not all_close(r, o, tolerance):
            mismatched.append(i)
    if not mismatched:
        return SeedCheck(seed, True, worst, True, len(base))
    special = special_value_mismatches(base, cand, mismatched)
    if special is not None:
        swapped, described = special
        if swapped:  # NaN for +Inf, or an infinity's sign flipped: no float64 rule makes that right
            return SeedCheck(seed, False, worst, False, len(base),
                             problem=f"outputs {mismatched} differ in their special values: {described}")
        worst_text = described
    else:
        worst_text = f"max |diff| {worst:.3g}"
    if reference is None:
        return SeedCheck(seed, False, worst, False, len(base),
                         problem=f"outputs {mismatched} differ beyond atol=rtol={tolerance:g} ({worst_text}) "
                                 f"and no float64 reference is available: {reference_error}")
    try:
        r64_all = reference(inputs() if callable(inputs) else inputs)
    except Exception as exc:  # noqa: BLE001
        return SeedCheck(seed, False, worst, False, len(base),
                         problem=f"outputs {mismatched} differ beyond atol=rtol={tolerance:g} and the float64 "
                                 f"reference failed: {type(exc).__name__}: {exc}")
    r64_tensors = tensor_outputs(r64_all)
    if len(r64_tensors) != len(base):
        return SeedCheck(seed, False, worst, False, len(base),
                         problem=f"the float64 reference returns {len(r64_tensors)} tensors, the graph {len(base)}")
    decisions: list[Float64Decision] = []
    for i in mismatched:
        r32, o32, r64 = base[i], cand[i], r64_tensors[i]
        if not r32.is_floating_point():
            decisions.append(Float64Decision(0.0, math.inf, None, False, f"integer output {i} differs"))
            continue
        decisions.append(float64_decision(inf_norm_diff(r32, r64), inf_norm_diff(o32, r64), inf_norm(r32)))
    failing = [d for d in decisions if not d.passed]
    chosen = failing[0] if failing else max(decisions, key=lambda d: (d.rho or 0.0, d.d_opt))
    problem = None if not failing else (f"outputs {mismatched} differ beyond atol=rtol={tolerance:g} ({worst_text}); "
                                        f"float64 fallback: {chosen.rule}")
    return SeedCheck(seed, not failing, worst, False, len(base), fallback=chosen, problem=problem)


def special_value_mismatches(base: list[Any], cand: list[Any], outputs: list[int]) -> tuple[bool, str] | None:
    """Where the candidate's NaN/+Inf/-Inf differ from the baseline's, in words ("output 0: 1 is NaN where
    the baseline gives +Inf (first at index (1,))"), and whether one special value became another; None
    when the specials all match (the outputs differ in finite values only)."""
    from .kernel import KindMismatches, pairs

    parts, swapped = [], False
    for i in outputs:
        if not base[i].is_floating_point():
            continue
        kinds = KindMismatches()
        for r, o in pairs(base[i], cand[i]):
            kinds.add(o, r)
        if kinds.counts:
            swapped = swapped or kinds.count(lambda got, want: "finite" not in (got, want)) > 0
            words = kinds.describe(tuple(base[i].shape), lambda got, want: True).replace("the original", "the baseline")
            parts.append(f"output {i}: {words}")
    return (swapped, "; ".join(parts)) if parts else None


def clone_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
