"""The windowed and strided_access families on the H200: real max-autotune kernels in, verdicts out (issue 16).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT window_families:560
    python -m benchmarks.gpu.window_families OUT_DIR --device cpu --scale tiny --problems avg_pool1d   # CPU backend

For each problem, in its own process under a per-problem cap (a driver over the public Python API of
the rewrite families and the gates, as families.py):

1. compile it with ``torch.compile(mode="max-autotune")`` (``kernelopt_core.compile.compile_problem``);
2. time the graph once with every launch's arguments recorded (``graph_tasks.time_launches_task``) and
   measure the device's copy bandwidth (cached per GPU): the main kernel's ideal bytes, its timed
   duration and speed of light; the analyst's tier and causes (ncu too with ``KERNELOPT_WINDOW_NCU=1``);
3. build the ``RewriteContext`` the search would (evidence from the analyst) and ask both families
   for candidates: a family that declines records its reason (e.g. already at 100% SOL);
4. run each candidate (at most ``KERNELOPT_WINDOW_VARIANTS`` per family, default 3) through the
   gates (``KERNELOPT_WINDOW_GATES``, default 1,2,3,4): the verdict of every gate, gate 4's
   end-to-end speedup with its CI and the kernel-alone speedup, and the kernel's SOL after
   (SOL before x kernel speedup; kernel figures stay kernel figures).

Problems: the KernelBench-scale ``avg_pool1d``, ``max_pool2d_dilated``, ``sum_cols``, ``mean_cols``
(benchmarks/problems/kbscale) and three written here (they read ``KERNELOPT_PROBLEM_SCALE``, which
``--scale`` sets) at the explore sizes: ``max_pool2d_k4s1p1`` and
``avg_pool2d_k3s1p1`` of (32, 64, 512, 512), ``nchw_to_nhwc`` of (64, 256, 128, 128)
(``KERNELOPT_WINDOW_PROBLEMS=a,b`` for a subset). Writes ``window_families.json`` and
``window_families.md`` after every problem. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 560) and
``KERNELOPT_WINDOW_PER_PROBLEM_S`` (default 200) bound the run; ``KERNELOPT_WINDOW_PROBLEMS``,
``KERNELOPT_WINDOW_GATES``, ``KERNELOPT_WINDOW_VARIANTS``, ``KERNELOPT_WINDOW_NCU=1`` as above. Imports only torch, triton and
kernelopt_core (no anthropic, pygls or watchdog); never changes GPU clocks or settings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    KBSCALE,
    Budget,
    child_env,
    compile_largest_graph,
    env_flag,
    env_float,
    env_int,
    env_list,
    environment,
    failure,
    kernel_time_ms,
    read_json,
    rewrite_context,
    run_capped,
    time_graph,
    use_device,
    write_json,
    write_record,
)

FAMILY_NAMES = ("windowed", "strided_access")
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
    device = use_device(device)
    facts, graph = compile_largest_graph(problem_path(name, out_dir), os.path.join(out_dir, "work", name), device)
    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale, **facts}
    if graph is None:
        return entry
    entry["dump"] = os.path.relpath(graph.path, out_dir)
    timing = time_graph(graph, device)
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
                row.update(failure(exc))
            row["seconds"] = round(time.monotonic() - started, 1)
            entry["candidates"].append(row)
            print(f"  {name} {rewrite.title}: {row.get('verdict', row.get('error'))}", flush=True)
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _context(graph: Any, timing: Any, device: str) -> tuple[Any, Any, Any]:
    """The longest-running Triton kernel and the RewriteContext the search would build for it."""
    cuda = device.startswith("cuda")
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device) if cuda else None
    kernel = max(graph.kernels, key=lambda k: kernel_time_ms(graph, timing, k.name))
    metrics = _ncu(graph, kernel, device) if cuda and env_flag("KERNELOPT_WINDOW_NCU") else None
    ctx, analysis = rewrite_context(graph, kernel, timing, peaks, device, metrics=metrics)
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


def markdown(results: dict[str, Any]) -> str:
    lines = [f"- gates {results.get('gates')}; at most {results.get('per_family')} candidates per family; "
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
    write_record(out_dir, "window_families", results, "The windowed and strided_access families against max-autotune",
                 markdown(results).splitlines())


def _gates() -> tuple[int, ...]:
    return tuple(int(g) for g in env_list("KERNELOPT_WINDOW_GATES")) or (1, 2, 3, 4)


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    device = use_device(device)
    budget = Budget.from_env(560.0)
    cap = env_float("KERNELOPT_WINDOW_PER_PROBLEM_S", 200.0)
    per_family = env_int("KERNELOPT_WINDOW_VARIANTS", 3)
    wanted = problems or env_list("KERNELOPT_WINDOW_PROBLEMS")
    names = [n for n in ORDER if not wanted or n in wanted]
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "gates": list(_gates()),
                               "per_family": per_family, "budget_s": budget.total_s, "problems": {}, "skipped": []}
    _save(out_dir, results)
    for name in names:
        left = budget.left() - 10.0
        if left < 60.0:
            results["skipped"].append(f"{name}: {left:.0f} s of the budget left")
            continue
        limit = min(cap, left)
        out_json = os.path.join(out_dir, "logs", f"{name}.json")
        print(f"[{budget.elapsed():5.0f} s] {name} (cap {limit:.0f} s)", flush=True)
        code, _ = run_capped([sys.executable, os.path.abspath(__file__), out_dir, "--child", name, "--device", device,
                              "--scale", scale, "--result", out_json], os.path.join(out_dir, "logs", f"{name}.log"),
                             limit, env=child_env())
        entry = read_json(out_json) or {"error": f"no result (status {code}; cap {limit:.0f} s); see logs/{name}.log"}
        if code not in (0, None) and "error" not in entry:
            entry["note"] = f"the problem's process ended with status {code}"
        results["problems"][name] = entry
        _save(out_dir, results)
    results["wall_s"] = round(budget.elapsed(), 1)
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
        try:
            entry = evaluate_problem(args.child, args.out_dir, args.device, args.scale, _gates(),
                                     env_int("KERNELOPT_WINDOW_VARIANTS", 3))
        except Exception as exc:  # noqa: BLE001 - recorded for the campaign
            entry = {"problem": args.child, **failure(exc)}
        write_json(args.result, entry)
        return
    import json

    wanted = [p for p in args.problems.split(",") if p] or None
    print(json.dumps(run(args.out_dir, args.device, args.scale, wanted), indent=1, default=str))


if __name__ == "__main__":
    main()
