"""The worker: one subprocess that owns one device and runs tasks for the caller, one at a time.

All GPU work (loading a graph, timing, profiling, verifying) runs in a worker so that a
segfault, an illegal memory access, a hang or an out-of-memory error costs the caller one task,
never its own process. A task is ``"package.module:function"``; the function runs inside the
worker as ``function(payload) -> JSON-able``.

The protocol is line-delimited JSON over two pipes of their own (not stdin/stdout): whatever a
task prints, even from C code, goes to the worker's stderr, which is drained here and kept as a
tail for crash reports. Nothing in this module imports torch.
"""

from __future__ import annotations

import collections
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..process_lifetime import SharedProcesses, end_tree, start_owned
from . import worker_scratch
from .task_context import SCRATCH_ENV, SHARED_MEMORY_ENV

FailureKind = Literal["timeout", "crash", "oom", "cuda_error", "cancelled", "error"]
STARTUP_TIMEOUT_S = 300.0
_POLL_S = 0.05
_STDERR_TAIL_LINES = 200
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class TaskFailure:
    kind: FailureKind
    message: str
    traceback: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "traceback": self.traceback}


@dataclass
class TaskOutcome:
    ok: bool
    value: Any  # JSON-able return value of the task function when ok
    failure: TaskFailure | None
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "value": self.value, "wall_s": self.wall_s,
                "failure": self.failure.to_json() if self.failure else None}


class WorkerStartError(RuntimeError):
    """The worker process could not be started or did not report ready."""


class _Process:
    """One live worker subprocess and its pipes."""

    def __init__(self, device: str, python: str, env: dict[str, str] | None):
        request_read, self.request_write = os.pipe()
        self.response_read, response_write = os.pipe()
        child_env = {**os.environ, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, child_env.get("PYTHONPATH", "")) if p)
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        # Its temporary folders are made and removed here, so that a worker killed mid-task leaves
        # none; those of owners killed with kill -9 are swept.
        worker_scratch.sweep()
        self.scratch = worker_scratch.make()
        child_env[SCRATCH_ENV] = self.scratch[0]
        if len(self.scratch) > 1:
            child_env[SHARED_MEMORY_ENV] = self.scratch[1]
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        try:
            # Owned (process_lifetime): it dies with this process, whichever thread starts it.
            self.popen = start_owned(
                [python, "-m", "kernelopt_core.measure.worker_main", "--device", device,
                 "--request-fd", str(request_read), "--response-fd", str(response_write)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(request_read, response_write), env=child_env,
                start_new_session=True,  # its own process group, which ncu and compute-sanitizer join
            )
        except OSError as exc:
            for fd in (request_read, response_write, self.request_write, self.response_read):
                os.close(fd)
            self.remove_scratch()
            raise WorkerStartError(f"cannot start the worker with {python!r}: {exc}") from exc
        os.close(request_read)
        os.close(response_write)
        self._buffer = b""
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()
        self.killed_by_us = False
        self.ready: dict[str, Any] = {}

    def _drain_stderr(self) -> None:
        assert self.popen.stderr is not None
        echo = os.environ.get("KERNELOPT_WORKER_ECHO") == "1"
        for raw in iter(self.popen.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stderr_tail.append(line)
            if echo:
                sys.stderr.write(f"[worker {self.popen.pid}] {line}\n")

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self.request_write, view)
            view = view[written:]

    def read_line(self, wait_s: float) -> bytes | None:
        """A complete response line, b"" at end of file, or None if none came within ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.response_read], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.response_read, 1 << 16)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def kill(self) -> None:
        """End the worker and everything it started (its group, its zygotes and their candidates)."""
        self.killed_by_us = True
        end_tree(self.popen.pid)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.close_pipes()

    def close_requests(self) -> None:
        """End of file on the worker's request pipe: idle, it exits; mid-task, it ends at once."""
        if self.request_write >= 0:
            fd, self.request_write = self.request_write, -1
            os.close(fd)

    def close_pipes(self) -> None:
        self.close_requests()
        if self.response_read >= 0:
            fd, self.response_read = self.response_read, -1
            os.close(fd)
        self._drain.join(timeout=2)
        if self.popen.stderr is not None:
            self.popen.stderr.close()
        if self.popen.poll() is not None:
            self.remove_scratch()

    def remove_scratch(self) -> None:
        worker_scratch.remove(self.scratch)
        self.scratch = []

    def exit_description(self) -> str:
        code = self.popen.poll()
        if code is None:
            return "the worker stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = " (possibly the kernel's out-of-memory killer)" if -code == signal.SIGKILL else ""
            return f"the worker (pid {self.pid}) died from {name}{hint}"
        return f"the worker (pid {self.pid}) exited with status {code}"

    def stderr_text(self, lines: int = 40) -> str:
        self._drain.join(timeout=1)
        return "\n".join(list(self.stderr_tail)[-lines:])


class Worker:
    """One subprocess owning one device ("cpu" = CPU Triton backend, "cuda:N", or "auto").

    Tasks are serialized. A crashed or hung worker is killed and replaced on the next call;
    the caller keeps running.
    """

    def __init__(self, device: str = "cpu", python: str | None = None, env: dict[str, str] | None = None):
        self.device = device
        self.python = python or sys.executable
        self.env = dict(env or {})
        self._process: _Process | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._next_id = 0
        self.starts = 0  # worker processes started so far (a restart is any start after the first)
        self.resolved_device: str | None = None  # what "auto" became, once started
        self.recycled: list[str] = []  # workers replaced at a task's request, and why

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process and self._process.alive() else None

    def call(self, task: str, payload: dict[str, Any], timeout_s: float = 600.0,
             cancel: threading.Event | None = None) -> TaskOutcome:
        """Run ``task(payload)`` in the worker and wait for its result, failure, timeout or cancel.

        ``timeout_s`` counts from when the task is handed to a ready worker: starting a fresh
        worker (importing torch, activating the backend) has its own limit, STARTUP_TIMEOUT_S.
        """
        begin = time.monotonic()
        if cancel is not None and cancel.is_set():
            return _failed("cancelled", "cancelled before it started", begin)
        with self._lock:
            if cancel is not None and cancel.is_set():
                return _failed("cancelled", "cancelled before it started", begin)
            try:
                process = self._ensure_started(cancel)
            except WorkerStartError as exc:
                kind: FailureKind = "cancelled" if cancel is not None and cancel.is_set() else "crash"
                return _failed(kind, str(exc), begin)
            self._next_id += 1
            task_id = self._next_id
            try:
                process.send({"id": task_id, "task": task, "payload": payload})
            except (BrokenPipeError, OSError) as exc:
                self._discard()
                return _failed("crash", f"{process.exit_description()} before the task was sent: {exc}",
                               begin, process.stderr_text())
            except (TypeError, ValueError) as exc:  # payload not JSON-able: the worker is fine
                return _failed("error", f"the payload of {task} is not JSON-serializable: {exc}", begin)
            return self._await(process, task, task_id, begin, time.monotonic() + timeout_s, timeout_s, cancel)

    def _await(self, process: _Process, task: str, task_id: int, begin: float, deadline: float, timeout_s: float,
               cancel: threading.Event | None) -> TaskOutcome:
        while True:
            if cancel is not None and cancel.is_set():
                self._discard(kill=True)
                return _failed("cancelled", f"{task} was cancelled; its worker (pid {process.pid}) was "
                                            "killed and will be replaced", begin)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._discard(kill=True)
                return _failed("timeout", f"{task} ran past its {timeout_s:g} s limit; the worker "
                                          f"(pid {process.pid}) was killed and will be replaced",
                               begin, process.stderr_text())
            line = process.read_line(min(_POLL_S, remaining))
            if line is None:
                continue
            if line == b"":  # the pipe closed: the worker died mid-task
                process.popen.wait()
                description = process.exit_description()
                tail = process.stderr_text()
                self._discard()
                kind: FailureKind = "cuda_error" if _looks_like_cuda_error(tail) else "crash"
                return _failed(kind, f"{task} crashed: {description}", begin, tail)
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue  # not ours; the protocol fd only carries our lines, so this is defensive
            if message.get("id") != task_id:
                continue
            if message.get("ok"):
                if message.get("recycle"):  # the result stands; the next task gets a fresh worker
                    self.recycled.append(f"pid {process.pid} after {task}: {message['recycle']}")
                    self._discard(kill=True)
                return TaskOutcome(ok=True, value=message.get("value"), failure=None,
                                  wall_s=time.monotonic() - begin)
            kind = message.get("kind", "error")
            if kind == "cuda_error" or message.get("poisoned"):
                self._discard(kill=True)  # the CUDA context is unusable after a device fault
            return _failed(kind, message.get("message", "the task failed"), begin, message.get("traceback"))

    def _ensure_started(self, cancel: threading.Event | None) -> _Process:
        if self._process is not None and self._process.alive():
            return self._process
        if self._process is not None:
            self._discard()
        process = _Process(self.device, self.python, self.env)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if cancel is not None and cancel.is_set():
                process.kill()
                raise WorkerStartError("cancelled while the worker was starting")
            if self._closing.is_set():  # close() waits for this start: end it instead
                process.kill()
                raise WorkerStartError("the worker was closed while it was starting")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                process.kill()
                raise WorkerStartError(f"the worker for {self.device} did not start within {STARTUP_TIMEOUT_S:g} s")
            line = process.read_line(min(_POLL_S, remaining))
            if line is None:
                continue
            if line == b"":
                process.popen.wait()
                description = process.exit_description()
                tail = process.stderr_text()
                process.close_pipes()
                raise WorkerStartError(f"the worker for {self.device} failed to start: {description}\n{tail}")
            try:
                hello = json.loads(line)
            except json.JSONDecodeError:
                continue
            if hello.get("ready"):
                process.ready = hello
                self.resolved_device = hello.get("device", self.device)
                self._process = process
                self.starts += 1
                return process
            if "startup_error" in hello:
                process.kill()
                raise WorkerStartError(f"the worker for {self.device} failed to start: {hello['startup_error']}")

    def _discard(self, kill: bool = False) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if kill or process.alive():
            process.kill()
        else:
            process.close_pipes()

    def close(self) -> None:
        """Stop the worker: end of file on its requests, then by force."""
        self._closing.set()
        if not self._lock.acquire(timeout=1.0):
            # A task runs in another thread: end of file ends the worker mid-task, and that call
            # returns (a crash) instead of holding the lock until the task is done; a worker still
            # starting is ended by its start loop.
            running = self._process
            if running is not None:
                running.close_requests()
            self._lock.acquire()
        self._closing.clear()
        try:
            process, self._process = self._process, None
            if process is None:
                return
            if process.alive():
                process.close_requests()  # the worker exits, even from the middle of a task
                try:
                    process.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            if process.alive():
                process.kill()
            else:
                process.close_pipes()
        finally:
            self._lock.release()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(kind: FailureKind, message: str, begin: float, traceback: str | None = None) -> TaskOutcome:
    return TaskOutcome(ok=False, value=None, failure=TaskFailure(kind, message, traceback or None),
                      wall_s=time.monotonic() - begin)


_CUDA_ERROR_MARKERS = ("CUDA error", "illegal memory access", "CUDA_ERROR", "cudaError", "device-side assert")


def _looks_like_cuda_error(text: str | None) -> bool:
    return text is not None and any(marker in text for marker in _CUDA_ERROR_MARKERS)


_WORKERS: SharedProcesses[str, Worker] = SharedProcesses(Worker)


def get_worker(device: str) -> Worker:
    """The one shared worker for ``device`` in this process (started on its first call)."""
    return _WORKERS.get(device)


def close_all_workers() -> None:
    """Close every shared worker (also run at exit); call it before a fast ``os._exit``."""
    _WORKERS.close_all()

