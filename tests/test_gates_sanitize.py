"""compute-sanitizer on a finalist (issue 28): memcheck and racecheck on every finalist's captured launch on a
GPU, each timed; on the CPU the verdict says races were not checked. The sanitizer itself needs a GPU: here
a stand-in executable prints what compute-sanitizer prints, so the parsing and the verdict are what is tested."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.gates import sanitize
from kernelopt_core.gates.sanitize import NOT_ON_CPU, SanitizerRun, run_sanitizer, sanitize_finalist


def test_on_the_cpu_races_are_not_checked() -> None:
    report = sanitize_finalist("g.py", "r.py", ["k"], {}, "cpu")
    assert report.runs == [] and report.errors == [] and report.note == NOT_ON_CPU
    assert "races and stray accesses not checked" in report.note


def test_every_finalist_gets_memcheck_and_racecheck_where_it_can_see_something(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def stand_in(tool: str, graph: str, restitched: str, kernel: str, device: str, timeout_s: float,
                 gate: object = None) -> SanitizerRun:
        calls.append((kernel, tool))
        if kernel == "racy" and tool == "racecheck":
            return SanitizerRun(tool, True, 2, 3.25, "Error: Race reported between Write access and Read access")
        return SanitizerRun(tool, True, 0, 1.5, "no errors")

    monkeypatch.setattr(sanitize, "run_sanitizer", stand_in)
    compiled = {"k": {"configs": [{"shared_bytes": 0}]}, "racy": {"configs": [{"shared_bytes": 4096}]}}
    report = sanitize_finalist("g.py", "r.py", ["k", "racy"], compiled, "cuda:0")
    # racecheck watches shared memory only: "k" compiles to none, so only memcheck runs on it
    assert calls == [("k", "memcheck"), ("racy", "memcheck"), ("racy", "racecheck")]
    assert [r["seconds"] for r in report.runs] == [1.5, 1.5, 3.25]
    assert report.errors == ["compute-sanitizer racecheck found 2 error(s) in racy: Error: Race reported between "
                             "Write access and Read access"]
    assert report.note == ("compute-sanitizer: memcheck 0 errors (1.5 s), racecheck not run: the kernel uses no shared "
                           "memory, the only memory racecheck watches (races through global memory: gate 1's "
                           "unsynchronised-reload rule), memcheck 0 errors (1.5 s), racecheck 2 hazards (3.2 s)")
    unknown = sanitize_finalist("g.py", "r.py", ["k"], {}, "cuda:0")  # no compile known: both tools run
    assert [r["tool"] for r in unknown.runs] == ["memcheck", "racecheck"]


SOFTMAX = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11" / "softmax" / "output_code.py"
SOFTMAX_KERNEL = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"


@pytest.mark.parametrize("asm,tools", [
    ("", ["memcheck"]),
    ("\n    tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x0], dtype=tl.int32, is_pure=True, pack=1)",
     ["memcheck", "racecheck"]),
])
def test_racecheck_runs_only_where_the_kernels_own_code_addresses_shared_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asm: str, tools: list[str]) -> None:
    """A reduction keeps its partials in shared memory, placed by Triton with its barriers: racecheck would
    check the compiler. Inline assembly can address shared memory itself: there racecheck runs."""
    source = SOFTMAX.read_text()
    anchor = "    xoffset = tl.program_id(0) * XBLOCK\n"
    assert anchor in source
    restitched = tmp_path / "restitched.py"
    restitched.write_text(source.replace(anchor, anchor + asm, 1))
    monkeypatch.setattr(sanitize, "run_sanitizer", lambda tool, *a, **k: SanitizerRun(tool, True, 0, 1.0, "no errors"))
    compiled = {SOFTMAX_KERNEL: {"configs": [{"shared_bytes": 2048}]}}
    report = sanitize_finalist("g.py", str(restitched), [SOFTMAX_KERNEL], compiled, "cuda:0")
    assert [r["tool"] for r in report.runs] == tools
    assert ("racecheck not run: the kernel addresses no shared memory itself" in report.note) == (tools == ["memcheck"])


def test_a_sanitizer_that_cannot_run_says_what_was_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sanitize, "run_sanitizer", lambda tool, *a, **k: SanitizerRun(
        tool, False, None, 0.0, "compute-sanitizer was not found (set KERNELOPT_COMPUTE_SANITIZER)"))
    report = sanitize_finalist("g.py", "r.py", ["k"], {}, "cuda:0")
    assert not report.errors
    assert "racecheck did not run (compute-sanitizer was not found" in report.note and "races not checked" in report.note


@pytest.mark.parametrize("tool,printed,errors", [
    ("racecheck", "========= Error: Race reported between Write access at 0x1f0 in k and Read access at 0x2a0\n"
                  "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n", 1),
    ("memcheck", "SANITIZE-TARGET-OK\n========= ERROR SUMMARY: 0 errors\n", 0),
])
def test_the_sanitizer_report_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, printed: str,
                                      errors: int) -> None:
    fake = tmp_path / "compute-sanitizer"
    (tmp_path / "printed.txt").write_text(printed)
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'printed.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its scratch folder goes
    run = run_sanitizer(tool, "g.py", "r.py", "k", "cuda:0", timeout_s=30)
    assert run.ran and run.errors == errors and run.seconds >= 0
    if errors:
        assert "Race reported" in run.summary
    assert not [p for p in os.listdir(tmp_path) if p.startswith("kernelopt-sanitize-")]  # scratch removed


PLAIN = '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_heuristics

@triton_heuristics.pointwise(size_hints={'x': 1024}, inductor_meta={'kernel_name': 'triton_poi_fused_relu_0'})
@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    x0 = xoffset + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + x0, tl.maximum(tl.load(in_ptr0 + x0, x0 < xnumel), 0), x0 < xnumel)
'''

LAUNCHER = '''
import torch
import triton
import triton.language as tl

@triton.jit
def _partial(in_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pass

@triton.jit
def _partial_finish(partial_ptr, out_ptr, BLOCK: tl.constexpr):
    pass

def triton_red_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel):
    partials = torch.empty((64,), dtype=torch.float32, device=in_ptr0.device)
    _partial[(64,)](in_ptr0, partials, r0_numel, BLOCK=1024)
    _partial_finish[(1,)](partials, out_ptr0, BLOCK=64)
'''


def test_only_the_candidates_kernels_are_instrumented() -> None:
    """The candidate's @triton.jit functions get the suffix the sanitizer filters on; the baseline's
    kernel of the same name (which the capture runs) does not match it."""
    from kernelopt_core.gates.sanitize import CHECKED_SUFFIX, checked_source
    from kernelopt_core.launchers import is_launcher_source

    plain, renames = checked_source(PLAIN)
    assert renames == {"triton_poi_fused_relu_0": "triton_poi_fused_relu_0" + CHECKED_SUFFIX}
    assert "def triton_poi_fused_relu_0_kosan_checked(" in plain and "def triton_poi_fused_relu_0(" not in plain
    compile(plain, "plain", "exec")
    launcher, renames = checked_source(LAUNCHER)
    assert set(renames) == {"_partial", "_partial_finish"}  # the launcher's own function keeps its name
    assert is_launcher_source(launcher, "triton_red_fused_sum_0")
    assert "_partial_kosan_checked[(64,)]" in launcher and "_partial_finish_kosan_checked[(1,)]" in launcher
    assert "_partial_finish_kosan_checked_kosan_checked" not in launcher
    compile(launcher, "launcher", "exec")
    assert checked_source("def not_a_kernel(): pass\n") == ("def not_a_kernel(): pass\n", {})


def test_the_sanitizer_is_told_to_check_only_the_candidate_and_says_where_a_slow_run_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "compute-sanitizer"
    seen = tmp_path / "argv.txt"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {seen}\necho \"PYTORCH_NO_CUDA_MEMORY_CACHING=$PYTORCH_NO_CUDA_MEMORY_CACHING\" >> {seen}\n"
                    "echo 'SANITIZE-STEP import_torch_and_start_cuda 6.25'\necho 'SANITIZE-STEP load_the_graph 3.50'\n"
                    "exec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = run_sanitizer("memcheck", "g.py", "r.py", "k", "cuda:0", timeout_s=2)
    assert not run.ran and run.errors is None
    assert run.summary == ("did not finish within 2 s (steps done: import torch and start cuda 6.2 s, "
                           "load the graph 3.5 s)")
    argv, env_line = seen.read_text().splitlines()
    assert "--tool memcheck --print-limit 20 --target-processes application-only --kernel-name kns=_kosan_checked " in argv
    assert env_line == "PYTORCH_NO_CUDA_MEMORY_CACHING=1"  # each tensor its own allocation


def test_a_clean_racecheck_reads_no_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its summary line names "hazards"; a clean run is "no errors", not that line (seen on the H200)."""
    fake = tmp_path / "compute-sanitizer"
    (tmp_path / "printed.txt").write_text("SANITIZE-TARGET-OK\n"
                                          "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'printed.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = run_sanitizer("racecheck", "g.py", "r.py", "k", "cuda:0", timeout_s=30)
    assert run.ran and run.errors == 0 and run.summary == "no errors"


def test_a_finalist_carries_its_screens_compile_numbers_to_the_sanitizer(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """Finalists run gates 2-4 without gate 1: the shared memory its screen's compile measured is what lets
    racecheck be left out for a kernel that has none."""
    from test_search_pipeline import ELEMENTWISE

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import cascade
    from kernelopt_core.gates.verdict import CascadeResult, GateVerdict
    from kernelopt_core.search.evaluation import GateEvaluator

    graph = parse_output_code(ELEMENTWISE)
    kernel = graph.kernels[0].name
    compile_numbers = {"configs": [{"shared_bytes": 0, "registers": 24}]}
    seen: list[Any] = []

    def stand_in(graph: Any, candidates: dict[str, str], config: Any, sink: Any, worker: Any) -> CascadeResult:
        seen.append(config)
        gates = [GateVerdict(1, "static", True, "ok", {"compile": compile_numbers}, 0.1)] if 1 in config.run_gates \
            else []
        return CascadeResult(accepted=True, failed_gate=None, reason="ok", gates=gates, restitched_path="r.py")

    monkeypatch.setattr(cascade, "run_cascade", stand_in)
    evaluator = GateEvaluator(graph, "cuda:0", str(tmp_path), worker=object())
    evaluator.screen(kernel, "source A")
    evaluator.finalize({kernel: "source A"}, (3, 4))
    evaluator.finalize({kernel: "source B"}, (3, 4))  # never screened here (a resumed run): not known
    assert seen[1].run_gates == (2, 3, 4) and seen[1].compiled == {kernel: compile_numbers}
    assert seen[2].compiled == {}


def test_a_sanitizer_run_begun_beside_gate_2_is_gate_3s_and_ended_when_nobody_wants_it() -> None:
    """Gate 2's battery starts the tools of a finalist whose gate 3 follows; gate 3 takes that run by the
    finalist's re-stitched graph. A run its gates left (a rejection) is ended, its tools killed, before any other
    task: nothing shares the device with a timing."""
    import subprocess
    import threading
    import time

    from kernelopt_core.gates.sanitize import (
        SanitizerReport,
        begin_sanitizer,
        claim_sanitizer,
        settle_sanitizer,
    )

    started = threading.Event()
    tools: list[subprocess.Popen[bytes]] = []

    def long_run() -> SanitizerReport:  # a tool's run, registered as the real ones are
        tool = subprocess.Popen(["sleep", "60"])
        tools.append(tool)
        sanitize._LIVE.add(tool.pid)
        started.set()
        try:
            tool.wait()
        finally:
            sanitize._LIVE.discard(tool.pid)
        return SanitizerReport([], [], "ended")

    first = begin_sanitizer(long_run, beside=True, key="finalist-a.py")
    assert started.wait(10) and not first.done()
    assert claim_sanitizer("finalist-b.py") is None  # another finalist's gate 3 does not take it
    settle_sanitizer(keep="finalist-a.py")  # gate 3 of its own finalist: left running for it
    assert not first.done()
    assert claim_sanitizer("finalist-a.py") == (first, False)  # begun beside, not staged

    started.clear()
    left = begin_sanitizer(long_run, beside=True, key="finalist-c.py")
    assert started.wait(10)
    begin = time.monotonic()
    settle_sanitizer()  # any other task: the run left going is ended, not waited for
    assert left.done() and time.monotonic() - begin < 30 and tools[-1].poll() is not None
    assert claim_sanitizer("finalist-c.py") is None
    for tool in tools:
        tool.kill()
        tool.wait()
    now = begin_sanitizer(lambda: SanitizerReport([], [], "at once"), beside=False)  # no room: run in place
    assert now.done() and now.result().note == "at once"


MEMCHECK_OUT_OF_MEMORY = (
    "========= COMPUTE-SANITIZER\n"
    "========= Program hit cudaErrorMemoryAllocation (error 2) due to \"out of memory\" on CUDA API call to "
    "cudaMalloc.\n"
    "=========     Saved host backtrace up to driver entry point at error\n"
    "=========         Host Frame: cudaMalloc [0x4f2a1] in libcudart.so.12\n"
    "========= Program hit cudaErrorMemoryAllocation (error 2) due to \"out of memory\" on CUDA API call to "
    "cudaGetLastError.\n"
    "=========         Host Frame: cudaGetLastError [0x4f3b0] in libcudart.so.12\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.\n"
    "========= ERROR SUMMARY: 2 errors\n")


def test_a_target_out_of_device_memory_could_not_run_and_is_no_error() -> None:
    """memcheck counts the target's failed allocations as errors: they say the check could not run, never that
    the candidate is wrong (a correct candidate was rejected this way beside gate 2 on the H100)."""
    run = sanitize.read_report("memcheck", MEMCHECK_OUT_OF_MEMORY, 255, 12.0)
    assert not run.ran and run.errors is None and run.out_of_memory
    assert "out of device memory" in run.summary and "cudaMalloc" in run.summary
    report = sanitize.sanitize_kernels(["k"], "cuda:0", lambda tool, _: run if tool == "memcheck" else SanitizerRun(
        tool, True, 0, 1.0, "no errors"), {"k": 16})
    assert report.errors == [] and report.out_of_memory
    assert "memcheck not checked: out of device memory" in report.note and "stray accesses not checked" in report.note


def test_a_real_memcheck_error_is_still_an_error_beside_an_out_of_memory_line() -> None:
    printed = ("========= Invalid __global__ write of size 4 bytes\n"
               "=========     at triton_poi_fused_relu_0_kosan_checked+0x1f0\n"
               "=========     Address 0x7f0000001000 is out of bounds\n"
               "SANITIZE-TARGET-OK\n========= ERROR SUMMARY: 1 error\n")
    run = sanitize.read_report("memcheck", printed, 0, 3.0)
    assert run.ran and run.errors == 1 and not run.out_of_memory and "Invalid __global__ write" in run.summary
    both = sanitize.read_report("memcheck", MEMCHECK_OUT_OF_MEMORY.replace(
        "========= ERROR SUMMARY: 2 errors", printed.replace("1 error", "3 errors")), 0, 3.0)
    assert both.ran and both.errors == 1 and "Invalid __global__ write" in both.summary
    assert "cudaErrorMemoryAllocation" not in both.summary


def test_the_sanitizer_starts_beside_gate_2_only_when_free_memory_covers_both() -> None:
    """The start-ahead decision with stand-in memory figures: the targets' need on top of what gate 2 holds."""
    gib = 1 << 30
    working_set = 12 * gib  # softmax_long_rows' 12.9 GB, about
    need = sanitize.sanitizer_need_bytes(working_set)
    held = int(sanitize.HELD_BESIDE_RATIO * working_set)
    assert need > 2 * working_set  # two targets, each running the graph and holding copies of the launch
    assert not sanitize.fits_beside(39 * gib, working_set)  # the H100 run: 39 GB free: after gate 2 instead
    assert not sanitize.fits_beside(held + need - 1, working_set)
    assert sanitize.fits_beside(held + need, working_set)
    assert sanitize.fits_beside(39 * gib, 256 << 20)  # a small graph still starts ahead
    assert not sanitize.fits_beside(1 << 50, None)  # symbolic shapes: not known, never ahead


def test_the_graph_working_set_counts_its_inputs_and_allocations(tmp_path: Path) -> None:
    graph = Path(__file__).parent / "fixtures" / "inductor-h200-torch2.11" / "attention" / "output_code.py"
    inputs = 3 * 16 * 16 * 1024 * 64 * 4  # q, k, v in float32
    scores, out = 256 * 1024 * 1024 * 4, 256 * 1024 * 64 * 4  # buf0 and buf4 of the wrapper
    assert sanitize.graph_working_set_bytes(str(graph)) == inputs + scores + out
    assert sanitize.graph_working_set_bytes(str(tmp_path / "missing.py")) is None


WAITING_TARGET = """
import os, sys, time
args = sys.argv[1:]
go = args[args.index("--go") + 1]
print("SANITIZE-STEP load_the_graph 0.10", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
print("SANITIZE-STEP wait_for_the_device 0.50", flush=True)
print("SANITIZE-TARGET-OK", flush=True)
"""
RUNNING_STAND_IN = """#!{python}
import subprocess, sys
argv = sys.argv[1:]
command = argv[argv.index("--kernel-name") + 2:]
done = subprocess.run(command)
print("========= ERROR SUMMARY: 0 errors", flush=True)
sys.exit(done.returncode)
"""


@pytest.fixture
def waiting_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in compute-sanitizer that runs its target, and a target that waits for its --go file."""
    (tmp_path / "kosan_waiting_target.py").write_text(WAITING_TARGET)
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(RUNNING_STAND_IN.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def test_a_staged_target_loads_then_waits_for_its_gate_before_taking_the_device(waiting_target: Path) -> None:
    """Where gate 2's battery leaves no room, the tools' targets start beside it anyway and wait: the time
    limit and the run's seconds count from when gate 3 opens the gate."""
    import threading
    import time

    from kernelopt_core.gates.sanitize import DeviceGate, SanitizerTarget, run_target

    gate = DeviceGate()
    runs: list[SanitizerRun] = []
    target = SanitizerTarget("kosan_waiting_target", ("--go", gate.path))
    thread = threading.Thread(target=lambda: runs.append(run_target("memcheck", target, 30.0, gate)))
    thread.start()
    time.sleep(3.0)
    assert thread.is_alive() and not runs  # loaded, waiting for the device
    opened = time.monotonic()
    gate.open()
    thread.join(30)
    [run] = runs
    assert run.ran and run.errors == 0, run.summary
    assert run.steps == "load the graph 0.1 s, wait for the device 0.5 s"
    assert run.seconds <= time.monotonic() - opened + 0.5  # from the gate's opening, not the start
    gate.close()
    assert not os.path.exists(gate.directory)


def test_a_staged_run_no_longer_wanted_ends_without_taking_the_device(waiting_target: Path) -> None:
    """Gate 2 rejected the finalist: the next task settles the run; its waiting targets end, nothing hangs."""
    import time

    from kernelopt_core.gates.sanitize import (
        DeviceGate,
        SanitizerTarget,
        begin_sanitizer,
        claim_sanitizer,
        run_target,
        sanitize_kernels,
        settle_sanitizer,
    )

    gate = DeviceGate()
    target = SanitizerTarget("kosan_waiting_target", ("--go", gate.path))
    future = begin_sanitizer(lambda: sanitize_kernels(["k"], "cuda:0", lambda tool, _: run_target(tool, target, 30.0,
                                                                                                  gate), {"k": 0}),
                             True, key="finalist-d.py", gate=gate)
    time.sleep(2.0)
    begin = time.monotonic()
    settle_sanitizer()
    assert future.done() and time.monotonic() - begin < 10
    report = future.result()
    assert [r["ran"] for r in report.runs] == [False]
    assert "not run: the finalist's gates ended before it" in report.note
    assert not sanitize._LIVE and claim_sanitizer("finalist-d.py") is None


def test_gate_2_starts_the_tools_staged_where_there_is_no_room_and_gate_3_lets_them_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's wiring: gate 2's full battery begins a staged run (no room beside it); gate 3 claims it,
    opens its gate and waits for it before its seeds (not beside them: the run had the device alone)."""
    import threading

    from kernelopt_core.gates.registry import CommonSettings, KernelSettings, ModelSettings
    from kernelopt_core.gates.sanitize import SanitizerReport
    from kernelopt_core.gates.task_payload import GateRequest, GraphCandidate
    from kernelopt_core.gates.tasks import graph as graph_tasks
    from kernelopt_core.payload_fields import PayloadReader

    seen: dict[str, object] = {}
    waiting = threading.Event()

    def stand_in(graph: str, restitched: str, kernels: list[str], compiled: dict[str, object], device: str,
                 timeout_s: float, enabled: bool, side_by_side: bool, gate: object = None) -> SanitizerReport:
        seen["gate"] = gate
        waiting.set()
        assert gate is not None and gate.opened.wait(30)  # type: ignore[attr-defined]
        seen["opened"] = os.path.exists(gate.path)  # type: ignore[attr-defined]
        return SanitizerReport([], [], "compute-sanitizer: memcheck 0 errors (1.0 s)")

    monkeypatch.setattr(sanitize, "sanitize_finalist", stand_in)
    monkeypatch.setattr(sanitize, "room_beside", lambda device, working_set: False)
    monkeypatch.setattr(sanitize, "graph_working_set_bytes", lambda graph: 13 << 30)
    finalist = GraphCandidate("g.py", "finalist-e.py", ("k",), {}, device="cuda:0")
    common = CommonSettings.read(PayloadReader({}))  # a default configuration's
    graph_tasks._sanitize_ahead(GateRequest(finalist, common, KernelSettings.from_json({"sanitize_ahead": True})))
    assert waiting.wait(10) and not seen.get("opened")  # staged: begun, waiting for gate 3
    claimed = sanitize.claim_sanitizer("finalist-e.py")  # gate 3's first step: the gate opens
    future, beside = graph_tasks._begin_sanitize(GateRequest(finalist, common, ModelSettings.from_json({})), claimed)
    assert future.done() and not beside and seen["opened"] is True
    assert future.result().note == "compute-sanitizer: memcheck 0 errors (1.0 s)"
    assert not os.path.exists(seen["gate"].directory)  # type: ignore[attr-defined]


def test_the_target_loads_the_baseline_through_the_workers_inductor_cache(waiting_target: Path) -> None:
    """The worker's autotuning results of the baseline reach the target (it reads them, not tunes again
    under the tool); its own caches stay in its scratch."""
    from kernelopt_core.gates.sanitize import BASELINE_CACHE_ENV, SanitizerTarget, _target_env, run_target

    (waiting_target / "kosan_cache_target.py").write_text(
        "import os\n"
        f"given = os.environ.get({BASELINE_CACHE_ENV!r})\n"
        "own = os.environ['TORCHINDUCTOR_CACHE_DIR']\n"
        "print(f'SANITIZE-STEP baseline_cache_given {1.0 if given and os.path.isdir(given) else 0.0}', flush=True)\n"
        "print(f'SANITIZE-STEP own_cache_in_scratch {1.0 if own.endswith(\"inductor\") and given != own else 0.0}',"
        " flush=True)\n"
        "print('SANITIZE-TARGET-OK', flush=True)\n")
    run = run_target("memcheck", SanitizerTarget("kosan_cache_target"), 60.0)
    assert run.ran, run.summary
    assert run.steps == "baseline cache given 1.0 s, own cache in scratch 1.0 s"
    assert BASELINE_CACHE_ENV not in _target_env("/tmp/s")  # none known: the target tunes the baseline itself


def test_the_tool_start_and_the_exit_are_steps_of_their_own() -> None:
    """A run longer than its target's steps says where the rest went: before the target's first line, or
    after its last (read from the wall clock the target prints)."""
    from kernelopt_core.gates.sanitize import steps_line, with_start_and_exit

    printed = ("SANITIZE-CLOCK started 1003.500\nSANITIZE-STEP load_the_graph 2.00\nSANITIZE-TARGET-OK\n"
               "SANITIZE-CLOCK done 1010.000\n")
    assert steps_line(with_start_and_exit(printed, launched=1000.0, ended=1031.25)) == (
        "start the tool and python 3.5 s, load the graph 2.0 s, exit and report 21.2 s")
    assert with_start_and_exit("SANITIZE-STEP load_the_graph 2.00\n", 1000.0, 1031.0) == (
        "SANITIZE-STEP load_the_graph 2.00\n")  # a target that printed no clock: nothing made up


def test_the_target_compiles_in_its_own_process_and_only_it_is_instrumented(tmp_path: Path) -> None:
    from kernelopt_core.gates.sanitize import _target_env

    assert _target_env(str(tmp_path))["TORCHINDUCTOR_COMPILE_THREADS"] == "1"


def test_gate_3_opens_a_staged_run_before_it_loads_the_graphs(monkeypatch: Any) -> None:
    """A run gate 2 began staged takes the device while gate 3 loads the baseline and the candidate (they hold no
    buffers); when the candidate does not load, the run is ended before gate 3 returns."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from kernelopt_core.gates.tasks import graph

    order: list[str] = []
    run: Future[Any] = Future()
    monkeypatch.setattr(sanitize, "claim_sanitizer", lambda key: order.append(f"claim {key}") or (run, True))
    monkeypatch.setattr(sanitize, "abandon_sanitizer", lambda future: order.append(f"abandon {future is run}"))
    monkeypatch.setattr(graph, "_load_baseline", lambda path, device: order.append("load baseline"))
    monkeypatch.setattr(graph, "_candidate_of", lambda request: SimpleNamespace(process=None))
    failure = {"passed": False, "reason": "the candidate's graph does not load"}
    monkeypatch.setattr(graph, "_load_candidate_graph",
                        lambda slot, path: order.append("load candidate") or failure)
    request = SimpleNamespace(device="cpu", target=SimpleNamespace(graph="g.py", restitched="finalist.py"),
                              settings=SimpleNamespace(seeds=(0,), tolerance=1e-4))
    assert graph._model_gate(request) is failure  # type: ignore[arg-type]
    assert order == ["claim finalist.py", "load baseline", "load candidate", "abandon True"]
