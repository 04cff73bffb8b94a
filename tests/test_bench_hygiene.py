"""Nothing outlives a bench problem: a problem timed out while its worker is mid-task leaves no
process of its own, the next problem runs normally, the device memory is checked between problems
(a stand-in reader here), and the text-mode summary prints with exit status 0.

The problems run on the CPU backend in their own processes. "Mid-task" is made deterministic by a
worker task that sleeps (``tests.lifetime_tasks.sleep_task``); the time limit is read from a stand-in
clock that jumps past it once the task has said it is running.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from conftest import processes_below, running

from kernelopt_core.bench.campaign import run_campaign
from kernelopt_core.bench.config import CampaignConfig
from kernelopt_core.bench.device_memory import (
    HELD_CATEGORY,
    DeviceMemoryGuard,
    GpuProcess,
    MemoryReading,
    NoReader,
)
from kernelopt_core.bench.problem_process import Slot, run_problem_process
from kernelopt_core.bench.suite import ProblemSpec
from kernelopt_core.process_lifetime import end_tree

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "benchmarks" / "problems" / "tiny"

# A problem whose model set-up starts the optimizer's worker from a short-lived thread (as the bench's
# prestart does) and then waits in a worker task that never ends on its own.
MID_JOB_PROBLEM = '''import json, os, threading

import torch

from kernelopt_core.measure.worker import get_worker

MARKER = {marker!r}


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    worker = get_worker("cpu")
    ready = []
    thread = threading.Thread(target=lambda: ready.append(
        worker.call("kernelopt_core.measure.task_context:ready_task", {{}}, timeout_s=600)))
    thread.start()
    thread.join()
    with open(MARKER + ".problem", "w") as handle:
        json.dump({{"problem": os.getpid(), "ready_worker": ready[0].value["pid"]}}, handle)
    worker.call("tests.lifetime_tasks:sleep_task", {{"marker": MARKER}}, timeout_s=600)
    return []
'''


def test_a_problem_timed_out_mid_job_leaves_nothing_and_the_next_problem_runs(tmp_path: Path) -> None:
    marker = tmp_path / "mid-job.json"
    problem = tmp_path / "waits_in_its_worker.py"
    problem.write_text(MID_JOB_PROBLEM.format(marker=str(marker)))
    seen: dict[int, str] = {}

    def clock() -> float:
        """0 until the task is running, then far past any limit: the timeout hits mid-task."""
        if not marker.exists():
            return 0.0
        if not seen:  # the processes of the problem, looked up independently of the bench's own record
            problem_pid = json.loads((tmp_path / "mid-job.json.problem").read_text())["problem"]
            seen.update(processes_below(problem_pid))
        return 1e9

    out = tmp_path / "out"
    config = CampaignConfig(device="cpu", timeout_s=600.0, optimize=False)
    try:
        result = run_problem_process(ProblemSpec("waits_in_its_worker", str(problem), 1), config, str(out),
                                     Slot("cpu"), clock=clock)
        pids = json.loads(marker.read_text())
        first = json.loads((tmp_path / "mid-job.json.problem").read_text())
        assert result.outcome == "error" and result.category == "timeout", result.reason
        assert pids["worker"] == first["ready_worker"]  # the worker did not die with the thread that started it
        assert {first["problem"], pids["worker"], pids["grandchild"]} <= set(seen)
        alive = {pid: command for pid, command in seen.items() if running(pid)}
        assert not alive, f"left running after the timeout: {alive}"
        assert pids["scratch"] and not [f for f in pids["scratch"] if os.path.exists(f)]  # its worker's folders
        ended = " ".join(result.processes_ended)
        assert f"pid {pids['worker']} " in ended and f"pid {pids['grandchild']} " in ended
        assert json.loads((out / "problems" / "waits_in_its_worker.json").read_text())["processes_ended"]
    finally:
        for pid in seen:
            end_tree(pid, wait_s=1.0)

    normal = run_problem_process(ProblemSpec("scale_shift_relu", str(TINY / "scale_shift_relu.py"), 1), config,
                                 str(out), Slot("cpu"))
    assert normal.outcome == "fallback" and normal.category == "not-optimized", normal.reason
    assert normal.processes_ended == []  # a problem that ends by itself leaves nothing to end


# --- the device memory between problems (a stand-in for nvidia-smi) ---------------------------------------


class StandInReader:
    """Readings in order (the last one repeats); each names the processes holding memory."""

    def __init__(self, *readings: MemoryReading):
        self.readings = list(readings)
        self.reads = 0

    def __call__(self, gpu: str) -> MemoryReading:
        reading = self.readings[min(self.reads, len(self.readings) - 1)]
        self.reads += 1
        return reading


def _guard(reader) -> DeviceMemoryGuard:
    return DeviceMemoryGuard("0", reader, settle_reads=3, settle_interval_s=0.0)


BASELINE = MemoryReading(1000.0, 80000.0, (GpuProcess(4242, 500.0, "someone else's trainer"),))


def test_memory_back_to_the_baseline_is_a_clean_check() -> None:
    guard = _guard(StandInReader(BASELINE, MemoryReading(40000.0), MemoryReading(1100.0)))
    check = guard.after(guard.baseline(), ours={7}, end=lambda pid: pytest.fail("nothing to end"))
    assert check.released and check.ended == [] and check.held_by == [] and guard.blocked() is None


def test_our_leftover_holding_memory_is_named_and_ended() -> None:
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        held = MemoryReading(9000.0, 80000.0, (BASELINE.processes[0], GpuProcess(leftover.pid, 8000.0, "sleeper")))
        ended: list[int] = []

        def end(pid: int) -> None:
            ended.append(pid)
            end_tree(pid)

        reader = StandInReader(BASELINE, held, held, held, MemoryReading(1000.0))
        guard = _guard(reader)
        check = guard.after(guard.baseline(), ours={leftover.pid}, end=end)
        assert ended == [leftover.pid] and leftover.wait(timeout=30) is not None
        assert check.released and check.ended == [f"pid {leftover.pid} (sleeper): 7.8 GiB"]
        assert guard.blocked() is None
    finally:
        end_tree(leftover.pid)
        leftover.wait(timeout=30)


def test_without_nvidia_smi_the_check_is_a_note() -> None:
    def no_smi(gpu: str) -> MemoryReading:
        raise NoReader("nvidia-smi was not found: device memory between problems is not checked")

    guard = _guard(no_smi)
    check = guard.after(guard.baseline(), ours=set(), end=lambda pid: None)
    assert check.released and "nvidia-smi was not found" in (check.note or "") and guard.blocked() is None


BROKEN_IMPORT = "import torch\n\nclass Model(torch.nn.Module:\n    pass\n"


def test_memory_still_held_fails_the_next_problems_clearly_and_the_report_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.bench import scheduler

    # The stand-in reader answers at once and never changes its mind: the guard's 40 reads 0.5 s apart
    # (the time a real driver takes to free memory) would only wait 20 s for the same answer.
    monkeypatch.setattr(scheduler, "DeviceMemoryGuard", partial(DeviceMemoryGuard, settle_interval_s=0.0))
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a_first", "b_second", "c_third"):
        (suite / f"{name}.py").write_text(BROKEN_IMPORT)
    stranger = GpuProcess(5151, 30000.0, "python3 train.py")
    held = MemoryReading(31000.0, 80000.0, (BASELINE.processes[0], stranger))
    reader = StandInReader(BASELINE, held)  # after the first problem, the memory stays held
    from kernelopt_core.bench.suite import discover_suite

    result = run_campaign(discover_suite(str(suite)), CampaignConfig(device="cpu", plot=False), str(tmp_path / "out"),
                          memory_reader=lambda gpu: reader(gpu))
    by_name = {r.name: r for r in result.results}
    assert by_name["a_first"].category == "import"  # it ran (and failed on its own)
    assert by_name["a_first"].device_memory["released"] is False
    expected = "GPU memory held by pid 5151 (python3 train.py): 29.3 GiB"
    for name in ("b_second", "c_third"):
        assert by_name[name].outcome == "error" and by_name[name].category == HELD_CATEGORY
        assert by_name[name].reason.startswith(f"not run: {expected}"), by_name[name].reason
        assert not (tmp_path / "out" / "work" / name / "payload.json").exists()  # no process was started
    report = (tmp_path / "out" / "report.md").read_text()
    assert "GPU memory not back to its baseline" in report and expected in report
    assert "Not run, the GPU's memory being held:** `b_second`, `c_third`" in report
    cleanup = json.loads((tmp_path / "out" / "results.json").read_text())["cleanup"]
    assert cleanup["not_run_memory_held"] == ["b_second", "c_third"]
    assert cleanup["memory_not_released"] == {"a_first": ["pid 5151 (python3 train.py): 29.3 GiB"]}


def test_the_hold_is_lifted_once_memory_is_back() -> None:
    reader = StandInReader(BASELINE, MemoryReading(31000.0), MemoryReading(31000.0), MemoryReading(31000.0),
                           MemoryReading(31000.0), MemoryReading(1000.0))
    guard = _guard(reader)
    check = guard.after(guard.baseline(), ours=set(), end=lambda pid: None)
    assert not check.released
    assert guard.blocked() is not None  # still held before the next problem
    assert guard.blocked() is None  # back now: the one after runs


# --- the CLI, text mode, end to end ---------------------------------------------------------------------------


def _bench_text(tmp_path: Path, *args: str) -> str:
    """The bench's stdout, written to a file as a user's ``kernelopt bench ... > log`` would."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "100"}
    log = tmp_path / "bench.log"
    with log.open("w") as handle:
        done = subprocess.run([sys.executable, "-m", "kernelopt_core.cli.main", "bench", str(TINY), "--device",
                               "cpu", "--out", str(tmp_path / "out"), "--no-plot", *args], cwd=ROOT, env=env,
                              stdout=handle, stderr=subprocess.PIPE, text=True, timeout=3000)
    stdout = log.read_text()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "benchmark campaign" in stdout and "0 regressions" in stdout and "report:" in stdout
    return stdout


def _progress_seconds(out: str) -> list[float]:
    """The clock of each progress line ("    12 s  [0/1]  ...") of the bench's output."""
    return [float(m.group(1)) for line in out.splitlines() if (m := re.match(r"^\s*(\d+) s  \[\d+/\d+\]  ", line))]


def _table_rows(out: str) -> dict[str, int]:
    """The summary table's rows: label -> number of problems."""
    rows = [re.match(r"^\s*[│|]\s*(L\d+|other|all)\s*[│|]\s*(\d+)\s*[│|]", line) for line in out.splitlines()]
    return {match.group(1): int(match.group(2)) for match in rows if match}


def test_bench_on_the_tiny_suite_prints_its_summary_and_exits_0(tmp_path: Path) -> None:
    """Quick: the tiny suite's level 2 (one problem) without the optimizer."""
    out = _bench_text(tmp_path, "--levels", "2", "--no-optimize")
    assert _table_rows(out) == {"L2": 1, "all": 1}, out
    # stdout to a file: a progress line at least every 10 s, from the first to the last
    seconds = _progress_seconds(out)
    assert len(seconds) >= 3 and seconds == sorted(seconds), out
    gaps = [b - a for a, b in zip(seconds, seconds[1:], strict=False)]
    assert max(gaps) <= 10, (gaps, out)
    # the progress and the summary in words: no Python dict, no "fallback (not-optimized)"
    assert "{'" not in out and "not-optimized" not in out, out
    assert "linear_gelu: not optimized (timing only)" in out, out
    assert re.search(r"campaign done: 1 not optimized \(timing only\), 0 error", out), out
    assert "1 problem(s) not optimized (timing only) (--no-optimize)" in out, out


@pytest.mark.slow
def test_bench_on_the_whole_tiny_suite_with_the_optimizer_prints_its_summary_and_exits_0(tmp_path: Path) -> None:
    from kernelopt_core.bench.suite import discover_suite

    levels: dict[str, int] = {}
    for spec in discover_suite(str(TINY)):
        levels[f"L{spec.level}"] = levels.get(f"L{spec.level}", 0) + 1
    out = _bench_text(tmp_path, "--beam-width", "1", "--iterations", "1", "--plans", "1", "--retries", "1",
                      "--confirm-rounds", "3", "--optimizer-option", "ab_rounds=3", "--optimizer-option",
                      "kernel_rounds=2", "--optimizer-option", "finalists=1", "--optimizer-option", "max_kernels=1")
    assert _table_rows(out) == {**levels, "all": sum(levels.values())}, out
