"""Level-2 graphs (a vendor conv, then Inductor's statistics and apply kernels) against the rewrite families.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT level2_families:560
    python -m benchmarks.gpu.level2_families OUT_DIR --problems conv2d_add_scale_sigmoid_groupnorm   # GPU, alone
    TORCHINDUCTOR_PERSISTENT_REDUCTIONS=0 python -m benchmarks.gpu.level2_families OUT_DIR --device cpu --scale tiny \\
        --problems conv2d_add_scale_sigmoid_groupnorm                                          # CPU backend check

The problems are KernelBench level 2's own at their published sizes (benchmarks/problems/level2): 21
``conv2d_add_scale_sigmoid_groupnorm``, 92 ``conv2d_groupnorm_tanh_hardswish_residual_logsumexp``, 17
``conv2d_instancenorm_divide``, 85 ``conv2d_groupnorm_scale_maxpool_clamp``. Each runs in its own process
under a cap (a driver over the public Python API, as families.py):

1. compile with ``torch.compile(mode="max-autotune")`` and time the graph once with every launch's
   arguments recorded: each kernel's time and share, the vendor calls' share;
2. per Triton kernel of at least 2% of the graph: its launch sizes, the analyst's tier, causes and
   speed of light (timed launch, no ncu), and which rewrite families apply, with every other family's
   reason (what the search would offer for it);
3. per variant of each family in ``KERNELOPT_LEVEL2_FAMILIES`` (default ``shifted_moments``) that applies, at
   most ``KERNELOPT_LEVEL2_VARIANTS`` (default 4) a family, the graph re-stitched with it, then:
   * correctness against the original graph on ``KERNELOPT_LEVEL2_SEEDS`` (default 3) fresh input sets:
     max abs and relative difference, NaN positions, ``allclose(rtol=1e-4, atol=1e-5 x max|out|)``;
   * the rewritten kernel's own time in the re-stitched graph (the same per-launch timing as step 1);
   * the whole graph, original and candidate, with ``triton.testing.do_bench`` (warm-up 25 ms, 100 ms of
     repetitions, median), interleaved over ``KERNELOPT_LEVEL2_ROUNDS`` (default 5) rounds, each round on
     the next fresh input set: median of the round medians and their spread (min-max, % of median);
   * then the ``KERNELOPT_LEVEL2_GATED`` (default 1) fastest correct variants through the cascade, gates
     ``KERNELOPT_LEVEL2_GATES`` (default 1,2,3,4): verdict, kernel speedup, end-to-end speedup and CI.

Writes ``level2_families.json`` and ``level2_families.md`` after every problem, and each dumped graph's source
as ``work/<problem>/output_code.txt``. Knobs:
``KERNELOPT_GPU_BUDGET_S`` (default 560), ``KERNELOPT_LEVEL2_PER_PROBLEM_S`` (default 270: two problems a call),
``KERNELOPT_LEVEL2_PROBLEMS=a,b`` (a subset), ``KERNELOPT_LEVEL2_NCU=1`` (ncu's seven sections for the
kernels of at least 2% of the graph, one run a problem, before the candidates), and the ones above. Imports only torch, triton and
kernelopt_core; never changes GPU clocks or settings.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    ROOT,
    Budget,
    cell,
    compile_largest_graph,
    compile_probe,
    env_float,
    env_int,
    env_list,
    environment,
    failure,
    free_device_memory,
    gates_from_env,
    kernel_time_ms,
    problem_script_main,
    rewrite_context,
    run_problems_in_turn,
    time_graph,
    use_device,
    write_json,
    write_record,
)

LEVEL2 = os.path.join(ROOT, "benchmarks", "problems", "level2")
PROBLEMS = ("conv2d_add_scale_sigmoid_groupnorm", "conv2d_groupnorm_tanh_hardswish_residual_logsumexp",
            "conv2d_instancenorm_divide", "conv2d_groupnorm_scale_maxpool_clamp")
FAMILIES = tuple(env_list("KERNELOPT_LEVEL2_FAMILIES") or ["shifted_moments"])
PER_PROBLEM_S = env_float("KERNELOPT_LEVEL2_PER_PROBLEM_S", 270.0)
VARIANTS = env_int("KERNELOPT_LEVEL2_VARIANTS", 4)
SEEDS = env_int("KERNELOPT_LEVEL2_SEEDS", 3)
ROUNDS = env_int("KERNELOPT_LEVEL2_ROUNDS", 5)
GATED = env_int("KERNELOPT_LEVEL2_GATED", 1)
NCU = env_int("KERNELOPT_LEVEL2_NCU", 0)
MIN_SHARE = 0.02  # kernels below this share of the graph are not rewritten (the search's own threshold)


def _gates() -> tuple[int, ...]:
    return gates_from_env("KERNELOPT_LEVEL2_GATES")


# --- one problem, in its own process --------------------------------------------------------------


def run_problem(name: str, out_dir: str, device: str, scale: str, cap_s: float) -> dict[str, Any]:
    begin = time.monotonic()
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale
    device = use_device(device)
    facts, graph = compile_largest_graph(os.path.join(LEVEL2, f"{name}.py"), os.path.join(out_dir, "work", name),
                                         device)
    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale, **facts}
    if graph is None:
        return entry
    entry["dump"] = os.path.relpath(graph.path, out_dir)
    _keep_source(graph.path, os.path.join(out_dir, "work", name, "output_code.txt"))
    timing = time_graph(graph, device)
    entry["graph_ms"] = timing.total_ms
    entry["vendor"] = [{"op": call.op, "ms": timing.launch_times_ms.get(call.order),
                        "share": (timing.launch_times_ms.get(call.order, 0.0) / timing.share_basis_ms
                                  if timing.share_basis_ms else None)} for call in graph.extern_calls]
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device)
    entry["kernels"] = []
    if NCU and device.startswith("cuda"):
        entry["ncu"] = _ncu(graph, timing)
        _write(out_dir, name, entry)
    for kernel in graph.kernels:
        row = _kernel_facts(graph, kernel, timing, peaks, device)
        entry["kernels"].append(row)
        families = [f for f in FAMILIES if f in row.get("applies", [])]
        context = row.pop("context", None)
        if row.get("note") or not families:
            continue
        row["candidates"] = [c for family in families
                             for c in _candidates(graph, kernel, context, family, out_dir, name, device, begin, cap_s)]
        _write(out_dir, name, entry)
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _kernel_facts(graph: Any, kernel: Any, timing: Any, peaks: Any, device: str) -> dict[str, Any]:
    from kernelopt_core.search.rewrites import applicable_families

    kernel_ms = kernel_time_ms(graph, timing, kernel.name)
    share = kernel_ms / timing.share_basis_ms if timing.share_basis_ms else None
    row: dict[str, Any] = {"name": kernel.name, "kind": kernel.kind, "timed_ms": kernel_ms, "share": share}
    ctx, analysis = rewrite_context(graph, kernel, timing, peaks, device, probe=compile_probe)
    row.update(numels=ctx.module.numels, tier=analysis.tier,
               **{k: ctx.evidence.get(k) for k in ("ideal_bytes", "sol_pct", "traffic_ratio", "causes", "passes",
                                                   "grid")})
    if share is not None and share < MIN_SHARE:
        row["note"] = f"{share:.1%} of the graph: not rewritten"
        return row
    status = applicable_families(ctx)
    row["applies"] = sorted(n for n, why in status.items() if why is None)
    row["declined"] = {n: why for n, why in status.items() if why is not None}
    row["context"] = ctx  # dropped before writing
    return row


def _ncu(graph: Any, timing: Any) -> dict[str, Any]:
    """ncu's seven sections for the Triton kernels of at least MIN_SHARE of the graph, in one run (the figures
    the analyst reads, the warp stalls and the rules), with the run's wall time."""
    from kernelopt_core.measure.ncu import DEFAULT_SECTIONS
    from kernelopt_core.measure.ncu_profile import profile_graph

    names = [k.name for k in graph.kernels
             if timing.share_basis_ms and kernel_time_ms(graph, timing, k.name) / timing.share_basis_ms >= MIN_SHARE]
    started = time.monotonic()
    try:
        profile = profile_graph(graph, kernels=names, device="cuda:0", sections=DEFAULT_SECTIONS, use_cache=False,
                                timeout_s=120.0)
    except Exception as exc:  # noqa: BLE001 - recorded
        return failure(exc)
    kept = ("duration_ns", "memory_pct", "dram_pct", "compute_pct", "achieved_occupancy_pct",
            "theoretical_occupancy_pct", "registers", "block_size", "grid_size", "waves_per_sm", "l1_hit_pct",
            "l2_hit_pct", "sm_busy_pct", "issue_slots_busy_pct", "no_eligible_pct", "warp_cycles_per_issued",
            "dram_read_bytes", "dram_write_bytes", "sector_efficiency_pct")
    kernels = {}
    for metrics in profile.kernels:
        row = {k: getattr(metrics, k) for k in kept}
        row["rules"] = [f"{r.name}: {r.description[:300]}" for r in metrics.top_rules(6)]
        row["stalls"] = {k: v for k, v in metrics.raw.items() if "Stall" in k or "stall" in k}
        kernels[metrics.name] = row
    return {"wall_s": round(time.monotonic() - started, 1), "steps_s": profile.steps_s, "kernels": kernels,
            "notes": profile.notes}


def _keep_source(path: str, copy: str) -> None:
    """The dumped graph's source beside the results (``.txt``: the packed results leave out ``.py``)."""
    with open(path, encoding="utf-8") as src, open(copy, "w", encoding="utf-8") as dst:
        dst.write(src.read())


def _candidates(graph: Any, kernel: Any, ctx: Any, family: str, out_dir: str, name: str, device: str,
                begin: float, cap_s: float) -> list[dict[str, Any]]:
    from kernelopt_core.search.rewrites import FAMILIES as REWRITE_FAMILIES

    out: list[dict[str, Any]] = []
    sources: list[str] = []
    for index, rewrite in enumerate(REWRITE_FAMILIES[family].variants(ctx)[:VARIANTS]):
        item: dict[str, Any] = {"family": family, "title": rewrite.title, "params": rewrite.params}
        out.append(item)
        sources.append(rewrite.source)
        if cap_s - (time.monotonic() - begin) < 40:
            item["skipped"] = "out of time"
            continue
        try:
            item.update(_measure(graph, kernel, rewrite.source,
                                 os.path.join(out_dir, "work", name, f"{kernel.name}-{family}-v{index}"), device))
        except Exception as exc:  # noqa: BLE001 - one candidate's failure is recorded, not fatal
            item.update(failure(exc))
        free_device_memory()
    # The gates for the fastest correct variants (the search would finalize those first).
    ranked = sorted((i for i, item in enumerate(out) if item.get("correct")),
                    key=lambda i: -(out[i].get("do_bench") or {}).get("speedup", 0.0))
    for i in ranked[:GATED]:
        if cap_s - (time.monotonic() - begin) > 60:
            out[i]["gates"] = _cascade(graph, kernel, sources[i], device, cap_s - (time.monotonic() - begin))
    return out


def _measure(graph: Any, kernel: Any, source: str, work: str, device: str) -> dict[str, Any]:
    import torch
    import triton.testing  # noqa: F401 - do_bench, on a GPU

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.restitch import write_restitched
    from kernelopt_core.graph_module import call_graph, load_graph_module, make_inputs

    path, _ = write_restitched(graph, {kernel.name: source}, work)
    candidate_graph = parse_output_code(path)
    candidate_timing = time_graph(candidate_graph, device)
    result: dict[str, Any] = {"kernel_ms_after": kernel_time_ms(candidate_graph, candidate_timing, kernel.name),
                              "graph_ms_after": candidate_timing.total_ms}
    original = load_graph_module(graph.path, device)
    candidate = load_graph_module(path, device)
    inputs = [make_inputs(original, seed) for seed in range(max(1, SEEDS))]
    checks = []
    for seed, args in enumerate(inputs):
        want = [t for t in _tensors(call_graph(original, args))]
        got = [t for t in _tensors(call_graph(candidate, args))]
        checks.append(_compare(got, want, seed, torch))
    result["correct"] = all(c["ok"] for c in checks)
    result["checks"] = checks

    def timed(module: Any, args: list[Any]) -> float:
        if not device.startswith("cuda"):  # the CPU backend's check of the driver: wall-clock medians
            return 1e3 * statistics.median(_wall(lambda: call_graph(module, args)) for _ in range(3))
        return float(triton.testing.do_bench(lambda: call_graph(module, args), warmup=25, rep=100,
                                             return_mode="median"))

    originals, candidates = [], []
    for r in range(max(1, ROUNDS)):  # interleaved: a drift in clocks or temperature hits both alike
        args = inputs[r % len(inputs)]
        originals.append(timed(original, args))
        candidates.append(timed(candidate, args))
    result["do_bench"] = {"original_ms": _spread(originals), "candidate_ms": _spread(candidates),
                          "speedup": statistics.median(originals) / statistics.median(candidates)}
    del inputs
    return result


def _wall(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [value] if hasattr(value, "dtype") else []


def _compare(got: list[Any], want: list[Any], seed: int, torch: Any) -> dict[str, Any]:
    worst_abs, worst_rel, nan_same, ok = 0.0, 0.0, True, len(got) == len(want)
    for g, w in zip(got, want, strict=False):
        g64, w64 = g.double(), w.double()
        nan_same = nan_same and bool(torch.equal(torch.isnan(g64), torch.isnan(w64)))
        finite = torch.isfinite(w64) & torch.isfinite(g64)
        diff = (g64 - w64).abs()[finite]
        scale = float(w64.abs()[finite].max()) if finite.any() else 0.0
        worst = float(diff.max()) if diff.numel() else 0.0
        worst_abs = max(worst_abs, worst)
        worst_rel = max(worst_rel, worst / scale if scale else 0.0)
        ok = ok and bool(torch.allclose(g64[finite], w64[finite], rtol=1e-4, atol=1e-5 * max(scale, 1.0)))
    return {"seed": seed, "max_abs_diff": worst_abs, "max_rel_diff": worst_rel, "nan_positions_equal": nan_same,
            "ok": ok and nan_same}


def _spread(values: list[float]) -> dict[str, Any]:
    median = statistics.median(values)
    return {"median": round(median, 4), "min": round(min(values), 4), "max": round(max(values), 4),
            "spread_pct": round(100.0 * (max(values) - min(values)) / median, 2) if median else None,
            "rounds": [round(v, 4) for v in values]}


def _cascade(graph: Any, kernel: Any, source: str, device: str, left_s: float) -> dict[str, Any]:
    from kernelopt_core.gates import CascadeConfig, run_cascade

    started = time.monotonic()
    try:
        result = run_cascade(graph, {kernel.name: source},
                             CascadeConfig(run_gates=_gates(), device=device, job_timeout_s=max(30.0, left_s - 15.0)))
    except Exception as exc:  # noqa: BLE001 - recorded
        return failure(exc)
    return {"accepted": result.accepted, "failed_gate": result.failed_gate, "reason": result.reason,
            "kernel_speedup": result.kernel_speedups.get(kernel.name), "speedup": result.speedup,
            "ci": list(result.ci) if result.ci else None, "timing_path": result.timing_path,
            "seconds": round(time.monotonic() - started, 1)}


def _write(out_dir: str, name: str, entry: dict[str, Any]) -> None:
    clean = {**entry, "kernels": [{k: v for k, v in row.items() if k != "context"} for row in entry.get("kernels", [])]}
    write_json(os.path.join(out_dir, "problems", f"{name}.json"), clean)


# --- the campaign ------------------------------------------------------------------------------------


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    device = use_device(device)
    budget = Budget.from_env(560.0)
    wanted = problems or env_list("KERNELOPT_LEVEL2_PROBLEMS")
    names = [n for n in PROBLEMS if not wanted or n in wanted] + [n for n in wanted if n not in PROBLEMS]
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "budget_s": budget.total_s,
                               "per_problem_s": PER_PROBLEM_S, "gates": list(_gates()), "problems": {},
                               "skipped": []}
    run_problems_in_turn(__file__, out_dir, names, device, scale, PER_PROBLEM_S, budget, results,
                         lambda done: _save(out_dir, done))
    results["elapsed_s"] = round(budget.elapsed(), 1)
    results["summary"] = summary(results)
    _save(out_dir, results)
    return results["summary"]


def _rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(name, kernel, row) for name, entry in results["problems"].items()
            for kernel in entry.get("kernels", []) for row in kernel.get("candidates", [])]


def summary(results: dict[str, Any]) -> dict[str, Any]:
    best: dict[str, float] = {}
    for name, _, row in _rows(results):
        bench = row.get("do_bench") or {}
        if row.get("correct") and isinstance(bench.get("speedup"), (int, float)):
            best[name] = max(best.get(name, 0.0), bench["speedup"])
    geomean = None
    if best:
        product = 1.0
        for value in best.values():
            product *= max(value, 1.0)  # a problem whose candidates all lose keeps Inductor's code: 1.0
        geomean = round(product ** (1.0 / len(best)), 4)
    return {"problems": len(results["problems"]),
            "errors": sorted(n for n, e in results["problems"].items() if "error" in e),
            "best_graph_speedup": {k: round(v, 4) for k, v in best.items()},
            "geomean_kept_at_least_1": geomean, "skipped": results.get("skipped", []),
            "elapsed_s": results.get("elapsed_s")}


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Sizes {results['scale']} (h200: KernelBench's published sizes). Graph times: "
             "triton.testing.do_bench medians, original and candidate interleaved over fresh input sets; kernel "
             "times: the per-launch timing of the graph before and after.", "",
             "| problem | kernel | share | tier | SOL | families that apply |", "|---|---|---|---|---|---|"]
    for name, entry in results["problems"].items():
        if "error" in entry and not entry.get("kernels"):
            lines.append(f"| {name} | – | – | – | – | error: {entry['error']} |")
        for kernel in entry.get("kernels", []):
            applies = ", ".join(kernel.get("applies") or []) or kernel.get("note") or "none"
            lines.append(f"| {name} | {kernel['name']} | {cell(kernel.get('share'), '.1%')} | {kernel.get('tier')} | "
                         f"{cell(kernel.get('sol_pct'), '.0f', '%')} | {applies} |")
    lines += ["", "| problem | kernel | candidate | correct (max rel diff) | kernel ms before → after | graph ms original → "
                  "candidate (spread %) | graph x | gates |", "|---|---|---|---|---|---|---|---|"]
    for name, kernel, row in _rows(results):
        if "error" in row or "skipped" in row:
            lines.append(f"| {name} | {kernel['name']} | {row.get('family')}: {row['title']} | "
                         f"{row.get('error') or row.get('skipped')} | – | – | – | – |")
            continue
        bench = row.get("do_bench") or {}
        o, c = bench.get("original_ms") or {}, bench.get("candidate_ms") or {}
        worst = max((ch.get("max_rel_diff", 0.0) for ch in row.get("checks", [])), default=None)
        gates = row.get("gates") or {}
        verdict = ("accepted" if gates.get("accepted") else
                   f"gate {gates.get('failed_gate')}: {(gates.get('reason') or '')[:100]}" if gates else "–")
        if gates.get("speedup"):
            verdict += f" (e2e {gates['speedup']:.3f}, kernel {cell(gates.get('kernel_speedup'), '.3f')})"
        lines.append(f"| {name} | {kernel['name']} | {row.get('family')}: {row['title']} | "
                     f"{row.get('correct')} ({cell(worst, '.1e')}) | "
                     f"{cell(kernel.get('timed_ms'), '.4f')} → {cell(row.get('kernel_ms_after'), '.4f')} | "
                     f"{cell(o.get('median'), '.4f')} ({cell(o.get('spread_pct'), '.1f')}) → "
                     f"{cell(c.get('median'), '.4f')} ({cell(c.get('spread_pct'), '.1f')}) | "
                     f"{cell(bench.get('speedup'), '.3f')} | {verdict} |")
    summary_ = results.get("summary") or {}
    if summary_:
        lines += ["", f"Best correct graph speedup per problem: {summary_.get('best_graph_speedup')}; geomean "
                      f"(a problem without a win kept at 1.0): {summary_.get('geomean_kept_at_least_1')}; elapsed "
                      f"{summary_.get('elapsed_s')} s."]
    if results.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    return "\n".join(lines) + "\n"


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "level2_families", results, "Level-2 graphs: rewrite families against max-autotune",
                 markdown(results).splitlines())


def main(argv: list[str] | None = None) -> int:
    return problem_script_main(argv, __doc__.splitlines()[0], PER_PROBLEM_S, run_problem, _write, run)


if __name__ == "__main__":
    sys.exit(main())
