"""What the ``@triton.jit`` functions of a kernel module do with their data, read from the source.

Gate 1's data rule (:mod:`.static_reloads`) needs three facts about each
jit function, computed with :mod:`ast` alone: which names hold **data** (values that depend on what
a ``tl.load`` read, through any arithmetic and loop-carried accumulators; what an atomic returns is
taken for synchronisation state), which names are **constants** (every binding one literal value),
and which names flow into an **address**.

Calls are recognised by what the module's imports make of their names, within Triton and
Inductor's ``triton_helpers``; gate 1's resolution rules (:mod:`.static_rules`) have rejected
anything else by then. Details: docs/design-notes.md, "gates/static_dataflow.py".
"""

from __future__ import annotations

import ast
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

_TRITON_PREFIXES = ("triton.", "torch._inductor.runtime.triton_helpers")
LOADS = frozenset({"load"})
STORES = frozenset({"store"})
ASSERTS = frozenset({"device_assert", "static_assert"})
BARRIERS = frozenset({"debug_barrier"})
# Functions that compare their arguments (an original's comparisons include these: maximum(x, -1.0) is
# x's comparison with -1.0).
MIN_MAX = frozenset({"maximum", "minimum", "fmax", "fmin", "clamp"})


@dataclass(frozen=True)
class Constant:
    """A constant's value, or, for a ``tl.constexpr`` parameter, its name (value None)."""

    value: float | None
    text: str

    @property
    def key(self) -> str:
        """What "the same literal" means: equal once rounded to float32 (how a kernel holds it)."""
        if self.value is None:
            return f"constexpr {self.text}"
        try:
            return repr(struct.unpack("f", struct.pack("f", self.value))[0])
        except (OverflowError, struct.error):
            return repr(float(self.value))


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the qualified name a module-level import binds to it."""
    aliases: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for alias in stmt.names:
                aliases[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return aliases


def qualified(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``tl.load`` -> ``triton.language.load`` (None for what no import names)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def _triton_function(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """The last part of a call's qualified name when it is Triton's or triton_helpers' (``load``)."""
    name = qualified(call.func, aliases)
    if name is None or not name.startswith(_TRITON_PREFIXES):
        return None
    return name.rsplit(".", 1)[-1]


def is_jit(func: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if qualified(target, aliases) in ("triton.jit", "triton.runtime.jit.jit"):
            return True
    return False


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@dataclass(frozen=True)
class Binding:
    """One binding in a function body: the name, its value (None where it is not one expression), the
    names the value reads and whether it reads memory itself."""

    name: str
    value: ast.AST | None
    reads: frozenset[str]
    loads: bool


def _binding_pairs(nodes: list[ast.AST]) -> Iterator[tuple[str, ast.AST | None]]:
    """(name, value) for every binding in the body; a loop variable's value is its iterable, an augmented
    assignment's the whole update, a tuple target's None (not one expression)."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                single = isinstance(target, ast.Name)
                for name in target_names(target):
                    yield name, node.value if single else None
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            yield node.target.id, node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, ast.BinOp(left=ast.Name(node.target.id, ast.Load()), op=node.op, right=node.value)
        elif isinstance(node, ast.For):
            for name in target_names(node.target):
                yield name, ast.Call(func=ast.Name("iter", ast.Load()), args=[node.iter], keywords=[])
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id, node.value


def target_names(target: ast.AST) -> list[str]:
    """The names an assignment target binds (through tuples and lists)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in target_names(element)]
    return []


@dataclass
class FunctionFlow:
    """The facts of one jit function."""

    func: ast.FunctionDef
    params: list[str]
    nodes: list[ast.AST] = field(default_factory=list)  # every node of the function, walked once
    bindings: list[Binding] = field(default_factory=list)
    data: set[str] = field(default_factory=set)
    constants: dict[str, Constant] = field(default_factory=dict)
    addresses: set[str] = field(default_factory=set)


@dataclass
class ModuleFlow:
    """Every jit function of a module, with the facts the data rules read."""

    aliases: dict[str, str]
    functions: list[FunctionFlow]
    module_constants: dict[str, Constant]
    loading: set[str]  # jit functions whose result may depend on memory they read

    def function(self, call: ast.Call) -> str | None:
        """The last part of a call's qualified name when it is Triton's or triton_helpers' (``load``)."""
        return _triton_function(call, self.aliases)

    def constant(self, node: ast.AST, flow: FunctionFlow) -> Constant | None:
        return _constant(node, flow.constants, self.aliases)

    def is_data(self, node: ast.AST, flow: FunctionFlow) -> bool:
        return _is_data(node, flow.data, self.aliases, self.loading)


def module_flow(tree: ast.Module) -> ModuleFlow:
    aliases = import_aliases(tree)
    module_constants: dict[str, Constant] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            found = _constant(stmt.value, module_constants, aliases)
            for target in targets:
                if isinstance(target, ast.Name) and found is not None:
                    module_constants[target.id] = Constant(found.value, target.id if found.value is None else found.text)
    jit = [n for n in tree.body if isinstance(n, ast.FunctionDef) and is_jit(n, aliases)]
    nodes = {f.name: list(ast.walk(f)) for f in jit}
    calls = {f.name: [n for n in nodes[f.name] if isinstance(n, ast.Call)] for f in jit}
    called = {c.func.id for f in jit for c in calls[f.name] if isinstance(c.func, ast.Name) and c.func.id in nodes}
    # jit functions whose result may depend on memory they read: they load, or call one that does
    loading = {f.name for f in jit if any(_reads_memory(c, aliases) for c in calls[f.name])}
    changed = True
    while changed:
        changed = False
        for f in jit:
            if f.name not in loading and any(isinstance(c.func, ast.Name) and c.func.id in loading
                                             for c in calls[f.name]):
                loading.add(f.name)
                changed = True
    functions = [_function_flow(f, nodes[f.name], aliases, module_constants, helper=f.name in called, loading=loading)
                 for f in jit]
    return ModuleFlow(aliases, functions, module_constants, loading)


@lru_cache(maxsize=32)
def source_flow(source: str) -> ModuleFlow | None:
    """:func:`module_flow` of a source text (None when it does not parse); cached, since the original
    of a kernel is read once for each of its many candidates. Read-only."""
    try:
        return module_flow(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _reads_memory(call: ast.Call, aliases: dict[str, str]) -> bool:
    """A load. What an atomic returns is taken for synchronisation state (the flags and arrival counters
    of a cooperative reduction), not data."""
    name = _triton_function(call, aliases)
    return name is not None and name in LOADS


def _function_flow(func: ast.FunctionDef, nodes: list[ast.AST], aliases: dict[str, str],
                   module_constants: dict[str, Constant], *, helper: bool, loading: set[str]) -> FunctionFlow:
    params = [a.arg for a in func.args.args]
    flow = FunctionFlow(func, params, nodes)
    for name, value in _binding_pairs(nodes):
        reads: set[str] = set()
        loads = False
        for sub in ast.walk(value) if value is not None else ():
            if isinstance(sub, ast.Name):
                reads.add(sub.id)
            elif isinstance(sub, ast.Call) and (_reads_memory(sub, aliases) or
                                                (isinstance(sub.func, ast.Name) and sub.func.id in loading)):
                loads = True
        flow.bindings.append(Binding(name, value, frozenset(reads), loads))
    bound = {b.name for b in flow.bindings}
    # constants: module constants and constexpr parameters the body does not rebind, then names bound only
    # to constants of one value
    flow.constants = {k: v for k, v in module_constants.items() if k not in bound and k not in params}
    for arg in func.args.args:
        if _is_constexpr(arg) and arg.arg not in bound:
            flow.constants[arg.arg] = Constant(None, arg.arg)
    by_name: dict[str, list[ast.AST | None]] = {}
    for binding in flow.bindings:
        by_name.setdefault(binding.name, []).append(binding.value)
    changed = True
    while changed:
        changed = False
        for name in sorted(bound - set(flow.constants) - set(params)):
            values = [_constant(v, flow.constants, aliases) if v is not None else None for v in by_name[name]]
            found = [v for v in values if v is not None]
            if len(found) == len(values) and len({v.key for v in found}) == 1:
                flow.constants[name] = found[0]
                changed = True
    # data: what a load read, and everything computed from it
    flow.data = {a.arg for a in func.args.args if helper and not _is_constexpr(a)}
    changed = True
    while changed:
        changed = False
        for binding in flow.bindings:
            if binding.name not in flow.data and binding.value is not None and \
                    (binding.loads or not binding.reads.isdisjoint(flow.data)):
                flow.data.add(binding.name)
                changed = True
    # addresses: names that flow backwards into the pointer of a load, store or atomic
    for call in (n for n in nodes if isinstance(n, ast.Call)):
        function = _triton_function(call, aliases)
        if function is not None and (function in LOADS or function in STORES or function.startswith("atomic_")):
            pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
            if pointer is not None:
                flow.addresses |= _names(pointer)
    changed = True
    while changed:
        changed = False
        for binding in flow.bindings:
            if binding.name in flow.addresses and not binding.reads <= flow.addresses:
                flow.addresses |= binding.reads
                changed = True
    return flow


def _is_data(node: ast.AST, data: set[str], aliases: dict[str, str], loading: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in data:
            return True
        if isinstance(sub, ast.Call):
            if _reads_memory(sub, aliases):
                return True
            if isinstance(sub.func, ast.Name) and sub.func.id in loading:
                return True
    return False


_MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}
_FULL = frozenset({"full", "full_like"})
_ZEROS = frozenset({"zeros", "zeros_like"})
_CASTS = frozenset({"to", "cast"})


def _constant(node: ast.AST, constants: dict[str, Constant], aliases: dict[str, str]) -> Constant | None:
    """The node's constant value (numbers only; booleans and strings are not data thresholds)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Constant(float(node.value), repr(node.value))
        return None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _constant(node.operand, constants, aliases)
        if inner is None or inner.value is None:
            return None
        value = -inner.value if isinstance(node.op, ast.USub) else inner.value
        return Constant(value, f"-{inner.text}" if isinstance(node.op, ast.USub) else inner.text)
    if isinstance(node, ast.BinOp):
        left = _constant(node.left, constants, aliases)
        right = _constant(node.right, constants, aliases)
        if left is None or right is None or left.value is None or right.value is None:
            return None
        folded = fold_arithmetic(node.op, left.value, right.value)
        return None if folded is None else Constant(folded, repr(folded))
    if isinstance(node, ast.Subscript):  # tl.full([1], 0.5, tl.float32)[:, None]
        return _constant(node.value, constants, aliases)
    if isinstance(node, ast.Attribute):
        name = qualified(node, aliases)
        if name is not None and name.startswith("math.") and name[5:] in _MATH_CONSTANTS:
            return Constant(_MATH_CONSTANTS[name[5:]], name)
        return None
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("float", "int") and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                try:
                    return Constant(float(arg.value), f'float("{arg.value}")')
                except ValueError:
                    return None
            return _constant(arg, constants, aliases)
        if isinstance(func, ast.Attribute) and func.attr in _CASTS and qualified(func, aliases) is None:
            return _constant(func.value, constants, aliases)  # (constant).to(tl.float32)
        name = _triton_function(node, aliases)
        if name in _FULL:
            filled = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "value"),
                                                                   None)
            return _constant(filled, constants, aliases) if filled is not None else None
        if name in _ZEROS:
            return Constant(0.0, "0")
        if name in _CASTS and node.args:
            return _constant(node.args[0], constants, aliases)
    return None


def fold_arithmetic(op: ast.operator, a: float, b: float) -> float | None:
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return float(a // b)
        if isinstance(op, ast.Mod):
            return a % b
        if isinstance(op, ast.Pow) and abs(b) <= 64:
            return float(a ** b)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError):
        return None
    return None


__all__ = ["ASSERTS", "BARRIERS", "Binding", "Constant", "FunctionFlow", "LOADS", "MIN_MAX", "ModuleFlow", "STORES",
           "import_aliases", "is_jit", "module_flow", "qualified", "source_flow", "target_names"]
