"""Inductor's autotuning results (``*.best_config``) kept per candidate between its contained processes.

A candidate's first launch in a fresh process autotunes it (each config benchmarked, and coordinate
descent under max-autotune): seconds at a 12 GB working set. Inductor writes the winner beside the
kernel's source in the process's cache folder, which goes with the process. Kept here per candidate,
the winner goes back into the next process of the same candidate (its final gates after its screen),
and Inductor reads it instead of tuning again, as it would in the user's own cache. A candidate's files
go back only to its own processes; a malformed file is one Inductor ignores (it tunes again).
"""

from __future__ import annotations

import hashlib
import os
import shutil

FOLDER = "autotune-store"
SUFFIX = ".best_config"
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 256


def _inductor_cache(scratch: str) -> str:
    return os.path.join(scratch, "inductor")  # the process's TORCHINDUCTOR_CACHE_DIR (sandbox/process.py)


def _kept(root: str, key: str) -> str:
    return os.path.join(root, FOLDER, hashlib.sha256(key.encode()).hexdigest()[:24])


def _best_configs(folder: str) -> list[str]:
    """Relative paths of the autotuning results under ``folder`` (plain files of a sane size only)."""
    found: list[str] = []
    for directory, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(directory, name)
            if name.endswith(SUFFIX) and not os.path.islink(path) and os.path.getsize(path) <= MAX_FILE_BYTES:
                found.append(os.path.relpath(path, folder))
                if len(found) >= MAX_FILES:
                    return found
    return found


def _copy(source_root: str, target_root: str, relative: list[str]) -> int:
    copied = 0
    for path in relative:
        target = os.path.join(target_root, path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(source_root, path), target)
            copied += 1
        except OSError:  # a result not kept costs a tuning, nothing else
            continue
    return copied


def keep(scratch: str, key: str, root: str | None) -> int:
    """Copy the process's autotuning results out of ``scratch`` before it goes (how many were kept)."""
    if not root:
        return 0
    cache = _inductor_cache(scratch)
    return _copy(cache, _kept(root, key), _best_configs(cache)) if os.path.isdir(cache) else 0


def restore(scratch: str, key: str, root: str | None) -> int:
    """Put the results kept for ``key`` into a fresh process's ``scratch`` before it loads the candidate."""
    if not root:
        return 0
    kept = _kept(root, key)
    return _copy(kept, _inductor_cache(scratch), _best_configs(kept)) if os.path.isdir(kept) else 0
