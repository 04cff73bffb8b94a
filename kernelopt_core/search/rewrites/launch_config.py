"""Launch-configuration search wider than Inductor's: block sizes, ``num_warps``, ``num_stages``.

Inductor tries a handful of configs (e.g. XBLOCK in 1, 8, 32, 128 for persistent reductions,
and one config outside max-autotune). This family walks a larger grid, ordered by what the
tier says is likely to help; on the CPU interpreter every program costs a Python-level launch,
so fewer, larger programs come first there.
"""

from __future__ import annotations

import itertools
import math

from .base import Rewrite, RewriteContext, RewriteFamily
from .kernel_source import (
    KernelModule,
    KernelSourceError,
    LaunchConfig,
    next_pow2,
    numel_of,
    with_launch_config,
)

MAX_VARIANTS = 16
# Triton refuses tensors above 2**20 elements; register pressure makes far less sensible on a GPU.
GPU_MAX_BLOCK_NUMEL = 16384
CPU_MAX_BLOCK_NUMEL = 65536
GPU_MAX_XBLOCK = 8192  # the largest pointwise XBLOCK proposed on a GPU


def _pow2_range(low: int, high: int) -> list[int]:
    out, value = [], max(1, low)
    while value <= high:
        out.append(value)
        value *= 2
    return out


def block_choices(module: KernelModule, block: str, on_cpu: bool) -> list[int]:
    numel = numel_of(module, block) or 1024
    top = next_pow2(numel)
    if block.startswith("R"):
        values = _pow2_range(4 if on_cpu else 16, min(top, 16384))
    elif block == "XBLOCK" and module.heuristic in ("reduction", "persistent_reduction"):
        values = _pow2_range(1, min(top, 1024))
    else:
        values = _pow2_range(16 if not on_cpu else 8, min(top, GPU_MAX_XBLOCK if not on_cpu else 65536))
    for marked, divided in module.divides_markers():
        # "XBLOCK divides xnumel" (mask_removal) or "XBLOCK divides 4194304" (program_order's row length)
        if marked != block:
            continue
        if divided == numel_name(block):
            values = [v for v in values if numel % v == 0]
        elif divided.isdigit():
            values = [v for v in values if int(divided) % v == 0]
    return values or [min(top, 1)]


def numel_name(block: str) -> str:
    return {"XBLOCK": "xnumel", "YBLOCK": "ynumel", "ZBLOCK": "znumel", "R0_BLOCK": "r0_numel",
            "R1_BLOCK": "r1_numel"}[block]


def block_numel(module: KernelModule, config: LaunchConfig) -> int:
    total = 1
    for _, value in config.blocks:
        total *= value
    for name, value in module.fixed_blocks.items():
        if config.block(name) is None:
            total *= value
    return total


def program_count(module: KernelModule, config: LaunchConfig) -> int:
    count = 1
    for name, value in config.blocks:
        if name.startswith("R"):
            continue
        count *= math.ceil((numel_of(module, name) or value) / value)
    return count


def candidate_configs(ctx: RewriteContext, module: KernelModule | None = None) -> list[LaunchConfig]:
    """Configs for the kernel's block parameters, best first for this device and tier."""
    module = module or ctx.module
    blocks = module.block_params
    if not blocks:
        return []
    choices = [block_choices(module, b, ctx.on_cpu) for b in blocks]
    warps = [4] if ctx.on_cpu else [1, 2, 4, 8, 16]
    stages = [1] if ctx.on_cpu else [1, 2, 3, 4]
    cap = CPU_MAX_BLOCK_NUMEL if ctx.on_cpu else GPU_MAX_BLOCK_NUMEL
    configs = []
    for sizes in itertools.product(*choices):
        for w in warps:
            for s in stages:
                config = LaunchConfig.of(dict(zip(blocks, sizes, strict=True)), w, s)
                if block_numel(module, config) <= cap:
                    configs.append(config)
    skip = set(ctx.inductor_configs)
    if module.explicit_config is not None:
        skip.add(module.explicit_config)
    configs = [c for c in configs if c not in skip]
    return sorted(configs, key=lambda c: _score(ctx, module, c))


def _score(ctx: RewriteContext, module: KernelModule, config: LaunchConfig) -> tuple:
    programs = program_count(module, config)
    numel = block_numel(module, config)
    if ctx.on_cpu:
        # Interpreter: every program and every loop trip is Python-level work; fewest steps, then
        # the least padding.
        steps = programs
        rblock = config.block("R0_BLOCK")
        if rblock:
            steps *= math.ceil((numel_of(module, "R0_BLOCK") or rblock) / rblock)
        return (steps, numel, config.label())
    threads = config.num_warps * 32
    per_thread = numel / threads
    sms = ctx.multiprocessors
    occupancy_waves = programs / sms
    if ctx.tier == "underutilized":
        # More programs in flight, modest work per thread.
        return (occupancy_waves < 4, abs(math.log2(max(per_thread, 0.25)) - 2), config.num_stages, config.label())
    if ctx.tier == "compute-bound":
        return (occupancy_waves < 1, -config.num_stages, abs(math.log2(max(per_thread, 0.25)) - 4), config.label())
    if ctx.tier == "memory-bound":
        # Wide vector accesses (4-16 elements per thread) with enough waves to hide latency.
        return (occupancy_waves < 2, abs(math.log2(max(per_thread, 0.25)) - 3), config.num_stages, config.label())
    # Unknown or near-optimal: walk one step at a time from the current config (Inductor's at first).
    base = module.explicit_config or (ctx.inductor_configs[0] if ctx.inductor_configs else None)
    if base is None:
        return (abs(math.log2(max(per_thread, 0.25)) - 3), config.num_stages, config.label())
    distance = sum(abs(math.log2(config.block(b, 1) or 1) - math.log2(base.block(b, 1) or 1))
                   for b, _ in config.blocks)
    distance += abs(math.log2(config.num_warps) - math.log2(base.num_warps)) + abs(config.num_stages - base.num_stages)
    return (distance, config.label())


class LaunchConfigFamily(RewriteFamily):
    name = "launch_config"
    summary = ("fix an explicit launch configuration (XBLOCK/YBLOCK/R0_BLOCK, num_warps, num_stages) "
               "from a grid wider than Inductor's")

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        module = ctx.module
        if module.decorator is None:
            return "no @triton_heuristics decorator"
        if module.heuristic not in ("pointwise", "reduction", "persistent_reduction"):
            return f"{module.heuristic} kernels keep their launcher"
        if not module.block_params:
            return "no block-size meta-parameters"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        out = []
        for config in candidate_configs(ctx)[:MAX_VARIANTS]:
            try:
                source = with_launch_config(ctx.module, config)
            except KernelSourceError:
                continue
            programs = program_count(ctx.module, config)
            out.append(Rewrite(
                family=self.name, title=f"launch config {config.label()}",
                detail=f"{programs} program(s) of {block_numel(ctx.module, config)} elements",
                source=source, params=config.to_json(),
            ))
        return out
