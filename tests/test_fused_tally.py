"""Gate 2's fused comparison pass (gates/fused_tally.py) gives the eager figures exactly. On the GPU the
gate uses it for float32 outputs; here Triton's interpreter runs the same kernel on the CPU, in a process
of its own (the interpreter is chosen when Triton is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, math
import torch
from kernelopt_core.gates import kernel
from kernelopt_core.gates.fused_tally import BLOCK, applies, fused_float_figures
from kernelopt_core.sandbox.guarded_buffers import poison_bits

POISON = poison_bits(torch.float32)
poison_value = torch.tensor([POISON], dtype=torch.int32).view(torch.float32)[0]
generator = torch.Generator().manual_seed(7)
results = []

def case(name, c, o, atol=1e-3, rtol=1e-3, poison=POISON):
    eager = kernel._float_figures(c, o, poison, atol, rtol)  # on the CPU: the eager path
    fused = fused_float_figures(c, o, poison, atol, rtol, force=True)
    results.append({"name": name, "eager": eager, "fused": fused})

n = 3 * BLOCK + 123  # several programs and a partial last block
o = torch.randn(n, generator=generator)
case("identical", o.clone(), o)
c = o + torch.randn(n, generator=generator) * 1e-4
case("within tolerance", c, o)
c = o.clone()
c[5] += 1.0
c[BLOCK + 7] -= 0.5
case("two elements off", c, o)
# at the tolerance's edge, both ways: |c - o| = atol + rtol * |o| and one float32 step past it
edge = o.clone()
allowed = (torch.tensor(1e-3, dtype=torch.float32) + (torch.tensor(1e-3, dtype=torch.float32) * o).abs())
edge[:200] = o[:200] + allowed[:200]
edge[200:400] = torch.nextafter(o[200:400] + allowed[200:400], torch.full((200,), math.inf))
case("the tolerance's edge", edge, o)
special = o.clone()
special[10] = math.nan                       # NaN where the original is finite: nonfinite and bad
special[11] = math.inf
special[12] = -math.inf
expected = o.clone()
expected[13] = math.nan; special[13] = 1.0   # finite where the original is NaN: lost
expected[14] = math.nan; special[14] = math.nan  # both NaN: close
expected[15] = math.inf; special[15] = math.inf  # equal infinities: close
expected[16] = math.inf; special[16] = -math.inf  # a flipped infinity: bad, not close
special[17] = -0.0; expected[17] = 0.0       # signed zeros are equal
special[100:140] = poison_value              # unwritten: poison left where the original wrote
expected[120] = poison_value                 # ... unless the original left it too
case("special values and poison", special, expected)
case("no poison", special, expected, poison=None)
case("exact tolerance (atol = rtol = 0)", c, o, atol=0.0, rtol=0.0)
big = torch.full((n,), 3e38)
case("|c - o| overflows float32: the eager path widens", big, -big)
case("one element", torch.tensor([1.0]), torch.tensor([1.5]))
print(json.dumps({"results": results,
                  "applies": [applies(torch.ones(4), torch.ones(4)), applies(torch.ones(4), torch.ones(4), True),
                              applies(torch.ones(4, 4).t(), torch.ones(4, 4), True),
                              applies(torch.ones(4, dtype=torch.float16), torch.ones(4, dtype=torch.float16), True)]}))
"""


def test_the_fused_pass_gives_the_eager_figures_exactly() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    by_name = {r["name"]: r for r in report["results"]}
    for name, result in by_name.items():
        if name.startswith("|c - o| overflows"):
            assert result["fused"] is None  # left to the eager path's float64 pass
            continue
        assert result["fused"] == result["eager"], name
    # the cases do exercise every figure: they are not all zero
    special = by_name["special values and poison"]["eager"]
    assert special["unwritten"] == 39 and special["lost"] == 1 and special["nonfinite"] >= 3
    assert by_name["no poison"]["eager"]["unwritten"] == 0 and by_name["two elements off"]["eager"]["bad"] == 2
    edge = by_name["the tolerance's edge"]["eager"]
    # every element one step past the edge is bad; of those placed at it, rounding puts some either side
    assert 200 <= edge["bad"] < 400
    # only float32, contiguous, on a GPU unless forced
    assert report["applies"] == [False, True, False, False]
