"""The worker process's main loop: ``python -m kernelopt_core.measure.worker_main --device D ...``.

Runs only inside the worker subprocess (it imports torch at start-up). It reads one JSON request
per line from ``--request-fd`` and answers one JSON line per task on ``--response-fd``. Its own
stdout is pointed at stderr before anything runs, so no task output can corrupt the protocol.
It ends with its owner (:mod:`kernelopt_core.process_lifetime`): the parent-death signal, a
watch on the owner, and the end of the request pipe, even in the middle of a task.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import os
import queue
import sys
import threading
import traceback
from typing import Any

from ..process_lifetime import die_with_owner, end_self
from .allocator_census import TaskMemoryLog, start_history
from .task_context import DEVICE_ENV, RECYCLE_KEY

_FAILURE_KINDS = {"timeout", "crash", "oom", "cuda_error", "cancelled", "error"}
_CUDA_ERROR_MARKERS = ("CUDA error", "illegal memory access", "CUDA_ERROR", "cudaError",
                       "device-side assert", "unspecified launch failure")


def _write(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _set_up_device(device: str) -> str:
    """Prepare the device; returns the device this worker owns ("auto" resolved)."""
    if device == "cpu":
        from ..backends import cpu_triton

        cpu_triton.activate()  # before anything imports triton
        return "cpu"
    import torch  # triton is not imported by torch itself, so the CPU backend can still follow

    if device == "auto":
        if torch.cuda.is_available():
            index = torch.cuda.current_device()
            torch.cuda.set_device(index)
            return f"cuda:{index}"
        from ..backends import cpu_triton

        cpu_triton.activate()
        return "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {device!r} requested but torch sees no CUDA device")
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        torch.cuda.set_device(index)
        return f"cuda:{index}"
    raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or auto")


def _resolve(task: str) -> Any:
    module_name, sep, function_name = task.partition(":")
    if not sep or not module_name or not function_name:
        raise ValueError(f"a task is 'package.module:function', got {task!r}")
    module = importlib.import_module(module_name)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise AttributeError(f"{module_name} has no callable {function_name!r}")
    return function


def _classify(exc: BaseException) -> str:
    declared = getattr(exc, "failure_kind", None)  # a task may say what went wrong
    if declared in _FAILURE_KINDS:
        return str(declared)
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return "oom"
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in _CUDA_ERROR_MARKERS):
        return "cuda_error"
    return "error"


def _after_oom() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - best effort
            pass


def _run_task(request: dict[str, Any]) -> dict[str, Any]:
    task_id = request.get("id")
    task = str(request.get("task", ""))
    # In the stderr tail of a crash report (and echoed with KERNELOPT_WORKER_ECHO=1): what was running.
    sys.stderr.write(f"kernelopt worker: task {task_id} starts: {task}\n")
    try:
        function = _resolve(task)
        value = function(request.get("payload") or {})
        text = json.dumps(value)  # must be JSON-able; checked here, where the traceback makes sense
        reply: dict[str, Any] = {"id": task_id, "ok": True, "value": json.loads(text)}
        if isinstance(value, dict) and value.get(RECYCLE_KEY):
            reply["recycle"] = str(value[RECYCLE_KEY])  # the result stands; this process should not go on
        return reply
    except BaseException as exc:  # noqa: BLE001 - report everything; SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        kind = _classify(exc)
        if isinstance(exc, (TypeError, ValueError)) and "JSON serializable" in str(exc):
            message = f"{task} returned a value that is not JSON-serializable: {exc}"
        else:
            message = f"{type(exc).__name__}: {exc}"
        if kind == "oom":
            _after_oom()
        return {"id": task_id, "ok": False, "kind": kind, "message": message,
                "traceback": traceback.format_exc(), "poisoned": kind == "cuda_error"}


class _Requests:
    """Reads the request pipe on a thread of its own, so that its end is seen even while a task runs.

    The caller holds the pipe's write end: end of file means it closed the pipe or is gone. Idle,
    the main loop then returns (an orderly exit). Mid-task nobody waits for the answer any more,
    and the task may hold the device for minutes: the worker ends at once, with its children.
    """

    def __init__(self, fd: int):
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._busy = False
        self._closed = False
        self._stream = os.fdopen(fd, "rb", buffering=0)
        threading.Thread(target=self._read, name="kernelopt-requests", daemon=True).start()

    def _read(self) -> None:
        for raw in iter(self._stream.readline, b""):
            self._lines.put(raw)
        self._closed = True
        self._lines.put(None)
        if self._busy:
            _end_mid_task()

    def next(self) -> bytes | None:
        return self._lines.get()

    def job_starts(self) -> None:
        self._busy = True
        if self._closed:  # closed just before: the caller sent the task and then gave up on it
            _end_mid_task()

    def job_ended(self) -> None:
        self._busy = False


def _end_mid_task() -> None:
    sys.stderr.write("kernelopt worker: the request pipe closed during a task; ending now\n")
    end_self()


def main(argv: list[str] | None = None) -> int:
    die_with_owner()  # the parent-death signal, and a watch on the owner
    parser = argparse.ArgumentParser(prog="kernelopt-worker")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--request-fd", type=int, required=True)
    parser.add_argument("--response-fd", type=int, required=True)
    args = parser.parse_args(argv)
    os.dup2(2, 1)  # anything written to fd 1 (print, C printf) lands in stderr
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr)  # a segfault leaves a Python traceback in the stderr tail
    response_fd = args.response_fd
    try:
        device = _set_up_device(args.device)
    except Exception as exc:  # noqa: BLE001 - tell the parent why, then stop
        _write(response_fd, {"startup_error": f"{type(exc).__name__}: {exc}"})
        return 3
    os.environ[DEVICE_ENV] = device
    start_history(device)  # only with KERNELOPT_MEMORY_HISTORY set: where retained memory came from
    memory_log = TaskMemoryLog.from_env(device)
    _write(response_fd, {"ready": True, "pid": os.getpid(), "device": device})
    requests = _Requests(args.request_fd)
    while (raw := requests.next()) is not None:
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if request.get("shutdown"):
            break
        requests.job_starts()
        before = memory_log.allocated() if memory_log else 0
        reply = _run_task(request)
        if memory_log:
            try:
                memory_log.record(str(request.get("task", "")), before)
            except Exception as exc:  # noqa: BLE001 - a diagnosis never fails the task it follows
                sys.stderr.write(f"kernelopt worker: memory log: {type(exc).__name__}: {exc}\n")
        requests.job_ended()
        _write(response_fd, reply)
        if reply.get("poisoned"):
            return 4  # a faulted CUDA context cannot run another task
    return 0


if __name__ == "__main__":
    sys.exit(main())
