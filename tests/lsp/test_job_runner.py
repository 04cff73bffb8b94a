"""kernelopt_core.job_runner: subprocess jobs with event streaming, one at a time per device, cancel by
killing the process group. The command is a small script given through ``argv_builder``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from conftest import processes_below

from kernelopt_core.job_runner import JobRequest, JobRunner, cli_argv, run_job
from kernelopt_core.process_lifetime import end_tree

# A stand-in command: its behaviour is chosen by its first argument.
SCRIPT = r'''
import json, os, subprocess, sys, time
EVENT = "@kernelopt-event "
mode = sys.argv[1]
def emit(d):
    print(EVENT + json.dumps(d), flush=True)
if mode == "ok":
    for i in (1, 2, 3):
        emit({"event": "progress", "message": f"step {i}", "iteration": i, "iterations": 3})
    print("some plain log line", flush=True)
    emit({"event": "result", "result": {"value": 42, "reason": "all good"}})
elif mode == "plain-json":
    print(json.dumps({"value": 7}))
elif mode == "crash":
    print("Traceback (most recent call last):\nValueError: boom", file=sys.stderr, flush=True)
    sys.exit(3)
elif mode == "rejected":
    emit({"event": "result", "result": {"accepted": False, "reason": "gate 2 failed"}})
    sys.exit(1)
elif mode == "sleep":
    # A worker child in a session of its own, as kernelopt_core.measure.worker starts it.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with open(sys.argv[2], "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    emit({"event": "progress", "message": "sleeping"})
    time.sleep(60)
elif mode == "worker-mid-job":
    # As the CLI does: owned by the runner, a worker of its own, whose job sleeps (tests.lifetime_tasks).
    from kernelopt_core.process_lifetime import die_with_owner
    die_with_owner()
    import threading
    from kernelopt_core.measure.worker import get_worker
    marker = sys.argv[2]
    threading.Thread(target=lambda: get_worker("cpu").call("tests.lifetime_tasks:sleep_task", {"marker": marker},
                                                             timeout_s=600), daemon=True).start()
    while not os.path.exists(marker):
        time.sleep(0.05)
    emit({"event": "progress", "message": "mid-job"})
    time.sleep(600)
elif mode == "stamp":
    with open(sys.argv[2], "a") as f:
        f.write(f"start {time.monotonic()}\n")
    time.sleep(float(sys.argv[3]))
    with open(sys.argv[2], "a") as f:
        f.write(f"end {time.monotonic()}\n")
    emit({"event": "result", "result": {}})
'''


def script_argv(python: str, args: Sequence[str]) -> list[str]:
    return [python, "-c", SCRIPT, *args]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_cli_argv_is_the_kernelopt_cli_in_event_mode():
    argv = cli_argv("/usr/bin/python3", ["profile", "d.py", "--kernel", "k"])
    assert argv == ["/usr/bin/python3", "-m", "kernelopt_core.cli.main", "profile", "d.py", "--kernel", "k",
                    "--events", "--json"]


async def test_events_and_result_reach_the_listener():
    runner = JobRunner(argv_builder=script_argv)
    seen: list[tuple[str, str | None]] = []
    job = runner.submit(JobRequest(kind="optimize", args=["ok"]),
                        lambda j, e: seen.append((j.state, e.get("message") if e else None)))
    done = await runner.wait(job.id)
    assert done.state == "done" and done.result == {"value": 42, "reason": "all good"}
    assert done.message == "all good" and done.returncode == 0
    assert seen[0] == ("queued", None) and seen[1] == ("running", None)
    assert [m for _, m in seen if m] == ["step 1", "step 2", "step 3"]
    assert seen[-1] == ("done", None)
    assert done.last_event["iteration"] == 3
    assert done.output_lines == ["some plain log line"]


async def test_plain_json_crash_and_rejected_results():
    runner = JobRunner(argv_builder=script_argv)
    plain = await runner.wait(runner.submit(JobRequest(kind="profile", args=["plain-json"])).id)
    assert plain.state == "done" and plain.result == {"value": 7}
    crash = await runner.wait(runner.submit(JobRequest(kind="profile", args=["crash"])).id)
    assert crash.state == "failed" and crash.returncode == 3
    assert "exit code 3" in crash.error and "ValueError: boom" in crash.error
    # A non-zero exit with a result: the job worked, the verdict is negative.
    rejected = await runner.wait(runner.submit(JobRequest(kind="verify", args=["rejected"])).id)
    assert rejected.state == "done" and rejected.returncode == 1 and rejected.result["accepted"] is False


async def test_missing_interpreter_fails_without_raising():
    runner = JobRunner(python="/nonexistent/python", argv_builder=script_argv)
    job = await runner.wait(runner.submit(JobRequest(kind="profile", args=["ok"])).id)
    assert job.state == "failed" and "could not start /nonexistent/python" in job.error


async def test_cancel_kills_the_job_and_its_worker(tmp_path: Path):
    runner = JobRunner(argv_builder=script_argv, kill_grace_s=1.0)
    pids_file = tmp_path / "pids"
    job = runner.submit(JobRequest(kind="optimize", args=["sleep", str(pids_file)]))
    deadline = time.monotonic() + 20
    while not (pids_file.exists() and pids_file.read_text().strip()):
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.05)
    parent, child = map(int, pids_file.read_text().split())
    assert runner.cancel(job.id) == [job.id]
    finished = await asyncio.wait_for(runner.wait(job.id), timeout=10)
    assert finished.state == "cancelled"
    deadline = time.monotonic() + 10
    while _alive(child) or _alive(parent):
        assert time.monotonic() < deadline, "the job's worker child survived the cancel"
        await asyncio.sleep(0.05)
    assert runner.cancel(job.id) == []  # already over


async def test_one_job_at_a_time_per_device(tmp_path: Path):
    runner = JobRunner(argv_builder=script_argv)
    log = tmp_path / "log"
    first = runner.submit(JobRequest(kind="profile", args=["stamp", str(log), "0.6"], device="cpu"))
    second = runner.submit(JobRequest(kind="profile", args=["stamp", str(log), "0.1"], device="cpu"))
    other = tmp_path / "other"
    third = runner.submit(JobRequest(kind="profile", args=["stamp", str(other), "0.6"], device="cuda:1"))
    assert second.state == "queued"
    await asyncio.gather(*(runner.wait(j.id) for j in (first, second, third)))
    stamps = [(kind, float(t)) for kind, t in (line.split() for line in log.read_text().splitlines())]
    assert [k for k, _ in stamps] == ["start", "end", "start", "end"]  # never overlapping on one device
    other_start = float(other.read_text().split()[1])
    assert other_start < stamps[1][1]  # another device ran alongside


async def test_cancel_a_queued_job_and_timeouts(tmp_path: Path):
    runner = JobRunner(argv_builder=script_argv, kill_grace_s=0.5)
    blocker = runner.submit(JobRequest(kind="optimize", args=["sleep", str(tmp_path / "p")], timeout_s=1.5))
    queued = runner.submit(JobRequest(kind="profile", args=["ok"]))
    assert runner.cancel(queued.id) == [queued.id]
    assert queued.state == "cancelled"
    timed_out = await asyncio.wait_for(runner.wait(blocker.id), timeout=15)
    assert timed_out.state == "failed" and "timed out after 1.5 s" in timed_out.error
    assert (await runner.wait(queued.id)).state == "cancelled" and queued.returncode is None


def test_run_job_from_synchronous_code():
    job = run_job(JobRequest(kind="profile", args=["ok"]), argv_builder=script_argv, python=sys.executable)
    assert job.state == "done" and job.result["value"] == 42


async def _mid_job(marker: Path, bound_s: float = 300.0) -> dict:
    deadline = time.monotonic() + bound_s  # the job's worker imports torch first
    while not marker.exists():
        assert time.monotonic() < deadline, "the job's worker never got to its job"
        await asyncio.sleep(0.1)
    return json.loads(marker.read_text())


async def _gone(pids: dict[int, str], bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s
    while alive := {pid: command for pid, command in pids.items() if _alive(pid)}:
        assert time.monotonic() < deadline, f"still running: {alive}"
        await asyncio.sleep(0.1)


async def test_a_job_cancelled_while_its_worker_is_mid_job_leaves_no_process(tmp_path: Path):
    runner = JobRunner(argv_builder=script_argv)
    marker = tmp_path / "mid-job.json"
    job = runner.submit(JobRequest(kind="optimize", args=["worker-mid-job", str(marker)]))
    pids = await _mid_job(marker)
    seen = processes_below(job.pid)
    assert {pids["worker"], pids["grandchild"]} <= set(seen)
    assert runner.cancel(job.id) == [job.id]
    finished = await asyncio.wait_for(runner.wait(job.id), timeout=120)
    assert finished.state == "cancelled"
    await _gone(seen)


RUNNER = """
import sys
from kernelopt_core.job_runner import JobRequest, run_job
script, marker = sys.argv[1], sys.argv[2]
run_job(JobRequest(kind="optimize", args=["worker-mid-job", marker]), argv_builder=lambda py, a: [py, script, *a])
"""


async def test_a_job_ends_with_its_runner_killed_mid_job(tmp_path: Path):
    """The language server killed with kill -9: its job, the job's worker and what that started go too."""
    script, marker = tmp_path / "job.py", tmp_path / "mid-job.json"
    script.write_text(SCRIPT)
    server = subprocess.Popen([sys.executable, "-c", RUNNER, str(script), str(marker)], start_new_session=True)
    seen: dict[int, str] = {}
    try:
        pids = await _mid_job(marker)
        seen.update(processes_below(server.pid))
        assert {pids["worker"], pids["grandchild"]} <= set(seen)
        os.kill(server.pid, signal.SIGKILL)  # nobody cleans up: each process must end with its owner
        server.wait(timeout=30)
        await _gone(seen)
    finally:
        for pid in [server.pid, *seen]:  # whatever a failure left behind
            end_tree(pid, wait_s=1.0)
        server.wait(timeout=30)
