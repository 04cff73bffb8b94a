"""A project's own Triton kernels: discovery without executing anything, static hints, harnesses,
launch capture and the gates for hand-written ``@triton.jit`` code (docs/user-kernels.md).

The modules named ``*_worker``-side in their docstrings import torch inside functions only; the
rest (model, parse, hints, extract, dialect, index) never import torch or triton.
"""

from .model import AccessSite, AutotuneSpec, ConfigSpec, DotSite, LaunchSite, UserKernel, UserKernelFile
from .parse import UserKernelError, looks_like_user_kernels, parse_user_kernels, read_user_file

__all__ = [
    "AccessSite", "AutotuneSpec", "ConfigSpec", "DotSite", "LaunchSite", "UserKernel", "UserKernelError",
    "UserKernelFile", "looks_like_user_kernels", "parse_user_kernels", "read_user_file",
]
