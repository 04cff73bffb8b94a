"""The device script for the configuration check at a real working set (benchmarks/gpu/config_check.py): what it
reads from the verify task's answer, with a stand-in worker (the script itself runs on the device)."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu import config_check
from kernelopt_core.measure.worker import TaskFailure, TaskOutcome


class StandInWorker:
    def __init__(self, outcome: TaskOutcome):
        self.outcome = outcome
        self.calls: list[tuple[str, dict[str, Any], float]] = []

    def call(self, task: str, payload: dict[str, Any], timeout_s: float = 600.0) -> TaskOutcome:
        self.calls.append((task, payload, timeout_s))
        return self.outcome


def test_a_check_row_has_its_verdict_time_and_memory() -> None:
    value = {"accepted": True, "reason": "2.10x", "gates": [{"gate": 3, "seconds": 4.0},
                                                         {"gate": 4, "seconds": 3.0, "speedup": 2.1, "ci": [2.0, 2.2]}],
             "memory": {"peak_bytes": 30 * 2**30, "working_set_bytes": 12 * 2**30, "peak_over_working_set": 2.5}}
    worker = StandInWorker(TaskOutcome(True, value, None, 7.5))
    row = config_check.one_check(worker, {"problem": "p.py"}, "mode, warm cache", 100.0, "cpu")
    assert worker.calls == [(config_check.TASK, {"problem": "p.py"}, 100.0)]
    assert row["ok"] and row["accepted"] and row["speedup"] == 2.1 and row["gates_s"] == {3: 4.0, 4: 3.0}
    assert row["peak_over_working_set"] == 2.5 and row["device_used_mib_max"] is None  # no nvidia-smi here


def test_a_check_that_fails_says_how() -> None:
    worker = StandInWorker(TaskOutcome(False, None, TaskFailure("oom", "CUDA out of memory"), 3.0))
    row = config_check.one_check(worker, {}, "mode, cold cache", 100.0, "cpu")
    assert not row["ok"] and row["error"] == "oom: CUDA out of memory"
