"""compute-sanitizer on a user kernel's finalist (issue 28, item 4): memcheck and racecheck verdicts and times.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT user_sanitizer:180
    python -m benchmarks.gpu.user_sanitizer OUT_DIR --device cpu      # a local check (about a minute)

Copies ``examples/user_kernels/`` into ``OUT_DIR/workspace`` and, through the public Python API
(``run_user_cascade``: the CLI's ``kernelopt verify`` has no option for the sanitizer's limit), sends
edits of Triton tutorial 02's softmax (``softmax.py``, its ``bench_softmax`` harness) through the gates:

1. ``exp2``: a correct rewrite (exp as exp2) through gates 1-3, as a finalist goes; on a GPU its gate 3
   verdict carries memcheck and racecheck on the harness run once with the candidate, each timed;
2. on a GPU only, ``shifted-store``: each row stored one row further on (the last row, 3 KB, past the
   output's end) through gate 3 alone. On the H200 memcheck did not report it (2026-12-02: an overrun that
   stays inside the output's allocation, which the driver rounds up, is not a stray access to the tool);
   gate 3's seeds reject it, and gate 2's guard regions catch such stores before;
3. on a GPU only, ``far-store``: every row stored 1 GiB past the output, outside every allocation, through
   gate 3 alone: memcheck must reject it before any seed runs.

On the CPU every gate 3 verdict says races and stray accesses were not checked. Records
``user_sanitizer.{json,md}``: per run the decision, the reason, each tool's verdict and seconds, the
target's steps. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 170), ``KERNELOPT_USER_SANITIZER_LIMIT_S``
(each tool's limit, default 60: one that does not finish is a note). GPU clocks and settings are never
touched.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    ROOT,
    Budget,
    env_float,
    environment,
    failure,
    table,
    use_device,
    write_record,
)

EXAMPLES = os.path.join(ROOT, "examples", "user_kernels")
FILE, KERNEL, HARNESS = "softmax.py", "softmax_kernel", "bench_softmax"
# (label, gates, the edit of the kernel module, GPU only)
EDITS = (("exp2", (1, 2, 3), ("tl.exp(row_minus_max)", "tl.exp2(row_minus_max * 1.4426950408889634)"), False),
         ("shifted-store", (3,), ("tl.store(output_ptrs,", "tl.store(output_ptrs + n_cols,"), True),
         ("far-store", (3,), ("tl.store(output_ptrs,", "tl.store(output_ptrs + 268435456,"), True))
RUN_S = 70.0  # what one cascade is given at least (worker start, gate 1's compile, the sanitizers, the seeds)


def _tool(run: dict[str, Any]) -> str:
    """One tool's verdict in words: its errors, or why it did not run."""
    if not run.get("ran"):
        return f"not run: {run.get('summary')}"
    what = "hazards" if run.get("tool") == "racecheck" else "errors"
    return f"{run.get('errors')} {what}" + (f": {run.get('summary')}" if run.get("errors") else "")


def _record(label: str, gates: tuple[int, ...], result: Any, seconds: float) -> dict[str, Any]:
    record: dict[str, Any] = {"run": label, "gates": list(gates), "accepted": result.accepted,
                              "failed_gate": result.failed_gate, "reason": result.reason, "wall_s": round(seconds, 1),
                              "gate_seconds": {v.gate: round(v.seconds, 1) for v in result.gates}}
    model = result.verdict(3)
    if model is not None:
        runs = model.numbers.get("sanitizer") or []
        record["sanitizer"] = [{k: r.get(k) for k in ("tool", "ran", "errors", "seconds", "summary", "steps",
                                                       "shared_memory")} for r in runs]
        record["tools"] = {r.get("tool"): {"verdict": _tool(r), "seconds": round(float(r.get("seconds") or 0), 1)}
                           for r in runs}
        record["sanitizer_note"] = model.numbers.get("sanitizer_note")
    return record


def run(out_dir: str, device: str = "auto") -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    budget = Budget.from_env(170.0)
    device = use_device(device)
    workspace = os.path.join(out_dir, "workspace")
    os.makedirs(workspace, exist_ok=True)
    for name in os.listdir(EXAMPLES):
        if name.endswith(".py"):
            shutil.copy(os.path.join(EXAMPLES, name), workspace)
    limit_s = env_float("KERNELOPT_USER_SANITIZER_LIMIT_S", 60.0)
    results: dict[str, Any] = {"environment": environment(device), "budget_s": budget.total_s,
                               "sanitizer_limit_s": limit_s, "file": FILE, "kernel": KERNEL, "harness": HARNESS,
                               "runs": []}
    try:
        from kernelopt_core.gates.sanitize import find_sanitizer
        from kernelopt_core.gates.verdict import CascadeConfig
        from kernelopt_core.measure.worker import close_all_workers
        from kernelopt_core.userkernels.cascade import run_user_cascade
        from kernelopt_core.userkernels.target import user_target

        results["compute_sanitizer"] = find_sanitizer()
        target = user_target(os.path.join(workspace, FILE), KERNEL, HARNESS, device)
        for label, gates, (old, new), gpu_only in EDITS:
            if gpu_only and not device.startswith("cuda"):
                results["runs"].append({"run": label, "skipped": "GPU only (the interpreter has no sanitizer)"})
                continue
            if not budget.allows(RUN_S):
                results["runs"].append({"run": label, "skipped": f"budget: {budget.left():.0f} s left"})
                continue
            candidate = target.module.source.replace(old, new)
            assert candidate != target.module.source, f"the {label} edit does not apply"
            config = CascadeConfig(device=device, run_gates=gates, sanitizer_timeout_s=min(limit_s, budget.left() / 2),
                                   job_timeout_s=max(30.0, budget.left() - 15),
                                   workdir=os.path.join(out_dir, "work", label))
            begin = time.monotonic()
            try:
                result = run_user_cascade(target, candidate, config)
                results["runs"].append(_record(label, gates, result, time.monotonic() - begin))
            except Exception as exc:  # noqa: BLE001 - recorded; the next run goes on
                results["runs"].append({"run": label, **failure(exc)})
            _save(out_dir, results)
        close_all_workers()
    except Exception as exc:  # noqa: BLE001
        results.update(failure(exc))
    results["total_s"] = round(budget.elapsed(), 1)
    _save(out_dir, results)
    return summary(results)


def summary(results: dict[str, Any]) -> dict[str, Any]:
    runs = {r["run"]: r for r in results["runs"]}
    return {"device": results["environment"].get("device"), "compute_sanitizer": results.get("compute_sanitizer"),
            "runs": {name: {"accepted": r.get("accepted"), "failed_gate": r.get("failed_gate"),
                            "tools": r.get("tools"), "note": r.get("sanitizer_note"),
                            "error": r.get("error"), "skipped": r.get("skipped")} for name, r in runs.items()},
            "errors": [f"{r['run']}: {r['error']}" for r in results["runs"] if "error" in r]
            + ([results["error"]] if "error" in results else []), "total_s": results.get("total_s")}


def _save(out_dir: str, results: dict[str, Any]) -> None:
    write_record(out_dir, "user_sanitizer", results, "compute-sanitizer on a user kernel's finalist (issue 28)",
                 markdown(results))


def markdown(results: dict[str, Any]) -> list[str]:
    rows = []
    for r in results["runs"]:
        if "skipped" in r or "error" in r:
            rows.append([r["run"], "-", r.get("skipped") or r.get("error"), "-", "-", "-", "-"])
            continue
        tools = r.get("tools") or {}
        memcheck, racecheck = tools.get("memcheck") or {}, tools.get("racecheck") or {}
        steps = next((s.get("steps") for s in r.get("sanitizer") or [] if s.get("steps")), None)
        decision = "passed" if r["accepted"] else f"gate {r['failed_gate']}"
        rows.append([r["run"], ",".join(map(str, r["gates"])), f"{decision}: {r['reason'][:220]}",
                     f"{memcheck.get('verdict', '-')} ({memcheck.get('seconds', '-')} s)" if memcheck else "-",
                     f"{racecheck.get('verdict', '-')} ({racecheck.get('seconds', '-')} s)" if racecheck else "-",
                     steps or r.get("sanitizer_note") or "-", r["wall_s"]])
    return [f"`{results['file']}`, kernel `{results['kernel']}`, harness `{results['harness']}()`; compute-sanitizer: "
            f"{results.get('compute_sanitizer') or 'not found'}; each tool's limit {results['sanitizer_limit_s']:g} s. "
            "Both tools run side by side on the harness run once with the candidate (only its renamed kernels "
            "instrumented). On the CPU nothing is checked and the note says so.", "",
            *table(("run", "gates", "decision", "memcheck", "racecheck", "target's steps (or the note)", "wall s"),
                   rows), "", f"Total {results.get('total_s')} s." + (f" Error: {results['error']}"
                                                                      if "error" in results else "")]


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    print(json.dumps(run(args.out_dir, args.device), indent=1, default=str))
