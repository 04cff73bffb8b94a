"""Progress and result events shared by the CLI, the job runner and the language server.

Long commands (optimize, profile, verify, bench) report through an :class:`EventSink`. With
``--events`` the CLI writes each event as one JSON line on stdout, which is how the language
server's job runner follows a job in a subprocess and turns it into ``$/progress``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TextIO

EVENT_PREFIX = "@kernelopt-event "
HEARTBEAT_STAGE = "heartbeat"


@dataclass
class ProgressEvent:
    message: str
    percentage: int | None = None  # 0..100 where known
    stage: str | None = None  # "iteration", "candidate", "gate", "profile", ...
    iteration: int | None = None
    iterations: int | None = None
    best_speedup: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class CancelledError(Exception):
    """Raised inside a job when the user cancelled it."""


class EventSink:
    """Receives progress; also carries the job's cancellation flag."""

    def __init__(self, on_progress: Callable[[ProgressEvent], None] | None = None,
                 cancel: threading.Event | None = None):
        self._on_progress = on_progress
        self.cancel_event = cancel or threading.Event()

    def progress(self, message: str, **fields: Any) -> None:
        if self._on_progress is not None:
            known = {k: fields.pop(k) for k in list(fields) if k in ProgressEvent.__dataclass_fields__}
            self._on_progress(ProgressEvent(message=message, **known, extra=fields))

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise CancelledError("cancelled by the user")

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


@contextmanager
def heartbeat(sink: EventSink, interval_s: float = 5.0) -> Iterator[EventSink]:
    """A sink that forwards to ``sink`` and, while nothing new is reported for ``interval_s``,
    repeats the last event as a ``heartbeat`` (stage ``"heartbeat"``, ``extra["waiting_s"]``).

    The work between two events (starting a worker, a gate on the CPU interpreter) can take
    minutes on a loaded machine; the heartbeat shows what is still running, and for how long.
    """
    lock = threading.Lock()
    state: dict[str, Any] = {"last": None, "since": time.monotonic(), "said": time.monotonic()}
    stop = threading.Event()

    def forward(event: ProgressEvent) -> None:
        now = time.monotonic()
        with lock:
            state.update(last=event, since=now, said=now)
        sink.progress(event.message, **_fields(event))

    def beat() -> None:
        while not stop.wait(min(1.0, interval_s)):
            now = time.monotonic()
            with lock:
                last: ProgressEvent | None = state["last"]
                if last is None or now - state["said"] < interval_s:
                    continue
                state["said"] = now
                waiting = now - state["since"]
            event = replace(last, stage=HEARTBEAT_STAGE,
                            extra={**last.extra, "waiting_s": round(waiting, 1), "waiting_for": last.message,
                                   "waiting_stage": last.stage})
            try:
                sink.progress(f"{last.message} (still running, {waiting:.0f} s)", **_fields(event))
            except Exception:  # noqa: BLE001 - a closed stream must not take the job down
                return

    thread = threading.Thread(target=beat, name="kernelopt-heartbeat", daemon=True)
    thread.start()
    try:
        yield EventSink(forward, sink.cancel_event)
    finally:
        stop.set()
        thread.join(timeout=2)


def _fields(event: ProgressEvent) -> dict[str, Any]:
    data = {k: getattr(event, k) for k in ProgressEvent.__dataclass_fields__ if k not in ("message", "extra")}
    return {**event.extra, **data}


def json_line_sink(stream: TextIO | None = None, cancel: threading.Event | None = None) -> EventSink:
    """A sink that writes ``@kernelopt-event {json}`` lines (for job runners)."""
    out = stream or sys.stdout
    lock = threading.Lock()

    def write(event: ProgressEvent) -> None:
        with lock:
            out.write(EVENT_PREFIX + json.dumps({"event": "progress", **asdict(event)}, default=str) + "\n")
            out.flush()

    return EventSink(write, cancel)


def emit_result(result: Any, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(EVENT_PREFIX + json.dumps({"event": "result", "result": result}, default=str) + "\n")
    out.flush()


def parse_event_line(line: str) -> dict[str, Any] | None:
    """The event on a line written by :func:`json_line_sink`/:func:`emit_result`, else None."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        data = json.loads(line[len(EVENT_PREFIX):])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None
