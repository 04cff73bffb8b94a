"""Shifted moments: a looped Welford reduction's per-element division replaced by shifted sums.

The statistics kernel of a group, instance or batch norm after a vendor conv or GEMM (KernelBench
level 2) updates a running mean, M2 and count per lane with ``triton_helpers.welford_reduce``: per
element a division by the lane's count besides the adds and selects. This rewrite keeps the kernel
(signature, launch, loads, stores, post-loop code) and accumulates instead, per lane, ``d = x - K``
and ``d * d``, where the shift ``K`` is the row's first block's mean (the loop's first trip). After the
loop: ``mean = K + S1 / n``, ``M2 = S2 - S1 * S1 / n``, ``n``: what ``triton_helpers.welford(mean, m2,
weight, 1)`` returned. The shift keeps ``S1`` small, so nothing cancels; the order of the sums is fixed
by the launch configuration. Numerics, special values and measurements: docs/optimizer.md, "Level 2".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .base import Rewrite, RewriteContext, RewriteFamily
from .kernel_source import (
    KernelModule,
    KernelSourceError,
    LaunchConfig,
    parse_kernel_module,
    with_launch_config,
)
from .reduction_passes import dotted, is_call, names_read

WELFORD_STEP = "triton_helpers.welford_reduce"
WELFORD_COMBINE = "triton_helpers.welford"
# Launch configurations tried besides Inductor's own decorator (fewer live accumulators per lane
# leave room for a longer block): (R0_BLOCK, num_warps), XBLOCK 1.
GPU_CONFIGS = ((2048, 8), (4096, 8), (4096, 16))
CPU_CONFIGS = ((4096, 1),)


class NotShiftable(ValueError):
    """The kernel has no looped Welford reduction this rewrite rebuilds exactly; the message says why."""


@dataclass(frozen=True)
class WelfordSite:
    """One ``welford_reduce`` in a loop, with its accumulators and the post-loop combine."""

    loop: ast.For
    step: ast.Assign  # mean_next, m2_next, weight_next = welford_reduce(value, mean, m2, weight, first)
    updates: tuple[ast.Assign, ...]  # mean = tl.where(mask, mean_next, mean), the same for m2 and weight
    inits: tuple[ast.Assign, ...]  # mean = tl.zeros(...), before the loop
    combine: ast.Assign  # a, b, c = welford(mean, m2, weight, 1), after the loop
    value: str  # the source of the value accumulated
    mask: str | None  # the update's mask (None: every lane of every trip)
    accumulators: tuple[str, str, str]  # mean, m2, weight
    dtype: str  # the accumulators' Triton dtype

    @property
    def prefix(self) -> str:
        return "_ko_" + self.accumulators[0].removesuffix("_mean")


def _target_names(node: ast.Assign) -> list[str] | None:
    if len(node.targets) != 1:
        return None
    target = node.targets[0]
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts if isinstance(e, ast.Name)]
    return None


def _update_mask(node: ast.stmt, accumulator: str, following: str) -> tuple[bool, str | None]:
    """Whether ``node`` is ``acc = tl.where(mask, acc_next, acc)`` (or ``acc = acc_next``), and its mask."""
    if not isinstance(node, ast.Assign) or _target_names(node) != [accumulator]:
        return False, None
    value = node.value
    if isinstance(value, ast.Name) and value.id == following:
        return True, None
    if is_call(value, "tl.where") and len(value.args) == 3 and not value.keywords:
        mask, new, old = value.args
        if (isinstance(new, ast.Name) and new.id == following and isinstance(old, ast.Name)
                and old.id == accumulator):
            return True, ast.unparse(mask)
    return False, None


def _init_dtype(node: ast.stmt, accumulator: str) -> str | None:
    """The dtype of ``acc = tl.zeros([XBLOCK, R0_BLOCK], dtype)``, else None."""
    if not isinstance(node, ast.Assign) or _target_names(node) != [accumulator]:
        return None
    value = node.value
    if not is_call(value, "tl.zeros") or len(value.args) != 2:
        return None
    shape = ast.unparse(value.args[0]).replace(" ", "")
    if shape != "[XBLOCK,R0_BLOCK]":
        return None
    return ast.unparse(value.args[1])


def _loop_starts_at_zero(loop: ast.For) -> bool:
    call = loop.iter
    return (isinstance(loop.target, ast.Name) and loop.target.id == "r0_offset" and isinstance(call, ast.Call)
            and dotted(call.func) in ("tl.range", "range", "tl.static_range") and len(call.args) >= 2
            and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0)


def find_sites(module: KernelModule) -> list[WelfordSite]:
    """Every looped Welford reduction of the kernel, or :class:`NotShiftable` naming what differs."""
    func = module.func
    if func is None:
        raise NotShiftable("no @triton.jit function")
    if module.heuristic != "reduction":
        raise NotShiftable(f"a {module.heuristic} kernel, not a looped reduction")
    body = func.body
    sites: list[WelfordSite] = []
    for index, loop in enumerate(body):
        if not isinstance(loop, ast.For):
            continue
        for position, step in enumerate(loop.body):
            if not (isinstance(step, ast.Assign) and is_call(step.value, WELFORD_STEP)):
                continue
            sites.append(_site(body, index, loop, position, step))
    if not sites:
        raise NotShiftable("no looped Welford reduction (triton_helpers.welford_reduce) in this kernel")
    return sites


@dataclass(frozen=True)
class WelfordStep:
    """A loop's ``welford_reduce`` with the three updates after it: what both shifted forms rebuild."""

    value: str  # the source of the value accumulated
    accumulators: tuple[str, str, str]  # mean, m2, weight
    updates: tuple[int, int, int]  # the updates' positions in the loop body
    mask: str | None  # the updates' mask (None: every lane of every trip)


def read_welford_step(loop_body: list[ast.stmt], position: int) -> WelfordStep:
    """The ``welford_reduce`` at ``loop_body[position]``, updated together under one mask by the next three
    statements, its accumulators and results read nowhere else in the loop; else :class:`NotShiftable`."""
    step = loop_body[position]
    call = step.value if isinstance(step, ast.Assign) else None
    assert isinstance(step, ast.Assign) and isinstance(call, ast.Call)
    nexts = _target_names(step)
    if nexts is None or len(nexts) != 3 or len(call.args) != 5 or call.keywords:
        raise NotShiftable(f"line {step.lineno}: not welford_reduce(value, mean, m2, weight, first) into three names")
    if not all(isinstance(a, ast.Name) for a in call.args[1:4]):
        raise NotShiftable(f"line {step.lineno}: Welford's accumulators are not plain names")
    names = [a.id for a in call.args[1:4] if isinstance(a, ast.Name)]
    accumulators = (names[0], names[1], names[2])
    masks: set[str | None] = set()
    following = loop_body[position + 1:position + 4]
    for acc, nxt, node in zip(accumulators, nexts, following, strict=False):
        ok, mask = _update_mask(node, acc, nxt)
        if not ok:
            raise NotShiftable(f"line {node.lineno}: the update of {acc} is not tl.where(mask, {nxt}, {acc})")
        masks.add(mask)
    if len(following) != 3 or len(masks) != 1:
        raise NotShiftable(f"line {step.lineno}: the three accumulators are not updated together under one mask")
    # The accumulators and the step's results are read nowhere else in the loop.
    rest = [s for s in loop_body if s is not step and s not in following]
    used = set(accumulators) | set(nexts)
    if any(names_read(s) & used for s in rest):
        raise NotShiftable(f"line {step.lineno}: the loop reads Welford's accumulators outside their update")
    return WelfordStep(ast.unparse(call.args[0]), accumulators, (position + 1, position + 2, position + 3),
                       masks.pop())


def _site(body: list[ast.stmt], index: int, loop: ast.For, position: int, step: ast.Assign) -> WelfordSite:
    if not _loop_starts_at_zero(loop):
        raise NotShiftable(f"the loop at line {loop.lineno} does not run r0_offset from 0")
    read = read_welford_step(loop.body, position)
    accumulators, value, mask = read.accumulators, read.value, read.mask
    updates = [u for u in (loop.body[i] for i in read.updates) if isinstance(u, ast.Assign)]  # all three
    inits, dtypes = [], set()
    for acc in accumulators:
        found = [s for s in body[:index] if isinstance(s, ast.Assign) and _target_names(s) == [acc]]
        dtype = _init_dtype(found[-1], acc) if found else None
        if dtype is None:
            raise NotShiftable(f"{acc} is not initialised as tl.zeros([XBLOCK, R0_BLOCK], dtype) before the loop")
        inits.append(found[-1])
        dtypes.add(dtype)
    if dtypes != {"tl.float32"}:
        raise NotShiftable(f"Welford's accumulators are {', '.join(sorted(dtypes))}, not tl.float32")
    combine = _combine(body[index + 1:], accumulators)
    return WelfordSite(loop, step, tuple(updates), tuple(inits), combine, value, mask, accumulators, "tl.float32")


def _combine(after: list[ast.stmt], accumulators: tuple[str, ...]) -> ast.Assign:
    readers = [s for s in after if names_read(s) & set(accumulators)]
    if len(readers) != 1:
        raise NotShiftable(f"Welford's accumulators {', '.join(accumulators)} are read {len(readers)} times after "
                           "the loop (expected once, by triton_helpers.welford)")
    node = readers[0]
    if not (isinstance(node, ast.Assign) and is_call(node.value, WELFORD_COMBINE)):
        raise NotShiftable(f"line {node.lineno}: the accumulators are not combined by {WELFORD_COMBINE}")
    call = node.value
    assert isinstance(call, ast.Call)
    targets = _target_names(node)
    args = [ast.unparse(a) for a in call.args]
    if targets is None or len(targets) != 3 or args[:3] != list(accumulators) or args[3:] != ["1"]:
        raise NotShiftable(f"line {node.lineno}: not a, b, c = {WELFORD_COMBINE}(mean, m2, weight, 1)")
    return node


# --- the rewrite ----------------------------------------------------------------------------------------


def _indent(text: str, node: ast.stmt) -> str:
    line = text.splitlines()[node.lineno - 1]
    return line[:len(line) - len(line.lstrip())]


ROW_MASKS = ("r0_mask", "r0_mask & xmask", "xmask & r0_mask")


def _counts_every_lane(site: WelfordSite) -> bool:
    """Whether a row's count is ``r0_numel``: the loop runs to ``r0_numel`` and masks only the row's end
    (and rows beyond ``xnumel``, whose results are never stored), so no per-lane count need be kept."""
    call = site.loop.iter
    ends_at_numel = isinstance(call, ast.Call) and ast.unparse(call.args[1]) == "r0_numel"
    return ends_at_numel and (site.mask is None or site.mask.replace("(", "").replace(")", "") in ROW_MASKS)


ROW_AXIS = 1  # shifted_moments: a row's lanes along axis 1 of [XBLOCK, R0_BLOCK]
CHANNEL_AXIS = 0  # channel_moments: a channel's pixels along axis 0 of [PIX, C]


def shifted_step_lines(p: str, value: str, mask: str | None, axis: int, counted: bool) -> list[str]:
    """In the loop, in place of a Welford step and its three updates (both shifted forms): on the first trip
    the shift, the mean of the live values along ``axis``; then each lane's shifted value and its square
    added to ``{p}_sum`` and ``{p}_squares`` (``counted``: and 1 to ``{p}_count`` where live)."""
    expand = "[:, None]" if axis == 1 else "[None, :]"
    live = f"tl.broadcast_to({mask}, [XBLOCK, R0_BLOCK])" if mask else "tl.full([XBLOCK, R0_BLOCK], True, tl.int1)"
    lines = [
        f"{p}_value = tl.broadcast_to({value}, [XBLOCK, R0_BLOCK])",
        f"{p}_live = {live}",
        "if r0_offset == 0:",
        f"    {p}_shift = tl.sum(tl.where({p}_live, {p}_value, 0.0), {axis}){expand} / "
        f"tl.maximum(tl.sum(tl.where({p}_live, 1.0, 0.0), {axis}){expand}, 1.0)",
        f"{p}_delta = tl.where({p}_live, {p}_value - {p}_shift, 0.0)",
        f"{p}_sum = {p}_sum + {p}_delta",
        f"{p}_squares = {p}_squares + {p}_delta * {p}_delta",
    ]
    return lines + ([f"{p}_count = {p}_count + tl.where({p}_live, 1.0, 0.0)"] if counted else [])


def moment_lines(p: str, axis: int, mean: str, m2: str) -> list[str]:
    """After the loop (both shifted forms), from ``{p}_n`` and the loop's sums: Welford's mean and M2 into
    ``mean`` and ``m2``, reduced along ``axis``."""
    return [
        f"{p}_s1 = tl.sum({p}_sum, {axis})",
        f"{p}_s2 = tl.sum({p}_squares, {axis})",
        f"{p}_offset = {p}_s1 / tl.maximum({p}_n, 1.0)",
        # + S1 * 0: NaN where S1 is not finite. Welford's running mean turns NaN once a finite value follows
        # an inf in its lane, so the mean of lanes holding an inf is NaN, not inf.
        f"{mean} = tl.sum({p}_shift, {axis}) + {p}_offset + {p}_s1 * 0.0",
        # in float64, once a row or channel: S1 * S1 / n <= S2 overflows float32 only where S2 is +inf
        # already, and inf - inf would be NaN where Welford's M2 is +inf (inputs near 1e30)
        f"{m2} = ({p}_s2.to(tl.float64) - {p}_s1.to(tl.float64) * {p}_offset.to(tl.float64)).to(tl.float32)",
    ]


def _site_edits(text: str, site: WelfordSite) -> list[tuple[int, int, list[str]]]:
    """(first line, last line, replacement lines) edits, 1-based inclusive line numbers."""
    p = site.prefix
    # New names: the accumulators hold sums now, not Welford's mean, M2 and weight.
    s1, s2, count = f"{p}_sum", f"{p}_squares", f"{p}_count"
    counted = not _counts_every_lane(site)
    mask = site.mask
    edits: list[tuple[int, int, list[str]]] = []
    first_init = min(site.inits, key=lambda n: n.lineno)
    pad = _indent(text, first_init)
    for node, name in zip(site.inits, (s1, s2, count), strict=True):
        lines = [f"{pad}{name} = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)"] if counted or name != count else []
        if node is first_init:
            lines.append(f"{pad}{p}_shift = tl.zeros([XBLOCK, 1], tl.float32)")
        edits.append((node.lineno, node.end_lineno or node.lineno, lines))
    inner = _indent(text, site.step)
    # the shift: the first block's mean, once per row
    step_lines = [inner + line for line in shifted_step_lines(p, site.value, mask, ROW_AXIS, counted)]
    last_update = max(site.updates, key=lambda n: n.end_lineno or n.lineno)
    edits.append((site.step.lineno, last_update.end_lineno or last_update.lineno, step_lines))
    mean, m2, weight = _target_names(site.combine) or ("", "", "")  # find_sites checked: three names
    after = _indent(text, site.combine)
    combine_lines = [
        f"{after}{p}_n = tl.sum({count}, 1)" if counted else f"{after}{p}_n = tl.zeros([XBLOCK], tl.float32) + r0_numel",
        # a row with no live lane (beyond xnumel) has S1 = 0: its mean is the shift, never stored
        *(after + line for line in moment_lines(p, ROW_AXIS, mean, m2)),
        f"{after}{weight} = {p}_n",
    ]
    edits.append((site.combine.lineno, site.combine.end_lineno or site.combine.lineno, combine_lines))
    return edits


def shifted_source(module: KernelModule) -> str:
    """The kernel with every looped Welford reduction accumulated as shifted sums."""
    sites = find_sites(module)
    edits = [edit for site in sites for edit in _site_edits(module.text, site)]
    lines = module.text.splitlines()
    for first, last, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[first - 1:last] = replacement
    return "\n".join(lines) + ("\n" if module.text.endswith("\n") else "")


class ShiftedMomentsFamily(RewriteFamily):
    name = "shifted_moments"
    summary = ("a looped Welford statistic (group/instance/batch norm) accumulated as sums shifted by the first "
               "block's mean: no division per element, one combine per row")

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        try:
            find_sites(ctx.module)
        except NotShiftable as exc:
            return str(exc)
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        source = shifted_source(ctx.module)
        sites = len(find_sites(ctx.module))
        detail = (f"{sites} Welford reduction(s): per element a subtraction and a multiply-add instead of a "
                  "division and three updates; the lanes combined once per row")
        out = [Rewrite(self.name, "shifted sums, Inductor's launch configurations", detail, source,
                       {"welford_sites": sites, "config": None})]
        shifted = parse_kernel_module(source, ctx.module.name)
        if "R0_BLOCK" not in shifted.block_params or "XBLOCK" not in shifted.block_params:
            return out
        r0_numel = ctx.module.numels.get("r0_numel")
        for block, warps in CPU_CONFIGS if ctx.on_cpu else GPU_CONFIGS:
            if r0_numel is not None and block > 2 * r0_numel:
                continue
            config = LaunchConfig.of({"XBLOCK": 1, "R0_BLOCK": block}, warps)
            try:
                text = with_launch_config(shifted, config)
            except KernelSourceError:
                continue
            out.append(Rewrite(self.name, f"shifted sums, {config.label()}", detail, text,
                               {"welford_sites": sites, "config": config.to_json()}))
        return out
