"""Runtime integration for users' own programs: ``import kernelopt; kernelopt.enable()``.

After ``enable()``, every ``torch.compile`` in this process loads the accepted kernels from the
project's accepted-kernel store (``.kernelopt/accepted/``, or ``$KERNELOPT_ACCEPTED_DIR``) in
place of the Triton kernels Inductor wrote, under the safety rules in docs/deploy.md. ``enable()``
says which kernels it can replace (and why it may replace none, e.g. a CPU without the CPU Triton
backend); each replacement is logged once on the ``"kernelopt"`` logger; a process that replaced
nothing says why at exit, and ``kernelopt.summary()`` says it at any time. ``KERNELOPT_DISABLE=1``
turns it off.
``torch.compile(model, backend=kernelopt.backend)`` does the same for one model (the name
``"kernelopt"`` works too once ``enable()`` ran, or when the package's entry point is installed).

Importing this package does not import torch; ``enable()`` does.
"""

from __future__ import annotations

from typing import Any

from kernelopt_core.deploy.runtime_hook import DISABLE_ENV, EnableReport, Substitution

__all__ = ["DISABLE_ENV", "EnableReport", "Substitution", "backend", "disable", "enable", "is_enabled",
           "substitutions", "summary"]


def enable(store: str | None = None, *, announce: bool = True) -> EnableReport:
    """Use accepted kernels in this process's ``torch.compile``; call it before compiling.

    ``store``: the accepted-kernel folder (default: the project's ``.kernelopt/accepted``).
    ``announce``: show kernelopt's log lines on stderr when logging is not configured.
    """
    from kernelopt_core.deploy import compile_backend, runtime_hook

    report = runtime_hook.install(store, announce=announce)
    if report.enabled:
        compile_backend.register()
    return report


def disable() -> None:
    """Stop replacing kernels (graphs already compiled keep the kernels they loaded)."""
    from kernelopt_core.deploy import runtime_hook

    if runtime_hook.is_installed():
        runtime_hook.uninstall()


def is_enabled() -> bool:
    from kernelopt_core.deploy import runtime_hook

    return runtime_hook.is_installed() and not runtime_hook.disabled_by_env()


def substitutions() -> list[Substitution]:
    """The kernels replaced so far in this process."""
    from kernelopt_core.deploy import runtime_hook

    return runtime_hook.substitutions()


def summary() -> str:
    """One line: the accepted kernels in use in this process, or why none is (nothing loaded matched,
    no Triton kernel was loaded, the store had nothing usable, ...)."""
    from kernelopt_core.deploy import runtime_hook

    return runtime_hook.usage_summary()


def backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """A ``torch.compile`` backend: Inductor with the accepted kernels (enables them if needed)."""
    from kernelopt_core.deploy.compile_backend import kernelopt_backend

    return kernelopt_backend(gm, example_inputs, **kwargs)
