"""Gate 2's fused error-structure pass (gates/fused_structure.py) gives the eager path's sums and verdicts.
On the GPU the gate uses it for float32 and narrower outputs; here Triton's interpreter runs the same
kernels on the CPU, in a process of its own (the interpreter is chosen when Triton is imported)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import dataclasses, json, math
import torch
from kernelopt_core.gates import error_structure as es
from kernelopt_core.gates.fused_structure import BLOCK, applies, fused_structure_sums

generator = torch.Generator().manual_seed(11)
results = []

def case(name, c, o, row_length=None, input_scale=1.0):
    eps, numel, use_rows, group, growth = es._output_layout(o, row_length, row_length)
    eager = es._eager_sums(c, o, use_rows, group, numel, 1000)  # several chunks, cut across rows
    fused = fused_structure_sums(c, o, group if use_rows else None, force=True)
    verdict_eager = es._against_original(c, o, row_length=row_length, input_scale=input_scale, chunk=1000,
                                         sensitivity=None, reduction_length=row_length)
    results.append({"name": name, "eager": dataclasses.asdict(eager),
                    "fused": dataclasses.asdict(fused) if fused is not None else None,
                    "passed": verdict_eager.passed, "use_rows": use_rows})

def noisy(o, size):
    return o + torch.randn(o.shape, generator=generator, dtype=o.dtype) * size

o = torch.randn(3 * BLOCK + 123, generator=generator)
case("no rows, several programs", noisy(o, 1e-6), o)
o = torch.randn(3, 2 * BLOCK + 904, generator=generator)  # long rows: pieces per row, a partial last one
case("long rows", noisy(o, 1e-6), o, row_length=o.shape[1])
case("long rows, a bias", noisy(o, 1e-6) + 1e-5, o, row_length=o.shape[1])
o = torch.randn(300, 37, generator=generator)  # short rows: several whole rows per program
case("short rows", noisy(o, 1e-6), o, row_length=37)
o = torch.randn(40, BLOCK, generator=generator)  # rows of exactly one program
case("rows of one block", noisy(o, 1e-6), o, row_length=BLOCK)
special = torch.randn(50, 96, generator=generator)
cand = noisy(special, 1e-6)
cand[3, 5] = math.nan; cand[7, 0] = math.inf; special[9, 9] = -math.inf; cand[10] = math.nan  # a whole row out
case("non-finite elements and a row with none finite", cand, special, row_length=96)
o = (torch.randn(64, 128, generator=generator) * 1000).to(torch.float16)
case("float16", noisy(o, 1.0), o, row_length=128)
o = torch.full((200, 64), 1e4)
case("a large mean, a tiny spread", o + 0.1 + torch.randn(200, 64, generator=generator) * 1e-9, o, row_length=64)

def reference_case(name, c, o, r, row_length=None):
    eps, numel, use_rows, group, growth = es._output_layout(o, row_length, None)
    eager = es._eager_reference_sums(c, o, r, use_rows, group, numel, 1000)
    fused = fused_structure_sums(c, o, group if use_rows else None, r, force=True)
    verdict = es.error_structure(c, o, r, row_length=row_length, chunk=1000)  # the eager path on the CPU
    results.append({"name": name, "eager": dataclasses.asdict(eager),
                    "fused": dataclasses.asdict(fused) if fused is not None else None,
                    "passed": verdict.passed, "use_rows": use_rows})

x = torch.randn(100, 96, generator=generator, dtype=torch.float64)
r64 = torch.softmax(x, dim=1)
o32 = torch.softmax(x.float(), dim=1)
reference_case("a float64 reference, rows", noisy(o32, 1e-9), o32, r64, row_length=96)
reference_case("a float64 reference, a biased candidate", o32 * (1 + 1e-5), o32, r64, row_length=96)
r_special = r64.clone(); r_special[4, 4] = math.inf
reference_case("a float64 reference with an infinity", noisy(o32, 1e-9), o32, r_special, row_length=96)
x = torch.randn(2 * BLOCK + 9, generator=generator, dtype=torch.float64)
reference_case("a float64 reference, no rows", x.float() + 1e-7, x.float(), x)
print(json.dumps({"results": results,
                  "applies": [applies(torch.ones(4), torch.ones(4)), applies(torch.ones(4), torch.ones(4), force=True),
                              applies(torch.ones(4, 4).t(), torch.ones(4, 4), force=True),
                              applies(torch.ones(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64), force=True),
                              applies(torch.ones(4), torch.ones(4), torch.ones(4, dtype=torch.float64), force=True),
                              applies(torch.ones(4), torch.ones(4), torch.ones(4), force=True)]}))
"""


def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)


def test_the_fused_pass_gives_the_eager_sums() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    by_name = {r["name"]: r for r in report["results"]}
    for name, result in by_name.items():
        eager, fused = result["eager"], result["fused"]
        assert fused is not None, name
        assert fused["count"] == eager["count"] and fused["present_rows"] == eager["present_rows"], name
        for key in ("mean", "worst", "max_abs_ref", "sum_abs_ref", "worst_orig"):
            assert _close(fused[key], eager[key]), (name, key, fused[key], eager[key])
        # centred square sums: float64 rounding of differently ordered sums, relative to the squares' size
        for key in ("m2", "row_spread_squares", "sum_orig_err", "sum_cand_err", "sum_abs_orig_err"):
            assert math.isclose(fused[key], eager[key], rel_tol=1e-7, abs_tol=1e-30), (name, key)
    # the cases exercise the figures: rows are used, a bias is rejected, non-finite elements are left out
    assert by_name["long rows"]["use_rows"] and by_name["short rows"]["use_rows"]
    assert by_name["long rows"]["passed"] and not by_name["long rows, a bias"]["passed"]
    special = by_name["non-finite elements and a row with none finite"]
    assert special["eager"]["count"] == 50 * 96 - 96 - 3 and special["eager"]["present_rows"] == 49
    assert not by_name["a large mean, a tiny spread"]["passed"]
    assert by_name["a float64 reference, rows"]["passed"]
    assert not by_name["a float64 reference, a biased candidate"]["passed"]
    assert by_name["a float64 reference with an infinity"]["eager"]["count"] == 100 * 96 - 1
    # only float32 and narrower, contiguous, on a GPU unless forced
    assert report["applies"] == [False, True, False, False, True, False]
