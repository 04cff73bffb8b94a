"""Where a gate's time and device memory go, step by step. Runs inside a worker (torch imported inside).

``with clock("compare"): ...`` adds the block's seconds to ``clock.seconds["compare"]``. On a GPU
each step ends with a synchronisation, so work a step queued is charged to that step and not to the
next one that waits; and the allocator's peak during the step is kept per step (``peaks``), the
worker's overall peak (``peak_allocated``, ``peak_reserved``) across steps, and the device's memory
in use by every process (``cudaMemGetInfo``) sampled at each step's end (``in_use_peak``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StepClock:
    device: str
    seconds: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, int] = field(default_factory=dict)  # bytes the worker's allocator held at most, per step
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    in_use_before: int | None = None  # every process's device memory when the clock started
    in_use_peak: int | None = None
    allocated_before: int | None = None  # the worker's allocator when the clock started
    last_peak: int | None = None  # the allocator's peak during the step that ended last

    def __post_init__(self) -> None:
        self._cuda = self.device.startswith("cuda")
        if self._cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.peak_allocated = self.allocated_before = int(torch.cuda.memory_allocated())
            self.peak_reserved = int(torch.cuda.memory_reserved())
            self.in_use_before = self.in_use_peak = _in_use()

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        begin = time.perf_counter()
        try:
            yield
        finally:
            if self._cuda:
                self._settle(step)
            self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - begin

    def _settle(self, step: str) -> None:
        import torch

        torch.cuda.synchronize()
        allocated, reserved = int(torch.cuda.max_memory_allocated()), int(torch.cuda.max_memory_reserved())
        self.peaks[step] = max(self.peaks.get(step, 0), allocated)
        self.last_peak = allocated
        self.peak_allocated = max(self.peak_allocated or 0, allocated)
        self.peak_reserved = max(self.peak_reserved or 0, reserved)
        self.in_use_peak = max(self.in_use_peak or 0, _in_use())
        torch.cuda.reset_peak_memory_stats()

    def rounded(self) -> dict[str, float]:
        """Seconds per step, as ``{"<step>_s": seconds}``."""
        return {f"{step}_s": round(value, 4) for step, value in self.seconds.items()}


def _in_use() -> int:
    import torch

    free, total = torch.cuda.mem_get_info()
    return int(total - free)


__all__ = ["StepClock"]
