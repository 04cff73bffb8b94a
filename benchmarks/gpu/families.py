"""The algorithmic reduction families on the H200 (issue 16): single_read, cooperative_rows, split_programs.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT families:560
    python -m benchmarks.gpu.families OUT_DIR --device cpu --scale tiny --problems l2_norm   # CPU backend

``run(out_dir)`` takes a few kbscale problems (softmax 4096x393216, layer norm over 16 rows,
cross-entropy, instance norm, L2 norm, log-softmax), each in its own process under a cap. A driver
over the public Python API of the rewrite families and the gates (no CLI command runs one family's
candidates through the gates):

1. compiles it with max-autotune (``kernelopt_core.compile.compile_problem``);
2. times the graph once, recording every launch's arguments (ideal bytes, durations);
3. runs the analyst per Triton reduction kernel (no ncu: the causes come from the source and the
   launch, the speed of light from the timed launch) and builds the rewrite context the search would
   (evidence, SM count, ``compile_probe`` compiling each candidate for sm_90 and reading its
   registers and spills);
4. generates the three families' candidates from Inductor's real CUDA kernels and runs each
   through the cascade, gates 1-4 (``KERNELOPT_FAMILIES_GATES`` to choose), one candidate at a time.

Per candidate it records the verdict (failed gate and reason), the kernel speedup (gate 4 times the
kernel alone on its captured arguments), the end-to-end speedup with its CI (module-call path), the
kernel's speed of light before and after (before x kernel speedup), and the plan the family stated
(ideal bytes, expected speed of light), into ``families.json`` and ``families.md`` after every
problem.

Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 560), ``KERNELOPT_FAMILIES_PER_PROBLEM_S`` (default
240), ``KERNELOPT_FAMILIES_PROBLEMS=a,b`` (a subset), ``KERNELOPT_FAMILIES_PER_FAMILY`` (candidates per
family and kernel, default 2), ``KERNELOPT_FAMILIES_GATES`` (default 1,2,3,4). Imports only torch,
triton and kernelopt_core; never changes GPU clocks or settings.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    KBSCALE,
    Budget,
    cell,
    compile_largest_graph,
    compile_probe,
    env_float,
    env_int,
    env_list,
    environment,
    failure,
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

PROBLEMS = ("softmax_long_rows", "layer_norm_16_rows", "cross_entropy", "instance_norm", "l2_norm",
            "log_softmax_rows")
FAMILY_NAMES = ("single_read", "cooperative_rows", "split_programs")
PER_PROBLEM_S = env_float("KERNELOPT_FAMILIES_PER_PROBLEM_S", 240.0)
PER_FAMILY = env_int("KERNELOPT_FAMILIES_PER_FAMILY", 2)
MIN_SHARE = 0.02  # kernels below this share of the graph are not rewritten (the search's own threshold)


def _gates() -> tuple[int, ...]:
    return gates_from_env("KERNELOPT_FAMILIES_GATES")


# --- one problem, in its own process --------------------------------------------------------------


def run_problem(name: str, out_dir: str, device: str, scale: str, cap_s: float) -> dict[str, Any]:
    begin = time.monotonic()
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale
    device = use_device(device)
    facts, graph = compile_largest_graph(os.path.join(KBSCALE, f"{name}.py"), os.path.join(out_dir, "work", name),
                                         device)
    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale, "gates": list(_gates()), **facts}
    if graph is None:
        return entry
    entry["dump"] = os.path.relpath(graph.path, out_dir)
    timing = time_graph(graph, device)
    entry["graph_ms"] = timing.total_ms
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device)
    entry["kernels"] = []
    for kernel in graph.kernels:
        if kernel.kind != "red":
            continue
        if cap_s - (time.monotonic() - begin) < 30:
            entry.setdefault("skipped", []).append(f"{kernel.name}: out of time")
            continue
        entry["kernels"].append(_kernel(graph, kernel, timing, peaks, device, begin, cap_s))
        _write(out_dir, name, entry)
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _facts(graph: Any, kernel: Any, timing: Any, context: Any, analysis: Any) -> dict[str, Any]:
    kernel_ms = kernel_time_ms(graph, timing, kernel.name)
    return {"name": kernel.name, "timed_ms": kernel_ms,
            "share": kernel_ms / timing.share_basis_ms if timing.share_basis_ms else None,
            "numels": context.module.numels, "tier": analysis.tier,
            **{k: context.evidence.get(k) for k in ("ideal_bytes", "sol_pct", "traffic_ratio", "causes", "passes")}}


def _kernel(graph: Any, kernel: Any, timing: Any, peaks: Any, device: str, begin: float,
            cap_s: float) -> dict[str, Any]:
    from kernelopt_core.gates import CascadeConfig, run_cascade
    from kernelopt_core.search.rewrites import FAMILIES

    ctx, analysis = rewrite_context(graph, kernel, timing, peaks, device, probe=compile_probe)
    facts = _facts(graph, kernel, timing, ctx, analysis)
    facts["families"] = {}
    facts["candidates"] = []
    if facts["share"] is not None and facts["share"] < MIN_SHARE:
        facts["note"] = f"{facts['share']:.1%} of the graph: not rewritten"
        return facts
    for family in FAMILY_NAMES:
        why = FAMILIES[family].not_applicable(ctx)
        facts["families"][family] = why or "applies"
        if why:
            continue
        started = time.monotonic()
        variants = FAMILIES[family].variants(ctx)[:PER_FAMILY]
        facts["families"][family] = f"{len(variants)} candidate(s) in {time.monotonic() - started:.1f} s"
        for rewrite in variants:
            row: dict[str, Any] = {"family": family, "title": rewrite.title, "detail": rewrite.detail,
                                   "params": rewrite.params}
            left = cap_s - (time.monotonic() - begin)
            if left < 30:
                row["skipped"] = "out of time"
                facts["candidates"].append(row)
                continue
            started = time.monotonic()
            config = CascadeConfig(run_gates=_gates(), device=device, job_timeout_s=max(30.0, left - 15.0))
            try:
                result = run_cascade(graph, {kernel.name: rewrite.source}, config)
            except Exception as exc:  # noqa: BLE001 - one candidate's setup failure is recorded, not fatal
                row.update(failure(exc))
                facts["candidates"].append(row)
                continue
            speedup = result.kernel_speedups.get(kernel.name)
            before = facts.get("sol_pct")
            row.update(accepted=result.accepted, failed_gate=result.failed_gate, reason=result.reason,
                       gates=[g.to_json() for g in result.gates],  # whole reasons and numbers: what gate 3 ran
                       kernel_speedup=speedup, speedup=result.speedup, ci=list(result.ci) if result.ci else None,
                       timing_path=result.timing_path,
                       sol_after_pct=round(before * speedup, 1) if before and speedup else None,
                       seconds=round(time.monotonic() - started, 1))
            facts["candidates"].append(row)
    return facts


def _write(out_dir: str, name: str, entry: dict[str, Any]) -> None:
    write_json(os.path.join(out_dir, "problems", f"{name}.json"), entry)


# --- the campaign ------------------------------------------------------------------------------------


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None,
        budget_s: float | None = None, per_problem_s: float | None = None) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    device = use_device(device)
    budget = Budget(budget_s) if budget_s else Budget.from_env(560.0)
    cap = per_problem_s or PER_PROBLEM_S
    wanted = problems or env_list("KERNELOPT_FAMILIES_PROBLEMS")
    names = [n for n in PROBLEMS if not wanted or n in wanted] + [n for n in wanted if n not in PROBLEMS]
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "budget_s": budget.total_s,
                               "per_problem_s": cap, "gates": list(_gates()), "per_family": PER_FAMILY,
                               "problems": {}, "skipped": []}
    run_problems_in_turn(__file__, out_dir, names, device, scale, cap, budget, results,
                         lambda done: _save(out_dir, done))
    results["elapsed_s"] = round(budget.elapsed(), 1)
    results["summary"] = summary(results)
    _save(out_dir, results)
    return results["summary"]


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "families", results, "Algorithmic reduction families against max-autotune",
                 markdown(results).splitlines())


def _candidates(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(name, kernel["name"], row) for name, entry in results["problems"].items()
            for kernel in entry.get("kernels", []) for row in kernel.get("candidates", [])]


def summary(results: dict[str, Any]) -> dict[str, Any]:
    rows = _candidates(results)
    per_family: dict[str, dict[str, Any]] = {}
    for _, _, row in rows:
        item = per_family.setdefault(row["family"], {"candidates": 0, "accepted": 0, "best_kernel_speedup": None,
                                                     "best_speedup": None})
        item["candidates"] += 1
        item["accepted"] += bool(row.get("accepted"))
        for key, field in (("best_kernel_speedup", "kernel_speedup"), ("best_speedup", "speedup")):
            value = row.get(field)
            if isinstance(value, (int, float)) and (item[key] is None or value > item[key]):
                item[key] = round(value, 3)
    return {"problems": len(results["problems"]),
            "errors": sorted(n for n, e in results["problems"].items() if "error" in e),
            "candidates": len(rows), "accepted": sum(bool(r.get("accepted")) for _, _, r in rows),
            "families": per_family, "skipped": results.get("skipped", []), "elapsed_s": results.get("elapsed_s")}


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Sizes {results['scale']}; gates {', '.join(map(str, results['gates']))}; up to {results['per_family']} candidate(s) per family "
             "and kernel. Kernel speedup: gate 4's kernel-alone timing (reported, never decides); end to end: gate 4 "
             "(module-call path) with its CI. SOL after = SOL before x kernel speedup.", "",
             "| problem | kernel | family | candidate | verdict | kernel x | end-to-end x [CI] | SOL before → after "
             "| ideal bytes | expected SOL |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["problems"].items():
        if "error" in entry and not entry.get("kernels"):
            lines.append(f"| {name} | – | – | – | error: {entry['error']} | – | – | – | – | – |")
        for kernel in entry.get("kernels", []):
            if not kernel.get("candidates"):
                why = "; ".join(f"{f}: {w}" for f, w in (kernel.get("families") or {}).items())
                lines.append(f"| {name} | {kernel['name']} | – | – | {kernel.get('note') or why} | – | – | "
                             f"{cell(kernel.get('sol_pct'), '.0f', '%')} | – | – |")
            for row in kernel.get("candidates", []):
                if "error" in row or "skipped" in row:
                    verdict = row.get("error") or row.get("skipped")
                elif row.get("accepted"):
                    verdict = "accepted"
                else:
                    verdict = f"gate {row.get('failed_gate')}: {(row.get('reason') or '')[:120]}"
                ci = row.get("ci")
                e2e = (f"{row['speedup']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if row.get("speedup") and ci else
                       cell(row.get("speedup"), ".3f"))
                params = row.get("params") or {}
                lines.append(
                    f"| {name} | {kernel['name']} | {row['family']} | {row['title']} | {verdict} | "
                    f"{cell(row.get('kernel_speedup'), '.3f')} | {e2e} | "
                    f"{cell(kernel.get('sol_pct'), '.0f', '%')} → {cell(row.get('sol_after_pct'), '.0f', '%')} | "
                    f"{cell(params.get('ideal_bytes'), ',')} | {cell(params.get('expected_sol_pct'), '.0f', '%')} |")
    summary_ = results.get("summary") or {}
    if summary_:
        lines += ["", f"{summary_.get('accepted')} of {summary_.get('candidates')} candidates accepted; "
                      f"elapsed {summary_.get('elapsed_s')} s.", "", "| family | candidates | accepted | best kernel x "
                      "| best end-to-end x |", "|---|---|---|---|---|"]
        for family, item in (summary_.get("families") or {}).items():
            lines.append(f"| {family} | {item['candidates']} | {item['accepted']} | "
                         f"{cell(item['best_kernel_speedup'])} | {cell(item['best_speedup'])} |")
    if results.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return problem_script_main(argv, __doc__.splitlines()[0], PER_PROBLEM_S, run_problem, _write, run)


if __name__ == "__main__":
    sys.exit(main())
