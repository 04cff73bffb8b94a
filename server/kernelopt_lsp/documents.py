"""The dumps the server knows: the on-disk index, and open documents as currently edited.

An open document is parsed from its buffer (``parse_output_code(path, text)``), cached by
version, so hovers, lenses and diagnostics follow edits before they are saved; a buffer equal
to the file on disk reuses the index's graph. The index is written by one indexer thread and
read lock-free by the features (single dict lookups).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from kernelopt_core.artifacts import DumpIndex, DumpProblem, is_candidate_dump, parse_output_code
from kernelopt_core.artifacts.discover import SKIP_DIRS
from kernelopt_core.artifacts.model import CompiledGraph, DumpError, source_hash
from kernelopt_core.artifacts.parse import looks_like_wrapper
from kernelopt_core.dispatch import DispatchReport, analyze
from kernelopt_core.userkernels.index import UserKernelIndex, is_candidate_user_file


def is_skipped(path: str) -> bool:
    """Inside a folder discovery never looks into (.git, .venv, .kernelopt, ...)."""
    return any(part in SKIP_DIRS for part in path.split(os.sep))


class SharedIndex:
    """A :class:`DumpIndex` (and the index of the project's own kernel files) fed by one thread at a
    time; reads need no lock."""

    def __init__(self) -> None:
        self.index = DumpIndex()
        self.user = UserKernelIndex()
        self._lock = threading.Lock()

    def _snapshot(self, prefix: str | None = None) -> dict[str, int]:
        return {p: id(e) for p, e in list(self.index.entries.items()) if prefix is None or p.startswith(prefix)}

    def scan(self, root: str) -> set[str]:
        """Index a folder; returns the paths whose entry appeared, changed or went away."""
        root = os.path.abspath(root)
        with self._lock:
            before = self._snapshot(root)
            try:
                self.index.scan(root)
            except OSError:
                pass
            after = self._snapshot(root)
            try:
                user = self.user.scan(root)
            except OSError:
                user = set()
        return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)} | user

    def update(self, path: str) -> set[str]:
        """A watched path changed: a file (re-read or dropped) or a folder (scanned or dropped)."""
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return self.scan(path)
        with self._lock:
            if os.path.exists(path):
                if is_candidate_user_file(path):  # a project's own .py (never read as a dump)
                    return {path} if self.user.update(path) else set()
                return {path} if self.index.update(path) else set()
            # Gone: the file itself, or a deleted folder and everything indexed under it.
            gone = [p for p in list(self.index.entries) if p == path or p.startswith(path + os.sep)]
            for p in gone:
                self.index.remove(p)
            user = [p for p in list(self.user.entries) if p == path or p.startswith(path + os.sep)]
            return set(gone) | {p for p in user if self.user.remove(p)}

    def drop_outside(self, roots: list[str]) -> set[str]:
        """Forget every entry under none of ``roots`` (a folder is no longer watched)."""
        prefixes = [os.path.abspath(r).rstrip(os.sep) + os.sep for r in roots]
        with self._lock:
            gone = [p for p in list(self.index.entries) if not any(p.startswith(x) for x in prefixes)]
            for p in gone:
                self.index.remove(p)
            user = [p for p in list(self.user.entries) if not any(p.startswith(x) for x in prefixes)]
            gone += [p for p in user if self.user.remove(p)]
        return set(gone)

    def graph_at(self, path: str) -> CompiledGraph | None:
        return self.index.graph_at(path)

    def problem_at(self, path: str) -> DumpProblem | None:
        return self.index.problem_at(path)

    def knows(self, path: str) -> bool:
        return os.path.abspath(path) in self.index.entries

    def dump_paths(self) -> list[str]:
        """Every indexed wrapper or unreadable dump (not kernel files or foreign cache files)."""
        return sorted(p for p, e in list(self.index.entries.items()) if e.graph is not None or e.problem is not None)


@dataclass
class DumpState:
    """One dump as the features see it now."""

    path: str
    version: int | None  # the open document's version, None when read from disk
    graph: CompiledGraph | None
    problem: DumpProblem | None
    dispatch: DispatchReport | None
    first_line_length: int
    text_hash: str | None = None


def state_from_text(path: str, text: str, version: int | None, index: SharedIndex) -> DumpState | None:
    """Parse a buffer (reusing the on-disk graph when the text is the same). None: not a dump."""
    first = len(text.split("\n", 1)[0])
    digest = source_hash(text)
    disk = index.graph_at(path)
    if disk is not None and disk.text_hash == digest:
        return DumpState(path, version, disk, None, analyze(disk), first, digest)
    if not (is_candidate_dump(path) or index.knows(path) or looks_like_wrapper(text)):
        return None
    if not text.strip():
        return DumpState(path, version, None, DumpProblem(path, "file is empty"), None, first, digest)
    try:
        graph = parse_output_code(path, text)
    except DumpError as exc:
        return DumpState(path, version, None, DumpProblem(path, exc.problem, exc.line), None, first, digest)
    return DumpState(path, version, graph, None, analyze(graph), first, digest)


def state_from_disk(path: str, index: SharedIndex) -> DumpState | None:
    graph = index.graph_at(path)
    problem = index.problem_at(path) if graph is None else None
    if graph is None and problem is None:
        return None
    return DumpState(path, None, graph, problem, analyze(graph) if graph else None, _first_line_length(path),
                     graph.text_hash if graph else None)


def _first_line_length(path: str) -> int:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return len(handle.readline(4096).rstrip("\r\n"))
    except OSError:
        return 0


class DumpDocuments:
    """Caches DumpStates: per open document by (version, index entry), per file by index entry."""

    def __init__(self, index: SharedIndex) -> None:
        self.index = index
        self._buffers: dict[str, tuple[tuple[int, int], DumpState | None]] = {}
        self._disk: dict[str, tuple[int, DumpState | None]] = {}

    def _entry_key(self, path: str) -> int:
        entry = self.index.index.entries.get(os.path.abspath(path))
        return id(entry) if entry is not None else 0

    def cached_buffer(self, path: str, version: int) -> tuple[bool, DumpState | None]:
        """(hit, state): a buffer state is valid while neither the version nor the file changed."""
        cached = self._buffers.get(path)
        if cached is not None and cached[0] == (version, self._entry_key(path)):
            return True, cached[1]
        return False, None

    def store_buffer(self, path: str, version: int, entry_key: int, state: DumpState | None) -> None:
        self._buffers[path] = ((version, entry_key), state)

    def entry_key(self, path: str) -> int:
        return self._entry_key(path)

    def forget_buffer(self, path: str) -> None:
        self._buffers.pop(path, None)

    def disk_state(self, path: str) -> DumpState | None:
        key = self._entry_key(path)
        cached = self._disk.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        state = state_from_disk(path, self.index) if key else None
        self._disk[path] = (key, state)
        return state
