"""The language server's job path on the GPU (issue 6), without the server itself (the GPU machine has
no pygls/lsprotocol/watchdog): ``kernelopt_core.job_runner`` runs the real CLI commands as the server does.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT lsp_jobs:170

1. ``kernelopt profile <H200 rmsnorm dump> --kernel K --device cuda:0 --events --json`` through
   the JobRunner: events streamed, the real ncu row read as the server reads it (results.py) and
   the diagnostic line it would show (kernel_facts.profile_line).
2. ``kernelopt optimize <H200 softmax dump> --kernel K --provider offline`` (beam 1x1) started and
   cancelled mid-run: how long the cancel takes, and whether any process of the job's tree (the
   CLI, its measurement worker in its own session, ncu) survives or still holds the GPU.

Writes ``lsp_jobs.{json,md}`` (and the profile's JSON result). Needs the GPU: the fixture dumps are
CUDA graphs. Never touches GPU clocks or settings. Knob: ``KERNELOPT_GPU_BUDGET_S`` (default 170).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import FIXTURE_DUMPS, ROOT, Budget, environment, write_json, write_record

if os.path.join(ROOT, "server") not in sys.path:  # kernelopt_lsp reads the profile as the server does
    sys.path.insert(0, os.path.join(ROOT, "server"))


def _kernel(dump: str) -> tuple[str, str]:
    from kernelopt_core.artifacts import parse_output_code

    kernel = parse_output_code(dump).kernels[0]
    return kernel.name, kernel.source_hash


def profile_through_runner(out_dir: str, budget_s: float) -> dict[str, Any]:
    from kernelopt_lsp.kernel_facts import profile_line
    from kernelopt_lsp.results import profile_records

    from kernelopt_core.job_runner import JobRequest, run_job

    dump = os.path.join(FIXTURE_DUMPS, "rmsnorm", "output_code.py")
    name, digest = _kernel(dump)
    events: list[dict[str, Any]] = []
    started = time.monotonic()
    job = run_job(JobRequest(kind="profile", args=["profile", dump, "--kernel", name, "--device", "cuda:0"],
                             device="cuda:0", cwd=out_dir, timeout_s=budget_s),
                  lambda j, e: events.append(e) if e else None)
    record: dict[str, Any] = {"state": job.state, "wall_s": round(time.monotonic() - started, 2),
                              "events": [e.get("message") for e in events], "returncode": job.returncode,
                              "error": job.error, "stderr_tail": job.stderr_tail[-2000:]}
    if isinstance(job.result, dict) and job.result.get("error"):
        record["result_error"] = job.result["error"]  # the server shows this as a failed job
    elif job.state == "done":
        write_json(os.path.join(out_dir, "profile_result.json"), job.result)
        try:
            rows = profile_records(job.result, dump, {name: digest})
            record["diagnostic"] = profile_line(rows[0]) if rows else None
            record["row_keys"] = sorted(rows[0].metrics) if rows else []
            record["source"] = job.result.get("source")
        except Exception as exc:  # noqa: BLE001 - record, do not stop
            record["read_error"] = repr(exc)
    return record


def _gpu_pids() -> set[int] | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except Exception:  # noqa: BLE001
        return None
    return {int(line) for line in out.split() if line.strip().isdigit()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


async def _cancel_mid_run(out_dir: str, wait_s: float) -> dict[str, Any]:
    from kernelopt_core.job_runner import JobRequest, JobRunner, descendants

    dump = os.path.join(FIXTURE_DUMPS, "softmax", "output_code.py")
    name, _ = _kernel(dump)
    runner = JobRunner(kill_grace_s=3.0)
    events: list[str] = []
    job = runner.submit(JobRequest(kind="optimize", device="cuda:0", cwd=out_dir, args=[
        "optimize", dump, "--kernel", name, "--provider", "offline", "--beam-width", "1", "--iterations", "1",
        "--plans", "1", "--retries", "1", "--device", "cuda:0"]),
        lambda j, e: events.append(str(e.get("message"))) if e else None)
    deadline = time.monotonic() + wait_s
    tree: set[int] = set()
    while time.monotonic() < deadline and not job.finished:
        if job.pid:
            tree |= descendants(job.pid) | {job.pid}
        if len(events) >= 3 and len(tree) > 1:
            break
        await asyncio.sleep(0.2)
    on_gpu_before = _gpu_pids()
    if job.pid:
        tree |= descendants(job.pid) | {job.pid}
    cancel_at = time.monotonic()
    runner.cancel(job.id)
    await asyncio.wait_for(runner.wait(job.id), timeout=60)
    cancelled_after = time.monotonic() - cancel_at
    await asyncio.sleep(4.0)  # past the SIGKILL grace
    survivors = sorted(pid for pid in tree if _alive(pid))
    on_gpu_after = _gpu_pids()
    return {"state": job.state, "events_before_cancel": events[:10], "cancel_to_finished_s": round(cancelled_after, 2),
            "process_tree": sorted(tree), "survivors": survivors,
            "tree_on_gpu_before": sorted((on_gpu_before or set()) & tree) if on_gpu_before is not None else "n/a",
            "tree_on_gpu_after": sorted((on_gpu_after or set()) & tree) if on_gpu_after is not None else "n/a"}


def run(out_dir: str) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    budget = Budget.from_env(170.0).total_s
    summary: dict[str, Any] = {"environment": environment("cuda:0")}
    for label, action in (("profile", lambda: profile_through_runner(out_dir, min(110.0, budget * 0.6))),
                          ("cancel", lambda: asyncio.run(_cancel_mid_run(out_dir, min(40.0, budget * 0.25))))):
        started = time.monotonic()
        try:
            summary[label] = action()
        except Exception as exc:  # noqa: BLE001 - one failure must not hide the other
            summary[label] = {"error": f"{type(exc).__name__}: {exc}"}
        summary[label]["seconds"] = round(time.monotonic() - started, 1)
    profile, cancel = summary["profile"], summary["cancel"]
    write_record(out_dir, "lsp_jobs", summary, "Language-server job path on the GPU", [
        f"- profile: {profile.get('state')} in {profile.get('wall_s')} s; diagnostic: `{profile.get('diagnostic')}`",
        f"- cancel: {cancel.get('state')} {cancel.get('cancel_to_finished_s')} s after the cancel; survivors "
        f"{cancel.get('survivors')}; on the GPU after: {cancel.get('tree_on_gpu_after')}"])
    return summary


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "lsp_jobs_out"), indent=1, default=str))
