"""Python source written to a file and imported from it as a module.

Triton reads a kernel's source from its file, so generated kernels, launchers and harnesses are
files of their own, named by their content, and imported under a unique module name.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType


def write_module_file(path: str, source: str) -> str:
    """Write ``source`` to ``path`` unless it already holds it; a concurrent reader never sees half."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == source:
                return path
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(source)
    os.replace(partial, path)
    return path


# kernelopt export writes this function's source into its standalone loader: the standard library only.
def import_module_file(path: str, module_name: str) -> ModuleType:
    """The file imported as ``module_name`` (the module already imported under it, if any).

    A file whose import raises leaves nothing under its name in ``sys.modules``, so a later call
    tries again instead of returning a half-run module.
    """
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
