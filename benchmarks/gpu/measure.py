"""Measurement campaign (issue 3): device peaks, A/A noise, and each fixture graph's dispatch, profile and A/B cost.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT measure:290
    python -m benchmarks.gpu.measure OUT_DIR --device cpu --scale tiny --models rmsnorm   # CPU backend

In order, so that the most important figures survive a short budget:

1. the device peaks (``kernelopt_core.measure.peaks``, measured afresh);
2. the nine fixture models (``benchmarks/problems/fixture_models``) through ``kernelopt compile``
   (max-autotune; ``default`` on the CPU backend), or the shared H200 dumps as they are;
3. A/A noise of rmsnorm, softmax and matmul_bias_relu: 20 interleaved comparisons of the graph against
   itself in the measurement worker (``graph_tasks:ab_graphs``, the module-call path gate 4 uses); the
   figure is the median absolute deviation of the ratio (target <= 0.5%); where the module-call path
   misses it, the same through CUDA-graph replay;
4. per graph: ``kernelopt inspect --time`` (classification, time shares), ``kernelopt profile
   --no-cache`` (ncu metrics and the analyst's tier per Triton kernel, ncu with ``--clock-control
   none``) and one A/B comparison (what a gate-4 decision costs).

Writes ``measure.{json,md}`` after every step. Never changes GPU clocks or settings.
Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 330), ``KERNELOPT_MEASURE_DUMPS=fixtures`` (profile the
shared H200 dumps of tests/fixtures/inductor-h200-torch2.11 without compiling),
``KERNELOPT_MEASURE_SKIP_AA=1`` (a call that only profiles), ``KERNELOPT_MEASURE_MODELS=a,b``.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from benchmarks.gpu.devicescript import (
    FIXTURE_DUMPS,
    FIXTURE_MODELS,
    Budget,
    cell,
    env_flag,
    env_list,
    env_text,
    environment,
    kernelopt,
    measured_peaks,
    peaks_line,
    table,
    use_device,
    write_record,
)

AA_GRAPHS = ("rmsnorm", "softmax", "matmul_bias_relu")
AA_COMPARISONS = 20
AA_TARGET = 0.005
# The A/A graphs first, then the rest.
ORDER = ("rmsnorm", "softmax", "matmul_bias_relu", "layernorm_gelu", "elementwise", "transpose",
         "sum_reduce", "attention", "conv_bn_relu")
CPU_AB = {"rounds": 3, "reps_per_round": 1, "warmup": 1, "input_sets": 1}  # the interpreter is slow


def run(out_dir: str, device: str = "auto", scale: str = "h200", models: list[str] | None = None,
        aa_comparisons: int = AA_COMPARISONS) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    budget = Budget.from_env(330.0)
    budget.total_s -= min(30.0, 0.1 * budget.total_s)  # time to write the results
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale  # the CLI processes inherit it
    device = use_device(device)
    names = [n for n in ORDER if n in (models or env_list("KERNELOPT_MEASURE_MODELS") or ORDER)]
    aa_graphs = () if env_flag("KERNELOPT_MEASURE_SKIP_AA") else AA_GRAPHS
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "budget_s": budget.total_s,
                               "peaks": measured_peaks(device, refresh=True), "graphs": {}, "aa": {}, "skipped": []}
    _save(out_dir, results)
    if env_text("KERNELOPT_MEASURE_DUMPS") == "fixtures":
        dumps = {n: os.path.join(FIXTURE_DUMPS, n, "output_code.py") for n in names}
        for name, dump in dumps.items():
            results["graphs"][name] = {"dump": dump, "mode": "max-autotune (shared fixture dump, torch 2.11, H200)"}
    else:
        dumps = _compile_all(names, device, out_dir, budget, results)
    _save(out_dir, results)

    from kernelopt_core.measure.worker import Worker

    with Worker(device) as worker:
        for name in [n for n in aa_graphs if n in dumps]:
            if not budget.allows(25.0):
                results["skipped"].append(f"A/A {name}: out of time")
                continue
            aa = _aa_noise(worker, dumps[name], aa_comparisons, device, budget)
            if device.startswith("cuda") and aa.get("met") is False and budget.allows(40.0):
                # through CUDA-graph replay (no Python wrapper, no launch jitter), as the gate could
                aa["graph_replay"] = _aa_noise(worker, dumps[name], max(5, aa_comparisons // 2), device, budget,
                                               cuda_graph=True)
            results["aa"][name] = aa
            _save(out_dir, results)
        for name, dump in dumps.items():
            if not budget.allows(20.0):
                results["skipped"].append(f"profile {name}: out of time")
                continue
            results["graphs"][name].update(_profile(worker, name, dump, device, out_dir, budget))
            _save(out_dir, results)
    results["elapsed_s"] = round(budget.elapsed(), 1)
    results["summary"] = _summary(results)
    _save(out_dir, results)
    return results["summary"]


def _compile_all(names: list[str], device: str, out_dir: str, budget: Budget,
                 results: dict[str, Any]) -> dict[str, str]:
    dumps: dict[str, str] = {}
    for name in names:
        if budget.elapsed() > 0.45 * budget.total_s:  # at least half the budget is for measuring
            results["skipped"].append(f"compile {name}: out of time")
            continue
        done = kernelopt(["compile", os.path.join(FIXTURE_MODELS, f"{name}.py"), "--out",
                          os.path.join(out_dir, "work", name), "--mode", "max-autotune", "--device", device],
                         timeout_s=min(240.0, budget.left()), cwd=out_dir,
                         log_path=os.path.join(out_dir, "logs", f"compile_{name}.log"))
        entry: dict[str, Any] = {"compile_wall_s": done.wall_s}
        results["graphs"][name] = entry
        if not done.ok or not done.data.get("graphs"):
            entry["error"] = done.why() if not done.ok else "no graph dumped"
            continue
        graphs = done.data["graphs"]
        entry.update(compile_s=done.data["compile_s"], mode=done.data["mode"], max_rel_err=done.data["max_rel_err"],
                     dump=os.path.relpath(graphs[0], out_dir))
        if len(graphs) > 1:
            entry["note"] = f"{len(graphs)} graphs; the first is measured"
        dumps[name] = graphs[0]
    return dumps


def _ab(worker: Any, dump: str, device: str, **options: Any) -> Any:
    """One interleaved A/B comparison of the graph against itself in the worker."""
    payload = {"baseline": dump, "candidate": dump, **options, **({} if device.startswith("cuda") else CPU_AB)}
    return worker.call("kernelopt_core.measure.graph_tasks:ab_graphs", payload, timeout_s=180)


def _aa_noise(worker: Any, dump: str, comparisons: int, device: str, budget: Budget,
              cuda_graph: bool = False) -> dict[str, Any]:
    from kernelopt_core.measure.statistics import median_absolute_deviation

    ratios: list[float] = []
    walls: list[float] = []
    contains_one = 0
    first_error = None
    for _ in range(comparisons):
        if not budget.allows(5.0):
            break
        outcome = _ab(worker, dump, device, cuda_graph=cuda_graph)
        if not outcome.ok:
            first_error = first_error or (outcome.failure.message if outcome.failure else "failed")
            continue
        ratios.append(outcome.value["speedup"])
        contains_one += outcome.value["ci_low"] <= 1.0 <= outcome.value["ci_high"]
        walls.append(outcome.wall_s)
    if not ratios:
        return {"error": first_error or "no comparison finished in time"}
    mad = median_absolute_deviation(ratios)
    from_one = statistics.median(abs(r - 1.0) for r in ratios)
    return {"comparisons": len(ratios), "ratios": ratios, "mad_of_ratio": mad, "median_abs_dev_from_1": from_one,
            "min_ratio": min(ratios), "max_ratio": max(ratios), "ci_contains_1": contains_one, "target": AA_TARGET,
            "met": max(mad, from_one) <= AA_TARGET, "wall_s_per_comparison": statistics.median(walls),
            "first_call_wall_s": walls[0], "path": "graph-replay" if cuda_graph else "module-call",
            "error": first_error}


def _profile(worker: Any, name: str, dump: str, device: str, out_dir: str, budget: Budget) -> dict[str, Any]:
    """``kernelopt inspect --time`` and ``kernelopt profile`` of one graph, and one A/B's cost."""
    entry: dict[str, Any] = {}
    logs = os.path.join(out_dir, "logs")
    inspected = kernelopt(["inspect", dump, "--time", "--device", device], timeout_s=min(180.0, budget.left()),
                          cwd=out_dir, log_path=os.path.join(logs, f"inspect_{name}.log"))
    if inspected.ok and inspected.data.get("graphs"):
        graph = inspected.data["graphs"][0]
        entry["dispatch"] = {"classification": graph.get("classification"), "wall_s": inspected.wall_s,
                             "total_ms": ((graph.get("speed_of_light") or {}).get("graph") or {}).get("time_ms"),
                             **(graph.get("dispatch") or {})}
        entry["extern_calls"] = [c["op"] for c in graph.get("extern_calls", [])]
    else:
        entry["dispatch"] = {"error": inspected.why()}
    ab = _ab(worker, dump, device)
    entry["ab_cost"] = ({"wall_s": round(ab.wall_s, 2), "speedup": ab.value["speedup"],
                         "ci": [ab.value["ci_low"], ab.value["ci_high"]], "rounds": ab.value["rounds"]}
                        if ab.ok else {"error": ab.failure.message if ab.failure else "failed"})
    if not budget.allows(15.0):
        entry["profile"] = {"skipped": "out of time"}
        return entry
    profiled = kernelopt(["profile", dump, "--device", device, "--no-cache"], timeout_s=min(180.0, budget.left()),
                         cwd=out_dir, log_path=os.path.join(logs, f"profile_{name}.log"))
    if not profiled.ok:
        entry["profile"] = {"error": profiled.why(), "wall_s": profiled.wall_s}
        return entry
    data = profiled.data
    entry["profile"] = {"wall_s": profiled.wall_s, "source": data.get("source"), "notes": data.get("notes"),
                        "graph_sol": data.get("graph_sol")}
    entry["kernels"] = [{key: row.get(key) for key in (
        "name", "kind", "duration_ns", "time_share", "tier", "sol_pct", "traffic_ratio", "memory_pct", "dram_pct",
        "sm_pct", "occupancy_pct", "registers", "launches", "top_rule", "causes", "evidence", "directions")}
        for row in data.get("kernels", [])]
    return entry


def _summary(results: dict[str, Any]) -> dict[str, Any]:
    graphs = results["graphs"]
    peaks = results.get("peaks") or {}
    return {
        "graphs_compiled": sum(1 for e in graphs.values() if "dump" in e),
        "graphs_profiled_with_ncu": sum(1 for e in graphs.values() if (e.get("profile") or {}).get("source") == "ncu"),
        "tiers": {name: {k["name"]: k["tier"] for k in e.get("kernels", [])} for name, e in graphs.items()},
        "aa": {name: {"mad_of_ratio": e.get("mad_of_ratio"), "median_abs_dev_from_1": e.get("median_abs_dev_from_1"),
                      "met": e.get("met"), "comparisons": e.get("comparisons"), "error": e.get("error"),
                      "graph_replay_met": (e.get("graph_replay") or {}).get("met")}
               for name, e in results["aa"].items()},
        "copy_GBps": peaks.get("copy_GBps"), "matmul_TFLOPs": peaks.get("matmul_TFLOPs"),
        "profile_wall_s": {n: (e.get("profile") or {}).get("wall_s") for n, e in graphs.items()},
        "ab_wall_s": {n: (e.get("ab_cost") or {}).get("wall_s") for n, e in graphs.items()},
        "skipped": results["skipped"], "elapsed_s": results.get("elapsed_s"),
    }


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "measure", results, f"Measurement campaign (sizes: {results['scale']})", _markdown(results))


def _markdown(results: dict[str, Any]) -> list[str]:
    lines = [peaks_line(results.get("peaks")), "", "## A/A noise (interleaved, the graph against itself)", ""]
    aa_rows = []
    for name, aa in results["aa"].items():
        for label, item in ((name, aa), (f"{name} (graph-replay)", aa.get("graph_replay"))):
            if item and "ratios" in item:
                aa_rows.append((label, item["comparisons"], f"{item['mad_of_ratio']:.3%}",
                                f"{item['median_abs_dev_from_1']:.3%}", f"{item['min_ratio']:.4f}",
                                f"{item['max_ratio']:.4f}", f"{item['ci_contains_1']}/{item['comparisons']}",
                                "met" if item["met"] else "NOT met", f"{item['wall_s_per_comparison']:.2f}"))
            elif item:
                aa_rows.append((label, f"error: {item.get('error')}", "", "", "", "", "", "", ""))
    lines += table(("graph", "comparisons", "MAD of ratio", "median abs(ratio - 1)", "min", "max", "CI holds 1.0",
                    "target <= 0.5%", "s per A/B"), aa_rows)
    lines += ["", "## Per kernel (`kernelopt profile`: ncu on a GPU, timing otherwise; tier from the analyst)", ""]
    lines += table(("graph", "kernel", "kind", "duration (us)", "share", "tier", "SOL", "mem %", "DRAM %", "SM %",
                    "occ. %", "regs", "top rule"),
                   [(name, k["name"], k["kind"], cell(k["duration_ns"] / 1e3 if k["duration_ns"] else None, ".1f"),
                     cell(k["time_share"], ".1%"), k["tier"], cell(k["sol_pct"], ".0f", "%"),
                     cell(k["memory_pct"], ".1f"), cell(k["dram_pct"], ".1f"), cell(k["sm_pct"], ".1f"),
                     cell(k["occupancy_pct"], ".1f"), cell(k["registers"]), cell(k["top_rule"]))
                    for name, entry in results["graphs"].items() for k in entry.get("kernels", [])])
    lines += ["", "## Graphs: dispatch and cost", ""]
    graph_rows = []
    for name, entry in results["graphs"].items():
        dispatch, profile = entry.get("dispatch") or {}, entry.get("profile") or {}
        note = entry.get("error") or dispatch.get("error") or profile.get("error") or profile.get("skipped") or ""
        graph_rows.append((name, cell(entry.get("compile_s")), cell(dispatch.get("total_ms"), ".4f"),
                           cell(dispatch.get("classification")), cell(profile.get("wall_s")),
                           cell((entry.get("ab_cost") or {}).get("wall_s")), cell(str(note)[:160])))
    lines += table(("graph", "compile (s)", "graph (ms)", "classification", "profile (s)", "one A/B (s)", "notes"),
                   graph_rows)
    if results["skipped"]:
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    if results.get("elapsed_s") is not None:
        lines += ["", f"Elapsed: {results['elapsed_s']} s of a {results['budget_s']:.0f} s budget."]
    return lines


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200", choices=("h200", "tiny"))
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--aa-comparisons", type=int, default=AA_COMPARISONS)
    cli = parser.parse_args()
    print(json.dumps(run(cli.out_dir, cli.device, cli.scale, cli.models, cli.aa_comparisons), indent=1, default=str))
