"""kernelopt_core.process_lifetime: children end with their owner, whichever thread started them.

Plain Python children (no torch) take seconds; the worker test starts a CPU worker. Liveness is
asked of psutil directly; waits poll for a condition with a generous bound, never race a wall clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import processes_below, running

from kernelopt_core.measure import worker_scratch
from kernelopt_core.measure.task_context import SCRATCH_ENV, SHARED_MEMORY_ENV
from kernelopt_core.measure.worker import Worker
from kernelopt_core.process_lifetime import ProcessTree, end_tree

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}

# An owned child: it answers "pong" to each "ping" on stdin, so the owner can prove it is alive.
CHILD = """
import sys
from kernelopt_core.process_lifetime import die_with_owner
die_with_owner(watch={watch})
for line in sys.stdin:
    print("pong", flush=True)
"""

# The owner: starts the child from a thread that ends once the child has set itself up, proves the
# child still answers, reports its pid, and waits to be killed.
OWNER = """
import os, subprocess, sys, threading, time
from kernelopt_core.process_lifetime import start_owned
started = []
def start():
    started.append(threading.get_native_id())
    child = start_owned([sys.executable, "-c", sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdin.write("ping\\n"); child.stdin.flush()
    assert child.stdout.readline().strip() == "pong"  # its parent-death signal is set: the thread may end
    started.append(child)
thread = threading.Thread(target=start)
thread.start()
thread.join()
while os.path.exists(f"/proc/self/task/{started[0]}"):  # join returns a moment before the OS thread is gone
    time.sleep(0.01)
child = started[1]
try:
    child.stdin.write("ping\\n"); child.stdin.flush()
    answer = child.stdout.readline().strip() or "none"
except BrokenPipeError:
    answer = "none"
print(child.pid, answer, flush=True)
time.sleep(600)
"""

# Started through a foreign program (as ncu starts its target): the launcher of owned_command,
# then a plain Python program that starts the target and waits for it.
THROUGH = """
import subprocess, sys, time
from kernelopt_core.process_lifetime import owned_command, start_owned
middle = start_owned(owned_command([sys.executable, "-c", sys.argv[1], sys.argv[2]]), stdout=subprocess.PIPE,
                     text=True)
print(middle.pid, middle.stdout.readline().strip(), flush=True)
time.sleep(600)
"""
MIDDLE = """
import subprocess, sys
target = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(target.pid, flush=True)
target.wait()
"""
TARGET = """
import time
from kernelopt_core.process_lifetime import die_with_owner
die_with_owner()  # its parent is MIDDLE, not the owner: it watches the owner
time.sleep(600)
"""


def wait_until(condition, what: str, bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {bound_s:g} s: {what}"
        time.sleep(0.05)


def _owner(script: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    owner = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=ENV,
                             cwd=ROOT, start_new_session=True)
    assert owner.stdout is not None
    return owner, owner.stdout.readline().split()


@pytest.mark.parametrize("watch", [False, True], ids=["parent-death-signal", "with-watch"])
def test_a_child_outlives_the_thread_that_started_it_but_not_its_owner(watch: bool) -> None:
    owner, (child_pid, answer) = _owner(OWNER, CHILD.format(watch=watch))
    child = int(child_pid)
    try:
        assert answer == "pong", "the child died with the thread that started it"
        os.kill(owner.pid, signal.SIGKILL)  # the owner goes, without any chance to clean up
        owner.wait(timeout=30)
        wait_until(lambda: not running(child), "the child ends with its owner")
    finally:
        for pid in (owner.pid, child):  # whatever a failure left behind
            end_tree(pid, wait_s=1.0)
        owner.wait(timeout=30)


def test_a_process_started_through_a_foreign_program_ends_with_the_owner() -> None:
    owner, (middle_pid, target_pid) = _owner(THROUGH, MIDDLE, TARGET)
    middle, target = int(middle_pid), int(target_pid)
    try:
        assert psutil.Process(target).ppid() == middle and psutil.Process(middle).ppid() == owner.pid
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        wait_until(lambda: not running(middle), "the launched program ends (parent-death signal)")
        wait_until(lambda: not running(target), "its target ends (it watches the owner)")
    finally:
        for pid in (owner.pid, middle, target):
            end_tree(pid, wait_s=1.0)
        owner.wait(timeout=30)


# A root whose child leads a session of its own; told to, the child starts a grandchild in that
# session and exits: the grandchild, never seen by the tree, is re-parented out of the root's tree
# but is still in the session its dead parent led.
ORPHANS = """
import subprocess, sys, time
middle = subprocess.Popen([sys.executable, "-c", '''
import subprocess, sys
sys.stdin.readline()
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(grandchild.pid, flush=True)
'''], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
print(middle.pid, flush=True)
sys.stdin.readline()
middle.stdin.write("go\\n"); middle.stdin.flush()
grandchild = middle.stdout.readline().strip()
middle.wait()
print(grandchild, flush=True)
time.sleep(600)
"""


def test_the_tree_ends_what_was_re_parented_through_the_session_it_was_in() -> None:
    root = subprocess.Popen([sys.executable, "-c", ORPHANS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert root.stdin is not None and root.stdout is not None
    try:
        middle = int(root.stdout.readline())
        tree = ProcessTree(root.pid)
        assert tree.pids() == {root.pid, middle}
        root.stdin.write("go\n")
        root.stdin.flush()
        grandchild = int(root.stdout.readline())  # its parent has ended
        assert not running(middle) and running(grandchild)
        assert grandchild not in {p.pid for p in psutil.Process(root.pid).children(recursive=True)}
        assert os.getsid(grandchild) == middle
        ended = {info.pid for info in tree.end()}
        assert ended == {root.pid, grandchild}
        root.wait(timeout=30)
        wait_until(lambda: not running(grandchild), "the re-parented grandchild is ended")
    finally:
        end_tree(root.pid)
        root.wait(timeout=30)


# --- the worker -------------------------------------------------------------------------------------------


def _marker(path: Path, bound_s: float = 300.0) -> dict:
    """The pids ``tests.lifetime_tasks.sleep_task`` wrote once it is mid-task (its worker starts torch)."""
    wait_until(path.exists, f"the task writes {path.name}", bound_s)
    return json.loads(path.read_text())


def test_a_worker_outlives_the_thread_that_started_it_and_ends_mid_task_when_its_pipe_closes(tmp_path: Path) -> None:
    worker = Worker("cpu")
    try:
        first: list = []

        def start() -> None:  # as the bench's prestart does: a thread that ends once the worker is up
            first.append(threading.get_native_id())
            first.append(worker.call("kernelopt_core.measure.task_context:ready_task", {}, timeout_s=600))

        thread = threading.Thread(target=start)
        thread.start()
        thread.join()
        wait_until(lambda: not os.path.exists(f"/proc/self/task/{first[0]}"), "the starting thread is gone")
        assert first[1].ok, first[1].failure
        marker_path = tmp_path / "mid-task.json"
        calls: list = []
        task = threading.Thread(target=lambda: calls.append(worker.call(
            "tests.lifetime_tasks:sleep_task", {"marker": str(marker_path)}, timeout_s=600)))
        task.start()
        pids = _marker(marker_path)
        assert pids["worker"] == first[1].value["pid"]  # the same worker: it did not die with that thread
        process = worker._process
        assert process is not None
        process.close_requests()  # end of file mid-task, and nothing else: nobody kills it
        task.join(timeout=120)
        assert calls and calls[0].failure is not None and calls[0].failure.kind == "crash"
        assert not worker.restarts and not process.killed_by_us
        wait_until(lambda: not running(pids["worker"]), "the worker ends by itself")
        wait_until(lambda: not running(pids["grandchild"]), "and what it started ends with it")
        assert pids["scratch"] and not [folder for folder in pids["scratch"] if os.path.exists(folder)]
    finally:
        worker.close()


# --- kernelopt optimize ------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_optimize_interrupted_or_killed_mid_task_leaves_no_process(how: str, cpu_example_dump: Path,
                                                                   tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) or kill -9 while the
    worker runs its first task: the command, its worker and the zygotes are all gone afterwards."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "KERNELOPT_WORKER_ECHO": "1",
           "KERNELOPT_CACHE_DIR": str(tmp_path / "cache")}
    cli = subprocess.Popen([sys.executable, "-m", "kernelopt_core.cli.main", "optimize", str(cpu_example_dump),
                            "--run-root", str(tmp_path / "runs"), "--beam-width", "1", "--iterations", "1",
                            "--plans", "1", "--retries", "1", "--events"], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []
    drain = threading.Thread(target=lambda: lines.extend(iter(cli.stderr.readline, "")), daemon=True)
    drain.start()
    seen: dict[int, str] = {}
    try:
        # the worker's stderr, echoed by the command, says when a task starts
        wait_until(lambda: any("kernelopt worker: task" in line for line in lines) or cli.poll() is not None,
                   "the worker starts its first task", 600)
        assert cli.poll() is None, "".join(lines[-20:])
        seen.update(processes_below(cli.pid))
        (worker,) = [pid for pid, command in seen.items() if "worker_main" in command]
        environment = psutil.Process(worker).environ()
        scratch = [environment[name] for name in (SCRATCH_ENV, SHARED_MEMORY_ENV) if name in environment]
        if how == "SIGINT":
            os.killpg(cli.pid, signal.SIGINT)
        else:
            os.kill(cli.pid, signal.SIGKILL)
        code = cli.wait(timeout=300)
        assert code == (130 if how == "SIGINT" else -signal.SIGKILL), "".join(lines[-20:])
        wait_until(lambda: not [pid for pid in seen if running(pid)], f"every process of the command ends: {seen}")
        if how == "SIGKILL":  # nobody could remove the worker's folders: the next worker start sweeps them
            worker_scratch.sweep()
        assert scratch and not [folder for folder in scratch if os.path.exists(folder)]
    finally:
        for pid in [cli.pid, *seen]:
            end_tree(pid, wait_s=1.0)
        cli.wait(timeout=30)
