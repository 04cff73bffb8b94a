"""Smoke check of a device (issue 2): versions, then compile, inspect and run a dump through the CLI.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT smoke:240
    KERNELOPT_PROBLEM_SCALE=tiny python -m benchmarks.gpu.smoke OUT_DIR        # on the CPU backend

``kernelopt compile examples/gelu_mlp.py`` (max-autotune on a GPU), ``kernelopt inspect`` of the dump
(kernels, vendor calls, classification) and ``kernelopt profile`` of it, which reloads the graph and
runs it (ncu on a GPU, timing in a worker otherwise). Writes ``smoke.{json,md}``.
Knobs: ``KERNELOPT_SMOKE_DEVICE`` (default auto), ``KERNELOPT_GPU_BUDGET_S`` (default 240).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from benchmarks.gpu.devicescript import ROOT, Budget, env_text, environment, kernelopt, table, write_record

EXAMPLE = os.path.join(ROOT, "examples", "gelu_mlp.py")


def run(out_dir: str) -> dict[str, Any]:
    budget = Budget.from_env(240.0)
    out_dir = os.path.abspath(out_dir)
    device = env_text("KERNELOPT_SMOKE_DEVICE", "auto")
    dump = os.path.join(out_dir, "gelu_dump")
    results: dict[str, Any] = {"environment": environment(device), "steps": {}}
    steps = (("compile", [EXAMPLE, "--out", dump, "--device", device, "--mode", "max-autotune"]),
             ("inspect", [dump]),
             ("profile", [dump, "--device", device, "--no-cache"]))
    for command, args in steps:
        done = kernelopt([command, *args], timeout_s=budget.left() - 10, cwd=out_dir)
        results["steps"][command] = {"ok": done.ok, "wall_s": done.wall_s, "result": done.data,
                                     **({} if done.ok else {"error": done.why()})}
        if not done.ok:
            break
    results["summary"] = _summary(results["steps"])
    write_record(out_dir, "smoke", results, "Smoke check", _markdown(results["summary"]))
    return results["summary"]


def _summary(steps: dict[str, Any]) -> dict[str, Any]:
    compiled = (steps.get("compile") or {}).get("result") or {}
    graphs = ((steps.get("inspect") or {}).get("result") or {}).get("graphs") or []
    profile = (steps.get("profile") or {}).get("result") or {}
    return {
        "ok": all(step["ok"] for step in steps.values()) and len(steps) == 3,
        "seconds": {name: step["wall_s"] for name, step in steps.items()},
        "errors": {name: step["error"] for name, step in steps.items() if "error" in step},
        "compile_max_abs_err": compiled.get("max_abs_err"),
        "graphs": [{"name": g["name"], "classification": g.get("classification"),
                    "kernels": [(k["name"], k["kind"]) for k in g.get("kernels", [])],
                    "extern": [c["op"] for c in g.get("extern_calls", [])]} for g in graphs],
        "profile_source": profile.get("source"),
        "profiled": [(k["name"], k.get("tier"), k.get("duration_ns")) for k in profile.get("kernels", [])],
    }


def _markdown(summary: dict[str, Any]) -> list[str]:
    rows = [(g["name"], g["classification"], ", ".join(f"{n} ({kind})" for n, kind in g["kernels"]),
             ", ".join(g["extern"])) for g in summary["graphs"]]
    return [f"{'All three steps passed' if summary['ok'] else 'FAILED'}: seconds {summary['seconds']}; "
            f"compile max |err| {summary['compile_max_abs_err']}; profile source {summary['profile_source']}.",
            "", *table(("graph", "classification", "Triton kernels", "vendor calls"), rows),
            *(f"- {name}: {error}" for name, error in summary["errors"].items())]


if __name__ == "__main__":
    import json

    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp/smoke"), indent=1, default=str))
