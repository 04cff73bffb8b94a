"""A project's own Triton kernels: discovery without executing anything, static hints, harnesses,
launch capture and the gates for hand-written ``@triton.jit`` code (docs/user-kernels.md).

No torch or triton at import anywhere here. ``model``, ``parse``, ``hints``, ``extract``,
``index``, ``dialect``, ``launcher``, ``target`` are pure (the language server uses them);
``harness``, ``capture``, ``runtime``, ``harness_module`` and ``jobs`` run in a worker or a
candidate process and import torch inside their functions; ``cascade``, ``cli`` and ``ncu_run``
drive them from the CLI process (the search measures a target with
:mod:`kernelopt_core.search.user_kernel_evaluation`).
"""

from .model import AccessSite, AutotuneSpec, ConfigSpec, DotSite, LaunchSite, UserKernel, UserKernelFile
from .parse import UserKernelError, looks_like_user_kernels, parse_user_kernels, read_user_file

__all__ = [
    "AccessSite", "AutotuneSpec", "ConfigSpec", "DotSite", "LaunchSite", "UserKernel", "UserKernelError",
    "UserKernelFile", "looks_like_user_kernels", "parse_user_kernels", "read_user_file",
]
