"""Progress and result events shared by the CLI, the job runner and the language server.

Long commands (optimize, profile, verify, bench) report through an :class:`EventSink`. With
``--events`` the CLI writes each event as one JSON line on stdout, which is how the language
server's job runner follows a job in a subprocess and turns it into ``$/progress``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

EVENT_PREFIX = "@kernelopt-event "


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
