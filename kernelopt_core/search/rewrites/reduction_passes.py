"""An Inductor looped reduction kernel, decomposed into the passes it makes over each row.

Inductor writes a reduction whose rows are too long for one block as a header, then passes
(``for r0_offset in tl.range(0, r0_numel, R0_BLOCK)``), each followed by the reductions of its
accumulators. Each of those reductions combines per-lane accumulators with an associative function
whose identity is the accumulator's initial value, so the same call also combines per-chunk
partials; that lets single_read, cooperative_rows and split_programs cut a row into chunks and
combine them with Inductor's own code, fused prologues and epilogues included.

:func:`decompose` reads the kernel with ``ast`` and raises :class:`NotTransformable` with a precise
reason for anything it cannot rebuild exactly. Pure Python; no torch or triton. The kernel's shape
in full: docs/design-notes.md, "search/rewrites/reduction_passes.py".
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeGuard

from .kernel_source import KernelModule

# reduction call -> (kind, number of accumulators it reads and results it returns, position of `dim`)
REDUCTION_CALLS: dict[str, tuple[str, int, int]] = {
    "tl.sum": ("sum", 1, 1),
    "triton_helpers.max2": ("max", 1, 1),
    "triton_helpers.min2": ("min", 1, 1),
    "triton_helpers.any": ("any", 1, 1),
    "triton_helpers.prod": ("prod", 1, 1),
    "triton_helpers.online_softmax_reduce": ("online_softmax", 2, 2),
    "triton_helpers.welford": ("welford", 3, 3),
}
# calls whose kernels cannot be cut into chunks exactly, and why
UNSUPPORTED_CALLS: dict[str, str] = {
    "triton_helpers.max_with_index": "an argmax with its index",
    "triton_helpers.min_with_index": "an argmin with its index",
    "triton_helpers.maximum_with_index": "an argmax with its index",
    "triton_helpers.minimum_with_index": "an argmin with its index",
    "tl.associative_scan": "a scan",
    "tl.cumsum": "a scan",
    "tl.cumprod": "a scan",
    "tl.sort": "a sort",
    "tl.histogram": "a histogram",
    "triton_helpers.exclusive_scan_decoupled_lookback": "a scan",
    "triton_helpers.exclusive_scan_decoupled_lookback_64": "a scan",
    "triton_helpers.sort_with_index": "a sort",
    "triton_helpers.x_grid_barrier": "a grid barrier",
    "tl.rand": "random numbers",
    "tl.randn": "random numbers",
    "tl.randint": "random numbers",
    "triton_helpers.rand4x": "random numbers",
    "triton_helpers.randn4x": "random numbers",
    "triton_helpers.randint64": "random numbers",
}
ROW_SETUP = ("r0_index", "r0_mask", "roffset", "rindex")
# Triton dtype names of accumulators -> torch dtype attribute names, for scratch buffers
TORCH_DTYPES: dict[str, str] = {
    "tl.float32": "float32", "tl.float64": "float64", "tl.float16": "float16", "tl.bfloat16": "bfloat16",
    "tl.int64": "int64", "tl.int32": "int32", "tl.int16": "int16", "tl.int8": "int8", "tl.uint8": "uint8",
    "tl.int1": "bool",
}


class NotTransformable(ValueError):
    """The kernel is outside the shape the algorithmic families rebuild exactly; the message says why."""


def dotted(node: ast.AST) -> str:
    """``tl.sum`` for ``tl.sum``; '' for anything that is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = dotted(node.value)
        return f"{owner}.{node.attr}" if owner else ""
    return ""


def names_read(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def ordered_reads(node: ast.AST) -> list[str]:
    """The names ``node`` reads, in source order, each once."""
    found = [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return list(dict.fromkeys(n.id for n in found))


def names_assigned(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


def is_call(node: ast.AST | None, name: str) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and dotted(node.func) == name


def pointer_base(node: ast.AST) -> str | None:
    """The pointer argument an address expression is built on (``in_ptr0`` in ``in_ptr0 + (r0_1 + 64*x0)``)."""
    found = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and "ptr" in n.id})
    return found[0] if len(found) == 1 else None


@dataclass
class Stmt:
    """One statement of the kernel body (or of a loop body)."""

    node: ast.stmt

    @property
    def targets(self) -> frozenset[str]:
        return names_assigned(self.node)

    @property
    def reads(self) -> frozenset[str]:
        return names_read(self.node)

    @property
    def store_call(self) -> ast.Call | None:
        """The ``tl.store`` call this statement is; None for any other statement."""
        node = self.node
        return node.value if isinstance(node, ast.Expr) and is_call(node.value, "tl.store") else None

    @property
    def store_address(self) -> ast.expr | None:
        """The address a store writes (its first argument); None for any other statement."""
        call = self.store_call
        return call.args[0] if call is not None and call.args else None

    @property
    def is_store(self) -> bool:
        return self.store_call is not None

    @property
    def is_barrier(self) -> bool:
        return isinstance(self.node, ast.Expr) and is_call(self.node.value, "tl.debug_barrier")

    @property
    def store_pointer(self) -> str | None:
        address = self.store_address
        return pointer_base(address) if address is not None else None

    def text(self) -> str:
        return ast.unparse(self.node)


@dataclass
class Accumulator:
    """A per-lane running value of a pass, and the statement that initialises it before the loop."""

    name: str
    init: Stmt
    identity: str  # the init value's source: the identity of the reduction that consumes it
    dtype: str  # Triton dtype source, e.g. "tl.float32"

    @property
    def torch_dtype(self) -> str:
        return TORCH_DTYPES[self.dtype]


@dataclass
class Reduction:
    """A post-loop statement reducing accumulators over the row: ``tmp3 = tl.sum(_tmp3, 1)[:, None]``."""

    kind: str
    function: str  # e.g. "triton_helpers.online_softmax_reduce"
    stmt: Stmt
    call: ast.Call
    accumulators: list[Accumulator]

    @property
    def arity(self) -> int:
        return len(self.accumulators)

    def call_with(self, values: list[str]) -> str:
        """The reduction call with its accumulator arguments replaced by ``values`` (same order)."""
        call = copy.deepcopy(self.call)
        for i, value in enumerate(values):
            call.args[i] = ast.Name(value, ast.Load())
        return ast.unparse(call)

    def rebound(self, results: list[str]) -> str:
        """The original statement with the reduction call replaced by already computed results."""
        return self._replacing_call(results[0] if len(results) == 1 else "(" + ", ".join(results) + ")")

    def combining(self, values: list[str]) -> str:
        """The original statement reducing ``values`` (partials, one per accumulator) instead."""
        return self._replacing_call(self.call_with(values))

    def _replacing_call(self, replacement_text: str) -> str:
        replacement = ast.parse(replacement_text, mode="eval").body
        where = (self.call.lineno, self.call.col_offset, self.call.end_lineno, self.call.end_col_offset)

        class Swap(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                if (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset) == where:
                    return replacement
                return self.generic_visit(node)

        return ast.unparse(Swap().visit(copy.deepcopy(self.stmt.node)))


@dataclass
class Pass:
    """One ``for r0_offset`` loop over the row and the statements after it (up to the next loop)."""

    index: int
    body: list[Stmt]
    post: list[Stmt]
    accumulators: list[Accumulator] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)

    @property
    def stores(self) -> list[Stmt]:
        return [s for s in self.body if s.is_store]

    @property
    def post_stores(self) -> list[Stmt]:
        return [s for s in self.post if s.is_store]

    def accumulator_slice(self) -> list[Stmt]:
        """The body statements the accumulators depend on (no stores): a chunk's partial, recomputed."""
        return slice_for(self.body, {a.name for a in self.accumulators})


@dataclass
class ReductionKernel:
    """A looped reduction kernel, cut into header, passes and post segments."""

    module: KernelModule
    constants: list[Stmt]  # xnumel = N, r0_numel = N, rnumel = r0_numel, RBLOCK: tl.constexpr = R0_BLOCK
    header: list[Stmt]  # everything else before the first loop (accumulator inits included)
    passes: list[Pass]
    xnumel: int
    r0_numel: int
    pointer_params: list[str]
    xoffset: Stmt  # the header statement that reads tl.program_id(0)

    @property
    def runtime_params(self) -> list[str]:
        """The kernel's runtime parameters in order (pointers, then xnumel and r0_numel)."""
        return [p for p in self.module.params if p not in self.module.constexpr_params]

    def reduction_of(self, stmt: Stmt) -> Reduction | None:
        for p in self.passes:
            for r in p.reductions:
                if r.stmt is stmt:
                    return r
        return None

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def levels(self) -> list[Pass]:
        """The passes that end in reductions, in order."""
        return [p for p in self.passes if p.reductions]

    @property
    def stored_pointers(self) -> set[str]:
        out = {s.store_pointer for p in self.passes for s in (*p.body, *p.post) if s.is_store}
        return {p for p in out if p}

    def reread_pointers(self) -> list[str]:
        """Pointers loaded by more than one pass (what a single read saves)."""
        seen: dict[str, set[int]] = {}
        for p in self.passes:
            for stmt in p.body:
                for node in ast.walk(stmt.node):
                    if is_call(node, "tl.load") and node.args:
                        base = pointer_base(node.args[0])
                        if base:
                            seen.setdefault(base, set()).add(p.index)
        return sorted(name for name, passes in seen.items() if len(passes) > 1)

    def store_addresses(self) -> dict[str, set[str]]:
        """Pointer -> the address expressions (``ast.dump``) every store to it uses."""
        out: dict[str, set[str]] = {}
        for p in self.passes:
            for stmt in (*p.body, *p.post):
                address = stmt.store_address
                if address is not None:
                    out.setdefault(stmt.store_pointer or "?", set()).add(ast.dump(address))
        return out

    def _common_hazard(self) -> str | None:
        if any(s.store_pointer is None for p in self.passes for s in (*p.body, *p.post) if s.is_store):
            return "a store whose address is not built on one pointer parameter"
        stored = self.stored_pointers
        for p in self.passes:
            row_names = _dependents(p.body, {"r0_offset"})
            for stmt in p.stores:
                address = stmt.store_address
                if not (address is not None and names_read(address) & row_names):
                    return f"a store inside the loop writes the same element in every iteration: {stmt.text()}"
            for stmt in p.post:
                for load in _loads(stmt.node):
                    if pointer_base(load.args[0]) in stored:
                        return f"a row value is read from {pointer_base(load.args[0])}, which the kernel also writes"
        return None

    def cross_chunk_hazard(self) -> str | None:
        """Why programs owning different chunks of one row could see each other's writes, or None.

        A pointer the kernel writes may be read only where every store to it uses the same address
        (so a program only ever touches its own chunk's elements), and never by what a partial
        depends on (another program may recompute that partial before the owner wrote them).
        """
        common = self._common_hazard()
        if common:
            return common
        stored = self.store_addresses()
        for p in self.passes:
            partial = {id(s.node) for s in p.accumulator_slice()}
            for stmt in p.body:
                for load in _loads(stmt.node):
                    base = pointer_base(load.args[0])
                    if base not in stored:
                        continue
                    if id(stmt.node) in partial:
                        return f"a partial reads {base}, which the kernel also writes"
                    if stored[base] != {ast.dump(load.args[0])}:
                        return f"{base} is read at an address other programs of the row may write"
        return None

    def split_hazard(self) -> str | None:
        """Why running each pass as its own kernel, chunks in parallel, could change what a load sees.

        Passes run one after another (a kernel each), so a pass may read what an earlier pass wrote;
        inside a pass, a pointer the same pass writes may be read only at the address every such
        store uses (this iteration's own elements).
        """
        common = self._common_hazard()
        if common:
            return common
        for p in self.passes:
            here: dict[str, set[str]] = {}
            for stmt in p.stores:
                address = stmt.store_address
                if address is not None:
                    here.setdefault(stmt.store_pointer or "?", set()).add(ast.dump(address))
            for stmt in p.body:
                for load in _loads(stmt.node):
                    base = pointer_base(load.args[0])
                    if base in here and here[base] != {ast.dump(load.args[0])}:
                        return f"{base} is read at an address other chunks of the pass may write"
        return None


def _loads(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and is_call(n, "tl.load") and n.args]


# --- reading the kernel ------------------------------------------------------------------------


def decompose(module: KernelModule) -> ReductionKernel:
    """Cut an Inductor looped reduction into its passes; :class:`NotTransformable` says why not."""
    func = module.func
    if func is None:
        raise NotTransformable("no kernel function")
    if not module.is_looped_reduction:
        raise NotTransformable("not a looped reduction")
    if "r1_numel" in module.numels or "R1_BLOCK" in module.params:
        raise NotTransformable("two reduction dimensions")
    if module.constexpr_params != ["XBLOCK", "R0_BLOCK"]:
        raise NotTransformable(f"meta-parameters {module.constexpr_params}, expected XBLOCK and R0_BLOCK")
    runtime = [p for p in module.params if p not in module.constexpr_params]
    sizes = [p for p in runtime if "ptr" not in p]
    if sizes != ["xnumel", "r0_numel"]:
        extra = [p for p in sizes if p not in ("xnumel", "r0_numel")]
        raise NotTransformable(f"runtime sizes {', '.join(extra) or sizes} (dynamic shapes)" if extra else
                               f"size parameters {sizes}, expected xnumel and r0_numel")
    if "xnumel" not in module.numels or "r0_numel" not in module.numels:
        raise NotTransformable("the row count or row length is not fixed in the kernel")
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if "atomic" in name:
                raise NotTransformable(f"atomics ({name})")
            if name in UNSUPPORTED_CALLS:
                raise NotTransformable(f"{UNSUPPORTED_CALLS[name]} ({name})")
            if name == "tl.num_programs" or (name == "tl.program_id" and not _is_axis0(node)):
                raise NotTransformable(f"{ast.unparse(node)} outside the row offset")
    constants: list[Stmt] = []
    header: list[Stmt] = []
    passes: list[Pass] = []
    for node in func.body:
        if isinstance(node, ast.For):
            _check_loop(node)
            body = []
            for inner in node.body:
                _check_simple(inner, "inside the row loop")
                body.append(Stmt(inner))
            passes.append(Pass(index=len(passes), body=body, post=[]))
            continue
        _check_simple(node, "in the kernel body")
        stmt = Stmt(node)
        if not passes:
            (constants if _is_constant(node) else header).append(stmt)
        else:
            passes[-1].post.append(stmt)
    if not passes:
        raise NotTransformable("no r0_offset loop")
    xoffsets = [s for s in header if any(is_call(n, "tl.program_id") for n in ast.walk(s.node))]
    if len(xoffsets) != 1 or xoffsets[0].targets != {"xoffset"}:
        raise NotTransformable("the row offset is not `xoffset = tl.program_id(0) * XBLOCK`")
    if any(any(is_call(n, "tl.program_id") for n in ast.walk(s.node)) for p in passes for s in (*p.body, *p.post)):
        raise NotTransformable("tl.program_id inside a pass")
    kernel = ReductionKernel(module=module, constants=constants, header=header, passes=passes,
                             xnumel=module.numels["xnumel"], r0_numel=module.numels["r0_numel"],
                             pointer_params=[p for p in runtime if "ptr" in p], xoffset=xoffsets[0])
    _find_accumulators(kernel)
    _check_scoping(kernel)
    return kernel


def _is_axis0(node: ast.Call) -> bool:
    return len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0


def _is_constant(node: ast.stmt) -> bool:
    """``xnumel = 4096``, ``rnumel = r0_numel``, ``RBLOCK: tl.constexpr = R0_BLOCK``: hoistable."""
    if isinstance(node, ast.AnnAssign):
        return True
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name = node.targets[0].id
        return name.endswith("numel") and (isinstance(node.value, ast.Constant) or
                                           (isinstance(node.value, ast.Name) and node.value.id.endswith("numel")))
    return False


def _check_loop(node: ast.For) -> None:
    header = ast.unparse(node.iter)
    if not (isinstance(node.target, ast.Name) and node.target.id == "r0_offset"
            and header in ("tl.range(0, r0_numel, R0_BLOCK)", "range(0, r0_numel, R0_BLOCK)")):
        raise NotTransformable(f"a loop other than `for r0_offset in tl.range(0, r0_numel, R0_BLOCK)`: {header}")
    if node.orelse:
        raise NotTransformable("a for-else loop")


def _check_simple(node: ast.stmt, where: str) -> None:
    if isinstance(node, ast.Assign):
        if not all(isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets) or len(node.targets) != 1:
            raise NotTransformable(f"an assignment to something other than names {where}: {ast.unparse(node)}")
        target = node.targets[0]
        if isinstance(target, ast.Tuple) and not all(isinstance(e, ast.Name) for e in target.elts):
            raise NotTransformable(f"a nested assignment target {where}: {ast.unparse(node)}")
        return
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        name = dotted(node.value.func)
        if name in ("tl.store", "tl.debug_barrier"):
            return
        raise NotTransformable(f"a call made for its effect {where}: {name or ast.unparse(node.value)}")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring or a stray constant
    kind = type(node).__name__.lower()
    raise NotTransformable(f"{'control flow' if kind in ('if', 'while', 'for', 'with', 'try') else kind} {where}: "
                           f"{ast.unparse(node).splitlines()[0]}")


def _find_accumulators(kernel: ReductionKernel) -> None:
    top_level: dict[str, Stmt] = {}  # name -> its last top-level assignment so far
    for stmt in kernel.constants + kernel.header:
        for name in stmt.targets:
            top_level[name] = stmt
    for p in kernel.passes:
        assigned: set[str] = set()
        carried: list[str] = []
        loop_names = names_assigned_in(p.body)
        for stmt in p.body:
            for name in ordered_reads(stmt.node):
                if name not in assigned and name in loop_names and name not in carried:
                    carried.append(name)
            assigned |= stmt.targets
        for name in carried:
            init = top_level.get(name)
            if init is None:
                raise NotTransformable(f"{name} is carried across loop iterations but never initialised before the loop")
            identity, dtype = _accumulator_init(init.node, name)
            p.accumulators.append(Accumulator(name=name, init=init, identity=identity, dtype=dtype))
        by_name = {a.name: a for a in p.accumulators}
        consumed: set[str] = set()
        for stmt in p.post:
            reads = stmt.reads & set(by_name)
            if not reads:
                continue
            reduction = _reduction_of(stmt, by_name)
            if reduction is None:
                raise NotTransformable(f"accumulator {sorted(reads)[0]} is used after its loop by "
                                       f"`{stmt.text()}`, not by a known reduction")
            p.reductions.append(reduction)
            consumed |= {a.name for a in reduction.accumulators}
        missing = [a.name for a in p.accumulators if a.name not in consumed]
        if missing:
            raise NotTransformable(f"accumulator {missing[0]} is never reduced after its loop")
        for stmt in p.post:
            for name in stmt.targets:
                top_level[name] = stmt
        # A store inside the loop must not depend on a running accumulator (that would be a scan).
        running = _dependents(p.body, set(by_name))
        for stmt in p.stores:
            if stmt.reads & running:
                raise NotTransformable(f"a store depends on a running accumulator (a scan): {stmt.text()}")


def names_assigned_in(stmts: Iterable[Stmt]) -> set[str]:
    out: set[str] = set()
    for stmt in stmts:
        out |= stmt.targets
    return out


def _accumulator_init(node: ast.stmt, name: str) -> tuple[str, str]:
    """(identity source, dtype source) of ``tl.full([XBLOCK, R0_BLOCK], v, dt)`` / ``tl.zeros([...], dt)``."""
    value = node.value if isinstance(node, ast.Assign) else None
    shape_ok = (isinstance(value, ast.Call) and value.args
                and ast.unparse(value.args[0]).replace(" ", "") == "[XBLOCK,R0_BLOCK]")
    if shape_ok and is_call(value, "tl.full") and len(value.args) == 3:
        dtype = ast.unparse(value.args[2])
        identity = ast.unparse(value.args[1])
    elif shape_ok and is_call(value, "tl.zeros") and len(value.args) == 2:
        dtype, identity = ast.unparse(value.args[1]), "0"
    else:
        raise NotTransformable(f"accumulator {name} is not initialised with tl.full/tl.zeros([XBLOCK, R0_BLOCK], ...)")
    if dtype not in TORCH_DTYPES:
        raise NotTransformable(f"accumulator {name} has dtype {dtype}")
    return identity, dtype


def _reduction_of(stmt: Stmt, accumulators: dict[str, Accumulator]) -> Reduction | None:
    if not isinstance(stmt.node, ast.Assign):
        return None
    calls = [n for n in ast.walk(stmt.node.value) if isinstance(n, ast.Call) and dotted(n.func) in REDUCTION_CALLS]
    if len(calls) != 1:
        return None
    call = calls[0]
    function = dotted(call.func)
    kind, arity, dim_at = REDUCTION_CALLS[function]
    if len(call.args) <= dim_at or call.keywords:
        return None
    args = call.args[:arity]
    names = [a.id for a in args if isinstance(a, ast.Name)]
    if len(names) != len(args) or not all(name in accumulators for name in names):
        return None
    dim = call.args[dim_at]
    if not (isinstance(dim, ast.Constant) and dim.value == 1):
        return None
    # The accumulators may appear nowhere else in the statement.
    if sum(1 for n in ast.walk(stmt.node) if isinstance(n, ast.Name) and n.id in accumulators) != arity:
        return None
    targets = stmt.node.targets[0]
    if arity > 1 and not (isinstance(targets, ast.Tuple) and len(targets.elts) == arity and stmt.node.value is call):
        return None
    if arity == 1 and not isinstance(targets, ast.Name):
        return None
    return Reduction(kind=kind, function=function, stmt=stmt, call=call,
                     accumulators=[accumulators[name] for name in names])


def _dependents(stmts: list[Stmt], roots: set[str]) -> set[str]:
    """Names whose value (transitively, in statement order) depends on ``roots``."""
    tainted = set(roots)
    for stmt in stmts:
        if stmt.reads & tainted:
            tainted |= stmt.targets
    return tainted


def _check_scoping(kernel: ReductionKernel) -> None:
    """A pass's local names are not read after it (Inductor recomputes everything in each pass)."""
    top = names_assigned_in(kernel.constants + kernel.header)
    for p in kernel.passes:
        top |= names_assigned_in(p.post)
    local: set[str] = set()
    for p in kernel.passes:
        local |= names_assigned_in(p.body) - {a.name for a in p.accumulators}
    local -= top
    for p in kernel.passes:
        accumulators = {a.name for a in p.accumulators}
        assigned: set[str] = set()
        for stmt in p.body:
            leaked = (stmt.reads - assigned - accumulators) & local
            if leaked:
                raise NotTransformable(f"{sorted(leaked)[0]} is carried from one pass into another")
            assigned |= stmt.targets
        for stmt in p.post:
            leaked = stmt.reads & local
            if leaked:
                raise NotTransformable(f"{sorted(leaked)[0]}, computed inside a loop, is read after it")


# --- rebuilding --------------------------------------------------------------------------------


def slice_for(stmts: list[Stmt], wanted: set[str]) -> list[Stmt]:
    """The statements (in order) that the names in ``wanted`` depend on, stores and barriers left out."""
    needed = set(wanted)
    keep: list[Stmt] = []
    for stmt in reversed(stmts):
        if stmt.is_store or stmt.is_barrier or not stmt.targets:
            continue
        if stmt.targets & needed:
            keep.append(stmt)
            needed |= stmt.reads
    return list(reversed(keep))
