"""The worker subprocess: typed results, typed failures, replacement after a crash or hang, cancel.

The task functions below run inside the worker (imported there as ``tests.test_worker``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from kernelopt_core.measure.worker import Worker, get_worker

TASKS = "tests.test_worker"


# --- tasks (run inside the worker) ------------------------------------------------------------


def echo_task(payload: dict) -> dict:
    from kernelopt_core.measure.task_context import worker_device

    print("noise on stdout that must not corrupt the protocol")
    os.write(1, b"raw fd-1 noise\n")
    return {"echo": payload, "pid": os.getpid(), "device": worker_device("none"),
            "interpret": os.environ.get("TRITON_INTERPRET")}


def segfault_task(payload: dict) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang_task(payload: dict) -> None:
    time.sleep(payload.get("seconds", 3600))


def raise_task(payload: dict) -> None:
    raise ValueError(f"bad value {payload.get('value')}")


def oom_task(payload: dict) -> None:
    raise MemoryError("cannot allocate 1 TiB")


def cuda_error_task(payload: dict) -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def not_json_task(payload: dict) -> object:
    return {"value": object()}


def exit_task(payload: dict) -> None:
    os._exit(7)


def leaves_memory_task(payload: dict) -> dict:
    """As gate 2 does when device memory stays allocated after it freed its buffers."""
    from kernelopt_core.measure.task_context import RECYCLE_KEY

    return {"pid": os.getpid(), "passed": True, RECYCLE_KEY: "gate 2 left 5.00 GiB allocated"}


# --- tests -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker():
    w = Worker("cpu")
    yield w
    w.close()


def test_task_runs_and_stdout_noise_is_harmless(worker: Worker) -> None:
    outcome = worker.call(f"{TASKS}:echo_task", {"x": [1, 2]}, timeout_s=120)
    assert outcome.ok, outcome.failure
    assert outcome.value["echo"] == {"x": [1, 2]}
    assert outcome.value["pid"] != os.getpid()
    assert outcome.value["device"] == "cpu"
    assert outcome.value["interpret"] == "1"  # the CPU Triton backend is active in a cpu worker
    assert worker.resolved_device == "cpu"


def test_segfault_is_a_crash_and_the_next_task_runs(worker: Worker) -> None:
    before = worker.call(f"{TASKS}:echo_task", {}, timeout_s=120).value["pid"]
    outcome = worker.call(f"{TASKS}:segfault_task", {}, timeout_s=60)
    assert not outcome.ok and outcome.failure is not None
    assert outcome.failure.kind == "crash"
    assert "SIGSEGV" in outcome.failure.message
    assert "Segmentation fault" in (outcome.failure.traceback or "")  # faulthandler's report
    after = worker.call(f"{TASKS}:echo_task", {"again": True}, timeout_s=120)
    assert after.ok and after.value["echo"] == {"again": True}
    assert after.value["pid"] != before


def test_hang_past_timeout_is_killed_and_replaced(worker: Worker) -> None:
    begin = time.monotonic()
    outcome = worker.call(f"{TASKS}:hang_task", {"seconds": 600}, timeout_s=1.0)
    assert outcome.failure is not None and outcome.failure.kind == "timeout"
    assert time.monotonic() - begin < 30
    assert 1.0 <= outcome.wall_s < 30
    # The replacement takes ~2-3 s to start (torch, the CPU backend); that does not count
    # against the next task's own 1.5 s limit.
    after = worker.call(f"{TASKS}:echo_task", {"n": 3}, timeout_s=1.5)
    assert after.ok, after.failure
    assert after.value["echo"] == {"n": 3}


def test_exception_is_an_error_and_the_worker_survives(worker: Worker) -> None:
    pid = worker.call(f"{TASKS}:echo_task", {}, timeout_s=120).value["pid"]
    outcome = worker.call(f"{TASKS}:raise_task", {"value": 42}, timeout_s=60)
    assert outcome.failure is not None and outcome.failure.kind == "error"
    assert "ValueError: bad value 42" in outcome.failure.message
    assert "raise_task" in (outcome.failure.traceback or "")
    assert worker.call(f"{TASKS}:echo_task", {}, timeout_s=60).value["pid"] == pid  # same process


def test_oom_and_unserializable_results_are_typed(worker: Worker) -> None:
    oom = worker.call(f"{TASKS}:oom_task", {}, timeout_s=60)
    assert oom.failure is not None and oom.failure.kind == "oom"
    bad = worker.call(f"{TASKS}:not_json_task", {}, timeout_s=60)
    assert bad.failure is not None and bad.failure.kind == "error"
    assert "not JSON-serializable" in bad.failure.message
    missing = worker.call("kernelopt_core.measure.no_such_module:task", {}, timeout_s=60)
    assert missing.failure is not None and missing.failure.kind == "error"
    assert "no_such_module" in missing.failure.message


def test_cuda_error_poisons_the_worker_which_is_replaced(worker: Worker) -> None:
    pid = worker.call(f"{TASKS}:echo_task", {}, timeout_s=120).value["pid"]
    outcome = worker.call(f"{TASKS}:cuda_error_task", {}, timeout_s=60)
    assert outcome.failure is not None and outcome.failure.kind == "cuda_error"
    assert "illegal memory access" in outcome.failure.message
    assert worker.call(f"{TASKS}:echo_task", {}, timeout_s=120).value["pid"] != pid


def test_a_task_that_leaves_memory_behind_keeps_its_result_and_gets_its_worker_replaced(worker: Worker) -> None:
    from conftest import running  # here, not at the top: the worker imports this module for its tasks

    outcome = worker.call(f"{TASKS}:leaves_memory_task", {}, timeout_s=120)
    assert outcome.ok and outcome.value["passed"] is True  # the result stands
    pid = outcome.value["pid"]
    assert worker.recycled and worker.recycled[-1] == f"pid {pid} after {TASKS}:leaves_memory_task: gate 2 left 5.00 GiB allocated"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(pid):
        time.sleep(0.05)
    assert not running(pid)  # the process that held the memory is gone, not merely forgotten
    assert worker.call(f"{TASKS}:echo_task", {}, timeout_s=120).value["pid"] != pid


def test_exit_is_a_crash_with_status(worker: Worker) -> None:
    outcome = worker.call(f"{TASKS}:exit_task", {}, timeout_s=60)
    assert outcome.failure is not None and outcome.failure.kind == "crash"
    assert "status 7" in outcome.failure.message


def test_cancel_a_running_task(worker: Worker) -> None:
    worker.call(f"{TASKS}:echo_task", {}, timeout_s=120)  # started, so the cancel hits the task itself
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    begin = time.monotonic()
    outcome = worker.call(f"{TASKS}:hang_task", {"seconds": 600}, timeout_s=120, cancel=cancel)
    timer.join()
    assert outcome.failure is not None and outcome.failure.kind == "cancelled"
    assert time.monotonic() - begin < 30
    already = threading.Event()
    already.set()
    skipped = worker.call(f"{TASKS}:echo_task", {}, timeout_s=60, cancel=already)
    assert skipped.failure is not None and skipped.failure.kind == "cancelled"
    assert worker.call(f"{TASKS}:echo_task", {"after": "cancel"}, timeout_s=120).ok


def test_tasks_on_one_worker_are_serialized(worker: Worker) -> None:
    results: list[tuple[float, float]] = []

    def run() -> None:
        begin = time.monotonic()
        outcome = worker.call(f"{TASKS}:hang_task", {"seconds": 0.4}, timeout_s=60)
        assert outcome.ok
        results.append((begin, time.monotonic()))

    threads = [threading.Thread(target=run) for _ in range(2)]
    begin = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    assert time.monotonic() - begin >= 0.8  # two 0.4 s tasks, one after the other


def test_bad_device_is_a_startup_crash_not_an_exception() -> None:
    w = Worker("tpu:3")
    try:
        outcome = w.call(f"{TASKS}:echo_task", {}, timeout_s=60)
        assert outcome.failure is not None and outcome.failure.kind == "crash"
        assert "unknown device 'tpu:3'" in outcome.failure.message
    finally:
        w.close()


def test_get_worker_shares_one_per_device() -> None:
    assert get_worker("cpu") is get_worker("cpu")
    assert get_worker("cpu") is not get_worker("cuda:0")


def test_gate2_asks_for_a_fresh_worker_only_when_it_left_a_working_set_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 every gate-2 screen of a 5.4 GB max-pool left one working set allocated in the worker
    (38 GB after six candidates); what it leaves is recorded, and past slack the worker is replaced."""
    import torch

    from kernelopt_core.gates.tasks.graph import RETAINED_SLACK_BYTES, _retained_memory

    gib = 2**30
    allocated = [0]
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "ipc_collect", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a, **k: allocated[0])
    from kernelopt_core.measure import allocator_census

    pools: list = []
    monkeypatch.setattr(allocator_census, "census", lambda names: pools.append(dict(names)) or {"blocks": 1})
    memory: dict = {}
    allocated[0] = 1 * gib + 5 * gib
    reason = _retained_memory("cuda:0", 1 * gib, 5 * gib, memory, (1, 7))
    assert memory["retained_after_bytes"] == 5 * gib
    assert pools == [{(1, 7): "exchange arena"}] and memory["retained_census"] == {"blocks": 1}
    assert reason and "the task left 5.00 GiB allocated" in reason and "replaced" in reason
    assert memory["worker_replaced"] == reason  # the verdict's memory record says so
    allocated[0] = 1 * gib + RETAINED_SLACK_BYTES  # a loaded graph's caches: slack, kept
    assert _retained_memory("cuda:0", 1 * gib, 64 * 2**20, memory) is None
    assert memory["retained_after_bytes"] == RETAINED_SLACK_BYTES and len(pools) == 1  # no census under slack
    cpu: dict = {}
    assert _retained_memory("cpu", None, 5 * gib, cpu) is None and cpu == {}


def test_allocator_census_sums_live_blocks_by_pool_and_by_our_first_frame() -> None:
    """The diagnosis of retained gate-2 memory: which pool (the exchange arena's or the default) and, with
    allocation history, which line of ours allocated what is still live."""
    from kernelopt_core.measure.allocator_census import summarize

    ours = [{"filename": "/x/torch/cuda/memory.py", "line": 3, "name": "empty"},
            {"filename": "/repo/kernelopt_core/sandbox/exchange.py", "line": 195, "name": "allocate"}]
    segments = [
        {"segment_pool_id": (1, 7), "blocks": [{"size": 4 << 30, "state": "active_allocated", "frames": ours},
                                               {"size": 1 << 30, "state": "inactive", "frames": ours}]},
        {"segment_pool_id": (0, 0), "blocks": [{"size": 1 << 20, "state": "active_allocated", "frames": []},
                                               {"size": 2 << 20, "state": "active_pending_free"}]},
    ]
    summary = summarize(segments, {(1, 7): "exchange arena"})
    assert summary["blocks"] == 2
    assert summary["by_pool_bytes"] == {"exchange arena": 4 << 30, "default": 1 << 20}
    assert summary["by_origin"][0] == {"where": "kernelopt_core/sandbox/exchange.py:195 allocate",
                                       "bytes": 4 << 30, "blocks": 1}
    assert "KERNELOPT_MEMORY_HISTORY=1" in summary["by_origin"][1]["where"]


def test_worker_task_memory_log_writes_a_line_per_task_and_a_census_past_slack(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """KERNELOPT_MEMORY_HISTORY=<folder>: whichever task left memory allocated in the worker says so."""
    import json

    import torch

    from kernelopt_core.measure import allocator_census
    from kernelopt_core.measure.allocator_census import LOG_SLACK_BYTES, TaskMemoryLog

    monkeypatch.setenv(allocator_census.HISTORY_ENV, str(tmp_path / "memory"))
    assert TaskMemoryLog.from_env("cpu") is None  # the CPU has no device allocator to watch
    log = TaskMemoryLog.from_env("cuda:0")
    assert log is not None
    allocated = [10]
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "ipc_collect", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a, **k: allocated[0])
    monkeypatch.setattr(allocator_census, "census", lambda names: {"blocks": 3})
    log.record("gates.tasks:run_kernel_gate", 10)
    allocated[0] = 10 + LOG_SLACK_BYTES + 1
    log.record("gates.tasks:time_candidate_kernel", 10)
    lines = [json.loads(line) for line in (tmp_path / "memory" / allocator_census.LOG_NAME).read_text().splitlines()]
    assert [line["task"] for line in lines] == ["gates.tasks:run_kernel_gate", "gates.tasks:time_candidate_kernel"]
    assert "census" not in lines[0] and lines[1]["census"] == {"blocks": 3}
    assert lines[1]["allocated_after"] - lines[1]["allocated_before"] == LOG_SLACK_BYTES + 1


def test_kernel_timing_asks_for_a_fresh_worker_when_a_candidate_left_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 each time_candidates task of a search left its exchange arena allocated in the worker
    (4.3-5.4 GB per candidate, 30 GB after seven): the timings stand and the worker is replaced."""
    from kernelopt_core.gates.tasks import graph as tasks
    from kernelopt_core.measure.task_context import RECYCLE_KEY
    from kernelopt_core.search import kernel_tasks

    answers = {"a.py": {"speedup": 1.2}, "b.py": {"speedup": 0.9, RECYCLE_KEY: "the task left 4.00 GiB allocated"}}
    monkeypatch.setattr(tasks, "time_candidate_kernel", lambda request: dict(answers[request.restitched]))
    task = {"graph_path": "g/output_code.py", "kernel": "k", "device": "cpu"}
    result = kernel_tasks.time_candidates({**task, "candidates": {"i1c1": "a.py", "i1c2": "b.py"}})
    assert result["candidates"] == {"i1c1": {"speedup": 1.2}, "i1c2": {"speedup": 0.9}}
    assert result[RECYCLE_KEY] == "the task left 4.00 GiB allocated"
    answers["b.py"].pop(RECYCLE_KEY)
    assert RECYCLE_KEY not in kernel_tasks.time_candidates({**task, "candidates": {"i1c2": "b.py"}})
