"""Where a candidate's compile time goes on the device machine (issue 25: a screen took 25-36 s on the
H200, 17-25 s of it gate 1 compiling one launch config that takes 0.4 s on a 2-core CPU machine).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT compile_cost:120
    python -m benchmarks.gpu.compile_cost OUT_DIR         (anywhere: the compile targets sm_90 without a GPU)

1. **gate 1's compile** (``PtxCompiler``, no disk cache): three variants of each fixture kernel in turn
   (the first pays the compile zygote's start), each with its units' split: the contained process's
   start, the call, and within it importing the kernel module and compiling it;
2. **a fresh Python process**, the steps a gate-2 candidate process repeats: ``import torch``, the CUDA
   context (``torch.cuda.init``, on a GPU), Inductor's runtime imports, and compiling and launching
   one kernel through ``AsyncCompile.triton`` (twice: cold, then the same process again).

Writes ``compile_cost.{json,md}``. Knob: ``KERNELOPT_GPU_BUDGET_S`` (the second part runs only with a minute left; default 300). Changes no GPU setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import FIXTURE_DUMPS, Budget, environment, table, write_record

GRAPHS = ("softmax", "elementwise")
VARIANTS = 3

# Run in a fresh interpreter: prints one JSON line of step seconds.
FRESH_PROCESS = r"""
import json, sys, time
steps = {}
t = time.monotonic()
import torch
steps["import_torch_s"] = time.monotonic() - t
gpu = torch.cuda.is_available()
t = time.monotonic()
if gpu:
    torch.cuda.init(); torch.empty(1, device="cuda")
steps["cuda_context_s"] = time.monotonic() - t
t = time.monotonic()
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.runtime import triton_heuristics  # noqa: F401
steps["inductor_imports_s"] = time.monotonic() - t
name, source = sys.argv[1], open(sys.argv[2]).read()
for attempt in ("cold", "again") if gpu else ():  # Inductor's kernels need a GPU backend
    t = time.monotonic()
    kernel = AsyncCompile().triton(name, source + f"\n# {attempt}\n", "cuda" if gpu else "cpu")
    kernel = kernel.result() if hasattr(kernel, "result") else kernel
    if hasattr(kernel, "precompile"):
        kernel.precompile()
    steps[f"compile_{attempt}_s"] = time.monotonic() - t
print(json.dumps({k: round(v, 3) for k, v in steps.items()}))
"""


def _kernels() -> list[tuple[str, str, str]]:
    """(graph, kernel name, source) of each fixture graph's first Triton kernel."""
    from kernelopt_core.artifacts import parse_output_code

    found = []
    for graph in GRAPHS:
        path = os.path.join(FIXTURE_DUMPS, graph, "output_code.py")
        if os.path.isfile(path):
            kernel = parse_output_code(path).kernels[0]
            found.append((graph, kernel.name, kernel.source))
    return found


def _gate1(kernels: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    from kernelopt_core.gates.ptx_compile import PtxCompiler

    rows = []
    begin = time.monotonic()
    compiler = PtxCompiler(cache=False)
    try:
        for graph, name, source in kernels:
            for variant in range(VARIANTS):
                result = compiler.compile(name, source + f"\n# variant {variant}\n")
                rows.append({"graph": graph, "kernel": name, "variant": variant, "ok": result.get("ok"),
                             "seconds": result.get("seconds"), "cache": result.get("cache"),
                             "units_s": result.get("units_s"), "error": result.get("error")})
    finally:
        compiler.close()
    rows.append({"total_s": round(time.monotonic() - begin, 3)})
    return rows


def _fresh_process(kernels: list[tuple[str, str, str]], work: str) -> list[dict[str, Any]]:
    rows = []
    for graph, name, source in kernels[:1]:
        path = os.path.join(work, f"{name}.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        for run in range(2):
            begin = time.monotonic()
            done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, name, path], capture_output=True, text=True,
                                  timeout=300, env={**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"})
            row: dict[str, Any] = {"graph": graph, "run": run, "wall_s": round(time.monotonic() - begin, 3)}
            try:
                row.update(json.loads(done.stdout.strip().splitlines()[-1]))
            except (IndexError, ValueError):
                row["error"] = (done.stderr or done.stdout)[-1500:]
            rows.append(row)
    return rows


def run(out_dir: str) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    budget = Budget.from_env(300.0)
    data: dict[str, Any] = {"environment": environment(), "gate1": [], "fresh_process": []}
    kernels = _kernels()
    data["kernels"] = [{"graph": g, "kernel": n} for g, n, _ in kernels]
    data["gate1"] = _gate1(kernels)
    _write(out_dir, data)
    if budget.left() > 60:
        data["fresh_process"] = _fresh_process(kernels, out_dir)
    _write(out_dir, data)
    return {"gate1": [r.get("seconds") for r in data["gate1"]], "fresh_process": data["fresh_process"]}


def _write(out_dir: str, data: dict[str, Any]) -> None:
    def units(row: dict[str, Any]) -> str:
        return "; ".join(f"{u.get('start_s')} / {u.get('call_s')} ({u.get('load_module_s')}, {u.get('compile_s')})"
                         for u in row.get("units_s") or [])

    body = ["## Gate 1's compile (no disk cache), each unit: process start + call (import, compile) s", ""]
    body += table(("graph", "variant", "seconds", "units: start / call (import, compile)"),
                  [(r["graph"], r["variant"], r["seconds"], units(r)) for r in data["gate1"] if "graph" in r])
    body += ["", "## A fresh process (what a gate-2 candidate process repeats), seconds", ""]
    body += table(("run", "wall", "import torch", "CUDA context", "Inductor imports", "compile cold", "compile again",
                   "error"),
                  [(r["run"], r["wall_s"], r.get("import_torch_s"), r.get("cuda_context_s"), r.get("inductor_imports_s"),
                    r.get("compile_cold_s"), r.get("compile_again_s"), (r.get("error") or "")[-200:] or None)
                   for r in data["fresh_process"]])
    write_record(out_dir, "compile_cost", data, "Where a candidate's compile time goes", body)


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp/compile_cost"), indent=1))
