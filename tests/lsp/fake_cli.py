"""A stand-in for ``kernelopt optimize|profile|verify ... --events --json`` in the job-runner and
language-server tests: it speaks the same event protocol, quickly, without torch.

Knobs (tests only) come from ``fake-cli.json`` in the job's working folder: ``{"sleep": seconds
per step, "crash": true, "findings": {...}}``; ``findings`` (``accounting``, ``config_change``,
``suggestions``) is merged into the optimize result, as a run that knew the problem reports them. It records its pid in ``.kernelopt/fake-pids/<pid>`` so a test can
check that a cancelled job's process is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

EVENT = "@kernelopt-event "


def emit(data: dict) -> None:
    sys.stdout.write(EVENT + json.dumps(data) + "\n")
    sys.stdout.flush()


def progress(message: str, **fields) -> None:
    emit({"event": "progress", "message": message, **fields})


def kernel_source(dump: str, name: str) -> str:
    from kernelopt_core.artifacts import parse_output_code

    kernel = parse_output_code(os.path.abspath(dump)).kernel(name)
    if kernel is None:
        raise SystemExit(f"no kernel {name} in {dump}")
    return kernel.source


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.add_argument("dump")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--candidate")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--events", action="store_true")
    parser.add_argument("--json", action="store_true")
    args, _ = parser.parse_known_args()
    knobs = {}
    if os.path.isfile("fake-cli.json"):
        with open("fake-cli.json", encoding="utf-8") as handle:
            knobs = json.load(handle)
    os.makedirs(os.path.join(".kernelopt", "fake-pids"), exist_ok=True)
    open(os.path.join(".kernelopt", "fake-pids", str(os.getpid())), "w").close()
    sleep = float(knobs.get("sleep", 0))
    if knobs.get("crash"):
        print("Traceback (most recent call last):\nRuntimeError: the fake worker crashed", file=sys.stderr)
        return 3
    if args.command == "profile":
        progress("profiling", stage="profile", percentage=50)
        time.sleep(sleep)
        emit({"event": "result", "result": {"kernels": [{
            "name": args.kernel, "graph": os.path.abspath(args.dump), "duration_ns": 12345, "time_share": 0.31,
            "time_share_of": "graph", "tier": "memory-bound", "source": "ncu",
            "dram_pct": 62.0, "sm_pct": 21.0, "occupancy_pct": 48.0, "registers": 32,
            "rules": [{"name": "UncoalescedGlobalAccess", "type": "OPT", "description": "uncoalesced loads",
                       "est_speedup_pct": 25.0},
                      {"name": "SmallGrid", "type": "WRN", "description": "grid too small", "est_speedup_pct": 5.0}],
        }]}})
        return 0
    if args.command == "verify":
        with open(args.candidate, encoding="utf-8") as handle:
            candidate = handle.read()
        for gate, name in ((1, "static"), (2, "kernel"), (3, "model"), (4, "perf")):
            progress(f"gate {gate} ({name})", stage="gate", percentage=25 * (gate - 1))
            time.sleep(sleep)
            if gate == 2 and "BAD" in candidate:
                emit({"event": "result", "result": {
                    "accepted": False, "failed_gate": 2, "reason": "max abs error 3.1e-01 > 1e-03 on seed 42",
                    "gates": [{"gate": 1, "name": "static", "passed": True, "reason": "ok", "seconds": 0.1},
                              {"gate": 2, "name": "kernel", "passed": False, "reason": "max abs error 3.1e-01",
                               "seconds": 0.2}],
                    "speedup": None, "ci": None}})
                return 1
        emit({"event": "result", "result": {
            "accepted": True, "failed_gate": None, "reason": "all gates passed",
            "gates": [{"gate": g, "name": n, "passed": True, "reason": "ok", "seconds": 0.1}
                      for g, n in ((1, "static"), (2, "kernel"), (3, "model"), (4, "perf"))],
            "speedup": 1.12, "ci": [1.05, 1.19]}})
        return 0
    if args.command == "optimize":
        original = kernel_source(args.dump, args.kernel)
        optimized = original.rstrip("\n") + "\n# rewritten by the fake optimizer\n"
        for i in range(1, args.iterations + 1):
            progress(f"iteration {i}/{args.iterations} · candidate 1/1 · gate 2", stage="iteration",
                     iteration=i, iterations=args.iterations, best_speedup=1.0 + 0.1 * i)
            time.sleep(sleep)
        run_id = f"fake-{os.getpid()}"
        run_dir = os.path.join(".kernelopt", "runs", run_id)
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "original_kernel.py"), "w", encoding="utf-8") as handle:
            handle.write(original)
        with open(os.path.join(run_dir, "optimized_kernel.py"), "w", encoding="utf-8") as handle:
            handle.write(optimized)
        with open(os.path.join(run_dir, "final.diff"), "w", encoding="utf-8") as handle:
            handle.write("--- a/output_code.py\n+++ b/output_code.py\n@@ fake @@\n+# rewritten\n")
        # The shape of kernelopt_core.search.pipeline.OptimizeResult.to_json(), less its inline
        # accepted_sources: the server must then read the kernel from optimized_kernel.py (the
        # real command's result is read in test_lsp_real_jobs.py).
        result = {"run_id": run_id, "run_dir": os.path.abspath(run_dir), "graph_path": os.path.abspath(args.dump),
                  "decision": "optimized", "reason": "gate 4 passed",
                  "speedup": 1.21, "ci": [1.1, 1.3], "timing_path": "module-call",
                  "kernels": [{"name": args.kernel, "speedup": 1.21}], "accepted_kernels": [args.kernel],
                  "diff": os.path.abspath(os.path.join(run_dir, "final.diff")),
                  "cascade": {"accepted": True, "failed_gate": None, "reason": "all gates passed", "gates": [],
                              "speedup": 1.21, "ci": [1.1, 1.3], "timing_path": "module-call"},
                  **knobs.get("findings", {})}
        with open(os.path.join(run_dir, "result.json"), "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        emit({"event": "result", "result": result})
        return 0
    print(f"unknown command {args.command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
