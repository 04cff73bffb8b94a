"""The windowed and strided_access families on the H200: real max-autotune kernels in, verdicts out (issue 16).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT window_families:560
    PYTHONPATH=. python benchmarks/gpu/window_families.py OUT_DIR                     # on the GPU
    PYTHONPATH=. python benchmarks/gpu/window_families.py OUT_DIR --device cpu --scale tiny --problems avg_pool1d

For each problem, in its own process under a per-problem cap:

1. compile it with ``torch.compile(mode="max-autotune")`` (``kernelopt_core.compile.compile_problem``);
2. time the graph once with every launch's arguments recorded (``graph_jobs.time_launches_job``) and
   measure the device's copy bandwidth (cached per GPU): the main kernel's ideal bytes, its timed
   duration and speed of light; the analyst's tier and causes (ncu too with ``KERNELOPT_WINDOW_NCU=1``);
3. build the ``RewriteContext`` the search would (evidence from the analyst) and ask both families
   for candidates: a family that declines records its reason (e.g. already at 100% SOL);
4. run each candidate (at most ``KERNELOPT_WINDOW_VARIANTS`` per family, default 3) through the
   gates (``KERNELOPT_WINDOW_GATES``, default 1,2,3,4): the verdict of every gate, gate 4's
   end-to-end speedup with its CI and the kernel-alone speedup, and the kernel's SOL after
   (SOL before x kernel speedup; kernel figures stay kernel figures).

Problems: the KernelBench-scale ``avg_pool1d``, ``max_pool2d_dilated``, ``sum_cols``, ``mean_cols``
(benchmarks/problems/kbscale) and three written here at the explore sizes: ``max_pool2d_k4s1p1`` and
``avg_pool2d_k3s1p1`` of (32, 64, 512, 512), ``nchw_to_nhwc`` of (64, 256, 128, 128)
(``KERNELOPT_WINDOW_PROBLEMS=a,b`` for a subset). Writes ``window_families.json`` and
``window_families.md`` after every problem. ``KERNELOPT_GPU_BUDGET_S`` (default 560) and
``KERNELOPT_WINDOW_PER_PROBLEM_S`` (default 200) bound the run. Imports only torch, triton and
kernelopt_core (no anthropic, pygls or watchdog); never changes GPU clocks or settings.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KBSCALE = os.path.join(ROOT, "benchmarks", "problems", "kbscale")
FAMILY_NAMES = ("windowed", "strided_access")
RESULTS = "window_families.json"
# name -> (forward expression, h200 shape, tiny shape) for the problems written here
WRITTEN = {
    "max_pool2d_k4s1p1": ("F.max_pool2d(x, 4, 1, 1)", (32, 64, 512, 512), (2, 3, 11, 13)),
    "avg_pool2d_k3s1p1": ("F.avg_pool2d(x, 3, 1, 1)", (32, 64, 512, 512), (2, 3, 11, 13)),
    "nchw_to_nhwc": ("x.permute(0, 2, 3, 1).contiguous()", (64, 256, 128, 128), (2, 8, 5, 6)),
}
ORDER = ("avg_pool1d", "max_pool2d_k4s1p1", "max_pool2d_dilated", "avg_pool2d_k3s1p1", "sum_cols", "mean_cols",
         "nchw_to_nhwc")
_PROBLEM = '''"""{name}: written by benchmarks/gpu/window_families.py."""
import os
import torch
import torch.nn as nn
import torch.nn.functional as F
SIZES = {{"h200": {h200}, "tiny": {tiny}}}
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
'''


def _failure(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


def problem_path(name: str, out_dir: str) -> str:
    if name in WRITTEN:
        expr, h200, tiny = WRITTEN[name]
        folder = os.path.join(out_dir, "problems")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}.py")
        with open(path, "w") as handle:
            handle.write(_PROBLEM.format(name=name, expr=expr, h200=h200, tiny=tiny))
        return path
    return os.path.join(KBSCALE, f"{name}.py")


# --- one problem, in its own process --------------------------------------------------------------


def evaluate_problem(name: str, out_dir: str, device: str, scale: str, gates: tuple[int, ...],
                     per_family: int) -> dict[str, Any]:
    """Compile one problem, analyse its main kernel, run the families' candidates through the gates."""
    begin = time.monotonic()
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale
    cuda = device.startswith("cuda")
    if not cuda:
        from kernelopt_core.backends import cpu_triton

        cpu_triton.activate()
    import gc

    import torch

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.compile import compile_problem

    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale}
    compiled = compile_problem(problem_path(name, out_dir), os.path.join(out_dir, "work", name),
                               "max-autotune" if cuda else "default", "cuda" if cuda else "cpu")
    entry.update(compile_s=compiled.compile_s, mode=compiled.mode)
    torch._dynamo.reset()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    if not compiled.graphs:
        return {**entry, "error": "torch.compile wrote no graph"}
    graph = max((parse_output_code(p) for p in compiled.graphs), key=lambda g: (len(g.launches), len(g.kernels)))
    entry["dump"] = os.path.relpath(graph.path, out_dir)
    from kernelopt_core.measure.graph_jobs import time_launches_job
    from kernelopt_core.measure.launch_timing import launch_timing_from_json

    timing = launch_timing_from_json(time_launches_job({"dump": graph.path, "device": device, "overheads": False}))
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    kernel, ctx, analysis = _context(graph, timing, device)
    entry.update(kernel=kernel.name, kind=kernel.kind, tier=analysis.tier, causes=ctx.evidence.get("causes"),
                 sol_before_pct=ctx.evidence.get("sol_pct"), ideal_bytes=ctx.evidence.get("ideal_bytes"),
                 kernel_ms=ctx.evidence.get("duration_ms"), families={}, candidates=[])
    from kernelopt_core.gates import CascadeConfig, CascadeSetupError, run_cascade
    from kernelopt_core.search.rewrites import FAMILIES

    for family_name in FAMILY_NAMES:
        family = FAMILIES[family_name]
        why = family.not_applicable(ctx)
        entry["families"][family_name] = why or "applies"
        if why:
            continue
        for rewrite in family.variants(ctx)[:per_family]:
            row: dict[str, Any] = {"family": family_name, "title": rewrite.title, "params": {
                k: v for k, v in rewrite.params.items() if k not in ("window", "copy", "reduction")}}
            source_path = os.path.join(out_dir, "candidates", name, f"{family_name}_{len(entry['candidates'])}.py")
            os.makedirs(os.path.dirname(source_path), exist_ok=True)
            with open(source_path, "w") as handle:
                handle.write(rewrite.source)
            row["source"] = os.path.relpath(source_path, out_dir)
            started = time.monotonic()
            try:
                result = run_cascade(graph, {kernel.name: rewrite.source},
                                     CascadeConfig(device=device, run_gates=gates,
                                                   workdir=os.path.join(out_dir, "restitched", name)))
                row.update(_verdicts(result, kernel.name, ctx.evidence.get("sol_pct")))
            except CascadeSetupError as exc:
                row.update(_failure(exc))
            row["seconds"] = round(time.monotonic() - started, 1)
            entry["candidates"].append(row)
            print(f"  {name} {rewrite.title}: {row.get('verdict', row.get('error'))}", flush=True)
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _context(graph: Any, timing: Any, device: str) -> tuple[Any, Any, Any]:
    """The longest-running Triton kernel and the RewriteContext the search would build for it."""
    from kernelopt_core.analyst import analyze_kernel, rewrite_evidence
    from kernelopt_core.measure.traffic import kernel_launch
    from kernelopt_core.search.rewrites import RewriteContext, parse_kernel_module

    cuda = device.startswith("cuda")
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device) if cuda else None

    def kernel_ms(kernel: Any) -> float:
        return sum(timing.launch_times_ms.get(item.order, 0.0) for item in graph.launches_of(kernel.name))

    kernel = max(graph.kernels, key=kernel_ms)
    launch = kernel_launch(timing.launch_traffic.values(), kernel.name)
    timed = timing.launch_times_ms.get(launch.order) if launch is not None else None
    metrics = _ncu(graph, kernel, device) if cuda and os.environ.get("KERNELOPT_WINDOW_NCU") == "1" else None
    analysis = analyze_kernel(metrics, None, peaks, kernel, launch_args=launch, duration_ms=timed,
                              duration_source=f"timed launch, {timing.path} path", cpu=not cuda)
    module = parse_kernel_module(kernel.source, kernel.name)
    evidence = rewrite_evidence(analysis, launch)
    sms = evidence.get("sm_count")
    ctx = RewriteContext(module=module, original=module, device="cuda" if cuda else "cpu", tier=analysis.tier,
                         evidence=evidence, **({"multiprocessors": int(sms)} if isinstance(sms, int) and sms else {}))
    return kernel, ctx, analysis


def _ncu(graph: Any, kernel: Any, device: str) -> Any:
    from kernelopt_core.measure.ncu import NcuError
    from kernelopt_core.measure.ncu_profile import profile_graph

    try:
        profiled = profile_graph(graph, kernels=[kernel.name], device=device, iters=1, warmup=1, use_cache=False,
                                 sections=("SpeedOfLight", "LaunchStats"), timeout_s=120.0)
    except (NcuError, ValueError, OSError):
        return None
    return next((m for m in profiled.kernels if m.name == kernel.name), None)


def _verdicts(result: Any, kernel_name: str, sol_before: float | None) -> dict[str, Any]:
    gates = [g.to_json() for g in result.gates]  # whole reasons and numbers
    row: dict[str, Any] = {"verdict": "accepted" if result.accepted else (
        "could not verify" if result.could_not_verify else f"rejected by gate {result.failed_gate}"),
        "reason": result.reason, "gates": gates}
    perf = next((g for g in result.gates if g.gate == 4), None)
    if perf is not None:
        numbers = perf.numbers or {}
        kernel = (numbers.get("kernel_speedups") or {}).get(kernel_name)
        row.update(speedup=numbers.get("speedup"), ci=[numbers.get("ci_low"), numbers.get("ci_high")],
                   timing_path=numbers.get("timing_path"), kernel_speedup=kernel,
                   sol_after_pct=round(sol_before * kernel, 1) if sol_before and kernel else None)
    return row


# --- the campaign ------------------------------------------------------------------------------------


def _environment(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            "python": sys.version.split()[0], "device": device}
    try:
        import torch
        import triton

        info.update(torch=torch.__version__, triton=triton.__version__,
                    gpu=torch.cuda.get_device_name(0) if device.startswith("cuda") else None)
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        info["torch"] = f"unavailable: {exc}"
    return info


def markdown(results: dict[str, Any]) -> str:
    env = results.get("environment", {})
    lines = ["# The windowed and strided_access families against max-autotune", "",
             f"- {env.get('gpu') or env.get('device')}; torch {env.get('torch')}, triton {env.get('triton')}; "
             f"{env.get('date')}",
             f"- gates {results.get('gates')}; at most {results.get('per_family')} candidates per family; "
             "SOL after = SOL before x the kernel-alone speedup (a kernel figure, not a graph claim)", "",
             "| problem | kernel | SOL before | causes | family | candidate | verdict | end-to-end | kernel | SOL after |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def pct(value: Any) -> str:
        return f"{value:.0f}%" if isinstance(value, (int, float)) else "-"

    def times(value: Any) -> str:
        return f"{value:.3f}x" if isinstance(value, (int, float)) else "-"

    for name, entry in results.get("problems", {}).items():
        if "error" in entry and not entry.get("candidates"):
            lines.append(f"| {name} | - | - | - | - | - | error: {entry['error'][:100]} | - | - | - |")
            continue
        head = (f"| {name} | `{entry.get('kernel', '-')}` | {pct(entry.get('sol_before_pct'))} | "
                f"{', '.join(entry.get('causes') or []) or '-'}")
        rows = entry.get("candidates") or []
        for family, status in (entry.get("families") or {}).items():
            if status != "applies":
                lines.append(f"{head} | {family} | - | declined: {status[:120]} | - | - | - |")
        for row in rows:
            ci = row.get("ci") or [None, None]
            e2e = times(row.get("speedup")) + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if None not in ci else "")
            lines.append(f"{head} | {row['family']} | {row['title']} | {row.get('verdict', row.get('error', '-'))} | "
                         f"{e2e} | {times(row.get('kernel_speedup'))} | {pct(row.get('sol_after_pct'))} |")
    if results.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {s}" for s in results["skipped"]]
    failed = [(n, e) for n, e in results.get("problems", {}).items() if "error" in e]
    if failed:
        lines += ["", "## Errors", ""] + [f"- {n}: {e['error'][:300]}" for n, e in failed]
    return "\n".join(lines) + "\n"


def _save(out_dir: str, results: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, RESULTS), "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    with open(os.path.join(out_dir, "window_families.md"), "w") as handle:
        handle.write(markdown(results))


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    if device == "auto":
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    budget = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "560"))
    cap = float(os.environ.get("KERNELOPT_WINDOW_PER_PROBLEM_S", "200"))
    gates = tuple(int(g) for g in os.environ.get("KERNELOPT_WINDOW_GATES", "1,2,3,4").split(",") if g.strip())
    per_family = int(os.environ.get("KERNELOPT_WINDOW_VARIANTS", "3"))
    wanted = problems or [p for p in os.environ.get("KERNELOPT_WINDOW_PROBLEMS", "").split(",") if p] or None
    names = [n for n in ORDER if not wanted or n in wanted]
    started = time.monotonic()
    results: dict[str, Any] = {"environment": _environment(device), "scale": scale, "gates": list(gates),
                               "per_family": per_family, "budget_s": budget, "problems": {}, "skipped": []}
    logs = os.path.join(out_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    _save(out_dir, results)
    for name in names:
        left = budget - (time.monotonic() - started) - 10.0
        if left < 60.0:
            results["skipped"].append(f"{name}: {left:.0f} s of the budget left")
            continue
        limit = min(cap, left)
        out_json = os.path.join(out_dir, "logs", f"{name}.json")
        args = [os.path.abspath(__file__), out_dir, "--child", name, "--device", device, "--scale", scale,
                "--result", out_json]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)}
        print(f"[{time.monotonic() - started:5.0f} s] {name} (cap {limit:.0f} s)", flush=True)
        with open(os.path.join(logs, f"{name}.log"), "w") as log:
            process = subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
            try:
                process.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        try:
            with open(out_json) as handle:
                results["problems"][name] = json.load(handle)
        except (OSError, ValueError):
            results["problems"][name] = {"error": f"no result (status {process.returncode}; cap {limit:.0f} s); "
                                                  f"see logs/{name}.log"}
        if process.returncode not in (0, None) and "error" not in results["problems"][name]:
            results["problems"][name]["note"] = f"the problem's process ended with status {process.returncode}"
        _save(out_dir, results)
    results["wall_s"] = round(time.monotonic() - started, 1)
    _save(out_dir, results)
    summary = {name: {"sol_before_pct": e.get("sol_before_pct"), "families": e.get("families"),
                      "best_kernel_speedup": max((r["kernel_speedup"] for r in e.get("candidates") or []
                                                  if isinstance(r.get("kernel_speedup"), (int, float))), default=None),
                      "accepted": [r["title"] for r in e.get("candidates") or [] if r.get("verdict") == "accepted"],
                      "error": e.get("error")}
               for name, e in results["problems"].items()}
    return {"wall_s": results["wall_s"], "skipped": results["skipped"], "problems": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200")
    parser.add_argument("--problems", default="")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        gates = tuple(int(g) for g in os.environ.get("KERNELOPT_WINDOW_GATES", "1,2,3,4").split(",") if g.strip())
        per_family = int(os.environ.get("KERNELOPT_WINDOW_VARIANTS", "3"))
        try:
            entry = evaluate_problem(args.child, args.out_dir, args.device, args.scale, gates, per_family)
        except Exception as exc:  # noqa: BLE001 - recorded for the campaign
            entry = {"problem": args.child, **_failure(exc)}
        with open(args.result, "w") as handle:
            json.dump(entry, handle, indent=1, default=str)
        return
    wanted = [p for p in args.problems.split(",") if p] or None
    print(json.dumps(run(args.out_dir, args.device, args.scale, wanted), indent=1, default=str))


if __name__ == "__main__":
    main()
