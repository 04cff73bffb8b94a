"""Record a real Nsight Compute CSV with the speed-of-light metrics (issue 15's test fixture).

    PYTHONPATH=.:server python benchmarks/gpu/ncu_metrics.py OUT_DIR   (or run_all.py ncu_metrics:90)

Profiles an Inductor softmax over 4096 x 65536 floats (1 GiB in, 1 GiB out; a looped reduction
that reads its rows twice) and a relu over the same input, with the SpeedOfLight section plus
``dram__bytes_read.sum``, ``dram__bytes_write.sum``, ``lts__t_sector_hit_rate.pct`` and
``gpu__time_duration.sum``, with ``--clock-control none``. Writes the CSV as ncu printed it
(``ncu_sol_metrics.csv``) and a JSON with the command and ncu's version, so the parser's tests
run on what ncu 2025.3 really writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

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
    os.makedirs(out_dir, exist_ok=True)
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    script = os.path.join(out_dir, "ncu_program.py")
    with open(script, "w") as handle:
        handle.write(PROGRAM)
    command = [ncu, "--csv", "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
               "--section", "SpeedOfLight", "--metrics", METRICS, "-k", "regex:^triton_", sys.executable, script]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=float(os.environ.get(
        "KERNELOPT_GPU_BUDGET_S", "90")) - 5)
    wall = time.monotonic() - began
    with open(os.path.join(out_dir, "ncu_sol_metrics.csv"), "w") as handle:
        handle.write(done.stdout)
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    info = {"command": command[:-2] + ["python3", "ncu_program.py"], "returncode": done.returncode,
            "wall_s": round(wall, 1), "ncu": version[-1] if version else None, "stderr_tail": done.stderr[-1500:],
            "csv_lines": done.stdout.count("\n")}
    with open(os.path.join(out_dir, "ncu_sol_metrics.json"), "w") as handle:
        json.dump(info, handle, indent=2)
    return info


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "ncu-metrics-out"), indent=2))
