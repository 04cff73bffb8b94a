"""The baseline's timing process starts ahead of the first kernel timing (a job the search's warm-up sends on a
GPU): the timing that needs it waits for that start instead of starting a second one, a second request starts
nothing, and closing the baselines waits for a start in progress. A stand-in replaces the process start."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kernelopt_core.gates import jobs


class Closable:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_first_timing_waits_for_the_started_baseline_process(monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[str] = []
    release = threading.Event()

    def slow_start(payload: dict[str, Any], device: str, key: str, inputs: bool) -> dict[str, Any]:
        if key not in jobs._BASELINES:
            starts.append(key)
            release.wait(10)  # loading the graph: seconds
            jobs._BASELINES[key] = {"process": Closable(), "kernels": set(), "inputs": False}
        return jobs._BASELINES[key]

    monkeypatch.setattr(jobs, "_baseline_entry", slow_start)
    monkeypatch.setattr(jobs, "_BASELINES", {})
    monkeypatch.setattr(jobs, "_BASELINE_STARTS", {})
    payload = {"graph": "/dumps/g/output_code.py", "device": "cpu"}
    assert jobs.begin_baseline_timing(payload) == {"started": True}
    assert jobs.begin_baseline_timing(payload) == {"started": False}  # one start per graph
    got: list[dict[str, Any]] = []
    timing = threading.Thread(target=lambda: got.append(jobs._baseline_process(payload, "cpu")))
    timing.start()
    time.sleep(0.2)
    assert not got  # the timing waits for the start in progress
    release.set()
    timing.join(10)
    assert starts == ["/dumps/g/output_code.py"] and got[0] is jobs._BASELINES["/dumps/g/output_code.py"]
    assert not jobs._BASELINE_STARTS
    process = got[0]["process"]
    assert jobs.close_baselines() == {"closed": True} and process.closed and not jobs._BASELINES
