"""The device's measured ceilings: copy bandwidth and bf16 matmul throughput, cached per GPU.

The analyst's roofline uses what this GPU actually reaches, not the datasheet:
* copy: a 2 GiB device-to-device copy, counting bytes read plus bytes written;
* matmul: a bf16 8192 x 8192 x 8192 matmul (2 * 8192^3 FLOP).
Each is the median of several CUDA-event-timed runs after warm-up. The result is cached as JSON
in the cache folder, keyed by the GPU's name, and measured once per GPU. The CPU backend has no
peaks (the analyst says so). ``peaks_task`` runs inside a worker; the rest imports no torch.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..json_records import JsonRecord
from .cache_dir import cache_file, read_json, write_json
from .task_context import worker_device

COPY_BYTES = 2 << 30
MATMUL_N = 8192
PEAKS_TASK = "kernelopt_core.measure.peaks:peaks_task"


@dataclass
class DevicePeaks(JsonRecord):
    gpu: str
    copy_bytes_per_s: float  # bytes read + written per second, 2 GiB device-to-device copy
    matmul_flops_per_s: float  # bf16 8192^3 matmul
    measured_at: str
    torch_version: str = ""
    copy_ms: float = 0.0
    matmul_ms: float = 0.0
    sm_count: int | None = None
    l2_bytes: int | None = None


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "gpu"


def peaks_cache_path(gpu: str) -> Any:
    return cache_file("peaks", _slug(gpu))


def cached_peaks(gpu: str) -> DevicePeaks | None:
    data = read_json(peaks_cache_path(gpu))
    try:
        return DevicePeaks.from_json(data) if isinstance(data, dict) else None
    except TypeError:
        return None


def _median_ms(run: Any, torch: Any, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        run()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return float(statistics.median(times))


def _copy_ms(torch: Any, device: str, copy_bytes: int) -> float:
    source = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    source.fill_(1)
    return _median_ms(lambda: target.copy_(source), torch, warmup=3, reps=10)


def _matmul_ms(torch: Any, device: str, n: int) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
    return _median_ms(lambda: torch.mm(a, b, out=out), torch, warmup=5, reps=20)


def measure_peaks(device: str = "cuda:0", copy_bytes: int = COPY_BYTES, matmul_n: int = MATMUL_N) -> DevicePeaks:
    """Measure this GPU's copy and matmul ceilings (a few seconds). Imports torch."""
    import torch

    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    copy_ms = _copy_ms(torch, device, copy_bytes)
    matmul_ms = _matmul_ms(torch, device, matmul_n)
    torch.cuda.empty_cache()
    return DevicePeaks(
        gpu=torch.cuda.get_device_name(index),
        copy_bytes_per_s=2.0 * copy_bytes / (copy_ms / 1000.0),
        matmul_flops_per_s=2.0 * matmul_n ** 3 / (matmul_ms / 1000.0),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), torch_version=str(torch.__version__),
        copy_ms=copy_ms, matmul_ms=matmul_ms, sm_count=int(props.multi_processor_count),
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0) or None,
    )


def peaks_task(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Worker task: the cached peaks of this worker's GPU, measured on a miss. None on the CPU."""
    device = payload.get("device") or worker_device()
    if not device.startswith("cuda"):
        return None
    import torch

    gpu = torch.cuda.get_device_name(torch.device(device).index or 0)
    if not payload.get("refresh"):
        hit = cached_peaks(gpu)
        if hit is not None:
            return {**hit.to_json(), "cached": True}
    peaks = measure_peaks(device)
    try:
        write_json(peaks_cache_path(peaks.gpu), peaks.to_json())
    except OSError as exc:  # a read-only cache folder costs a re-measure next time, not the result
        return {**peaks.to_json(), "cached": False, "cache_error": str(exc)}
    return {**peaks.to_json(), "cached": False}


def peaks_in_process(device: str) -> DevicePeaks | None:
    """:func:`peaks_task` in the calling process (one that already holds the GPU, such as a benchmark
    script): the cached peaks, measured and cached on a miss; None on the CPU."""
    data = peaks_task({"device": device})
    return DevicePeaks.from_json(data) if data else None


def device_peaks(device: str, *, worker: Any = None, refresh: bool = False, timeout_s: float = 300.0,
                 cancel: threading.Event | None = None) -> DevicePeaks | None:
    """The peaks of ``device`` ("cuda:N"), from the cache or measured in its worker; None on "cpu"."""
    if not device.startswith("cuda"):
        return None
    from .devices import cuda_index, gpu_name
    from .worker import get_worker

    if not refresh:
        name = gpu_name(cuda_index(device))
        hit = cached_peaks(name) if name != "unknown-gpu" else None
        if hit is not None:
            return hit
    runner = worker or get_worker(device)
    outcome = runner.call(PEAKS_TASK, {"device": device, "refresh": refresh}, timeout_s=timeout_s, cancel=cancel)
    if not outcome.ok or not outcome.value:
        return None
    return DevicePeaks.from_json(outcome.value)
