"""The compilers' source hashes, computed once in a process that forks or serves many compiles.

Shared by the zygotes (before they fork) and a spare candidate process (while it warms up).
"""

from __future__ import annotations


def hash_the_compilers_once() -> None:
    """Loading an Inductor kernel module keys its autotune cache by a hash of torch's sources, and
    Triton keys each compile by a hash of its own sources and library: about a second each, paid by
    every compile process unless the zygote computes them once for all its children (both are
    cached in the process; neither starts a thread)."""
    import importlib

    for module, function in (("torch._inductor.codecache", "torch_key"), ("triton.runtime.cache", "triton_key"),
                             ("triton.compiler.compiler", "triton_key")):
        try:
            getattr(importlib.import_module(module), function)()
            if function == "triton_key":
                break  # Triton 3.9 has it in runtime.cache, older ones in compiler.compiler
        except Exception:  # noqa: BLE001 - another torch or Triton: each child hashes for itself
            continue
