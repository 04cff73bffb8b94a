"""Snapshot a kernel's launch arguments during a real run of its graph. Runs inside a worker
(imports torch inside the functions).

The wrapper looks each kernel up as a module global and calls ``kernel.run(*args, stream=...)``;
an instance attribute ``run`` on that kernel object shadows the method, so the snapshot (tensors
cloned *before* the launch, so in-place arguments keep their input values) costs no edit of the
wrapper. The original ``run`` is restored on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


@dataclass
class CapturedLaunch:
    kernel: str
    index: int  # the n-th launch of this kernel in the graph call
    args: list[Any]  # positional arguments as passed (tensors cloned before the launch)
    kwargs: dict[str, Any] = field(default_factory=dict)


def clone_value(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        out = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=value.device)
        out.copy_(value)
        return out
    return value


def layout_only(value: Any) -> Any:
    """A tensor's size, strides and dtype without its memory (a meta tensor): for an argument whose
    captured value is never read, such as an output that gate 2 poisons before every run."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="meta")
    return value


def _tensor_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if hasattr(v, "element_size"))


@contextmanager
def capturing(module: ModuleType, kernel_names: list[str], limit: int = 8, limit_bytes: int | None = None,
              layouts_only: dict[str, set[int]] | None = None) -> Iterator[list[CapturedLaunch]]:
    """Record up to ``limit`` launches of each named kernel of a loaded wrapper.

    With ``limit_bytes``, a kernel whose first launch moves more than that keeps only that launch
    (each captured launch is a full copy of its arguments). ``layouts_only`` names, per kernel, the
    argument positions recorded as :func:`layout_only` (no copy).
    """
    captured: list[CapturedLaunch] = []
    counts: dict[str, int] = {}
    patched: list[Any] = []
    for name in kernel_names:
        kernel = getattr(module, name, None)
        if kernel is None or not hasattr(kernel, "run"):
            raise LookupError(f"the loaded graph has no kernel object named {name}")

        skip = (layouts_only or {}).get(name, set())

        def recording_run(*args: Any, __name: str = name, __kernel: Any = kernel, __skip: set[int] = skip,
                          **kwargs: Any) -> Any:
            index = counts.get(__name, 0)
            counts[__name] = index + 1
            keep = limit
            if limit_bytes is not None and index > 0 and _tensor_bytes(list(args)) > limit_bytes:
                keep = 1
            if index < keep:
                copies = [layout_only(a) if i in __skip else clone_value(a) for i, a in enumerate(args)]
                captured.append(CapturedLaunch(__name, index, copies, dict(kwargs)))
            return type(__kernel).run(__kernel, *args, **kwargs)

        kernel.run = recording_run
        patched.append(kernel)
    try:
        yield captured
    finally:
        for kernel in patched:
            try:
                del kernel.run
            except AttributeError:
                pass


def capture_launches(module: ModuleType, kernel_names: list[str], inputs: list[Any], limit: int = 8,
                     limit_bytes: int | None = None,
                     layouts_only: dict[str, set[int]] | None = None) -> tuple[list[CapturedLaunch], Any]:
    """Run the graph once on ``inputs`` and return the captured launches and the graph's output."""
    from ..graph_module import call_graph

    with capturing(module, kernel_names, limit, limit_bytes, layouts_only) as captured:
        output = call_graph(module, inputs)
    _synchronize(inputs)
    return captured, output


def _synchronize(values: list[Any]) -> None:
    import torch

    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in values) and torch.cuda.is_available():
        torch.cuda.synchronize()
