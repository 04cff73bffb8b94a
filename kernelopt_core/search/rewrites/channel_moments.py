"""Shifted sums for channel_groups' tile: a Welford statistic without a division per element.

Inside channel_groups' [PIX, C] tile, Inductor's ``welford_reduce`` divides by a lane's count for every
element it adds. Here each lane keeps instead ``d = x - K_c`` and ``d * d``, where the shift ``K_c`` is
channel c's mean over the chunk's first step of pixels. After the loop each channel's sums give its
mean ``K_c + S1 / n`` and M2 ``S2 - S1 * S1 / n``, and Welford's own combine folds a group's channels into
its row: the partials the finish kernel combines are Welford's, as before. Special values follow
shifted_moments (``+ S1 * 0``: NaN where a sum is not finite); M2 is formed in float64. Pure Python.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .reduction_passes import NotTransformable, Pass, Reduction, Stmt, is_call
from .shifted_moments import (
    CHANNEL_AXIS,
    ROW_MASKS,
    WELFORD_STEP,
    NotShiftable,
    moment_lines,
    read_welford_step,
    shifted_step_lines,
)


@dataclass(frozen=True)
class ChannelSite:
    """One ``welford_reduce`` of a pass body, its three accumulator updates and the reduction combining them."""

    index: int
    step: Stmt
    updates: tuple[Stmt, ...]
    reduction: Reduction
    value: str
    mask: str | None

    @property
    def prefix(self) -> str:
        return f"_ko_w{self.index}"


def welford_sites(p: Pass) -> list[ChannelSite]:
    """The pass's Welford steps, each with its updates and post-loop combine; raises NotTransformable otherwise."""
    sites: list[ChannelSite] = []
    body = p.body
    for position, stmt in enumerate(body):
        if not (isinstance(stmt.node, ast.Assign) and is_call(stmt.node.value, WELFORD_STEP)):
            continue
        try:
            read = read_welford_step([s.node for s in body], position)
        except NotShiftable as exc:
            raise NotTransformable(str(exc)) from exc
        reductions = [r for r in p.reductions if tuple(a.name for a in r.accumulators) == read.accumulators]
        if len(reductions) != 1 or reductions[0].kind != "welford":
            raise NotTransformable("Welford's accumulators are not combined by one triton_helpers.welford")
        if any(a.dtype != "tl.float32" for a in reductions[0].accumulators):
            raise NotTransformable("Welford's accumulators are not tl.float32")
        sites.append(ChannelSite(len(sites), stmt, tuple(body[i] for i in read.updates), reductions[0], read.value,
                                 read.mask))
    return sites


def counts_whole_chunks(site: ChannelSite) -> bool:
    """Whether a channel's count is its chunk's pixels: the update masks only the row's end and rows beyond
    ``xnumel`` (channel_groups' ``r0_mask`` holds for every pixel of the chunk), so no per-lane count is kept."""
    return site.mask is None or site.mask.replace("(", "").replace(")", "") in ROW_MASKS


def initial_lines(site: ChannelSite) -> list[str]:
    p = site.prefix
    kept = ("sum", "squares") if counts_whole_chunks(site) else ("sum", "squares", "count")
    return [*(f"{p}_{name} = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)" for name in kept),
            f"{p}_shift = tl.zeros([1, R0_BLOCK], tl.float32)"]


def step_lines(site: ChannelSite) -> list[str]:
    """The loop's lines in place of the Welford step and its three updates; the shift is each channel's mean
    over the chunk's first step of pixels."""
    return shifted_step_lines(site.prefix, site.value, site.mask, CHANNEL_AXIS, not counts_whole_chunks(site))


def channel_lines(site: ChannelSite) -> tuple[list[str], tuple[str, str, str]]:
    """After the loop: each channel's Welford mean, M2 and count ([R0_BLOCK] vectors) and their names."""
    p = site.prefix
    count = ("tl.sum(tl.where(tl.broadcast_to(xmask, [1, R0_BLOCK]), 1.0, 0.0), 0) * (_ko_end - _ko_start)"
             if counts_whole_chunks(site) else f"tl.sum({p}_count, 0)")
    lines = [f"{p}_n = {count}", *moment_lines(p, CHANNEL_AXIS, f"{p}_mean", f"{p}_m2")]
    return lines, (f"{p}_mean", f"{p}_m2", f"{p}_n")


def replaced(site: ChannelSite) -> set[int]:
    """ids of the body statements :func:`step_lines` stands for."""
    return {id(site.step), *(id(u) for u in site.updates)}


__all__ = ["ChannelSite", "channel_lines", "initial_lines", "replaced", "step_lines", "welford_sites"]
