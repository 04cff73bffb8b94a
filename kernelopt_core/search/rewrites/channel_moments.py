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
from .shifted_moments import ROW_MASKS, WELFORD_STEP, NotShiftable, read_welford_step


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
    """The loop's lines in place of the Welford step and its three updates."""
    p = site.prefix
    live = (f"tl.broadcast_to({site.mask}, [XBLOCK, R0_BLOCK])" if site.mask
            else "tl.full([XBLOCK, R0_BLOCK], True, tl.int1)")
    return [
        f"{p}_value = tl.broadcast_to({site.value}, [XBLOCK, R0_BLOCK])",
        f"{p}_live = {live}",
        "if r0_offset == 0:",
        # the shift: each channel's mean over the chunk's first step of pixels
        f"    {p}_shift = tl.sum(tl.where({p}_live, {p}_value, 0.0), 0)[None, :] / "
        f"tl.maximum(tl.sum(tl.where({p}_live, 1.0, 0.0), 0)[None, :], 1.0)",
        f"{p}_delta = tl.where({p}_live, {p}_value - {p}_shift, 0.0)",
        f"{p}_sum = {p}_sum + {p}_delta",
        f"{p}_squares = {p}_squares + {p}_delta * {p}_delta",
        *([] if counts_whole_chunks(site) else [f"{p}_count = {p}_count + tl.where({p}_live, 1.0, 0.0)"]),
    ]


def channel_lines(site: ChannelSite) -> tuple[list[str], tuple[str, str, str]]:
    """After the loop: each channel's Welford mean, M2 and count ([R0_BLOCK] vectors) and their names."""
    p = site.prefix
    count = ("tl.sum(tl.where(tl.broadcast_to(xmask, [1, R0_BLOCK]), 1.0, 0.0), 0) * (_ko_end - _ko_start)"
             if counts_whole_chunks(site) else f"tl.sum({p}_count, 0)")
    lines = [
        f"{p}_n = {count}",
        f"{p}_s1 = tl.sum({p}_sum, 0)",
        f"{p}_s2 = tl.sum({p}_squares, 0)",
        f"{p}_offset = {p}_s1 / tl.maximum({p}_n, 1.0)",
        f"{p}_mean = tl.sum({p}_shift, 0) + {p}_offset + {p}_s1 * 0.0",
        # in float64, once a channel: S1 * S1 / n <= S2 overflows float32 only where S2 is +inf already, and
        # inf - inf would give NaN where Welford's M2 is +inf
        f"{p}_m2 = ({p}_s2.to(tl.float64) - {p}_s1.to(tl.float64) * {p}_offset.to(tl.float64)).to(tl.float32)",
    ]
    return lines, (f"{p}_mean", f"{p}_m2", f"{p}_n")


def replaced(site: ChannelSite) -> set[int]:
    """ids of the body statements :func:`step_lines` stands for."""
    return {id(site.step), *(id(u) for u in site.updates)}


__all__ = ["ChannelSite", "channel_lines", "initial_lines", "replaced", "step_lines", "welford_sites"]
