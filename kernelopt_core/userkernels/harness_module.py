"""The harness as a "graph module" a contained process can load: ``get_args()`` and ``call(args)``.

Gates 3 and 4 run the user's harness with a candidate in place of the kernel, each side in its
own process (:mod:`kernelopt_core.sandbox`, commands ``load_graph``, ``make_inputs``,
``run_graph`` and ``repeat``). Those commands load a module that has ``get_args()`` and
``call(args)``, as an Inductor wrapper does; :func:`harness_module_source` writes one for a user
kernel: it imports the user's kernel file and harness, imports the candidate's kernel module (a
file of its own: Triton reads a kernel's source from its file) and puts the candidate's kernel
object wherever a module holds the original one, so the user's wrapper launches the candidate.

``get_args()`` draws the harness's inputs under the seed the caller set with
``torch.manual_seed`` (:func:`kernelopt_core.graph_module.make_inputs` does). Runs only in a
worker or a candidate process (imports torch and the user's code).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from ..module_files import import_module_file, write_module_file
from .harness import HarnessSpec, LoadedHarness
from .runtime import prepare_kernel


def harness_module_source(config: dict[str, Any]) -> str:
    """``config``: kernel_file, kernel, harness (a HarnessSpec's JSON), device, candidate_file (or None)."""
    return ("# KernelOPT: a user kernel's harness as a module with get_args() and call(args) (generated).\n"
            "from kernelopt_core.userkernels.harness_module import HarnessRuntime as _KoHarnessRuntime\n\n"
            f"_KO_RUNTIME = _KoHarnessRuntime({json.dumps(config)!r})\n"
            "get_args = _KO_RUNTIME.get_args\n"
            "call = _KO_RUNTIME.call\n")


def write_harness_module(folder: str, config: dict[str, Any]) -> str:
    source = harness_module_source(config)
    name = f"harness_{hashlib.sha256(source.encode()).hexdigest()[:16]}.py"
    return write_module_file(os.path.join(folder, name), source)


def write_candidate_module(folder: str, kernel: str, source: str) -> str:
    digest = hashlib.sha256((kernel + "\0" + source).encode()).hexdigest()[:16]
    return write_module_file(os.path.join(folder, f"kernelopt_candidate_{kernel}_{digest}.py"), source)


def import_file(path: str, prefix: str = "kernelopt_module") -> Any:
    return import_module_file(path, f"{prefix}_{hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]}")


def substitute(original: Any, replacement: Any) -> int:
    """Make every module attribute that holds ``original`` hold ``replacement``; returns how many."""
    count = 0
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attribute, value in list(namespace.items()):
            if value is original:
                setattr(module, attribute, replacement)
                count += 1
    return count


class HarnessRuntime:
    def __init__(self, config_json: str):
        config = json.loads(config_json)
        self.harness = LoadedHarness(HarnessSpec.from_json(config["harness"]), config["kernel_file"],
                                     config["kernel"], config["device"])
        prepare_kernel(self.harness.kernel_object)
        self.candidate: Any = None
        if config.get("candidate_file"):
            self.install_candidate(config["candidate_file"], config["kernel"])

    def install_candidate(self, path: str, name: str) -> Any:
        """Import the candidate module at ``path`` and put its kernel ``name`` wherever a module holds the
        original kernel (the sanitizer's target does this after containing itself, with a renamed kernel)."""
        module = import_file(path, "kernelopt_candidate")
        candidate = getattr(module, name, None)
        if candidate is None:
            raise ValueError(f"the candidate module defines no {name}")
        self.candidate = prepare_kernel(candidate)
        substitute(self.harness.kernel_object, candidate)
        return candidate

    def get_args(self) -> list[Any]:
        import torch

        return self.harness.make_inputs(int(torch.initial_seed()))

    def call(self, args: list[Any]) -> Any:
        return self.harness.run(list(args))


__all__ = ["HarnessRuntime", "harness_module_source", "import_file", "substitute", "write_candidate_module",
           "write_harness_module"]
