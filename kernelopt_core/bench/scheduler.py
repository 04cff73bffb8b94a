"""Local slots draining a queue of problems: one slot per GPU (``--gpus N``) or N CPU workers.

Each slot runs one problem at a time, each problem in its own subprocess pinned to the slot's
GPU through ``CUDA_VISIBLE_DEVICES`` (so the optimizer's own workers land on the same GPU). With
a deadline, no problem starts after it; those are returned as not reached.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

from ..events import EventSink
from .config import CampaignConfig
from .device_memory import DeviceMemoryGuard, MemoryReader
from .problem_process import Slot, run_problem_process
from .results import ProblemResult
from .suite import ProblemSpec

ProblemRunner = Callable[[ProblemSpec, CampaignConfig, str, Slot, EventSink], ProblemResult]


class SlotError(ValueError):
    """The campaign asked for devices this machine does not have."""


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [part.strip() for part in listed.split(",") if part.strip() and part.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no torch or no driver: no GPUs
        return []


def resolve_device(device: str, gpus: Sequence[str] | None = None) -> str:
    """"auto" -> "cuda" when a GPU is visible, else "cpu"; "cuda:N" is accepted as "cuda"."""
    if device == "auto":
        return "cuda" if (visible_gpus() if gpus is None else gpus) else "cpu"
    if device.startswith("cuda"):
        return "cuda"
    if device == "cpu":
        return "cpu"
    raise SlotError(f"unknown device {device!r}: use auto, cpu or cuda")


def make_slots(config: CampaignConfig, gpus: Sequence[str] | None = None,
               memory_reader: MemoryReader | None = None) -> list[Slot]:
    """The campaign's slots. Each GPU slot watches its device memory between problems (through
    nvidia-smi); a stand-in ``memory_reader`` (tests) puts a watch on every slot, CPU ones too."""
    slots = _plain_slots(config, gpus)
    for slot in slots:
        if memory_reader is not None:
            slot.memory = DeviceMemoryGuard(slot.visible_gpu or "0", memory_reader)
        elif slot.visible_gpu is not None:
            slot.memory = DeviceMemoryGuard(slot.visible_gpu)
    return slots


def _plain_slots(config: CampaignConfig, gpus: Sequence[str] | None) -> list[Slot]:
    gpu_ids = list(visible_gpus() if gpus is None else gpus)
    device = resolve_device(config.device, gpu_ids)
    if device == "cpu":
        if config.gpus:
            raise SlotError(f"--gpus {config.gpus} asked for GPUs but the device is the CPU "
                            f"({'none visible' if not gpu_ids else 'chosen with --device cpu'}); "
                            "use --workers N for parallel CPU workers")
        threads = max(1, (os.cpu_count() or 1) // config.workers) if config.workers > 1 else None
        return [Slot("cpu", None, f"cpu{i}", threads) for i in range(config.workers)]
    if not gpu_ids:
        raise SlotError("--device cuda but no GPU is visible (CUDA_VISIBLE_DEVICES / driver)")
    wanted = config.gpus or 1
    if wanted > len(gpu_ids):
        raise SlotError(f"--gpus {wanted} but only {len(gpu_ids)} GPU(s) are visible: {', '.join(gpu_ids)}")
    if config.device.startswith("cuda:") and not config.gpus:
        index = int(config.device.split(":", 1)[1])
        if index >= len(gpu_ids):
            raise SlotError(f"--device {config.device} but only {len(gpu_ids)} GPU(s) are visible")
        return [Slot("cuda:0", gpu_ids[index], f"gpu{gpu_ids[index]}")]
    return [Slot("cuda:0", gpu_id, f"gpu{gpu_id}") for gpu_id in gpu_ids[:wanted]]


def run_on_slots(problems: Sequence[ProblemSpec], config: CampaignConfig, out_dir: str, slots: Sequence[Slot],
                 sink: EventSink, on_result: Callable[[ProblemResult], None],
                 runner: ProblemRunner = run_problem_process,
                 deadline: float | None = None) -> tuple[list[ProblemResult], list[str]]:
    """Run ``problems`` over ``slots`` (one thread each); returns (results, names not reached)."""
    pending = list(problems)
    lock = threading.Lock()
    results: list[ProblemResult] = []
    not_reached: list[str] = []

    def take() -> ProblemSpec | None:
        with lock:
            while pending:
                spec = pending.pop(0)
                if sink.cancelled or (deadline is not None and time.monotonic() >= deadline):
                    not_reached.append(spec.name)
                    continue
                return spec
            return None

    def drain(slot: Slot) -> None:
        while (spec := take()) is not None:
            try:
                result = runner(spec, config, out_dir, slot, sink)
            except Exception as exc:  # noqa: BLE001 - the runner records failures; this is a last resort
                result = ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="error",
                                       category="setup", reason=f"the campaign could not run it: {exc}",
                                       device=slot.device, dtype=config.dtype)
            with lock:
                results.append(result)
            on_result(result)

    threads = [threading.Thread(target=drain, args=(slot,), name=f"bench-slot-{slot.label}", daemon=True)
               for slot in slots]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        # Ctrl-C: each slot ends its running problem's processes (and records it as cancelled)
        sink.cancel_event.set()
        for thread in threads:
            thread.join()
        raise
    return results, not_reached
