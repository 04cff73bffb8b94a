"""compute-sanitizer on a finalist's captured launch (GPU only): stray accesses and races.

For every finalist on a GPU, gate 3 runs ``compute-sanitizer --tool memcheck`` and ``--tool
racecheck``, each timed, on a small program (:func:`main`) that captures the kernel's first launch
from the baseline graph, applies the candidate-process policy, loads the candidate and launches each
of its configs once on copies of the captured arguments. Only the candidate is instrumented (its jit
functions renamed with :data:`CHECKED_SUFFIX`); the caching allocator is off so that each tensor is
its own allocation. Errors reject the candidate; a sanitizer that is missing or cannot run is a note
in the verdict, and a target that ran out of device memory could not run (``out_of_memory``: gate 3
runs a run started beside other work again alone). racecheck runs only where the kernel's own code can
address shared memory (:func:`owns_shared_memory`). Without room beside gate 2 the targets start staged
(:class:`DeviceGate`) and wait for gate 3. :func:`sanitize_finalist` and :func:`run_sanitizer` import
nothing heavy; :func:`main` runs only under the sanitizer; :func:`run_target` and
:func:`sanitize_kernels` are shared with user kernels. Why: docs/design-notes.md, "gates/sanitize.py".
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..measure.task_context import worker_scratch
from ..process_lifetime import die_with_owner, end_tree, owned_command, start_owned

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error", re.IGNORECASE)
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazard", re.IGNORECASE)
# Appended to the candidate's @triton.jit functions under the sanitizer; the baseline has none of it.
CHECKED_SUFFIX = "_kosan_checked"
# memcheck's line for a CUDA API call of the target's that failed for want of device memory.
_OUT_OF_MEMORY = re.compile(r"Program hit \S*(cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY)|"
                            r"Program hit .*\"out of memory\"")
_STEP = re.compile(r"^SANITIZE-STEP (\S+) ([0-9.]+)$", re.MULTILINE)


def jit_function_names(source: str) -> list[str]:
    """The module-level functions of a kernel module decorated with ``@triton.jit`` (or ``@jit``)."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                text = ast.unparse(target)
                if text in ("triton.jit", "jit"):
                    names.append(node.name)
    return names


def checked_source(source: str, suffix: str = CHECKED_SUFFIX) -> tuple[str, dict[str, str]]:
    """The kernel module with each of its @triton.jit functions (and every use of their names) renamed
    with ``suffix``, and the renames. A plain Inductor module's one kernel gets a new name; a launcher's
    own (undecorated) function keeps its name and launches the renamed kernels."""
    renames = {name: name + suffix for name in jit_function_names(source)}
    if not renames:
        return source, {}
    pattern = re.compile(r"\b(" + "|".join(re.escape(name) for name in sorted(renames, key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda match: renames[match.group(1)], source), renames


def steps_line(text: str) -> str:
    """The target's steps as printed, e.g. "import torch 6.1 s, load the graph 9.8 s"; "" for none."""
    return ", ".join(f"{name.replace('_', ' ')} {float(seconds):.1f} s" for name, seconds in _STEP.findall(text))


@dataclass
class SanitizerRun:
    tool: str
    ran: bool
    errors: int | None
    seconds: float
    summary: str  # the report's lines that name a problem, or why it did not run
    steps: str = ""  # where the target's time went, as it printed it
    out_of_memory: bool = False  # the target ran out of device memory: the check could not run

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def find_sanitizer() -> str | None:
    candidates = [os.environ.get("KERNELOPT_COMPUTE_SANITIZER", ""), shutil.which("compute-sanitizer") or "",
                  "/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]
    ncu = shutil.which("ncu")
    if ncu:  # the CUDA toolkit keeps both under one root
        root = Path(os.path.realpath(ncu)).parents[1]
        candidates += [str(root / "bin" / "compute-sanitizer"), str(root / "compute-sanitizer" / "compute-sanitizer")]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


TOOLS = ("memcheck", "racecheck")
# racecheck watches shared memory only; a kernel whose every config compiles to none (gate 1's compile says
# so) gives it nothing to watch. Races through global memory are gate 1's unsynchronised-reload rule's.
RACECHECK_COMPILER_OWNED = ("racecheck not run: the kernel addresses no shared memory itself (no inline assembly); "
                            "Triton places what it keeps there, with the barriers (races through global memory: "
                            "gate 1's unsynchronised-reload rule; across programs: gate 2's re-runs)")
# What lets a Triton kernel's own code read or write shared memory: inline PTX, or Gluon's explicit layouts.
_OWNS_SHARED = re.compile(r"\binline_asm\w*\b|\bgluon\b|\ballocate_shared_memory\b")
RACECHECK_NOT_NEEDED = ("racecheck not run: the kernel uses no shared memory, the only memory racecheck watches "
                        "(races through global memory: gate 1's unsynchronised-reload rule)")
NOT_ON_CPU = ("races and stray accesses not checked: compute-sanitizer needs a CUDA GPU, and the CPU interpreter runs "
              "a program's block as one step (gate 1's race rule reads the source; gate 2's guards catch stores near "
              "a tensor)")


@dataclass
class SanitizerReport:
    runs: list[dict[str, Any]]  # per kernel and tool: SanitizerRun's fields, with "kernel"
    errors: list[str]  # each a rejection
    note: str  # one line for the verdict: what ran and how long it took, or why nothing did

    @property
    def out_of_memory(self) -> bool:
        """Some tool's target ran out of device memory (run alone, it may fit)."""
        return any(run.get("out_of_memory") for run in self.runs)


# One tool over one kernel's target: (tool, kernel) -> its run.
ToolRun = Callable[[str, str], SanitizerRun]


def sanitize_finalist(graph: str, restitched: str, kernels: list[str], compiled: dict[str, Any], device: str,
                      timeout_s: float = 600.0, enabled: bool = True, side_by_side: bool = True,
                      gate: DeviceGate | None = None) -> SanitizerReport:
    """memcheck and racecheck on each kernel's captured launch (on a GPU), timed; what was not checked, said.
    ``gate``: the targets start staged, waiting for it before they take the device."""
    shared = {name: shared_memory_bytes(compiled.get(name)) for name in kernels}
    return sanitize_kernels(kernels, device, lambda tool, name: run_sanitizer(tool, graph, restitched, name, device,
                                                                              timeout_s=timeout_s, gate=gate),
                            shared, enabled, side_by_side, owns_shared=kernels_owning_shared(restitched, kernels))


def owns_shared_memory(source: str) -> bool:
    """Whether a kernel's own code can address shared memory: inline assembly or Gluon. Elsewhere Triton's
    compiler places the reductions', layout changes' and ``tl.dot`` operands' shared memory with its own
    barriers, and a race there would be the compiler's, not something a rewrite wrote."""
    return bool(_OWNS_SHARED.search(source))


def kernels_owning_shared(restitched: str, kernels: list[str]) -> dict[str, bool]:
    """:func:`owns_shared_memory` of each kernel of the re-stitched graph (True where its source cannot be read)."""
    from ..artifacts.parse import parse_output_code

    try:
        sources = {k.name: k.source for k in parse_output_code(restitched).kernels}
    except Exception:  # noqa: BLE001 - unreadable: racecheck runs, as it would without this reading
        return {name: True for name in kernels}
    return {name: owns_shared_memory(sources[name]) if name in sources else True for name in kernels}


def sanitize_kernels(kernels: list[str], device: str, run: ToolRun, shared: dict[str, int | None] | None = None,
                     enabled: bool = True, side_by_side: bool = True,
                     owns_shared: dict[str, bool] | None = None) -> SanitizerReport:
    """memcheck on each kernel through ``run`` (on a GPU), and racecheck where it can see something, side by
    side unless ``side_by_side`` is off (one target on the device at a time); the verdict's errors and note.
    ``shared``: each kernel's shared memory from gate 1's compile (None: not known); ``owns_shared``:
    whether its own code addresses shared memory (:func:`owns_shared_memory`; missing: assume it does)."""
    skipped = not_checked(device, enabled)
    if skipped is not None:
        return skipped
    report = SanitizerReport([], [], "")
    parts: list[str] = []
    for name in kernels:
        uses_shared = (shared or {}).get(name)
        own_code = (owns_shared or {}).get(name, True)
        tools = TOOLS if uses_shared != 0 and own_code else tuple(t for t in TOOLS if t != "racecheck")
        # The tools side by side: most of a run is the target's start (importing torch, loading and
        # running the graph or harness), which the GPU does not limit, so together they take about one's time.
        with ThreadPoolExecutor(max_workers=len(tools) if side_by_side else 1) as pool:
            futures = [pool.submit(run, tool, name) for tool in tools]
        for future in futures:
            parts.append(_judge(report, name, future.result(), uses_shared))
        if "racecheck" not in tools:
            parts.append(RACECHECK_NOT_NEEDED if uses_shared == 0 else RACECHECK_COMPILER_OWNED)
    report.note = "compute-sanitizer: " + ", ".join(parts) if parts else "compute-sanitizer: no kernel to check"
    return report


class DeviceGate:
    """A staged start: the targets import torch, start CUDA and load the graph (what needs no device memory
    to speak of) beside other work, then wait until the gate opens, when that work has released the device.
    A target waits for a file (it runs under compute-sanitizer, a process away); the tool's run waits for
    the event, and its time limit starts then."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.cancelled = False
        self.directory = tempfile.mkdtemp(prefix="kernelopt-device-gate-", dir=worker_scratch())
        self.path = os.path.join(self.directory, "go")

    def open(self) -> None:
        Path(self.path).write_text("go\n")
        self.opened.set()

    def cancel(self) -> None:
        """The run is no longer wanted: its tools return without taking the device."""
        self.cancelled = True
        self.opened.set()

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


_LIVE: set[int] = set()  # the tools running now (pids), ended when their run is no longer wanted
_BESIDE: dict[str, Any] = {}  # the one sanitizer run that may go on beside other work ("running") and its "key"
# What the sanitizer's targets need, in units of the graph's working set W (its inputs, outputs and
# intermediates): each target runs the graph (W), keeps the captured launch's arguments (at most W) and
# launches each config on a copy of them (at most W); memcheck pads and tracks every allocation
# (the margin, an allowance, not a measurement), and each target starts its own CUDA context. Both tools
# run side by side: two targets.
TARGET_COPIES = 3
MEMCHECK_MARGIN = 1.25
TARGET_FIXED_BYTES = 1 << 30
TARGETS_SIDE_BY_SIDE = len(TOOLS)
# What the gate the tools start beside holds at its peak, in units of W: gate 2's reserved peak, as
# measured on a GPU (docs/gates.md, "Beside the other gates"); a kernel's working set is at most its graph's.
HELD_BESIDE_RATIO = 3.0


def sanitizer_need_bytes(working_set: int) -> int:
    """Device memory the sanitizer's targets need for a graph of ``working_set`` bytes."""
    return TARGETS_SIDE_BY_SIDE * int(TARGET_COPIES * working_set * MEMCHECK_MARGIN + TARGET_FIXED_BYTES)


def fits_beside(free_bytes: int, working_set: int | None) -> bool:
    """Whether ``free_bytes`` of device memory covers the sanitizer's targets on top of what the gate beside
    them holds; a graph whose working set is not known (symbolic shapes) never starts beside."""
    if working_set is None or working_set <= 0:
        return False
    return free_bytes >= int(HELD_BESIDE_RATIO * working_set) + sanitizer_need_bytes(working_set)


def graph_working_set_bytes(graph: str) -> int | None:
    """The graph's inputs, outputs and intermediates in bytes (each allocation Inductor's wrapper makes, reused
    buffers once); None when a shape or dtype is not known."""
    from ..artifacts import parse_output_code
    from ..artifacts.model import DTYPE_BYTES

    try:
        parsed = parse_output_code(graph)
    except Exception:  # noqa: BLE001 - an unreadable graph: not known, so the tools run alone
        return None
    total = 0
    for spec in parsed.inputs:
        if spec.kind != "tensor":
            continue
        if spec.nbytes is None:
            return None
        total += spec.nbytes
    for buffer in parsed.buffers:
        if buffer.reuses is not None:
            continue
        size = DTYPE_BYTES.get(buffer.dtype)
        if size is None or not all(isinstance(d, int) for d in buffer.shape):
            return None
        numel = 1
        for dim in buffer.shape:
            numel *= dim
        total += numel * size
    return total


def room_beside(device: str, working_set: int | None) -> bool:
    """Whether the device's free memory covers the sanitizer's targets (for a graph of ``working_set`` bytes)
    on top of what the gate they would start beside holds."""
    if not device.startswith("cuda") or working_set is None:
        return False
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    return fits_beside(int(free), working_set)


def begin_sanitizer(run: Callable[[], SanitizerReport], beside: bool, key: str | None = None,
                    gate: DeviceGate | None = None) -> Future[SanitizerReport]:
    """Start ``run`` (the tools over a finalist) on a thread of its own when ``beside``, else run it now, so that
    gate 2's battery and gate 3's seeds go on while the tools start their targets (the larger part of their
    time). ``key`` names the finalist (its re-stitched graph): gate 3 takes a run begun during gate 2 with
    :func:`claim_sanitizer`. The next task of any other finalist waits for a run left going
    (:func:`settle_sanitizer`), so that no timing shares the device with it. ``gate``: the run's targets
    start staged (:class:`DeviceGate`); :func:`claim_sanitizer` opens it."""
    settle_sanitizer()
    if not beside:
        done: Future[SanitizerReport] = Future()
        try:
            done.set_result(run())
        except Exception as exc:  # noqa: BLE001 - the caller's result() raises it, as a thread's would
            done.set_exception(exc)
        return done
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sanitizer")
    future = pool.submit(run)
    pool.shutdown(wait=False)
    _BESIDE.update(running=future, key=key, gate=gate)
    return future


def claim_sanitizer(key: str) -> tuple[Future[SanitizerReport], bool] | None:
    """The run begun for the finalist ``key`` (during its gate 2), now gate 3's, and whether it started
    staged (its gate is opened now: its targets take the device); None when there is none."""
    if _BESIDE.get("running") is None or _BESIDE.get("key") != key:
        return None
    future = _BESIDE.pop("running")
    _BESIDE.pop("key", None)
    gate = _BESIDE.pop("gate", None)
    if gate is not None:
        gate.open()
    return future, gate is not None


def abandon_sanitizer(future: Future[SanitizerReport]) -> None:
    """End a run nobody will read (a claimed run whose gate 3 ended before reading it, or one its finalist's
    gates left): its tools and their targets end now, so that nothing runs beside the next task."""
    for pid in list(_LIVE):
        end_tree(pid)
    try:
        future.result()
    except Exception:  # noqa: BLE001 - only its end matters here
        pass


def settle_sanitizer(keep: str | None = None) -> None:
    """End a sanitizer run still going beside other work (its finalist's gates ended without needing it: a
    rejection), unless it is the run of the finalist ``keep`` (its gate 3 takes it)."""
    if keep is not None and _BESIDE.get("key") == keep:
        return
    future = _BESIDE.pop("running", None)
    _BESIDE.pop("key", None)
    gate = _BESIDE.pop("gate", None)
    if gate is not None:  # a staged run still waiting: its tools return without taking the device
        gate.cancel()
    if future is not None:
        abandon_sanitizer(future)


def not_checked(device: str, enabled: bool = True) -> SanitizerReport | None:
    """The report when no tool runs here (the CPU, or turned off); None when they do run."""
    if not device.startswith("cuda"):
        return SanitizerReport([], [], NOT_ON_CPU)
    if not enabled:
        return SanitizerReport([], [], "races and stray accesses not checked: compute-sanitizer was turned off")
    return None


def _judge(report: SanitizerReport, name: str, run: SanitizerRun, shared: int | None) -> str:
    """Record one tool's run in ``report`` (an error rejects); its part of the note."""
    tool = run.tool
    report.runs.append({"kernel": name, **run.to_json(), "shared_memory": shared})
    if run.ran and run.errors:
        report.errors.append(f"compute-sanitizer {tool} found {run.errors} error(s) in {name}: {run.summary}")
    if not run.ran and run.out_of_memory:
        return (f"{tool} not checked: out of device memory ({run.summary[:300]}): "
                f"{'races' if tool == 'racecheck' else 'stray accesses'} not checked")
    if not run.ran:
        return f"{tool} did not run ({run.summary}): {'races' if tool == 'racecheck' else 'stray accesses'} not checked"
    what = "hazards" if tool == "racecheck" else "errors"
    scope = "; the kernel uses no shared memory" if tool == "racecheck" and shared == 0 else ""
    return f"{tool} {run.errors} {what} ({run.seconds:.1f} s{scope})"


def shared_memory_bytes(compiled: dict[str, Any] | None) -> int | None:
    """The most shared memory any config of gate 1's compile uses (None: gate 1's compile is not known)."""
    configs = (compiled or {}).get("configs") if compiled else None
    if not configs:
        return None
    return max(int(config.get("shared_bytes") or 0) for config in configs)


@dataclass(frozen=True)
class SanitizerTarget:
    """The program a tool runs: ``python -m <module> <args> --scratch <folder>``. It contains itself before
    loading the candidate, prints ``SANITIZE-STEP <name> <seconds>`` as each step ends (:class:`Steps`) and
    ``SANITIZE-TARGET-OK`` once the candidate's launch completed."""

    module: str
    args: tuple[str, ...] = field(default_factory=tuple)


def inductor_target(graph: str, restitched: str, kernel: str, device: str) -> SanitizerTarget:
    """This module's :func:`main`: the kernel's first launch captured from the baseline graph, the candidate's."""
    return SanitizerTarget("kernelopt_core.gates.sanitize", ("--graph", graph, "--restitched", restitched,
                                                             "--kernel", kernel, "--device", device))


def run_sanitizer(tool: str, graph: str, restitched: str, kernel: str, device: str,
                  timeout_s: float = 600.0, gate: DeviceGate | None = None) -> SanitizerRun:
    """One sanitizer tool over the candidate's captured launch, from the worker."""
    target = inductor_target(graph, restitched, kernel, device)
    if gate is not None:
        target = SanitizerTarget(target.module, (*target.args, "--go", gate.path))
    return run_target(tool, target, timeout_s, gate)


BASELINE_CACHE_ENV = "KERNELOPT_BASELINE_INDUCTOR_CACHE"


def _worker_inductor_cache() -> str | None:
    """The Inductor cache the worker loaded the baseline graph through (its kernels' autotuning results)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except Exception:  # noqa: BLE001 - no torch here: the target tunes the baseline itself
        return None
    return cache_dir()


def _target_env(scratch: str, baseline_cache: str | None = None) -> dict[str, str]:
    from ..sandbox.process import _triton_cache_dir

    # The target contains itself before loading the candidate: every cache it writes is in scratch
    # (Triton's reads through to the user's cache), as in the candidate processes of gates 2-4. Before
    # that, as trusted code, it loads the baseline graph through the worker's Inductor cache, whose
    # autotuning results spare it tuning the baseline under the tool (allocations that memcheck tracks).
    extra = {BASELINE_CACHE_ENV: baseline_cache} if baseline_cache else {}
    return {**os.environ, **extra,
            "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p),
            "TMPDIR": scratch, "HOME": scratch, "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(scratch, "triton"), "CUDA_CACHE_PATH": os.path.join(scratch, "cuda"),
            "TRITON_CACHE_MANAGER": "kernelopt_core.sandbox.triton_cache:ReadThroughCacheManager",
            "KERNELOPT_SHARED_TRITON_CACHE": _triton_cache_dir(), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
            # Inductor compiles in the target itself: no pool of compile workers to start and end under the tool
            "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def run_target(tool: str, target: SanitizerTarget, timeout_s: float = 600.0,
               gate: DeviceGate | None = None) -> SanitizerRun:
    """One sanitizer tool over ``target``, from the worker; only the candidate's renamed kernels are instrumented.
    ``gate``: a staged target (it was given ``--go``): the time limit and the run's seconds start when it opens."""
    sanitizer = find_sanitizer()
    if sanitizer is None:
        return SanitizerRun(tool, False, None, 0.0, "compute-sanitizer was not found (set KERNELOPT_COMPUTE_SANITIZER)")
    scratch = tempfile.mkdtemp(prefix="kernelopt-sanitize-", dir=worker_scratch())
    # Only the target itself is instrumented: a process it starts (a compile worker) is trusted code.
    command = [sanitizer, "--tool", tool, "--print-limit", "20", "--target-processes", "application-only",
               "--kernel-name", f"kns={CHECKED_SUFFIX}", sys.executable, "-m", target.module, *target.args,
               "--scratch", scratch]
    begin = time.monotonic()
    launched = time.time()
    try:
        # In the worker's process group and ending with the worker (process_lifetime); the target
        # under it watches the worker too.
        process = start_owned(owned_command(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_target_env(scratch, _worker_inductor_cache()))
    except OSError as exc:  # a sanitizer that cannot be started: a note, as a missing one
        shutil.rmtree(scratch, ignore_errors=True)
        return SanitizerRun(tool, False, None, 0.0, f"compute-sanitizer could not start: {exc}")
    _LIVE.add(process.pid)
    try:
        if gate is not None:
            gate.opened.wait()
            if gate.cancelled:
                end_tree(process.pid)
                process.communicate()
                return SanitizerRun(tool, False, None, 0.0, "not run: the finalist's gates ended before it")
            begin = time.monotonic()
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            end_tree(process.pid)  # the sanitizer and its target
            stdout, stderr = process.communicate()
            steps = steps_line((stdout or "") + "\n" + (stderr or ""))
            return SanitizerRun(tool, False, None, time.monotonic() - begin, f"did not finish within {timeout_s:g} s"
                                + (f" (steps done: {steps})" if steps else " (no step done)"), steps=steps)
        seconds = time.monotonic() - begin
    finally:
        _LIVE.discard(process.pid)
        shutil.rmtree(scratch, ignore_errors=True)
    text = with_start_and_exit((stdout or "") + "\n" + (stderr or ""), launched, time.time())
    return read_report(tool, text, process.returncode, seconds)


_CLOCK = re.compile(r"^SANITIZE-CLOCK (started|done) ([0-9.]+)$", re.MULTILINE)


def with_start_and_exit(text: str, launched: float, ended: float) -> str:
    """The target's printout with two more steps: from the tool's start to the target's first line (the tool
    starting Python, Python starting), and from its last line to the tool's end (teardown, the tool's report),
    read from the wall clock the target printed (``SANITIZE-CLOCK``). Unchanged where it printed none."""
    clocks = dict(_CLOCK.findall(text))
    if "started" in clocks:
        text = f"SANITIZE-STEP start_the_tool_and_python {max(0.0, float(clocks['started']) - launched):.2f}\n" + text
    if "done" in clocks:
        text += f"\nSANITIZE-STEP exit_and_report {max(0.0, ended - float(clocks['done'])):.2f}\n"
    return text


def read_report(tool: str, text: str, returncode: int | None, seconds: float) -> SanitizerRun:
    """A finished tool's run from what it and its target printed."""
    match = _RACE_SUMMARY.search(text) if tool == "racecheck" else None
    match = match or _SUMMARY.search(text)
    problems = [line.strip() for line in text.splitlines()
                if line.startswith("=========") and "SUMMARY" not in line
                and any(w in line for w in ("Invalid", "Hazard", "hazard", "Error", "out of bounds", "Race"))]
    # The target's own allocations that failed: the check could not run, no error of the candidate's.
    out_of_memory = [line for line in problems if _OUT_OF_MEMORY.search(line)]
    problems = [line for line in problems if line not in out_of_memory]
    tail = " | ".join(line.strip() for line in text.strip().splitlines()[-4:])
    target_oom = bool(out_of_memory) or "OutOfMemoryError" in text or "out of memory" in text
    if match is None:
        return SanitizerRun(tool, False, None, seconds, f"no summary (exit {returncode}): {tail[-500:]}",
                            steps=steps_line(text), out_of_memory=target_oom)
    errors = int(match.group(1)) - len(out_of_memory)
    if out_of_memory and errors <= 0:
        return SanitizerRun(tool, False, None, seconds, f"out of device memory: {out_of_memory[0][:300]}",
                            steps=steps_line(text), out_of_memory=True)
    if "SANITIZE-TARGET-OK" not in text and errors <= 0:
        return SanitizerRun(tool, False, None, seconds, f"the launch did not complete: {tail[-500:]}",
                            steps=steps_line(text), out_of_memory=target_oom)
    return SanitizerRun(tool, True, errors, seconds, "; ".join(problems[:5]) if problems else "no errors",
                        steps=steps_line(text))


class Steps:
    """Prints when each step of the target ends (read back by :func:`steps_line`, even after a timeout)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        print(f"SANITIZE-STEP {name} {now - self.last:.2f}", flush=True)
        self.last = now


def main(argv: list[str] | None = None) -> int:
    """Under the sanitizer: capture the launch (trusted code), contain ourselves, run the candidate."""
    parser = argparse.ArgumentParser(prog="kernelopt-sanitize-target")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--restitched", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--go", help="a staged start: wait for this file before taking the device")
    print(f"SANITIZE-CLOCK started {time.time():.3f}", flush=True)
    args = parser.parse_args(argv)
    die_with_owner()  # its parent is compute-sanitizer: it watches the worker that started both
    steps = Steps()
    import torch

    from ..artifacts import parse_output_code
    from ..graph_module import load_graph_module, make_inputs
    from ..launchers import is_launcher_source, load_launcher
    from ..sandbox.policy import SandboxPolicy, apply_policy
    from .launch_capture import capture_launches, clone_value

    torch.cuda.set_device(torch.device(args.device))
    torch.empty(1, device=args.device)  # the CUDA context, timed apart from the graph
    steps.done("import_torch_and_start_cuda")
    own_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if os.environ.get(BASELINE_CACHE_ENV):  # the worker's tuned baseline: read, not tuned again under the tool
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.environ[BASELINE_CACHE_ENV]
    baseline = load_graph_module(args.graph, args.device)
    steps.done("load_the_graph")
    if args.go:  # the work beside it holds the device until gate 3 opens the gate
        while not os.path.exists(args.go):
            time.sleep(0.02)
        steps.done("wait_for_the_device")
    launches, _ = capture_launches(baseline, [args.kernel], make_inputs(baseline, seed=0), limit=1)
    steps.done("capture_the_launch")
    if not launches:
        print(f"{args.kernel} was not launched", file=sys.stderr)
        return 3
    source = parse_output_code(args.restitched).kernel(args.kernel)
    assert source is not None
    if own_cache:  # the candidate's caches go to scratch, as its contained processes' do
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = own_cache
    apply_policy(SandboxPolicy(scratch=args.scratch))
    checked, renames = checked_source(source.source)
    if not renames:
        print(f"the candidate for {args.kernel} has no @triton.jit function to check", file=sys.stderr)
        return 3
    if is_launcher_source(checked, args.kernel):
        kernel: Any = load_launcher(args.kernel, checked, "cuda", directory=os.path.join(args.scratch, "launchers"))
        runs = [kernel]
    else:
        from torch._inductor.async_compile import AsyncCompile

        kernel = AsyncCompile().triton(renames.get(args.kernel, args.kernel), checked, "cuda")
        kernel = kernel.result() if hasattr(kernel, "result") else kernel
        runs = _one_launcher_each(kernel)
    steps.done("compile_the_candidate")
    launch = launches[0]
    for run in runs:
        values = [clone_value(v) for v in launch.args]
        run.run(*values, **launch.kwargs)
        torch.cuda.synchronize()
        del values
    steps.done(f"launch_{len(runs)}_config{'s' if len(runs) != 1 else ''}")
    print("SANITIZE-TARGET-OK")
    print(f"SANITIZE-CLOCK done {time.time():.3f}", flush=True)
    return 0


def _one_launcher_each(kernel: Any) -> list[Any]:
    """Inductor's kernel once per config: the same kernel object, its launchers cut to one config at a
    time (so ``run`` launches that config instead of autotuning; Inductor's kernels cannot be copied
    once their launchers exist). The kernel alone where its launchers cannot be listed."""
    if hasattr(kernel, "precompile") and not getattr(kernel, "launchers", None):
        kernel.precompile()
    launchers = list(getattr(kernel, "launchers", None) or [])
    if isinstance(getattr(kernel, "inductor_meta", None), dict):  # no coordinate-descent tuning either
        kernel.inductor_meta = {**kernel.inductor_meta, "coordinate_descent_tuning": False}
    if len(launchers) <= 1:
        return [kernel]
    return [_OneConfig(kernel, launcher) for launcher in launchers]


class _OneConfig:
    """Runs ``kernel`` with ``launcher`` as its only config."""

    def __init__(self, kernel: Any, launcher: Any) -> None:
        self.kernel, self.launcher = kernel, launcher

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.kernel.launchers = [self.launcher]
        if hasattr(self.kernel, "_cached_launcher"):
            self.kernel._cached_launcher = None
        return self.kernel.run(*args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
