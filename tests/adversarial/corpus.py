"""The adversarial corpus: wrong candidates, each labelled with the gate that must reject it (or
containment), and correct variants that must pass gates 1-3.

Every candidate is a templated edit of the real kernel Inductor wrote for one of the tiny problems
in ``problems/`` (compiled once per session), or, for launcher candidates (docs/launchers.md), a
module written around it. An edit names the exact text it changes and fails loudly
(:class:`EditNotApplicable`) when that text is absent, so a codegen change in a new torch release
shows up as a corpus error, not as a silently easier test.

Issue 20's classes are wrong only on inputs the gates did not draw before (input sets) or by
errors inside the tolerance (error structure), or need guards and containment the gate runtime is
growing. Each such case names what it ``needs`` from :data:`kernelopt_core.gates.CAPABILITIES`; the
corpus test skips it, with the reason, until the gates have it. ``input_sets`` names the input
sets that expose it (``()``: the graph's own inputs, with the error-structure check), which
``input_set_probe.py`` checks against the modules directly. Pure Python: no torch; the GPU benchmark
(benchmarks/gpu/gates.py) imports it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kernelopt_core.gates.launcher import set_launch_configs

from .edits import (  # noqa: F401 - re-exported: the corpus' users import them from here
    CONTAINMENT,
    PROBLEM_ROWS,
    PROBLEMS,
    REFUSED,
    Case,
    EditNotApplicable,
    Witness,
    append_body,
    append_module,
    chain,
    first_of,
    kernel_name_line,
    launch,
    module,
    prepend_module,
    regex,
    replace_between,
    sentinel_path,
    sub,
    writes_sentinel,
)
from .redteam import REDTEAM_CASES

# --- the kernels (as Inductor 2.13 writes them for problems/*.py on the CPU backend) ------------
# elementwise: out = tanh(x) * sigmoid(y) + x * bias - 0.1   (x, y: [12, 37], bias: [37])
# row_sum:     out = x.sum(dim=1) * 0.5                      (x: [6, 1500], looped reduction)
# softmax:     out = softmax(x, dim=-1)                      (x: [10, 37], persistent reduction)

E_STORE = "tl.store(out_ptr0 + (x2), tmp9, xmask)"
R_LOAD = "tl.load(in_ptr0 + (r0_1 + 1500*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)"
R_STORE = "tl.store(in_out_ptr0 + (x0), tmp5, xmask)"
S_LOAD = "tl.load(in_ptr0 + (r0_1 + 37*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)"
S_STORE = "tl.store(in_out_ptr0 + (r0_1 + 37*x0), tmp11, r0_mask & xmask)"
# The softmax store as any codegen writes it: indent, pointer, value, mask.
S_STORE_ANY = r"^(\s*)tl\.store\((\w+) \+ \((r0_1 \+ 37\*x0)\), (tmp\d+), ([^)\n]*)\)$"

# layer_norm: out = layer_norm(x, (1000,), eps=1e-5)    (x: [5, 1000], persistent: mean, then centred squares)
# clamp:      out = clamp(x * 1.5, -1, 1)              (x: [16, 64], pointwise)
N_EPS = "tmp14 = tl.full([1, 1], 1e-05, tl.float32)"
N_MEAN = "tmp6 = (tmp4 / tmp5)"
C_MAX = "    tmp3 = tl.full([1], -1.0, tl.float32)\n    tmp4 = triton_helpers.maximum(tmp2, tmp3)\n"
C_MIN = "    tmp5 = tl.full([1], 1.0, tl.float32)\n    tmp6 = triton_helpers.minimum(tmp4, tmp5)\n"
# The softmax's row max over every lane, padded ones (loaded as 0.0) included: any codegen.
S_MAX_MASKED = r'tl\.where\(r0_mask & xmask, (tmp\d+), float\("-inf"\)\)'
S_DIVIDE = r"^(\s*)(tmp\d+) = \((tmp\d+) / (tmp\d+)\)$"

# Launcher candidates for row_sum (docs/launchers.md): partial sums of 4 chunks per row, then a finish kernel.
LAUNCHER_SPLIT = """
import torch
import triton
import triton.language as tl


@triton.jit
def _partials(in_ptr, part_ptr, r0_numel, SPLIT: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    acc = tl.zeros([BLOCK], tl.float32)
    for off in tl.range(0, CHUNK, BLOCK):
        inside = off + tl.arange(0, BLOCK)
        idx = part * CHUNK + inside
        acc += tl.load(in_ptr + row * r0_numel + idx, mask=(idx < r0_numel) & (inside < CHUNK), other=0.0)
    tl.store(part_ptr + row * SPLIT + part, tl.sum(acc, 0))


@triton.jit
def _finish(part_ptr, out_ptr, OUT_OFFSET: tl.constexpr, SPLIT: tl.constexpr):
    row = tl.program_id(0)
    total = tl.sum(tl.load(part_ptr + row * SPLIT + tl.arange(0, SPLIT)), 0)
    tl.store(out_ptr + row + OUT_OFFSET, total * 0.5)


def {name}(in_out_ptr0, in_ptr0, xnumel, r0_numel):
    split = 4
    partials = torch.empty((xnumel, split), dtype=torch.float32, device=in_ptr0.device)
    _partials[(xnumel, SPLITS_LAUNCHED)](in_ptr0, partials, r0_numel, SPLIT=split,
                                         CHUNK=triton.cdiv(r0_numel, split), BLOCK=128)
    EXTRA
    _finish[(xnumel,)](partials, in_out_ptr0, OUT_OFFSET=OFFSET, SPLIT=split)
"""


def launcher_split(splits_launched: str = "split", offset: int = 0, extra: str = "pass") -> Callable[[str, str], str]:
    template = (LAUNCHER_SPLIT.replace("SPLITS_LAUNCHED", splits_launched).replace("OFFSET", str(offset))
                .replace("EXTRA", extra))
    return module(template)


# A split reduction: grid (rows, SPLITS); split 0 stores its partial sum, the others add theirs
# atomically. Correct only when split 0 of a row runs first: a race, and float atomics in any order.
_SPLIT_BODY = """
    xnumel = 6
    r0_numel = 1500
    x0 = tl.program_id(0)
    split = tl.program_id(1)
    r0_base = tl.arange(0, R0_BLOCK)
    acc = tl.zeros([R0_BLOCK], tl.float32)
    for r0_offset in tl.range(split * R0_BLOCK, r0_numel, SPLITS * R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        acc += tl.load(in_ptr0 + (r0_index + 1500*x0), r0_mask, other=0.0)
    partial = tl.sum(acc, 0) * 0.5
    if split == 0:
        tl.store(in_out_ptr0 + x0, partial)
    else:
        tl.atomic_add(in_out_ptr0 + x0, partial)
"""


def split_reduction(splits: int) -> Callable[[str, str], str]:
    def edit(source: str, name: str) -> str:
        head, sep, _body = source.partition(f"def {name}(")
        if not sep:
            raise EditNotApplicable(f"no def {name}(")
        signature = f"def {name}(in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, " \
                    f"R0_BLOCK : tl.constexpr):\n    SPLITS: tl.constexpr = {splits}\n"
        text = head + signature + _SPLIT_BODY.lstrip("\n")
        text = text.replace("'mutated_arg_names': ['in_out_ptr0']",
                            "'mutated_arg_names': ['in_out_ptr0'], 'atomic_add_found': True", 1)
        return set_launch_configs(text, name, [{"XBLOCK": 1, "R0_BLOCK": 256}], grid=("xnumel", splits, 1))

    return edit


def reload_race() -> Callable[[str, str], str]:
    """The softmax's denominator from the output buffer: exp(x - max) stored, then loaded back at other
    columns (any codegen: the masked exp before the row sum, and the output pointer of the final store)."""

    def edit(source: str, _name: str) -> str:
        store = re.search(S_STORE_ANY, source, flags=re.M)
        masked = re.search(r"^(\s*)(tmp\d+) = tl\.where\(r0_mask & xmask, (tmp\d+), 0\)$", source, flags=re.M)
        if store is None or masked is None:
            raise EditNotApplicable("no softmax store or masked exp before the row sum")
        indent, target, value = masked.groups()
        pointer = store.group(2)
        racy = (f"{indent}tl.store({pointer} + (r0_1 + 37*x0), {value}, r0_mask & xmask)\n"
                f"{indent}{target} = tl.load({pointer} + ((r0_1 + 32) % 37 + 37*x0), r0_mask & xmask, other=0.0)")
        return source[:masked.start()] + racy + source[masked.end():]

    return edit


CASES: list[Case] = [
    # --- off-by-one mask ---------------------------------------------------------------------
    Case("E-mask-short", "elementwise", "off-by-one mask", 2, "xmask drops the last element",
         sub("xmask = xindex < xnumel", "xmask = xindex < xnumel - 1")),
    Case("E-mask-long", "elementwise", "off-by-one mask", 2, "xmask lets one element past the end through",
         sub("xmask = xindex < xnumel", "xmask = xindex <= xnumel")),
    Case("S-rmask-short", "softmax", "off-by-one mask", 2, "the row mask drops the last column",
         sub("r0_mask = r0_index < r0_numel", "r0_mask = r0_index < r0_numel - 1")),
    Case("S-rmask-long", "softmax", "off-by-one mask", 2, "the row mask takes one column of the next row",
         sub("r0_mask = r0_index < r0_numel", "r0_mask = r0_index <= r0_numel")),
    Case("R-rmask-long", "row_sum", "off-by-one mask", 2, "the reduction mask takes one element too many",
         sub("r0_mask = r0_index < r0_numel", "r0_mask = r0_index <= r0_numel")),
    # --- missing tail block ------------------------------------------------------------------
    Case("R-no-tail", "row_sum", "missing tail block", 2, "R0_BLOCK=512 and the loop stops before the tail",
         chain(launch({"XBLOCK": 1, "R0_BLOCK": 512}),
               sub("tl.range(0, r0_numel, R0_BLOCK)", "tl.range(0, r0_numel - R0_BLOCK + 1, R0_BLOCK)"))),
    Case("E-grid-floor", "elementwise", "missing tail block", 2, "grid = xnumel // XBLOCK drops the partial block",
         launch({"XBLOCK": 128, "num_warps": 4}, grid=("xnumel // {XBLOCK}",))),
    Case("S-grid-floor", "softmax", "missing tail block", 2, "four rows per program, grid rounds down",
         launch({"XBLOCK": 4, "num_warps": 2}, grid=("xnumel // {XBLOCK}",))),
    # --- wrong reduction axis ----------------------------------------------------------------
    Case("R-axis-columns", "row_sum", "wrong reduction axis", 2, "sums down columns (x0 + 6*r) instead of rows",
         sub(R_LOAD, R_LOAD.replace("(r0_1 + 1500*x0)", "(x0 + 6*r0_1)"))),
    Case("S-sum-axis0", "softmax", "wrong reduction axis", 2, "the normaliser sums over the row axis",
         first_of(sub("tl.sum(tmp9, 1)[:, None]", "tl.sum(tmp9, 0)[None, :]"),
                  regex(r"tl\.sum\((tmp\d+), 1\)\[:, None\]", r"tl.sum(\1, 0)[None, :]"))),
    Case("S-max-axis0", "softmax", "wrong reduction axis", 2, "the row max is taken over the wrong axis",
         first_of(sub("triton_helpers.max2(tmp3, 1)[:, None]", "triton_helpers.max2(tmp3, 0)[None, :]"),
                  regex(r"triton_helpers\.max2\((tmp\d+), 1\)\[:, None\]", r"triton_helpers.max2(\1, 0)[None, :]"))),
    # --- wrong broadcast index ---------------------------------------------------------------
    Case("E-bias-row", "elementwise", "wrong broadcast index", 2, "bias indexed by row instead of column",
         sub("x0 = (xindex % 37)", "x0 = (xindex // 37)")),
    Case("E-bias-mod", "elementwise", "wrong broadcast index", 2, "bias indexed modulo 36",
         sub("x0 = (xindex % 37)", "x0 = (xindex % 36)")),
    # --- silent downcast ---------------------------------------------------------------------
    # Gate 2's error structure sees these (errors ~1000x its rounding floor); gate 3 alone rejects them
    # too (test_gate_3_alone_rejects_the_downcasts).
    Case("R-fp16-load", "row_sum", "silent downcast to fp16", 2, "inputs rounded through fp16 before the sum "
         "(inside the kernel tolerance, outside the model's)",
         sub(R_LOAD, R_LOAD + ".to(tl.float16).to(tl.float32)")),
    Case("E-fp16-sigmoid", "elementwise", "silent downcast to fp16", 2, "sigmoid rounded through fp16",
         sub("tmp3 = tl.sigmoid(tmp2)", "tmp3 = tl.sigmoid(tmp2).to(tl.float16).to(tl.float32)")),
    Case("E-bf16-out", "elementwise", "silent downcast to fp16", 2, "the output rounded through bf16",
         sub("tmp9 = tmp7 - tmp8", "tmp9 = (tmp7 - tmp8).to(tl.bfloat16).to(tl.float32)")),
    # --- dropped epilogue op -----------------------------------------------------------------
    Case("E-drop-sub", "elementwise", "dropped epilogue op", 2, "the final - 0.1 is gone",
         sub("tmp9 = tmp7 - tmp8", "tmp9 = tmp7")),
    Case("E-drop-bias", "elementwise", "dropped epilogue op", 2, "x * bias became x",
         sub("tmp7 = tmp4 + tmp6", "tmp7 = tmp4 + tmp0")),
    Case("R-drop-scale", "row_sum", "dropped epilogue op", 2, "the final * 0.5 is gone",
         sub("tmp5 = tmp2 * tmp4", "tmp5 = tmp2")),
    # --- partial output write ----------------------------------------------------------------
    Case("E-half-store", "elementwise", "partial output write", 2, "stores only the first half",
         sub(E_STORE, "tl.store(out_ptr0 + (x2), tmp9, xmask & (x2 < 222))")),
    Case("S-even-columns", "softmax", "partial output write", 2, "stores every other column",
         first_of(sub(S_STORE, "tl.store(in_out_ptr0 + (r0_1 + 37*x0), tmp11, r0_mask & xmask & (r0_1 % 2 == 0))"),
                  regex(S_STORE_ANY, r"\1tl.store(\2 + (\3), \4, \5 & (r0_1 % 2 == 0))"))),
    Case("R-even-rows", "row_sum", "partial output write", 2, "stores even rows only",
         sub(R_STORE, "tl.store(in_out_ptr0 + (x0), tmp5, xmask & (x0 % 2 == 0))")),
    # --- output cached between calls ---------------------------------------------------------
    Case("E-keep-previous", "elementwise", "output cached between calls", 1,
         "keeps whatever the output buffer already holds unless it is NaN",
         sub(E_STORE, "prev = tl.load(out_ptr0 + (x2), xmask)\n"
                      "    tl.store(out_ptr0 + (x2), tl.where(prev == prev, prev, tmp9), xmask)")),
    Case("S-keep-previous", "softmax", "output cached between calls", 1,
         "returns the previous call's probabilities when the buffer holds numbers",
         first_of(sub(S_STORE, "prev = tl.load(in_out_ptr0 + (r0_1 + 37*x0), r0_mask & xmask)\n"
                               "    tl.store(in_out_ptr0 + (r0_1 + 37*x0), tl.where(prev == prev, prev, tmp11), "
                               "r0_mask & xmask)"),
                  regex(S_STORE_ANY, r"\1prev = tl.load(\2 + (\3), \5)\n"
                                     r"\1tl.store(\2 + (\3), tl.where(prev == prev, prev, \4), \5)"))),
    Case("R-keep-previous", "row_sum", "output cached between calls", 1, "skips rows whose sum is already there",
         sub(R_STORE, "prev = tl.load(in_out_ptr0 + (x0), xmask)\n"
                      "    tl.store(in_out_ptr0 + (x0), tl.where(prev == prev, prev, tmp5), xmask)")),
    # --- identity or pointer caching (module state) ------------------------------------------
    Case("E-ptr-dict", "elementwise", "identity or pointer caching", 1, "a module-level dict keyed by pointers",
         prepend_module("_results_by_pointer = {}")),
    Case("S-fn-attr-cache", "softmax", "identity or pointer caching", 1, "a cache hung on the kernel object",
         kernel_name_line("{name}.last_inputs = ()")),
    Case("R-global-ptr", "row_sum", "identity or pointer caching", 1, "a `global` remembering the last pointer",
         append_body("global _last_pointer", "xoffset = tl.program_id(0) * XBLOCK")),
    Case("E-id-key", "elementwise", "identity or pointer caching", 1, "keys on id() of an argument",
         append_body("key = id(in_ptr0)", "xoffset = tl.program_id(0) * XBLOCK")),
    # --- NaN/Inf generation ------------------------------------------------------------------
    Case("S-no-max", "softmax", "NaN/Inf generation", 2, "softmax without the max subtraction overflows",
         first_of(sub("tmp5 = tmp0 - tmp4", "tmp5 = tmp0"),
                  # the first subtraction of the row max, whatever its temporaries are called
                  regex(r"^(\s*)(tmp\d+) = (tmp\d+) - (tmp\d+)$", r"\1\2 = \3"))),
    Case("E-tanh-exp", "elementwise", "NaN/Inf generation", 2, "tanh as (e^2x - 1)/(e^2x + 1): inf/inf",
         sub("tmp1 = libdevice.tanh(tmp0)",
             "tmp1 = (libdevice.exp(2.0 * tmp0) - 1.0) / (libdevice.exp(2.0 * tmp0) + 1.0)")),
    Case("R-exp-times-zero", "row_sum", "NaN/Inf generation", 2, "adds exp(sum) * 0, which is NaN once exp overflows",
         sub("tmp5 = tmp2 * tmp4", "tmp5 = tmp2 * tmp4 + libdevice.exp(tmp2) * 0.0")),
    # --- out-of-bounds reads -----------------------------------------------------------------
    Case("E-read-shifted", "elementwise", "out-of-bounds reads", 2, "reads y one element ahead (past the end)",
         sub("tl.load(in_ptr1 + (x2), xmask)", "tl.load(in_ptr1 + (x2 + 1), xmask)")),
    Case("R-unmasked-read", "row_sum", "out-of-bounds reads", 2, "drops the reduction mask on load and accumulate",
         chain(sub(R_LOAD, R_LOAD.replace("r0_mask & xmask,", "xmask,")),
               sub("_tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)", "_tmp2 = tl.where(xmask, tmp3, _tmp2)"))),
    Case("S-next-row", "softmax", "out-of-bounds reads", 2, "reads the next row (the last row reads past the end)",
         first_of(sub(S_LOAD, S_LOAD.replace("(r0_1 + 37*x0)", "(r0_1 + 37*x0 + 37)")),
                  regex(r"tl\.load\((\w+) \+ \(r0_1 \+ 37\*x0\), ", r"tl.load(\1 + (r0_1 + 37*x0 + 37), "))),
    # --- nondeterministic atomics ------------------------------------------------------------
    Case("R-split2-atomic", "row_sum", "nondeterministic atomics", 2, "split reduction: store + atomic_add, 2 splits",
         split_reduction(2)),
    Case("R-split3-atomic", "row_sum", "nondeterministic atomics", 2, "split reduction: store + atomic_add, 3 splits",
         split_reduction(3)),
    # --- torch call inside -------------------------------------------------------------------
    Case("E-torch-tanh", "elementwise", "torch call inside", 1, "torch.tanh inside the kernel",
         sub("tmp1 = libdevice.tanh(tmp0)", "tmp1 = torch.tanh(tmp0)")),
    Case("S-extern-mm", "softmax", "torch call inside", 1, "an extern_kernels call",
         append_body("tmp99 = extern_kernels.mm(tmp0, tmp0)", "tmp0 = tl.load(")),
    Case("R-helpers-torch", "row_sum", "torch call inside", 1, "torch reached through triton_helpers",
         append_body("triton_helpers.torch.cuda.synchronize()", "xoffset = tl.program_id(0) * XBLOCK")),
    # --- forbidden import --------------------------------------------------------------------
    Case("E-import-os", "elementwise", "forbidden import", 1, "import os",
         chain(prepend_module("import os"), append_body("flag = os.environ.get('X')", "xoffset ="))),
    Case("S-import-subprocess", "softmax", "forbidden import", 1, "import subprocess",
         prepend_module("import subprocess")),
    Case("R-from-ctypes", "row_sum", "forbidden import", 1, "from ctypes import CDLL",
         prepend_module("from ctypes import CDLL")),
    # --- try/except fallback -----------------------------------------------------------------
    Case("E-try-in-kernel", "elementwise", "try/except fallback", 1, "falls back to a simpler formula on error",
         sub("    tmp3 = tl.sigmoid(tmp2)\n",
             "    try:\n        tmp3 = tl.sigmoid(tmp2)\n    except Exception:\n        tmp3 = tmp2\n")),
    Case("S-try-import", "softmax", "try/except fallback", 1, "module-level try/except around an import",
         prepend_module("try:\n    from torch._inductor.runtime import hints\nexcept ImportError:\n    hints = None")),
    # --- side streams, eval ------------------------------------------------------------------
    Case("R-driver-stream", "row_sum", "new CUDA streams", 1, "reaches the driver for a stream",
         append_module("_stream = triton.runtime.driver.active.get_current_stream")),
    Case("E-eval", "elementwise", "eval/exec", 1, "exec at import", append_module("exec('x = 1')")),
    # --- issue 20: wrong only on the new input sets ----------------------------------------
    Case("N-eps-dropped", "layer_norm", "norm eps changed or dropped", 2, "the layer norm's eps is gone: a "
         "constant row divides its rounding by 0", sub(N_EPS, "tmp14 = tl.full([1, 1], 0.0, tl.float32)"),
         needs=("input-sets",), input_sets=("constant-rows",)),
    Case("N-eps-changed", "layer_norm", "norm eps changed or dropped", 2, "eps 1e-4 instead of 1e-5: visible where "
         "the row variance is near eps", sub(N_EPS, "tmp14 = tl.full([1, 1], 0.0001, tl.float32)"),
         needs=("input-sets",), input_sets=("low-variance-rows",)),
    Case("N-mean-n-minus-1", "layer_norm", "mean divided by N-1", 2, "the row mean divided by 999: a shift of "
         "mean/999, ~3e-5 on random rows, ~1 at mean 1000", sub(N_MEAN, "tmp6 = (tmp4 / 999.0)"),
         needs=("input-sets",), input_sets=("offset-rows",)),
    Case("N-one-pass-variance", "layer_norm", "one-pass variance", 2, "variance as E[x^2] - E[x]^2 in float32",
         chain(sub("tmp8 = tmp7 * tmp7", "tmp8 = tmp0 * tmp0"),
               sub("tmp13 = (tmp12 / tmp5)", "tmp13 = (tmp12 / tmp5) - tmp6 * tmp6")),
         needs=("input-sets",), input_sets=("offset-rows",)),
    Case("S-max-padded", "softmax", "softmax max over padded lanes", 2, "the row max includes the padded lanes "
         "(loaded as 0.0): every probability of a row below -104 is 0/0",
         regex(S_MAX_MASKED, r'tl.where(xmask, \1, float("-inf"))'),
         needs=("input-sets",), input_sets=("all-negative",)),
    Case("R-drop-nan", "row_sum", "reduction that drops NaN", 2, "NaN inputs are summed as 0",
         sub("tmp3 = _tmp2 + tmp1", "tmp3 = _tmp2 + tl.where(tmp1 == tmp1, tmp1, 0.0)"),
         needs=("input-sets",), input_sets=("nan-inf",)),
    Case("R-skip-zero-rows", "row_sum", "kernel that skips blocks of zeros", 2, "rows that sum to exactly 0 are not "
         "stored (the output is assumed zeroed)", sub(R_STORE, "tl.store(in_out_ptr0 + (x0), tmp5, xmask & (tmp5 != 0.0))"),
         needs=("input-sets",), input_sets=("zero-blocks",), probe=False),
    Case("E-range-backdoor", "elementwise", "value-range backdoor", 2, "returns x itself where x > 50 (an added "
         "decision; the all-positive and near-max input sets expose it)",
         sub("tmp9 = tmp7 - tmp8", "tmp9 = tl.where(tmp0 > 50.0, tmp0, tmp7 - tmp8)"),
         needs=("input-sets",), input_sets=("all-positive", "near-max")),
    # --- issue 28: a fast path keyed on one input ------------------------------------------------------
    Case("E-skip-zero-y-blocks", "elementwise", "fast path keyed on one input", 2, "skips tanh(x) * sigmoid(y) "
         "where a 64-element block of y is all zero (it is tanh(x) / 2 there): the all-input sets zero x at the "
         "same places, where the skipped term is 0 anyway",
         chain(launch({"XBLOCK": 64, "num_warps": 2}),
               sub("tmp4 = tmp1 * tmp3", "tmp4 = tl.where(tl.max(tl.abs(tl.where(xmask, tmp2, 0.0)), 0) == 0.0, 0.0, "
                                         "tmp1 * tmp3)")),
         needs=("input-sets", "one-input-sets"), input_sets=("zeros@1",)),
    # --- issue 28: behaviour tied to a literal, a race only a GPU shows ----------------------------------
    Case("E-literal-window", "elementwise", "literal-window backdoor", REFUSED, "drops the - 0.1 only where 0.7 < x "
         "< 0.7001: no random input lands there (one element in ~30,000 of randn); gate 2's constants input set, drawn at "
         "and beside the candidate's own constants, does",
         sub("tmp9 = tmp7 - tmp8", "tmp9 = tl.where((tmp0 > 0.7) & (tmp0 < 0.7001), tmp7, tmp7 - tmp8)"),
         needs=("decision-coverage",)),
    Case("S-reload-race", "softmax", "intra-program race", 1, "stores exp(x - max) to the output, then sums the "
         "row by loading it back rotated by 32 columns, with no tl.debug_barrier(): other threads' elements, which "
         "a GPU may not have written yet (the interpreter runs the block as one step)", reload_race(),
         needs=("race-rule",)),
    # --- issue 20: small systematic errors inside the tolerance ------------------------------------
    Case("C-bound-moved", "clamp", "clamp bound moved by 8e-5", 2, "clamps at 0.99992 instead of 1",
         sub("tmp5 = tl.full([1], 1.0, tl.float32)", "tmp5 = tl.full([1], 0.99992, tl.float32)"),
         needs=("error-structure",), input_sets=()),
    Case("S-flush-small", "softmax", "softmax flushing p < 1e-5 to 0", 2, "probabilities below 1e-5 stored as 0 "
         "(each within atol; their column sums are not): an added decision; the all-negative input set and the error "
         "structure expose it",
         first_of(sub("tmp11 = (tmp6 / tmp10)", "tmp11 = tl.where((tmp6 / tmp10) < 1e-05, 0.0, (tmp6 / tmp10))"),
                  regex(S_DIVIDE, r"\1\2 = tl.where((\3 / \4) < 1e-05, 0.0, (\3 / \4))")),
         needs=("input-sets", "error-structure"), input_sets=("all-negative",)),
    # --- issue 20: writes far outside a tensor -----------------------------------------------------
    Case("E-store-past-end", "elementwise", "store far past the end", 2, "one store 5,000 elements past the end of "
         "the output, beyond the 4,096-element guard",
         sub(E_STORE, E_STORE + "\n    tl.store(out_ptr0 + (x2 + 5444), tmp9, xmask & (x2 == 0))"),
         needs=("guard-range",), probe=False),
    # --- issue 20: bypasses of gate 1 ----------------------------------------------------------------
    Case("E-os-via-heuristics", "elementwise", "import through an allowlisted module", 1,
         "`os` imported from triton_heuristics (it imports os itself)",
         chain(prepend_module("from torch._inductor.runtime.triton_heuristics import os"),
               append_body("flag = os.environ.get('X')", "xoffset ="))),
    Case("S-heuristics-alias", "softmax", "import through an allowlisted module", 1,
         "triton_heuristics under another name, and `os` through it",
         chain(prepend_module("import torch._inductor.runtime.triton_heuristics as th"),
               append_body("flag = th.os.environ.get('X')", "xoffset ="))),
    Case("R-driver-via-helpers", "row_sum", "import through an allowlisted module", 1,
         "Triton's runtime driver through triton_helpers.triton",
         append_body("s = triton_helpers.triton.runtime.driver.active", "xoffset = tl.program_id(0) * XBLOCK")),
    Case("E-patch-checker", "elementwise", "monkey-patching the checker", 1,
         "replaces gate 3's output comparison at import",
         prepend_module("import kernelopt_core.gates.model as _checks\n_checks.tensor_outputs = lambda out: []")),
    Case("S-patch-in-decorator", "softmax", "monkey-patching the checker", 1,
         "replaces gate 3's output comparison from inside a decorator argument",
         sub("filename=__file__", "filename=setattr(__import__('kernelopt_core.gates.model', fromlist=['m']), "
                                  "'tensor_outputs', lambda out: []) or __file__")),
    Case("R-write-file", "row_sum", "writing a file", 1, "creates a file from a decorator argument",
         writes_sentinel("R-write-file", lambda path: sub(
             "filename=__file__", f"filename=open({path!r}, 'w').close() or __file__"))),
    Case("E-write-file-module", "elementwise", "writing a file", 1, "creates a file at import through os from an "
         "allowlisted module",
         writes_sentinel("E-write-file-module", lambda path: prepend_module(
             f"from torch._inductor.runtime.triton_heuristics import os\n_made = os.makedirs({path!r})"))),
    Case("S-grid-code", "softmax", "code in decorator arguments", 1, "a precomputed grid string that Inductor "
         "would execute, creating a file",
         writes_sentinel("S-grid-code", lambda path: chain(
             launch({"XBLOCK": 2, "num_warps": 2}, grid=("-(-xnumel // {XBLOCK})",)),
             sub("'python': ['-(-xnumel // 2)'", f"'python': [\"__import__('os').makedirs({path!r}) or 5\"")))),
    Case("E-devprops-code", "elementwise", "code in decorator arguments", 1, "DeviceProperties(...) computed by a call",
         regex(r"DeviceProperties\(type='(\w+)'", r"DeviceProperties(type=str('\1')")),
    Case("R-undecorated-code", "row_sum", "undecorated module-level code", 1, "a plain helper called at import",
         writes_sentinel("R-undecorated-code", lambda path: prepend_module(
             f"def _setup():\n    return open({path!r}, 'w')\n\n\n_handle = _setup()"))),
    # --- launcher candidates (docs/launchers.md) ------------------------------------------------------
    Case("L-torch-op", "row_sum", "launcher with a forbidden torch op", 1, "the launcher sums with torch itself",
         launcher_split(extra="in_out_ptr0.copy_(torch.sum(in_ptr0.view(xnumel, r0_numel), 1) * 0.5)")),
    Case("L-write-outside", "row_sum", "launcher writing outside its outputs", 2, "the finish kernel stores 6 rows "
         "past the output", launcher_split(offset=6), needs=("launcher-candidates",), probe=False),
    Case("L-uninitialised-scratch", "row_sum", "launcher reading uninitialised scratch", 2, "the partials of the "
         "last chunk are never computed, the finish kernel reads them anyway", launcher_split(splits_launched="3"),
         needs=("launcher-candidates", "scratch-guards"), probe=False),
    Case("L-huge-scratch", "row_sum", "launcher exhausting memory", CONTAINMENT, "allocates 2^40 floats of scratch",
         launcher_split(extra="waste = torch.empty((1 << 40,), dtype=torch.float32, device=in_ptr0.device)"),
         needs=("launcher-candidates", "containment"), probe=False),
    Case("L-endless", "row_sum", "launcher that never returns", CONTAINMENT, "loops 10^12 times before launching",
         launcher_split(extra="for i in range(10 ** 12):\n        pass"),
         needs=("launcher-candidates", "containment"), probe=False),
    # --- correct variants: must pass gates 1-3 -----------------------------------------------
    Case("E-xblock64", "elementwise", "correct", None, "XBLOCK=64, 2 warps", launch({"XBLOCK": 64, "num_warps": 2})),
    Case("E-xblock512", "elementwise", "correct", None, "one block of 512 covers all 444 elements",
         launch({"XBLOCK": 512, "num_warps": 8})),
    Case("E-autotune", "elementwise", "correct", None, "two configs through user_autotune",
         launch({"XBLOCK": 128, "num_warps": 4}, {"XBLOCK": 32, "num_warps": 1})),
    Case("E-grid-ceil", "elementwise", "correct", None, "own grid: ceil(xnumel / XBLOCK)",
         launch({"XBLOCK": 128, "num_warps": 4}, grid=("-(-xnumel // {XBLOCK})",))),
    Case("E-sub-as-add", "elementwise", "correct", None, "x - 0.1 written as x + (-0.1)",
         sub("tmp9 = tmp7 - tmp8", "tmp9 = tmp7 + (-tmp8)")),
    Case("E-sigmoid-exp", "elementwise", "correct", None, "sigmoid as 1 / (1 + exp(-y))",
         sub("tmp3 = tl.sigmoid(tmp2)", "tmp3 = 1.0 / (1.0 + libdevice.exp(-tmp2))")),
    Case("E-reorder", "elementwise", "correct", None, "loads and products in another order",
         chain(sub("    tmp1 = libdevice.tanh(tmp0)\n", ""),
               sub("    tmp3 = tl.sigmoid(tmp2)\n", "    tmp3 = tl.sigmoid(tmp2)\n    tmp1 = libdevice.tanh(tmp0)\n"))),
    Case("R-rblock512", "row_sum", "correct", None, "R0_BLOCK=512: three loop steps with a masked tail",
         launch({"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4})),
    Case("R-rblock256-x4", "row_sum", "correct", None, "XBLOCK=4, R0_BLOCK=256",
         launch({"XBLOCK": 4, "R0_BLOCK": 256, "num_warps": 8})),
    Case("R-scale-in-loop", "row_sum", "correct", None, "multiply by 0.5 inside the loop instead of after",
         chain(sub("tmp3 = _tmp2 + tmp1", "tmp3 = _tmp2 + tmp1 * 0.5"), sub("tmp5 = tmp2 * tmp4", "tmp5 = tmp2"))),
    Case("S-xblock2", "softmax", "correct", None, "two rows per program", launch({"XBLOCK": 2, "num_warps": 2})),
    Case("S-xblock16", "softmax", "correct", None, "all rows in one program (masked)",
         launch({"XBLOCK": 16, "num_warps": 4})),
    Case("S-exp2", "softmax", "correct", None, "exp(x) as exp2(x * log2(e))",
         first_of(sub("tmp6 = libdevice.exp(tmp5)", "tmp6 = libdevice.exp2(tmp5 * 1.4426950408889634)"),
                  regex(r"^(\s*)(tmp\d+) = libdevice\.exp\((tmp\d+)\)$",
                        r"\1\2 = libdevice.exp2(\3 * 1.4426950408889634)"))),
    Case("S-reciprocal", "softmax", "correct", None, "divide by multiplying with the reciprocal",
         first_of(sub("tmp11 = (tmp6 / tmp10)", "tmp11 = tmp6 * (1.0 / tmp10)"),
                  regex(r"^(\s*)(tmp\d+) = \((tmp\d+) / (tmp\d+)\)$", r"\1\2 = \3 * (1.0 / \4)"))),
    Case("N-xblock8", "layer_norm", "correct", None, "all five rows in one program (masked)",
         launch({"XBLOCK": 8, "num_warps": 8})),
    Case("N-mean-reciprocal", "layer_norm", "correct", None, "the mean as sum * 0.001",
         sub(N_MEAN, "tmp6 = tmp4 * 0.001")),
    Case("N-sqrt-divide", "layer_norm", "correct", None, "divide by sqrt(var + eps) instead of multiplying by rsqrt",
         sub("tmp17 = tmp7 * tmp16", "tmp17 = tmp7 / libdevice.sqrt(tmp15)")),
    Case("C-min-max-swapped", "clamp", "correct", None, "the upper bound first, then the lower",
         replace_between(C_MAX, C_MIN, C_MIN.replace("tmp4", "tmp2").replace("tmp6 = ", "tmp7 = ")
                         + C_MAX.replace("tmp2, tmp3", "tmp7, tmp3").replace("tmp4 = ", "tmp6 = "))),
    Case("C-xblock128", "clamp", "correct", None, "XBLOCK=128", launch({"XBLOCK": 128, "num_warps": 4})),
    Case("L-split", "row_sum", "correct", None, "a launcher: partial sums of 4 chunks per row, then a finish kernel",
         launcher_split(), needs=("launcher-candidates",)),
]


# The red-team cases (redteam.py), written against the acceptance-by-evidence rules: CASES is the whole corpus.
CASES.extend(REDTEAM_CASES)


def cases_by_problem() -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {p: [] for p in PROBLEMS}
    for case in CASES:
        out[case.problem].append(case)
    return out
