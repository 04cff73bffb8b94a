"""The four-gate cascade: a candidate is accepted only through all four, else the graph falls
back to the compiler's own code.

1. static (this process, plus a Triton compile subprocess);
2. kernel correctness, 3. model-level correctness, 4. end-to-end speed (in a worker that owns
   the graph's device; a crash, hang or device fault there fails the gate, never the caller).

The candidate's re-stitched ``output_code.py`` is written to a work folder; the original dump is
never modified. Nothing here imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..artifacts.model import CompiledGraph
from ..events import CancelledError, EventSink
from .cascade_target import (
    CascadeSetupError,
    CascadeTarget,
    GraphGates,
    TaskCaller,
    TaskFailed,
)
from .registry import GATE_NAMES, GATES, CommonSettings, Gate, acceptance, gate2_battery
from .static import run_static_gate
from .task_payload import GateRequest
from .verdict import GATE2_BATTERIES, CascadeConfig, CascadeResult, GateVerdict, TaskReply

__all__ = ["SHARED_TASKS", "CascadeSetupError", "CascadeTarget", "TaskCaller", "TaskFailed", "gate2_battery",
           "measurement_caller", "run_cascade", "run_static_gate", "task_caller"]

SHARED_TASKS = "kernelopt_core.gates.tasks.skeleton"  # every target's: the candidate's and the spare process


def run_cascade(target: CascadeTarget | CompiledGraph, candidates: dict[str, str], config: CascadeConfig | None = None,
                sink: EventSink | None = None, worker: Any = None, *, call: TaskCaller | None = None) -> CascadeResult:
    """Run the requested gates in order on ``candidates`` (kernel name -> kernel module source).

    ``target`` is what is verified (a dump's graph, or a :class:`.cascade_target.CascadeTarget`).
    ``worker`` is a :class:`kernelopt_core.measure.worker.Worker` for the target's device; by
    default the shared worker of that device (``call`` replaces the calls to it). Raises
    :class:`CascadeSetupError` when the check cannot run; a candidate that fails, crashes or hangs
    gets a verdict instead.
    """
    if isinstance(target, CompiledGraph):
        target = GraphGates(target)
    config = config or CascadeConfig()
    begin = time.monotonic()
    target.check(candidates)
    gates = tuple(sorted(set(config.run_gates)))
    if not gates or any(g not in GATE_NAMES for g in gates):
        raise CascadeSetupError(f"run_gates must be a subset of 1-4, got {config.run_gates}")
    if config.gate2_battery not in GATE2_BATTERIES:
        raise CascadeSetupError(f"gate2_battery must be one of {', '.join(GATE2_BATTERIES)}, got {config.gate2_battery!r}")
    device = target.resolve_device(config.device, gates)
    result = CascadeResult(accepted=False, failed_gate=None, reason="", graph_path=target.path,
                           kernels=sorted(candidates), device=device)
    written = target.write_candidate(candidates, config, result)
    if call is None and (any(GATES[g].task is not None for g in gates) or target.static_gate_uses_worker):
        call = task_caller(device, worker, config.job_timeout_s, sink)
    if call is not None and config.spare_candidate and 1 in gates and 2 in gates:
        ask_for_spare(call, device)
    ended = False  # the gates ran to a verdict (not an exception): only then may a spare process stay
    try:
        try:
            target.prepare(call, config)
            finished = _run_gates(target, gates, candidates, config, written, device, call, sink, result)
        except CascadeSetupError as exc:
            result.seconds = time.monotonic() - begin
            raise CascadeSetupError(str(exc), partial=result) from None
        ended = True
    finally:
        if call is not None and not (config.keep_candidate and result.failed_gate is None):
            _close_candidate(call, keep_spare=config.spare_candidate and ended)
    if finished:
        result.accepted = True
        result.reason, partial = acceptance(gates, config.passed_earlier)
        if partial:
            result.notes.append(partial)
    result.seconds = time.monotonic() - begin
    if sink is not None:
        sink.progress(result.reason, stage="gate", percentage=100, accepted=result.accepted)
    return result


def _run_gates(target: CascadeTarget, gates: tuple[int, ...], candidates: dict[str, str], config: CascadeConfig,
               written: str | None, device: str, call: TaskCaller | None, sink: EventSink | None,
               result: CascadeResult) -> bool:
    """The gates in order; True when all passed. Fills ``result`` as it goes."""
    # gate 1's compile numbers, for the sanitizer's choice of tools (a finalist's come from its screen)
    compiled: dict[str, Any] | None = dict(config.compiled or {})
    for position, gate in enumerate(gates):
        if sink is not None:
            sink.check_cancelled()
            sink.progress(f"gate {gate} ({GATE_NAMES[gate]})", stage="gate", gate=gate,
                          percentage=int(100 * position / len(gates)))
        kind = GATES[gate]
        if kind.task is None:  # gate 1, in this process
            verdict, compiled = target.static_gate(candidates, config)
        else:
            assert call is not None
            common = CommonSettings.of(config)
            request = GateRequest(target.gate_payload(candidates, written, device), common,
                                  kind.settings(config, gates), compiled)
            task = f"{target.tasks}:{kind.task}"
            verdict = _worker_gate(kind, call, task, request)
            if verdict.could_not_verify and verdict.oom and target.retry_low_memory \
                    and config.retry_low_memory and not config.low_memory:
                # The check's own copies did not fit: once more with fewer of them.
                first = verdict.reason
                smaller = replace(request, common=replace(common, low_memory=True))
                verdict = _worker_gate(kind, call, task, smaller)
                verdict.numbers["retried_low_memory_after"] = first
        result.gates.append(verdict)
        _take_containment(result, verdict)
        kind.take(result, verdict)
        if not verdict.passed:
            result.failed_gate = gate
            if verdict.could_not_verify:
                result.could_not_verify = True
                result.reason = f"gate {gate} ({verdict.name}) could not verify the candidate: {verdict.reason}"
            else:
                result.reason = f"gate {gate} ({verdict.name}) rejected the candidate: {verdict.reason}"
            return False
    return True


def _take_containment(result: CascadeResult, verdict: GateVerdict) -> None:
    sanitized = verdict.sanitizer_note
    if sanitized is not None and "not checked" in sanitized and sanitized not in result.notes:
        result.notes.append(sanitized)  # on the CPU, or without compute-sanitizer: races were not checked
    containment = verdict.containment
    if containment is not None:
        result.containment = containment
        if not containment.get("contained"):
            note = (f"the candidate's process was only partly contained ({containment.get('filesystem')}; "
                    f"{containment.get('network')})")
            if note not in result.notes:
                result.notes.append(note)
    if verdict.violation:
        result.quarantined = True


def ask_for_spare(call: TaskCaller, device: str) -> None:
    """Have the worker start the spare candidate process now (a no-op when one is kept): gate 1 compiles in
    this process, and the candidate process gate 2 needs starts meanwhile instead of after it."""
    try:
        call(f"{SHARED_TASKS}:begin_spare", {"device": device})
    except CancelledError:
        raise
    except Exception:  # noqa: BLE001 - only a head start: gate 2 starts a process itself when there is no spare
        pass


def _close_candidate(call: TaskCaller, keep_spare: bool = False) -> None:
    try:
        call(f"{SHARED_TASKS}:close_candidate", {"keep_spare": keep_spare})
    except Exception:  # noqa: BLE001 - closing is best effort; the next candidate closes it anyway
        pass


def task_caller(device: str, worker: Any, timeout_s: float, sink: EventSink | None) -> TaskCaller:
    """Call gate tasks in the device's worker (by default the shared one), or in this process
    (``worker="in-process"``: tests and debugging). A worker's failure becomes a verdict, or
    :class:`CascadeSetupError` when there is no worker."""
    return _caller(device, worker, timeout_s, sink, _failure_verdict)


def measurement_caller(device: str, worker: Any, timeout_s: float, sink: EventSink | None) -> TaskCaller:
    """Call worker tasks whose failure is no verdict on a candidate (facts, profiles, timings), in the device's
    worker or in this process (``worker="in-process"``): a failure raises :class:`TaskFailed`."""
    return _caller(device, worker, timeout_s, sink, _raise_failure)


def _caller(device: str, worker: Any, timeout_s: float, sink: EventSink | None,
            on_failure: Callable[[str, str, Any], dict[str, Any]]) -> TaskCaller:
    if worker == "in-process":
        return _call_in_process
    if worker is None:
        from ..measure.worker import get_worker

        worker = get_worker(device)
    cancel = sink.cancel_event if sink is not None else None

    def call(task: str, payload: dict[str, Any]) -> dict[str, Any]:
        outcome = worker.call(task, payload, timeout_s=timeout_s, cancel=cancel)
        if outcome.ok:
            return outcome.value if isinstance(outcome.value, dict) else TaskReply(False, "bad reply").to_json()
        return on_failure(task, device, outcome.failure)

    return call


def _failure_verdict(task: str, device: str, failure: Any) -> dict[str, Any]:
    """A gate task's failure in the worker: the check's (could not verify), or the candidate's (hung, crashed)."""
    if failure is not None and failure.kind == "cancelled":
        raise CancelledError(failure.message)
    if failure is not None and ("failed to start" in failure.message or "did not start" in failure.message):
        raise CascadeSetupError(f"no worker for {device}: {failure.message.splitlines()[0]}")
    kind = failure.kind if failure else "error"
    message = failure.message if failure else "the task failed"
    numbers = {"failure": failure.to_json() if failure else None}
    if kind in ("oom", "error"):
        # The checker itself failed (the candidate runs in a process of its own): no verdict.
        what = "ran out of memory" if kind == "oom" else "failed"
        return TaskReply.unverified(f"the check {what}: {message}", **numbers, oom=kind == "oom").to_json()
    what = {"timeout": "hung (ran past its time limit)", "crash": "crashed the worker",
            "cuda_error": "caused a device fault"}.get(kind, "failed")
    return TaskReply.verdict(False, f"the check {what}: {message}", **numbers).to_json()


def _raise_failure(task: str, device: str, failure: Any) -> dict[str, Any]:
    kind = failure.kind if failure else "error"
    if kind == "cancelled":
        raise CancelledError("cancelled by the user")
    raise TaskFailed(f"{task.rpartition(':')[2]} failed ({kind}): {failure.message if failure else ''}")


def _call_in_process(task: str, payload: dict[str, Any]) -> dict[str, Any]:
    import importlib

    module, _, function = task.partition(":")
    reply: dict[str, Any] = getattr(importlib.import_module(module), function)(payload)
    return reply


def _worker_gate(kind: Gate, call: TaskCaller, task: str, request: GateRequest[Any, Any]) -> GateVerdict:
    """The gate's task called with ``request`` (JSON across the boundary, typed on both sides)."""
    begin = time.monotonic()
    reply = TaskReply.from_json(call(task, request.to_json()))
    if reply.setup_error is not None:
        raise CascadeSetupError(reply.setup_error)
    return reply.to_verdict(kind.number, kind.name, time.monotonic() - begin)
