"""What the search's worker holds after a finalist and before a configuration check.

On the H100 (softmax_long_rows, 6.4 GB in and out) every kernel timing after an early finalist ran out of
memory: gate 4 left its three graph input sets in the baseline's timing process, which the search's kernel
timing goes on using. And the configuration check began with 1.5 working sets still allocated in the worker.
Gate 4 now drops those input sets before it times the kernels alone, and releasing the working sets ends a
worker that still holds memory, so that the check starts in a fresh one. Stand-ins replace the processes
and the device's allocator.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kernelopt_core.gates.registry import PerfSettings
from kernelopt_core.gates.tasks import skeleton


class StandInProcess:
    closed = False
    pid = 4242
    containment = SimpleNamespace(contained=True, filesystem="none", network="none")

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, what: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((what, kwargs))
        return {"ok": True, "peak_bytes": 0}

    def close(self) -> None:
        self.closed = True


def _timed(*args: Any, **kwargs: Any) -> Any:
    side = SimpleNamespace(median_ms=1.0)
    return SimpleNamespace(speedup=1.2, ci_low=1.15, ci_high=1.25, path="module call", rounds=10, a=side, b=side)


def test_gate_4_drops_the_baselines_input_sets_before_the_kernels_are_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.gates import perf

    monkeypatch.setattr(perf, "time_processes", _timed)
    monkeypatch.setattr(skeleton, "settle_spare", lambda: None)
    holder = skeleton.ProcessHolder()
    monkeypatch.setattr(skeleton, "BASELINE", holder)
    baseline = holder.get("graph", lambda: skeleton.SandboxSlot("graph", StandInProcess(), loaded={"graph", "inputs"}))
    candidate = skeleton.SandboxSlot("candidate", StandInProcess())
    held_while_kernels_timed: list[bool] = []

    def kernel_speedups(base: skeleton.SandboxSlot, cand: skeleton.SandboxSlot) -> dict[str, float]:
        held_while_kernels_timed.append("inputs" in base.loaded)
        return {"k": 1.2}

    reply = skeleton.perf_gate(PerfSettings(rounds=10, min_speedup=1.03, kernel_timing=True), "cpu",
                               lambda: (baseline, candidate), (1000, 1001, 1002), "module call", kernel_speedups)
    assert reply.passed
    assert held_while_kernels_timed == [False]
    assert ("release", {"inputs": True}) in baseline.process.calls
    assert baseline.loaded == {"graph"} and not baseline.process.closed  # the process goes on for kernel timing


def test_a_failed_graph_timing_drops_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.gates import perf

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the candidate's graph failed")

    monkeypatch.setattr(perf, "time_processes", fails)
    monkeypatch.setattr(skeleton, "settle_spare", lambda: None)
    holder = skeleton.ProcessHolder()
    monkeypatch.setattr(skeleton, "BASELINE", holder)
    baseline = holder.get("graph", lambda: skeleton.SandboxSlot("graph", StandInProcess(), loaded={"graph", "inputs"}))
    reply = skeleton.perf_gate(PerfSettings(min_speedup=1.03, rounds=10, kernel_timing=False), "cpu", lambda: (baseline, skeleton.SandboxSlot(
        "candidate", StandInProcess())), (1000,), "module call", lambda b, c: {})
    assert not reply.passed and "timing failed" in reply.reason
    assert baseline.loaded == {"graph"}


@pytest.mark.parametrize(("allocated", "recycled"), [(19_360_907_264, True), (64 * 2**20, False)])
def test_a_worker_still_holding_memory_after_the_release_is_replaced(monkeypatch: pytest.MonkeyPatch,
                                                                     allocated: int, recycled: bool) -> None:
    torch = pytest.importorskip("torch")
    from kernelopt_core.gates import sanitize, working_sets
    from kernelopt_core.gates.tasks import skeleton as tasks_skeleton
    from kernelopt_core.measure.task_context import RECYCLE_KEY

    collected: list[str] = []
    monkeypatch.setattr(sanitize, "settle_sanitizer", lambda: None)
    monkeypatch.setattr(tasks_skeleton, "close_candidate", lambda payload=None: {})
    monkeypatch.setattr(tasks_skeleton, "close_baselines", lambda payload=None: {})
    monkeypatch.setattr(torch.cuda, "ipc_collect", lambda: collected.append("ipc"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: collected.append("cache"))
    monkeypatch.setattr(working_sets, "_device_bytes",
                        lambda device: {"allocated": allocated, "reserved": allocated + 2**30})
    released = working_sets.release_working_sets({"device": "cuda:0"})
    assert collected == ["ipc", "cache"]
    assert bool(released.get(RECYCLE_KEY)) is recycled
    if recycled:
        assert "18.03 GiB still allocated" in released[RECYCLE_KEY]


def test_a_kernel_timing_says_where_its_seconds_went(cpu_example_dump: Any, tmp_path: Any) -> None:
    """The search plans each next candidate by the last ones' cost; a timing reports its steps, so that a slow
    one can be told apart (capturing the launch, loading either side, the A/B itself)."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.restitch import write_restitched
    from kernelopt_core.measure.worker import get_worker
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    graph = parse_output_code(str(cpu_example_dump))
    kernel = graph.kernels[0]
    module = parse_kernel_module(kernel.source, kernel.name)
    rewrite = FAMILIES["launch_config"].variants(RewriteContext(module=module, original=module, device="cpu"))[0]
    path, _ = write_restitched(graph, {kernel.name: rewrite.source}, str(tmp_path / "candidate"))
    outcome = get_worker("cpu").call("kernelopt_core.search.kernel_tasks:time_candidates", {
        "graph_path": str(cpu_example_dump), "device": "cpu", "kernel": kernel.name, "rounds": 3,
        "candidates": {"c1": path}}, timeout_s=600)
    assert outcome.ok, outcome.failure
    timed = outcome.value["candidates"]["c1"]
    assert "error" not in timed, timed
    assert set(timed["steps_s"]) == {"capture_s", "load_candidate_s", "load_original_s", "time_pair_s",
                                     "close_candidate_s"}
    assert all(seconds >= 0.0 for seconds in timed["steps_s"].values()) and timed["rounds"] == 3
    assert timed["spare_starting"] in (True, False)  # it no longer waits for a spare that is starting


RETIME_SCRIPT = """
import json, sys
from kernelopt_core.gates.task_payload import KernelTimingRequest
from kernelopt_core.gates.tasks import graph as graph_tasks, skeleton

starting = sys.argv[1] == "1"
settled = []
graph_tasks._spare_candidate_status = lambda payload: {"starting": starting}
graph_tasks._settle_spare = lambda: settled.append(True)
graph_tasks.RETIME_ABOVE = 0.0
try:
    timed = graph_tasks.time_candidate_kernel(KernelTimingRequest.from_json(json.loads(sys.argv[2])))
finally:
    skeleton.close_baselines({})
print(json.dumps({"timed": timed, "settled": bool(settled)}))
"""


@pytest.mark.parametrize("starting", [True, False])
def test_a_timing_beside_a_starting_spare_is_timed_again_when_it_could_promote_the_candidate(
        cpu_example_dump: Any, tmp_path: Any, starting: bool) -> None:
    """The ranking timing no longer waits for the next spare to start; a candidate that looks faster is
    timed again once the spare has started (here every candidate counts as faster: RETIME_ABOVE 0). In a
    process of its own, as the worker runs it: the Triton interpreter's state is per process."""
    import json
    import subprocess
    import sys

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.restitch import write_restitched
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    graph = parse_output_code(str(cpu_example_dump))
    kernel = graph.kernels[0]
    module = parse_kernel_module(kernel.source, kernel.name)
    rewrite = FAMILIES["launch_config"].variants(RewriteContext(module=module, original=module, device="cpu"))[0]
    path, _ = write_restitched(graph, {kernel.name: rewrite.source}, str(tmp_path / "candidate"))
    request = {"graph_path": str(cpu_example_dump), "device": "cpu", "kernel": kernel.name, "rounds": 3,
               "restitched": path}
    done = subprocess.run([sys.executable, "-c", RETIME_SCRIPT, "1" if starting else "0", json.dumps(request)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    timed = reply["timed"]
    assert "error" not in timed, timed
    assert timed["spare_starting"] is starting and timed["retimed"] is starting
    assert ("retime_s" in timed["steps_s"]) is starting and reply["settled"] is starting
