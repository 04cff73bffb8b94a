"""What every target's gate tasks share in the worker: verdicts, processes, exchange buffers, timing.

A gate task is a plain function from a JSON-able payload to a JSON-able reply, run in a worker
(``Worker.call("package.module:task", payload)``) or in-process (tests); torch is imported inside
the functions. The worker is the *checker*: it runs the original (a dump's graph, a user's kernel
and harness) and compares. A candidate is never imported here: it runs in a fresh contained
process (:mod:`kernelopt_core.sandbox`), one per candidate, kept for that candidate's gates 2-4
and closed before the next candidate starts; gate 2 may take the spare process started ahead of
time (:mod:`kernelopt_core.sandbox.spare`).

A gate task's payload is a :class:`..task_payload.GateRequest` (JSON on the wire, read back by
:func:`run_gate_task`) and its reply a :class:`..verdict.TaskReply`, serialized once on the way out:
"could not verify" when the check itself failed (out of memory, the candidate's process could not
start), never a rejection of the candidate; a setup error when the *original* cannot be loaded or run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ...payload_fields import PayloadError, PayloadReader
from ..task_payload import GateRequest, TaskTarget
from ..verdict import TaskReply

if TYPE_CHECKING:
    from ..registry import Gate, PerfSettings

T = TypeVar("T", bound=TaskTarget)
R = TypeVar("R")


class SetupError(Exception):
    """The original (graph, kernel or harness) cannot be loaded or run: the cascade cannot run."""


class CouldNotVerify(Exception):
    """The check itself failed; the candidate is neither passed nor rejected."""


def device_of(payload: dict[str, Any]) -> str:
    """A small task's ``device`` (the worker's when it names none)."""
    from ...measure.task_context import worker_device

    return PayloadReader(payload, "the task's payload").text("device", None) or worker_device()


def flavor(device: str) -> str:
    """The sandbox flavour, and the device string a kernel loads for: ``cuda`` or ``cpu``."""
    return "cuda" if device.startswith("cuda") else "cpu"


def verdict(passed: bool, reason: str, **numbers: Any) -> TaskReply:
    return TaskReply.verdict(passed, reason, **numbers)


def could_not_verify(reason: str, **numbers: Any) -> TaskReply:
    return TaskReply.unverified(reason, **numbers)


def is_oom(exc: BaseException) -> bool:
    return type(exc).__name__ == "OutOfMemoryError" or isinstance(exc, MemoryError) or \
        "out of memory" in str(exc).lower()


def run_gate_task(gate: Gate, task: Callable[[GateRequest[T, Any]], TaskReply], payload: dict[str, Any],
                  read_target: Callable[[PayloadReader], T], keep_sanitizer: Callable[[T], str] | None = None) -> \
        dict[str, Any]:
    """A gate's task at the process boundary: the payload read as the gate's request (``read_target``: the
    target's part; the gate's settings by its registered class), ``task`` run :func:`guarded`, and its reply
    serialized. A malformed payload is a "could not verify" that names the key, never a crash.
    ``keep_sanitizer``: the sanitizer run this task takes over (gate 3's, begun beside its gate 2)."""
    try:
        request: GateRequest[T, Any] = GateRequest.from_json(payload, read_target, gate.read_settings)
    except PayloadError as exc:
        return could_not_verify(f"gate {gate.number} ({gate.name}) got a malformed payload: {exc}").to_json()
    keep = keep_sanitizer(request.target) if keep_sanitizer is not None else None
    reply = guarded(lambda: task(request), request.device, keep_sanitizer=keep)
    return reply.to_json()


def guarded(work: Callable[[], R], device: str, keep_sanitizer: str | None = None) -> R | TaskReply:
    """``work()``, its setup errors, malformed payloads and the checker's own failures turned into replies."""
    from ..sanitize import settle_sanitizer

    # a sanitizer run left going by another finalist's gates ends first: nothing shares the device with it
    # (gate 3 keeps its own finalist's, begun beside its gate 2)
    settle_sanitizer(keep=keep_sanitizer)
    try:
        return work()
    except SetupError as exc:
        return TaskReply.setup_failure(str(exc))
    except CouldNotVerify as exc:
        return could_not_verify(str(exc))
    except PayloadError as exc:
        return could_not_verify(f"the task got a malformed payload: {exc}")
    except Exception as exc:  # noqa: BLE001 - the checker's own failure is never the candidate's
        if is_oom(exc):
            empty_cache(device)
            return could_not_verify(f"the check ran out of memory: {type(exc).__name__}: {str(exc)[:600]}",
                                    oom=True)
        raise


def reply_json(reply: dict[str, Any] | TaskReply) -> dict[str, Any]:
    """A task's JSON reply: its own record, or a :class:`TaskReply` (a setup error, a check that failed)."""
    return reply.to_json() if isinstance(reply, TaskReply) else reply


def empty_cache(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# --- the processes: the candidate's, and the baseline's for timing ------------------------------------


@dataclass
class SandboxSlot:
    """A contained process kept for one key (a candidate, a baseline), and what it has loaded: steps such
    as ``graph``, ``harness``, ``inputs``, and ``kernel:NAME`` for each kernel."""

    key: str
    process: Any
    how: dict[str, Any] | None = None  # from the spare or not, and the seconds getting it took
    loaded: set[str] = field(default_factory=set)
    tuned: dict[str, str] = field(default_factory=dict)  # per kernel: how its launch config was chosen


class ProcessHolder:
    """At most one kept process: asking for another key closes the one held first. ``keeps_autotuning``:
    a closed process's autotuning results are kept for the next process of its key (autotune_store.py)."""

    def __init__(self, keeps_autotuning: bool = False) -> None:
        self._lock = threading.Lock()
        self.slot: SandboxSlot | None = None
        self.keeps_autotuning = keeps_autotuning

    def get(self, key: str, start: Callable[[], SandboxSlot]) -> SandboxSlot:
        with self._lock:
            if self.slot is not None and self.slot.key == key and not self.slot.process.closed:
                return self.slot
            self._close_locked()
            self.slot = start()
            return self.slot

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            if self.keeps_autotuning and getattr(slot.process, "scratch", None):
                from ...measure.task_context import worker_scratch
                from ...sandbox.autotune_store import keep

                keep(slot.process.scratch, slot.key, worker_scratch())
            slot.process.close()


CANDIDATE = ProcessHolder(keeps_autotuning=True)  # the current candidate's process (one at a time per worker)
BASELINE = ProcessHolder()  # the original's timing process, kept per graph or harness


def candidate_slot(device: str, key: str, *, from_spare: bool = False, keep_spare: bool = False,
                   scratch_root: str | None = None) -> SandboxSlot:
    """This candidate's contained process (a fresh one; the previous candidate's is closed).

    ``from_spare`` (gate 2): the spare process is taken when one is ready, and with ``keep_spare``
    (the search's screens, where another candidate follows) the next spare is started at once.
    """
    from ...measure.task_context import worker_scratch
    from ...sandbox.autotune_store import restore
    from ...sandbox.process import SandboxError
    from ...sandbox.spare import take_process

    def start() -> SandboxSlot:
        try:
            taken = take_process(flavor(device), device, scratch_root, keep_spare=keep_spare, use_spare=from_spare)
        except SandboxError as exc:
            raise CouldNotVerify(f"the candidate's contained process could not start: {exc}") from exc
        how = taken.to_json()
        # what an earlier process of this candidate tuned (its screen's, for its final gates)
        how["autotuning_restored"] = restore(taken.process.scratch, key, worker_scratch())
        return SandboxSlot(key, taken.process, how)

    return CANDIDATE.get(key, start)


def baseline_slot(device: str, key: str, prepare: Callable[[Any], None] | None = None,
                  scratch_root: str | None = None) -> SandboxSlot:
    """The original's timing process for ``key``, timed the same way as the candidate's (kept per key);
    ``prepare`` loads what it needs into a fresh one (it raises :class:`SetupError` when it cannot)."""
    from ...sandbox.process import SandboxError, SandboxProcess

    def start() -> SandboxSlot:
        try:
            process = SandboxProcess.start(flavor(device), device, scratch_root)
        except SandboxError as exc:
            raise CouldNotVerify(f"the baseline's timing process: {exc}") from exc
        try:
            if prepare is not None:
                prepare(process)
        except SandboxError as exc:
            process.close()
            raise CouldNotVerify(f"the baseline's timing process: {exc}") from exc
        except BaseException:
            process.close()
            raise
        return SandboxSlot(key, process)

    return BASELINE.get(key, start)


def close_candidate(payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Task: end the current candidate's process (the cascade calls this when it is done), and the spare
    process too unless ``keep_spare`` (a screen that ended normally: the next candidate takes it)."""
    from ...sandbox.spare import close_spare

    CANDIDATE.close()
    if not PayloadReader(payload or {}, "close_candidate's payload").flag("keep_spare", False):
        close_spare()
    return {"closed": True}


def close_baselines(payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Task: end the baseline's timing process."""
    BASELINE.close()
    return {"closed": True}


def begin_spare(payload: dict[str, Any]) -> dict[str, Any]:
    """Task: start the spare candidate process now, unless one is kept or starting (the cascade asks before
    gate 1 of a screen, so that the first candidate's process starts while gate 1 compiles)."""
    from ...sandbox.spare import ensure_spare

    device = device_of(payload)
    scratch_root = PayloadReader(payload, "begin_spare's payload").text("scratch_root", None)
    return {"started": ensure_spare(flavor(device), device, scratch_root)}


def spare_candidate_status(payload: dict[str, Any]) -> dict[str, Any]:
    """Task: the spare candidate process's pid (None until it is ready) and state, for tests and reports."""
    from ...sandbox.spare import spare_status

    return spare_status()


def settle_spare() -> None:
    """Before timing: let a spare that is starting finish, so that its start-up does not share the machine."""
    from ...sandbox.spare import settle_spare as settle

    settle()


def containment(process: Any) -> dict[str, Any]:
    report = process.containment
    return {"pid": process.pid, "contained": report.contained, "filesystem": report.filesystem,
            "network": report.network}


def candidate_failure(reply: dict[str, Any], what: str) -> TaskReply:
    """The verdict for a failed request to the candidate's process: the candidate's fault, or the check's."""
    if reply.get("checker_error") or reply.get("oom"):
        return could_not_verify(f"{what}: the check failed ({reply.get('error')})", oom=bool(reply.get("oom")))
    return verdict(False, f"{what}: {reply.get('error')}", violation=bool(reply.get("violation")))


def candidate_inputs(slot: SandboxSlot, seeds: tuple[int, ...], what: str) -> TaskReply | None:
    """The candidate's process makes its input sets of ``seeds`` (once); the verdict when it cannot."""
    if "inputs" not in slot.loaded:
        reply = slot.process.call("make_inputs", seeds=list(seeds))
        if not reply.get("ok"):
            return candidate_failure(reply, f"{what} cannot make its inputs")
        slot.loaded.add("inputs")
    return None


def sandbox_failure(exc: Exception, what: str) -> TaskReply:
    """The verdict when the candidate's process timed out or crashed (the candidate's), or failed otherwise."""
    if getattr(exc, "kind", "error") in ("timeout", "crash"):
        return verdict(False, f"{what}: {exc}")
    return could_not_verify(f"{what}: {exc}")


def candidate_memory(process: Any, reset: bool = False) -> int | None:
    """The candidate process's own allocator peak (None on the CPU, or when it cannot answer)."""
    from ...sandbox.process import SandboxError

    if process.closed:
        return None
    try:
        reply = process.call("memory", timeout_s=30.0, reset=reset)
    except SandboxError:
        return None
    peak = reply.get("peak_bytes")
    return int(peak) if isinstance(peak, (int, float)) else None


def release_mappings(process: Any) -> None:
    """Ask a process to drop the exchange buffers it mapped. A CUDA buffer another process still maps
    cannot be freed (nor can it ever be, if that process is later killed), so this comes before the
    arena that allocated them closes."""
    from ...sandbox.process import SandboxError

    if process is None or process.closed:
        return
    try:
        process.call("release", timeout_s=30.0, buffers=True)
    except SandboxError:
        pass


# --- exchange buffers -----------------------------------------------------------------------------------


def share_inputs(arena: Any, inputs: list[Any], strict: bool = False,
                 copies: list[Any] | None = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """Copy inputs into exchange buffers: (refs, message arguments). A value that is neither a tensor nor a
    plain value crosses as its text, or, ``strict`` (a user's harness), cannot cross at all. ``copies``
    receives each input's copy in the buffers (a plain value as it is)."""
    import torch

    from ...sandbox.exchange import TensorView

    refs: list[dict[str, Any]] = []
    args: list[Any] = []
    for value in inputs:
        if not isinstance(value, torch.Tensor):
            plain = isinstance(value, (bool, int, float, str)) or value is None
            if not plain and strict:
                raise CouldNotVerify(f"a harness input of type {type(value).__name__} cannot cross to the "
                                     "candidate's process (inputs are tensors, numbers, strings or None)")
            args.append(value if plain else str(value))
            if copies is not None:
                copies.append(value)
            continue
        span = 1 + sum((s - 1) * st for s, st in zip(value.size(), value.stride(), strict=True)) if value.numel() else 1
        buffer, ref = arena.allocate(span * value.element_size())
        view = buffer[: span * value.element_size()].view(value.dtype).as_strided(value.size(), value.stride(), 0)
        view.copy_(value)
        if copies is not None:
            copies.append(view)
        refs.append(ref.to_json())
        args.append({"view": TensorView(len(refs) - 1, str(value.dtype), tuple(value.size()), tuple(value.stride()),
                                        0).to_json()})
    return refs, args


def share_inputs_strictly(arena: Any, inputs: list[Any], copies: list[Any] | None = None
                          ) -> tuple[list[dict[str, Any]], list[Any]]:
    return share_inputs(arena, inputs, strict=True, copies=copies)


def candidate_outputs(process: Any, reply: dict[str, Any]) -> list[Any]:
    """The outputs a candidate's process answered with, as views of the buffers it named in its scratch."""
    from ...sandbox.exchange import SharedRef, TensorView, open_shared, view_of

    refs = [SharedRef.from_json(r) for r in reply.get("refs", [])]
    for ref in refs:
        if ref.kind == "file" and not process.owns_path(ref.path):
            raise CouldNotVerify(f"the candidate process named an output file outside its scratch folder: {ref.path}")
    buffers = [open_shared(ref) for ref in refs]
    outputs: list[Any] = []
    for item in reply.get("outputs", []):
        if "view" in item:
            view = TensorView.from_json(item["view"])
            outputs.append(view_of(buffers[view.buffer], view))
        else:
            outputs.append(item.get("value"))
    return outputs


def time_kernel_pair(baseline: Any, candidate: Any, device: str, rounds: int | None, name: str, values: list[Any],
                     kwargs: dict[str, Any], share: Callable[..., Any] | None = None) -> tuple[Any, int]:
    """Kernel-alone A/B of two processes, each on its own copy of the launch's arguments in an exchange arena
    of its own: (the timing, the arenas' peak bytes).

    Never one buffer for both: a CUDA IPC buffer that two processes had mapped stayed allocated in the worker
    after both let go of it, and after both ended (measured: docs/gates.md, gate 2's memory; a buffer mapped
    by one process at a time is given back). A search's kernel timing lost one working set per
    candidate that way. Separate copies also keep a candidate that writes its inputs from touching the
    baseline's.

    ``values`` is consumed: the list is emptied once the first copy is made, and the second copy is made from
    the first, so that the worker holds two copies of a working set at a time, not three (a caller that
    keeps no other reference to the tensors frees them there)."""
    from ...sandbox.exchange import ExchangeArena
    from ...sandbox.process import settle_device_work
    from ..perf import time_processes

    share = share or share_inputs
    arenas = [ExchangeArena(device), ExchangeArena(device)]
    try:
        first: list[Any] = []  # the first copy, which the second is made from
        shared = [share(arenas[0], values, copies=first)]
        values.clear()
        shared.append(share(arenas[1], first))
        requests = [{"what": "kernel", "name": name, "refs": refs, "args": args, "kwargs": kwargs}
                    for refs, args in shared]
        settle_device_work()  # the copies are complete before another process reads them
        timing = time_processes(baseline, candidate, device, rounds, requests[0], path="kernel",
                                candidate_request=requests[1])
    finally:
        release_mappings(baseline)
        release_mappings(candidate)
        peak = sum(arena.peak_bytes for arena in arenas)
        for arena in arenas:
            arena.close()
    return timing, peak


# --- gate 3 ------------------------------------------------------------------------------------------


def sanitizer_rejection(sanitizer: Any, containment: dict[str, Any]) -> TaskReply | None:
    """Gate 3 rejects on compute-sanitizer's first error, before it compares any output."""
    if sanitizer.errors:
        return verdict(False, sanitizer.errors[0], sanitizer=sanitizer.runs, sanitizer_note=sanitizer.note,
                       containment=containment)
    return None


def model_numbers(checks: list[Any], tolerance: float, containment: dict[str, Any], sanitizer: Any) -> dict[str, Any]:
    """Gate 3's numbers over its seeds, with the worst float64-rule fallback's (None where none fell back)."""
    fallbacks = [c.fallback for c in checks if c.fallback is not None]
    worst = max(fallbacks, key=lambda d: (not d.passed, d.rho or 0.0, d.d_opt), default=None)
    return {"seeds": [c.to_json() for c in checks], "tolerance": tolerance,
            "max_abs_diff": max((c.max_abs_diff for c in checks), default=0.0), "containment": containment,
            "sanitizer": sanitizer.runs, "sanitizer_note": sanitizer.note,
            "d_ref": worst.d_ref if worst else None, "d_opt": worst.d_opt if worst else None,
            "rho": worst.rho if worst else None}


# --- gate 4 ------------------------------------------------------------------------------------------


def perf_gate(settings: PerfSettings, device: str, sides: Callable[[], tuple[SandboxSlot, SandboxSlot] | TaskReply],
              input_seeds: tuple[int, ...], path: str,
              kernel_speedups: Callable[[SandboxSlot, SandboxSlot], dict[str, float]]) -> TaskReply:
    """Gate 4: the original's and the candidate's processes (``sides`` loads them, or answers a verdict)
    timed on their own input sets along ``path``, then each kernel alone (reported, never decides)."""
    from ...sandbox.process import SandboxError
    from ..perf import perf_decision, time_processes

    settle_spare()  # a spare still starting would share the machine with the timing
    try:
        prepared = sides()
        if isinstance(prepared, TaskReply):
            return prepared
        baseline, candidate = prepared
        result = time_processes(baseline.process, candidate.process, device, settings.rounds,
                                {"what": "graph", "input_sets": list(input_seeds)}, path=path)
    except SandboxError as exc:
        return sandbox_failure(exc, "timing")
    except RuntimeError as exc:
        return verdict(False, f"timing failed: {str(exc)[:1000]}")
    finally:
        drop_input_sets(BASELINE.slot)  # before the kernels alone are timed: they need none
    decision = perf_decision(result.speedup, result.ci_low, result.ci_high, settings.min_speedup, result.path)
    speedups: dict[str, float] = {}
    notes: list[str] = []
    if settings.kernel_timing:
        try:
            speedups = kernel_speedups(baseline, candidate)
        except Exception as exc:  # noqa: BLE001 - reported, never decides
            notes.append(f"kernel-alone timing failed: {type(exc).__name__}: {exc}")
    note = "" if device.startswith("cuda") else " [CPU Triton interpreter wall-clock time, not GPU time]"
    memory = {}
    for label, side in (("baseline_process_peak_bytes", baseline), ("candidate_process_peak_bytes", candidate)):
        try:
            memory[label] = side.process.call("memory").get("peak_bytes")
        except SandboxError:
            memory[label] = None
    return verdict(decision.passed, decision.reason + note, memory=memory, speedup=result.speedup,
                   ci_low=result.ci_low, ci_high=result.ci_high, timing_path=result.path, rounds=result.rounds,
                   baseline_median_ms=result.a.median_ms, candidate_median_ms=result.b.median_ms,
                   min_speedup=settings.min_speedup, kernel_speedups=speedups, kernel_notes=notes, device=device,
                   timed_by="the checker's clock around requests to each side's own process",
                   containment=containment(candidate.process))


def drop_input_sets(baseline: SandboxSlot | None) -> None:
    """The baseline's timing process outlives gate 4 (the search's kernel timing goes on with it), but its
    graph input sets serve gate 4 alone: held on, they were three working sets the search's next kernel
    timings lacked (on the H100, softmax_long_rows' 6.4 GB input: every timing after an early finalist ran
    out of memory, docs/gates.md). The next finalist makes them again."""
    from ...sandbox.process import SandboxError

    if baseline is None or "inputs" not in baseline.loaded or baseline.process.closed:
        return
    baseline.loaded.discard("inputs")
    try:
        baseline.process.call("release", inputs=True)
    except SandboxError:  # a process that cannot answer is replaced when it is next asked for
        pass


__all__ = ["BASELINE", "CANDIDATE", "CouldNotVerify", "ProcessHolder", "SandboxSlot", "SetupError", "baseline_slot",
           "begin_spare", "candidate_failure", "candidate_inputs", "candidate_memory", "candidate_outputs", "candidate_slot",
           "close_baselines", "close_candidate", "containment", "could_not_verify", "device_of", "drop_input_sets", "flavor",
           "guarded", "is_oom", "model_numbers", "perf_gate", "release_mappings", "reply_json", "run_gate_task",
           "sandbox_failure", "sanitizer_rejection", "settle_spare", "share_inputs",
           "spare_candidate_status", "time_kernel_pair", "verdict"]
