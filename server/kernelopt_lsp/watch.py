"""Watching dump folders with watchdog, debounced.

The server watches the workspace folders and the configured dump folders itself: Neovim offers
no dynamic file-watch registration, so ``workspace/didChangeWatchedFiles`` cannot be relied on.
Events are gathered until the folders have been quiet for ``debounce_s`` (a compile writes its
files in bursts), then handed over as one set of paths.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from kernelopt_core.artifacts import is_candidate_dump
from kernelopt_core.userkernels.index import is_candidate_user_file

from .documents import is_skipped

_RELEVANT = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED, EVENT_TYPE_CLOSED}


class _Collector(FileSystemEventHandler):
    def __init__(self, watcher: DumpWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _RELEVANT:
            return
        paths = [event.src_path]
        if event.event_type == EVENT_TYPE_MOVED and getattr(event, "dest_path", None):
            paths.append(event.dest_path)
        for raw in paths:
            path = os.fsdecode(raw)
            if is_skipped(path):
                continue
            # Folders matter when created, moved or deleted (a whole dump appearing or going away).
            if event.is_directory:
                if event.event_type != EVENT_TYPE_MODIFIED and event.event_type != EVENT_TYPE_CLOSED:
                    self.watcher.add(path)
            elif is_candidate_dump(path) or is_candidate_user_file(path):
                self.watcher.add(path)


class DumpWatcher:
    """Watches folders recursively; calls ``on_paths(set_of_paths)`` from a timer thread."""

    def __init__(self, on_paths: Callable[[set[str]], None], debounce_s: float = 0.15, max_wait_s: float = 1.0):
        self.on_paths = on_paths
        self.debounce_s = debounce_s
        self.max_wait_s = max_wait_s
        self._observer: BaseObserver | None = None  # Observer: the platform's own observer class
        self._watched: dict[str, ObservedWatch] = {}
        self._pending: set[str] = set()
        self._first_pending: float | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def watch(self, roots: Iterable[str]) -> list[str]:
        """Make the watched set exactly ``roots`` (nested roots are covered by their parent).
        Returns problems (a folder that cannot be watched), in words."""
        wanted = _outermost(os.path.abspath(r) for r in roots if os.path.isdir(r))
        problems: list[str] = []
        if self._observer is None:
            self._observer = Observer()
            self._observer.daemon = True
            self._observer.start()
        for root in list(self._watched):
            if root not in wanted:
                self._observer.unschedule(self._watched.pop(root))
        handler = _Collector(self)
        for root in wanted:
            if root in self._watched:
                continue
            try:
                self._watched[root] = self._observer.schedule(handler, root, recursive=True)
            except OSError as exc:  # e.g. the inotify watch limit
                problems.append(f"cannot watch {root}: {exc.strerror or exc}")
        self.errors = problems
        return problems

    @property
    def roots(self) -> list[str]:
        return sorted(self._watched)

    def add(self, path: str) -> None:
        with self._lock:
            now = time.monotonic()
            self._pending.add(path)
            if self._first_pending is None:
                self._first_pending = now
            if self._timer is not None:
                self._timer.cancel()
            # Quiet for debounce_s, but never hold events longer than max_wait_s.
            delay = min(self.debounce_s, max(0.0, self._first_pending + self.max_wait_s - now))
            self._timer = threading.Timer(delay, self._flush)
            self._timer.daemon = True
            self._timer.start()

    def _flush(self) -> None:
        with self._lock:
            paths, self._pending = self._pending, set()
            self._first_pending = None
            self._timer = None
        if paths:
            self.on_paths(paths)

    def stop(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None
        self._watched.clear()


def _outermost(roots: Iterable[str]) -> list[str]:
    chosen: list[str] = []
    for root in sorted(set(roots), key=len):
        if not any(root == c or root.startswith(c.rstrip(os.sep) + os.sep) for c in chosen):
            chosen.append(root)
    return chosen
