"""Single read: a looped reduction whose row fits on chip becomes a persistent kernel that reads it once.

``R0_BLOCK`` becomes the next power of two of the row, the ``for r0_offset`` loops are inlined
(persistent.py) and every pass after the first reuses the row it already loaded, so the kernel
moves its ideal bytes. ``XBLOCK`` rows per program (1-8) and ``num_warps`` (4-32) are chosen around
32 row elements per thread; whether a variant fits is read from the compiled kernel
(``RewriteContext.compile_probe``: variants that spill registers are dropped), and without a probe
an elements-per-thread bound stands in (cost_model.py).

What it gained where it was measured: docs/design-notes.md, "Measurements".
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from .base import Rewrite, RewriteContext, RewriteFamily
from .cost_model import (
    MAX_ELEMENTS_PER_THREAD,
    SINGLE_READ_MAX_ROW,
    elements_per_thread,
    near_speed_of_light,
    plan_text,
    probed_in_batches,
    reread_signal,
    traffic_plan,
)
from .kernel_source import KernelSourceError, LaunchConfig, next_pow2, parse_kernel_module, with_launch_config
from .persistent import unroll_row_loops
from .reduction_passes import NotTransformable, decompose

CPU_MAX_ROW = 16384  # the interpreter holds the row in numpy arrays: bounded only to stay quick
PROBED_MAX_ROW = 2 * SINGLE_READ_MAX_ROW  # with a compile probe, longer rows are tried (and dropped if they spill)
ROWS_PER_PROGRAM = (1, 2, 4, 8)
WARPS = (8, 16, 4, 32)  # in order of preference at equal elements per thread
MAX_VARIANTS = 6
MAX_PROBES = 10  # sm_90 compiles per kernel (a few seconds each)


class SingleReadFamily(RewriteFamily):
    name = "single_read"
    summary = ("a looped reduction whose row fits on chip made persistent: one read of the row, 1-8 rows per "
               "program, 4-32 warps, register limit from the compiled kernel")

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        module = ctx.module
        if not module.is_looped_reduction:
            return "not a looped reduction"
        if "r1_numel" in module.numels:
            return "two reduction dimensions"
        rnumel = module.numels.get("r0_numel")
        if rnumel is None:
            return "the row length is not fixed in the kernel"
        limit = CPU_MAX_ROW if ctx.on_cpu else (PROBED_MAX_ROW if ctx.can_probe else SINGLE_READ_MAX_ROW)
        if next_pow2(rnumel) > limit:
            return (f"rows of {rnumel} do not fit one program's registers (at most {limit} elements: "
                    f"{MAX_ELEMENTS_PER_THREAD} per thread at 32 warps)")
        if ("R0_BLOCK", "r0_numel") in module.divides_markers() and next_pow2(rnumel) != rnumel:
            return "a mask removal relies on R0_BLOCK dividing the row"
        near = near_speed_of_light(ctx)
        if near:
            return near
        return None

    def _configs(self, ctx: RewriteContext, row: int, rows: int) -> list[LaunchConfig]:
        if ctx.on_cpu:
            cap = max(1, 65536 // row)
            xblocks = sorted((x for x in (*ROWS_PER_PROGRAM, 16, 32, 64) if x <= cap and x <= next_pow2(rows)),
                             reverse=True)  # the interpreter pays per program: fewest programs first
            return [LaunchConfig.of({"XBLOCK": x}, 4, 1) for x in xblocks]
        limit = 2 * MAX_ELEMENTS_PER_THREAD if ctx.can_probe else MAX_ELEMENTS_PER_THREAD
        options = []
        for xblock in ROWS_PER_PROGRAM:
            if xblock > next_pow2(rows):
                continue
            for warps in WARPS:
                per_thread = elements_per_thread(xblock * row, warps)
                if 8 <= per_thread <= limit:
                    options.append((abs(math.log2(per_thread / 32)), WARPS.index(warps), xblock, warps))
        options.sort()
        return [LaunchConfig.of({"XBLOCK": x}, w, 1) for _, _, x, w in options]

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        module = ctx.module
        row = next_pow2(module.numels["r0_numel"])
        try:
            unrolled = parse_kernel_module(unroll_row_loops(module, row), module.name)
        except (KernelSourceError, SyntaxError):
            return []
        rows = module.numels.get("xnumel", module.size_hints.get("x", 1))
        plan = traffic_plan(ctx, self.declaration, [])
        try:
            reread = reread_signal(ctx, decompose(module))
        except NotTransformable:
            reread = None
        def sources() -> Iterator[tuple[LaunchConfig, str]]:
            for config in self._configs(ctx, row, rows):
                try:
                    yield config, with_launch_config(unrolled, config)
                except KernelSourceError:
                    continue

        out: list[Rewrite] = []
        probes = 0
        # The widest configs that may fit compile together, as many as could all become variants.
        for config, source, probed in probed_in_batches(ctx, sources(), MAX_VARIANTS):
            if len(out) >= (12 if ctx.on_cpu else MAX_VARIANTS) or probes >= MAX_PROBES:
                break
            assert source is not None
            probes += probed is not None
            if probed is not None and probed.does_not_fit:
                continue  # does not fit on chip at this width: the whole point is lost
            xblock = config.block("XBLOCK") or 1
            fit = (f"{probed.regs} registers, no spills" if probed and probed.regs is not None else
                   f"{elements_per_thread(xblock * row, config.num_warps):.0f} row elements per thread")
            out.append(Rewrite(
                family=self.name, title=f"single read, R0_BLOCK={row}, {config.label()}",
                detail=(f"row loops inlined, the row read once ({reread or 'one pass'}); {xblock} row(s) per "
                        f"program, {fit}; {plan_text(plan)}"),
                source=source,
                params={"R0_BLOCK": row, **config.to_json(), "registers": probed.regs if probed else None,
                        "efficiency": self.declaration.traffic_efficiency, **plan},
            ))
        return out
