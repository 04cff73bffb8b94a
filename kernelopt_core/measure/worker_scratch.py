"""A worker's temporary folders: made and removed by its owner, swept once the owner is gone.

Everything a worker's tasks put in temporary folders (the candidates' scratch folders, the CPU
exchange buffers in RAM-backed /dev/shm) lives in two folders its owner makes before starting it
and removes when it ends, so a worker killed mid-task leaves none. An owner killed with kill -9
cannot remove them; each folder names its owner (pid and start time), and :func:`sweep` removes
the folders of owners that are gone. It runs when a worker starts and after each bench problem.
No torch here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from ..process_lifetime import Owner

PREFIX = "kernelopt-worker-"
OWNER_FILE = ".owner"
_UNCLAIMED_S = 60.0  # a folder without its owner file yet may be being made right now


def _bases() -> list[str]:
    bases = [tempfile.gettempdir()]
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        bases.append("/dev/shm")
    return bases


def make() -> list[str]:
    """The folders for one worker (on disk, and in /dev/shm where there is one), owned by this process."""
    token = Owner.of(os.getpid()).token()
    folders = []
    for base in _bases():
        folder = tempfile.mkdtemp(prefix=PREFIX, dir=base)
        with open(os.path.join(folder, OWNER_FILE), "w", encoding="ascii") as handle:
            handle.write(token)
        folders.append(folder)
    return folders


def remove(folders: list[str]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def sweep() -> list[str]:
    """Remove the worker folders whose owner is gone; returns them."""
    removed = []
    for base in _bases():
        try:
            entries = [e for e in os.listdir(base) if e.startswith(PREFIX)]
        except OSError:
            continue
        for entry in entries:
            folder = os.path.join(base, entry)
            try:
                with open(os.path.join(folder, OWNER_FILE), encoding="ascii") as handle:
                    owner = Owner.parse(handle.read().strip())
            except OSError:  # not ours to read, or not claimed yet
                owner = None
                try:
                    if time.time() - os.stat(folder).st_mtime < _UNCLAIMED_S or not os.access(folder, os.W_OK):
                        continue
                except OSError:
                    continue
            if owner is None or not owner.alive():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed
