"""GPU smoke check: versions, compile + parse + reload a dump, and one ncu call.

Run on the device: PYTHONPATH=.:server python benchmarks/gpu/smoke.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time


def run(out_dir: str) -> dict:
    import torch
    import triton

    info: dict = {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0]}
    info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    try:
        info["ncu"] = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip().splitlines()[-1]
    except Exception as exc:  # noqa: BLE001
        info["ncu"] = f"unavailable: {exc}"
    from kernelopt_core.artifacts import discover
    from kernelopt_core.compile import compile_problem
    from kernelopt_core.graph_module import call_graph, load_graph_module, make_inputs

    started = time.perf_counter()
    result = compile_problem("examples/gelu_mlp.py", os.path.join(out_dir, "gelu_dump"), "max-autotune", "cuda")
    info["compile_s"] = round(time.perf_counter() - started, 1)
    info["compile_err"] = result.max_abs_err
    graphs, problems = discover(os.path.join(out_dir, "gelu_dump"))
    info["graphs"] = [{"name": g.name, "kernels": [(k.name, k.kind) for k in g.kernels],
                       "extern": [c.op for c in g.extern_calls]} for g in graphs]
    info["problems"] = [str(p) for p in problems]
    module = load_graph_module(graphs[0].path, "cuda")
    out = call_graph(module, make_inputs(module, 0))
    torch.cuda.synchronize()
    info["reload_ok"] = bool(torch.isfinite(out[0]).all().item())
    return info


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/smoke"
    os.makedirs(out, exist_ok=True)
    print(json.dumps(run(out), indent=1, default=str))
