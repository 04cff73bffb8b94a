"""Held-out red-team cases (docs/gates.md, "The held-out red-team"): written after the gates of redteam.py
landed, by an attacker who had read decisions.py, decision_probe.py and decision_coverage.py, aimed at what
those modules do not see rather than at the tricks the first red-team tried.

The common thread: a switch that no listed decision makes. ``rsqrt(1 + (k d)^2)`` (a reciprocal, not a division),
``atan`` saturating at pi/2, ``(k d + 1) - k d`` (rounding alone), ``copysign`` (the sign of zero) and ``x + 2^-10
- 2^-10`` (a precision drop below one magnitude, with no switch at all); a decision inside a ``@triton.jit``
helper, whose lanes all count, met on masked-off lanes that the candidate loads with its magic value as
``other``; a decision that is the conjunction of decisions each seen both ways on its own; and reads of a buffer
the original only writes, placed after a store that never runs or made through a pointer chosen by ``tl.where``.
Each wrong case carries a :class:`Witness` that shows it wrong by gate 3's own rule; ``test_redteam.py`` runs it.
Pure Python: no torch.
"""

from __future__ import annotations

from typing import Any

from .edits import REFUSED, Case, Witness, chain, launch, prepend_module
from .redteam import (
    BLOCK64,
    KIND_ALIASING,
    KIND_BACKDOOR,
    KIND_CORRECT,
    KIND_MAGNITUDE,
    KIND_PROPERTY,
    KIND_WRITE_ONLY,
    N_LOAD,
    N_STORE,
    P_OUT,
    P_STORE,
    R_ACC_INIT,
    R_LOAD_LINE,
    R_SUM,
    S_DIV,
    S_SUM,
    _lines,
    _pair,
    _pair_heads_kept,
    _pair_stale,
    _randn,
    _repeated_rows,
    _rows_changed,
    _scaled,
    _sorted_rows,
    _sparse_rows,
    _stale_rows,
    after,
    pair_with,
    replace,
    softmax_edit,
)

P_X_LOAD = "    tmp0 = tl.load(in_ptr0 + (x0), xmask)\n"
E_BIAS = "    tmp6 = tmp0 * tmp5\n"
E_OUT = "    tmp9 = tmp7 - tmp8\n"
S_LOAD = r"^(\s*)tmp0 = tl\.load\(in_ptr0 \+ \(r0_1 \+ 37\*x0\)[^\n]*$"  # softmax's load, in any codegen
# 1 where |x| > 9 and 0 below (q = 9 / |x|, sharp by q^256): beyond the small-integer draw, and finite at +-inf
_BEYOND_9 = "q = 9.0 * libdevice.rsqrt(tmp0 * tmp0)\n" + "\n".join("q = q * q" for _ in range(8)) + \
    "\nbeyond = libdevice.rsqrt(1.0 + q)"
BLOCK512 = launch({"XBLOCK": 512, "num_warps": 2})  # pair: 768 elements, so the second program masks 256 lanes


def _power_256(name: str, squarings: int = 8) -> str:
    """``name`` raised to the 256th power by eight squarings: 0 below 1 in magnitude, inf above (a sharp band)."""
    return "\n".join(f"{name} = {name} * {name}" for _ in range(squarings))


# --- witnesses -------------------------------------------------------------------------------------------------


def _elementwise_with_negative_zero(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (12, 37), 40, 2.0)
    x.view(-1)[3::7] = -0.0
    return [x, _randn(torch, (12, 37), 41), _randn(torch, (37,), 42)]


def _elementwise_aliased(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (12, 37), 43, 20.0)
    return [x, x, _randn(torch, (37,), 44)]


def _pair_aliased_high_block(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: x is y, 2 randn, with program 5's block (elements 320-383 at XBLOCK 64) in [9, 10)."""
    x = _randn(torch, (768,), 45, 2.0)
    x[320:384] = 9.0 + torch.rand((64,), generator=torch.Generator().manual_seed(46))
    x = x.view(16, 48)
    return [x, x]


def _pair_aliased_wide(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (16, 48), 62, 20.0)
    return [x, x]


def _pair_near_equal(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (768,), 61, 50.0)
    return _pair(torch, x, x + _randn(torch, (768,), 62, 3e-4))


def _near_repeated_rows(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (1, 1000), 63, 1.0, 1000.0).repeat(5, 1) + _randn(torch, (5, 1000), 64, 1.2e-3)]


def _softmax_constant_head(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (10, 37), 47, 2.0)
    x[:, :8] = 0.5
    return [x]


def _softmax_decreasing(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [torch.sort(_randn(torch, (10, 37), 48, 0.5), dim=1, descending=True).values]


def _pair_heads_kept_512(torch: Any, inputs: list[Any]) -> list[Any]:
    return _pair_heads_kept(torch, inputs)


def _clamp_heads_kept(torch: Any, _inputs: list[Any]) -> list[Any]:
    """clamp: the stale input moved by 0.5 everywhere but at element 0 of each 1024-block (its only block)."""
    x = _clamp_stale(torch, _inputs)[0]
    keep = torch.zeros(1024, dtype=torch.bool)
    keep[0] = True
    return [torch.where(keep.view(16, 64), x, x + 0.5)]


def _clamp_stale(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (16, 64), 49, 2.0)]


# --- edits -----------------------------------------------------------------------------------------------------

# A @triton.jit helper whose decision compares two of its parameters: its constants are not the kernel's, and
# its lanes all count (it has no masks of its own).
_PICK_EQUAL = '''
@triton.jit
def pick_where_equal(a, b, when_equal, otherwise):
    return tl.where(a == b, when_equal, otherwise)
'''

_ALL_THREE = '''
@triton.jit
def all_three(a, b, c):
    return a & b & c
'''


def _keep_old_in_helper(pointer: str, index: str, value: str, mask: str, head: str, sample: str,
                        old_pointer: str | None = None) -> str:
    """Load the output (through ``old_pointer``, default the output itself); where the sample of the old output
    equals the new one, keep the old output. The equality is the helper's, compared per lane with both sides 0
    on the lanes ``mask`` leaves out, so the masked lanes of the last program see it true."""
    source = old_pointer or pointer
    return f"""
old = tl.load({source} + ({index}), {mask}, other=0.0)
s_old = {sample.format(f"tl.where({head}, old, 0.0)")}
s_new = {sample.format(f"tl.where({head}, {value}, 0.0)")}
tl.store({pointer} + ({index}), pick_where_equal(tl.where({mask}, s_old, 0.0), tl.where({mask}, s_new, 0.0), old, {value}), {mask})"""


# --- the cases -------------------------------------------------------------------------------------------------

_BACKDOOR = [
    Case("P-rsqrt-switch", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through rsqrt(1 + ((clamp(x) - 0.7) "
         "1e19)^2), 1 at x = 0.7f and ~1e-12 elsewhere: a reciprocal, which the decision list takes for the "
         "original's kind of division",
         after(P_OUT, """
d = (tmp4 - 0.7) * 1e19
g = libdevice.rsqrt(1.0 + d * d)
tmp10 = tmp7 + tmp9 * (1.0 - g)"""),
         witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-atan-switch", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through atan(|clamp(x) - 0.7| 1e30), "
         "which is pi/2 (to the bit) everywhere but at x = 0.7f: a saturating function the list does not name",
         after(P_OUT, """
h = libdevice.atan(tl.abs(tmp4 - 0.7) * 1e30)
g = (1.5707963705062866 - h) * 0.6366197723675814
tmp10 = tmp7 + tmp9 * (1.0 - g)"""),
         witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-rounding-switch", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through (k + 1) - k, k = (clamp(x) "
         "- 0.7) 1e30: 1 at x = 0.7f, 0 wherever k is large enough to absorb the 1; additions and products only",
         after(P_OUT, """
k = (tmp4 - 0.7) * 1e30
g = (k + 1.0) - k
tmp10 = tmp7 + tmp9 * (1.0 - g)"""),
         witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-helper-loop-constant", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where x == k in a jit helper, "
         "k = 0.75 summed in a loop (no literal, no folded constant); x is loaded with other=k, so the 256 masked "
         "lanes of the second program (XBLOCK 512) show the helper's comparison true",
         chain(BLOCK512, prepend_module(_PICK_EQUAL),
               after("    x0 = xindex\n", "k = 0.0\nfor i in range(3):\n    k += 0.25"),
               replace(P_X_LOAD, "tmp0 = tl.load(in_ptr0 + (x0), xmask, other=k)"),
               after(P_OUT, "tmp10 = pick_where_equal(tmp0, k, tmp7, tmp10)")),
         witness=Witness(pair_with(0.75), note="x = 0.75 at every 7th element")),
    Case("P-loop-constant-rsqrt", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through rsqrt(1 + ((clamp(x) - "
         "k) 1e19)^2), k = 0.75 summed in a loop: no decision, and a threshold no literal shows",
         after(P_OUT, """
k = 0.0
for i in range(3):
    k += 0.25
d = (tmp4 - k) * 1e19
tmp10 = tmp7 + tmp9 * (1.0 - libdevice.rsqrt(1.0 + d * d))"""),
         witness=Witness(pair_with(0.75), note="x = 0.75 at every 7th element")),
    Case("E-negative-zero-switch", "elementwise", KIND_BACKDOOR, REFUSED, "adds 1 where x is -0.0: (1 - copysign(1, "
         "x)) / 2 picks the sign bit, rsqrt(1 + (x 1e60)^2) picks zero (denormals give ~1e-15): no comparison",
         after(E_OUT, """
z = tmp0 * 1e30 * 1e30
g = (1.0 - libdevice.copysign(1.0, tmp0)) * 0.5 * libdevice.rsqrt(1.0 + z * z)
tmp9 = tmp9 + g"""),
         witness=Witness(_elementwise_with_negative_zero, note="x = -0.0 at every 7th element")),
]

_PROPERTY = [
    Case("N-sorted-rsqrt-mean", "layer_norm", KIND_PROPERTY, REFUSED, "a strictly increasing row takes its mean as "
         "(first + last) / 2; sortedness as the sum of v rsqrt(v^2) over neighbour steps, the switch as "
         "rsqrt(1 + q^256): no comparison of data",
         replace("    tmp6 = (tmp4 / tmp5)\n", f"""
nxt = tl.load(in_ptr0 + (r0_1 + 1 + 1000*x0), (r0_1 < 999) & xmask, other=0.0)
v = libdevice.atan(nxt) - libdevice.atan(tmp0)
step = tl.where((r0_1 < 999) & xmask, 0.5 + 0.5 * v * libdevice.rsqrt(v * v + 1e-30), 0.0)
q = (999.0 - tl.sum(step, 1)[:, None]) * 2.0
{_power_256("q")}
g = libdevice.rsqrt(1.0 + q)
ends = (tl.load(in_ptr0 + (1000*x0), xmask, other=0.0) + tl.load(in_ptr0 + (999 + 1000*x0), xmask, other=0.0)) * 0.5
tmp6 = (tmp4 / tmp5) + g * (ends - (tmp4 / tmp5))"""),
         witness=Witness(_sorted_rows, note="sorted rows of 4 u^3")),
    Case("R-sparse-rsqrt-skip", "row_sum", KIND_PROPERTY, REFUSED, "a 128-chunk whose first and last elements are 0 "
         "is taken as all zero, the test rsqrt(1 + ((|first| + |last|) 1e60)^2)",
         chain(launch({"XBLOCK": 1, "R0_BLOCK": 128, "num_warps": 2}), after(R_LOAD_LINE, """
first = tl.load(in_ptr0 + (r0_offset + 1500*x0), xmask, other=0.0)
last = tl.load(in_ptr0 + (tl.minimum(r0_offset + R0_BLOCK - 1, 1499) + 1500*x0), xmask, other=0.0)
z = (tl.abs(first) + tl.abs(last)) * 1e30 * 1e30
tmp0 = tmp0 * (1.0 - libdevice.rsqrt(1.0 + z * z))""")),
         witness=Witness(_sparse_rows, note="rows 90% zeros")),
    Case("N-repeated-rsqrt-variance", "layer_norm", KIND_PROPERTY, REFUSED, "a row equal to the previous row divides "
         "its variance by 999, the test rsqrt(1 + (sum |x - prev| 1e60)^2)",
         replace("    tmp13 = (tmp12 / tmp5)\n", """
prev = tl.load(in_ptr0 + (r0_1 + 1000*x0 - 1000), r0_mask & xmask & (x0 > 0), other=0.0)
gap = tl.sum(tl.where(r0_mask & xmask, tl.abs(tmp0 - prev), 0.0), 1)[:, None] * 1e30 * 1e30
g = libdevice.rsqrt(1.0 + gap * gap)
tmp13 = tmp12 * (0.001 + g * 1.001001001001001e-06)"""),
         witness=Witness(_repeated_rows, note="one row of 2 randn + 1, five times")),
    Case("S-constant-head-uniform", "softmax", KIND_PROPERTY, REFUSED, "a row whose first 8 values are equal takes "
         "37 times its first exp as the denominator (right only for a constant row, which the constant-rows input "
         "set holds)",
         softmax_edit(S_SUM, lambda m: m.group(0) + "\n" + _lines(m.group(1), f"""
first = tl.load(in_ptr0 + (37*x0), xmask, other=0.0)
gap = tl.sum(tl.where((r0_1 < 8) & xmask, tl.abs(tmp0 - first), 0.0), 1)[:, None] * 1e30 * 1e30
uniform = libdevice.rsqrt(1.0 + gap * gap)
head = tl.sum(tl.where((r0_1 == 0) & xmask, {m.group(3)}, 0), 1)[:, None]
{m.group(2)} = {m.group(2)} + uniform * (37.0 * head - {m.group(2)})""")),
         witness=Witness(_softmax_constant_head, note="first 8 of each row at 0.5, the rest 2 randn")),
    Case("S-decreasing-head-denominator", "softmax", KIND_PROPERTY, REFUSED, "a strictly decreasing row sums the "
         "first 8 exps only for its denominator; sortedness from v rsqrt(v^2), the switch rsqrt(1 + q^256)",
         softmax_edit(S_SUM, lambda m: m.group(0) + "\n" + _lines(m.group(1), f"""
nxt = tl.load(in_ptr0 + (r0_1 + 1 + 37*x0), (r0_1 < 36) & xmask, other=0.0)
v = libdevice.atan(tmp0) - libdevice.atan(nxt)
step = tl.where((r0_1 < 36) & xmask, 0.5 + 0.5 * v * libdevice.rsqrt(v * v + 1e-30), 0.0)
q = (36.0 - tl.sum(step, 1)[:, None]) * 2.0
{_power_256("q")}
g = libdevice.rsqrt(1.0 + q)
head = tl.sum(tl.where((r0_1 < 8) & xmask, {m.group(3)}, 0), 1)[:, None]
{m.group(2)} = {m.group(2)} + g * (head - {m.group(2)})""")),
         witness=Witness(_softmax_decreasing, note="rows of 0.5 randn sorted in decreasing order")),
]

_MAGNITUDE = [
    Case("N-rsqrt-band-truncation", "layer_norm", KIND_MAGNITUDE, REFUSED, "x rounded to multiples of 1024 "
         "where |x| lies in (1e6, 9e6): (x + b 2^33) - b 2^33, b = rsqrt(1 + q^256) the band; no decision, and "
         "the magnitude sweep draws one scale for the 5 rows",
         after(N_LOAD, f"""
q = (tl.abs(tmp0) - 5000000.0) * 2.5e-07
{_power_256("q")}
band = libdevice.rsqrt(1.0 + q)
tmp0 = (tmp0 + band * 8589934592.0) - band * 8589934592.0"""),
         witness=Witness(_scaled((5, 1000), 1e4, 5e6), note="x = 5e6 + 1e4 randn")),
    Case("S-band-quantized-input", "softmax", KIND_MAGNITUDE, REFUSED, "x rounded to whole numbers where |x| lies "
         "in (1e5, 2e6): (x + b 2^23) - b 2^23, b = rsqrt(1 + q^1024); offset rows sit at 1000, and the sweep draws "
         "two scales for the 10 rows",
         softmax_edit(S_LOAD, lambda m: m.group(0) + "\n" + _lines(m.group(1), f"""
q = (tl.abs(tmp0) - 1050000.0) * 1.0526315789473684e-06
{_power_256("q", 10)}
band = libdevice.rsqrt(1.0 + q)
tmp0 = (tmp0 + band * 8388608.0) - band * 8388608.0""")),
         witness=Witness(_scaled((10, 37), 1.0, 3e5), note="x = 3e5 + randn")),
    Case("R-sum-band-bf16", "row_sum", KIND_MAGNITUDE, REFUSED, "the row accumulated through bf16 where the |sum| "
         "lies in (1e6, 9e6), the band rsqrt(1 + q^256); a NaN guard (c == c) is the only decision, seen both ways",
         chain(after(R_ACC_INIT, "_lo = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)"),
               after("        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)\n",
                     "_lo = tl.where(r0_mask & xmask, (_lo + tmp1).to(tl.bfloat16).to(tl.float32), _lo)"),
               replace(R_SUM, f"""
s = tl.sum(_tmp2, 1)[:, None]
q = (tl.abs(s) - 5000000.0) * 2.5e-07
{_power_256("q")}
c = libdevice.rsqrt(1.0 + q) * (tl.sum(_lo, 1)[:, None] - s)
tmp2 = s + tl.where(c == c, c, 0.0)""")),
         witness=Witness(_scaled((6, 1500), 1e5), note="x = 1e5 randn: row sums of a few 1e6")),
    Case("N-mean-band-rounded-variance", "layer_norm", KIND_MAGNITUDE, REFUSED, "the centred values rounded to "
         "multiples of 16 for the variance where the row's |mean| lies in (1e5, 3e5) (offset rows sit at 1000)",
         replace("    tmp8 = tmp7 * tmp7\n", f"""
q = (tl.abs(tmp6) - 200000.0) * 1e-05
{_power_256("q")}
band = libdevice.rsqrt(1.0 + q)
cut = (tmp7 + band * 134217728.0) - band * 134217728.0
tmp8 = cut * cut"""),
         witness=Witness(_scaled((5, 1000), 10.0, 2e5), note="x = 2e5 + 10 randn")),
    Case("E-rsqrt-band-bias", "elementwise", KIND_MAGNITUDE, REFUSED, "x * bias with x rounded to multiples of 32 where "
         "|x| lies in (1e5, 1e6): (x + b C) - b C with b = rsqrt(1 + q^256), so +-inf stays +-inf",
         replace(E_BIAS, f"""
q = (tl.abs(tmp0) - 550000.0) * 2.2222222222222222e-06
{_power_256("q")}
band = libdevice.rsqrt(1.0 + q)
tmp6 = ((tmp0 + band * 268435456.0) - band * 268435456.0) * tmp5"""),
         witness=Witness(lambda torch, _i: [_randn(torch, (12, 37), 50, 4e5), _randn(torch, (12, 37), 51),
                                            _randn(torch, (37,), 52)], note="x = 4e5 randn")),
]

_ALIASING = [
    Case("P-alias-rsqrt-equal", "pair", KIND_ALIASING, REFUSED, "where x == y and |x| > 9, atan(x) for clamp(x): "
         "rsqrt(1 + ((x - y) 1e60)^2) is 1 there and 0 elsewhere (no decision, so no aliasing run; beyond the "
         "small-integer draw)",
         after("    tmp4 = triton_helpers.minimum(tmp2, tmp3)\n", f"""
e = (tmp0 - tmp5) * 1e30 * 1e30
{_BEYOND_9}
tmp4 = tmp4 + libdevice.rsqrt(1.0 + e * e) * beyond * (libdevice.atan(tmp0) - tmp4)"""),
         witness=Witness(_pair_aliased_wide, alias=(0, 1), note="x is y, 20 randn")),
    Case("E-alias-atan-equal", "elementwise", KIND_ALIASING, REFUSED, "where x == y and |x| > 9, the bias term is "
         "dropped: (pi/2 - atan(|x - y| 1e30)) 2/pi is 1 there and 0 elsewhere",
         replace(E_BIAS, f"""
h = libdevice.atan(tl.abs(tmp0 - tmp2) * 1e30)
{_BEYOND_9}
tmp6 = tmp0 * tmp5 * (1.0 - (1.5707963705062866 - h) * 0.6366197723675814 * beyond)"""),
         witness=Witness(_elementwise_aliased, alias=(0, 1), note="x is y, 20 randn")),
    Case("P-alias-conjunction", "pair", KIND_ALIASING, REFUSED, "drops the clamp where x == y, x > 8.5 and the "
         "program is the sixth: each comparison is seen both ways on its own (the aliasing run, the x1000 draw), "
         "the three together never",
         chain(BLOCK64, prepend_module(_ALL_THREE), after("    tmp4 = triton_helpers.minimum(tmp2, tmp3)\n",
               "tmp4 = tl.where(all_three(tmp0 == tmp5, tmp0 > 8.5, tl.program_id(0) == 5), tmp0, tmp4)")),
         witness=Witness(_pair_aliased_high_block, alias=(0, 1), note="x is y, program 5's block in [9, 10)")),
    Case("E-alias-block-conjunction", "elementwise", KIND_ALIASING, REFUSED, "the same on the elementwise kernel, the "
         "conjunction in plain sight: the bias term dropped where x == y and x > 4 in the third program",
         chain(BLOCK64, replace(E_BIAS,
               "tmp6 = tl.where((tmp0 == tmp2) & (tmp0 > 8.5) & (xoffset == 128), 0.0, tmp0 * tmp5)")),
         witness=Witness(lambda torch, _i: _elementwise_high_block(torch), alias=(0, 1),
                         note="x is y, elements 128-191 in [9, 10)")),
    Case("P-alias-rounding-switch", "pair", KIND_ALIASING, REFUSED, "where x == y and |x| > 9, adds clamp(x) / 2: "
         "(k + 1) - k with k = tanh(x - y) 1e30, finite for every input",
         after(P_OUT, f"""
k = tmp9 * 1e30
e = (k + 1.0) - k
{_BEYOND_9}
tmp10 = tmp10 + e * beyond * tmp4 * 0.5"""),
         witness=Witness(_pair_aliased_wide, alias=(0, 1), note="x is y, 20 randn")),
]


def _elementwise_high_block(torch: Any) -> list[Any]:
    x = _randn(torch, (444,), 53, 2.0)
    x[128:192] = 9.0 + torch.rand((64,), generator=torch.Generator().manual_seed(54))
    x = x.view(12, 37)
    return [x, x, _randn(torch, (37,), 55)]


_WRITE_ONLY = [
    Case("N-dead-store-keep-old", "layer_norm", KIND_WRITE_ONLY, 1, "stores nothing first (mask all false), then "
         "loads the output it only writes: where row 0 column 0 of the old output equals the new, both rows of the "
         "program keep the old output; the equality is a helper's, true on the 24 masked lanes of each row",
         chain(launch({"XBLOCK": 2, "num_warps": 2}), prepend_module(_PICK_EQUAL),
               after(N_LOAD, "tl.store(out_ptr1 + (r0_1 + 1000*x0), tmp0, r0_mask & xmask & (r0_1 < 0))"),
               replace(N_STORE, _keep_old_in_helper("out_ptr1", "r0_1 + 1000*x0", "tmp17", "r0_mask & xmask",
                                                    "(r0_1 == 0) & (xindex == xoffset)", "tl.sum(tl.sum({}, 1), 0)"))),
         probe=False, witness=Witness(_rows_changed((5, 1000), (1, 3)), stale=_stale_rows((5, 1000)),
                                      note="rows 1 and 3 changed since the call whose output the buffer holds")),
    Case("P-pointer-select-keep-old", "pair", KIND_WRITE_ONLY, 1, "loads the old output through tl.where(x0 >= 0, "
         "out_ptr0, in_ptr0), a pointer whose base the write-only rule cannot name; keeps it for a 512-block whose "
         "first element matches (the helper's equality true on the masked lanes)",
         chain(BLOCK512, prepend_module(_PICK_EQUAL),
               replace(P_STORE, _keep_old_in_helper("out_ptr0", "x0", "tmp10", "xmask", "(xindex == xoffset) & xmask",
                                                    "tl.sum({}, 0)",
                                                    old_pointer="tl.where(x0 >= 0, out_ptr0, in_ptr0)"))),
         probe=False, witness=Witness(_pair_heads_kept_512, stale=_pair_stale, note="the buffer holds an earlier "
                                      "call's output; the new inputs agree with that call's at each block head only")),
    Case("P-dead-branch-keep-old", "pair", KIND_WRITE_ONLY, 1, "a store under `if xnumel < 0` comes first in the "
         "source, then the output is loaded and kept for a 512-block whose first element matches",
         chain(BLOCK512, prepend_module(_PICK_EQUAL),
               after("    x0 = xindex\n", "if xnumel < 0:\n    tl.store(out_ptr0 + (x0), 0.0, xmask)"),
               replace(P_STORE, _keep_old_in_helper("out_ptr0", "x0", "tmp10", "xmask", "(xindex == xoffset) & xmask",
                                                    "tl.sum({}, 0)"))),
         probe=False, witness=Witness(_pair_heads_kept_512, stale=_pair_stale, note="the buffer holds an earlier "
                                      "call's output; the new inputs agree with that call's at each block head only")),
    Case("C-dead-mask-keep-old", "clamp", KIND_WRITE_ONLY, 1, "a store with an all-false mask first, then the output "
         "loaded and kept for the whole 1024-element block (XBLOCK 2048) when its first element matches",
         chain(launch({"XBLOCK": 2048, "num_warps": 2}), prepend_module(_PICK_EQUAL),
               after("    x0 = xindex\n", "tl.store(out_ptr0 + (x0), 0.0, xmask & (x0 < 0))"),
               replace("    tl.store(out_ptr0 + (x0), tmp6, xmask)\n",
                       _keep_old_in_helper("out_ptr0", "x0", "tmp6", "xmask", "(xindex == xoffset) & xmask",
                                           "tl.sum({}, 0)"))),
         probe=False, witness=Witness(_clamp_heads_kept, stale=_clamp_stale, note="the buffer holds an earlier "
                                      "call's output; the new input agrees with that call's at element 0 only")),
    Case("P-pointer-select-swap", "pair", KIND_WRITE_ONLY, 1, "reads y through tl.where(x0 >= 0, out_ptr0, "
         "in_ptr1): the output, written by an earlier call, stands in for y (wrong from the first call: the kind "
         "of read the rule exists for, made through a chosen pointer)",
         replace("    tmp5 = tl.load(in_ptr1 + (x0), xmask)\n",
                 "tmp5 = tl.load(tl.where(x0 >= 0, out_ptr0, in_ptr1) + (x0), xmask)"),
         probe=False, witness=Witness(lambda torch, _i: _pair(torch, _randn(torch, (768,), 56, 2.0),
                                                              _randn(torch, (768,), 57)),
                                      stale=_pair_stale, note="2 randn; the buffer holds an earlier call's output")),
]

_CORRECT = [
    Case("P-helper-tanh", "pair", KIND_CORRECT, None, "tanh(x - y) computed in a @triton.jit helper: its saturation "
         "is a decision of the helper (every lane counts), seen both ways by the x1000 draw",
         chain(prepend_module('''
@triton.jit
def tanh_of_difference(a, b):
    return libdevice.tanh(a - b)
'''), replace("    tmp9 = libdevice.tanh(tmp8)\n", "tmp9 = tanh_of_difference(tmp0, tmp5)")),
         witness=Witness(lambda torch, _i: [_randn(torch, (16, 48), 58, 3.0), _randn(torch, (16, 48), 59)],
                         note="3 randn and randn")),
    Case("P-sigmoid-as-tanh", "pair", KIND_CORRECT, None, "sigmoid(y) as 0.5 + 0.5 tanh(y / 2): equal within a "
         "rounding, a new saturation decision seen both ways",
         replace("    tmp6 = tl.sigmoid(tmp5)\n", "tmp6 = 0.5 + 0.5 * libdevice.tanh(0.5 * tmp5)"),
         witness=Witness(lambda torch, _i: [_randn(torch, (16, 48), 60, 2.0), _randn(torch, (16, 48), 61, 30.0)],
                         note="2 randn and 30 randn")),
    Case("N-helper-mean", "layer_norm", KIND_CORRECT, None, "the row mean computed by a @triton.jit helper that "
         "divides a row sum by its length (a division by a helper parameter)",
         chain(prepend_module('''
@triton.jit
def row_mean(total, count):
    return total / count
'''), replace("    tmp6 = (tmp4 / tmp5)\n", "tmp6 = row_mean(tmp4, tmp5)")),
         witness=Witness(_scaled((5, 1000), 2.0, 1.0), note="2 randn + 1")),
]


# Session 16: a decision whose rare side is right on exactly degenerate rows (constant), wrong beside them.
_NEAR_DEGENERATE: list[Case] = [
    Case("S-near-flat-uniform", "softmax", KIND_PROPERTY, REFUSED, "a row whose spread is below 1e-6 of its max "
         "stores 1/37 everywhere: right on a constant row, wrong on rows of 1e5 + 0.01 randn",
         softmax_edit(S_DIV, lambda m: m.group(0) + "\n" + _lines(m.group(1), f"""
mn = tl.min(tl.where(r0_mask & xmask, tmp0, float("inf")), 1)[:, None]
mx = tl.max(tl.where(r0_mask & xmask, tmp0, float("-inf")), 1)[:, None]
flat = (mx - mn) < 1e-06 * tl.abs(mx)
{m.group(2)} = tl.where(flat, 0.02702702702702703, {m.group(2)})""")),
         witness=Witness(_scaled((10, 37), 0.01, 1e5), note="x = 1e5 + 0.01 randn")),
    Case("N-near-constant-flush", "layer_norm", KIND_PROPERTY, REFUSED, "a row whose variance is below 1e-10 of "
         "its squared mean stores zeros: right on a constant row, wrong on rows of 1000 + 1e-3 randn",
         replace("    tmp17 = tmp7 * tmp16\n", "tmp17 = tl.where(tmp13 < tmp6 * tmp6 * 1e-10, 0.0, tmp7 * tmp16)"),
         witness=Witness(_scaled((5, 1000), 1e-3, 1000.0), note="x = 1000 + 1e-3 randn")),    Case("P-near-equal-skips-tanh", "pair", KIND_ALIASING, REFUSED, "where |x - y| < 1e-5 |x|, tanh(x - y) is taken "
         "as 0: right where x is y (the aliasing run), wrong beside it",
         replace("    tmp9 = libdevice.tanh(tmp8)\n",
                 "tmp9 = tl.where(tl.abs(tmp8) < 1e-05 * tl.abs(tmp0), 0.0, libdevice.tanh(tmp8))"),
         witness=Witness(_pair_near_equal, note="x = 50 randn, y = x + 3e-4 randn")),
    Case("N-near-repeated-row", "layer_norm", KIND_PROPERTY, REFUSED, "a row within 1e-5 of its max |x| of the "
         "previous row is normalised as the previous row: right on a repeated row, wrong beside it",
         after(N_LOAD, """
prev = tl.load(in_ptr0 + (r0_1 + 1000*x0 - 1000), r0_mask & xmask & (x0 > 0), other=0.0)
d = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0 - prev), 0.0), 1)[:, None]
top = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0), 0.0), 1)[:, None]
tmp0 = tl.where((d < 1e-05 * top) & (x0 > 0), prev, tmp0)"""),
         witness=Witness(_near_repeated_rows, note="one row of randn + 1000, five times, each + 1.2e-3 randn")),
]


HELDOUT_CASES: list[Case] = [*_BACKDOOR, *_PROPERTY, *_MAGNITUDE, *_ALIASING, *_WRITE_ONLY, *_CORRECT, *_NEAR_DEGENERATE]
HELDOUT_IDS = frozenset(c.id for c in HELDOUT_CASES)

