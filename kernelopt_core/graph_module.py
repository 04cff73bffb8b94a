"""Load a dump's wrapper as a Python module and call it on inputs. Imports torch: workers only.

A wrapper compiled for the CPU Triton backend needs :mod:`kernelopt_core.backends.cpu_triton`
active before it is imported; :func:`load_graph_module` does that when the graph's device is cpu.
"""

from __future__ import annotations

import hashlib
import os
import sys
from types import ModuleType
from typing import Any

from .artifacts.model import CompiledGraph
from .module_files import import_module_file


def prepare_backend(device: str | None) -> None:
    """Activate the CPU Triton backend when there is no GPU to run a graph on."""
    if device in (None, "cpu") or os.environ.get("KERNELOPT_CPU_TRITON") == "1":
        from .backends import cpu_triton

        cpu_triton.activate()


def load_graph_module(path: str, device: str | None = None, module_name: str | None = None) -> ModuleType:
    """Import a wrapper file under a unique module name (loading it compiles its kernels)."""
    prepare_backend(device)
    path = os.path.abspath(path)
    if module_name is None:
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]
        module_name = f"kernelopt_graph_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    from .launchers import routing_launchers

    with routing_launchers():  # a re-stitched launcher candidate loads as a LauncherKernel
        return import_module_file(path, module_name)


def make_inputs(module: ModuleType, seed: int) -> list[Any]:
    """Fresh random inputs for the graph from its own ``get_args`` (never zeros)."""
    import torch

    torch.manual_seed(seed)
    if hasattr(module, "get_args"):
        return list(module.get_args())
    raise AttributeError("the wrapper has no get_args(); its inputs cannot be made")


def call_graph(module: ModuleType, inputs: list[Any]) -> Any:
    """Call the compiled graph; ``call`` clears the list it is given, so pass a copy."""
    return module.call(list(inputs))


def graph_device(graph: CompiledGraph) -> str:
    return graph.device or "cuda"
