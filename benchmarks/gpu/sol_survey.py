"""Speed of light of the KernelBench-scale memory-bound set (issue 15), on the H200.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT sol_survey:560
    python -m benchmarks.gpu.sol_survey OUT_DIR --device cpu --scale tiny --problems relu   # CPU backend

``run(out_dir)`` measures the device peaks once (cached per GPU), then, for each problem of
``benchmarks/problems/kbscale`` in its own process under a per-problem cap (the public Python API
of what ``kernelopt compile`` and ``kernelopt profile`` do, with ncu limited to the two sections the
survey reads: a third of the full profile's time, so that more problems fit a device call):

1. compiles it with max-autotune (``kernelopt_core.compile.compile_problem``);
2. runs the graph once timed, recording every launch's arguments (the ideal bytes) and the graph's
   inputs and outputs (``graph_tasks.time_launches_task``, in that process);
3. profiles the graph's Triton kernels with ncu: only the SpeedOfLight and LaunchStats sections
   (ncu's memory/compute % for the paper's tier; grid, waves, SMs) and the DRAM byte, L2 hit and
   sector-efficiency metrics;
4. runs the analyst per kernel.

It records per problem the main kernel's (longest timed Triton launch) baseline speed of light,
traffic ratio, the paper's SOL-memory tier and the new tier with its causes, and the graph's speed
of light (its inputs and outputs once, against the sum of its kernels' ncu times and against the
timed module-call graph), into ``sol_survey.json`` and ``sol_survey.md`` after every problem.
A problem where the paper's rule said near-optimal and the new figures leave more than 25%
headroom is flagged.

Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 560), ``KERNELOPT_SOL_PER_PROBLEM_S`` (default
150), ``KERNELOPT_SOL_PROBLEMS=a,b`` (a subset), ``KERNELOPT_SOL_RESUME_FROM=earlier sol_survey.json``
(finished problems are kept, not rerun), ``KERNELOPT_SOL_GPUS`` (problems side by side, one per GPU:
a count or "all"; default 1: one problem at a time; with more, the ncu runs on different GPUs may
wait for each other). Imports only torch, triton and kernelopt_core (no
anthropic, pygls or watchdog); never changes GPU clocks or settings.
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
    CappedChild,
    cell,
    compile_largest_graph,
    env_float,
    env_list,
    env_text,
    environment,
    failure,
    kernel_time_ms,
    measured_peaks,
    peaks_line,
    read_json,
    time_graph,
    use_device,
    write_json,
    write_record,
)

PROBLEMS_DIR = KBSCALE
# The issue's cases first: a short budget still records them.
PRIORITY = ("softmax_long_rows", "layer_norm_16_rows", "max_pool2d_dilated", "avg_pool1d", "log_softmax_rows",
            "instance_norm", "group_norm", "frobenius_norm", "l1_norm", "l2_norm", "cross_entropy", "relu")
SECTIONS = ("SpeedOfLight", "LaunchStats")
HEADROOM_PCT = 25.0  # more than this below speed of light where the paper's rule said near-optimal
PER_PROBLEM_S = env_float("KERNELOPT_SOL_PER_PROBLEM_S", 150.0)


def problem_names(wanted: list[str] | None = None) -> list[str]:
    names = sorted(os.path.splitext(n)[0] for n in os.listdir(PROBLEMS_DIR)
                   if n.endswith(".py") and not n.startswith(("_", ".")))
    ordered = [n for n in PRIORITY if n in names] + [n for n in names if n not in PRIORITY]
    return [n for n in ordered if not wanted or n in wanted]


# --- one problem, in its own process --------------------------------------------------------------


def survey_problem(name: str, out_dir: str, device: str, scale: str, cap_s: float) -> dict[str, Any]:
    """Compile, time, profile and analyse one problem (runs in the problem's own process)."""
    begin = time.monotonic()
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale
    device = use_device(device)
    facts, graph = compile_largest_graph(os.path.join(PROBLEMS_DIR, f"{name}.py"), os.path.join(out_dir, "work", name),
                                         device)
    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale, **facts}
    if graph is None:
        return entry
    entry["dump"] = os.path.relpath(graph.path, out_dir)
    timing = time_graph(graph, device)
    entry["timing"] = {"total_ms": timing.total_ms, "path": timing.path, "notes": timing.notes}
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device)
    entry["peaks_gpu"] = peaks.gpu if peaks is not None else None
    metrics, entry["ncu"] = _ncu(graph, device, cap_s - (time.monotonic() - begin) - 10.0)
    csv_text = entry["ncu"].pop("csv", None)
    if csv_text:
        os.makedirs(os.path.join(out_dir, "ncu"), exist_ok=True)
        with open(os.path.join(out_dir, "ncu", f"{name}.csv"), "w") as handle:
            handle.write(csv_text)
        entry["ncu"]["csv_file"] = f"ncu/{name}.csv"
    entry.update(_analyse(graph, timing, metrics, peaks, cpu=not device.startswith("cuda")))
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _ncu(graph: Any, device: str, timeout_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    if not device.startswith("cuda"):
        return {}, {"skipped": "the CPU backend has no ncu"}
    from kernelopt_core.measure.ncu import NcuError
    from kernelopt_core.measure.ncu_profile import profile_graph

    begin = time.monotonic()
    try:
        profiled = profile_graph(graph, device=device, iters=1, warmup=1, use_cache=False, sections=SECTIONS,
                                 timeout_s=max(20.0, timeout_s))
    except (NcuError, ValueError, OSError) as exc:
        return {}, {"wall_s": round(time.monotonic() - begin, 1), **failure(exc)}
    return ({m.name: m for m in profiled.kernels},
            {"wall_s": round(profiled.wall_s, 1), "command": " ".join(profiled.command or []),
             "notes": profiled.notes, "csv": profiled.csv_text})


def _analyse(graph: Any, timing: Any, metrics: dict[str, Any], peaks: Any, cpu: bool) -> dict[str, Any]:
    from kernelopt_core.analyst import analyze_kernel
    from kernelopt_core.measure.traffic import kernel_launch, speed_of_light

    copy = peaks.copy_bytes_per_s if peaks is not None else None
    rows = []
    for kernel in graph.kernels:
        launch = kernel_launch(timing.launch_traffic.values(), kernel.name)
        timed_ms = timing.launch_times_ms.get(launch.order) if launch is not None else None
        measured = metrics.get(kernel.name)
        analysis = analyze_kernel(measured, None, peaks, kernel, launch_args=launch, duration_ms=timed_ms,
                                  duration_source=f"timed launch, {timing.path} path", cpu=cpu)
        timed = speed_of_light(launch.ideal if launch is not None else None, duration_ms=timed_ms,
                               duration_source="timed launch", copy_bytes_per_s=copy, cpu=cpu)
        kernel_ms = kernel_time_ms(graph, timing, kernel.name)
        rows.append({
            "name": kernel.name, "kind": kernel.kind, "launches": len(graph.launches_of(kernel.name)),
            "timed_ms": kernel_ms, "share": kernel_ms / timing.share_basis_ms if timing.share_basis_ms else None,
            "ncu_ms": measured.duration_ns / 1e6 if measured is not None and measured.duration_ns else None,
            "memory_pct": measured.memory_pct if measured is not None else None,
            "compute_pct": measured.compute_pct if measured is not None else None,
            "l2_hit_pct": measured.l2_hit_pct if measured is not None else None,
            "sector_efficiency_pct": measured.sector_efficiency_pct if measured is not None else None,
            "tier": analysis.tier, "paper_tier": analysis.paper_tier, "timed_sol_pct": timed.sol_pct,
            **analysis.sol_fields(), "facts": analysis.facts.to_json(),
        })
    main = max(rows, key=lambda r: r["timed_ms"] or 0.0) if rows else None
    ncu_total_ms = sum((r["ncu_ms"] or 0.0) * r["launches"] for r in rows) if rows else 0.0
    all_profiled = bool(rows) and all(r["ncu_ms"] for r in rows)
    over_kernels = speed_of_light(timing.graph_ideal, duration_ms=ncu_total_ms if all_profiled else None,
                                  duration_source="sum of the graph's kernels' ncu times", copy_bytes_per_s=copy,
                                  cpu=cpu)
    over_graph = speed_of_light(timing.graph_ideal, duration_ms=timing.total_ms,
                                duration_source=f"timed graph, {timing.path} path", copy_bytes_per_s=copy, cpu=cpu)
    summary: dict[str, Any] = {"kernels": rows, "graph_ideal_bytes": over_graph.ideal_bytes,
                               "graph_sol_kernels_pct": over_kernels.sol_pct,
                               "graph_sol_module_call_pct": over_graph.sol_pct}
    if main is not None:
        summary.update(
            main_kernel=main["name"], baseline_sol_pct=main["sol_pct"], sol_source=main["sol_time_source"],
            traffic_ratio=main["traffic_ratio"], paper_tier=main["paper_tier"], tier=main["tier"],
            causes=main["causes"], sol_unknown_reason=main["sol_unknown_reason"],
            headroom_hidden=bool(main["paper_tier"] == "near-optimal" and main["sol_pct"] is not None
                                 and main["sol_pct"] < 100.0 - HEADROOM_PCT),
        )
    return summary


# --- the campaign ------------------------------------------------------------------------------------


def gpu_slots(device: str) -> list[str | None]:
    """Problems run side by side, one per GPU (``KERNELOPT_SOL_GPUS``: a count, or "all"; default 1)."""
    if not device.startswith("cuda"):
        return [None]
    wanted = env_text("KERNELOPT_SOL_GPUS", "1").lower()
    import torch

    visible = torch.cuda.device_count()
    count = visible if wanted == "all" else max(1, min(int(wanted) if wanted.isdigit() else 1, visible))
    if count == 1:
        return [None]  # the device the caller named, as it is
    return [str(i) for i in range(count)]


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "sol_survey", results, "Speed of light of the kbscale set", markdown(results).splitlines())


def _resumed(path: str) -> dict[str, Any]:
    earlier = read_json(path) if path else None
    return {name: entry for name, entry in ((earlier or {}).get("problems") or {}).items()
            if isinstance(entry, dict) and "error" not in entry and "baseline_sol_pct" in entry}


def _child(name: str, out_dir: str, device: str, scale: str, cap_s: float, gpu: str | None) -> CappedChild:
    """One problem in a process of its own (this file with --one), seeing its GPU as cuda:0."""
    from benchmarks.gpu.devicescript import child_env

    env = child_env(**({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}))
    return CappedChild([sys.executable, os.path.abspath(__file__), "--one", name, "--out", out_dir, "--device", device,
                        "--scale", scale, "--cap", str(cap_s)], os.path.join(out_dir, "logs", f"{name}.log"), cap_s,
                       env=env, label=name)


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None,
        budget_s: float | None = None, per_problem_s: float | None = None) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    device = use_device(device)
    budget = Budget(budget_s) if budget_s else Budget.from_env(560.0)
    cap = per_problem_s or PER_PROBLEM_S
    names = problem_names(problems or env_list("KERNELOPT_SOL_PROBLEMS") or None)
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "budget_s": budget.total_s,
                               "per_problem_s": cap, "sections": list(SECTIONS),
                               "peaks": measured_peaks(device), "problems": _resumed(env_text("KERNELOPT_SOL_RESUME_FROM")),
                               "skipped": []}
    _save(out_dir, results)
    pending = [n for n in names if n not in results["problems"]]
    slots = gpu_slots(device)
    child_device = device if slots == [None] else "cuda:0"
    running: dict[str | None, CappedChild] = {}
    while pending or running:
        for slot in [s for s in slots if s not in running]:
            if not pending:
                break
            left = budget.left() - 15.0
            if left < min(cap, 60.0):
                results["skipped"] += [f"{n}: out of time" for n in pending]
                pending.clear()
                break
            name = pending.pop(0)
            running[slot] = _child(name, out_dir, child_device, scale, min(cap, left), slot)
        time.sleep(0.5)
        for slot, child in list(running.items()):
            if child.running():
                continue
            del running[slot]
            code = child.stop()
            entry = read_json(os.path.join(out_dir, "problems", f"{child.label}.json"))
            if entry is None:
                why = f"ran past its {child.cap_s:.0f} s cap" if code is None else f"exited with status {code}"
                entry = {"problem": child.label, "error": f"the problem process {why}",
                         "log": f"logs/{child.label}.log", "wall_s": round(child.wall_s, 1)}
            if slot is not None:
                entry["gpu_slot"] = slot
            results["problems"][child.label] = entry
            _save(out_dir, results)
    results["elapsed_s"] = round(budget.elapsed(), 1)
    results["summary"] = summary(results)
    _save(out_dir, results)
    return results["summary"]


def summary(results: dict[str, Any]) -> dict[str, Any]:
    done = {n: e for n, e in results["problems"].items() if "baseline_sol_pct" in e}
    hidden = sorted(n for n, e in done.items() if e.get("headroom_hidden"))
    peaks = results.get("peaks") or {}
    return {
        "problems_surveyed": len(done), "errors": sorted(n for n, e in results["problems"].items() if "error" in e),
        "skipped": results.get("skipped", []),
        "copy_GBps": round(peaks["copy_bytes_per_s"] / 1e9, 1) if peaks.get("copy_bytes_per_s") else None,
        "below_85_pct": sorted(n for n, e in done.items() if (e.get("baseline_sol_pct") or 100.0) < 85.0),
        "paper_near_optimal_with_over_25_pct_headroom": hidden,
        "sol_pct": {n: e.get("baseline_sol_pct") for n, e in done.items()},
        "elapsed_s": results.get("elapsed_s"),
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Sizes: {results['scale']}; max-autotune (default on the CPU backend); ncu sections "
             f"{', '.join(results['sections'])} and the DRAM byte, L2 hit and sector-efficiency metrics.", "",
             peaks_line(results.get("peaks")), "",
             "SOL = the kernel's ideal bytes (each tensor it reads, once, plus each tensor it writes, once) over its "
             "ncu duration at the measured copy bandwidth; traffic = ncu DRAM bytes over the ideal bytes; paper tier "
             "= the old rule (SOL memory or compute > 80% is near-optimal). The main kernel is the graph's longest "
             "timed Triton launch. Graph SOL: the graph's inputs and outputs once, over the sum of its kernels' ncu "
             "times, and over the timed module-call graph.", "",
             "| problem | main kernel | ncu ms | ideal GB | DRAM GB | traffic | SOL | graph SOL (kernels) "
             "| graph SOL (module-call) | paper tier | new tier | causes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["problems"].items():
        if "error" in entry:
            lines.append(f"| `{name}` | error: {str(entry['error'])[:120]} | | | | | | | | | | |")
            continue
        main = next((k for k in entry.get("kernels", []) if k["name"] == entry.get("main_kernel")), {})
        flag = " ⚑" if entry.get("headroom_hidden") else ""
        lines.append(
            f"| `{name}`{flag} | `{main.get('name', '–')}` | {cell(main.get('ncu_ms'), '.3f')} "
            f"| {cell((main.get('ideal_bytes') or 0) / 1e9 or None, '.2f')} "
            f"| {cell((main.get('dram_bytes') or 0) / 1e9 or None, '.2f')} | {cell(entry.get('traffic_ratio'), '.2f', 'x')} "
            f"| {cell(entry.get('baseline_sol_pct'), '.0f', '%')} | {cell(entry.get('graph_sol_kernels_pct'), '.0f', '%')} "
            f"| {cell(entry.get('graph_sol_module_call_pct'), '.0f', '%')} | {entry.get('paper_tier', '–')} "
            f"| {entry.get('tier', '–')} | {', '.join(entry.get('causes') or []) or '–'} |")
    hidden = summary(results)["paper_near_optimal_with_over_25_pct_headroom"]
    lines += ["", f"⚑ the paper's rule said near-optimal, and the new figures leave more than {HEADROOM_PCT:.0f}% "
                  f"headroom: {', '.join(f'`{n}`' for n in hidden) or 'none'}.", ""]
    for name, entry in results["problems"].items():
        causes = [k for k in entry.get("kernels", []) if k.get("cause_details")]
        if causes:
            lines.append(f"- `{name}`: " + "; ".join(f"{d['id']}: {d['text']}" for k in causes
                                                       for d in k["cause_details"]))
    if results.get("skipped"):
        lines += ["", "Not reached: " + ", ".join(results["skipped"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="output folder (the campaign)")
    parser.add_argument("--out", dest="out_flag", help="output folder (child mode)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200")
    parser.add_argument("--problems", help="comma-separated subset")
    parser.add_argument("--one", help="child: survey this problem")
    parser.add_argument("--cap", type=float, default=PER_PROBLEM_S)
    args = parser.parse_args(argv)
    out_dir = args.out_flag or args.out
    if not out_dir:
        parser.error("give an output folder")
    if args.one:
        try:
            entry = survey_problem(args.one, out_dir, args.device, args.scale, args.cap)
        except Exception as exc:  # noqa: BLE001 - recorded for the campaign
            entry = {"problem": args.one, **failure(exc)}
        write_json(os.path.join(out_dir, "problems", f"{args.one}.json"), entry)
        os._exit(0)  # skip torch's slow teardown; the result is written
    import json

    print(json.dumps(run(out_dir, args.device, args.scale, args.problems.split(",") if args.problems else None),
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
