"""Record a real Nsight Compute CSV with the speed-of-light metrics (issue 15's test fixture).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT ncu_metrics:90

Profiles an Inductor softmax over 4096 x 65536 floats (1 GiB in, 1 GiB out; a looped reduction
that reads its rows twice) and a relu over the same input, with the SpeedOfLight section plus
``dram__bytes_read.sum``, ``dram__bytes_write.sum``, ``lts__t_sector_hit_rate.pct`` and
``gpu__time_duration.sum``, with ``--clock-control none``. Writes the CSV as ncu printed it
(``ncu_sol_metrics.csv``) and a JSON with the command and ncu's version, so the parser's tests
run on what ncu 2025.3 really writes. It runs ncu itself, not through kernelopt, so that the CSV is
ncu's own. Needs the GPU. Knob: ``KERNELOPT_GPU_BUDGET_S`` (default 90).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import Budget, environment, write_json

METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"
PROGRAM = """
import torch
x = torch.randn(4096, 65536, device="cuda")
soft = torch.compile(lambda t: torch.softmax(t, dim=-1))
relu = torch.compile(lambda t: torch.relu(t))
for _ in range(2):
    soft(x); relu(x)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
soft(x); relu(x)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
"""


def run(out_dir: str) -> dict[str, Any]:
    from kernelopt_core.measure.ncu import find_ncu

    os.makedirs(out_dir, exist_ok=True)
    budget = Budget.from_env(90.0)
    ncu = find_ncu()
    script = os.path.join(out_dir, "ncu_program.py")
    with open(script, "w") as handle:
        handle.write(PROGRAM)
    command = [ncu, "--csv", "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
               "--section", "SpeedOfLight", "--metrics", METRICS, "-k", "regex:^triton_", sys.executable, script]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget.left() - 5)
    wall = time.monotonic() - began
    with open(os.path.join(out_dir, "ncu_sol_metrics.csv"), "w") as handle:
        handle.write(done.stdout)
    info = {"environment": environment("cuda:0"), "command": command[:-2] + ["python3", "ncu_program.py"],
            "returncode": done.returncode, "wall_s": round(wall, 1), "stderr_tail": done.stderr[-1500:],
            "csv_lines": done.stdout.count("\n")}
    write_json(os.path.join(out_dir, "ncu_sol_metrics.json"), info)
    return info


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "ncu-metrics-out"), indent=2))
