"""``torch.compile(model, backend="kernelopt")``: Inductor, with the accepted kernels.

Imports torch inside functions only; runs in the user's process. ``mode`` and ``options`` are
passed through to Inductor as ``torch.compile`` would.
"""

from __future__ import annotations

from typing import Any

BACKEND_NAME = "kernelopt"


def kernelopt_backend(gm: Any, example_inputs: Any, mode: str | None = None,
                      options: dict[str, Any] | None = None) -> Any:
    """A dynamo backend: make sure the hook is in, then compile with Inductor."""
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx

    from .runtime_hook import install, is_installed

    if not is_installed():
        install()
    patches: dict[str, Any] = dict(list_mode_options(mode)) if mode else {}
    patches.update(options or {})
    return compile_fx(gm, example_inputs, config_patches=patches or None)


def register() -> bool:
    """Register the backend under ``"kernelopt"`` (idempotent). False when torch refuses."""
    from torch._dynamo.backends.registry import list_backends, register_backend

    try:
        if BACKEND_NAME in list_backends(exclude_tags=()):
            return True
    except TypeError:  # older signature
        if BACKEND_NAME in list_backends():
            return True
    try:
        register_backend(compiler_fn=kernelopt_backend, name=BACKEND_NAME)
    except Exception:  # noqa: BLE001 - e.g. already registered through the entry point
        return False
    return True
