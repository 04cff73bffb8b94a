"""What each Triton launch of a graph receives, as metadata: shape, stride, dtype and storage
extent of every tensor argument, and the scalars. Runs inside a worker (imports torch inside
the functions).

Nothing is copied (gate 2's capture clones tensors to replay them; a 6 GB input costs a few
hundred bytes here). Each tensor also records which allocation it views and where it starts in
it, so arguments that alias (one buffer passed twice, overlapping views) count once in the
ideal bytes (:mod:`kernelopt_core.measure.traffic`). Like the launch timers, the recorder stands
in for the kernel as a module global of the loaded wrapper while inside
:func:`recording_arguments`, and the original is restored on exit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .launch_recorder import replace_kernels
from .traffic import LaunchArg, storage_extent_bytes


def describe(value: Any, position: int) -> LaunchArg:
    """One argument as metadata (a tensor is never read or copied)."""
    import torch

    if isinstance(value, torch.Tensor):
        base = value.untyped_storage().data_ptr()
        return LaunchArg(
            name=f"arg{position}", position=position, role="input", shape=[int(s) for s in value.shape],
            stride=[int(s) for s in value.stride()], dtype=str(value.dtype),
            storage_bytes=storage_extent_bytes(value.shape, value.stride(), value.element_size()),
            storage=f"{value.device}:{base:#x}", offset_bytes=int(value.data_ptr() - base),
        )
    if isinstance(value, (bool, int, float)) or value is None:
        return LaunchArg(name=f"arg{position}", position=position, role="scalar", value=value)
    return LaunchArg(name=f"arg{position}", position=position, role="scalar", value=repr(value)[:80])


def describe_all(values: Any) -> list[LaunchArg]:
    """Every tensor in a (possibly nested) tuple or list, e.g. a graph's outputs."""
    flat: list[Any] = []

    def walk(item: Any) -> None:
        if isinstance(item, (list, tuple)):
            for inner in item:
                walk(inner)
        else:
            flat.append(item)

    walk(values)
    return [arg for position, value in enumerate(flat) if (arg := describe(value, position)).is_tensor]


class _RecordingKernel:
    """Stands in for a compiled Triton kernel (``k.run(...)`` or ``k[grid](...)``)."""

    def __init__(self, kernel: Any, name: str, record: Callable[[str, tuple[Any, ...]], None]):
        self._kernel, self._name, self._record = kernel, name, record

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._record(self._name, args)
        return self._kernel.run(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launcher = self._kernel[grid]

        def launch(*args: Any, **kwargs: Any) -> Any:
            self._record(self._name, args)
            return launcher(*args, **kwargs)

        return launch

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._kernel, attribute)


@contextmanager
def recording_arguments(module: ModuleType, kernel_names: list[str]) -> Iterator[list[tuple[str, list[LaunchArg]]]]:
    """Record (kernel name, arguments) for every launch of ``kernel_names`` while inside."""
    records: list[tuple[str, list[LaunchArg]]] = []

    def record(name: str, args: tuple[Any, ...]) -> None:
        records.append((name, [describe(value, position) for position, value in enumerate(args)]))

    namespace = module.__dict__
    saved = replace_kernels(namespace, kernel_names, lambda kernel, name: _RecordingKernel(kernel, name, record))
    try:
        yield records
    finally:
        namespace.update(saved)


def match_launches(records: list[tuple[str, list[LaunchArg]]],
                   timeline_keys: list[tuple[int, str]]) -> dict[int, tuple[str, list[LaunchArg]]]:
    """The n-th recorded call of a kernel is that kernel's n-th launch in the timeline."""
    by_name: dict[str, list[list[LaunchArg]]] = {}
    for name, args in records:
        by_name.setdefault(name, []).append(args)
    matched: dict[int, tuple[str, list[LaunchArg]]] = {}
    used: dict[str, int] = {}
    for order, name in timeline_keys:
        index = used.get(name, 0)
        calls = by_name.get(name, [])
        if index < len(calls):
            matched[order] = (name, calls[index])
            used[name] = index + 1
    return matched
