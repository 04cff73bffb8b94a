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
# the magnitude sweep: the floor per window of 8 outputs, then the comparison against it
from kernelopt_core.gates.error_structure import MAGNITUDE_RTOL, MagnitudeFloor, magnitude_floor
from kernelopt_core.gates.fused_tally import fused_floor_figures, fused_magnitude_floor

floor_results = []
scaled = o * torch.logspace(-20, 20, n, dtype=torch.float64).float()  # every magnitude, as the sweep's sets
nudged = scaled + scaled * torch.randn(n, generator=generator) * 1e-7
nudged[3] = math.inf; nudged[40] = math.nan; scaled[41] = math.nan  # windows holding special values
eager_floor = magnitude_floor(nudged, scaled, 4096, fused=False)
fused_floor = fused_magnitude_floor(nudged, scaled, 8, 1.1920928955078125e-07 * 64.0, 1.1754943508222875e-38, force=True)
floor_results.append({"name": "floor", "equal": bool(torch.equal(eager_floor.values, fused_floor)),
                      "windows": int(fused_floor.numel())})
floor = MagnitudeFloor(8, fused_floor)
candidate = scaled + scaled * torch.randn(n, generator=generator) * 3e-7  # rounding: within the floor
candidate[BLOCK + 9] *= 1.5  # one element far beyond it
candidate[2 * BLOCK + 5] = math.nan
for name, c in (("beyond the floor", candidate), ("identical", scaled.clone())):
    eager = kernel._float_figures(c, scaled, None, 1e-5, 1e-5, floor, fused=False)
    fused = fused_floor_figures(c, scaled, None, 1e-5, 1e-5, floor, MAGNITUDE_RTOL, force=True)
    floor_results.append({"name": name, "eager": eager, "fused": fused})
print(json.dumps({"results": results, "floor": floor_results,
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
    floor, beyond, identical = report["floor"]
    assert floor["equal"] and floor["windows"] == -(-(3 * 4096 + 123) // 8)
    for result in (beyond, identical):
        assert result["fused"] == result["eager"], result["name"]
    assert beyond["eager"]["bad"] >= 1 and beyond["eager"]["worst_at"] == 4096 + 9 and beyond["eager"]["nonfinite"] == 1
    assert identical["eager"]["worst_ratio"] == 0 and identical["eager"]["bad"] == 0
    # only float32, contiguous, on a GPU unless forced
    assert report["applies"] == [False, True, False, False]
