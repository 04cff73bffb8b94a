"""Which device a graph runs on, without importing torch (the caller may be the language server)."""

from __future__ import annotations


class DeviceMismatch(ValueError):
    """A graph was asked to run on a device it was not compiled for."""


def device_for_graph(requested: str | None, graph_device: str | None, graph_name: str = "the graph") -> str:
    """Resolve "auto"/"cuda" against the device the wrapper was compiled for.

    A wrapper allocates its buffers on the device it was compiled for, so a CPU-backend graph
    runs only in a "cpu" worker and a CUDA graph only in a "cuda:N" worker.
    """
    compiled_for = "cpu" if graph_device == "cpu" else "cuda"
    wanted = (requested or "auto").strip().lower()
    if wanted == "auto":
        return "cpu" if compiled_for == "cpu" else "cuda:0"
    if wanted == "cuda":
        wanted = "cuda:0"
    kind = "cpu" if wanted == "cpu" else "cuda" if wanted.startswith("cuda") else None
    if kind is None:
        raise DeviceMismatch(f"unknown device {requested!r}: use auto, cpu, cuda or cuda:N")
    if kind != compiled_for:
        raise DeviceMismatch(
            f"{graph_name} was compiled for {compiled_for} and cannot run on {wanted}; "
            f"recompile it for {wanted} (kernelopt compile --device {kind}) or pass --device {compiled_for}"
        )
    return wanted


_GPU_NAMES: dict[int, str] = {}


def gpu_name(index: int = 0) -> str:
    """The GPU's product name from nvidia-smi ("unknown-gpu" when it cannot be asked)."""
    if index in _GPU_NAMES:
        return _GPU_NAMES[index]
    import shutil
    import subprocess

    name = "unknown-gpu"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            done = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader", "-i", str(index)],
                                  capture_output=True, text=True, timeout=20)
            if done.returncode == 0 and done.stdout.strip():
                name = done.stdout.strip().splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    _GPU_NAMES[index] = name
    return name


def cuda_index(device: str) -> int:
    """0 for "cuda", N for "cuda:N"."""
    _, _, index = device.partition(":")
    return int(index) if index.isdigit() else 0
