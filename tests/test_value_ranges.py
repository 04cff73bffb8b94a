"""A min/max that can only pick one side is no decision; one that can pick either still needs evidence.

Problem 92's apply kernel (KernelBench level 2, the H100 dump of session 19) computes hardswish as
``maximum(tanh(x) + 3, 0)``. fast_math rewrites the tanh, which changes the min/max's text, and gate 2
then waited for ``tanh(x) + 3 < 0``, which no input gives (it called the 1.099x candidate "not
verified" on the H100). Interval bounds now prove such an order; anything the arithmetic alone does not
bound (a load, a shifted tanh, a non-NaN-propagating ``tl.maximum``) stays a decision.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.decisions import added_decisions, source_decisions
from kernelopt_core.gates.value_ranges import UNBOUNDED, always_ordered, value_range
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

DUMP = Path(__file__).parent / "fixtures" / "level2_h100" / "p92_output_code.txt"

KERNEL = '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math


@triton.jit
def kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask, other=0.0)
    tmp1 = TANH
    tmp2 = tl.full([1], 0.0, tl.float32)
    tmp3 = MINMAX(tmp1 + SHIFT, tmp2EXTRA)
    tl.store(out_ptr0 + xindex, tmp1 * tmp3, xmask)
'''
LIBDEVICE_TANH = "libdevice.tanh(tmp0)"
FAST_TANH = "(2.0 / (1.0 + tl_math.exp(-2.0 * (tmp0))) - 1.0)"


def kernel(tanh: str = FAST_TANH, minmax: str = "triton_helpers.maximum", shift: str = "3.0", extra: str = "") -> str:
    return KERNEL.replace("TANH", tanh).replace("MINMAX", minmax).replace("SHIFT", shift).replace("EXTRA", extra)


def min_max_decisions(source: str) -> list[str]:
    decisions = source_decisions(source)
    assert decisions is not None
    return [d.text for d in decisions.decisions if d.kind == "min/max"]


def test_fast_math_on_problem_92s_apply_kernel_adds_no_min_max() -> None:
    graph = parse_output_code(DUMP)
    apply = next(k for k in graph.kernels if "logsumexp" in k.name)
    module = parse_kernel_module(apply.source, apply.name)
    (variant,) = FAMILIES["fast_math"].variants(RewriteContext(module=module, original=module, device="cuda"))
    assert "libdevice.tanh" not in variant.source and "tl_math.exp(-2.0 *" in variant.source
    added = added_decisions(apply.source, variant.source)
    assert not [d for d in added.added if d.kind == "min/max"], [d.text for d in added.added]
    # what the rewrite does add (the exp's saturation, the division by 1 + exp) still needs evidence
    assert {d.kind for d in added.added} == {"division", "saturation"}
    # hardswish's clamp is no decision in the original either: tanh + 3 lies in [2, 4]
    assert min_max_decisions(apply.source) == []


def test_a_min_max_either_side_of_which_an_input_can_reach_stays_a_decision() -> None:
    assert min_max_decisions(kernel()) == []
    assert min_max_decisions(kernel(tanh=LIBDEVICE_TANH)) == []
    # tanh + 0.5 lies in [-0.5, 1.5]: below zero for some inputs, above for others
    assert min_max_decisions(kernel(shift="0.5")) == ["triton_helpers.maximum(tmp1 + 0.5, tmp2)"]
    # a loaded value is unbounded
    assert min_max_decisions(kernel(tanh="tmp0 * 1.0")) == ["triton_helpers.maximum(tmp1 + 3.0, tmp2)"]
    # tl.maximum gives the other argument for a NaN: a NaN input takes a path of its own
    assert min_max_decisions(kernel(minmax="tl.maximum")) == ["tl.maximum(tmp1 + 3.0, tmp2)"]
    assert min_max_decisions(kernel(minmax="tl.maximum", extra=", propagate_nan=tl.PropagateNan.ALL")) == []
    # what folding alone would misjudge: an int32 tensor product wraps (1e10 is 1,410,065,408 there, so this
    # shift is 0), a bfloat16 value rounds; neither is bounded, so both clamps stay decisions
    wrapped = "(tl.full([1], 100000, tl.int32) * 100000 - 1410065408).to(tl.float32)"
    assert min_max_decisions(kernel(shift=wrapped)) == [f"triton_helpers.maximum(tmp1 + {wrapped}, tmp2)"]
    narrow = "tl.full([1], 3.0, tl.bfloat16)"
    assert min_max_decisions(kernel(shift=narrow)) == [f"triton_helpers.maximum(tmp1 + {narrow}, tmp2)"]
    assert min_max_decisions(kernel(shift="tl.full([1], 3.0, tl.float32)")) == []
    # added to a candidate: a shifted clamp is a decision the candidate adds
    added = added_decisions(kernel(), kernel(shift="0.5"))
    assert [d.kind for d in added.added] == ["min/max"]


def _ranges_of(source: str) -> dict[str, tuple[float, float]]:
    from kernelopt_core.gates import decisions as module

    tree = ast.parse(source)
    facts = module.module_decisions(tree).facts[0]
    return {name: value_range(ast.Name(id=name), facts) for name in ("tmp0", "tmp1", "tmp3")}


def test_interval_bounds_are_outward_and_give_up_where_nothing_bounds() -> None:
    ranges = _ranges_of(kernel())
    assert ranges["tmp0"] == UNBOUNDED  # a load
    low, high = ranges["tmp1"]  # the exp-based tanh
    assert -1.05 < low <= -1.0 and 1.0 <= high < 1.05  # each step widened by bfloat16's roundoff
    assert _ranges_of(kernel(tanh="1.0 / tmp0"))["tmp1"] == UNBOUNDED  # a divisor that may be 0
    assert _ranges_of(kernel(tanh="tl_math.exp(tmp0) * 0.0"))["tmp1"] == UNBOUNDED  # inf * 0
    # past 60,000 a step may overflow (float16): the bound goes to infinity
    assert _ranges_of(kernel(tanh="tl.full([1], 1e20, tl.float32) * 1e20"))["tmp1"][1] == math.inf


def test_an_order_holds_only_by_a_margin_beyond_rounding() -> None:
    facts = source_decisions(kernel()).facts[0]  # type: ignore[union-attr]
    two, almost_two = ast.parse("2.0", mode="eval").body, ast.parse("1.99999999", mode="eval").body
    one = ast.parse("1.0", mode="eval").body
    assert always_ordered(two, one, facts) and always_ordered(one, two, facts)
    assert not always_ordered(two, almost_two, facts)
