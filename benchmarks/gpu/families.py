"""The algorithmic reduction families on the H200 (issue 16): single_read, cooperative_rows, split_programs.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT families:560
    PYTHONPATH=. python benchmarks/gpu/families.py OUT_DIR                      # on the GPU
    PYTHONPATH=. python benchmarks/gpu/families.py OUT_DIR --device cpu --scale tiny --problems l2_norm

``run(out_dir)`` takes a few kbscale problems (softmax 4096x393216, layer norm over 16 rows,
cross-entropy, instance norm, L2 norm, log-softmax), each in its own process under a cap:

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

Environment: ``KERNELOPT_GPU_BUDGET_S`` (default 560), ``KERNELOPT_FAMILIES_PER_PROBLEM_S`` (default
240), ``KERNELOPT_FAMILIES_PROBLEMS=a,b`` (a subset), ``KERNELOPT_FAMILIES_PER_FAMILY`` (candidates per
family and kernel, default 2), ``KERNELOPT_FAMILIES_GATES`` (default 1,2,3,4). Imports only torch,
triton and kernelopt_core; never changes GPU clocks or settings.
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

PROBLEMS_DIR = os.path.join(ROOT, "benchmarks", "problems", "kbscale")
PROBLEMS = ("softmax_long_rows", "layer_norm_16_rows", "cross_entropy", "instance_norm", "l2_norm",
            "log_softmax_rows")
FAMILY_NAMES = ("single_read", "cooperative_rows", "split_programs")
BUDGET_S = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "560"))
PER_PROBLEM_S = float(os.environ.get("KERNELOPT_FAMILIES_PER_PROBLEM_S", "240"))
PER_FAMILY = int(os.environ.get("KERNELOPT_FAMILIES_PER_FAMILY", "2"))
MIN_SHARE = 0.02  # kernels below this share of the graph are not rewritten (the search's own threshold)
RESULTS = "families.json"


def _gates() -> tuple[int, ...]:
    text = os.environ.get("KERNELOPT_FAMILIES_GATES", "1,2,3,4")
    gates = tuple(sorted({int(g) for g in text.split(",") if g.strip().isdigit() and 1 <= int(g) <= 4}))
    return gates or (1, 2, 3, 4)


def _failure(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


# --- one problem, in its own process --------------------------------------------------------------


def run_problem(name: str, out_dir: str, device: str, scale: str, cap_s: float) -> dict[str, Any]:
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
    from kernelopt_core.measure.graph_jobs import time_launches_job
    from kernelopt_core.measure.launch_timing import launch_timing_from_json

    entry: dict[str, Any] = {"problem": name, "device": device, "scale": scale, "gates": list(_gates())}
    compiled = compile_problem(os.path.join(PROBLEMS_DIR, f"{name}.py"), os.path.join(out_dir, "work", name),
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
    timing = launch_timing_from_json(time_launches_job({"dump": graph.path, "device": device, "overheads": False}))
    entry["graph_ms"] = timing.total_ms
    from kernelopt_core.measure.peaks import peaks_in_process

    peaks = peaks_in_process(device)
    entry["kernels"] = []
    for kernel in graph.kernels:
        if kernel.kind != "red":
            continue
        remaining = cap_s - (time.monotonic() - begin)
        if remaining < 30:
            entry.setdefault("skipped", []).append(f"{kernel.name}: out of time")
            continue
        entry["kernels"].append(_kernel(graph, kernel, timing, peaks, device, begin, cap_s))
        _write(out_dir, name, entry)
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _context(graph: Any, kernel: Any, timing: Any, peaks: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """The rewrite context the search would build, without ncu."""
    from kernelopt_core.analyst import analyze_kernel, rewrite_evidence
    from kernelopt_core.measure.traffic import kernel_launch
    from kernelopt_core.search.rewrites import RewriteContext, parse_kernel_module

    launch = kernel_launch(timing.launch_traffic.values(), kernel.name)
    timed_ms = timing.launch_times_ms.get(launch.order) if launch is not None else None
    cpu = not device.startswith("cuda")
    analysis = analyze_kernel(None, None, peaks, kernel, launch_args=launch, duration_ms=timed_ms,
                              duration_source=f"timed launch, {timing.path} path", cpu=cpu)
    evidence = rewrite_evidence(analysis, launch)
    module = parse_kernel_module(kernel.source, kernel.name)
    sms = evidence.get("sm_count")
    ctx = RewriteContext(module=module, original=module, device="cpu" if cpu else "cuda", tier=analysis.tier,
                         evidence=evidence, compile_probe=None if cpu else _probe,
                         **({"multiprocessors": int(sms)} if isinstance(sms, int) and sms > 0 else {}))
    kernel_ms = sum(timing.launch_times_ms.get(item.order, 0.0) for item in graph.launches_of(kernel.name))
    facts = {"name": kernel.name, "timed_ms": kernel_ms,
             "share": kernel_ms / timing.share_basis_ms if timing.share_basis_ms else None,
             "numels": module.numels, "tier": analysis.tier,
             **{k: evidence.get(k) for k in ("ideal_bytes", "sol_pct", "traffic_ratio", "causes", "passes")}}
    return ctx, facts


_PROBES: dict[str, Any] = {}


def _probe(source: str) -> dict[str, Any] | None:
    """``compile_probe`` as the pipeline provides it: sm_90 registers, spills, shared memory."""
    from kernelopt_core.gates.ptx_compile import shared_compiler
    from kernelopt_core.search.rewrites import parse_kernel_module

    if source not in _PROBES:
        result = shared_compiler().compile(parse_kernel_module(source).name, source)
        first = (result.get("configs") or [None])[0] if result.get("ok") else None
        _PROBES[source] = ({"regs": first.get("n_regs"), "spills": first.get("n_spills"),
                            "shared_bytes": first.get("shared_bytes")} if isinstance(first, dict) else None)
    return _PROBES[source]


def _kernel(graph: Any, kernel: Any, timing: Any, peaks: Any, device: str, begin: float,
            cap_s: float) -> dict[str, Any]:
    from kernelopt_core.gates import CascadeConfig, run_cascade
    from kernelopt_core.search.rewrites import FAMILIES

    ctx, facts = _context(graph, kernel, timing, peaks, device)
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
                row.update(_failure(exc))
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
    folder = os.path.join(out_dir, "problems")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.json"), "w") as handle:
        json.dump(entry, handle, indent=1, default=str)


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


def _child(name: str, out_dir: str, device: str, scale: str, cap_s: float) -> tuple[int | None, float]:
    """One problem in its own session, killed with its children past its cap."""
    begin = time.monotonic()
    logs = os.path.join(out_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)}
    with open(os.path.join(logs, f"{name}.log"), "w") as log:
        process = subprocess.Popen([sys.executable, os.path.abspath(__file__), out_dir, "--one", name,
                                    "--device", device, "--scale", scale, "--cap", str(cap_s)],
                                   stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code: int | None = process.wait(timeout=cap_s + 10.0)
        except subprocess.TimeoutExpired:
            code = None
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
    return code, time.monotonic() - begin


def run(out_dir: str, device: str = "auto", scale: str = "h200", problems: list[str] | None = None,
        budget_s: float | None = None, per_problem_s: float | None = None) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    if device == "auto":
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    budget = budget_s or BUDGET_S
    cap = per_problem_s or PER_PROBLEM_S
    wanted = problems or [p for p in os.environ.get("KERNELOPT_FAMILIES_PROBLEMS", "").split(",") if p]
    names = [n for n in PROBLEMS if not wanted or n in wanted] + [n for n in wanted if n not in PROBLEMS]
    started = time.monotonic()
    results: dict[str, Any] = {"environment": _environment(device), "scale": scale, "budget_s": budget,
                               "per_problem_s": cap, "gates": list(_gates()), "per_family": PER_FAMILY,
                               "problems": {}, "skipped": []}
    for name in names:
        left = budget - (time.monotonic() - started) - 10.0
        if left < min(cap, 60.0):
            results["skipped"].append(f"{name}: out of time")
            continue
        code, wall = _child(name, out_dir, device, scale, min(cap, left))
        entry = _read_json(os.path.join(out_dir, "problems", f"{name}.json"))
        if entry is None or (code not in (0, None) and "wall_s" not in entry):
            why = "ran past its cap" if code is None else f"exited with status {code}"
            entry = {**(entry or {"problem": name}), "error": f"the problem process {why}",
                     "log": f"logs/{name}.log"}
        entry["process_wall_s"] = round(wall, 1)
        results["problems"][name] = entry
        _save(out_dir, results)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    results["summary"] = summary(results)
    _save(out_dir, results)
    return results["summary"]


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _save(out_dir: str, results: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, RESULTS), "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    with open(os.path.join(out_dir, "families.md"), "w") as handle:
        handle.write(markdown(results))


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


def _cell(value: Any, spec: str = "", suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:{spec}}{suffix}" if spec else f"{value}{suffix}"


def markdown(results: dict[str, Any]) -> str:
    env = results["environment"]
    lines = [f"# Algorithmic reduction families against max-autotune ({env.get('date')})", "",
             f"GPU {env.get('gpu')}, torch {env.get('torch')}, triton {env.get('triton')}; sizes {results['scale']}; "
             f"gates {', '.join(map(str, results['gates']))}; up to {results['per_family']} candidate(s) per family "
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
                             f"{_cell(kernel.get('sol_pct'), '.0f', '%')} | – | – |")
            for row in kernel.get("candidates", []):
                if "error" in row or "skipped" in row:
                    verdict = row.get("error") or row.get("skipped")
                elif row.get("accepted"):
                    verdict = "accepted"
                else:
                    verdict = f"gate {row.get('failed_gate')}: {(row.get('reason') or '')[:120]}"
                ci = row.get("ci")
                e2e = (f"{row['speedup']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if row.get("speedup") and ci else
                       _cell(row.get("speedup"), ".3f"))
                params = row.get("params") or {}
                lines.append(
                    f"| {name} | {kernel['name']} | {row['family']} | {row['title']} | {verdict} | "
                    f"{_cell(row.get('kernel_speedup'), '.3f')} | {e2e} | "
                    f"{_cell(kernel.get('sol_pct'), '.0f', '%')} → {_cell(row.get('sol_after_pct'), '.0f', '%')} | "
                    f"{_cell(params.get('ideal_bytes'), ',')} | {_cell(params.get('expected_sol_pct'), '.0f', '%')} |")
    summary_ = results.get("summary") or {}
    if summary_:
        lines += ["", f"{summary_.get('accepted')} of {summary_.get('candidates')} candidates accepted; "
                      f"elapsed {summary_.get('elapsed_s')} s.", "", "| family | candidates | accepted | best kernel x "
                      "| best end-to-end x |", "|---|---|---|---|---|"]
        for family, item in (summary_.get("families") or {}).items():
            lines.append(f"| {family} | {item['candidates']} | {item['accepted']} | "
                         f"{_cell(item['best_kernel_speedup'])} | {_cell(item['best_speedup'])} |")
    if results.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200")
    parser.add_argument("--problems", default="")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=float, default=PER_PROBLEM_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        try:
            entry = run_problem(args.one, args.out, args.device, args.scale, args.cap)
        except Exception as exc:  # noqa: BLE001 - recorded for the campaign
            entry = {"problem": args.one, **_failure(exc)}
        _write(args.out, args.one, entry)
        return 0
    problems = [p for p in args.problems.split(",") if p] or None
    print(json.dumps(run(args.out, args.device, args.scale, problems), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
