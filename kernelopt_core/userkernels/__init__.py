"""A project's own Triton kernels: discovery without executing anything, static hints, harnesses,
launch capture and the gates for hand-written ``@triton.jit`` code (docs/user-kernels.md).

No torch or triton at import anywhere here. ``model``, ``parse``, ``hints``, ``extract``,
``index``, ``dialect``, ``launcher``, ``target`` are pure (the language server uses them);
``harness``, ``capture``, ``runtime``, ``harness_module`` and ``tasks`` run in a worker or a
candidate process and import torch inside their functions; ``cascade``, ``measurements``, ``cli`` and ``ncu_run``
drive them from the CLI process (the search measures a target with
:class:`kernelopt_core.search.evaluation.GateEvaluator`).
"""

from .model import AccessSite, AutotuneSpec, ConfigSpec, DotSite, LaunchSite, UserKernel, UserKernelFile
from .parse import UserKernelError, looks_like_user_kernels, parse_user_kernels, read_user_file

__all__ = [
    "AccessSite", "AutotuneSpec", "ConfigSpec", "DotSite", "LaunchSite", "UserKernel", "UserKernelError",
    "UserKernelFile", "looks_like_user_kernels", "parse_user_kernels", "read_user_file",
]
