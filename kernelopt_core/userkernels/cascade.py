"""The four gates for a user kernel candidate (the same gates, the same order, the same verdicts).

1. static: the user-kernel dialect (:mod:`.dialect`) and the compile for sm_90 (this process,
   plus a contained compile process);
2. kernel: the candidate against the original on the captured launch and on fresh seeds;
3. model: on a GPU, compute-sanitizer's memcheck and racecheck on the harness run with the
   candidate (each limited to ``config.sanitizer_timeout_s``, which the search sets from its
   budget); then the harness output with the candidate against the original's, by the float64
   rule where the harness runs in float64, else at the kernel tolerance;
4. perf: the harness timed on each side, through the ``harness`` path.

Gates 2-4 run as worker jobs (:mod:`.jobs`); the candidate runs in its own contained process.
The user's file is never written: the result carries the unified diff of the file with the
candidate in place. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ..events import CancelledError, EventSink
from ..gates.cascade import CascadeSetupError, ask_for_spare
from ..gates.verdict import GATE_NAMES, CascadeConfig, CascadeResult, GateVerdict, acceptance
from .dialect import candidate_configs, run_user_static_gate
from .target import UserKernelTarget

_JOBS = "kernelopt_core.userkernels.jobs"
JobCaller = Callable[[str, dict[str, Any]], dict[str, Any]]
_GATE_JOBS = {2: "run_user_kernel_gate", 3: "run_user_harness_gate", 4: "run_user_perf_gate"}


def job_caller(device: str, worker: Any, timeout_s: float, sink: EventSink | None) -> JobCaller:
    """Call a job of :mod:`.jobs` in the device's worker (or in this process: ``worker="in-process"``)."""
    if worker == "in-process":
        from . import jobs

        return lambda job, payload: getattr(jobs, job)(payload)
    if worker is None:
        from ..measure.worker import get_worker

        worker = get_worker(device)
    cancel = sink.cancel_event if sink is not None else None

    def call(job: str, payload: dict[str, Any]) -> dict[str, Any]:
        outcome = worker.call(f"{_JOBS}:{job}", payload, timeout_s=timeout_s, cancel=cancel)
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
            what = "ran out of memory" if kind == "oom" else "failed"
            return {"passed": False, "could_not_verify": True, "reason": f"the check {what}: {message}",
                    "numbers": {**numbers, "oom": kind == "oom"}}
        what = {"timeout": "hung (ran past its time limit)", "crash": "crashed the worker",
                "cuda_error": "caused a device fault"}.get(kind, "failed")
        return {"passed": False, "reason": f"the check {what}: {message}", "numbers": numbers}

    return call


def facts(target: UserKernelTarget, call: JobCaller, workdir: str) -> dict[str, Any]:
    """The captured launches of the target (raises CascadeSetupError when the harness cannot run)."""
    reply = call("user_kernel_facts", target.payload(workdir=workdir))
    if "setup_error" in reply:
        raise CascadeSetupError(str(reply["setup_error"]))
    return reply


def run_user_cascade(target: UserKernelTarget, candidate: str, config: CascadeConfig | None = None,
                     sink: EventSink | None = None, worker: Any = None, *, call: JobCaller | None = None,
                     plan: dict[str, Any] | None = None) -> CascadeResult:
    """Gates ``config.run_gates`` in order on one candidate kernel module of ``target``."""
    config = config or CascadeConfig()
    begin = time.monotonic()
    gates = tuple(sorted(set(config.run_gates)))
    if not gates or any(g not in GATE_NAMES for g in gates):
        raise CascadeSetupError(f"run_gates must be a subset of 1-4, got {config.run_gates}")
    workdir = _workdir(target, candidate, config)
    result = CascadeResult(accepted=False, failed_gate=None, reason="", graph_path=target.file,
                           kernels=[target.kernel], device=target.device)
    diff = target.diff(candidate)
    result.diff = diff or None
    if diff == "":
        result.notes.append(f"the candidate's {target.kernel} is the one in {os.path.basename(target.file)}: "
                            "no change, no diff")
    elif diff is None:
        result.notes.append("the candidate cannot be put into the file as a diff (see gate 1)")
    candidate_file = os.path.join(workdir, f"{target.kernel}.py")
    try:
        os.makedirs(workdir, exist_ok=True)
        with open(candidate_file, "w", encoding="utf-8") as handle:
            handle.write(candidate)
        result.restitched_path = candidate_file
    except (OSError, UnicodeError) as exc:
        result.notes.append(f"the candidate could not be written to {candidate_file}: {exc}")
    call = call or job_caller(target.device, worker, config.job_timeout_s, sink)
    payload = target.payload(candidate=candidate, candidate_configs=candidate_configs(candidate, target.kernel),
                             workdir=os.path.dirname(workdir), run_timeout_s=max(1.0, 0.8 * config.job_timeout_s))
    if config.spare_candidate and 1 in gates and 2 in gates:
        ask_for_spare(call, target.device)
    ended = False  # the gates ran to a verdict (not an exception): only then may a spare process stay
    try:
        if plan is None:
            plan = facts(target, call, payload["workdir"]).get("plan")
        finished = _run_gates(gates, target, candidate, payload, plan, config, call, sink, result, begin)
        ended = True
    except CascadeSetupError as exc:
        result.seconds = time.monotonic() - begin
        raise CascadeSetupError(str(exc), partial=result) from None
    finally:
        try:
            call("close_user_candidate", {"keep_spare": config.spare_candidate and ended})
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    if finished:
        result.accepted = True
        result.reason, partial = acceptance(gates, config.passed_earlier)
        if partial:
            result.notes.append(partial)
    result.seconds = time.monotonic() - begin
    if sink is not None:
        sink.progress(result.reason, stage="gate", percentage=100, accepted=result.accepted)
    return result


def _workdir(target: UserKernelTarget, candidate: str, config: CascadeConfig) -> str:
    root = config.workdir or os.path.join(tempfile.gettempdir(), f"kernelopt-verify-{os.getuid()}")
    digest = hashlib.sha256(f"{target.file}\0{target.kernel}\0{candidate}".encode()).hexdigest()[:12]
    return os.path.join(root, f"{target.name}-{digest}")


def _run_gates(gates: tuple[int, ...], target: UserKernelTarget, candidate: str, payload: dict[str, Any],
               plan: dict[str, Any] | None, config: CascadeConfig, call: JobCaller, sink: EventSink | None,
               result: CascadeResult, begin: float) -> bool:
    compiled: dict[str, Any] | None = None  # gate 1's compile numbers: the sanitizer's note reads its shared memory
    for position, gate in enumerate(gates):
        if sink is not None:
            sink.check_cancelled()
            sink.progress(f"gate {gate} ({GATE_NAMES[gate]})", stage="gate", gate=gate,
                          percentage=int(100 * position / len(gates)))
        if gate == 1:
            verdict = run_user_static_gate(target.module.source, target.kernel, candidate, plan,
                                           config.compile_timeout_s, device=target.device)
            compiled = verdict.numbers.get("compile") if isinstance(verdict.numbers.get("compile"), dict) else None
        else:
            job = {**payload, "seeds": list(config.seeds_kernel if gate == 2 else config.seeds_model),
                   "reruns": config.determinism_reruns, "tolerance": config.model_tolerance,
                   "rounds": config.ab_rounds, "min_speedup": config.min_speedup,
                   "kernel_timing": config.kernel_timing, "sanitize": config.sanitize,
                   "sanitizer_timeout_s": config.sanitizer_timeout_s, "compiled": compiled,
                   "spare": gate == 2 and config.spare_candidate}
            started = time.monotonic()
            reply = call(_GATE_JOBS[gate], job)
            if "setup_error" in reply:
                raise CascadeSetupError(str(reply["setup_error"]))
            verdict = GateVerdict(gate, GATE_NAMES[gate], bool(reply.get("passed")), str(reply.get("reason", "")),
                                  dict(reply.get("numbers") or {}), time.monotonic() - started,
                                  could_not_verify=bool(reply.get("could_not_verify")))
        result.gates.append(verdict)
        sanitized = verdict.numbers.get("sanitizer_note")
        if isinstance(sanitized, str) and "not checked" in sanitized and sanitized not in result.notes:
            result.notes.append(sanitized)
        containment = verdict.numbers.get("containment")
        if isinstance(containment, dict):
            result.containment = containment
            if not containment.get("contained"):
                note = (f"the candidate's process was only partly contained ({containment.get('filesystem')}; "
                        f"{containment.get('network')})")
                if note not in result.notes:
                    result.notes.append(note)
        if verdict.numbers.get("violation") or (verdict.numbers.get("compile") or {}).get("violation"):
            result.quarantined = True
        if gate == 4:
            numbers = verdict.numbers
            if numbers.get("speedup") is not None:
                result.speedup = float(numbers["speedup"])
                result.ci = (float(numbers["ci_low"]), float(numbers["ci_high"]))
                result.timing_path = numbers.get("timing_path")
            result.kernel_speedups = {str(k): float(v) for k, v in (numbers.get("kernel_speedups") or {}).items()}
        if not verdict.passed:
            result.failed_gate = gate
            if verdict.could_not_verify:
                result.could_not_verify = True
                result.reason = f"gate {gate} ({verdict.name}) could not verify the candidate: {verdict.reason}"
            else:
                result.reason = f"gate {gate} ({verdict.name}) rejected the candidate: {verdict.reason}"
            return False
    return True


__all__ = ["facts", "job_caller", "run_user_cascade"]
