"""The four-gate cascade: a candidate is accepted only through all four, else the graph falls
back to the compiler's own code.

1. static (this process, plus a Triton compile subprocess);
2. kernel correctness, 3. model-level correctness, 4. end-to-end speed (in a worker that owns
   the graph's device; a crash, hang or device fault there fails the gate, never the caller).

The candidate's re-stitched ``output_code.py`` is written to a work folder; the original dump is
never modified. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ..artifacts.model import CompiledGraph
from ..events import CancelledError, EventSink
from .restitch import RestitchError, write_restitched
from .static import run_static_gate
from .verdict import GATE2_BATTERIES, GATE_NAMES, CascadeConfig, CascadeResult, GateVerdict, acceptance

__all__ = ["CascadeSetupError", "gate2_battery", "run_cascade", "run_static_gate"]

_JOBS = "kernelopt_core.gates.jobs"


class CascadeSetupError(RuntimeError):
    """The cascade cannot run (unknown kernel, unreadable dump, no device for the graph).

    ``partial`` holds the verdicts reached before the problem showed (e.g. gate 1 when the
    graph's device is missing), or None.
    """

    def __init__(self, message: str, partial: CascadeResult | None = None):
        super().__init__(message)
        self.partial = partial


JobCaller = Callable[[str, dict[str, Any]], dict[str, Any]]


def run_cascade(graph: CompiledGraph, candidates: dict[str, str], config: CascadeConfig | None = None,
                sink: EventSink | None = None, worker: Any = None) -> CascadeResult:
    """Run the requested gates in order on ``candidates`` (kernel name -> kernel module source).

    ``worker`` is a :class:`kernelopt_core.measure.worker.Worker` for the graph's device; by
    default the shared worker of that device. Raises :class:`CascadeSetupError` when the check
    cannot run; a candidate that fails, crashes or hangs gets a verdict instead.
    """
    config = config or CascadeConfig()
    begin = time.monotonic()
    if not candidates:
        raise CascadeSetupError("no candidate kernels given")
    unknown = sorted(name for name in candidates if graph.kernel(name) is None)
    if unknown:
        known = ", ".join(k.name for k in graph.kernels) or "none"
        raise CascadeSetupError(f"{graph.path} has no Triton kernel named {', '.join(unknown)} (kernels: {known})")
    gates = tuple(sorted(set(config.run_gates)))
    if not gates or any(g not in GATE_NAMES for g in gates):
        raise CascadeSetupError(f"run_gates must be a subset of 1-4, got {config.run_gates}")
    if config.gate2_battery not in GATE2_BATTERIES:
        raise CascadeSetupError(f"gate2_battery must be one of {', '.join(GATE2_BATTERIES)}, got {config.gate2_battery!r}")
    device = _resolve_device(config.device, graph) if any(g > 1 for g in gates) else (config.device or "auto")
    result = CascadeResult(accepted=False, failed_gate=None, reason="", graph_path=os.path.abspath(graph.path),
                           kernels=sorted(candidates), device=device)
    path: str | None = None
    try:
        path, diff = write_restitched(graph, candidates, _candidate_dir(graph, candidates, config))
        result.restitched_path, result.diff = path, diff
    except UnicodeError as exc:  # the candidate's own text (e.g. a lone surrogate): gate 1 names it
        result.notes.append(f"the candidate cannot be written as UTF-8: {exc}")
    except (RestitchError, OSError) as exc:
        raise CascadeSetupError(str(exc)) from None
    call = _job_caller(device, worker, config, sink) if any(g > 1 for g in gates) else None
    if call is not None and config.spare_candidate and 1 in gates:
        ask_for_spare(call, device)
    ended = False  # the gates ran to a verdict (not an exception): only then may a spare process stay
    try:
        finished = _run_gates(gates, graph, candidates, config, path, device, call, sink, result, begin)
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


def _run_gates(gates: tuple[int, ...], graph: CompiledGraph, candidates: dict[str, str], config: CascadeConfig,
               path: str | None, device: str, call: JobCaller | None, sink: EventSink | None,
               result: CascadeResult, begin: float) -> bool:
    """The gates in order; True when all passed. Fills ``result`` as it goes."""
    compiled: list[dict[str, Any]] = [{}]  # gate 1's compile numbers, for the sanitizer's choice of tools
    for position, gate in enumerate(gates):
        if sink is not None:
            sink.check_cancelled()
            sink.progress(f"gate {gate} ({GATE_NAMES[gate]})", stage="gate", gate=gate,
                          percentage=int(100 * position / len(gates)))
        if gate == 1:
            verdict = _static_gate(graph, candidates, config)
        else:
            assert call is not None
            if path is None:
                raise CascadeSetupError("the re-stitched graph could not be written", partial=result)
            try:
                payload = {**_payload(gate, graph, candidates, path, device, config, gates), "compiled": compiled[0]}
                verdict = _worker_gate(gate, call, payload)
                if verdict.could_not_verify and verdict.numbers.get("oom") and config.retry_low_memory \
                        and not config.low_memory:
                    # The check's own copies did not fit: once more with fewer of them.
                    first = verdict.reason
                    verdict = _worker_gate(gate, call, {**payload, "low_memory": True})
                    verdict.numbers["retried_low_memory_after"] = first
            except CascadeSetupError as exc:
                result.seconds = time.monotonic() - begin
                raise CascadeSetupError(str(exc), partial=result) from None
        result.gates.append(verdict)
        if gate == 1:
            compiled[0] = {name: (verdict.numbers.get("kernels", {}).get(name, verdict.numbers) or {}).get("compile")
                           for name in candidates}
        _take_containment(result, verdict)
        if gate == 4:
            _take_perf_numbers(result, verdict)
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
    sanitized = verdict.numbers.get("sanitizer_note")
    if isinstance(sanitized, str) and "not checked" in sanitized and sanitized not in result.notes:
        result.notes.append(sanitized)  # on the CPU, or without compute-sanitizer: races were not checked
    containment = verdict.numbers.get("containment")
    if isinstance(containment, dict):
        result.containment = containment
        if not containment.get("contained"):
            note = (f"the candidate's process was only partly contained ({containment.get('filesystem')}; "
                    f"{containment.get('network')})")
            if note not in result.notes:
                result.notes.append(note)
    if verdict.numbers.get("violation") or verdict.numbers.get("compile", {}).get("violation"):
        result.quarantined = True


def ask_for_spare(call: JobCaller, device: str) -> None:
    """Have the worker start the spare candidate process now (a no-op when one is kept): gate 1 compiles in
    this process, and the candidate process gate 2 needs starts meanwhile instead of after it."""
    try:
        call("begin_spare", {"device": device})
    except CancelledError:
        raise
    except Exception:  # noqa: BLE001 - only a head start: gate 2 starts a process itself when there is no spare
        pass


def _close_candidate(call: JobCaller, keep_spare: bool = False) -> None:
    try:
        call("close_candidate", {"keep_spare": keep_spare})
    except Exception:  # noqa: BLE001 - closing is best effort; the next candidate closes it anyway
        pass


def _resolve_device(requested: str, graph: CompiledGraph) -> str:
    from ..measure.devices import DeviceMismatch, device_for_graph

    try:
        return device_for_graph(requested, graph.device, graph.name)
    except DeviceMismatch as exc:
        raise CascadeSetupError(str(exc)) from None


def _candidate_dir(graph: CompiledGraph, candidates: dict[str, str], config: CascadeConfig) -> str:
    root = config.workdir or os.path.join(tempfile.gettempdir(), "kernelopt-verify")
    digest = hashlib.sha256()
    digest.update(os.path.abspath(graph.path).encode())
    for name in sorted(candidates):
        digest.update(b"\0" + name.encode() + b"\0" + candidates[name].encode())
    return os.path.join(root, f"{graph.name}-{digest.hexdigest()[:12]}")


def _static_gate(graph: CompiledGraph, candidates: dict[str, str], config: CascadeConfig) -> GateVerdict:
    begin = time.monotonic()
    verdicts = {name: run_static_gate(graph, name, source, config.compile_timeout_s)
                for name, source in sorted(candidates.items())}
    failed = next((v for v in verdicts.values() if not v.passed), None)
    numbers = {"kernels": {name: v.numbers for name, v in verdicts.items()}}
    if len(verdicts) == 1:
        only = next(iter(verdicts.values()))
        numbers = {**only.numbers}
    reason = failed.reason if failed else "; ".join(v.reason for v in verdicts.values())
    return GateVerdict(1, "static", failed is None, reason, numbers, time.monotonic() - begin)


def gate2_battery(config: CascadeConfig, gates: tuple[int, ...]) -> str:
    """The battery gate 2 runs: the configured one, but always the full battery when the cascade goes on to
    gate 3 or 4 (no candidate reaches acceptance on the screen alone)."""
    return config.gate2_battery if max(gates) <= 2 else "full"


def _payload(gate: int, graph: CompiledGraph, candidates: dict[str, str], restitched: str, device: str,
             config: CascadeConfig, gates: tuple[int, ...]) -> dict[str, Any]:
    payload: dict[str, Any] = {"graph": os.path.abspath(graph.path), "restitched": restitched,
                               "kernels": sorted(candidates), "device": device, "sources": dict(candidates),
                               "low_memory": config.low_memory, "families": config.families,
                               "sanitize": config.sanitize, "sanitizer_timeout_s": config.sanitizer_timeout_s,
                               # A hung candidate is the candidate process's to lose, inside the job's time.
                               "run_timeout_s": max(1.0, 0.8 * config.job_timeout_s)}
    if gate == 2:
        payload.update(seeds=list(config.seeds_kernel), reruns=config.determinism_reruns,
                       battery=gate2_battery(config, gates), spare=config.spare_candidate)
    elif gate == 3:
        payload.update(seeds=list(config.seeds_model), tolerance=config.model_tolerance,
                       fx_graph_runnable=graph.fx_graph_runnable)
    elif gate == 4:
        payload.update(min_speedup=config.min_speedup, rounds=config.ab_rounds, kernel_timing=config.kernel_timing)
    return payload


def _job_caller(device: str, worker: Any, config: CascadeConfig, sink: EventSink | None) -> JobCaller:
    if worker == "in-process":  # tests and debugging: run the jobs in this process
        from . import jobs

        return lambda job, payload: getattr(jobs, job)(payload)
    if worker is None:
        from ..measure.worker import get_worker

        worker = get_worker(device)
    cancel = sink.cancel_event if sink is not None else None

    def call(job: str, payload: dict[str, Any]) -> dict[str, Any]:
        outcome = worker.call(f"{_JOBS}:{job}", payload, timeout_s=config.job_timeout_s, cancel=cancel)
        if outcome.ok:
            return outcome.value if isinstance(outcome.value, dict) else {"passed": False, "reason": "bad reply"}
        failure = outcome.failure
        if failure is not None and failure.kind == "cancelled":
            raise CancelledError(failure.message)
        if failure is not None and ("failed to start" in failure.message or "did not start" in failure.message):
            raise CascadeSetupError(f"no worker for {device}: {failure.message.splitlines()[0]}")
        kind = failure.kind if failure else "error"
        message = failure.message if failure else "the job failed"
        numbers = {"failure": failure.to_json() if failure else None}
        if kind in ("oom", "error"):
            # The checker itself failed (the candidate runs in a process of its own): no verdict.
            what = "ran out of memory" if kind == "oom" else "failed"
            return {"passed": False, "could_not_verify": True, "reason": f"the check {what}: {message}",
                    "numbers": {**numbers, "oom": kind == "oom"}}
        what = {"timeout": "hung (ran past its time limit)", "crash": "crashed the worker",
                "cuda_error": "caused a device fault"}.get(kind, "failed")
        return {"passed": False, "reason": f"the check {what}: {message}", "numbers": numbers}

    return call


def _worker_gate(gate: int, call: JobCaller, payload: dict[str, Any]) -> GateVerdict:
    begin = time.monotonic()
    job = {2: "run_kernel_gate", 3: "run_model_gate", 4: "run_perf_gate"}[gate]
    reply = call(job, payload)
    if "setup_error" in reply:
        raise CascadeSetupError(str(reply["setup_error"]))
    return GateVerdict(gate, GATE_NAMES[gate], bool(reply.get("passed")), str(reply.get("reason", "")),
                       dict(reply.get("numbers") or {}), time.monotonic() - begin,
                       could_not_verify=bool(reply.get("could_not_verify")))


def _take_perf_numbers(result: CascadeResult, verdict: GateVerdict) -> None:
    numbers = verdict.numbers
    if numbers.get("speedup") is not None:
        result.speedup = float(numbers["speedup"])
        result.ci = (float(numbers["ci_low"]), float(numbers["ci_high"]))
        result.timing_path = numbers.get("timing_path")
    result.kernel_speedups = {str(k): float(v) for k, v in (numbers.get("kernel_speedups") or {}).items()}
