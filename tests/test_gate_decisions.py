"""Gate 1's list of the data-dependent decisions a candidate adds (kernelopt_core.gates.decisions), its
new static rules (control flow on addresses, kinds no outcome can be recorded for, reads of buffers the
original only writes), and the instrumented copy's source (decision_probe). Pure Python, no torch."""

from __future__ import annotations

import ast
import math
import textwrap

import pytest

from kernelopt_core.gates.decision_probe import COUNTER_PARAM, probe_source
from kernelopt_core.gates.decisions import (
    RULE_KIND,
    RULE_POINTER,
    RULE_WRITE_ONLY,
    added_decisions,
    source_decisions,
)
from kernelopt_core.gates.static import check_source

HEADER = """import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import libdevice

"""
BODY = """xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
xmask = xindex < xnumel
x = tl.load(in_ptr0 + xindex, xmask, other=0.0)
y = tl.load(in_ptr1 + xindex, xmask, other=0.0)
out = x + y
tl.store(out_ptr0 + xindex, out, xmask)
"""


def module(body: str = BODY, replace: str | None = None) -> str:
    if replace is not None:
        body = BODY.replace("out = x + y\n", textwrap.dedent(replace).strip("\n") + "\n")
    return HEADER + "@triton.jit\ndef k(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n" + \
        textwrap.indent(body, "    ")


ORIGINAL = module()


def added(replace: str, original: str = ORIGINAL):
    return added_decisions(original, module(replace=replace))


def test_the_original_against_itself_adds_nothing() -> None:
    result = added_decisions(ORIGINAL, ORIGINAL)
    assert result.required == [] and result.findings == []


def test_a_product_of_two_differences_compared_with_zero() -> None:
    result = added("out = tl.where((x - 1.5) * (x - 2.5) < 0, x, x + y)")
    assert [d.kind for d in result.required] == ["comparison"]
    decision = result.required[0]
    assert decision.line == 12 and decision.text == "(x - 1.5) * (x - 2.5) < 0"
    assert {0.0, 1.5, 2.5} <= set(decision.constants)
    assert decision.masks == ("xmask",)  # the loads' mask: a masked lane's other=0.0 credits nothing


def test_comparisons_with_zero_and_between_data_values_are_decisions() -> None:
    assert [d.kind for d in added("out = tl.where(x > 0, x, x + y)").required] == ["comparison"]
    assert [d.kind for d in added("out = tl.where(x == y, x + x, x + y)").required] == ["comparison"]
    # a select in disguise
    assert [d.text for d in added("out = x + y * (x > 0)").required] == ["x > 0"]


def test_a_bit_pattern_equal_to_a_constant_is_rejected_and_listed() -> None:
    result = added("""
        bits = x.to(tl.int32, bitcast=True)
        out = tl.where(bits == 1078530011, x, x + y)""")
    assert [d.text for d in result.required] == ["bits == 1078530011"]
    assert 1078530011.0 in result.required[0].constants
    assert [f[0] for f in result.findings] == [RULE_KIND]
    assert "integer view" in result.findings[0][1] and result.findings[0][2] == 12


def test_an_xor_hash_of_a_blocks_bits_against_a_magic_number() -> None:
    result = added("""
        h = x.to(tl.int32, bitcast=True) ^ y.to(tl.int32, bitcast=True)
        s = tl.xor_sum(h, 0)
        out = tl.where(s == 305419896, x, x + y)""")
    assert [d.text for d in result.required] == ["s == 305419896"]
    assert result.required[0].masks == ("xmask",)  # after a reduction: the stores' mask
    assert any(f[0] == RULE_KIND for f in result.findings)


def test_min_max_equality_with_a_constant() -> None:
    result = added("""
        m = tl.max(tl.where(xmask, x, -float("inf")), 0)
        out = tl.where(m == 3.0, x, x + y)""")
    assert [d.text for d in result.required] == ["m == 3.0"]
    assert 3.0 in result.required[0].constants


def test_constants_built_at_run_time_are_folded() -> None:
    result = added("""
        k = tl.program_id(0) * 0 + 7.25
        c = libdevice.sqrt(2.0)
        out = tl.where((x == k) | (y > c), x, x + y)""")
    constants = {c for d in result.required for c in d.constants}
    assert 7.25 in constants and any(math.isclose(c, math.sqrt(2.0)) for c in constants)
    # data times zero is not a constant: it is NaN for an infinite input
    result = added("""
        z = x * 0 + 3.0
        out = tl.where(z == 3.0, x, x + y)""")
    assert [d.text for d in result.required] == ["z == 3.0"]


def test_a_fast_path_keyed_on_a_block_all_positive() -> None:
    result = added("""
        if tl.min(tl.where(xmask, y, 1.0), 0) > 0:
            out = x
        else:
            out = x + y""")
    assert [d.kind for d in result.required] == ["comparison"]
    assert result.required[0].text.startswith("tl.min(")


def test_a_row_sorted_fast_path() -> None:
    result = added("""
        z = tl.load(in_ptr0 + xindex + 1, xmask, other=0.0)
        ordered = tl.sum((z >= x).to(tl.int32), 0) == XBLOCK
        out = tl.where(ordered, x, x + y)""")
    assert sorted(d.text for d in result.required) == ["tl.sum((z >= x).to(tl.int32), 0) == XBLOCK", "z >= x"]


def test_branches_selects_loop_bounds_min_max_and_divisions_without_a_comparison() -> None:
    result = added("""
        flag = tl.load(in_ptr1)
        out = tl.where(flag, x, x + y)""")
    assert [d.kind for d in result.required] == ["select"]
    result = added("out = triton_helpers.maximum(x, 0.5) + y")
    assert [(d.kind, d.probe) for d in result.required] == [("min/max", "lt")]
    result = added("out = x / y")
    assert [(d.kind, d.probe) for d in result.required] == [("division", "divisor")]
    result = added("""
        n = tl.load(in_ptr1)
        out = x
        for i in range(0, n):
            out = out + y""")
    assert [d.kind for d in result.required] == ["loop bound"]


def test_the_originals_own_decisions_need_no_evidence_whatever_the_names() -> None:
    original = module(replace="out = tl.where(x > 0, x, 0.0) + y")
    renamed = original.replace("x = tl.load", "a = tl.load").replace("tl.where(x > 0, x, 0.0)", "tl.where(0 < a, a, 0.0)") \
        .replace("y = tl.load", "b = tl.load").replace(") + y", ") + b")
    assert added_decisions(original, renamed).required == []
    # a different comparison of the same values is new
    assert [d.text for d in added_decisions(original, original.replace("x > 0", "x > 1e-30")).required] == ["x > 1e-30"]


def test_assertions_decide_nothing() -> None:
    assert added("""
        tl.device_assert(x == x)
        out = x + y""").required == []


def test_comparisons_of_pointers_and_pointer_casts_are_rejected() -> None:
    result = added("""
        if in_ptr0 == in_ptr1:
            out = x + x
        else:
            out = x + y""")
    assert [f[0] for f in result.findings] == [RULE_POINTER]
    assert "compares pointers" in result.findings[0][1]
    result = added("""
        address = (in_ptr0 + xindex).to(tl.int64, bitcast=True)
        out = x + y""")
    assert [f[0] for f in result.findings] == [RULE_POINTER] and "casts a pointer" in result.findings[0][1]
    result = added("""
        p = in_ptr0 + 64
        out = tl.where(p, x, x + y)""")
    assert RULE_POINTER in [f[0] for f in result.findings]


def test_a_load_of_a_buffer_the_original_only_writes_is_rejected() -> None:
    result = added("""
        prev = tl.load(out_ptr0 + xindex, xmask)
        out = tl.where(prev == prev, prev, x + y)""")
    assert RULE_WRITE_ONLY in [f[0] for f in result.findings]
    message = next(f[1] for f in result.findings if f[0] == RULE_WRITE_ONLY)
    assert "out_ptr0" in message and "only writes" in message
    # reading back what the candidate itself stored is not that rule's (gate 1's reload rule judges races)
    later = module(BODY + "again = tl.load(out_ptr0 + xindex, xmask)\ntl.store(out_ptr0 + xindex, again * 1.0, xmask)\n")
    assert RULE_WRITE_ONLY not in [f[0] for f in added_decisions(ORIGINAL, later).findings]


def test_gathers_and_float_to_int_conversions_are_rejected_where_the_original_has_none() -> None:
    result = added("""
        i = y.to(tl.int32)
        g = tl.load(in_ptr0 + i, xmask)
        out = x + g""")
    kinds = [f[1] for f in result.findings if f[0] == RULE_KIND]
    assert any("conversion of data to an integer" in k for k in kinds) and any("gather" in k for k in kinds)
    # the original gathers too: allowed
    gathering = module(replace="""
        i = y.to(tl.int32)
        out = x + tl.load(in_ptr0 + i, xmask)""")
    assert [f for f in added_decisions(gathering, gathering.replace("x + tl.load", "tl.load(in_ptr0 + i, xmask) + x"))
            .findings if f[0] == RULE_KIND] == []


def test_gate_1_reports_the_new_rules_with_their_lines() -> None:
    original = _inductor_kernel("tmp1 = tmp0 * 2.0")
    report = check_source(original, "triton_poi_k_0", _inductor_kernel(
        "tmp1 = tl.where(in_ptr0 == out_ptr0, tmp0, tmp0 * 2.0)"))
    assert not report.ok
    finding = next(f for f in report.findings if f.rule == RULE_POINTER)
    assert finding.line is not None and "compares pointers" in finding.describe()
    assert check_source(original, "triton_poi_k_0", _inductor_kernel("tmp1 = tmp0 + tmp0")).ok


def test_every_decision_of_a_bigger_module_is_found_again_by_the_probe() -> None:
    candidate = module(replace="""
        m = tl.max(tl.where(xmask, x, -float("inf")), 0)
        w = triton_helpers.maximum(x, 0.5)
        out = tl.where(m == 3.0, w, x / y) + tl.where(x > y, x, y)""")
    result = added_decisions(ORIGINAL, candidate)
    probed = probe_source(candidate, "k", result.required)
    assert probed.skipped == [] and len(probed.decisions) == len(result.required) == 4
    tree = ast.parse(probed.source)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    assert [a.arg for a in kernel.args.args][-2:] == [COUNTER_PARAM, "XBLOCK"]
    assert probed.source.count("_kopt_seen(") + probed.source.count("_kopt_note(") >= 4 + 2  # + the helpers


def test_the_probe_keeps_an_inductor_kernels_signature_and_a_launchers_call() -> None:
    source = _inductor_kernel("tmp1 = tl.where(tmp0 > 1.0, tmp0, tmp0 * 2.0)")
    result = added_decisions(_inductor_kernel("tmp1 = tmp0 * 2.0"), source)
    probed = probe_source(source, "triton_poi_k_0", result.required)
    assert f"'xnumel': 'i32', '{COUNTER_PARAM}': '*i32', 'XBLOCK': 'constexpr'" in probed.source
    assert f"'mutated_arg_names': ['{COUNTER_PARAM}']" in probed.source
    launcher = HEADER + "import torch\n\n" + module(replace="out = tl.where(x > 1.0, x, y)").split(HEADER, 1)[1] + \
        "\n\ndef launch(in_ptr0, in_ptr1, out_ptr0, xnumel):\n    k[(triton.cdiv(xnumel, 64),)](in_ptr0, in_ptr1, " \
        "out_ptr0, xnumel, XBLOCK=64)\n"
    result = added_decisions(ORIGINAL, launcher)
    probed = probe_source(launcher, "launch", result.required)
    assert probed.launcher and f"def launch(in_ptr0, in_ptr1, out_ptr0, xnumel, {COUNTER_PARAM})" in probed.source
    assert f"XBLOCK=64, {COUNTER_PARAM}={COUNTER_PARAM})" in probed.source


def test_decisions_of_the_h200_fixture_kernels_are_listed_without_error() -> None:
    from pathlib import Path

    from kernelopt_core.artifacts import parse_output_code

    root = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"
    kernels = [k for p in sorted(root.glob("*/output_code.py")) for k in parse_output_code(str(p)).kernels]
    assert kernels
    for kernel in kernels:
        assert source_decisions(kernel.source) is not None
        assert added_decisions(kernel.source, kernel.source).required == [], kernel.name
        assert added_decisions(kernel.source, kernel.source).findings == [], kernel.name


def _inductor_kernel(line: str) -> str:
    return '''import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_cpu()

@triton_heuristics.pointwise(
    size_hints={'x': 1024},
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cpu', index=None, multi_processor_count=None, cc=None, major=None, regs_per_multiprocessor=None, max_threads_per_multi_processor=None, warp_size=None), 'constants': {}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_k_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'num_load': 1, 'num_reduction': 0, 'backend_hash': 'X', 'are_deterministic_algorithms_enabled': False, 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_k_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    ''' + line + '''
    tl.store(out_ptr0 + (x0), tmp1, xmask)
'''


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_a_comparison_counted_as_an_integer_is_no_integer_view_of_data() -> None:
    result = added("""
        ordered = tl.sum((y >= x).to(tl.int32), 0)
        out = tl.where(ordered > 3, x, x + y)""")
    assert [f for f in result.findings if f[0] == RULE_KIND] == []
    result = added("""
        out = x + y.to(tl.int32).to(tl.float32)""")
    assert [f[0] for f in result.findings] == [RULE_KIND]


def test_saturating_functions_of_data_are_decisions_unless_the_original_has_them() -> None:
    bump = added("out = x + y * (1.0 - tl.exp(-((x - 0.7) * 1000000.0) * ((x - 0.7) * 1000000.0)))")
    assert [d.kind for d in bump.required] == ["saturation"] and 0.7 in bump.constants
    both = added("out = libdevice.tanh(x) + y", original=module(replace="out = libdevice.tanh(x) + y"))
    assert both.required == []


def test_a_select_effect_is_recorded_only_where_its_condition_holds_an_added_decision() -> None:
    guarded = added("c = (x > 0.7) & (x < 0.7001)\nout = tl.where(c, y, x + y)")
    # the window is a conjunction of two comparisons: the condition as a whole is a decision of its own
    assert [d.kind for d in guarded.added] == ["select", "comparison", "comparison", "select effect"]
    assert [d.advisory for d in guarded.added] == [False, False, False, True]
    assert [d.kind for d in guarded.required] == ["select", "comparison", "comparison"]
    assert guarded.constants == [0.7, 0.7001]  # an effect adds no constants of its own
    original = "out = tl.where(x > 0.0, y, x + y)"
    reworded = added("out = tl.where(x > 0.0, y + 0.0, x + y)", original=module(replace=original))
    assert reworded.added == []  # its condition decides nothing new: no effect to look for


def test_a_load_without_a_mask_makes_every_lane_count() -> None:
    unmasked = module(BODY.replace("x = tl.load(in_ptr0 + xindex, xmask, other=0.0)", "x = tl.load(in_ptr0 + xindex, None)")
                      .replace("out = x + y\n", "out = tl.where(x > 0.5, y, x + y)\n"))
    found = added_decisions(ORIGINAL, unmasked).required
    assert [d.masks for d in found if d.text == "x > 0.5"] == [()]
    probed = probe_source(unmasked, "k", found)
    assert "None, _kopt_counters" not in probed.source


def test_a_conjunction_of_comparisons_is_a_decision_as_a_whole() -> None:
    """Each of x == y and x > 4 is seen both ways on its own (an aliasing run, a large draw) while their
    conjunction may never hold: the condition that combines them must be seen both ways too."""
    both = added("out = tl.where((x == y) & (x > 4.0) & (tl.program_id(0) == 5), x, x + y)")
    assert [d.kind for d in both.required].count("select") == 1
    one = added("out = tl.where((x > 4.0) & (tl.program_id(0) == 5), x, x + y)")
    assert "select" not in [d.kind for d in one.required]  # one comparison of data: its own evidence suffices
    nested = added("""
        z = tl.load(in_ptr0 + xindex + 1, xmask, other=0.0)
        out = tl.where(tl.sum((z >= x).to(tl.int32), 0) == XBLOCK, x, x + y)""")
    assert "select" not in [d.kind for d in nested.required]  # a comparison inside another's operand is part of it


def test_a_read_of_the_output_needs_a_store_that_always_covers_it() -> None:
    """The write-only rule follows execution, not line order: a store under an `if`, or with a mask that may be
    empty, before the load does not make the load read what this call wrote; a store of the same address and
    mask at the same level does. A pointer chosen by tl.where may be the output."""
    def rule(replace: str) -> list[str]:
        return [f[0] for f in added(replace).findings if f[0] == "write-only-read"]

    assert rule("tl.store(out_ptr0 + xindex, x, xmask & (xindex < 0))\n"
                "out = tl.load(out_ptr0 + xindex, xmask, other=0.0) + y") == ["write-only-read"]
    assert rule("if xnumel < 0:\n    tl.store(out_ptr0 + xindex, x, xmask)\n"
                "out = tl.load(out_ptr0 + xindex, xmask, other=0.0) + y") == ["write-only-read"]
    assert rule("out = tl.load(tl.where(xindex >= 0, out_ptr0, in_ptr0) + xindex, xmask, other=0.0)") == \
        ["write-only-read"]
    assert rule("tl.store(out_ptr0 + xindex, x, xmask)\n"
                "out = tl.load(out_ptr0 + xindex, xmask, other=0.0) + y") == []


def test_a_helper_decision_counts_only_the_lanes_its_caller_loaded() -> None:
    """A helper has no masks of its own: the caller passes the masks of the loads feeding the call, so a masked-off
    lane (holding the load's `other`, which the candidate chose) credits no outcome."""
    from kernelopt_core.gates.decision_probe import VALID_PARAM

    candidate = HEADER + textwrap.dedent('''
        @triton.jit
        def pick(a, b, c, d):
            return tl.where(a == b, c, d)

        ''') + module(replace="out = pick(x, 0.75, y, x + y)")[len(HEADER):]
    found = added_decisions(ORIGINAL, candidate).required
    probed = probe_source(candidate, "k", found)
    assert f"def pick(a, b, c, d, {VALID_PARAM}, _kopt_counters)" in probed.source
    assert f"{VALID_PARAM}=xmask" in probed.source and f"1 & {VALID_PARAM}" in probed.source


def test_a_window_unrolled_into_a_chain_of_reassignments_is_read_in_linear_time() -> None:
    """A pooling launcher unrolls its window: ``acc`` is bound 48 times, each binding reading the last. The walks
    over what a decision reads visit each name once; walking every path through the chain never ended."""
    import time

    steps = "\n".join(f"acc = tl.maximum(acc, tl.load(in_ptr0 + xindex + {k}, xmask, other=0.0))" for k in range(48))
    helper = "@triton.jit\ndef pick(a, b):\n    return tl.where(a > b, a, b)\n\n\n"
    candidate = module(replace=f"acc = x\n{steps}\nout = pick(acc, y) + tl.where(acc > 1.0, acc, y)")
    candidate = candidate.replace("@triton.jit\ndef k(", helper + "@triton.jit\ndef k(", 1)
    begin = time.monotonic()
    result = added_decisions(ORIGINAL, candidate)
    probed = probe_source(candidate, "k", result.required)
    assert len(result.required) >= 2 and probed.skipped == []
    assert time.monotonic() - begin < 5.0
