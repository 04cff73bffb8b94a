"""Deploy (issue 10): the user's own torch.compile(model), with and without kernelopt.enable().

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT deploy:180
    python -m benchmarks.gpu.deploy OUT_DIR      # without a GPU: a dry run on the CPU backend, tiny sizes

1. **Find an accepted kernel.** For fixture models (``benchmarks/problems/fixture_models``:
   sum_reduce, softmax, rmsnorm, layernorm_gelu, in that order), compile with ``kernelopt compile``
   (mode "default": what a plain ``torch.compile(model)`` does), then run launch-config variants of
   its reduction kernel (the optimizer's own ``launch_config`` rewrite family) through the real four
   gates, until one is accepted or the budget says stop. The best accepted one goes into a store.
2. **Time the user's program, same path both sides.** In a fresh process: the model compiled by
   plain ``torch.compile(model)`` (A) and by ``torch.compile(model, backend=kernelopt.backend)``
   (B), interleaved A/B through the compiled callable (``ab_compare``: L2 flush, rounds, bootstrap
   CI). B must show the substitution (log + the source file of the kernel Inductor loaded).
3. **The literal two-process form, warm cache.** Process 1: ``torch.compile(model)``; process 2:
   ``kernelopt.enable(); torch.compile(model)`` on the FX graph cache process 1 left warm. Each is
   timed alone (median and CI); process 2 must still substitute on the warm cache.

Steps 2 and 3 are programs of their own (below): what they time is the user's torch.compile, which no
CLI command does. Writes ``deploy.{json,md}`` (and the store) into OUT_DIR, returns a summary. Without
a GPU it runs the same steps on the CPU Triton backend at tiny sizes (a dry run of the code paths;
its times mean nothing). Never changes GPU clocks or settings. Knob: ``KERNELOPT_GPU_BUDGET_S``
(default 180).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from benchmarks.gpu.devicescript import (
    FIXTURE_MODELS,
    ROOT,
    Budget,
    cell,
    child_env,
    environment,
    failure,
    kernelopt,
    table,
    use_device,
    write_record,
)

MODE = "default"
MODEL_ORDER = ("sum_reduce", "softmax", "rmsnorm", "layernorm_gelu")
MAX_VARIANTS = 6  # launch configs tried per kernel
TIMING_RESERVE_S = 75.0  # kept for steps 2 and 3

# Step 2, in a fresh process: A = torch.compile(model), B = torch.compile(model, backend=kernelopt.backend).
AB_PROGRAM = r'''
import gc, hashlib, json, os, sys
problem, device = sys.argv[1], sys.argv[2]
if device == "cpu":
    from kernelopt_core.backends import cpu_triton
    cpu_triton.activate()
import torch
import kernelopt
from kernelopt_core.compile import build_problem, load_problem
from kernelopt_core.measure.timing import ab_compare

torch.set_grad_enabled(False)
module = load_problem(problem)
model, inputs = build_problem(module, device)
eager = model(*inputs)
compiled_a = torch.compile(model)                      # the user's program as it is
out_a = compiled_a(*inputs)
compiled_b = torch.compile(model, backend=kernelopt.backend)   # the same, with the accepted kernels
out_b = compiled_b(*inputs)
loaded = {}
for obj in gc.get_objects():
    if type(obj).__name__ == "CachingAutotuner":
        fn = getattr(obj.fn, "fn", None)
        if fn is not None:
            text = open(fn.__code__.co_filename, encoding="utf-8").read()
            loaded.setdefault(obj.inductor_meta.get("kernel_name"), []).append(hashlib.sha256(text.encode()).hexdigest())

def make_inputs(i):
    torch.manual_seed(1000 + i)
    return [torch.randn_like(x) if x.is_floating_point() else x for x in inputs]

ab = ab_compare(lambda xs: compiled_a(*xs), lambda xs: compiled_b(*xs), device=device,
                path_a="compiled-callable", path_b="compiled-callable", make_inputs=make_inputs)
print("RESULT " + json.dumps({
    "substitutions": [s.__dict__ for s in kernelopt.substitutions()], "loaded": loaded,
    "max_abs_a_vs_eager": (out_a.double() - eager.double()).abs().max().item(),
    "max_abs_b_vs_eager": (out_b.double() - eager.double()).abs().max().item(),
    "max_abs_b_vs_a": (out_b.double() - out_a.double()).abs().max().item(),
    "ab": ab.to_json() if hasattr(ab, "to_json") else {"speedup": ab.speedup, "ci_low": ab.ci_low,
                                                       "ci_high": ab.ci_high, "rounds": ab.rounds, "path": ab.path},
}, default=str))
'''

# Step 3, one process each: plain torch.compile, or kernelopt.enable() first. Timed alone.
ALONE_PROGRAM = r'''
import json, os, sys
problem, device, use = sys.argv[1], sys.argv[2], sys.argv[3]
if device == "cpu":
    from kernelopt_core.backends import cpu_triton
    cpu_triton.activate()
import torch
report = None
if use == "enable":
    import kernelopt
    report = kernelopt.enable().__dict__
from kernelopt_core.compile import build_problem, load_problem
from kernelopt_core.measure.timing import time_callable
torch.set_grad_enabled(False)
model, inputs = build_problem(load_problem(problem), device)
compiled = torch.compile(model)
compiled(*inputs)
stats = time_callable(lambda: compiled(*inputs), device=device, path="compiled-callable")
from torch._dynamo.utils import counters
subs = []
if use == "enable":
    import kernelopt
    subs = [s.__dict__ for s in kernelopt.substitutions()]
print("RESULT " + json.dumps({"report": report, "substitutions": subs, "stats": stats.to_json(),
                              "fx_cache": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")}},
                             default=str))
'''


def _program(code: str, args: list[str], env: dict[str, str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Run one of the programs above in a fresh process: (its RESULT json or None, the tail of its output)."""
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(5.0, timeout))
    except subprocess.TimeoutExpired as exc:
        return None, f"timed out after {exc.timeout:.0f} s"
    tail = (done.stdout[-1500:] + "\n" + done.stderr[-3000:]).strip()
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT ")), tail
    return None, f"exit {done.returncode}: {tail}"


def _program_env(**extra: str) -> dict[str, str]:
    """The user's environment: kernelopt not disabled, torch's warnings quiet."""
    env = child_env(PYTHONWARNINGS="ignore", **extra)
    env.pop("KERNELOPT_DISABLE", None)
    return env


def _search(name: str, work: str, device: str, budget: Budget) -> dict[str, Any]:
    """Compile one fixture model, run launch-config variants through the gates; the best accepted."""
    from kernelopt_core.accepted import entry_from_cascade
    from kernelopt_core.artifacts import discover
    from kernelopt_core.gates.cascade import run_cascade
    from kernelopt_core.gates.verdict import CascadeConfig
    from kernelopt_core.search.rewrites.base import RewriteContext
    from kernelopt_core.search.rewrites.kernel_source import parse_kernel_module
    from kernelopt_core.search.rewrites.launch_config import LaunchConfigFamily

    problem = os.path.join(FIXTURE_MODELS, f"{name}.py")
    record: dict[str, Any] = {"model": name, "problem": problem, "candidates": []}
    folder = os.path.join(work, name)
    compiled = kernelopt(["compile", problem, "--out", os.path.join(folder, "dump"), "--mode", MODE,
                          "--device", device], timeout_s=min(150.0, budget.left() - TIMING_RESERVE_S), cwd=work,
                         log_path=os.path.join(folder, "compile.log"))
    record["compile_s"] = compiled.wall_s
    graphs, problems = discover(os.path.join(folder, "dump"))
    graphs = [g for g in graphs if g.launches]
    if not graphs:
        record["error"] = f"no graph with Triton kernels ({compiled.why()}; {[str(p) for p in problems]})"
        return record
    graph = graphs[0]
    record["graph"] = graph.path
    kernels = sorted(graph.kernels, key=lambda k: (k.kind not in ("red", "per"), k.name))
    best: tuple[float, Any, str, dict[str, Any]] | None = None
    for kernel in kernels[:2]:
        module = parse_kernel_module(kernel.source, kernel.name)
        ctx = RewriteContext(module=module, original=module, device="cpu" if device == "cpu" else "cuda",
                             tier="memory-bound")
        variants = LaunchConfigFamily().variants(ctx)[:MAX_VARIANTS]
        record.setdefault("kernels", []).append({"name": kernel.name, "kind": kernel.kind, "variants": len(variants)})
        for variant in variants:
            if budget.left() < TIMING_RESERVE_S + 20:
                record["stopped"] = "budget"
                break
            config = CascadeConfig(device=device, workdir=os.path.join(folder, "verify"), kernel_timing=False,
                                   ab_rounds=None if device != "cpu" else 4)
            try:
                result = run_cascade(graph, {kernel.name: variant.source}, config)
            except Exception as exc:  # noqa: BLE001 - record and go on with the next variant
                record["candidates"].append({"kernel": kernel.name, "title": variant.title,
                                             "error": f"{type(exc).__name__}: {exc}"})
                continue
            data = result.to_json()
            data.pop("diff", None)
            record["candidates"].append({
                "kernel": kernel.name, "title": variant.title, "accepted": result.accepted,
                "failed_gate": result.failed_gate, "speedup": result.speedup, "ci": result.ci,
                "seconds": round(result.seconds, 1), "reason": result.reason})
            if result.accepted and result.speedup is not None and (best is None or result.speedup > best[0]):
                best = (result.speedup, kernel, variant.source, data)
        if best is not None:
            break
    if best is not None:
        speedup, kernel, source, data = best
        gpu = environment(device).get("gpu") or device
        record["entry"] = entry_from_cascade(graph, kernel.name, source, data, gpu=str(gpu))
    return record


def _deploy_timing(problem: str, store: str, device: str, budget: Budget, work: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cache = os.path.join(work, "user_cache_ab")
    ab, tail = _program(AB_PROGRAM, [problem, device],
                        _program_env(KERNELOPT_ACCEPTED_DIR=store, TORCHINDUCTOR_CACHE_DIR=cache),
                        timeout=min(120.0, budget.left() - 5))
    out["in_process_ab"] = ab if ab is not None else {"error": tail[-3000:]}
    cache = os.path.join(work, "user_cache_two_process")
    for use in ("plain", "enable"):  # plain first: it leaves the FX graph cache warm for enable
        if budget.left() < 15:
            out[f"two_process_{use}"] = {"error": "budget"}
            continue
        result, tail = _program(ALONE_PROGRAM, [problem, device, use],
                                _program_env(KERNELOPT_ACCEPTED_DIR=store, TORCHINDUCTOR_CACHE_DIR=cache),
                                timeout=min(90.0, budget.left() - 5))
        out[f"two_process_{use}"] = result if result is not None else {"error": tail[-3000:]}
    plain, enabled = out.get("two_process_plain", {}), out.get("two_process_enable", {})
    if "stats" in plain and "stats" in enabled:
        a, b = plain["stats"], enabled["stats"]
        out["two_process_speedup"] = a["median_ms"] / b["median_ms"]
        # A conservative interval from the two medians' own intervals (not interleaved: indicative only).
        out["two_process_range"] = [a["ci_low_ms"] / b["ci_high_ms"], a["ci_high_ms"] / b["ci_low_ms"]]
    return out


def run(out_dir: str, device: str = "auto") -> dict[str, Any]:
    budget = Budget.from_env(180.0)
    out_dir = os.path.abspath(out_dir)
    device = use_device(device)
    os.environ["KERNELOPT_PROBLEM_SCALE"] = "tiny" if device == "cpu" else "h200"  # the programs inherit it
    summary: dict[str, Any] = {"environment": {**environment(device), "mode": MODE}, "searches": [],
                               "accepted": None, "deploy": None, "notes": []}
    if device == "cpu":
        summary["notes"].append("no GPU: a dry run on the CPU Triton backend at tiny sizes; times mean nothing")
    work = tempfile.mkdtemp(prefix="kernelopt-deploy-")
    store = os.path.join(out_dir, "accepted")
    chosen: dict[str, Any] | None = None
    try:
        for name in MODEL_ORDER:
            if budget.left() < TIMING_RESERVE_S + 40:
                summary["notes"].append(f"budget: stopped the search before {name}")
                break
            try:
                record = _search(name, work, device, budget)
            except Exception as exc:  # noqa: BLE001 - record, try the next model
                record = {"model": name, **failure(exc)}
            entry = record.pop("entry", None)
            summary["searches"].append(record)
            if entry is not None:
                from kernelopt_core.accepted import AcceptedStore

                AcceptedStore(store).add(entry)
                chosen = {"model": name, "problem": record["problem"], "entry": entry.id, "kernel": entry.kernel_name,
                          "gate_speedup": entry.speedup, "gate_ci": entry.ci, "timing_path": entry.timing_path}
                summary["accepted"] = chosen
                break
        from kernelopt_core.measure.worker import close_all_workers

        close_all_workers()  # the gates' worker holds device memory: free it before timing the user's program
        if chosen is None:
            summary["notes"].append("no launch-config variant passed all four gates in the budget: nothing to deploy")
        else:
            summary["deploy"] = _deploy_timing(chosen["problem"], store, device, budget, work)
            summary["headline"] = _headline(chosen, summary["deploy"])
    except Exception as exc:  # noqa: BLE001
        summary.update(failure(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary["seconds"] = round(budget.elapsed(), 1)
    write_record(out_dir, "deploy", summary, "Deploy: torch.compile(model) with and without kernelopt",
                 _markdown(summary))
    return {"accepted": chosen, "headline": summary.get("headline"), "error": summary.get("error"),
            "seconds": summary["seconds"], "device": device}


def _headline(chosen: dict[str, Any], deploy: dict[str, Any]) -> dict[str, Any]:
    ab = deploy.get("in_process_ab") or {}
    subs = ab.get("substitutions") or []
    measured = ab.get("ab") or {}
    enabled = deploy.get("two_process_enable") or {}
    return {
        "model": chosen["model"], "kernel": chosen["kernel"], "entry": chosen["entry"],
        "substituted": bool(subs) and any(s.get("entry_id") == chosen["entry"] for s in subs),
        "speedup": measured.get("speedup"), "ci": [measured.get("ci_low"), measured.get("ci_high")],
        "path": measured.get("path"), "b_matches_a": ab.get("max_abs_b_vs_a"),
        "warm_cache_substituted": bool(enabled.get("substitutions")),
        "warm_cache_fx_hits": (enabled.get("fx_cache") or {}).get("fxgraph_cache_hit"),
        "two_process_speedup": deploy.get("two_process_speedup"),
    }


def _markdown(summary: dict[str, Any]) -> list[str]:
    lines = [f"Mode {summary['environment'].get('mode')}; wall time {summary.get('seconds')} s.", ""]
    lines += [f"> {note}" for note in summary["notes"]]
    rows = []
    for search in summary["searches"]:
        if "error" in search:
            rows.append((search["model"], f"error: {cell(search['error'][:120])}", "", "", "", "", "", ""))
        for c in search.get("candidates", []):
            ci = c.get("ci")
            rows.append((search["model"], cell(c.get("kernel")), cell(c.get("title")), cell(c.get("accepted")),
                         cell(c.get("failed_gate")), cell(c.get("speedup"), ".3f"),
                         f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "-", cell(c.get("seconds"))))
    lines += ["", "## Search (launch-config variants through the four gates)", "",
              *table(("model", "kernel", "variant", "accepted", "failed gate", "speedup", "CI", "s"), rows)]
    head = summary.get("headline")
    if head:
        ci = head["ci"]
        lines += ["", "## The user's program", "",
                  f"- accepted entry {head['entry']} for `{head['kernel']}` ({head['model']})",
                  f"- substituted in the user's torch.compile: **{head['substituted']}**; "
                  f"on a warm FX graph cache in a fresh process: **{head['warm_cache_substituted']}** "
                  f"(FX cache hits {head['warm_cache_fx_hits']})",
                  f"- interleaved A/B through `{head['path']}`: **{cell(head['speedup'], '.3f')}x** "
                  f"(95% CI {cell(ci[0], '.3f')}-{cell(ci[1], '.3f')})",
                  f"- two separate processes (not interleaved, indicative): {cell(head['two_process_speedup'], '.3f')}x",
                  f"- max |B - A| = {head['b_matches_a']}"]
    if summary.get("error"):
        lines += ["", f"**error**: {summary['error']}"]
    return lines


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "deploy-out"), indent=1, default=str))
