"""The checker's handle on one candidate process: spawn, ask, time, kill.

``SandboxProcess.start(flavor, device, scratch_root)`` forks a fresh contained process from the
flavour's zygote and waits until it reports what containment holds. ``call(command, ...)`` sends
one JSON request and waits for its JSON reply (bounded size) within a timeout; a hang is killed, a
crash is named (the zygote reports how the child ended). ``timed_call`` measures a request on the
checker's own clock, so a candidate cannot misreport its time. Imports nothing heavy.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..measure.task_context import worker_scratch
from .policy import ContainmentReport, SandboxPolicy
from .zygote import Zygote, ZygoteError, shared_zygote

MAX_REPLY_BYTES = 64 << 20
CONNECT_TIMEOUT_S = 120.0


class SandboxError(RuntimeError):
    """The candidate process could not be started or stopped answering (``kind`` says how)."""

    def __init__(self, message: str, kind: str = "error"):
        super().__init__(message)
        self.kind = kind  # "start", "timeout", "crash", "cancelled"


def settle_device_work() -> None:
    """Wait for this process's queued GPU work (fills and copies of exchange buffers) to finish.

    CUDA copies and fills run asynchronously on this process's stream, while the candidate process
    works on its own context and stream: nothing orders the two. Without this wait, a candidate
    launched right after the checker poisons its outputs and copies in a 4 GB input can write its
    results first and have them overwritten by the fill still queued (seen on a GPU: correct
    kernels "left unwritten"). A no-op unless this process has already initialised CUDA.
    """
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        cuda.synchronize()


def _triton_cache_dir() -> str:
    from importlib import import_module

    try:
        knobs = import_module("triton.knobs")
        return str(knobs.cache.dir)
    except Exception:  # noqa: BLE001 - triton absent or old: its documented default
        return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


@dataclass
class SandboxProcess:
    pid: int
    flavor: str
    scratch: str
    connection: Any
    zygote: Zygote
    containment: ContainmentReport = field(default_factory=ContainmentReport)
    closed: bool = False

    @classmethod
    def start(cls, flavor: str, device: str, scratch_root: str | None = None, *,
              zygote: Zygote | None = None, timeout_s: float = CONNECT_TIMEOUT_S,
              cancel: threading.Event | None = None) -> SandboxProcess:
        """A fresh contained process; if the contained one dies before it can answer (a kernel or
        driver that refuses to run under the policy), a fresh process without the policy, whose
        report then says it is not contained and why (it still shares nothing with the checker or
        with another candidate)."""
        try:
            return cls._start(flavor, device, scratch_root, zygote=zygote, timeout_s=timeout_s, cancel=cancel)
        except SandboxError as exc:
            if exc.kind != "crash" or os.environ.get("KERNELOPT_REQUIRE_CONTAINMENT") == "1":
                raise
            reason = f"the contained process could not start ({str(exc)[:300]}); running uncontained"
            return cls._start(flavor, device, scratch_root, zygote=zygote, timeout_s=timeout_s, cancel=cancel,
                              contain=False, uncontained_reason=reason)

    @classmethod
    def _start(cls, flavor: str, device: str, scratch_root: str | None = None, *,
               zygote: Zygote | None = None, timeout_s: float = CONNECT_TIMEOUT_S,
               cancel: threading.Event | None = None, contain: bool = True,
               uncontained_reason: str | None = None) -> SandboxProcess:
        from multiprocessing.connection import Listener

        zygote = zygote or shared_zygote(flavor)
        root = scratch_root or worker_scratch() or tempfile.gettempdir()
        os.makedirs(root, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="candidate-", dir=root)
        address = os.path.join(scratch, "checker.sock")
        authkey = secrets.token_bytes(32)
        listener = Listener(address, family="AF_UNIX", authkey=authkey)
        env = {
            "TMPDIR": os.path.join(scratch, "tmp"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(scratch, "triton"),
            "TRITON_CACHE_MANAGER": "kernelopt_core.sandbox.triton_cache:ReadThroughCacheManager",
            "KERNELOPT_SHARED_TRITON_CACHE": _triton_cache_dir(),
            "KERNELOPT_LAUNCHER_DIR": os.path.join(scratch, "launchers"),
            "HOME": scratch,
        }
        for folder in ("tmp", "inductor", "triton", "launchers"):
            os.makedirs(os.path.join(scratch, folder), exist_ok=True)
        env["CUDA_CACHE_PATH"] = os.path.join(scratch, "cuda-cache")  # the driver's PTX cache, in scratch
        request = {"address": address, "authkey": authkey.hex(), "scratch": scratch, "device": device, "env": env,
                   "policy": SandboxPolicy(scratch=scratch).to_json(), "contain": contain,
                   "uncontained_reason": uncontained_reason}
        accepted: list[Any] = []

        def accept() -> None:
            try:
                accepted.append(listener.accept())
            except Exception as exc:  # noqa: BLE001 - closed by the timeout below
                accepted.append(exc)

        waiter = threading.Thread(target=accept, daemon=True)
        waiter.start()
        try:
            pid = zygote.spawn(request)
        except ZygoteError as exc:
            listener.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise SandboxError(str(exc), "start") from exc
        deadline = time.monotonic() + timeout_s
        while waiter.is_alive() and time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                break
            waiter.join(0.05)
        if waiter.is_alive() or not accepted or isinstance(accepted[0], BaseException):
            _kill(pid)
            listener.close()
            status = zygote.exit_status(pid, wait_s=1.0)
            shutil.rmtree(scratch, ignore_errors=True)
            kind = "cancelled" if cancel is not None and cancel.is_set() else "start"
            raise SandboxError(f"the candidate process (pid {pid}) did not connect"
                               + (f": it {status}" if status else ""), kind)
        listener.close()
        process = cls(pid=pid, flavor=flavor, scratch=scratch, connection=accepted[0], zygote=zygote)
        hello = process.call("hello", timeout_s=timeout_s)
        process.containment = ContainmentReport.from_json(hello.get("containment") or {})
        return process

    # --- requests --------------------------------------------------------------------------------

    def call(self, command: str, timeout_s: float = 600.0, cancel: threading.Event | None = None,
             **payload: Any) -> dict[str, Any]:
        reply, _ = self.timed_call(command, timeout_s=timeout_s, cancel=cancel, **payload)
        return reply

    def timed_call(self, command: str, timeout_s: float = 600.0, cancel: threading.Event | None = None,
                   **payload: Any) -> tuple[dict[str, Any], float]:
        """(reply, seconds on this process's clock from sending the request to its reply)."""
        if self.closed:
            raise SandboxError("the candidate process is closed", "crash")
        data = json.dumps({"command": command, **payload}).encode("utf-8")
        settle_device_work()  # the buffers this request names are complete before the other side reads them
        begin = time.perf_counter()
        try:
            self.connection.send_bytes(data)
        except (OSError, ValueError) as exc:
            raise self._died(f"before {command}", exc) from None
        deadline = time.monotonic() + timeout_s
        while True:
            if cancel is not None and cancel.is_set():
                self.kill()
                raise SandboxError(f"{command} was cancelled; the candidate process was killed", "cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise SandboxError(f"{command} ran past its {timeout_s:g} s limit; the candidate process "
                                   f"(pid {self.pid}) was killed", "timeout")
            try:
                ready = self.connection.poll(min(remaining, 0.05))
            except (OSError, ValueError) as exc:
                raise self._died(f"during {command}", exc) from None
            if ready:
                break
        try:
            raw = self.connection.recv_bytes(MAX_REPLY_BYTES)
        except (EOFError, OSError) as exc:
            raise self._died(f"during {command}", exc) from None
        seconds = time.perf_counter() - begin
        try:
            reply = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            raise SandboxError(f"the candidate process answered {command} with something that is not a reply",
                               "crash")
        return reply, seconds

    def _died(self, when: str, exc: BaseException) -> SandboxError:
        status = self.zygote.exit_status(self.pid, wait_s=2.0)
        self.closed = True
        self._remove_scratch()
        what = f"it {status}" if status else f"the connection broke ({type(exc).__name__})"
        tail = [line for line in self.zygote.stderr_tail(12).splitlines() if line.strip()]
        detail = f"; its last words: {' | '.join(tail[-4:])[-600:]}" if tail else ""
        return SandboxError(f"the candidate process (pid {self.pid}) died {when}: {what}{detail}", "crash")

    # --- shared files from the candidate -------------------------------------------------------

    def owns_path(self, path: str | None) -> bool:
        """A file a reply names must lie in this process's scratch folder (never elsewhere)."""
        if not path:
            return False
        real = os.path.realpath(path)
        return real.startswith(os.path.realpath(self.scratch) + os.sep) and os.path.isfile(real) \
            and not os.path.islink(path)

    # --- ending ------------------------------------------------------------------------------------

    def kill(self) -> None:
        _kill(self.pid)
        self.closed = True
        try:
            self.connection.close()
        except OSError:
            pass
        self._remove_scratch()

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.connection.send_bytes(b'{"command": "shutdown"}')
            if self.connection.poll(5.0):
                self.connection.recv_bytes(1 << 16)
        except (OSError, EOFError, ValueError):
            pass
        self.kill()

    def _remove_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            continue


__all__ = ["SandboxError", "SandboxProcess"]
