"""The offline rewrite families: genuine source rewrites of Inductor's Triton kernels.

Each family reads a :class:`RewriteContext` and proposes deterministic, ordered variants; every
variant goes through the same gates as an LLM-written kernel. ``single_read``, ``cooperative_rows``
and ``split_programs`` change the algorithm of a looped reduction (reduction_passes.py reads its
passes); the last two propose launcher candidates (docs/launchers.md).
"""

from __future__ import annotations

from .base import Rewrite, RewriteContext, RewriteFamily
from .channel_groups import ChannelGroupsFamily
from .cooperative_rows import CooperativeRowsFamily
from .declaration import CauseCall, FamilyDeclaration, register_families
from .eviction import EvictionHintsFamily
from .fast_math import FastMathFamily
from .int32_index import Int32IndexFamily
from .kernel_source import KernelModule, KernelSourceError, LaunchConfig, parse_kernel_module
from .launch_config import LaunchConfigFamily
from .masks import MaskRemovalFamily
from .program_order import ProgramOrderFamily
from .shifted_moments import ShiftedMomentsFamily
from .single_read import SingleReadFamily
from .split_programs import SplitProgramsFamily
from .split_reduction import SplitReductionFamily
from .strided import StridedAccessFamily
from .user_kernel import UserAutotuneFamily, UserFastMathFamily
from .vector_hints import VectorHintsFamily
from .windowed import WindowedFamily

# Each family with its declaration (declaration.py): the analyst's directions and causes that call for
# it, its place in each device's default order, and the share of its traffic bound it reaches. The
# planner's tables and the cost model's figures are derived from these alone.
# Default orders: on the CPU interpreter per-program and per-loop-trip overhead dominates, so launch
# shape comes first; on a GPU, memory traffic.
FAMILIES: dict[str, RewriteFamily] = register_families(
    (LaunchConfigFamily(), FamilyDeclaration(
        directions={"vectorize-loads": 1, "tile-tuning": 1, "more-programs": 3, "smaller-blocks-more-warps": 1,
                    "reduce-register-pressure": 3, "raise-occupancy": 1, "coalesce-access": 2,
                    "l2-friendly-order": 3},
        causes=(), device_order={"cpu": 2, "cuda": 3}, traffic_efficiency=None)),
    # Traffic efficiencies: the measured share of the traffic bound (benchmarks/explore/README.md).
    (SingleReadFamily(), FamilyDeclaration(
        directions={"fuse-rereads": 1},
        causes=(CauseCall("re-reads", "algorithm", 1),),
        device_order={"cpu": 3, "cuda": 4}, traffic_efficiency=0.94)),
    (CooperativeRowsFamily(), FamilyDeclaration(
        directions={"fuse-rereads": 2, "more-programs": 2},
        causes=(CauseCall("low-parallelism", "algorithm", 2), CauseCall("re-reads", "algorithm", 2)),
        device_order={"cpu": 12, "cuda": 5}, traffic_efficiency=0.80)),
    (SplitProgramsFamily(), FamilyDeclaration(
        directions={"more-programs": 1},
        causes=(CauseCall("low-parallelism", "algorithm", 1),),
        device_order={"cpu": 8, "cuda": 6}, traffic_efficiency=0.80)),
    (SplitReductionFamily(), FamilyDeclaration(
        directions={"reduce-register-pressure": 1},
        causes=(), device_order={"cpu": 7, "cuda": 12}, traffic_efficiency=None)),
    (MaskRemovalFamily(), FamilyDeclaration(
        directions={}, causes=(), device_order={"cpu": 4, "cuda": 9}, traffic_efficiency=None)),
    # On a GPU program_order goes before launch_config: it applies only where the source shows shared
    # data bigger than an L2 share re-read per row, and launch_config first spent such a kernel's search time.
    (ProgramOrderFamily(), FamilyDeclaration(
        directions={"l2-friendly-order": 1},
        causes=(CauseCall("re-reads", "algorithm", 3, pointwise_only=True), CauseCall("l2-thrash", "later", 1)),
        device_order={"cpu": 13, "cuda": 2}, traffic_efficiency=None)),
    (EvictionHintsFamily(), FamilyDeclaration(
        directions={"eviction-hints": 1, "l2-friendly-order": 2},
        causes=(CauseCall("l2-thrash", "later", 2),),
        device_order={"cpu": 9, "cuda": 7}, traffic_efficiency=None)),
    (VectorHintsFamily(), FamilyDeclaration(
        directions={"vectorize-loads": 2, "coalesce-access": 1},
        causes=(), device_order={"cpu": 10, "cuda": 8}, traffic_efficiency=None)),
    (FastMathFamily(), FamilyDeclaration(
        directions={"cheaper-math": 1}, causes=(), device_order={"cpu": 5, "cuda": 10}, traffic_efficiency=None)),
    (Int32IndexFamily(), FamilyDeclaration(
        directions={"reduce-register-pressure": 2},
        causes=(), device_order={"cpu": 11, "cuda": 13}, traffic_efficiency=None)),
    # Launchers (docs/launchers.md): only where a measured or source-read cause calls for them, before
    # the algorithmic families; they apply only to kernels they recognise exactly.
    (WindowedFamily(), FamilyDeclaration(
        directions={}, causes=(CauseCall("strided-access", "launcher", 1),), device_order={},
        traffic_efficiency=None)),
    (StridedAccessFamily(), FamilyDeclaration(
        directions={},
        causes=(CauseCall("strided-access", "launcher", 2), CauseCall("low-parallelism", "launcher", 1)),
        device_order={}, traffic_efficiency=None)),
    # Applies only to looped Welford statistics (group/instance/batch norm after a conv or GEMM, level 2), so an
    # early place costs other kernels nothing: per element it saves Welford's division (docs/optimizer.md).
    (ShiftedMomentsFamily(), FamilyDeclaration(
        directions={"cheaper-math": 1, "vectorize-loads": 2},
        causes=(), device_order={"cpu": 2, "cuda": 2}, traffic_efficiency=None)),
    # Applies only to statistics of a channels-last tensor whose rows read part of each pixel (a group or
    # instance norm after a conv, level 2). Slower than Inductor's kernel in every form measured on the H100
    # (Welford and shifted sums, [C, PIX] and [PIX, C]: 0.35-0.68 ms against 0.23 ms on problem 92, 1.6-2.3 ms
    # against 0.50 ms on problem 21), although session 19's hand-written kernel of the same tile and grid took
    # 0.18 ms; until that difference is found (benchmarks/gpu/README.md), nothing calls for it and no device
    # tries it by default. A planner (or KERNELOPT_LEVEL2_FAMILIES) may still name it. Its efficiency is the
    # best measured: 520 MB in 0.55 ms at a 3,016 GB/s copy peak.
    (ChannelGroupsFamily(), FamilyDeclaration(
        directions={}, causes=(), device_order={}, traffic_efficiency=0.31)),
    # A project's own kernels (docs/user-kernels.md); not applicable to Inductor's.
    (UserAutotuneFamily(), FamilyDeclaration(
        directions={}, causes=(), device_order={"cpu": 1, "cuda": 1}, traffic_efficiency=None)),
    (UserFastMathFamily(), FamilyDeclaration(
        directions={}, causes=(), device_order={"cpu": 6, "cuda": 11}, traffic_efficiency=None)),
)


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
    "FAMILIES", "CauseCall", "FamilyDeclaration", "KernelModule", "KernelSourceError", "LaunchConfig", "Rewrite",
    "RewriteContext", "RewriteFamily", "applicable_families", "parse_kernel_module",
]
