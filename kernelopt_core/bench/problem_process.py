"""Run one problem in its own subprocess: stream its progress, enforce its time limit, survive its crash.

The subprocess (``python -m kernelopt_core.bench.problem_main``) writes the result file itself, and
plans its search against the problem's budget (``--timeout``). When it dies (a segfault, an
out-of-memory kill) an error result is written in its place, naming the last stage it reported.
Past its budget and a grace period (:meth:`CampaignConfig.grace_s`) it is killed: a problem that had
reached the optimizer keeps what the run had verified, labelled "budget reached" (:mod:`.salvage`);
one killed earlier is an error (timeout). Its stderr and stray stdout go to ``<out>/logs/<name>.log``.
Nothing outlives the problem: its descendants are remembered by pid while it runs
(:mod:`kernelopt_core.process_lifetime`; the optimizer's worker runs in a session of its own), and
when it ends, however it ends, every one still running is ended with the groups and sessions it
leads, and the result names them. On a GPU slot the device memory is then checked against the
baseline read before the problem (:mod:`.device_memory`).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from ..atomic_files import write_json_atomic
from ..events import EventSink, parse_event_line
from ..measure import worker_scratch
from ..process_lifetime import ProcessInfo, ProcessTree, end_tree, start_owned
from .child_output import stdout_lines
from .config import CampaignConfig
from .device_memory import HELD_CATEGORY, DeviceMemoryGuard, MemoryCheck
from .results import ProblemResult, load_result, partial_path, result_path, write_result
from .salvage import salvage
from .suite import ProblemSpec

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOG_TAIL_LINES = 15
TREE_LOOK_S = 1.0  # how often the problem's descendants are looked up while it runs


@dataclass
class Slot:
    """Where a problem runs: the device string inside its process, and the environment that pins it."""

    device: str  # "cpu" or "cuda:0" (the one GPU the process can see)
    visible_gpu: str | None = None  # CUDA_VISIBLE_DEVICES for the process; None leaves it alone
    label: str = "cpu"
    cpu_threads: int | None = None  # parallel CPU slots share the cores instead of fighting over them
    # the device memory between this slot's problems (GPU slots); None: not watched
    memory: DeviceMemoryGuard | None = field(default=None, repr=False, compare=False)

    def environment(self) -> dict[str, str]:
        env = {"CUDA_VISIBLE_DEVICES": self.visible_gpu} if self.visible_gpu is not None else {}
        if self.cpu_threads:
            env["OMP_NUM_THREADS"] = str(self.cpu_threads)
        return env


def _safe_name(name: str) -> str:
    return name.replace("/", "__")


def problem_environment(config: CampaignConfig, slot: Slot) -> dict[str, str]:
    env = dict(os.environ)
    env.update(slot.environment())
    if config.scale:
        env["KERNELOPT_PROBLEM_SCALE"] = config.scale
    # a checkout that is not pip-installed still imports kernelopt_core in the subprocess
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).strip()
    except OSError:
        return ""


def run_problem_process(spec: ProblemSpec, config: CampaignConfig, out_dir: str, slot: Slot,
                        sink: EventSink | None = None, *, clock: Callable[[], float] = time.monotonic,
                        ) -> ProblemResult:
    """Run ``spec`` in a fresh subprocess on ``slot``; always returns (and writes) a result.
    ``clock`` measures the time limit (a stand-in in tests)."""
    sink = sink or EventSink()
    out_dir = os.path.abspath(out_dir)
    work_dir = os.path.join(out_dir, "work", _safe_name(spec.name))
    log_path = os.path.join(out_dir, "logs", _safe_name(spec.name) + ".log")
    os.makedirs(work_dir, exist_ok=True)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    for stale in (result_path(out_dir, spec.name), partial_path(work_dir)):
        if os.path.exists(stale):
            os.unlink(stale)  # not resuming this one: a result from an earlier run must not pass for this one's
    started = time.perf_counter()
    held = slot.memory.blocked() if slot.memory is not None else None
    if held is not None:
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(f"not run: {held}\n")
        return _failure(spec, config, out_dir, slot, log_path, HELD_CATEGORY, f"not run: {held}", started)
    baseline = slot.memory.baseline() if slot.memory is not None else None
    payload = {"problem": spec.to_json(), "config": config.to_json(), "device": slot.device, "out_dir": out_dir,
               "work_dir": work_dir, "log_path": log_path, "gpu": slot.visible_gpu, "launched_at": time.time()}
    payload_path = os.path.join(work_dir, "payload.json")
    write_json_atomic(payload_path, payload)
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            # Owned: it dies with the bench, even on a kill -9 (process_lifetime).
            process = start_owned(
                [sys.executable, "-m", "kernelopt_core.bench.problem_main", payload_path],
                stdout=subprocess.PIPE, stderr=log, text=True, env=problem_environment(config, slot),
                start_new_session=True, cwd=work_dir,
            )
        except OSError as exc:
            return _failure(spec, config, out_dir, slot, log_path, "setup", f"could not start: {exc}", started)
        tree = ProcessTree(process.pid)
        why, last_stage = _follow(process, tree, spec, config, slot, sink, log, clock)
        if why is None:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        # ended by itself: its children get a moment to follow it (their parent-death signal)
        ended = [info for info in tree.end(grace_s=2.0 if why is None else 0.0) if info.pid != process.pid]
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        worker_scratch.sweep()  # the temporary folders of the workers it owned, if it was killed
        log.flush()
    memory = slot.memory.after(baseline, tree.pids(), end_tree) if slot.memory is not None else None
    if why is None:
        result = load_result(out_dir, spec.name)
        if result is None:
            code = process.returncode
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            message = f"the problem's process {how} during {last_stage} without writing a result"
            result = _failure(spec, config, out_dir, slot, log_path, "crash", message, started, last_stage)
    elif why == "cancelled":
        result = _failure(spec, config, out_dir, slot, log_path, "cancelled", "cancelled by the user", started,
                          last_stage)
    else:
        result = _salvage_or_timeout(spec, config, out_dir, work_dir, slot, log_path, started, last_stage)
    _record_cleanup(result, ended, memory, ended_by_itself=why is None)
    write_result(out_dir, result)
    return result


def _salvage_or_timeout(spec: ProblemSpec, config: CampaignConfig, out_dir: str, work_dir: str, slot: Slot,
                        log_path: str, started: float, last_stage: str) -> ProblemResult:
    """Killed at the backstop: what the run had verified (labelled "budget reached"), else a timeout error."""
    why = (f"stopped at the backstop, {config.grace_s():.0f} s after its {config.timeout_s:.0f} s budget, "
           f"during {last_stage}")
    kept = salvage(work_dir, why, time.perf_counter() - started)
    if kept is not None:
        kept.log_path, kept.gpu = log_path, slot.visible_gpu
        return kept
    message = (f"timed out after {config.timeout_s:.0f} s (and a {config.grace_s():.0f} s grace) during "
               f"{last_stage}")
    return _failure(spec, config, out_dir, slot, log_path, "timeout", message, started, last_stage)


def _follow(process: subprocess.Popen[str], tree: ProcessTree, spec: ProblemSpec, config: CampaignConfig,
            slot: Slot, sink: EventSink, log: TextIO, clock: Callable[[], float]) -> tuple[str | None, str]:
    """Stream the problem's progress until it ends, times out or is cancelled, remembering its
    descendants as they appear. Returns (None, "timeout" or "cancelled"; the last stage reported)."""
    lines = stdout_lines(process, f"bench-{spec.name}")
    deadline = clock() + config.timeout_s + config.grace_s()  # the backstop: the search plans for timeout_s
    last_stage, looked = "setup", time.monotonic()
    while True:
        if sink.cancelled:
            return "cancelled", last_stage
        if clock() > deadline:
            return "timeout", last_stage
        if time.monotonic() - looked >= TREE_LOOK_S:
            tree.refresh()
            looked = time.monotonic()
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            return None, last_stage
        event = parse_event_line(line.rstrip("\n"))
        if event is None:
            log.write(line)
            continue
        if event.get("event") == "progress":
            last_stage = str(event.get("stage") or last_stage)
            fields = {k: event[k] for k in ("iteration", "iterations", "best_speedup") if event.get(k) is not None}
            sink.progress(str(event.get("message", "")), stage=last_stage, problem=spec.name, slot=slot.label,
                          **fields)


def _record_cleanup(result: ProblemResult, ended: list[ProcessInfo], memory: MemoryCheck | None,
                    ended_by_itself: bool) -> None:
    """What the bench had to end, and the device memory, into the result (and its notes)."""
    result.processes_ended = [info.describe() for info in ended]
    if ended and ended_by_itself:
        result.notes.append(f"the problem left {len(ended)} process(es) running; the bench ended them: "
                            + "; ".join(result.processes_ended))
    if memory is None:
        return
    result.device_memory = memory.to_json()
    if memory.ended:
        result.notes.append("processes of this problem still held GPU memory; the bench ended them: "
                            + "; ".join(memory.ended))
    if not memory.released:
        result.notes.append(f"GPU memory not back to its baseline after this problem: {memory.message()}; "
                            "the next problems on this GPU fail until it is")


def _failure(spec: ProblemSpec, config: CampaignConfig, out_dir: str, slot: Slot, log_path: str, category: str,
             message: str, started: float, stage: str | None = None) -> ProblemResult:
    tail = _tail(log_path)
    result = ProblemResult(
        name=spec.name, level=spec.level, path=spec.path, outcome="error", category=category,
        reason=message, stage=stage, device=slot.device, dtype=config.dtype,
        wall_s=round(time.perf_counter() - started, 3), log_path=log_path, gpu=slot.visible_gpu,
        error={"stage": stage or category, "type": category, "message": message, "traceback": tail or None},
    )
    write_result(out_dir, result)
    return result
