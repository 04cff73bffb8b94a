"""Channel groups: a channels-last tensor's group statistics, read a whole pixel at a time.

After a conv Inductor keeps the output channels-last. A group (or instance) norm's statistics kernel
then gives each program one (sample, group) row, whose elements are that group's Cg channels of every
pixel: Cg contiguous values, C apart. At KernelBench level 2's problem 92 each row reads 16 useful bytes
of every 256-byte pixel. This launcher runs Inductor's loop body at the same (row, element) pairs, arranged
so that one tile holds whole pixels: program (n, k) covers sample n's G rows over its k-th
chunk of pixels, tile [PIX, C] with row ``x = n*G + c // Cg`` and element ``r = p*Cg + c % Cg``
(channels on the fast axis: a warp's loads walk a pixel). The accumulators are folded into the G rows
with Inductor's own reduction call and kept as the chunk's partials; split_programs' finish kernel combines
a row's partials and runs the post-loop code. Every (row, element) pair is visited once whatever the loads
are, so the result is Inductor's up to the order of the reduction; the loads only decide the speed: the
family applies where a load reads a pixel's C channels contiguously in that arrangement. Pure Python.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from .base import Rewrite, RewriteContext
from .channel_moments import channel_lines, initial_lines, replaced, step_lines, welford_sites
from .cost_model import near_speed_of_light, plan_text, sm_count, traffic_plan
from .kernel_source import next_pow2
from .launcher_text import Lines
from .reduction_family import ReductionLauncherFamily
from .reduction_passes import ROW_SETUP, NotTransformable, Pass, ReductionKernel, decompose, is_call
from .split_programs import PassLaunch, _part, chunked_launcher, kernel_parameters

MAX_CHANNELS = 512  # C: one tile row holds a pixel's channels
TILE_ELEMENTS = (2048, 4096, 1024)  # PIX x C per loop step, in order of preference
WAVES = (8, 4, 16)  # programs per multiprocessor to aim at
MIN_CHUNK_PIXELS = 64
# Tiles of at least this many elements get 8 warps. The shifted form's first-trip branch spilled at a
# [32, 64] tile with 4 warps (PTX for sm90: 96 registers, 8 spilled); with 8 warps, 48 and none.
WARPS_8_AT = 2048
MAX_VARIANTS = 3
HEADER_REPLACED = {"xoffset", "xindex", "xmask", "r0_base", "rbase"}  # the tile's own index replaces them
SAMPLES = 6  # rows and pixels sampled when checking the arrangement


@dataclass(frozen=True)
class Grouping:
    """Rows x = n*groups + g, elements r = p*per_group + w: ``samples`` x ``groups`` rows of ``pixels`` pixels."""

    groups: int  # G: rows per sample, adjacent
    per_group: int  # Cg: elements of a row per pixel, adjacent
    pixels: int  # HW: pixels per row
    samples: int  # N

    @property
    def channels(self) -> int:
        return self.groups * self.per_group


@dataclass(frozen=True)
class GroupShape:
    pixels: int  # PIX: pixels per loop step
    chunks: int  # S: programs per sample
    chunk: int  # pixels per program
    num_warps: int

    def label(self, grouping: Grouping) -> str:
        return (f"{grouping.groups} groups x {grouping.per_group} channels a pixel, {self.chunks} chunks of "
                f"{self.chunk} pixels per sample, {self.pixels} pixels a step, num_warps={self.num_warps}")


# --- the arrangement: which (G, Cg) makes a load read whole pixels -------------------------------------


def _index_value(node: ast.expr, env: dict[str, object]) -> object:
    """An index expression over numpy integer arrays: + - * // %, names and integer constants only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise NotTransformable(f"the index reads {node.id}")
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_index_value(node.operand, env)  # type: ignore[operator]
    if isinstance(node, ast.BinOp):
        left, right = _index_value(node.left, env), _index_value(node.right, env)
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
        for kind, op in ops.items():
            if isinstance(node.op, kind):
                return op(left, right)
    raise NotTransformable(f"an index expression the family does not read: {ast.unparse(node)}")


def _load_offsets(kernel: ReductionKernel, x: object, r: object) -> list[object]:
    """The element offset of every load in the passes that depends on the row's elements, at rows ``x`` and
    elements ``r`` (numpy arrays of one shape)."""
    env: dict[str, object] = {"xindex": x, "r0_index": r, "rindex": r}
    body = [stmt for p in kernel.passes for stmt in p.body]
    for stmt in [*kernel.header, *body]:
        node = stmt.node
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("xindex", "r0_index", "rindex") or not name.startswith(("x", "r0_")):
                continue
            try:
                env[name] = _index_value(node.value, env)
            except NotTransformable:
                continue  # not index arithmetic (a mask, a value): loads that read it are not checked
    offsets = []
    for stmt in body:
        for call in ast.walk(stmt.node):
            if not (is_call(call, "tl.load") and call.args):
                continue
            address = call.args[0]
            if not (isinstance(address, ast.BinOp) and isinstance(address.op, ast.Add)
                    and isinstance(address.left, ast.Name) and "ptr" in address.left.id):
                continue
            reads = {n.id for n in ast.walk(address.right) if isinstance(n, ast.Name)}
            if not reads & {k for k in env if k.startswith("r0_")} - {"r0_offset"}:
                continue  # no element index: a per-row or constant value
            try:
                offsets.append(_index_value(address.right, env))
            except NotTransformable:
                continue
    return offsets


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def find_grouping(kernel: ReductionKernel) -> Grouping:
    """The widest arrangement (C = G x Cg, a power of two) in which a load of the row reads each pixel's C
    values contiguously; :class:`NotTransformable` when there is none."""
    import numpy as np

    xnumel, rnumel = kernel.xnumel, kernel.r0_numel
    best: Grouping | None = None
    for per_group in _divisors(rnumel, MAX_CHANNELS):
        pixels = rnumel // per_group
        if pixels < 2:
            continue
        for groups in _divisors(xnumel, MAX_CHANNELS // per_group):
            channels = groups * per_group  # one group (a row alone) is Inductor's own arrangement
            if groups < 2 or channels & (channels - 1) or (best and channels <= best.channels):
                continue
            samples = xnumel // groups
            n = np.unique(np.array([0, 1, samples // 2, samples - 1][:SAMPLES]).clip(0, samples - 1))
            p = np.unique(np.array([0, 1, 2, pixels // 2, pixels - 2, pixels - 1]).clip(0, pixels - 1))
            c = np.arange(channels)
            x = (n[:, None, None] * groups + c[None, None, :] // per_group) + 0 * p[None, :, None]
            r = (p[None, :, None] * per_group + c[None, None, :] % per_group) + 0 * n[:, None, None]
            try:
                offsets = _load_offsets(kernel, x.astype(np.int64), r.astype(np.int64))
            except (NotTransformable, ZeroDivisionError):
                continue
            for offset in offsets:
                values = np.broadcast_to(np.asarray(offset, dtype=np.int64), x.shape)
                if np.array_equal(values - values[:, :, :1], np.broadcast_to(c, x.shape)):
                    best = Grouping(groups, per_group, pixels, samples)
                    break
    if best is None:
        raise NotTransformable("no load reads the pixels of adjacent rows as one contiguous run (not a "
                               "channels-last group statistic)")
    return best


# --- the launcher ---------------------------------------------------------------------------------------


def group_kernel(kernel: ReductionKernel, p: Pass, grouping: Grouping, name: str, shifted: bool = False) -> str:
    """The pass ``p`` over (sample, chunk of pixels), tile [PIX, C]: channels along the tile's fast axis, so a
    warp's loads walk a pixel's contiguous values. Writes each of the G rows' partials of its reductions.
    ``shifted``: its Welford statistics kept as shifted sums per channel (channel_moments)."""
    g, cg, hw = grouping.groups, grouping.per_group, grouping.pixels
    sites = welford_sites(p) if shifted else []
    if shifted and not sites:
        raise NotTransformable("no Welford statistic to keep as shifted sums")
    skipped = set().union(*(replaced(site) for site in sites))
    site_of = {id(site.reduction): site for site in sites}
    lines = Lines()
    lines.add("@triton.jit")
    with lines.block(f"def {name}({', '.join(kernel_parameters(kernel))}):"):
        for stmt in kernel.constants:
            lines.add(stmt.text())
        lines.add("_ko_n = tl.program_id(0)\n_ko_s = tl.program_id(1)")
        lines.add("_ko_c = tl.arange(0, R0_BLOCK)[None, :]")
        lines.add(f"xoffset = _ko_n * {g}\nxindex = xoffset + _ko_c // {cg}\nxmask = xindex < xnumel")
        for stmt in kernel.header:
            if stmt is kernel.xoffset or stmt.targets & HEADER_REPLACED:
                continue
            lines.add(stmt.text())
        for site in sites:
            lines.add("\n".join(initial_lines(site)))
        lines.add("_ko_start = _ko_s * CHUNK")
        lines.add(f"_ko_end = tl.minimum(_ko_start + CHUNK, {hw})")
        with lines.block("for _ko_p in tl.range(_ko_start, _ko_end, XBLOCK):"):
            lines.add("_ko_pix = _ko_p + tl.arange(0, XBLOCK)[:, None]")
            lines.add("r0_offset = _ko_p - _ko_start")  # 0 on the first trip: Welford's first-iteration flag
            lines.add(f"r0_index = _ko_pix * {cg} + _ko_c % {cg}")
            lines.add("r0_mask = (_ko_pix < _ko_end) & (r0_index < r0_numel)")
            lines.add("roffset = r0_offset\nrindex = r0_index")
            steps = {id(site.step): site for site in sites}
            for stmt in p.body:
                if id(stmt) in steps:  # at the Welford step's place: its value is computed above it
                    lines.add("\n".join(step_lines(steps[id(stmt)])))
                if stmt.targets & set(ROW_SETUP) or id(stmt) in skipped:
                    continue
                lines.add(stmt.text())
        level = kernel.levels.index(p)
        lines.add(f"_ko_rows = xoffset + tl.arange(0, {g})")
        for i, reduction in enumerate(p.reductions):
            folded: list[str] = []
            shifted_site = site_of.get(id(reduction))
            if shifted_site is not None:  # [C] per-channel Welford values -> [G, Cg]
                channel, values = channel_lines(shifted_site)
                lines.add("\n".join(channel))
                for c, value in enumerate(values):
                    lines.add(f"_ko_fold{i}_{c} = tl.reshape({value}, [{g}, {cg}])")
                    folded.append(f"_ko_fold{i}_{c}")
            else:
                for c, acc in enumerate(reduction.accumulators):
                    # [PIX, C] -> [G, Cg x PIX]: a row's elements of this chunk side by side
                    lines.add(f"_ko_fold{i}_{c} = tl.reshape(tl.trans({acc.name}), [{g}, {cg} * XBLOCK])")
                    folded.append(f"_ko_fold{i}_{c}")
            results = [f"_ko_p{i}_{c}" for c in range(reduction.arity)]
            lines.add(f"{', '.join(results)} = {reduction.call_with(folded)}")
            for c, value in enumerate(results):
                lines.add(f"tl.store({_part(level, i, c)} + (_ko_rows * S + _ko_s), {value})")
    return lines.text()


def launcher_source(kernel: ReductionKernel, grouping: Grouping, shape: GroupShape, shifted: bool = False) -> str:
    s_meta = {"CHUNK": shape.chunk, "S": shape.chunks, "S_BLOCK": shape.chunks}  # a power of two: no empty lane
    return chunked_launcher(kernel, shape.chunks, lambda p, name: PassLaunch(
        group_kernel(kernel, p, grouping, name, shifted), (grouping.samples, shape.chunks),
        {"XBLOCK": shape.pixels, "R0_BLOCK": grouping.channels, **s_meta}, shape.num_warps),
        {"XBLOCK": 1, "R0_BLOCK": shape.pixels, **s_meta})


def _pow2_at_most(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def group_shapes(grouping: Grouping, sms: int) -> list[GroupShape]:
    """Tiles and chunks, each with every lane of every program given at least one element: a power-of-two
    count of chunks (the finish kernel combines them with no empty lane) and a last chunk of at least a step.
    An empty Welford partial combined with a full one gives NaN where the sums overflow (0 x inf in
    ``welford_combine``; gate 2's near-max inputs on the H100), where Inductor's own lanes give +inf."""
    shapes: list[GroupShape] = []
    for waves, tile in zip(WAVES, TILE_ELEMENTS, strict=True):
        pixels = max(1, min(next_pow2(grouping.pixels), tile // grouping.channels))
        fits = grouping.pixels // max(MIN_CHUNK_PIXELS, pixels)  # chunks of at least that many pixels
        wanted = min(next_pow2(max(1, -(-waves * sms // grouping.samples))), _pow2_at_most(max(1, fits)))
        for chunks in (wanted, wanted // 2, wanted // 4):
            if chunks < 2:  # the finish kernel's vector of partials has at least two lanes
                break
            # the even split, not rounded up to a multiple of the step (the loop masks its last trip): rounded,
            # problem 92's 993 pixels became 1024, a power of two, the one layout difference left between the
            # family (0.59 ms on the H100) and the hand-written kernel (0.17 ms; untested, see docs/optimizer.md)
            chunk = max(MIN_CHUNK_PIXELS, pixels, -(-grouping.pixels // chunks))
            last = grouping.pixels - (chunks - 1) * chunk
            if last >= pixels:
                shape = GroupShape(pixels, chunks, chunk, 8 if pixels * grouping.channels >= WARPS_8_AT else 4)
                if shape not in shapes:
                    shapes.append(shape)
                break
    return shapes


class ChannelGroupsFamily(ReductionLauncherFamily):
    name = "channel_groups"
    summary = ("group statistics of a channels-last tensor read a pixel at a time: a sample's groups in one "
               "tile of whole pixels, chunks of pixels over programs, partials combined per row (a launcher)")
    cpu_reason = "the CPU interpreter reads memory the same in any order: nothing to gain"

    def declines(self, ctx: RewriteContext, kernel: ReductionKernel) -> str | None:
        if len(kernel.passes) != 1 or not kernel.passes[0].reductions:
            return f"{len(kernel.passes)} passes: rewrites a one-pass statistic"
        hazard = kernel.split_hazard()
        if hazard:
            return hazard
        try:
            grouping = find_grouping(kernel)
        except NotTransformable as exc:
            return str(exc)
        if not group_shapes(grouping, sm_count(ctx)):
            return f"{grouping.pixels} pixels per row: too few for two chunks of at least {MIN_CHUNK_PIXELS}"
        return near_speed_of_light(ctx)

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        kernel = decompose(ctx.module)
        grouping = find_grouping(kernel)
        plan = traffic_plan(ctx, self.declaration, [])
        out: list[Rewrite] = []
        shapes = group_shapes(grouping, sm_count(ctx))[:MAX_VARIANTS]
        # A Welford statistic only as shifted sums: with Welford's division per element kept, this tile took
        # 0.632-0.677 ms against Inductor's 0.234 ms on problem 92 (H100, session 20).
        try:
            shifted = bool(welford_sites(kernel.passes[0]))
        except NotTransformable:
            shifted = False
        for shape in shapes:
            try:
                source = launcher_source(kernel, grouping, shape, shifted)
            except Exception:  # noqa: BLE001 - one variant's blind spot must not stop the search
                continue
            programs = grouping.samples * shape.chunks
            useful = grouping.per_group / grouping.channels
            body = "shifted sums per channel" if shifted else "Inductor's loop body"
            out.append(Rewrite(
                family=self.name, title=f"channel groups{', shifted sums' if shifted else ''}, {shape.label(grouping)}",
                detail=(f"{programs} programs read whole pixels ({grouping.channels} channels) where each of "
                        f"Inductor's {kernel.xnumel} rows read {math.floor(100 * useful)}% of every pixel it "
                        f"touched; {body}; partials in scratch, a finish kernel per row; {plan_text(plan)}"),
                source=source,
                params={"launcher": True, "groups": grouping.groups, "per_group": grouping.per_group,
                        "pixels": shape.pixels, "chunks": shape.chunks, "chunk": shape.chunk,
                        "num_warps": shape.num_warps, "programs": programs, "shifted": shifted,
                        "efficiency": self.declaration.traffic_efficiency, **plan},
            ))
        return out


__all__ = ["ChannelGroupsFamily", "GroupShape", "Grouping", "find_grouping", "group_kernel", "group_shapes",
           "launcher_source"]
