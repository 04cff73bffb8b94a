"""Where an ncu profile's time goes, with the command line before and after: the runner alone, then under ncu.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT ncu_cost:420
    python -m benchmarks.gpu.ncu_cost OUT_DIR

Compiles kbscale softmax_long_rows (12.9 GB working set) and layer_norm_16_rows with max-autotune (the
Inductor cache of the compile holds the tuned configs, as a bench problem's does), then profiles each
graph's largest kernel the way the search does, one variant after the other, each in a fresh process:

1. ``alone, before``: the runner (``measure/run_graph.py``) without ncu, with this process's environment
   (Inductor's compile-worker pool);
2. ``alone, after``: the runner without ncu, with the profile's environment (``TORCHINDUCTOR_COMPILE_THREADS=1``);
3. ``ncu, before``: the command of session 14: ``--target-processes all``, the seven default sections, the
   pool;
4. ``ncu, after``: the profile's command now: ``--target-processes application-only``, no pool, the four
   sections the offline search asks for (``ANALYST_SECTIONS``);
5. ``ncu, after, all sections``: as 4 with the seven default sections (what the sections alone cost).

For each: the wall clock, the runner's steps (start of ncu and Python, importing torch and the CUDA
context, loading the graph, inputs, warm-up, the profiled call, the exit and ncu's report), the kernels
that autotuned under it, and the figures ncu measured (duration, SOL memory and compute, DRAM bytes), which
must agree between the commands. Writes ``ncu_cost.json`` and ``ncu_cost.md`` after every step. Changes no
GPU setting (``--clock-control none``). GPU only. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 420: a
variant is not started with less than twice the slowest so far left), ``KERNELOPT_NCU_COST_PROBLEMS``
(default softmax_long_rows,layer_norm_16_rows), ``KERNELOPT_NCU_COST_VARIANTS`` (default all five, by
their short names: alone_before, alone_after, ncu_before, ncu_after, ncu_after_all_sections).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.gpu.devicescript import (  # noqa: E402 - after the repository root is on sys.path
    KBSCALE,
    Budget,
    cell,
    compile_largest_graph,
    env_list,
    environment,
    kernel_time_ms,
    table,
    time_graph,
    use_device,
    write_record,
)

PROBLEMS = ("softmax_long_rows", "layer_norm_16_rows")
STEM = "ncu_cost"
FIRST_GUESS_S = 90.0  # a variant's time before one has run: session 14's ncu profile took 27-30 s


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    under_ncu: bool
    all_sections: bool  # the seven default sections (else the analyst's four)
    application_only: bool
    no_pool: bool  # TORCHINDUCTOR_COMPILE_THREADS=1


VARIANTS = (
    Variant("alone_before", "alone, before (compile pool)", False, True, False, False),
    Variant("alone_after", "alone, after (no pool)", False, True, True, True),
    Variant("ncu_before", "ncu, before: all processes, 7 sections, pool", True, True, False, False),
    Variant("ncu_after", "ncu, after: application-only, 4 sections, no pool", True, False, True, True),
    Variant("ncu_after_all_sections", "ncu, after, 7 sections", True, True, True, True),
)
STEP_ORDER = ("start_the_profiler_and_python", "import_torch_and_start_cuda", "load_the_graph", "make_inputs",
              "warm_up", "profiled_calls", "exit_and_report")


def _environment(variant: Variant) -> dict[str, str]:
    from kernelopt_core.measure.ncu_profile import _python_path, runner_env

    if variant.no_pool:
        return {**os.environ, **runner_env()}
    base = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_COMPILE_THREADS"}
    return {**base, "PYTHONPATH": _python_path()}


def _alone(graph: Any, device: str, variant: Variant, timeout_s: float) -> dict[str, Any]:
    from kernelopt_core.measure.ncu_profile import runner_program
    from kernelopt_core.measure.run_graph import program_steps, tuned_kernels

    started, begin = time.time(), time.monotonic()
    done = subprocess.run(runner_program(graph, device=device), env=_environment(variant), capture_output=True,
                          text=True, timeout=timeout_s)
    wall = time.monotonic() - begin
    row: dict[str, Any] = {"wall_s": round(wall, 2), "returncode": done.returncode,
                           "steps_s": program_steps(done.stderr, started, time.time()),
                           "tuned": tuned_kernels(done.stderr)}
    if done.returncode != 0:
        row["error"] = done.stderr.strip()[-800:]
    return row


def _under_ncu(graph: Any, kernel: str, device: str, variant: Variant, timeout_s: float) -> dict[str, Any]:
    from kernelopt_core.measure.ncu import (
        ANALYST_SECTIONS,
        DEFAULT_SECTIONS,
        build_ncu_command,
        find_ncu,
        run_ncu,
    )
    from kernelopt_core.measure.ncu_profile import runner_program
    from kernelopt_core.measure.run_graph import program_steps, tuned_kernels

    sections = DEFAULT_SECTIONS if variant.all_sections else ANALYST_SECTIONS
    command = build_ncu_command(runner_program(graph, device=device), ncu=find_ncu(), kernels=[kernel],
                                launch_count=len(graph.launches_of(kernel)) or 1, sections=sections,
                                target_processes="application-only" if variant.application_only else "all")
    env = _environment(variant)
    run = run_ncu(command, timeout_s=timeout_s, env=env)
    launches = [m for m in run.launches if m.name == kernel] or run.launches
    first = launches[0] if launches else None
    return {"wall_s": round(run.wall_s, 2), "returncode": run.returncode, "command": command,
            "compile_threads": env.get("TORCHINDUCTOR_COMPILE_THREADS"),
            "steps_s": program_steps(run.log_text, run.started, run.ended), "tuned": tuned_kernels(run.log_text),
            "launches": len(run.launches),
            "figures": None if first is None else {
                "duration_ns": first.duration_ns, "memory_pct": first.memory_pct, "compute_pct": first.compute_pct,
                "dram_read_bytes": first.dram_read_bytes, "dram_write_bytes": first.dram_write_bytes,
                "achieved_occupancy_pct": first.achieved_occupancy_pct, "registers": first.registers}}


def _largest_kernel(graph: Any, device: str) -> tuple[str, float | None]:
    try:
        timing = time_graph(graph, device)
        times = {k.name: kernel_time_ms(graph, timing, k.name) for k in graph.kernels}
        name = max(times, key=lambda n: times[n])
        return name, round(times[name], 4)
    except Exception:  # noqa: BLE001 - untimed: the kernel with the most launches stands for it
        return max(graph.kernels, key=lambda k: len(graph.launches_of(k.name))).name, None


def _body(results: dict[str, Any]) -> list[str]:
    lines = ["Each variant a fresh process on the same warm caches (Triton's, and the compile's Inductor cache with "
             "its tuned configs). Seconds of wall clock; the steps are the runner's (`measure/run_graph.py`).", ""]
    for problem in results["problems"]:
        lines += [f"## {problem['name']}", ""]
        if problem.get("error"):
            lines += [f"error: {problem['error']}", ""]
            continue
        lines += [f"Kernel `{problem.get('kernel')}` ({cell(problem.get('kernel_ms'), '.3f', ' ms')} per call), "
                  f"compile {cell(problem.get('compile_s'), '.1f', ' s')}.", ""]
        header = ("variant", "wall s", *(s.replace("_", " ") for s in STEP_ORDER), "tuned", "duration ns",
                  "SOL memory %", "DRAM bytes")
        rows = []
        for variant in VARIANTS:
            row = problem["variants"].get(variant.name)
            if row is None:
                continue
            if row.get("error"):
                rows.append((variant.label, "error: " + str(row["error"])[:160], *["-"] * (len(header) - 2)))
                continue
            steps, figures = row.get("steps_s") or {}, row.get("figures") or {}
            dram = None
            if figures.get("dram_read_bytes") is not None and figures.get("dram_write_bytes") is not None:
                dram = f"{(figures['dram_read_bytes'] + figures['dram_write_bytes']) / 1e9:.2f} GB"
            rows.append((variant.label, cell(row.get("wall_s"), ".1f"), *(cell(steps.get(s), ".1f") for s in STEP_ORDER),
                         " ".join(row["tuned"]) if row.get("tuned") else ("none" if row.get("tuned") == [] else "-"),
                         cell(figures.get("duration_ns"), ",.0f"), cell(figures.get("memory_pct"), ".1f"), cell(dram)))
        lines += [*table(header, rows), ""]
    return lines


def run(out_dir: str) -> dict[str, Any]:
    budget = Budget.from_env(420.0)
    device = use_device("cuda:0")
    chosen = set(env_list("KERNELOPT_NCU_COST_VARIANTS") or [v.name for v in VARIANTS])
    results: dict[str, Any] = {"environment": environment(device), "problems": []}
    work = os.path.join("/tmp", "kernelopt-gpu-work", STEM)
    slowest = 0.0  # the slowest variant so far, in seconds

    def record() -> None:
        write_record(out_dir, STEM, results, "Where an ncu profile's time goes (runner alone, ncu before and after)",
                     _body(results))

    for name in env_list("KERNELOPT_NCU_COST_PROBLEMS") or list(PROBLEMS):
        problem: dict[str, Any] = {"name": name, "variants": {}}
        results["problems"].append(problem)
        try:
            facts, graph = compile_largest_graph(os.path.join(KBSCALE, f"{name}.py"), os.path.join(work, name), device)
        except Exception as exc:  # noqa: BLE001 - recorded; the next problem still runs
            problem["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
            record()
            continue
        problem.update(compile_s=facts.get("compile_s"), dump=facts.get("dump"))
        if graph is None:
            problem["error"] = facts.get("error", "no graph")
            record()
            continue
        # the runners read the tuned configs the compile wrote, as a bench problem's worker and profile do
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, name, "inductor_cache")
        problem["kernel"], problem["kernel_ms"] = _largest_kernel(graph, device)
        record()
        for variant in VARIANTS:
            if variant.name not in chosen:
                continue
            if not budget.allows(2 * slowest if slowest else FIRST_GUESS_S):
                problem["variants"][variant.name] = {"error": f"not run: {budget.left():.0f} s left"}
                record()
                continue
            limit = max(30.0, min(300.0, budget.left() - 10.0))
            begin = time.monotonic()
            try:
                if variant.under_ncu:
                    row = _under_ncu(graph, problem["kernel"], device, variant, limit)
                else:
                    row = _alone(graph, device, variant, limit)
            except Exception as exc:  # noqa: BLE001 - recorded with its reason
                row = {"error": f"{type(exc).__name__}: {str(exc)[-600:]}"}
            slowest = max(slowest, time.monotonic() - begin)
            problem["variants"][variant.name] = row
            print(f"[{STEM}] {name} {variant.name}: {row.get('wall_s', row.get('error'))}", flush=True)
            record()
    return {"problems": [{"name": p["name"], **{k: (v.get("wall_s") if isinstance(v, dict) else v)
                                                for k, v in p.get("variants", {}).items()}}
                         for p in results["problems"]]}


if __name__ == "__main__":
    import json

    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "."), indent=2)[:4000])
