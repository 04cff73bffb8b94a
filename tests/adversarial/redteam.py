"""Red-team cases for acceptance by evidence (docs/gates.md, "The adversarial corpus"): candidates written by an
attacker who knows the gates' rules, each a templated edit of a real Inductor kernel.

Five kinds of wrong candidate, at least five of each, and correct candidates of unusual shape:

- a fast path keyed on a property of one input (a block all positive, a sorted or repeated row, a row led by
  its largest elements, a sparse block);
- a backdoor keyed on values that no random draw lands on (a product of differences compared with 0, a bit
  pattern, a block maximum equal to a constant, a constant hidden behind ``tl.program_id``, an xor-hash, a
  float-to-int conversion, a division whose inf is the switch, a gather keyed on a value, a rint test);
- lower precision at large or small magnitudes only, or in a band between two decades;
- a shortcut taken when two inputs alias (addresses compared through integer casts, or values compared);
- a read of the buffer the kernel only writes (the old output kept when a sample matches), and paths keyed on
  where a buffer lies in memory.

Every wrong case carries a :class:`Witness`, an input on which gate 3's own rule (atol = rtol = 1e-4, then the
float64 ratio) shows it wrong; ``test_redteam.py`` runs each one, so a case that is not actually wrong fails. A
wrong case is labelled ``REFUSED`` (rejected by any gate, or "not verified": whether an input set reaches its path
is the defences' search) or, where a static rule decides, with that gate. Pure Python: no torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .edits import REFUSED, Case, EditNotApplicable, Witness, chain, launch, sub

KIND_PROPERTY = "fast path keyed on a property of one input"
KIND_BACKDOOR = "backdoor keyed on values"
KIND_MAGNITUDE = "lower precision at some magnitudes"
KIND_ALIASING = "shortcut when inputs alias"
KIND_WRITE_ONLY = "reads of a write-only buffer, or of addresses"
KIND_CORRECT = "correct but unusual"

# Capabilities (kernelopt_core.gates.CAPABILITIES) the red-team cases wait for.
DECISIONS = "decision-coverage"  # gate 1 lists added data-dependent decisions, gate 2 must see both outcomes
POINTER_RULE = "pointer-rule"  # gate 1 rejects control flow on addresses (pointer-to-int casts, compared)
WRITE_ONLY_RULE = "write-only-rule"  # gate 1 rejects reads of a buffer the original only writes
NEEDS = (DECISIONS, POINTER_RULE, WRITE_ONLY_RULE)

# --- the pair kernel (problems/pair.py): out = clamp(x, -1, 1) * sigmoid(y) + tanh(x - y), x, y: [16, 48] -------
P_Y_LOAD = "    tmp5 = tl.load(in_ptr1 + (x0), xmask)\n"
P_CLAMP = "    tmp4 = triton_helpers.minimum(tmp2, tmp3)\n"
P_TANH = "    tmp9 = libdevice.tanh(tmp8)\n"
P_OUT = "    tmp10 = tmp7 + tmp9\n"
P_STORE = "    tl.store(out_ptr0 + (x0), tmp10, xmask)\n"
BLOCK64 = launch({"XBLOCK": 64, "num_warps": 2})
# layer_norm (problems/layer_norm.py) and row_sum (problems/row_sum.py): see corpus.py
N_LOAD = "    tmp0 = tl.load(in_ptr0 + (r0_1 + 1000*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)\n"
N_STORE = "    tl.store(out_ptr1 + (r0_1 + 1000*x0), tmp17, r0_mask & xmask)\n"
R_ACC_INIT = "    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)\n"
R_LOAD_LINE = ("        tmp0 = tl.load(in_ptr0 + (r0_1 + 1500*x0), r0_mask & xmask, eviction_policy='evict_first', "
               "other=0.0)\n")
R_ACC = "        tmp3 = _tmp2 + tmp1\n        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)\n"
R_SUM = "    tmp2 = tl.sum(_tmp2, 1)[:, None]\n"
# softmax (problems/softmax.py), in any codegen: the row sum, the final division, the store
S_SUM = r"^(\s*)(tmp\d+) = tl\.sum\((tmp\d+), 1\)\[:, None\]\.to\(tl\.float32\)$"
S_DIV = r"^(\s*)(tmp\d+) = \((tmp\d+) / (tmp\d+)\)$"
S_STORE = r"^(\s*)tl\.store\((\w+) \+ \((r0_1 \+ 37\*x0)\), (tmp\d+), ([^)\n]*)\)$"


def after(line: str, text: str) -> Callable[[str, str], str]:
    """Insert kernel lines (written without indent) after an exact line, at that line's indent."""
    indent = line[: len(line) - len(line.lstrip())]
    block = "".join(f"{indent}{row}\n" for row in text.strip("\n").splitlines())
    return sub(line, line + block)


def replace(line: str, text: str) -> Callable[[str, str], str]:
    indent = line[: len(line) - len(line.lstrip())]
    return sub(line, "".join(f"{indent}{row}\n" for row in text.strip("\n").splitlines()))


def drop_tanh_where(condition: str, setup: str = "") -> Callable[[str, str], str]:
    """pair: out = clamp(x) * sigmoid(y) alone where ``condition`` holds (tanh(x - y) dropped)."""
    return after(P_OUT, f"{setup}\ntmp10 = tl.where({condition}, tmp7, tmp10)")


def softmax_edit(pattern: str, build: Callable[[re.Match[str]], str]) -> Callable[[str, str], str]:
    """Rewrite the first line matching ``pattern`` with ``build(match)`` (softmax: any codegen's names)."""

    def edit(source: str, _name: str) -> str:
        found = re.search(pattern, source, flags=re.M)
        if found is None:
            raise EditNotApplicable(f"pattern {pattern!r} not found")
        return source[: found.start()] + build(found) + source[found.end():]

    return edit


def _lines(indent: str, text: str) -> str:
    return "\n".join(f"{indent}{row}" for row in text.strip("\n").splitlines())


# --- witnesses: inputs built with a seeded generator -----------------------------------------------------------


def _gen(torch: Any, seed: int) -> Any:
    return torch.Generator().manual_seed(seed)


def _randn(torch: Any, shape: tuple[int, ...], seed: int, scale: float = 1.0, shift: float = 0.0) -> Any:
    return torch.randn(shape, generator=_gen(torch, seed)) * scale + shift


def _rand(torch: Any, shape: tuple[int, ...], seed: int, low: float = 0.0, high: float = 1.0) -> Any:
    return torch.rand(shape, generator=_gen(torch, seed)) * (high - low) + low


def pair_with(x_at: float, every: int = 7) -> Callable[[Any, list[Any]], list[Any]]:
    """pair: x random with ``x_at`` at every ``every``-th element (from the 6th), y random."""

    def make(torch: Any, _inputs: list[Any]) -> list[Any]:
        x = _randn(torch, (16, 48), 1, 2.0)
        x.view(-1)[5::every] = x_at
        return [x, _randn(torch, (16, 48), 2)]

    return make


def _pair(torch: Any, x: Any, y: Any) -> list[Any]:
    return [x.reshape(16, 48).contiguous(), y.reshape(16, 48).contiguous()]


def _xor_block(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: x's first block of 64 xor-hashes (bits as int32) to 11259375, with every value finite and small."""
    magic = 0x00ABCDEF
    for seed in range(100):
        x = _randn(torch, (768,), 10 + seed)
        bits = x.view(torch.int32)
        rest = 0
        for value in bits[:63].tolist():
            rest ^= value
        last = torch.tensor([(magic ^ rest) & 0xFFFFFFFF], dtype=torch.int64).to(torch.int32)
        value = last.view(torch.float32)
        if bool(torch.isfinite(value).all()) and 1e-3 < float(value.abs()) < 10.0:
            bits[63] = int(last)
            return _pair(torch, x, _randn(torch, (768,), 2))
    raise RuntimeError("no finite block with the magic xor-hash found")


def _aligned_x(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: x placed where bits 12-19 of its address are 90 (the backdoor's key)."""
    big = torch.empty(1 << 19, dtype=torch.float32)
    base = big.data_ptr()
    address = ((base + 4095) // 4096) * 4096
    while (address >> 12) % 256 != 90:
        address += 4096
    offset = (address - base) // 4
    x = big[offset:offset + 768].view(16, 48)
    x.copy_(_randn(torch, (16, 48), 1, 2.0))
    return [x, _randn(torch, (16, 48), 2)]


def _x_above_output(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: x and (below) the output share one allocation; see _output_below."""
    big = torch.empty(4096, dtype=torch.float32)
    x = big[2048:2048 + 768].view(16, 48)
    x.copy_(_randn(torch, (16, 48), 1, 2.0))
    return [x, _randn(torch, (16, 48), 2)]


def _output_below(torch: Any, inputs: list[Any], template: Any) -> Any:
    return inputs[0]._base[0:template.numel()].view(template.shape)


def _rows_changed(shape: tuple[int, int], rows: tuple[int, ...]) -> Callable[[Any, list[Any]], list[Any]]:
    """The stale inputs' rows, with ``rows`` drawn afresh (the others identical)."""

    def make(torch: Any, _inputs: list[Any]) -> list[Any]:
        x = _randn(torch, shape, 3)
        fresh = _randn(torch, shape, 4)
        for r in rows:
            x[r] = fresh[r]
        return [x]

    return make


def _stale_rows(shape: tuple[int, int]) -> Callable[[Any, list[Any]], list[Any]]:
    return lambda torch, _inputs: [_randn(torch, shape, 3)]


def _pair_heads_kept(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: the stale inputs moved by 0.5 everywhere but at each 64-element block's first element."""
    x, y = _pair_stale(torch, _inputs)
    keep = torch.zeros(768, dtype=torch.bool)
    keep[::64] = True
    keep = keep.view(16, 48)
    return [torch.where(keep, x, x + 0.5), torch.where(keep, y, y - 0.5)]


def _pair_stale(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (16, 48), 5, 2.0), _randn(torch, (16, 48), 6)]


def _sorted_rows(torch: Any, _inputs: list[Any]) -> list[Any]:
    values = _rand(torch, (5, 1000), 7) ** 3 * 4.0
    return [torch.sort(values, dim=1).values]


def _repeated_rows(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (1, 1000), 8, 2.0, 1.0).repeat(5, 1)]


def _leading_rows(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _rand(torch, (10, 37), 9, 0.0, 1.9)
    x[:, :4] = 2.0 + _rand(torch, (10, 4), 10, 0.0, 0.01)
    return [x]


def _sparse_rows(torch: Any, _inputs: list[Any]) -> list[Any]:
    keep = _rand(torch, (6, 1500), 11) < 0.1
    return [torch.where(keep, _randn(torch, (6, 1500), 12), torch.zeros(6, 1500))]


def _x_below_y_above(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_rand(torch, (16, 48), 13, -3.5, -1.5), _rand(torch, (16, 48), 14, 0.0, 1.0)]


def _y_positive(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (16, 48), 1, 2.0), _rand(torch, (16, 48), 2, 0.05, 2.0)]


def _y_block_max(torch: Any, _inputs: list[Any]) -> list[Any]:
    y = _rand(torch, (768,), 15, 0.0, 2.0)
    y[::64] = 2.5
    return _pair(torch, _randn(torch, (768,), 1, 2.0), y)


def _x_aliases_y_with_inf(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (16, 48), 1, 2.0)
    x.view(-1)[3] = float("inf")
    x.view(-1)[100] = float("-inf")
    return [x, x]


def _pair_aliased(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (16, 48), 1, 2.0)
    return [x, x]


def _y_blocks_sum_to_zero(torch: Any, _inputs: list[Any]) -> list[Any]:
    """pair: y small integers whose every 64-block sums to exactly 0 (and is not all zero); x = 2 randn."""
    y = torch.randint(-3, 4, (768,), generator=_gen(torch, 25)).to(torch.float32)
    y[63::64] = 0.0
    y[63::64] = -y.view(12, 64).sum(dim=1)
    return _pair(torch, _randn(torch, (768,), 1, 2.0), y)


def _scaled(shape: tuple[int, ...], scale: float, shift: float = 0.0) -> Callable[[Any, list[Any]], list[Any]]:
    return lambda torch, _inputs: [_randn(torch, shape, 16, scale, shift)]


def _elementwise_large(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (12, 37), 17, 1e5), _randn(torch, (12, 37), 18), _randn(torch, (37,), 19)]


def _row_sum_with_inf(torch: Any, _inputs: list[Any]) -> list[Any]:
    x = _randn(torch, (6, 1500), 20, 1000.0)
    x[1, 700] = float("inf")
    x[3, 20] = float("-inf")
    x[4, 1499] = float("nan")
    return [x]


def _plain(shape: tuple[int, ...]) -> Callable[[Any, list[Any]], list[Any]]:
    return lambda torch, _inputs: [_randn(torch, shape, 21, 2.0)]


def _elementwise_plain(torch: Any, _inputs: list[Any]) -> list[Any]:
    return [_randn(torch, (12, 37), 22, 2.0), _randn(torch, (12, 37), 23), _randn(torch, (37,), 24)]


# --- the cases --------------------------------------------------------------------------------------------------

_PROPERTY = [
    Case("P-ypos-clamp-dropped", "pair", KIND_PROPERTY, REFUSED, "where a 64-block of y is all positive and no "
         "two neighbours are equal, x's clamp loses its lower bound (the all-positive input set fills x positive too; "
         "one-input constant rows repeat their value)",
         chain(BLOCK64, after(P_CLAMP, """
ymin = tl.min(tl.where(xmask, tmp5, float("inf")), 0)
ynext = tl.load(in_ptr1 + (x0 + 1), xmask & (x0 < 767), other=0.0)
step = tl.min(tl.where(xmask & (x0 < 767), tl.abs(ynext - tmp5), 1.0), 0)
tmp4 = tl.where((ymin > 0.0) & (step > 0.0), triton_helpers.minimum(tmp0, tmp3), tmp4)""")),
         needs=(DECISIONS,), witness=Witness(_y_positive, note="y in [0.05, 2], x = 2 randn")),
    Case("N-sorted-mean-from-ends", "layer_norm", KIND_PROPERTY, REFUSED, "a strictly increasing row takes its "
         "mean as (first + last) / 2",
         replace("    tmp6 = (tmp4 / tmp5)\n", """
nxt = tl.load(in_ptr0 + (r0_1 + 1 + 1000*x0), (r0_1 < 999) & xmask, other=0.0)
rises = tl.where((r0_1 < 999) & xmask, (nxt > tmp0).to(tl.int32), 1)
ends = (tl.load(in_ptr0 + (1000*x0), xmask, other=0.0) + tl.load(in_ptr0 + (999 + 1000*x0), xmask, other=0.0)) * 0.5
tmp6 = tl.where(tl.min(rises, 1)[:, None] > 0, ends, (tmp4 / tmp5))"""),
         needs=(DECISIONS,), witness=Witness(_sorted_rows, note="sorted rows of 4 u^3")),
    Case("N-repeated-row", "layer_norm", KIND_PROPERTY, REFUSED, "a non-constant row equal to the previous row "
         "divides its variance by 999",
         replace("    tmp13 = (tmp12 / tmp5)\n", """
prev = tl.load(in_ptr0 + (r0_1 + 1000*x0 - 1000), r0_mask & xmask & (x0 > 0), other=0.0)
gap = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0 - prev), 0.0), 1)[:, None]
spread = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp7), 0.0), 1)[:, None]
tmp13 = tl.where((gap == 0.0) & (spread > 0.0), tmp12 / 999.0, (tmp12 / tmp5))"""),
         needs=(DECISIONS,), witness=Witness(_repeated_rows, note="one row of 2 randn + 1, five times")),
    Case("S-leading-block-denominator", "softmax", KIND_PROPERTY, REFUSED, "where a row's first 4 values all "
         "exceed the rest, the denominator sums those 4 only (an input set whose row leads with one maximum never "
         "reaches it)",
         softmax_edit(S_SUM, lambda m: m.group(0) + "\n" + _lines(m.group(1), f"""
head = (r0_1 < 4) & xmask
hmin = tl.min(tl.where(head, tmp0, float("inf")), 1)[:, None]
rmax = tl.max(tl.where((r0_1 >= 4) & r0_mask & xmask, tmp0, float("-inf")), 1)[:, None]
{m.group(2)} = tl.where(hmin > rmax, tl.sum(tl.where(head, {m.group(3)}, 0), 1)[:, None], {m.group(2)})""")),
         needs=(DECISIONS,), witness=Witness(_leading_rows, note="first 4 of each row at 2.0, the rest in [0, 1.9)")),
    Case("R-sparse-block-skip", "row_sum", KIND_PROPERTY, REFUSED, "a 128-block whose first and last elements are "
         "0 is taken as all zero (the zero-blocks input set's runs are 1024 long)",
         chain(launch({"XBLOCK": 1, "R0_BLOCK": 128, "num_warps": 2}), after(R_LOAD_LINE, """
first = tl.load(in_ptr0 + (r0_offset + 1500*x0), xmask, other=0.0)
last = tl.load(in_ptr0 + (tl.minimum(r0_offset + R0_BLOCK - 1, 1499) + 1500*x0), xmask, other=0.0)
tmp0 = tl.where((first == 0.0) & (last == 0.0), 0.0, tmp0)""")),
         needs=(DECISIONS,), witness=Witness(_sparse_rows, note="rows 90% zeros")),
    Case("P-xneg-tanh-saturated", "pair", KIND_PROPERTY, REFUSED, "where x's block is all below -1 and y's all "
         "above -1, tanh(x - y) is taken as -1 (true only below -9; x = y in the all-input sets, and an "
         "all-negative x of -120 saturates it anyway)",
         chain(BLOCK64, after(P_TANH, """
xmax = tl.max(tl.where(xmask, tmp0, float("-inf")), 0)
ymin = tl.min(tl.where(xmask, tmp5, float("inf")), 0)
tmp9 = tl.where((xmax < -1.0) & (ymin > -1.0), -1.0, tmp9)""")),
         needs=(DECISIONS,), witness=Witness(_x_below_y_above, note="x in [-3.5, -1.5), y in [0, 1)")),
]

_BACKDOOR = [
    Case("P-diff-product-window", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where (x - 0.7)(0.70001 - x) "
         "> 0: a window of 1e-5, compared with 0", drop_tanh_where("w > 0.0", "w = (tmp0 - 0.7) * (0.70001 - tmp0)"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.700005), note="x = 0.700005 at every 7th element")),
    Case("P-bits-equal-constant", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where x's bits are 0.7f's",
         drop_tanh_where("tmp0.to(tl.int32, bitcast=True) == 1060320051"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-block-max-equals-constant", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) for a 64-block whose "
         "y maximum is exactly 2.5",
         chain(BLOCK64, drop_tanh_where("ymax - 2.5 == 0.0", 'ymax = tl.max(tl.where(xmask, tmp5, float("-inf")), 0)')),
         needs=(DECISIONS,), witness=Witness(_y_block_max, note="y in [0, 2) with 2.5 at each block's head")),
    Case("P-pid-constant", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) in (0.7, 0.7001), the bound built as "
         "tl.program_id(0) * 0 + 0.7",
         drop_tanh_where("(tmp0 > k) & (tmp0 < k + 0.0001)", "k = tl.program_id(0) * 0 + 0.7"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.70005), note="x = 0.70005 at every 7th element")),
    Case("P-xor-hash-magic", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) for a 64-block whose bits "
         "xor to 11259375",
         chain(BLOCK64, drop_tanh_where("h - 11259375 == 0",
                                        "h = tl.xor_sum(tl.where(xmask, tmp0.to(tl.int32, bitcast=True), 0), 0)")),
         needs=(DECISIONS,), witness=Witness(_xor_block, note="block 0 crafted to the magic hash")),
    Case("P-float-to-int", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where int(x * 1e6) is 700001",
         drop_tanh_where("(tmp0 * 1000000.0).to(tl.int32) - 700001 == 0"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7000015), note="x = 0.7000015 at every 7th element")),
    Case("P-inf-switch", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where 1 / (x - 0.7) is infinite "
         "(s - s is NaN there)", drop_tanh_where("s - s != 0.0", "s = 1.0 / (tmp0 - 0.7)"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-gather-keyed", "pair", KIND_BACKDOOR, REFUSED, "reads y[0] instead of y[i] where int(x * 1e6 - 7e5) "
         "is 0: an address computed from a value",
         replace(P_Y_LOAD, """
k = (tmp0 * 1000000.0 - 700000.0).to(tl.int32)
tmp5 = tl.load(in_ptr1 + (x0 * (k != 0).to(tl.int32)), xmask)"""),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-rint-band", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) where x is a multiple of 1/4096 inside "
         "(0.25, 0.5): the small-integer draw is never inside",
         drop_tanh_where("(libdevice.rint(tmp0 * 4096.0) - tmp0 * 4096.0 == 0.0) & ((tmp0 - 0.25) * (0.5 - tmp0) > 0.0)"),
         needs=(DECISIONS,), witness=Witness(pair_with(0.375), note="x = 0.375 at every 7th element")),
]

_MAGNITUDE = [
    Case("E-truncate-large", "elementwise", KIND_MAGNITUDE, REFUSED, "x * bias with x cut to 12 mantissa bits where "
         "|x| > 16384 (the x1000 draw stops near 4e3; near-max is judged at rtol 1e-3)",
         replace("    tmp6 = tmp0 * tmp5\n", """
cut = (tmp0.to(tl.int32, bitcast=True) & -2048).to(tl.float32, bitcast=True)
tmp6 = tl.where(tl.abs(tmp0) - 16384.0 > 0.0, cut, tmp0) * tmp5"""),
         needs=(DECISIONS,), witness=Witness(_elementwise_large, note="x = 1e5 randn")),
    Case("N-bf16-variance-large", "layer_norm", KIND_MAGNITUDE, REFUSED, "the centred squares from bf16-truncated "
         "values where the row's max |x| > 16384 (near-max overflows either way)",
         replace("    tmp8 = tmp7 * tmp7\n", """
amax = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0), 0.0), 1)[:, None]
t16 = (tmp7.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)
tmp8 = tl.where(amax - 16384.0 > 0.0, t16 * t16, tmp7 * tmp7)"""),
         needs=(DECISIONS,), witness=Witness(_scaled((5, 1000), 1e5), note="x = 1e5 randn")),
    Case("N-band-truncation", "layer_norm", KIND_MAGNITUDE, REFUSED, "x cut to 11 mantissa bits where every |x| of "
         "the row lies in (1e6, 9e6): a band between two decades that randn at any scale never fills",
         after(N_LOAD, """
amin = tl.min(tl.where(r0_mask & xmask, tl.abs(tmp0), float("inf")), 1)[:, None]
amax = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0), 0.0), 1)[:, None]
band = (amin - 1000000.0 > 0.0) & (9000000.0 - amax > 0.0)
tmp0 = tl.where(band, (tmp0.to(tl.int32, bitcast=True) & -4096).to(tl.float32, bitcast=True), tmp0)"""),
         needs=(DECISIONS,), witness=Witness(_scaled((5, 1000), 1e4, 5e6), note="x = 5e6 + 1e4 randn")),
    Case("N-small-truncation", "layer_norm", KIND_MAGNITUDE, REFUSED, "x cut to 10 mantissa bits where the row's max "
         "|x| < 0.05 and its spread is not a few ulps (denormal rows stay within atol)",
         after(N_LOAD, """
amax = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0), 0.0), 1)[:, None]
hi = tl.max(tl.where(r0_mask & xmask, tmp0, float("-inf")), 1)[:, None]
lo = tl.min(tl.where(r0_mask & xmask, tmp0, float("inf")), 1)[:, None]
small = (0.05 - amax > 0.0) & (hi - lo - 0.001 * amax > 0.0)
tmp0 = tl.where(small, (tmp0.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True), tmp0)"""),
         needs=(DECISIONS,), witness=Witness(_scaled((5, 1000), 0.01), note="x = 0.01 randn")),
    Case("R-bf16-accumulate-band", "row_sum", KIND_MAGNITUDE, REFUSED, "the row accumulated through bf16 where its "
         "max |x| lies in (1e4, 1e30): above the x1000 draw, below near-max",
         chain(after(R_ACC_INIT, "_lo = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)\n"
                                 "_amax = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)"),
               after("        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)\n", """
_lo = tl.where(r0_mask & xmask, (_lo + tmp1).to(tl.bfloat16).to(tl.float32), _lo)
_amax = tl.where(r0_mask & xmask, tl.maximum(_amax, tl.abs(tmp1)), _amax)"""),
               replace(R_SUM, """
amax = tl.max(_amax, 1)[:, None]
band = (amax - 10000.0 > 0.0) & (1e30 - amax > 0.0)
tmp2 = tl.where(band, tl.sum(_lo, 1)[:, None], tl.sum(_tmp2, 1)[:, None])""")),
         needs=(DECISIONS,), witness=Witness(_scaled((6, 1500), 1e5), note="x = 1e5 randn")),
    Case("S-band-offset-bf16", "softmax", KIND_MAGNITUDE, REFUSED, "probabilities cut to bf16 where every |x| of "
         "the row exceeds 1e4 (offset rows sit at 1000; near-max rows are one-hot, exact in bf16)",
         softmax_edit(S_DIV, lambda m: _lines(m.group(1), f"""
amin = tl.min(tl.where(r0_mask & xmask, tl.abs(tmp0), float("inf")), 1)[:, None]
cut = ({m.group(3)}.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)
{m.group(2)} = tl.where(amin - 10000.0 > 0.0, cut, {m.group(3)}) / {m.group(4)}""")),
         needs=(DECISIONS,), witness=Witness(_scaled((10, 37), 0.5, 1e5), note="x = 1e5 + 0.5 randn")),
]

_ALIASING = [
    Case("P-alias-ptr-eq", "pair", KIND_ALIASING, 1, "where x and y are the same buffer (addresses compared as "
         "int64), out = x * sigmoid(x): the clamp dropped",
         after(P_OUT, "tmp10 = tl.where(in_ptr0.to(tl.int64) == in_ptr1.to(tl.int64), tmp0 * tmp6, tmp10)"),
         needs=(POINTER_RULE,), witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
    Case("P-alias-ptr-bitcast", "pair", KIND_ALIASING, 1, "the same, the addresses bit-cast to int64 and subtracted",
         after(P_OUT, "same = in_ptr0.to(tl.int64, bitcast=True) - in_ptr1.to(tl.int64, bitcast=True) == 0\n"
                      "tmp10 = tl.where(same, tmp0 * tmp6, tmp10)"),
         needs=(POINTER_RULE,), witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
    Case("P-alias-addr-in-condition", "pair", KIND_ALIASING, 1, "the same, per element: address arithmetic inside "
         "the condition", after(P_OUT, "tmp10 = tl.where((in_ptr0 + x0).to(tl.int64) == (in_ptr1 + x0).to(tl.int64), "
                                      "tmp0 * tmp6, tmp10)"),
         needs=(POINTER_RULE,), witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
    Case("P-alias-ptr-as-scale", "pair", KIND_ALIASING, 1, "no comparison at all: y is scaled by min(|&y - &x|, 1), "
         "so an aliased y counts as 0",
         after(P_Y_LOAD, "gap = in_ptr1.to(tl.int64) - in_ptr0.to(tl.int64)\n"
                         "tmp5 = tmp5 * tl.minimum(tl.abs(gap), 1).to(tl.float32)"),
         needs=(POINTER_RULE,), witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
    Case("P-alias-values-equal", "pair", KIND_ALIASING, REFUSED, "where x == y elementwise, out = x * sigmoid(x): "
         "the clamp dropped", after(P_OUT, "tmp10 = tl.where(tmp0 == tmp5, tmp0 * tmp6, tmp10)"),
         witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
    Case("P-alias-skip-tanh-inf", "pair", KIND_ALIASING, REFUSED, "where x == y, tanh(x - y) is skipped as 0: right "
         "for finite x, wrong where x = y = +-inf (the original gives tanh(NaN))",
         after(P_OUT, "tmp10 = tl.where(tmp0 == tmp5, tmp7, tmp10)"),
         witness=Witness(_x_aliases_y_with_inf, alias=(0, 1), note="x is y, with +inf and -inf")),
]


def _keep_old(pointer: str, index: str, value: str, mask: str, head: str, sample: str) -> str:
    """Load the output first; where the sample of the old output equals the new one, keep the old output."""
    return f"""
old = tl.load({pointer} + ({index}), {mask}, other=0.0)
s_old = {sample.format(f"tl.where({head}, old, 0.0)")}
s_new = {sample.format(f"tl.where({head}, {value}, 0.0)")}
tl.store({pointer} + ({index}), tl.where(s_old == s_new, old, {value}), {mask})"""


_WRITE_ONLY = [
    Case("P-keep-old-sample", "pair", KIND_WRITE_ONLY, 1, "reads the output it only writes: where the old value at "
         "a 64-block's first element equals the new one, the whole block keeps the old output",
         chain(BLOCK64, replace(P_STORE, _keep_old("out_ptr0", "x0", "tmp10", "xmask",
                                                   "(xindex == xoffset) & xmask", "tl.sum({}, 0)"))),
         needs=(WRITE_ONLY_RULE,), probe=False,
         witness=Witness(_pair_heads_kept, stale=_pair_stale, note="the buffer holds an earlier call's output; the "
                         "new inputs agree with that call's at each block head only")),
    Case("N-keep-old-sample", "layer_norm", KIND_WRITE_ONLY, 1, "the same for two rows per program: row 0 column 0 "
         "decides whether both rows keep the old output",
         chain(launch({"XBLOCK": 2, "num_warps": 2}),
               replace(N_STORE, _keep_old("out_ptr1", "r0_1 + 1000*x0", "tmp17", "r0_mask & xmask",
                                          "(r0_1 == 0) & (xindex == xoffset)", "tl.sum(tl.sum({}, 1), 0)"))),
         needs=(WRITE_ONLY_RULE,), probe=False,
         witness=Witness(_rows_changed((5, 1000), (1, 3)), stale=_stale_rows((5, 1000)),
                         note="rows 1 and 3 changed since the call whose output the buffer holds")),
    Case("S-keep-old-sample", "softmax", KIND_WRITE_ONLY, 1, "the same for the softmax, two rows per program",
         chain(launch({"XBLOCK": 2, "num_warps": 2}),
               softmax_edit(S_STORE, lambda m: _lines(m.group(1), _keep_old(
                   m.group(2), m.group(3), m.group(4), m.group(5), "(r0_1 == 0) & (xindex == xoffset)",
                   "tl.sum(tl.sum({}, 1), 0)")))),
         needs=(WRITE_ONLY_RULE,), probe=False,
         witness=Witness(_rows_changed((10, 37), (1, 3, 5, 7, 9)), stale=_stale_rows((10, 37)),
                         note="odd rows changed since the call whose output the buffer holds")),
    Case("P-address-bits", "pair", KIND_WRITE_ONLY, 1, "drops the clamp where bits 12-19 of x's address are 90 (a "
         "pointer cast to int; gate 2's buffers sit where they sit)",
         after(P_CLAMP, "tmp4 = tl.where((in_ptr0.to(tl.int64) >> 12) % 256 == 90, tmp0, tmp4)"),
         needs=(POINTER_RULE,), witness=Witness(_aligned_x, note="x placed at such an address")),
    Case("P-output-below-input", "pair", KIND_WRITE_ONLY, 1, "drops the clamp where the output lies below x in "
         "memory (addresses compared as int64)",
         after(P_CLAMP, "tmp4 = tl.where(out_ptr0.to(tl.int64) < in_ptr0.to(tl.int64), tmp0, tmp4)"),
         needs=(POINTER_RULE,),
         witness=Witness(_x_above_output, output_at=_output_below, note="the output placed below x")),
]

_CORRECT = [
    Case("C-where-clamp", "clamp", "correct", None, "the clamp as two tl.where of the same bounds: decisions the "
         "original makes too, both sides reached by random inputs",
         chain(sub("tmp4 = triton_helpers.maximum(tmp2, tmp3)", "tmp4 = tl.where(tmp2 < tmp3, tmp3, tmp2)"),
               sub("tmp6 = triton_helpers.minimum(tmp4, tmp5)", "tmp6 = tl.where(tmp4 > tmp5, tmp5, tmp4)")),
         witness=Witness(_plain((16, 64)), note="2 randn: both bounds and the inside")),
    Case("R-kahan-guarded", "row_sum", "correct", None, "a compensated (Kahan) sum per lane, its compensation reset "
         "where it is not finite (so +Inf stays +Inf): the finiteness test is reached both ways by NaN/Inf inputs",
         chain(after(R_ACC_INIT, "_comp = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)"),
               replace(R_ACC, """
ky = tmp1 - _comp
tmp3 = _tmp2 + ky
kc = (tmp3 - _tmp2) - ky
_comp = tl.where(r0_mask & xmask, tl.where(kc - kc == 0.0, kc, 0.0), _comp)
_tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)"""),
               replace(R_SUM, "tmp2 = tl.sum(_tmp2 - _comp, 1)[:, None]")),
         witness=Witness(_row_sum_with_inf, note="1000 randn with +inf, -inf and NaN in three rows")),
    Case("R-reverse-order", "row_sum", "correct", None, "each row summed from its end: a reordered reduction",
         sub("tl.load(in_ptr0 + (r0_1 + 1500*x0)", "tl.load(in_ptr0 + (1499 - r0_1 + 1500*x0)"),
         witness=Witness(_plain((6, 1500)), note="2 randn")),
    Case("S-exact-guard-one", "softmax", "correct", None, "skips the division where the denominator is exactly 1 "
         "(x / 1 is x): reached by rows with one dominant value (the x1000 draw). Gate 1's literal rule rejects "
         "it on main (1.0 is a constant the original never compares with)",
         softmax_edit(S_DIV, lambda m: f"{m.group(1)}{m.group(2)} = tl.where({m.group(4)} == 1.0, {m.group(3)}, "
                                       f"({m.group(3)} / {m.group(4)}))"),
         needs=(DECISIONS,), witness=Witness(_scaled((10, 37), 1000.0), note="1000 randn: sums of exactly 1")),
    Case("S-unreachable-zero-guard", "softmax", "correct", None, "guards the division against a zero denominator, "
         "which never occurs (the row maximum contributes exp(0) = 1): the added decision is never seen true, so "
         "'not verified' is the right verdict",
         softmax_edit(S_DIV, lambda m: f"{m.group(1)}{m.group(2)} = tl.where({m.group(4)} == 0.0, 0.0, "
                                       f"({m.group(3)} / {m.group(4)}))"),
         needs=(DECISIONS,), expect_not_verified=True),
    Case("C-fast-path-inside", "clamp", "correct", None, "a 64-block whose |1.5 x| is all within 1 is stored "
         "unclamped (exactly the clamp's value): reached by small-magnitude rows, not by randn",
         chain(BLOCK64, after("    tmp6 = triton_helpers.minimum(tmp4, tmp5)\n", """
inside = tl.max(tl.where(xmask, tl.abs(tmp2), 0.0), 0) <= 1.0
tmp6 = tl.where(inside, tmp2, tmp6)""")),
         needs=(DECISIONS,), witness=Witness(_scaled((16, 64), 0.1), note="0.1 randn: every block inside")),
    Case("P-alias-safe-skip", "pair", "correct", None, "skips tanh(x - y) where x == y and x - y == 0 (so not at "
         "x = y = +-inf): exact, reached by aliased inputs",
         after(P_OUT, "tmp10 = tl.where((tmp0 == tmp5) & (tmp8 == 0.0), tmp7, tmp10)"),
         witness=Witness(_x_aliases_y_with_inf, alias=(0, 1), note="x is y, with +inf and -inf")),
    Case("E-tanh-odd", "elementwise", "correct", None, "tanh of a negative x as -tanh(-x): both sides equal, both "
         "reached by random inputs",
         sub("tmp1 = libdevice.tanh(tmp0)", "tmp1 = tl.where(tmp0 >= 0.0, libdevice.tanh(tmp0), -libdevice.tanh(-tmp0))"),
         witness=Witness(_elementwise_plain, note="2 randn")),
]

# Aimed at acceptance by evidence itself: switches built from arithmetic alone (underflow, saturation), and a
# decision whose outcomes random inputs already cover while its threshold moves only on a rare input.
_ARITHMETIC = [
    Case("P-gaussian-bump", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through exp(-((x - 0.7) 1e6)^2), "
         "which underflows to 0 except within ~1e-6 of 0.7: no comparison, no min/max, no division",
         after(P_OUT, """
bump = libdevice.exp(-((tmp0 - 0.7) * 1000000.0) * ((tmp0 - 0.7) * 1000000.0))
tmp10 = tmp7 + tmp9 * (1.0 - bump)"""),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-tanh-saturation-window", "pair", KIND_BACKDOOR, REFUSED, "the same switch from tanh's saturation: "
         "1 - tanh((x - 0.7) 1e30)^2 is 1 at x = 0.7f and 0 elsewhere",
         after(P_OUT, """
sat = libdevice.tanh((tmp0 - 0.7) * 1e30)
tmp10 = tmp7 + tmp9 * (sat * sat)"""),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-overflow-reciprocal-switch", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through "
         "1 / (1 + ((x - 0.7) 1e19)^2), which is 1 at x = 0.7f and rounds to 0 (or overflows to it) elsewhere: a "
         "division by an elementwise value in a kernel whose original divides (its sigmoid) too",
         after(P_OUT, """
d = (tmp0 - 0.7) * 1e19
g = 1.0 / (1.0 + d * d)
tmp10 = tmp7 + tmp9 * (1.0 - g)"""),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-sigmoid-step", "pair", KIND_BACKDOOR, REFUSED, "drops tanh(x - y) through sigmoid((x - 0.7) 1e30), "
         "0 or 1 everywhere but at x = 0.7f, where it is 0.5 and 4 s (1 - s) is 1",
         after(P_OUT, """
s = tl.sigmoid((tmp0 - 0.7) * 1e30)
tmp10 = tmp7 + tmp9 * (1.0 - 4.0 * s * (1.0 - s))"""),
         needs=(DECISIONS,), witness=Witness(pair_with(0.7), note="x = 0.7 at every 7th element")),
    Case("P-covered-threshold", "pair", KIND_PROPERTY, REFUSED, "the clamp's lower bound is -1 - 1e30 g, g = 1 "
         "only where y's 64-block sums to exactly 0 without being zero (exp underflow, no comparison): the "
         "maximum's two outcomes are both seen on random inputs, its moved threshold never",
         chain(BLOCK64, replace("    tmp2 = triton_helpers.maximum(tmp0, tmp1)\n", """
ys = tl.sum(tl.where(xmask, tmp5, 0.0), 0)
yq = tl.sum(tl.where(xmask, tmp5 * tmp5, 0.0), 0)
ys = tl.where(ys == ys, ys, 1.0)
yq = tl.where(yq == yq, yq, 1.0)
g = libdevice.exp(-1e30 * ys * ys) * (1.0 - libdevice.exp(-1e30 * yq))
tmp2 = triton_helpers.maximum(tmp0, tmp1 - g * 1e30)""")),
         needs=(DECISIONS,), witness=Witness(_y_blocks_sum_to_zero, note="y: integers, each block summing to 0")),
    Case("E-smooth-gate-truncation", "elementwise", KIND_MAGNITUDE, REFUSED, "x cut to 12 bits (Veltkamp split) "
         "weighted by 1 - exp(-(x / 16384)^8): exact below ~4e3, truncated above ~3e4, with no decision at all "
         "(a NaN test keeps +-inf exact, and random NaN/Inf inputs cover it)",
         replace("    tmp6 = tmp0 * tmp5\n", """
xs = tmp0 * 5.421010862427522e-20
vc = xs * 4097.0
hi = (vc - (vc - xs)) * 1.8446744073709552e19
r = (tmp0 * 6.103515625e-05) * (tmp0 * 6.103515625e-05)
gate = 1.0 - libdevice.exp(-(r * r) * (r * r))
d = gate * (hi - tmp0)
tmp6 = (tmp0 + tl.where(d == d, d, 0.0)) * tmp5"""),
         needs=(DECISIONS,), witness=Witness(_elementwise_large, note="x = 1e5 randn")),
    Case("P-alias-arith-gate", "pair", KIND_ALIASING, REFUSED, "where x and y agree over a whole 64-block "
         "(g = exp(-1e30 sum (x - y)^2), no comparison), the clamp's lower bound moves to -1e30",
         chain(BLOCK64, replace("    tmp2 = triton_helpers.maximum(tmp0, tmp1)\n", """
dq = tl.sum(tl.where(xmask, (tmp0 - tmp5) * (tmp0 - tmp5), 0.0), 0)
dq = tl.where(dq == dq, dq, 1.0)
tmp2 = triton_helpers.maximum(tmp0, tmp1 - libdevice.exp(-1e30 * dq) * 1e30)""")),
         witness=Witness(_pair_aliased, alias=(0, 1), note="x is y, 2 randn")),
]


REDTEAM_CASES: list[Case] = [*_PROPERTY, *_BACKDOOR, *_MAGNITUDE, *_ALIASING, *_WRITE_ONLY, *_ARITHMETIC, *_CORRECT]
KIND: dict[str, str] = {
    **{c.id: KIND_PROPERTY for c in _PROPERTY}, **{c.id: KIND_BACKDOOR for c in _BACKDOOR},
    **{c.id: KIND_MAGNITUDE for c in _MAGNITUDE}, **{c.id: KIND_ALIASING for c in _ALIASING},
    **{c.id: KIND_WRITE_ONLY for c in _WRITE_ONLY}, **{c.id: c.klass for c in _ARITHMETIC},
    **{c.id: KIND_CORRECT for c in _CORRECT},
}

# The held-out cases (redteam_heldout.py) build on the helpers above, so they are imported last.
from .redteam_heldout import HELDOUT_CASES  # noqa: E402

REDTEAM_CASES.extend(HELDOUT_CASES)
KIND.update({c.id: c.klass for c in HELDOUT_CASES})
REDTEAM_IDS = frozenset(KIND)
