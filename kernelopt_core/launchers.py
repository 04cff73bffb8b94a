"""Launcher candidates: one Inductor kernel launch replaced by a Python function of our own.

A *plain* candidate is a kernel module like Inductor's. A *launcher* candidate changes the
algorithm: its module defines any number of ``@triton.jit`` kernels and one plain function with
the kernel's own name, taking the same runtime parameters in the same order, that launches them
on the current stream (the stream Inductor passes). It may allocate scratch with
``torch.empty``/``empty_like``/``zeros``/``zeros_like`` on its arguments' device and use nothing
else of torch (gate 1 checks exactly this).

Re-stitching swaps only the source literal; whoever loads a re-stitched graph routes launcher
sources through :func:`load_launcher` with :func:`routing_launchers`. torch is imported only
inside functions that need it. An example launcher: docs/launchers.md.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .module_files import import_module_file, write_module_file

SCRATCH_FUNCTIONS = ("empty", "empty_like", "zeros", "zeros_like")
_LOCK = threading.Lock()


def launcher_function(source: str, kernel_name: str) -> ast.FunctionDef | None:
    """The module-level, undecorated ``def <kernel_name>`` of a launcher module, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel_name and not node.decorator_list:
            return node
    return None


def is_launcher_source(source: str, kernel_name: str) -> bool:
    """True when ``source`` is a launcher module for ``kernel_name`` (pure ``ast``, runs nothing)."""
    return launcher_function(source, kernel_name) is not None


def source_key(kernel_name: str, source: str) -> str:
    return hashlib.sha256((kernel_name + "\0" + source).encode("utf-8")).hexdigest()[:24]


class LauncherKernel:
    """Stands where Inductor's ``CachingAutotuner`` stood: ``.run(*args, stream=...)`` calls the launcher.

    ``stream`` is accepted and not used: Triton's ``kernel[grid](...)`` launches on the current
    stream, the one Inductor's ``get_raw_stream`` returned.
    """

    is_launcher = True

    def __init__(self, name: str, function: Callable[..., Any], source: str, path: str):
        self.name = name
        self.fn = function
        self.source = source
        self.path = path
        self.configs: list[Any] = []  # read by code that lists a kernel's autotuning configs

    def run(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"launcher {self.name} takes the wrapper's positional arguments only, "
                            f"not {', '.join(sorted(kwargs))}")
        self.fn(*args)

    def __repr__(self) -> str:
        return f"LauncherKernel({self.name!r}, {self.path!r})"


def launcher_directory() -> str:
    """Where launcher modules are written (Triton's ``@jit`` reads a function's source from its file)."""
    root = os.environ.get("KERNELOPT_LAUNCHER_DIR")
    if root:
        return root
    base = os.environ.get("KERNELOPT_CACHE_DIR") or os.path.join(tempfile.gettempdir(), f"kernelopt-{os.getuid()}")
    return os.path.join(base, "launchers")


def load_launcher(kernel_name: str, source: str, device_str: str = "cuda",
                  directory: str | None = None) -> LauncherKernel:
    """Import a launcher module from a file and return its launcher as a kernel object.

    Raises ``ValueError`` when the source is not a launcher module for ``kernel_name``; whatever
    the module raises at import propagates (the gates turn it into a verdict).
    """
    if not is_launcher_source(source, kernel_name):
        raise ValueError(f"the source is not a launcher module: it defines no undecorated `def {kernel_name}`")
    key = source_key(kernel_name, source)
    module_name = f"kernelopt_launcher_{key}"
    with _LOCK:
        module = sys.modules.get(module_name)
        if module is None:
            path = os.path.join(directory or launcher_directory(), f"{module_name}.py")
            module = import_module_file(write_module_file(path, source), module_name)
    function = getattr(module, kernel_name, None)
    if not callable(function):
        raise ValueError(f"the launcher module defines no callable {kernel_name}")
    return LauncherKernel(kernel_name, function, source, str(getattr(module, "__file__", "")))


@contextmanager
def routing_launchers(directory: str | None = None) -> Iterator[None]:
    """While inside, Inductor's ``AsyncCompile.triton`` hands launcher sources to :func:`load_launcher`.

    Plain kernel modules go to Inductor as before. Used around importing a re-stitched wrapper.
    """
    from torch._inductor.async_compile import AsyncCompile

    original = AsyncCompile.triton

    def triton(self: Any, kernel_name: str, source_code: str, device_str: str = "cuda") -> Any:
        if is_launcher_source(source_code, kernel_name):
            return load_launcher(kernel_name, source_code, device_str, directory)
        return original(self, kernel_name, source_code, device_str)

    AsyncCompile.triton = triton
    try:
        yield
    finally:
        AsyncCompile.triton = original


__all__ = ["SCRATCH_FUNCTIONS", "LauncherKernel", "is_launcher_source", "launcher_function", "load_launcher",
           "routing_launchers"]
