"""One spare candidate process, started ahead of the candidate that will take it.

Getting a contained process ready costs seconds that do not depend on the candidate (a fresh
interpreter or fork, torch's CUDA context, Inductor's imports). A checker that screens candidate
after candidate keeps one *spare*: :meth:`SpareKeeper.take` hands it to the next candidate and at
once starts the following one on a background thread. A spare has run no candidate code: each
candidate still gets a process of its own, only started earlier.

A spare is a child of the same zygote as any candidate process, with a fresh scratch folder removed
with it; the keeper closes it when asked, when it is not wanted, and at exit; one that died is
replaced the normal way. ``KERNELOPT_SPARE_CANDIDATE=0`` turns spares off (on a GPU each holds a
CUDA context). Imports nothing heavy. Measured costs: docs/design-notes.md, "sandbox/spare.py".
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .process import CONNECT_TIMEOUT_S, SandboxError, SandboxProcess

SPARE_ENV = "KERNELOPT_SPARE_CANDIDATE"
WARM_TIMEOUT_S = 300.0
PING_TIMEOUT_S = 10.0
# How long a candidate waits for a spare still starting: it started earlier than a fresh one would.
CLAIM_WAIT_S = CONNECT_TIMEOUT_S
DISCARD_WAIT_S = 30.0
EXIT_WAIT_S = 5.0

Starter = Callable[..., SandboxProcess]


def spare_enabled() -> bool:
    """Whether spares are on (the default); ``KERNELOPT_SPARE_CANDIDATE=0`` turns them off."""
    return os.environ.get(SPARE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class ProcessKey:
    """What a spare must match to stand in for a fresh process."""

    flavor: str
    device: str
    scratch_root: str | None


@dataclass
class Taken:
    """A candidate's process and how it was got (recorded in gate 2's numbers)."""

    process: SandboxProcess
    from_spare: bool
    seconds: float  # getting the process, on the checker's clock
    spare_age_s: float | None = None  # how long before it was taken the spare had been started
    note: str | None = None  # why no spare was used, when one was not

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.process.pid, "from_spare": self.from_spare, "seconds": round(self.seconds, 4),
                "spare_age_s": None if self.spare_age_s is None else round(self.spare_age_s, 4), "note": self.note}


@dataclass
class _Spare:
    """One spare, started on a thread of its own; ``process`` is set once it is started and warm."""

    key: ProcessKey
    started: float = field(default_factory=time.monotonic)
    process: SandboxProcess | None = None
    error: str | None = None
    warm_s: float | None = None
    _cancel: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def begin(self, start: Starter) -> None:
        self._thread = threading.Thread(target=self._run, args=(start,), name="kernelopt-spare", daemon=True)
        self._thread.start()

    def _run(self, start: Starter) -> None:
        try:
            process = start(self.key.flavor, self.key.device, self.key.scratch_root, cancel=self._cancel)
        except Exception as exc:  # noqa: BLE001 - kept as the reason no spare was ready
            self.error = f"the spare did not start: {exc}"
            return
        try:
            reply = process.call("warm", timeout_s=WARM_TIMEOUT_S, cancel=self._cancel)
            if not reply.get("ok"):
                raise SandboxError(f"its warm-up failed: {str(reply.get('error'))[:300]}", "crash")
            self.warm_s = float(reply.get("seconds") or 0.0)
        except Exception as exc:  # noqa: BLE001 - a broken spare is never handed out
            process.kill()
            self.error = f"the spare (pid {process.pid}) was discarded: {exc}"
            return
        with self._lock:
            keep = not self._cancel.is_set()
            if keep:
                self.process = process
        if not keep:  # discarded while it started: it ends here, not with the keeper
            process.close()

    def starting(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def claim(self, wait_s: float) -> tuple[SandboxProcess | None, str | None]:
        """The spare's process if it is alive and answers (waiting while it still starts), else (None, why)."""
        self.wait(wait_s)
        with self._lock:
            process, self.process = self.process, None
        if process is None:
            if self.starting():
                self.discard()
                return None, f"the spare was not ready within {wait_s:g} s"
            return None, self.error or "the spare was not ready"
        status = process.zygote.exit_status(process.pid)
        if status is not None:
            process.kill()
            return None, f"the spare (pid {process.pid}) had ended: it {status}"
        try:
            reply = process.call("hello", timeout_s=PING_TIMEOUT_S)
        except SandboxError as exc:
            process.kill()
            return None, f"the spare (pid {process.pid}) did not answer: {exc}"
        if not reply.get("ok") or reply.get("pid") != process.pid:
            process.kill()
            return None, f"the spare (pid {process.pid}) answered wrongly"
        return process, None

    def discard(self) -> None:
        """End the spare, or have its thread end it once started; waits a while for that thread."""
        self._cancel.set()
        with self._lock:
            process, self.process = self.process, None
        if process is not None:
            process.close()
            process.zygote.exit_status(process.pid, wait_s=EXIT_WAIT_S)  # gone (reaped), not only signalled
        self.wait(DISCARD_WAIT_S)


class SpareKeeper:
    """At most one spare candidate process, for the next candidate of the same flavour, device and scratch."""

    def __init__(self, start: Starter | None = None):
        self._start = start or SandboxProcess.start
        self._lock = threading.Lock()
        self._spare: _Spare | None = None

    def take(self, flavor: str, device: str, scratch_root: str | None = None, *, keep_spare: bool = False) -> Taken:
        """A process for one candidate: the spare when one matches and is alive, else a fresh one.

        ``keep_spare``: start the next spare right away (where another candidate is likely to follow).
        Raises :class:`SandboxError` when no process can be started.
        """
        begin = time.monotonic()
        key = ProcessKey(flavor, device, scratch_root)
        with self._lock:
            spare, self._spare = self._spare, None
        process: SandboxProcess | None = None
        age: float | None = None
        note: str | None
        if spare is None:
            note = "no spare was kept" if spare_enabled() else f"spares are off ({SPARE_ENV}=0)"
        elif spare.key != key:
            spare.discard()
            note = "the spare was started for another device or scratch folder"
        else:
            age = begin - spare.started
            process, note = spare.claim(CLAIM_WAIT_S)
        from_spare = process is not None
        if process is None:
            process = self._start(flavor, device, scratch_root)
        if keep_spare and spare_enabled():
            self._begin_spare(key)
        return Taken(process, from_spare, time.monotonic() - begin, age if from_spare else None, note)

    def ensure_spare(self, flavor: str, device: str, scratch_root: str | None = None) -> bool:
        """Start a spare now unless one for this key is kept or starting (True when one was started): the
        first screen's process then starts while its gate 1 compiles, not after."""
        key = ProcessKey(flavor, device, scratch_root)
        if not spare_enabled():
            return False
        with self._lock:
            if self._spare is not None and self._spare.key == key and self._spare.error is None:
                return False
        self._begin_spare(key)
        return True

    def start_fresh(self, flavor: str, device: str, scratch_root: str | None = None) -> SandboxProcess:
        """A fresh process, the spare left as it is (the tasks that need one whatever is kept)."""
        return self._start(flavor, device, scratch_root)

    def _begin_spare(self, key: ProcessKey) -> None:
        spare = _Spare(key)
        with self._lock:
            previous, self._spare = self._spare, spare
        if previous is not None:
            previous.discard()
        spare.begin(self._start)

    def settle(self, timeout_s: float = CLAIM_WAIT_S) -> None:
        """Wait for a spare still starting (timing must not share the machine with its start-up)."""
        with self._lock:
            spare = self._spare
        if spare is not None:
            spare.wait(timeout_s)

    def status(self) -> dict[str, Any]:
        """The spare's pid once ready, whether one is starting, and why the last one failed."""
        with self._lock:
            spare = self._spare
        if spare is None:
            return {"pid": None, "starting": False, "error": None}
        process = spare.process
        return {"pid": process.pid if process is not None else None, "starting": spare.starting(),
                "error": spare.error, "scratch": process.scratch if process is not None else None,
                "warm_s": spare.warm_s, "device": spare.key.device}

    def close(self) -> None:
        """End the spare (and wait for one still starting)."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()


_KEEPER = SpareKeeper()


def take_process(flavor: str, device: str, scratch_root: str | None = None, *, keep_spare: bool = False,
                 use_spare: bool = True) -> Taken:
    """This process's keeper: a candidate's process, from the spare where there is one (``use_spare``),
    else a fresh one. Raises :class:`SandboxError` when no process can be started."""
    if not use_spare:
        begin = time.monotonic()
        return Taken(_KEEPER.start_fresh(flavor, device, scratch_root), False, time.monotonic() - begin)
    return _KEEPER.take(flavor, device, scratch_root, keep_spare=keep_spare)


def ensure_spare(flavor: str, device: str, scratch_root: str | None = None) -> bool:
    return _KEEPER.ensure_spare(flavor, device, scratch_root)


def close_spare() -> None:
    _KEEPER.close()


def closing_spare_unless_verdict(check: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A gate-2 task's ``check``; the spare is closed when it gives no verdict on the candidate: the check
    raised (nothing it started stays behind), or it hit a setup error or could not verify (the search may
    stop there, and a retry with less memory wants the spare's memory too)."""
    try:
        verdict = check()
    except BaseException:
        close_spare()
        raise
    if "setup_error" in verdict or verdict.get("could_not_verify"):
        close_spare()
    return verdict


def settle_spare(timeout_s: float = CLAIM_WAIT_S) -> None:
    _KEEPER.settle(timeout_s)


def spare_status() -> dict[str, Any]:
    return _KEEPER.status()


# Registered after the zygotes' own (imported above), so it runs before they close: the spare is
# shut down and its scratch removed, rather than only killed with its zygote.
atexit.register(close_spare)

__all__ = ["SPARE_ENV", "SpareKeeper", "Taken", "close_spare", "closing_spare_unless_verdict", "ensure_spare", "settle_spare", "spare_enabled", "spare_status",
           "take_process"]
