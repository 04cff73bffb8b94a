"""What the launcher families that change a looped reduction's algorithm share.

``cooperative_rows`` and ``split_programs`` both spread a row over programs that exchange partials
through scratch: neither pays on the CPU interpreter, which runs programs one at a time, and both
need the kernel's passes read (:func:`.reduction_passes.decompose`).
"""

from __future__ import annotations

from .base import RewriteContext, RewriteFamily
from .reduction_passes import NotTransformable, ReductionKernel, decompose


class ReductionLauncherFamily(RewriteFamily):
    cpu_reason: str  # why the family never pays on the CPU interpreter

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if ctx.on_cpu:
            return self.cpu_reason
        try:
            kernel = decompose(ctx.module)
        except NotTransformable as exc:
            return str(exc)
        return self.declines(ctx, kernel)

    def declines(self, ctx: RewriteContext, kernel: ReductionKernel) -> str | None:
        """Why the family does not rewrite this reduction (None: it does)."""
        raise NotImplementedError
