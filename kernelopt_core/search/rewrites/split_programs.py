"""Split programs: few long rows spread over many programs, partials in scratch, then a finalize.

When a looped reduction has fewer rows than the GPU has multiprocessors, Inductor's one program
per row leaves most of the GPU idle. The launcher runs each pass of Inductor's kernel as a kernel of
its own over (row, chunk): every program walks its chunk of the row with Inductor's loop body and,
for a pass that ends in reductions, writes its chunk's partial (Inductor's own reduction call on the
chunk) to scratch. A finalize kernel per row combines the partials with the same call, runs the
post-loop code (per-row stores included) and keeps the row's reduced values in scratch; the next
pass, usually the elementwise one that writes the row, is again parallel over all chunks and reads
those values back. Nothing is held across kernels but the scratch, so any schedule is correct.

Traffic stays Inductor's (each pass reads what it read); the gain is parallelism. Chunks' order of
combination is fixed, so a re-run is bit-identical.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass

from .base import Rewrite, RewriteContext
from .cost_model import (
    low_parallelism_signal,
    near_speed_of_light,
    plan_text,
    probe_all,
    sm_count,
    to_probe,
    traffic_plan,
)
from .kernel_source import next_pow2
from .launcher_text import SIGNATURE_TYPES, Lines, launch, probe_module, prologue, scratch
from .reduction_family import ReductionLauncherFamily
from .reduction_passes import NotTransformable, Pass, ReductionKernel, decompose
from .statement_edits import with_chunk_start

MIN_CHUNK = 256  # elements of a row per program, at least
MAX_BLOCK = 2048  # R0_BLOCK of the pass kernels
MAX_CHUNKS = 4096  # chunks per row (the finalize reads them as one vector)
WAVES = (8, 32, 2)  # programs per multiprocessor to aim at, in order of preference
MAX_VARIANTS = 3
CONSTEXPRS = ("XBLOCK", "R0_BLOCK", "CHUNK", "S", "S_BLOCK")


@dataclass(frozen=True)
class SplitShape:
    chunks: int  # S: programs per row
    chunk: int  # elements per program (a multiple of block)
    block: int  # R0_BLOCK of the pass kernels
    num_warps: int

    def label(self) -> str:
        return f"{self.chunks} chunks of {self.chunk} per row, R0_BLOCK={self.block}, num_warps={self.num_warps}"


def _partials(kernel: ReductionKernel) -> list[tuple[int, int, int, str, str]]:
    """(level, reduction, component, torch dtype, identity) of every reduced value."""
    out = []
    for level, p in enumerate(kernel.levels):
        for i, r in enumerate(p.reductions):
            for c, acc in enumerate(r.accumulators):
                out.append((level, i, c, acc.torch_dtype, acc.identity))
    return out


def _part(level: int, i: int, c: int) -> str:
    return f"_ko_part{level}_{i}_{c}_ptr"


def _final(level: int, i: int, c: int) -> str:
    return f"_ko_row{level}_{i}_{c}_ptr"


def kernel_parameters(kernel: ReductionKernel) -> list[str]:
    values = _partials(kernel)
    return [*kernel.runtime_params, *(_part(lv, i, c) for lv, i, c, _, _ in values),
            *(_final(lv, i, c) for lv, i, c, _, _ in values), *(f"{n}: tl.constexpr" for n in CONSTEXPRS)]


def _prefix(lines: Lines, kernel: ReductionKernel, upto: int) -> None:
    """Numels, header, and the post-loop code of the passes before ``upto`` with their reductions
    read back from scratch (their stores were made by their finalize kernels)."""
    for stmt in kernel.constants + kernel.header:
        lines.add(stmt.text())
    lines.add("_ko_x = xoffset + tl.arange(0, XBLOCK)")
    for p in kernel.passes[:upto]:
        for stmt in p.post:
            reduction = kernel.reduction_of(stmt)
            if reduction is not None:
                level, i = kernel.levels.index(p), p.reductions.index(reduction)
                names = [f"_ko_f{level}_{i}_{c}" for c in range(reduction.arity)]
                for c, name in enumerate(names):
                    lines.add(f"{name} = tl.load({_final(level, i, c)} + _ko_x)")
                lines.add(reduction.rebound(names))
            elif not (stmt.is_store or stmt.is_barrier):
                lines.add(stmt.text())


def pass_kernel(kernel: ReductionKernel, p: Pass, name: str) -> str:
    """Pass ``p`` over one chunk of one row: grid (rows, S). Writes the chunk's partials, if any."""
    lines = Lines()
    lines.add("@triton.jit")
    with lines.block(f"def {name}({', '.join(kernel_parameters(kernel))}):"):
        _prefix(lines, kernel, p.index)
        lines.add("_ko_s = tl.program_id(1)\n_ko_start = _ko_s * CHUNK")
        with lines.block("for r0_offset in tl.range(_ko_start, tl.minimum(_ko_start + CHUNK, r0_numel), R0_BLOCK):"):
            for stmt in p.body:
                lines.add(ast.unparse(with_chunk_start(stmt.node, "_ko_start")))
        if p.reductions:
            level = kernel.levels.index(p)
            for i, r in enumerate(p.reductions):
                names = [f"_ko_p{i}_{c}" for c in range(r.arity)]
                lines.add(f"{', '.join(names)} = {r.call_with([a.name for a in r.accumulators])}")
                for c, value in enumerate(names):
                    lines.add(f"tl.store({_part(level, i, c)} + (_ko_x * S + _ko_s), {value})")
        elif p.post_stores:
            raise NotTransformable("stores after the last loop that ends in no reduction")
    return lines.text()


def finish_kernel(kernel: ReductionKernel, p: Pass, name: str) -> str:
    """Combine the chunks' partials of pass ``p`` per row, keep the row values, run the post-loop code."""
    level = kernel.levels.index(p)
    lines = Lines()
    lines.add("@triton.jit")
    with lines.block(f"def {name}({', '.join(kernel_parameters(kernel))}):"):
        _prefix(lines, kernel, p.index)
        lines.add("_ko_si = tl.arange(0, S_BLOCK)[None, :]")
        results: dict[int, list[str]] = {}
        for i, r in enumerate(p.reductions):
            vectors = []
            for c, acc in enumerate(r.accumulators):
                vector = f"_ko_v{i}_{c}"
                lines.add(f"{vector} = tl.load({_part(level, i, c)} + (_ko_x[:, None] * S + _ko_si), "
                          f"mask=_ko_si < S, other={acc.identity})")
                vectors.append(vector)
            names = [f"_ko_f{level}_{i}_{c}" for c in range(r.arity)]
            lines.add(f"{', '.join(names)} = {r.call_with(vectors)}")
            for c, value in enumerate(names):
                lines.add(f"tl.store({_final(level, i, c)} + _ko_x, {value})")
            results[i] = names
        for stmt in p.post:
            reduction = kernel.reduction_of(stmt)
            lines.add(reduction.rebound(results[p.reductions.index(reduction)]) if reduction is not None
                      else stmt.text())
    return lines.text()


@dataclass(frozen=True)
class PassLaunch:
    """How a chunked launcher runs one pass: its kernel's text, grid, meta-parameters and warps."""

    text: str
    grid: tuple[int, ...]
    meta: dict[str, int]
    num_warps: int


def chunked_launcher(kernel: ReductionKernel, chunks: int, pass_launch: Callable[[Pass, str], PassLaunch],
                     finish_meta: dict[str, int]) -> str:
    """A launcher module whose passes write per-chunk partials (``chunks`` a row) to scratch and whose finish
    kernels combine them per row: the scratch, each pass as ``pass_launch(pass, name)`` makes it, and
    :func:`finish_kernel` after each pass that ends in reductions."""
    name = kernel.name
    device = kernel.pointer_params[0]
    values = _partials(kernel)
    body = Lines(1)
    for level, i, c, dtype, _ in values:
        body.add(scratch(_part(level, i, c), kernel.xnumel * chunks, dtype, device))
    for level, i, c, dtype, _ in values:
        body.add(scratch(_final(level, i, c), kernel.xnumel, dtype, device))
    args = [*kernel.runtime_params, *(_part(lv, i, c) for lv, i, c, _, _ in values),
            *(_final(lv, i, c) for lv, i, c, _, _ in values)]
    kernels: list[str] = []
    for p in kernel.passes:
        pass_name = f"{name}_pass{p.index}"
        launched = pass_launch(p, pass_name)
        kernels.append(launched.text)
        body.add(launch(pass_name, launched.grid, args, launched.meta, launched.num_warps))
        if p.reductions:
            finish_name = f"{name}_finish{p.index}"
            kernels.append(finish_kernel(kernel, p, finish_name))
            body.add(launch(finish_name, (kernel.xnumel,), args, finish_meta, 4 if chunks >= 128 else 1))
    return (prologue(kernel.module) + "\n\n" + "\n\n".join(kernels) + "\n\n"
            + f"def {name}({', '.join(kernel.runtime_params)}):\n" + body.text())


def launcher_source(kernel: ReductionKernel, shape: SplitShape) -> str:
    meta = _meta(shape)
    return chunked_launcher(kernel, shape.chunks, lambda p, name: PassLaunch(
        pass_kernel(kernel, p, name), (kernel.xnumel, shape.chunks), meta, shape.num_warps), meta)


def _meta(shape: SplitShape) -> dict[str, int]:
    return {"XBLOCK": 1, "R0_BLOCK": shape.block, "CHUNK": shape.chunk, "S": shape.chunks,
            "S_BLOCK": max(2, next_pow2(shape.chunks))}


def probe_source(kernel: ReductionKernel, shape: SplitShape) -> str:
    """The first pass kernel as a plain candidate of the original kernel, for ``compile_probe``."""
    types = {}
    for level, i, c, dtype, _ in _partials(kernel):
        types[_part(level, i, c)] = types[_final(level, i, c)] = SIGNATURE_TYPES[dtype]
    return probe_module(kernel, pass_kernel(kernel, kernel.passes[0], "_ko_probe"), "_ko_probe", types,
                        _meta(shape), shape.num_warps)


def _has_welford(kernel: ReductionKernel) -> bool:
    return any(r.kind == "welford" for p in kernel.passes for r in p.reductions)


def _shape_for(kernel: ReductionKernel, target: int, welford: bool) -> SplitShape | None:
    """About ``target`` chunks per row, each a multiple of its block; None when that gives too few or many."""
    chunk = max(MIN_CHUNK, -(-kernel.r0_numel // max(1, target)))
    block = min(MAX_BLOCK, next_pow2(chunk))
    chunk = -(-chunk // block) * block
    chunks = -(-kernel.r0_numel // chunk)
    if chunks < 2 or chunks > MAX_CHUNKS or (welford and chunks & (chunks - 1)):
        return None
    while welford and kernel.r0_numel - (chunks - 1) * chunk < block:  # a lane of the last chunk empty
        block //= 2
    return SplitShape(chunks, chunk, block, max(1, min(8, block // 256)))


def split_shapes(kernel: ReductionKernel, sms: int) -> list[SplitShape]:
    """Chunks per row for each of WAVES. A Welford statistic gets a power-of-two count of chunks and a block
    no longer than its last chunk, so no lane of the finish or of a chunk is empty: an empty Welford partial
    combined with a full one gives NaN (0 x inf in ``welford_combine``) where the squares overflow and
    Inductor's full lanes give +inf, and gate 2's near-max inputs would reject the candidate for it."""
    welford = _has_welford(kernel)
    shapes: list[SplitShape] = []
    for waves in WAVES:
        wanted = max(2, -(-waves * sms // kernel.xnumel))
        targets = [wanted]
        if welford:  # the nearest powers of two, then smaller ones down to two chunks
            above, below = next_pow2(wanted), next_pow2(wanted) // 2
            targets = [above, below] if above - wanted <= wanted - below else [below, above]
            targets += [1 << k for k in range(below.bit_length() - 2, 0, -1)]
        for target in targets:
            shape = _shape_for(kernel, target, welford)
            if shape is not None:
                if shape not in shapes:
                    shapes.append(shape)
                break
    return shapes


class SplitProgramsFamily(ReductionLauncherFamily):
    name = "split_programs"
    summary = ("few long rows over many programs: per-chunk partials in scratch, a finalize per row, the "
               "elementwise pass parallel over all chunks (a launcher)")
    cpu_reason = "more programs only add work on the CPU interpreter, which runs them one at a time"

    def declines(self, ctx: RewriteContext, kernel: ReductionKernel) -> str | None:
        hazard = kernel.split_hazard()
        if hazard:
            return hazard
        near = near_speed_of_light(ctx)
        if near:
            return near
        if not low_parallelism_signal(ctx, kernel.xnumel):
            return f"{kernel.xnumel} rows already fill {sm_count(ctx)} SMs (no low-parallelism evidence)"
        if not split_shapes(kernel, sm_count(ctx)):
            return f"rows of {kernel.r0_numel} are too short to split (at least 2 chunks of {MIN_CHUNK})"
        try:
            launcher_source(kernel, split_shapes(kernel, sm_count(ctx))[0])
        except NotTransformable as exc:
            return str(exc)
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        kernel = decompose(ctx.module)
        # The passes read what Inductor's passes read: each input of a later pass once more.
        rereads = [p for p in kernel.reread_pointers()]
        plan = traffic_plan(ctx, self.declaration, rereads)
        out: list[Rewrite] = []
        shapes = split_shapes(kernel, sm_count(ctx))[:MAX_VARIANTS]
        for shape, probed in zip(shapes, probe_all(ctx, [to_probe(ctx, functools.partial(probe_source, kernel, s)) for s in shapes]), strict=True):
            if probed is not None and probed.does_not_fit:
                continue
            try:
                source = launcher_source(kernel, shape)
            except Exception:  # noqa: BLE001 - one variant's blind spot must not stop the search
                continue
            programs = kernel.xnumel * shape.chunks
            out.append(Rewrite(
                family=self.name, title=f"split programs, {shape.label()}",
                detail=(f"{programs} programs instead of {kernel.xnumel} ({len(kernel.passes)} pass kernel(s), "
                        f"{len(kernel.levels)} finalize kernel(s), partials in scratch); {plan_text(plan)}"),
                source=source,
                params={"launcher": True, "chunks": shape.chunks, "chunk": shape.chunk, "R0_BLOCK": shape.block,
                        "num_warps": shape.num_warps, "programs": programs,
                        "registers": probed.regs if probed else None,
                        "efficiency": self.declaration.traffic_efficiency, **plan},
            ))
        return out
