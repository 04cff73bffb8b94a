"""Run one problem in its own subprocess: stream its progress, enforce its time limit, survive its crash.

The subprocess (``python -m kernelopt_core.bench.problem_job``) writes the result file itself, and
plans its search against the problem's budget (``--timeout``). When it dies (a segfault, an
out-of-memory kill) its whole process group is killed (the optimizer's own workers included) and
an error result is written in its place, naming the last stage it reported. When it runs past its
budget and a grace period (the backstop: :meth:`CampaignConfig.grace_s`), it is killed the same way,
and a problem that had reached the optimizer keeps what the run had verified, labelled "budget
reached" (:mod:`.salvage`); one killed earlier is an error (timeout). Its stderr and any stray stdout
go to ``<out>/logs/<name>.log``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from ..atomic_files import write_json_atomic
from ..events import EventSink, parse_event_line
from .child_output import stdout_lines
from .config import CampaignConfig
from .results import ProblemResult, load_result, partial_path, result_path, write_result
from .salvage import salvage
from .suite import ProblemSpec

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOG_TAIL_LINES = 15


@dataclass
class Slot:
    """Where a problem runs: the device string inside its process, and the environment that pins it."""

    device: str  # "cpu" or "cuda:0" (the one GPU the process can see)
    visible_gpu: str | None = None  # CUDA_VISIBLE_DEVICES for the process; None leaves it alone
    label: str = "cpu"
    cpu_threads: int | None = None  # parallel CPU slots share the cores instead of fighting over them

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


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the problem's process and every process it started (its session), by id."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def run_problem_process(spec: ProblemSpec, config: CampaignConfig, out_dir: str, slot: Slot,
                        sink: EventSink | None = None) -> ProblemResult:
    """Run ``spec`` in a fresh subprocess on ``slot``; always returns (and writes) a result."""
    sink = sink or EventSink()
    out_dir = os.path.abspath(out_dir)
    work_dir = os.path.join(out_dir, "work", _safe_name(spec.name))
    log_path = os.path.join(out_dir, "logs", _safe_name(spec.name) + ".log")
    os.makedirs(work_dir, exist_ok=True)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    payload = {"problem": spec.to_json(), "config": config.to_json(), "device": slot.device, "out_dir": out_dir,
               "work_dir": work_dir, "log_path": log_path, "gpu": slot.visible_gpu, "launched_at": time.time()}
    payload_path = os.path.join(work_dir, "payload.json")
    write_json_atomic(payload_path, payload)
    for stale in (result_path(out_dir, spec.name), partial_path(work_dir)):
        if os.path.exists(stale):
            os.unlink(stale)  # not resuming this one: a result from an earlier run must not pass for this one's
    started = time.perf_counter()
    last_stage = "setup"
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "kernelopt_core.bench.problem_job", payload_path],
                stdout=subprocess.PIPE, stderr=log, text=True, env=problem_environment(config, slot),
                start_new_session=True, cwd=work_dir,
            )
        except OSError as exc:
            return _failure(spec, config, out_dir, slot, log_path, "setup", f"could not start: {exc}", started)
        lines = stdout_lines(process, f"bench-{spec.name}")
        deadline = started + config.timeout_s + config.grace_s()  # the backstop: the search plans for timeout_s
        why: str | None = None
        while True:
            if sink.cancelled:
                why = "cancelled"
                break
            if time.perf_counter() > deadline:
                why = "timeout"
                break
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            event = parse_event_line(line.rstrip("\n"))
            if event is None:
                log.write(line)
                continue
            if event.get("event") == "progress":
                last_stage = str(event.get("stage") or last_stage)
                fields = {k: event[k] for k in ("iteration", "iterations", "best_speedup") if event.get(k) is not None}
                sink.progress(str(event.get("message", "")), stage=last_stage, problem=spec.name, slot=slot.label,
                              **fields)
        if why is None:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        _kill_group(process)  # also ends anything the problem left running in its process group
        log.flush()
    if why is None:
        result = load_result(out_dir, spec.name)
        if result is not None:
            return result
        code = process.returncode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        message = f"the problem's process {how} during {last_stage} without writing a result"
        return _failure(spec, config, out_dir, slot, log_path, "crash", message, started, last_stage)
    if why == "cancelled":
        return _failure(spec, config, out_dir, slot, log_path, "cancelled", "cancelled by the user", started,
                        last_stage)
    why = (f"stopped at the backstop, {config.grace_s():.0f} s after its {config.timeout_s:.0f} s budget, "
           f"during {last_stage}")
    kept = salvage(work_dir, why, time.perf_counter() - started)
    if kept is not None:
        kept.log_path, kept.gpu = log_path, slot.visible_gpu
        write_result(out_dir, kept)
        return kept
    message = (f"timed out after {config.timeout_s:.0f} s (and a {config.grace_s():.0f} s grace) during "
               f"{last_stage}")
    return _failure(spec, config, out_dir, slot, log_path, "timeout", message, started, last_stage)


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
