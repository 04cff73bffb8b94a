"""Every user kernel file under some folders, kept up to date file by file (like the dump index).

A ``.py`` file is read (never imported) when its text mentions Triton; files that define no
``@triton.jit`` function cost one read and are remembered as "not ours" by their stamp.
Inductor's dumps are the dump index's (:mod:`kernelopt_core.artifacts.discover`). Pure Python.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..artifacts.discover import SKIP_DIRS, is_candidate_dump
from .model import UserKernelFile
from .parse import (
    MAX_FILE_BYTES,
    UserKernelError,
    looks_like_user_kernels,
    parse_user_kernels,
    read_user_file,
)


def is_candidate_user_file(path: str) -> bool:
    """Could this path be a user kernel file? (by name only: a ``.py`` that is not an Inductor dump)"""
    return path.endswith(".py") and not is_candidate_dump(path) and not any(
        part in SKIP_DIRS or part == "site-packages" for part in path.split(os.sep))


@dataclass
class _Entry:
    stamp: tuple[float, int]
    file: UserKernelFile | None = None
    problem: str | None = None


@dataclass
class UserKernelIndex:
    entries: dict[str, _Entry] = field(default_factory=dict)

    def scan(self, root: str) -> set[str]:
        """Index every user kernel file under ``root``; returns the paths whose entry changed."""
        changed: set[str] = set()
        if os.path.isfile(root):
            return {os.path.abspath(root)} if self.update(root) else set()
        seen: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and d != "site-packages"]
            for name in filenames:
                path = os.path.abspath(os.path.join(dirpath, name))
                if not is_candidate_user_file(path):
                    continue
                seen.add(path)
                if self.update(path):
                    changed.add(path)
        prefix = os.path.abspath(root).rstrip(os.sep) + os.sep
        for path in [p for p in self.entries if p.startswith(prefix) and p not in seen]:
            del self.entries[path]
            changed.add(path)
        return changed

    def update(self, path: str) -> bool:
        """(Re-)read one file; True when what the index holds for it changed (kernels or none)."""
        path = os.path.abspath(path)
        try:
            st = os.stat(path)
        except OSError:
            return self.remove(path)
        stamp = (st.st_mtime, st.st_size)
        old = self.entries.get(path)
        if old is not None and old.stamp == stamp:
            return False
        entry = self._read(path, stamp)
        self.entries[path] = entry
        had = old is not None and (old.file is not None or old.problem is not None)
        has = entry.file is not None or entry.problem is not None
        return had or has

    def _read(self, path: str, stamp: tuple[float, int]) -> _Entry:
        if stamp[1] > MAX_FILE_BYTES:
            return _Entry(stamp)
        try:
            text = read_user_file(path)
        except UserKernelError:
            return _Entry(stamp)
        if not looks_like_user_kernels(text):
            return _Entry(stamp)
        try:
            parsed = parse_user_kernels(path, text)
        except UserKernelError as exc:
            return _Entry(stamp, problem=exc.problem)
        return _Entry(stamp, file=parsed if parsed.kernels or parsed.helpers else None)

    def remove(self, path: str) -> bool:
        entry = self.entries.pop(os.path.abspath(path), None)
        return entry is not None and (entry.file is not None or entry.problem is not None)

    def file_at(self, path: str) -> UserKernelFile | None:
        entry = self.entries.get(os.path.abspath(path))
        return entry.file if entry is not None else None

    def knows(self, path: str) -> bool:
        entry = self.entries.get(os.path.abspath(path))
        return entry is not None and (entry.file is not None or entry.problem is not None)

    def files(self) -> list[UserKernelFile]:
        return [e.file for _, e in sorted(self.entries.items()) if e.file is not None]


__all__ = ["UserKernelIndex", "is_candidate_user_file"]
