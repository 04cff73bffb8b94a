"""What the launcher-writing families share: the kernel's runtime parameters, the launch's tensors
from the analyst's evidence, the ideal bytes a plan targets, and the module header.

A launcher candidate (docs/launchers.md) is a module of ``@triton.jit`` kernels plus one plain
``def <kernel name>(<runtime parameters>)`` that launches them; the wrapper calls it in place of
the kernel's ``.run(...)``. Pure Python: nothing here imports torch or triton.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ...launchers import is_launcher_source
from .base import RewriteContext, RewriteFamily
from .kernel_source import KernelModule

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"
# Above this share of the speed of light a launcher has too little headroom to pay for itself.
NEAR_SPEED_OF_LIGHT_PCT = 90.0
DTYPES = {"torch.float32": "tl.float32", "torch.float16": "tl.float16", "torch.bfloat16": "tl.bfloat16"}


def runtime_params(module: KernelModule) -> list[str]:
    """The parameters the wrapper passes (pointers and numels), in order: the launcher's signature."""
    return [p for p in module.params if p not in module.constexpr_params]


def is_launcher(module: KernelModule) -> bool:
    return is_launcher_source(module.text, module.name)


def launch_tensor(ctx: RewriteContext, name: str) -> dict[str, Any] | None:
    """The evidence's record of the tensor passed as ``name`` (shape, stride, dtype, storage bytes)."""
    for arg in ctx.evidence.get("launch_args") or []:
        if isinstance(arg, dict) and arg.get("name") == name and arg.get("shape") is not None:
            return arg
    return None


def contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))


def is_contiguous(arg: dict[str, Any]) -> bool:
    shape, stride = list(arg.get("shape") or []), list(arg.get("stride") or [])
    if len(shape) != len(stride):
        return False
    return all(st == want for size, st, want in zip(shape, stride, contiguous_strides(shape), strict=True)
               if size != 1)


def numel(shape: list[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def ideal_bytes(ctx: RewriteContext, tensors: list[dict[str, Any]]) -> int | None:
    """The analyst's ideal bytes for the launch, else the sum of the tensors' storage extents."""
    known = ctx.evidence.get("ideal_bytes")
    if isinstance(known, int) and known > 0:
        return known
    sizes = [t.get("storage_bytes") for t in tensors]
    whole = [s for s in sizes if isinstance(s, int)]
    return sum(whole) if sizes and len(whole) == len(sizes) else None


def headroom_reason(ctx: RewriteContext, *wanted: str) -> str | None:
    """Why the evidence says a launcher cannot pay here, or None: near the speed of light, or
    measured causes that include none of ``wanted``. No evidence (the CPU backend) never declines."""
    sol = ctx.evidence.get("sol_pct")
    if isinstance(sol, (int, float)) and sol >= NEAR_SPEED_OF_LIGHT_PCT:
        return f"already at {sol:.0f}% of the speed of light: no traffic left to remove"
    causes = ctx.evidence.get("causes")
    if isinstance(sol, (int, float)) and isinstance(causes, list) and causes and not set(causes) & set(wanted):
        return f"the analyst's causes ({', '.join(causes)}) do not include {' or '.join(wanted)}"
    return None


def sol_text(ctx: RewriteContext) -> str:
    sol = ctx.evidence.get("sol_pct")
    return f"{sol:.0f}% of the speed of light now" if isinstance(sol, (int, float)) else "speed of light not measured"


def bytes_label(value: int | None) -> str:
    if value is None:
        return "unknown"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value} B"


class NotRecognised(ValueError):
    """The kernel is not one a launcher family rewrites exactly; the message says where it differs."""


Found = TypeVar("Found")


class RecognisingLauncherFamily(RewriteFamily, Generic[Found]):
    """A family that replaces an Inductor kernel it recognises exactly (a strided access, a pooling
    window) by a launcher that reads one tensor once and writes one once."""

    causes: tuple[str, ...]  # the analyst's causes its launchers remove
    recognises: str  # what it recognises, named when it declines

    def recognise_kernel(self, ctx: RewriteContext) -> Found:
        """What the family recognises in the kernel, or :class:`NotRecognised`."""
        raise NotImplementedError

    def declines(self, ctx: RewriteContext, found: Found) -> str | None:
        """Why the family declines what it recognised before the evidence is asked (None: it does not)."""
        return None

    def recognise(self, ctx: RewriteContext) -> Found:
        if is_launcher(ctx.module):
            raise NotRecognised("the kernel is already a launcher")
        return self.recognise_kernel(ctx)

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if ctx.module.text != ctx.original.text:
            return "rewrites Inductor's own kernel only (this node is already a rewrite)"
        try:
            found = self.recognise(ctx)
        except NotRecognised as exc:
            return f"no {self.recognises} recognised: {exc}"
        return self.declines(ctx, found) or headroom_reason(ctx, *self.causes)

    def target_bytes(self, ctx: RewriteContext, in_param: str, out_param: str) -> int | None:
        """The ideal bytes of the launch: the tensor ``in_param`` read once, ``out_param`` written once."""
        tensors = [t for t in (launch_tensor(ctx, in_param), launch_tensor(ctx, out_param)) if t]
        return ideal_bytes(ctx, tensors)


__all__ = ["DTYPES", "HEADER", "NEAR_SPEED_OF_LIGHT_PCT", "bytes_label", "contiguous_strides", "headroom_reason",
           "ideal_bytes", "is_contiguous", "is_launcher", "launch_tensor", "numel", "runtime_params", "sol_text",
           "NotRecognised", "RecognisingLauncherFamily"]
