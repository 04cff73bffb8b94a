"""Hand-written Triton kernels on the H200 (issue 19): profile and offline optimize of the two
examples in ``examples/user_kernels/`` (Triton tutorial 02's fused softmax, tutorial 05's layer
norm forward), each through its own harness.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT user_kernels:540
    python -m benchmarks.gpu.user_kernels OUT_DIR --device cpu      # a local check (about 3 minutes)

``run(out_dir)`` copies the examples into ``OUT_DIR/workspace`` and, per kernel, runs the real
CLI in a process of its own (so each gets a fresh worker, as a user's run does):

1. ``kernelopt profile FILE --kernel K --json``: the harness runs, the kernel's launch is captured
   (grid, meta-parameters, autotune choice) and timed alone and in the harness; ncu profiles it;
2. ``kernelopt optimize FILE --kernel K --provider offline --json`` with a reduced search (beam 2,
   2 iterations, 2 plans, 2 retries): the same agents, rewrite families and four gates; a result
   is the decision, gate 4's speedup of the harness with its 95% CI, and the diff of the file.

Records ``user_kernels.{json,md}`` (copy them to ``benchmarks/results/h200/``) and each run's
``final.diff`` and ``report.md``. Knob: ``KERNELOPT_GPU_BUDGET_S`` (default 540); what does not fit
is recorded as skipped. GPU clocks and settings are never touched.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any

from benchmarks.gpu.devicescript import ROOT, Budget, environment, kernelopt, write_record

EXAMPLES = os.path.join(ROOT, "examples", "user_kernels")
# (file, kernel, harness or None for the file's own `# kernelopt: harness=` comment)
KERNELS = (("softmax.py", "softmax_kernel", None),
           ("layer_norm.py", "_layer_norm_fwd_fused", "layer_norm_problem.py"))
SEARCH = ["--beam-width", "2", "--iterations", "2", "--plans", "2", "--retries", "2"]
MARGIN_S = 20.0
PROFILE_S = 90.0


def _share(profile: dict[str, Any]) -> str:
    """The kernel's share of the harness call; "~100%" when it was timed over the whole call (no figure)."""
    if profile.get("time_share") is None:
        return "~100% (no figure: the kernel alone timed over the call)" if profile.get("time_share_note") else "-"
    return _number(profile["time_share"] * 100, ".1f", "%")


def _profile_row(data: dict[str, Any] | None) -> dict[str, Any]:
    if not data or not data.get("kernels"):
        return {}
    row = data["kernels"][0]
    keep = ("duration_ns", "time_share", "time_share_note", "harness_ms", "tier", "sol_pct", "traffic_ratio", "ideal_bytes", "dram_bytes",
            "dram_pct", "sm_pct", "occupancy_pct", "registers", "grid_size", "block_size", "grid", "meta",
            "autotune", "source", "top_rule", "causes", "harness")
    return {"source_of_metrics": data.get("source"), "notes": data.get("notes"), **{k: row.get(k) for k in keep}}


def _optimize_row(data: dict[str, Any] | None, cwd: str) -> dict[str, Any]:
    if not data:
        return {}
    kernel = (data.get("kernels") or [{}])[0]
    run_dir = data.get("run_dir") or ""
    run_dir = run_dir if os.path.isabs(run_dir) else os.path.join(cwd, run_dir)
    diff_path = os.path.join(run_dir, "final.diff")
    diff = open(diff_path, encoding="utf-8").read() if os.path.isfile(diff_path) else ""
    return {"decision": data.get("decision"), "reason": data.get("reason"), "speedup": data.get("speedup"),
            "ci": data.get("ci"), "timing_path": data.get("timing_path"), "best_title": kernel.get("best_title"),
            "best_family": kernel.get("best_family"), "kernel_speedup": kernel.get("kernel_speedup"),
            "candidates": kernel.get("candidates"), "screened_ok": kernel.get("screened_ok"),
            "rejections": kernel.get("rejections"), "run_dir": run_dir, "diff": diff,
            "final_speedup": data.get("speedup") if data.get("decision") == "optimized" else 1.0}


def run(out_dir: str, device: str = "auto") -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    budget = Budget.from_env(540.0)
    workspace = os.path.join(out_dir, "workspace")
    os.makedirs(workspace, exist_ok=True)
    for path in glob.glob(os.path.join(EXAMPLES, "*.py")):
        shutil.copy(path, workspace)
    os.environ.setdefault("KERNELOPT_CACHE_DIR", os.path.join(out_dir, "cache"))  # a fresh cross-run memory
    results: dict[str, Any] = {"environment": environment(device), "budget_s": budget.total_s,
                               "search": " ".join(["--provider offline", *SEARCH]), "kernels": {}}
    for index, (file, kernel, harness) in enumerate(KERNELS):
        row: dict[str, Any] = {"file": file, "harness": harness or "the file's `# kernelopt: harness=` comment"}
        results["kernels"][kernel] = row
        target = [file, "--kernel", kernel, "--device", device, *(["--harness", harness] if harness else [])]
        for step in ("profile", "optimize"):
            left = budget.left()
            if left < MARGIN_S + 30:
                row[step] = {"status": "skipped", "reason": f"budget: {left:.0f} s left"}
                continue
            # what is left, shared out: a profile takes up to PROFILE_S, the optimize runs split the rest
            profiles_after = len(KERNELS) - index - 1
            optimizes = len(KERNELS) - index
            cap = PROFILE_S if step == "profile" else (left - MARGIN_S - PROFILE_S * profiles_after) / optimizes
            cap = max(30.0, min(cap, left - MARGIN_S))
            extra = ["--provider", "offline", *SEARCH, "--run-root", os.path.join(out_dir, "runs")] \
                if step == "optimize" else []
            done = kernelopt([step, *target, *extra], timeout_s=cap, cwd=workspace,
                             log_path=os.path.join(out_dir, "logs", f"{step}_{kernel}.log"))
            entry = _profile_row(done.data) if step == "profile" else _optimize_row(done.data, workspace)
            entry.update(status="done" if done.data else "error", exit_status=done.returncode, wall_s=done.wall_s)
            if not done.data:
                entry["stderr"] = done.log
            row[step] = entry
            _save(out_dir, results)
    results["total_s"] = round(budget.elapsed(), 1)
    results["slower_than_original"] = [k for k, r in results["kernels"].items()
                                       if isinstance((r.get("optimize") or {}).get("final_speedup"), (int, float))
                                       and r["optimize"]["final_speedup"] < 1.0]
    _save(out_dir, results)
    return {"total_s": results["total_s"], "slower_than_original": results["slower_than_original"],
            "kernels": {k: {"profile": (r.get("profile") or {}).get("status"),
                            "decision": (r.get("optimize") or {}).get("decision"),
                            "speedup": (r.get("optimize") or {}).get("speedup")}
                        for k, r in results["kernels"].items()}}


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "user_kernels", results, "Hand-written Triton kernels: profile and offline optimize",
                 markdown(results))


def _number(value: Any, spec: str, suffix: str = "") -> str:
    return f"{value:{spec}}{suffix}" if isinstance(value, (int, float)) else "-"


def markdown(results: dict[str, Any]) -> list[str]:
    lines = [f"Search: `{results.get('search')}`.", "",
             "The examples of `examples/user_kernels/` (Triton tutorials 02 and 05) through their own harnesses. "
             "Profile: the kernel alone on its captured launch (ncu where available) and the harness call. "
             "Optimize: gate 4 times the harness on each side in its own process (timing path `harness`); "
             "a candidate is accepted only when the median and the 95% CI's lower bound clear 1.03x.", "",
             "## Profile", "",
             "| kernel | harness | kernel time | share of harness | harness call | tier | SOL | traffic | DRAM | "
             "grid | meta | source | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in results.get("kernels", {}).items():
        p = row.get("profile") or {}
        if p.get("status") != "done":
            lines.append(f"| `{name}` | {row.get('harness')} | {p.get('status')}: "
                         f"{str(p.get('reason') or p.get('stderr') or '')[-200:].replace('|', '/')} |||||||||||")
            continue
        meta = ", ".join(f"{k}={v}" for k, v in (p.get("meta") or {}).items())
        lines.append(f"| `{name}` | {p.get('harness')} | {_number((p.get('duration_ns') or 0) / 1e3, '.1f', ' µs')} | "
                     f"{_share(p)} | {_number(p.get('harness_ms'), '.4f', ' ms')} "
                     f"| {p.get('tier')} | {_number(p.get('sol_pct'), '.0f', '%')} | "
                     f"{_number(p.get('traffic_ratio'), '.2f', 'x')} | {_number(p.get('dram_pct'), '.0f', '%')} | "
                     f"{tuple(p.get('grid') or [])} | {meta} | {p.get('source_of_metrics')} | {p.get('wall_s')} |")
    lines += ["", "## Offline optimize", "", "| kernel | decision | harness speedup | 95% CI | best rewrite | "
              "kernel speedup | candidates (passed 1-2) | wall s | reason |", "|---|---|---|---|---|---|---|---|---|"]
    for name, row in results.get("kernels", {}).items():
        o = row.get("optimize") or {}
        ci = o.get("ci")
        reason = str(o.get("reason") or o.get("stderr") or o.get("status") or "").replace("|", "/")[:300]
        lines.append(f"| `{name}` | {o.get('decision') or o.get('status')} | {_number(o.get('speedup'), '.3f', 'x')} | "
                     f"{f'{ci[0]:.3f}-{ci[1]:.3f}' if ci else '-'} | {o.get('best_title') or '-'} | "
                     f"{_number(o.get('kernel_speedup'), '.3f', 'x')} | {o.get('candidates', '-')} "
                     f"({o.get('screened_ok', '-')}) | {o.get('wall_s', '-')} | {reason} |")
    for name, row in results.get("kernels", {}).items():
        diff = (row.get("optimize") or {}).get("diff")
        if diff:
            lines += ["", f"### The accepted edit of `{name}`", "", "```diff", diff.rstrip("\n"), "```"]
    lines += ["", f"Slower than the original: {results.get('slower_than_original', [])} (must stay empty: only a "
                  f"gate-4 acceptance changes the file). Total {results.get('total_s')} s."]
    return lines


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    print(json.dumps(run(args.out_dir, args.device), indent=1, default=str))
