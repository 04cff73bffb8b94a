"""What a worker's CUDA allocator still holds after a task, and where it came from.

Gate 2 asks for a census when more is allocated after a task than before it (a screen of a large
max-pool was seen to leave one working set behind each time). Live blocks are summed by memory pool
(the exchange arena's private pool, where a buffer alive after its arena closed is held by torch's
CUDA-IPC bookkeeping, against the worker's default pool, where a Python reference of ours holds it)
and by the first frame of ours that allocated them, when the worker records allocation history
(``KERNELOPT_MEMORY_HISTORY=1``: a debugging knob, it slows every allocation a little).

With ``KERNELOPT_MEMORY_HISTORY=<folder>`` the worker also appends one line per task to
``<folder>/worker-tasks.jsonl`` (:class:`TaskMemoryLog`): its allocation before and after the task,
and a census when the task left more than slack behind, whichever task it was.

Runs inside a worker (torch imported inside the functions). :func:`summarize` is pure, for tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

HISTORY_ENV = "KERNELOPT_MEMORY_HISTORY"
DEFAULT_POOL = (0, 0)
_HISTORY_ENTRIES = 200_000
_OUR_PACKAGE = "kernelopt_core"
LOG_NAME = "worker-tasks.jsonl"
LOG_SLACK_BYTES = 256 * 2**20  # what a task may leave (a loaded graph's caches) before the log takes a census


def start_history(device: str) -> bool:
    """Record where each allocation came from, if the knob asks for it (CUDA only); True when on."""
    if os.environ.get(HISTORY_ENV, "") in ("", "0") or not device.startswith("cuda"):
        return False
    try:
        import torch

        torch.cuda.memory._record_memory_history(max_entries=_HISTORY_ENTRIES, stacks="python")
    except Exception:  # noqa: BLE001 - a torch without it: the census still sums by pool
        return False
    return True


def census(pool_names: Mapping[tuple[int, int], str], top: int = 8) -> dict[str, Any]:
    """The live blocks of this process's CUDA allocator, summed by pool and by origin."""
    try:
        import torch

        segments = torch.cuda.memory._snapshot()["segments"]
    except Exception as exc:  # noqa: BLE001 - a diagnosis must never fail the task it diagnoses
        return {"error": f"no allocator snapshot: {type(exc).__name__}: {exc}"}
    return summarize(segments, pool_names, top)


def summarize(segments: Iterable[Mapping[str, Any]], pool_names: Mapping[tuple[int, int], str],
              top: int = 8) -> dict[str, Any]:
    """Sum an allocator snapshot's allocated blocks by pool name and by the first frame of ours."""
    by_pool: dict[str, int] = {}
    by_origin: dict[str, list[int]] = {}
    blocks = 0
    for segment in segments:
        pool = tuple(segment.get("segment_pool_id") or DEFAULT_POOL)
        name = pool_names.get(pool) or ("default" if pool == DEFAULT_POOL else f"pool {pool}")
        for block in segment.get("blocks") or []:
            if block.get("state") != "active_allocated":
                continue
            size = int(block.get("size", 0))
            blocks += 1
            by_pool[name] = by_pool.get(name, 0) + size
            origin = by_origin.setdefault(_origin(block.get("frames") or []), [0, 0])
            origin[0] += size
            origin[1] += 1
    ranked = sorted(by_origin.items(), key=lambda item: -item[1][0])[:top]
    return {"blocks": blocks, "by_pool_bytes": by_pool,
            "by_origin": [{"where": where, "bytes": size, "blocks": count} for where, (size, count) in ranked]}


def _origin(frames: list[Mapping[str, Any]]) -> str:
    """The innermost frame in our package (a snapshot lists frames innermost first)."""
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if _OUR_PACKAGE in filename:
            short = filename[filename.rfind(_OUR_PACKAGE):]
            return f"{short}:{frame.get('line')} {frame.get('name')}"
    return "unknown (no allocation history: set KERNELOPT_MEMORY_HISTORY=1)" if not frames else "outside kernelopt"


def settled_allocated() -> int:
    """This process's allocated CUDA memory once nothing is left to give back: reference cycles
    collected, queued work done, and exchange buffers whose borrowers let go released."""
    import gc

    import torch

    gc.collect()  # a reference cycle of ours is not retention
    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    return int(torch.cuda.memory_allocated())


@dataclass
class TaskMemoryLog:
    """One line per worker task: the allocator before and after it, and a census past slack."""

    path: str

    @classmethod
    def from_env(cls, device: str) -> TaskMemoryLog | None:
        folder = os.environ.get(HISTORY_ENV, "")
        if folder in ("", "0", "1") or not device.startswith("cuda"):
            return None
        os.makedirs(folder, exist_ok=True)
        return cls(os.path.join(folder, LOG_NAME))

    @staticmethod
    def allocated() -> int:
        import torch

        return int(torch.cuda.memory_allocated())

    def record(self, task: str, before: int) -> None:
        after = settled_allocated()
        entry: dict[str, Any] = {"pid": os.getpid(), "task": task, "allocated_before": before, "allocated_after": after}
        if after - before > LOG_SLACK_BYTES:
            entry["census"] = census({})
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


__all__ = ["HISTORY_ENV", "TaskMemoryLog", "census", "settled_allocated", "start_history", "summarize"]
