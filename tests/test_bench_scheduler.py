"""Local scheduling: slots per GPU or CPU worker, a shared queue, a deadline. Runners are stand-ins here;
the real per-problem subprocess runs in tests/test_bench_campaign.py."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

from kernelopt_core.bench.config import CampaignConfig
from kernelopt_core.bench.problem_process import Slot, problem_environment
from kernelopt_core.bench.results import ProblemResult
from kernelopt_core.bench.scheduler import SlotError, make_slots, resolve_device, run_on_slots
from kernelopt_core.bench.suite import (
    ProblemSpec,
    SuiteError,
    discover_suite,
    interleave_levels,
    parse_levels,
)
from kernelopt_core.events import EventSink


def specs(n: int) -> list[ProblemSpec]:
    return [ProblemSpec(f"p{i}", f"/suite/p{i}.py", 1 + i % 3) for i in range(n)]


def test_one_slot_per_requested_gpu_pinned_by_visible_devices():
    slots = make_slots(CampaignConfig(device="auto", gpus=2), gpus=["3", "5", "7"])
    assert [(s.device, s.visible_gpu) for s in slots] == [("cuda:0", "3"), ("cuda:0", "5")]
    assert problem_environment(CampaignConfig(scale="tiny"), slots[1])["CUDA_VISIBLE_DEVICES"] == "5"
    assert make_slots(CampaignConfig(device="cuda:1"), gpus=["0", "1"])[0].visible_gpu == "1"
    assert len(make_slots(CampaignConfig(device="cuda"), gpus=["0", "1"])) == 1  # --gpus not given: one GPU


def test_bad_device_requests_are_clear_errors():
    with pytest.raises(SlotError, match="only 1 GPU"):
        make_slots(CampaignConfig(device="cuda", gpus=2), gpus=["0"])
    with pytest.raises(SlotError, match="no GPU is visible"):
        make_slots(CampaignConfig(device="cuda"), gpus=[])
    with pytest.raises(SlotError, match="--workers"):
        make_slots(CampaignConfig(device="auto", gpus=2), gpus=[])
    with pytest.raises(SlotError, match="unknown device"):
        resolve_device("tpu")
    assert resolve_device("auto", []) == "cpu" and resolve_device("auto", ["0"]) == "cuda"
    cpu = make_slots(CampaignConfig(device="cpu", workers=3), gpus=["0"])
    assert [s.device for s in cpu] == ["cpu"] * 3 and all(s.visible_gpu is None for s in cpu)
    expected = str(max(1, (os.cpu_count() or 1) // 3))  # parallel CPU workers split the cores
    assert problem_environment(CampaignConfig(), cpu[0])["OMP_NUM_THREADS"] == expected


def test_scale_reaches_the_problem_environment():
    env = problem_environment(CampaignConfig(scale="tiny"), Slot("cpu"))
    assert env["KERNELOPT_PROBLEM_SCALE"] == "tiny"
    assert env.get("CUDA_VISIBLE_DEVICES") == os.environ.get("CUDA_VISIBLE_DEVICES")  # a CPU slot pins nothing


def test_queue_spreads_problems_over_slots_each_once():
    seen: list[tuple[str, str]] = []
    running = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def runner(spec, config, out_dir, slot, sink):
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
            seen.append((slot.label, spec.name))
        time.sleep(0.05)
        with lock:
            running["now"] -= 1
        return ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="matched", reason="stand-in",
                             device=slot.device)

    slots = [Slot("cuda:0", "0", "gpu0"), Slot("cuda:0", "1", "gpu1")]
    finished: list[str] = []
    results, not_reached = run_on_slots(specs(8), CampaignConfig(), "/unused", slots, EventSink(),
                                        lambda r: finished.append(r.name), runner)
    assert sorted(r.name for r in results) == sorted(f"p{i}" for i in range(8)) == sorted(finished)
    assert not not_reached and running["peak"] == 2
    assert {label for label, _ in seen} == {"gpu0", "gpu1"}


def test_deadline_leaves_the_rest_not_reached_and_a_raising_runner_is_an_error(monkeypatch: pytest.MonkeyPatch):
    # The scheduler's clock is the runners' to move: with the real one, a loaded machine could start the
    # slot's thread after a deadline 0.2 s away and reach nothing. The rule is what is tested here.
    from kernelopt_core.bench import scheduler

    now = [100.0]
    monkeypatch.setattr(scheduler, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def runner(spec, config, out_dir, slot, sink):
        if spec.name == "p0":
            raise RuntimeError("runner bug")
        now[0] += 0.3  # the problem takes 0.3 s
        return ProblemResult(name=spec.name, level=1, path=spec.path, outcome="matched", reason="ok")

    results, not_reached = run_on_slots(specs(6), CampaignConfig(), "/unused", [Slot("cpu")], EventSink(),
                                        lambda r: None, runner, deadline=now[0] + 0.2)
    by_name = {r.name: r for r in results}
    assert by_name["p0"].outcome == "error" and "runner bug" in by_name["p0"].reason
    assert set(by_name) == {"p0", "p1"}  # both started before the deadline
    assert not_reached == ["p2", "p3", "p4", "p5"]  # p1 ended past it: nothing else started


def test_suite_discovery_levels_and_bad_paths(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "a.py").write_text("x = 1\n")
    (tmp_path / "L3").mkdir()
    (tmp_path / "L3" / "b.py").write_text("x = 1\n")
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "c.py").write_text("x = 1\n")
    (tmp_path / "top.py").write_text("LEVEL = 2\n")
    (tmp_path / "_private.py").write_text("")
    found = discover_suite(str(tmp_path))
    assert [(p.name, p.level) for p in found] == [("level1/a", 1), ("top", 2), ("L3/b", 3)]
    assert [p.name for p in discover_suite(str(tmp_path), parse_levels("2,3"))] == ["top", "L3/b"]
    assert discover_suite(str(tmp_path / "top.py"))[0].level == 2
    with pytest.raises(SuiteError, match="no such suite"):
        discover_suite(str(tmp_path / "missing"))
    with pytest.raises(SuiteError, match="no problem files"):
        discover_suite(str(tmp_path), {7})
    with pytest.raises(SuiteError, match="comma-separated"):
        parse_levels("one,two")
    order = [p.level for p in interleave_levels(specs(7))]
    assert order[:3] == [1, 2, 3] and sorted(order) == sorted(p.level for p in specs(7))


def test_resume_runs_cancelled_problems_again_and_keeps_finished_ones(tmp_path):
    from kernelopt_core.bench.campaign import run_campaign
    from kernelopt_core.bench.results import write_result

    problems = specs(3)
    write_result(str(tmp_path), ProblemResult(name="p0", level=1, path="/suite/p0.py", outcome="matched", reason="done"))
    write_result(str(tmp_path), ProblemResult(name="p1", level=2, path="/suite/p1.py", outcome="error",
                                              category="cancelled", reason="cancelled by the user"))
    ran: list[str] = []

    def runner(spec, config, out_dir, slot, sink):
        ran.append(spec.name)
        return ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="matched", reason="ran")

    result = run_campaign(problems, CampaignConfig(device="cpu", resume=True, plot=False), str(tmp_path),
                          runner=runner)
    assert sorted(ran) == ["p1", "p2"] and result.resumed == ["p0"]
    assert {r.name: r.reason for r in result.results} == {"p0": "done", "p1": "ran", "p2": "ran"}
    assert "1 problem resumed from earlier runs" in (tmp_path / "report.md").read_text()


def test_problem_main_prestarts_the_shared_worker_of_its_gpu(monkeypatch):
    from kernelopt_core.bench import problem_main
    from kernelopt_core.measure import worker as worker_module

    calls: list[tuple[str, str]] = []
    done = threading.Event()

    class FakeWorker:
        def __init__(self, device: str):
            self.device = device

        def call(self, task, payload, timeout_s=0.0):
            calls.append((self.device, task))
            done.set()

    monkeypatch.setattr(worker_module, "get_worker", lambda device: FakeWorker(device))
    problem_main._prestart_worker("cuda:0")
    assert done.wait(5)
    assert calls == [("cuda:0", "kernelopt_core.measure.task_context:ready_task")]
