"""The configuration check at a real working set (issue 40): its time and the device's memory.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT config_check:300
    KERNELOPT_CONFIG_CHECK_DEVICE=cpu KERNELOPT_PROBLEM_SCALE=tiny python3 -m benchmarks.gpu.config_check /tmp/cc

``run(out_dir)`` checks the recommended configuration change of one kbscale problem (default
``softmax_long_rows``: 4096x393216 fp32, 6.4 GB in and 6.4 GB out) the way the optimizer does at the end of
a run: in one worker, after the job that gives back the search's working sets
(``gates/working_sets.py``), ``mode='max-autotune-no-cudagraphs'`` against ``max-autotune`` (twice: the
first compile cold, the second with Inductor's cache warm, as in a bench problem whose own compile filled
it), then the static-inputs option. Per check: the verdict, its speedup, the wall time, the job's allocator
peak over the problem's inputs and outputs, and the device's memory in use by every process (nvidia-smi,
sampled each 0.5 s while it runs). Targets: a check <= 60 s, device peak <= 3x the working set, and no
out-of-memory. Writes ``config_check.json`` and ``config_check.md``. Knobs: ``KERNELOPT_GPU_BUDGET_S``
(default 300), ``KERNELOPT_CONFIG_CHECK_PROBLEM``, ``KERNELOPT_CONFIG_CHECK_DEVICE`` (default cuda:0).
The driver never imports torch: the worker owns the device.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.gpu.devicescript import KBSCALE, Budget, env_text, environment, write_record  # noqa: E402

TARGETS = {"check_s": 60.0, "peak_over_working_set": 3.0}
TASK = "kernelopt_core.measure.accounting_verify:verify_config_task"


class DeviceMemorySampler:
    """The device's memory in use by every process (MiB), as nvidia-smi reports it, sampled on a thread."""

    def __init__(self, index: int = 0, every_s: float = 0.5):
        self.index, self.every_s = index, every_s
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", f"--id={self.index}", "--query-gpu=memory.used",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
                self.samples.append(int(out.stdout.strip().splitlines()[0]))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                return  # no nvidia-smi (the CPU): no samples
            self._stop.wait(self.every_s)

    def __enter__(self) -> DeviceMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def one_check(worker: Any, payload: dict[str, Any], label: str, timeout_s: float, device: str) -> dict[str, Any]:
    index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
    begin = time.monotonic()
    with DeviceMemorySampler(index) as sampler:
        outcome = worker.call(TASK, payload, timeout_s=timeout_s)
    wall = time.monotonic() - begin
    row: dict[str, Any] = {"label": label, "wall_s": round(wall, 2), "ok": outcome.ok,
                           "device_used_mib_max": max(sampler.samples) if sampler.samples else None,
                           "device_used_mib_samples": len(sampler.samples)}
    if not outcome.ok:
        failure = outcome.failure
        row.update(error=f"{failure.kind}: {failure.message}" if failure else "failed")
        return row
    value = outcome.value
    perf = next((g for g in value.get("gates") or [] if g.get("gate") == 4), {})
    memory = value.get("memory") or {}
    row.update(accepted=value.get("accepted"), reason=value.get("reason"), speedup=perf.get("speedup"),
               ci=perf.get("ci"), gates_s={g.get("gate"): round(float(g.get("seconds") or 0.0), 2)
                                            for g in value.get("gates") or []},
               peak_bytes=memory.get("peak_bytes"), working_set_bytes=memory.get("working_set_bytes"),
               peak_over_working_set=memory.get("peak_over_working_set"))
    working = memory.get("working_set_bytes")
    if working and row["device_used_mib_max"]:
        row["device_used_over_working_set"] = round(row["device_used_mib_max"] * 2**20 / working, 3)
    return row


def run(out_dir: str) -> dict[str, Any]:
    from kernelopt_core.measure.worker import Worker

    os.makedirs(out_dir, exist_ok=True)
    budget = Budget.from_env(300.0)
    device = env_text("KERNELOPT_CONFIG_CHECK_DEVICE", "cuda:0")
    name = env_text("KERNELOPT_CONFIG_CHECK_PROBLEM", "softmax_long_rows")
    problem = os.path.join(KBSCALE, f"{name}.py")
    baseline = "max-autotune" if device.startswith("cuda") else "default"
    base = {"problem": problem, "baseline_mode": baseline, "seeds": [0, 42, 123], "tol": 1e-4,
            "min_speedup": 1.03, "rounds": None, "device": device}
    checks = [("mode, cold cache", {**base, "candidate_mode": "max-autotune-no-cudagraphs"}),
              ("mode, warm cache", {**base, "candidate_mode": "max-autotune-no-cudagraphs"}),
              ("static inputs", {**base, "candidate_mode": baseline, "static_inputs": True})]
    rows: list[dict[str, Any]] = []
    with Worker(device) as worker:
        released = worker.call("kernelopt_core.gates.working_sets:release_working_sets", {"device": device},
                               timeout_s=120.0)
        for label, payload in checks:
            left = budget.left() - 15.0
            if left < 30.0:
                rows.append({"label": label, "skipped": f"{left:.0f} s of the call left"})
                continue
            rows.append(one_check(worker, payload, label, left, device))
            print(f"[config_check] {rows[-1]}", flush=True)
    done = [r for r in rows if r.get("ok")]
    verdict = {
        "problem": name, "device": device, "environment": environment(device), "checks": rows,
        "released": released.value if released.ok else None, "targets": TARGETS,
        "passed": bool(done) and all(r["wall_s"] <= TARGETS["check_s"] for r in done if "warm" in r["label"]
                                     or "static" in r["label"])
                  and all((r.get("peak_over_working_set") or 0.0) <= TARGETS["peak_over_working_set"] for r in done)
                  and all(r.get("ok") for r in rows if "skipped" not in r),
    }
    lines = [f"`{name}` on {device}: the configuration check in one worker after the search's working sets were "
             "released (targets: <= 60 s with a warm cache, allocator peak <= 3x the working set, no out of memory).",
             "", "| check | ok | accepted | speedup | wall s | gates s | peak / working set | device used MiB (all "
             "processes) | used / working set |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['label']} | skipped: {r['skipped']} | | | | | | | |")
            continue
        speed = f"{r['speedup']:.3f}x" if isinstance(r.get("speedup"), (int, float)) else "-"
        lines.append(f"| {r['label']} | {'yes' if r['ok'] else r.get('error', 'no')} | {r.get('accepted', '-')} "
                     f"| {speed} | {r['wall_s']} | {r.get('gates_s', '-')} | {r.get('peak_over_working_set', '-')} "
                     f"| {r.get('device_used_mib_max', '-')} | {r.get('device_used_over_working_set', '-')} |")
    write_record(out_dir, "config_check", verdict, "The configuration check at a real working set (issue 40)", lines)
    print(f"config_check: {'PASS' if verdict['passed'] else 'FAIL'}", flush=True)
    return verdict


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python3 -m benchmarks.gpu.config_check OUT_DIR")
    run(sys.argv[1])
