"""Containment and bounded-memory gates on the GPU (issues 17 and 20).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT containment:300
    KERNELOPT_CONTAINMENT_DEVICE=cpu KERNELOPT_CONTAINMENT_SIZES= python -m benchmarks.gpu.containment OUT  # CPU

A driver over the sandbox's and the gates' public Python API (``kernelopt_core.sandbox``,
``kernelopt_core.gates.run_cascade``): it plants candidates no CLI command would write.

1. **Sandbox**: a contained candidate process on CUDA (Landlock, seccomp, CUDA IPC exchange).
2. **Small graphs** (the corpus problems compiled for CUDA): the unchanged kernel, a two-kernel
   launcher with a scratch buffer, a wrong kernel, a kernel that patches the checker, and one that
   writes a file, each through the gates; verdicts, containment and times.
3. **Real sizes** (``KERNELOPT_CONTAINMENT_SIZES``, default "relu:4096x262144,softmax:8192x131072"):
   each graph of 4-8 GB compiled with max-autotune; the unchanged kernel and a wrong one through
   gates 1-3 (and 4 for the unchanged one); the peak GPU memory of each gate next to the graph's
   working set, and the cascade's wall time.

Writes ``containment.{json,md}`` after every part. Changes no GPU clock or setting.
Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 300), ``KERNELOPT_CONTAINMENT_SIZES`` (empty: skip part 3),
``KERNELOPT_CONTAINMENT_DEVICE`` (default cuda; ``cpu`` is a local check of this script).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any

from benchmarks.gpu.devicescript import ROOT, Budget, env_text, environment, failure, write_json, write_record

DEVICE = env_text("KERNELOPT_CONTAINMENT_DEVICE", "cuda")
if os.path.join(ROOT, "tests") not in sys.path:  # the adversarial corpus and its runner live with the tests
    sys.path.insert(0, os.path.join(ROOT, "tests"))


def sandbox_probe() -> dict[str, Any]:
    from kernelopt_core.sandbox.policy import landlock_abi
    from kernelopt_core.sandbox.process import SandboxProcess

    began = time.monotonic()
    flavor, device = ("cuda", "cuda:0") if DEVICE == "cuda" else ("cpu", "cpu")
    with SandboxProcess.start(flavor, device) as process:
        started = time.monotonic() - began
        memory = process.call("memory")
        target = os.path.join(tempfile.gettempdir(), f"kernelopt-planted-{uuid.uuid4().hex}")
        planted = process.call("load_kernel", name="k", source=f"open({target!r}, 'w').write('x')\n",
                               device_str=DEVICE)
        return {"landlock_abi": landlock_abi(), "start_s": round(started, 2),
                "containment": process.containment.to_json(), "memory": memory,
                "file_write_refused": (not planted.get("ok")) and bool(planted.get("violation")),
                "file_exists": os.path.exists(target)}


def _launcher(kernel_name: str, params: list[str]) -> str | None:
    """A split-reduction launcher for a one-input row-sum-times-0.5 kernel (the corpus's row_sum)."""
    outputs = [p for p in params if p.startswith(("out_ptr", "in_out_ptr"))]
    inputs = [p for p in params if p.startswith("in_ptr")]
    if len(outputs) != 1 or len(inputs) != 1 or params[-2:] != ["xnumel", "r0_numel"]:
        return None
    out, inp = outputs[0], inputs[0]
    return f'''import torch
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
def _finish(part_ptr, out_ptr, SPLIT: tl.constexpr):
    row = tl.program_id(0)
    total = tl.sum(tl.load(part_ptr + row * SPLIT + tl.arange(0, SPLIT)), 0)
    tl.store(out_ptr + row, total * 0.5)


def {kernel_name}({", ".join(params)}):
    split = 4
    partials = torch.empty((xnumel, split), dtype=torch.float32, device={inp}.device)
    _partials[(xnumel, split)]({inp}, partials, r0_numel, SPLIT=split, CHUNK=triton.cdiv(r0_numel, split), BLOCK=128)
    _finish[(xnumel,)](partials, {out}, SPLIT=split)
'''


def _wrong(source: str) -> str:
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "tl.store(" in line:
            head, _, rest = line.partition("tl.store(")
            pointer, _, tail = rest.partition(", ")
            value, _, mask = tail.partition(", ")
            lines[i] = f"{head}tl.store({pointer}, {value} + 0.5, {mask}"
            return "".join(lines)
    return source


PATCH = '''
import kernelopt_core.gates.kernel as _kernel
from kernelopt_core.gates.kernel import RunCheck as _RunCheck
_kernel.compare_runs = lambda label, *a, **k: _RunCheck(label)
'''


def _summary(result: Any) -> dict[str, Any]:
    return {"decision": result.decision, "failed_gate": result.failed_gate, "reason": result.reason[:400],
            "seconds": round(result.seconds, 2), "quarantined": result.quarantined,
            "containment": result.containment,
            "gates": [{"gate": v.gate, "status": v.status, "seconds": round(v.seconds, 2),
                       "memory": v.numbers.get("memory"), "sanitizer": v.numbers.get("sanitizer"),
                       "reason": v.reason[:300]} for v in result.gates]}


def small_graphs(work: str) -> dict[str, Any]:
    from adversarial.runner import compile_problems

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.artifacts.kernel_arguments import runtime_parameters
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graphs = compile_problems(os.path.join(work, "corpus"), device=DEVICE)
    out: dict[str, Any] = {}
    row = parse_output_code(graphs["row_sum"])
    kernel = row.kernels[0]
    launcher = _launcher(kernel.name, runtime_parameters(kernel.source, kernel.name))
    target = os.path.join(tempfile.gettempdir(), f"kernelopt-planted-{uuid.uuid4().hex}")
    cases = {
        "unchanged": ((1, 2, 3, 4), kernel.source),
        "launcher-split": ((2, 3, 4), launcher),  # gate 1 of launchers is checked on the CPU
        "wrong": ((1, 2, 3), _wrong(kernel.source)),
        "patches-the-checker": ((2, 3), PATCH + _wrong(kernel.source)),
        "writes-a-file": ((2,), f"open({target!r}, 'w').write('x')\n" + kernel.source),
    }
    for label, (gates, source) in cases.items():
        if source is None:
            out[label] = {"skipped": "the CUDA kernel's parameters do not fit the launcher template"}
            continue
        try:
            result = run_cascade(row, {kernel.name: source}, CascadeConfig(run_gates=gates,
                                                                         workdir=os.path.join(work, label)))
            out[label] = _summary(result)
        except Exception as exc:  # noqa: BLE001 - recorded, the rest still runs
            out[label] = failure(exc)
    out["planted_file_exists"] = os.path.exists(target)
    return out


PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn({rows}, {cols})]

def get_init_inputs():
    return []
'''


def real_sizes(work: str, budget: Budget) -> dict[str, Any]:
    from kernelopt_core.artifacts import discover
    from kernelopt_core.compile import compile_problem
    from kernelopt_core.gates import CascadeConfig, run_cascade

    spec = env_text("KERNELOPT_CONTAINMENT_SIZES", "relu:4096x262144,softmax:8192x131072")
    if not spec:
        return {}
    exprs = {"relu": "torch.relu(x)", "softmax": "torch.softmax(x, dim=-1)", "rmsnorm":
             "x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)",
             "maxpool": "torch.nn.functional.max_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0)"}
    out: dict[str, Any] = {}
    for item in spec.split(","):
        if not budget.allows(20.0):
            out[item] = {"skipped": "budget"}
            continue
        name, _, shape = item.partition(":")
        rows, cols = (int(v) for v in shape.split("x"))
        folder = os.path.join(work, f"real-{name}")
        os.makedirs(folder, exist_ok=True)
        problem = os.path.join(folder, "problem.py")
        with open(problem, "w") as handle:
            handle.write(PROBLEM.format(expr=exprs[name], rows=rows, cols=cols))
        entry: dict[str, Any] = {"shape": [rows, cols], "input_gb": round(rows * cols * 4 / 1e9, 2)}
        try:
            began = time.monotonic()
            compile_problem(problem, os.path.join(folder, "dump"), device=DEVICE, mode="max-autotune-no-cudagraphs")
            entry["compile_s"] = round(time.monotonic() - began, 1)
            graphs, _ = discover(os.path.join(folder, "dump"))
            graph = max(graphs, key=lambda g: len(g.launches))
            kernel = graph.kernels[0]
            entry["kernel"] = kernel.name
            cases = [("unchanged", (1, 2, 3, 4), kernel.source)]
            pinned = _pinned(kernel)
            if pinned is not None:
                cases.append(("pinned-config (a correct rewrite)", (1, 2, 3), pinned))
            cases.append(("wrong", (1, 2, 3), _wrong(kernel.source)))
            for label, gates, source in cases:
                if not budget.allows(20.0):
                    entry[label] = {"skipped": "budget"}
                    continue
                result = run_cascade(graph, {kernel.name: source},
                                     CascadeConfig(run_gates=gates, workdir=os.path.join(folder, label)))
                entry[label] = _summary(result)
        except Exception as exc:  # noqa: BLE001
            entry.update(failure(exc))
        out[name] = entry
    return out


def _pinned(kernel: Any) -> str | None:
    """The kernel with its first launch config fixed: a correct rewrite."""
    from kernelopt_core.gates.launcher import set_launch_configs
    from kernelopt_core.gates.ptx_compile import shared_compiler

    configs = shared_compiler().compile(kernel.name, kernel.source).get("configs") or []
    if not configs or kernel.heuristic == "template":
        return None
    first = configs[0]
    return set_launch_configs(kernel.source, kernel.name,
                              [{**first["kwargs"], "num_warps": first["num_warps"], "num_stages": first["num_stages"]}])


def _markdown(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    probe = data.get("sandbox", {})
    lines += ["## Sandbox", "", f"- {json.dumps(probe)[:1500]}", ""]
    for part in ("small_graphs", "real_sizes"):
        lines += [f"## {part}", "", "| case | decision | failed gate | seconds | gates (status, s, peak GB) |",
                  "|---|---|---|---|---|"]
        for label, entry in (data.get(part) or {}).items():
            if not isinstance(entry, dict):
                lines.append(f"| {label} | {entry} | | | |")
                continue
            cases = {label: entry} if "decision" in entry or "error" in entry else {
                f"{label} {k}": v for k, v in entry.items() if isinstance(v, dict)}
            for case, result in cases.items():
                if "decision" not in result:
                    lines.append(f"| {case} | {result.get('error') or result.get('skipped')} | | | |")
                    continue
                gates = "; ".join(
                    f"{g['gate']} {g['status']} {g['seconds']} s"
                    + (f" {((g.get('memory') or {}).get('device_peak_bytes') or 0) / 1e9:.1f} GB" if g.get("memory") else "")
                    for g in result["gates"])
                lines.append(f"| {case} | {result['decision']} | {result['failed_gate']} | {result['seconds']} | {gates} |")
        lines.append("")
    return lines


def run(out_dir: str) -> dict[str, Any]:
    budget = Budget.from_env(300.0)
    work = tempfile.mkdtemp(prefix="kernelopt-containment-")
    data: dict[str, Any] = {"environment": environment(DEVICE)}
    try:
        for part, call in (("sandbox", sandbox_probe), ("small_graphs", lambda: small_graphs(work)),
                           ("real_sizes", lambda: real_sizes(work, budget))):
            if not budget.allows(20.0):
                data[part] = {"skipped": "budget"}
                continue
            began = time.monotonic()
            try:
                data[part] = call()
            except Exception as exc:  # noqa: BLE001 - recorded, the next part still runs
                data[part] = failure(exc)
            data[f"{part}_s"] = round(time.monotonic() - began, 1)
            write_json(os.path.join(out_dir, "containment.json"), data)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the compiled graphs; the records are in out_dir
    write_record(out_dir, "containment", data, f"Containment and bounded-memory gates on {DEVICE}", _markdown(data))
    return {"sandbox": data.get("sandbox"), "small": {k: (v.get("decision"), v.get("failed_gate"))
                                                      for k, v in (data.get("small_graphs") or {}).items()
                                                      if isinstance(v, dict)}}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "containment-out"), indent=2, default=str))
