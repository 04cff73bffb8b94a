"""The baseline's timing process starts ahead of the first kernel timing (a task the search's warm-up sends on a
GPU): the timing that needs it waits for that start instead of starting a second one, and closing the
baselines ends it. A stand-in replaces the contained process's start."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kernelopt_core.gates.tasks import graph, skeleton


class StandInProcess:
    closed = False

    def call(self, what: str, **kwargs: Any) -> dict[str, Any]:
        return {"ok": True}

    def close(self) -> None:
        self.closed = True


def test_the_first_timing_waits_for_the_started_baseline_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.sandbox import process as sandbox_process

    starts: list[StandInProcess] = []
    release = threading.Event()

    def slow_start(*args: Any, **kwargs: Any) -> StandInProcess:
        release.wait(10)  # importing torch and loading the graph: seconds
        starts.append(StandInProcess())
        return starts[-1]

    monkeypatch.setattr(sandbox_process.SandboxProcess, "start", staticmethod(slow_start))
    monkeypatch.setattr(skeleton, "BASELINE", skeleton.ProcessHolder())
    payload = {"graph": "/dumps/g/output_code.py", "device": "cpu"}
    assert graph.begin_baseline_timing(payload) == {"started": True}
    time.sleep(0.2)  # the start holds the baseline's slot
    got: list[Any] = []
    timing = threading.Thread(target=lambda: got.append(graph._baseline_process(payload["graph"], "cpu")))
    timing.start()
    time.sleep(0.2)
    assert not got  # the timing waits for the start in progress
    release.set()
    timing.join(10)
    assert len(starts) == 1 and got[0].process is starts[0]  # one process, the one started ahead
    assert skeleton.close_baselines() == {"closed": True} and starts[0].closed
