"""Cooperative rows: G programs share a row, each holds its chunk in registers, and the row is read once.

For a looped reduction whose rows are too long for one program (or too few to fill the GPU), the
launcher runs one kernel in which each group of G adjacent programs owns a row at a time: each
program runs Inductor's passes on its chunk, publishes the chunk's partial (a release flag), and
combines the row's partials with Inductor's own reduction call. A partial still missing after a
bounded wait (``STALL_POLLS``, ``MAX_POLLS``) marks the row failed; a second kernel,
``<name>_redo``, recomputes every failed row with Inductor's own code. So the launcher is correct
under any schedule and never hangs (on the CPU interpreter every shared row is recomputed).
Needs a kernel that reads none of the buffers it writes.

Why the design is so, with the measurements behind it: docs/design-notes.md,
"search/rewrites/cooperative_rows.py".
"""

from __future__ import annotations

import ast
import copy
import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .base import Rewrite, RewriteContext
from .cost_model import (
    SINGLE_READ_MAX_ROW,
    Probe,
    blocks_per_sm,
    elements_per_thread,
    low_parallelism_signal,
    near_speed_of_light,
    plan_text,
    probed_in_batches,
    reread_signal,
    sm_count,
    to_probe,
    traffic_plan,
)
from .kernel_source import next_pow2
from .launcher_text import SIGNATURE_TYPES, Lines, launch, probe_module, prologue, scratch
from .reduction_family import ReductionLauncherFamily
from .reduction_passes import (
    Pass,
    Reduction,
    ReductionKernel,
    decompose,
    is_call,
    pointer_base,
)
from .statement_edits import share_loads, with_chunk_start, with_row, with_store_mask

STALL_POLLS = 4  # polls in a row during which no new program started, before the row is marked failed
MAX_POLLS = 1 << 20  # polls in all (about a second on a GPU)
MAX_GROUP = 256  # programs per row (the partials of a row are one vector)
CHUNKS = (8192, 4096, 16384, 2048, 1024, 512, 256)  # elements per program, in order of preference
MAX_VARIANTS = 4


@dataclass(frozen=True)
class CoopShape:
    chunk: int  # R0_BLOCK: the elements of a row one program holds
    group: int  # G: programs per row
    num_warps: int
    programs: int  # the grid: G x the row groups resident at once

    def label(self) -> str:
        return f"G={self.group}, chunk={self.chunk}, num_warps={self.num_warps}, programs={self.programs}"


def _partials(kernel: ReductionKernel) -> list[tuple[str, str, str]]:
    """(scratch name, torch dtype, identity) of every partial: one per level, reduction and result."""
    out = []
    for level, p in enumerate(kernel.levels):
        for i, r in enumerate(p.reductions):
            for c, acc in enumerate(r.accumulators):
                out.append((f"_ko_part{level}_{i}_{c}_ptr", acc.torch_dtype, acc.identity))
    return out


CONSTEXPRS = ("XBLOCK", "R0_BLOCK", "G", "G_BLOCK", "STALL_POLLS", "MAX_POLLS")
SCRATCH = ("_ko_flags_ptr", "_ko_arrivals_ptr", "_ko_failed_ptr")  # int32 scratch, zeroed per call
REDO_MAX_BLOCK = 4096
REDO_WARPS = 8


def kernel_parameters(kernel: ReductionKernel) -> list[str]:
    return [*kernel.runtime_params, *(name for name, _, _ in _partials(kernel)), *SCRATCH,
            *(f"{name}: tl.constexpr" for name in CONSTEXPRS)]


def cooperative_kernel(kernel: ReductionKernel, name: str, written_out: bool = False) -> str:
    """The ``@triton.jit`` kernel in which G programs cooperate on each row; ``written_out``: each pass's
    online-softmax combine written out for its one iteration (:func:`first_combine`)."""
    lines = Lines()
    lines.add("@triton.jit")
    with lines.block(f"def {name}({', '.join(kernel_parameters(kernel))}):"):
        for stmt in kernel.constants:
            lines.add(stmt.text())
        lines.add("_ko_pid = tl.program_id(0)\n_ko_member = _ko_pid % G\n_ko_programs = tl.num_programs(0)\n"
                  "_ko_groups = _ko_programs // G\n"
                  "tl.atomic_add(_ko_arrivals_ptr, 1, sem='relaxed')  # counts the programs that have started\n"
                  "_ko_gi = tl.arange(0, G_BLOCK)[None, :]\n_ko_gmask = _ko_gi < G\n"
                  "_ko_lead = (tl.zeros([XBLOCK, 1], tl.int32) + _ko_member) == 0  # writes the row's values")
        with lines.block("for _ko_row in range(_ko_pid // G, xnumel, _ko_groups):"):
            for stmt in kernel.header:
                lines.add(ast.unparse(with_row(stmt.node, "_ko_row")) if stmt is kernel.xoffset else stmt.text())
            lines.add("_ko_x = xoffset + tl.arange(0, XBLOCK)")
            for p in kernel.passes:
                lines.add("_ko_start = _ko_member * R0_BLOCK\nr0_offset = _ko_start")
                for stmt in p.body:
                    text = ast.unparse(with_chunk_start(stmt.node, "_ko_start"))
                    lines.add(first_combine(text, p) if written_out else text)
                if p.reductions:
                    _exchange(lines, kernel, p)
                for stmt in p.post:
                    reduction = kernel.reduction_of(stmt)
                    if reduction is not None:
                        level, i = kernel.levels.index(p), p.reductions.index(reduction)
                        lines.add(reduction.combining([f"_ko_v_{level}_{i}_{c}" for c in range(reduction.arity)]))
                        lines.add(uniform_row_values(reduction))
                    elif stmt.is_store:
                        lines.add(with_store_mask(stmt, "_ko_lead"))  # one writer per row value
                    else:
                        lines.add(stmt.text())
    tree = ast.parse(lines.text())
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef)
    row_loop = next(n for n in func.body if isinstance(n, ast.For))
    share_loads(row_loop.body)  # the chunk is loaded once for all passes
    return ast.unparse(tree)


FLOAT_ACCUMULATORS = ("tl.float32", "tl.float64", "tl.float16", "tl.bfloat16")


def uniform_row_values(reduction: Reduction) -> str:
    """The row's combined values as splats of one scalar (XBLOCK = 1), for float accumulators.

    Combined from G partials, they come out in the layout of the G-wide partial vector; where the
    chunk (R0_BLOCK wide) met them, triton 3.6 converted the whole chunk into that layout and back
    through shared memory (sm_90, softmax chunk 4096 at 4 warps: 96 registers instead of 64). A splat
    has no layout of its own, so the chunk keeps its own. The values are the same bits.
    """
    if not all(acc.dtype in FLOAT_ACCUMULATORS for acc in reduction.accumulators):
        return ""
    return "\n".join(f"{name} = tl.broadcast_to(tl.max(tl.reshape({name}, [1]), 0), {name}.shape)"
                     for name in sorted(reduction.stmt.targets))


def first_combine(statement: str, p: Pass) -> str:
    """``statement`` of a pass body, with Inductor's online-softmax combine written out for its one iteration.

    A cooperative program runs each pass's body once, on accumulators at their identity (max -inf,
    sum 0), where ``online_softmax_combine(-inf, 0, x)`` is exactly ``(x, 1)`` for finite x and -inf and
    ``(x, nan)`` for +inf and nan. Written so, the chunk needs no per-element max and sum beside it
    (triton 3.6, sm_90: part of the 96 -> 64 registers above).
    """
    node = ast.parse(statement).body[0]
    accumulators = {a.name for a in p.accumulators}
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and is_call(node.value, "triton_helpers.online_softmax_combine") and len(node.value.args) == 4):
        return statement
    target = node.targets[0]
    args = node.value.args
    if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts)
            and all(isinstance(a, ast.Name) and a.id in accumulators for a in args[:2])):
        return statement
    new_max, new_sum = (ast.unparse(e) for e in target.elts)
    value = ast.unparse(args[2])
    return (f"{new_max} = {value}\n"
            f"{new_sum} = tl.where(({value} == {value}) & ({value} != float('inf')), 1.0, float('nan'))"
            f".to({value}.dtype)")


def _exchange(lines: Lines, kernel: ReductionKernel, p: Pass) -> None:
    level = kernel.levels.index(p)
    levels = len(kernel.levels)
    values: list[tuple[int, int, str, str]] = []  # (reduction, component, partial scratch, identity)
    for i, r in enumerate(p.reductions):
        names = [f"_ko_p_{level}_{i}_{c}" for c in range(r.arity)]
        lines.add(f"{', '.join(names)} = {r.call_with([a.name for a in r.accumulators])}")
        for c, acc in enumerate(r.accumulators):
            part = f"_ko_part{level}_{i}_{c}_ptr"
            lines.add(f"tl.store({part} + (_ko_x * G + _ko_member), {names[c]})")
            values.append((i, c, part, acc.identity))
    lines.add(f"tl.debug_barrier()  # every thread's partial is written before the flag is raised\n"
              f"_ko_flag = _ko_flags_ptr + (_ko_row * {levels} + {level}) * G\n"
              "tl.atomic_xchg(_ko_flag + _ko_member, 1, sem='release')\n"
              "_ko_ready = tl.where(_ko_gmask, tl.atomic_add(_ko_flag + _ko_gi, 0, mask=_ko_gmask, sem='acquire'), 1)\n"
              "_ko_seen = tl.atomic_add(_ko_arrivals_ptr, 0, sem='acquire')\n"
              "_ko_stall = _ko_pid * 0\n_ko_polls = _ko_pid * 0")
    with lines.block("while (tl.sum((_ko_ready == 0).to(tl.int32)) > 0) & (_ko_stall < STALL_POLLS) "
                     "& (_ko_polls < MAX_POLLS):"):
        lines.add("_ko_ready = tl.where(_ko_gmask, tl.atomic_add(_ko_flag + _ko_gi, 0, mask=_ko_gmask, "
                  "sem='acquire'), 1)\n"
                  "_ko_now = tl.atomic_add(_ko_arrivals_ptr, 0, sem='acquire')\n"
                  "_ko_stall = tl.where((_ko_now == _ko_programs) | (_ko_now != _ko_seen), 0, _ko_stall + 1)\n"
                  "_ko_seen = _ko_now\n_ko_polls += 1")
    lines.add("tl.debug_barrier()")
    for i, c, part, identity in values:
        lines.add(f"_ko_v_{level}_{i}_{c} = tl.load({part} + (_ko_x[:, None] * G + _ko_gi), "
                  f"mask=_ko_gmask & (_ko_ready != 0), other={identity}, volatile=True)")
    # A partial that did not arrive: the row is recomputed by the redo kernel after this one.
    lines.add("_ko_missing = tl.sum((_ko_ready == 0).to(tl.int32)) > 0\n"
              "tl.store(_ko_failed_ptr + _ko_row, 1, mask=_ko_missing)")


def redo_kernel(kernel: ReductionKernel, name: str) -> str:
    """Inductor's kernel as ``@triton.jit`` ``name``, each program's passes behind its row's failed flag
    (one row per program: launched with XBLOCK=1)."""
    func = kernel.module.func
    assert func is not None
    redo = copy.deepcopy(func)
    redo.name = name
    redo.decorator_list = [ast.Name(id="triton.jit", ctx=ast.Load())]
    constexpr_at = next(i for i, a in enumerate(redo.args.args) if a.arg in kernel.module.constexpr_params)
    redo.args.args.insert(constexpr_at, ast.arg(arg="_ko_failed_ptr"))
    first_loop = next(i for i, node in enumerate(redo.body) if isinstance(node, ast.For))
    guard = ast.parse("if tl.load(_ko_failed_ptr + xoffset) != 0:\n    pass").body[0]
    assert isinstance(guard, ast.If)
    guard.body = redo.body[first_loop:]
    redo.body = [*redo.body[:first_loop], guard]
    return ast.unparse(ast.fix_missing_locations(redo))


def redo_hazard(kernel: ReductionKernel) -> str | None:
    """Why recomputing a failed row after the cooperative kernel could read what it wrote, or None.

    The redo reads the row again after the cooperative kernel's stores, so a buffer the kernel writes
    may be read only where the kernel itself wrote it first (Inductor's softmax stores the
    exponentials, then reads them back to divide): its first access, in program order, is a store.
    """
    assert kernel.module.func is not None
    stored = kernel.stored_pointers
    first: dict[str, str] = {}
    accesses = []  # (line, column, pointer, load or store): program order, as ast.walk is breadth-first
    for node in ast.walk(kernel.module.func):
        if isinstance(node, ast.Call) and (is_call(node, "tl.load") or is_call(node, "tl.store")) and node.args:
            base = pointer_base(node.args[0])
            if base in stored:
                accesses.append((node.lineno, node.col_offset, base, "store" if is_call(node, "tl.store") else "load"))
    for _, _, base, kind in sorted(accesses):
        first.setdefault(base, kind)
    for base, kind in first.items():
        if kind == "load":
            return f"the kernel reads {base} before it writes it: a failed row could not be recomputed"
    return None


def redo_block(kernel: ReductionKernel) -> int:
    """The redo kernel's R0_BLOCK: the largest power of two up to 4096 that divides the row (Inductor
    drops the row mask only when its blocks divide the row), else the row up to a power of two."""
    block = REDO_MAX_BLOCK
    while block > 1 and kernel.r0_numel % block:
        block //= 2
    return block if block >= 128 else min(REDO_MAX_BLOCK, next_pow2(kernel.r0_numel))


def launcher_source(kernel: ReductionKernel, shape: CoopShape, written_out: bool = False) -> str:
    """The launcher module: the cooperative kernel and ``def <kernel name>(<same parameters>)``."""
    name = kernel.name
    jit_name, redo_name = f"{name}_coop", f"{name}_redo"
    device = kernel.pointer_params[0]
    partials = _partials(kernel)
    body = Lines(1)
    for part, dtype, _ in partials:
        body.add(scratch(part, kernel.xnumel * shape.group, dtype, device))
    body.add(scratch("_ko_flags_ptr", kernel.xnumel * len(kernel.levels) * shape.group, "int32", device, zeros=True))
    body.add(scratch("_ko_arrivals_ptr", 1, "int32", device, zeros=True))
    body.add(scratch("_ko_failed_ptr", kernel.xnumel, "int32", device, zeros=True))
    meta = _meta(shape)
    body.add(launch(jit_name, (shape.programs,), [*kernel.runtime_params, *(p for p, _, _ in partials), *SCRATCH],
                    meta, shape.num_warps))
    body.add(launch(redo_name, (kernel.xnumel,), [*kernel.runtime_params, "_ko_failed_ptr"],
                    {"XBLOCK": 1, "R0_BLOCK": redo_block(kernel)}, REDO_WARPS))
    return (prologue(kernel.module) + "\n\n" + cooperative_kernel(kernel, jit_name, written_out) + "\n\n\n"
            + redo_kernel(kernel, redo_name) + "\n\n\n"
            + f"def {name}({', '.join(kernel.runtime_params)}):\n" + body.text())


def _meta(shape: CoopShape) -> dict[str, int]:
    return {"XBLOCK": 1, "R0_BLOCK": shape.chunk, "G": shape.group, "G_BLOCK": max(2, next_pow2(shape.group)),
            "STALL_POLLS": STALL_POLLS, "MAX_POLLS": MAX_POLLS}


def probe_source(kernel: ReductionKernel, shape: CoopShape, written_out: bool = False) -> str:
    """The cooperative kernel as a plain candidate of the original kernel, for ``compile_probe``."""
    types = {p: SIGNATURE_TYPES[dtype] for p, dtype, _ in _partials(kernel)}
    types.update({scratch_name: "*i32" for scratch_name in SCRATCH})
    return probe_module(kernel, cooperative_kernel(kernel, "_ko_probe", written_out), "_ko_probe", types, _meta(shape),
                        shape.num_warps)


def _fewest_registers(probed: Iterator[tuple[tuple[CoopShape, bool], str | None, Probe | None]],
                      per_shape: int) -> Iterator[tuple[CoopShape, bool, Probe | None]]:
    """Each shape once, in the form whose probe fits with the fewest registers (the first form without a
    probe: no evidence, Inductor's own combine)."""
    while True:
        group = list(itertools.islice(probed, per_shape))
        if not group:
            return
        fits = [(p.regs, i) for i, (_, _, p) in enumerate(group)
                if p is not None and not p.does_not_fit and p.regs is not None]
        (shape, written_out), _, probe = group[min(fits)[1] if fits else 0]
        yield shape, written_out, probe


class CooperativeRowsFamily(ReductionLauncherFamily):
    name = "cooperative_rows"
    summary = ("long rows read once: G programs per row each hold a chunk in registers and exchange partials "
               "through scratch (a launcher)")
    cpu_reason = ("needs co-resident programs: the CPU interpreter runs them one at a time, so every wait "
                  "would end in recomputing the partials")

    def declines(self, ctx: RewriteContext, kernel: ReductionKernel) -> str | None:
        if not kernel.levels:
            return "no reduction to combine"
        hazard = kernel.cross_chunk_hazard() or redo_hazard(kernel)
        if hazard:
            return hazard
        near = near_speed_of_light(ctx)
        if near:
            return near
        if not self._shapes(ctx, kernel):
            return f"rows of {kernel.r0_numel} are too short to split over programs"
        reread = reread_signal(ctx, kernel)
        few = low_parallelism_signal(ctx, kernel.xnumel)
        if few:
            return None
        if reread and next_pow2(kernel.r0_numel) > SINGLE_READ_MAX_ROW:
            return None
        if reread:
            return f"rows of {kernel.r0_numel} fit one program: a single read (single_read) needs no exchange"
        return "no evidence of re-reads or low parallelism"

    def _shapes(self, ctx: RewriteContext, kernel: ReductionKernel) -> list[CoopShape]:
        shapes = []
        unmasked = re.search(r"^\s*r0_mask = tl\.full\(", kernel.module.text, re.MULTILINE) is not None
        for chunk in CHUNKS:
            group = -(-kernel.r0_numel // chunk)
            if group < 2 or group > MAX_GROUP:
                continue
            if unmasked and kernel.r0_numel % chunk:
                continue  # no row mask: the last program's chunk would read past the row
            warps = max(4, min(16, chunk // (32 * 32)))
            shapes.append(CoopShape(chunk, group, warps, 0))
        shapes.sort(key=lambda s: (not 8 <= s.group <= 128, CHUNKS.index(s.chunk)))
        return shapes

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        kernel = decompose(ctx.module)
        sms = sm_count(ctx)
        plan = traffic_plan(ctx, self.declaration, [])
        out: list[Rewrite] = []
        # Each shape in two forms when they differ: Inductor's combine as it is, and written out for its one
        # iteration. Which needs fewer registers depends on the Triton version (sm_90, softmax chunk 4096 at
        # 4 warps: triton 3.6 64 written out against 80, triton 3.9 119 against 64), so the probe decides.
        written = any(first_combine(stmt.text(), p) != stmt.text() for p in kernel.passes for stmt in p.body)
        per_shape = 2 if written else 1
        forms = [(shape, form) for shape in self._shapes(ctx, kernel) for form in (False, True)[:per_shape]]
        items = (((s, f), to_probe(ctx, functools.partial(probe_source, kernel, s, f))) for s, f in forms)
        probed_forms = probed_in_batches(ctx, items, MAX_VARIANTS * per_shape)
        # The preferred shapes compile together, as many as could all become variants.
        for shape, written_out, probed in _fewest_registers(probed_forms, per_shape):
            if len(out) >= MAX_VARIANTS:
                break
            if probed is not None and probed.does_not_fit:
                continue  # the chunk spills registers or needs more shared memory than a program may have
            resident = blocks_per_sm(shape.num_warps, probed.regs if probed else None,
                                     probed.shared_bytes if probed else None) * sms
            groups = max(1, min(kernel.xnumel, resident // shape.group))
            shape = CoopShape(shape.chunk, shape.group, shape.num_warps, groups * shape.group)
            try:
                source = launcher_source(kernel, shape, written_out)
            except Exception:  # noqa: BLE001 - one variant's blind spot must not stop the search
                continue
            registers = (f"{probed.regs} registers, no spills" if probed and probed.regs is not None else
                         f"{elements_per_thread(shape.chunk, shape.num_warps):.0f} elements per thread")
            out.append(Rewrite(
                family=self.name, title=f"cooperative rows, {shape.label()}",
                detail=(f"{shape.group} programs per row hold {shape.chunk} elements each ({registers}); "
                        f"partials of {len(kernel.levels)} reduction level(s) exchanged through scratch; "
                        f"the row is read once; {plan_text(plan)}"),
                source=source,
                params={"launcher": True, "chunk": shape.chunk, "group": shape.group, "num_warps": shape.num_warps,
                        "programs": shape.programs, "registers": probed.regs if probed else None,
                        "written_out": written_out,
                        "efficiency": self.declaration.traffic_efficiency, **plan},
            ))
        return out
