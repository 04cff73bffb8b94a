"""What a job running inside a worker may ask about its worker (no torch here)."""

from __future__ import annotations

import os

DEVICE_ENV = "KERNELOPT_WORKER_DEVICE"


def worker_device(default: str = "cpu") -> str:
    """The device this worker owns ("cpu" or "cuda:N"); ``default`` outside a worker."""
    return os.environ.get(DEVICE_ENV, default)


def in_worker() -> bool:
    return DEVICE_ENV in os.environ


def ready_job(payload: dict) -> dict:
    """A job that does nothing: starting a worker with it measures the start (torch import, device
    set-up) apart from the first real job."""
    return {"device": worker_device(), "pid": os.getpid()}
