"""What a task running inside a worker may ask about its worker (no torch here)."""

from __future__ import annotations

import os

DEVICE_ENV = "KERNELOPT_WORKER_DEVICE"
# Folders the worker's owner made for it and removes when the worker goes, however it goes: the
# candidates' scratch folders (on disk) and the exchange buffers (RAM-backed /dev/shm) live there.
SCRATCH_ENV = "KERNELOPT_WORKER_SCRATCH"
SHARED_MEMORY_ENV = "KERNELOPT_WORKER_SHM"


def worker_device(default: str = "cpu") -> str:
    """The device this worker owns ("cpu" or "cuda:N"); ``default`` outside a worker."""
    return os.environ.get(DEVICE_ENV, default)


def in_worker() -> bool:
    return DEVICE_ENV in os.environ


def ready_task(payload: dict) -> dict:
    """A task that does nothing: starting a worker with it measures the start (torch import, device
    set-up) apart from the first real task."""
    return {"device": worker_device(), "pid": os.getpid()}


def worker_scratch() -> str | None:
    """The worker's own temporary folder (removed with the worker), or None outside a worker."""
    folder = os.environ.get(SCRATCH_ENV)
    return folder if folder and os.path.isdir(folder) else None


def worker_shared_memory() -> str | None:
    """The worker's own folder in /dev/shm (removed with the worker), or None."""
    folder = os.environ.get(SHARED_MEMORY_ENV)
    return folder if folder and os.path.isdir(folder) else None


# A task whose result (a dict) holds this key, with a reason, asks for its worker to be replaced after
# it: the task left something in the process that only the process's end gives back (gate 2: device
# memory that a candidate process still maps). The result stands.
RECYCLE_KEY = "recycle_worker"
