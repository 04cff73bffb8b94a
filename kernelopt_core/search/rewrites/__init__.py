"""The offline rewrite families: genuine source rewrites of Inductor's Triton kernels.

Each family reads a :class:`RewriteContext` and proposes deterministic, ordered variants; every
variant goes through the same gates as an LLM-written kernel. ``single_read``, ``cooperative_rows``
and ``split_programs`` change the algorithm of a looped reduction (reduction_passes.py reads its
passes); the last two propose launcher candidates (docs/launchers.md).
"""

from __future__ import annotations

from .base import Rewrite, RewriteContext, RewriteFamily
from .cooperative_rows import CooperativeRowsFamily
from .eviction import EvictionHintsFamily
from .fast_math import FastMathFamily
from .int32_index import Int32IndexFamily
from .kernel_source import KernelModule, KernelSourceError, LaunchConfig, parse_kernel_module
from .launch_config import LaunchConfigFamily
from .masks import MaskRemovalFamily
from .program_order import ProgramOrderFamily
from .single_read import SingleReadFamily
from .split_programs import SplitProgramsFamily
from .split_reduction import SplitReductionFamily
from .strided import StridedAccessFamily
from .user_kernel import UserAutotuneFamily, UserFastMathFamily
from .vector_hints import VectorHintsFamily
from .windowed import WindowedFamily

FAMILIES: dict[str, RewriteFamily] = {
    family.name: family
    for family in (
        LaunchConfigFamily(), SingleReadFamily(), CooperativeRowsFamily(), SplitProgramsFamily(),
        SplitReductionFamily(), MaskRemovalFamily(), ProgramOrderFamily(), EvictionHintsFamily(), VectorHintsFamily(),
        FastMathFamily(), Int32IndexFamily(),
        WindowedFamily(), StridedAccessFamily(),  # launchers (docs/launchers.md)
        # a project's own kernels (docs/user-kernels.md); not applicable to Inductor's
        UserAutotuneFamily(), UserFastMathFamily(),
    )
}


def applicable_families(ctx: RewriteContext) -> dict[str, str | None]:
    """Family name -> None when it applies to the kernel, else the reason it does not."""
    status: dict[str, str | None] = {}
    for name, family in FAMILIES.items():
        try:
            status[name] = family.not_applicable(ctx)
        except Exception as exc:  # noqa: BLE001 - one family's blind spot must not stop the search
            status[name] = f"could not read this kernel ({type(exc).__name__}: {exc})"
    return status


__all__ = [
    "FAMILIES", "KernelModule", "KernelSourceError", "LaunchConfig", "Rewrite", "RewriteContext",
    "RewriteFamily", "applicable_families", "parse_kernel_module",
]
