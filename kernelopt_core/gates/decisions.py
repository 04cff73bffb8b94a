"""The data-dependent decisions of a kernel module, read from its source: what a candidate decides
on loaded data that its original does not, and the constructs gate 1 refuses outright.

A rule that recognises known tricks is walked around by the next variant. The property gate 2
holds instead: every decision a candidate ADDS is seen with both outcomes on inputs whose outputs
were compared and matched. This module lists those decisions (:class:`Decision`: a comparison, a
select or branch, a loop bound, a min/max or a division on loaded data or anything computed from
it); :mod:`.decision_probe` instruments them and :mod:`.decision_coverage` collects the evidence.
Decisions the original makes itself need no new evidence ("the same" is equal :func:`canonical`
text, so renaming does not hide one). Gate 1 rejects the kinds no outcome can be recorded for
(integer views of data, addresses computed from data, control flow on addresses, a read of a
buffer the original only writes). Run-time constants are folded first, so their values reach
:attr:`Decision.constants`. The kinds and rules in full: docs/gates.md, "Evidence for the
decisions a candidate adds". Pure :mod:`ast`; nothing of the module runs.
"""

from __future__ import annotations

import ast
import math
import struct
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache

from .static_dataflow import (
    ASSERTS,
    MIN_MAX,
    fold_arithmetic,
    import_aliases,
    is_jit,
    qualified,
    target_names,
)
from .value_ranges import always_ordered, propagates_nan

_TRITON_PREFIXES = ("triton.", "torch._inductor.runtime.triton_helpers")
_LOADS = frozenset({"load"})
_STORES = frozenset({"store"})
_REDUCTIONS = frozenset({"sum", "max", "min", "max2", "min2", "sum2", "reduce", "argmax", "argmin", "xor_sum",
                         "reduce_or", "cumsum", "cumprod", "associative_scan", "welford", "welford_reduce",
                         "welford_combine", "prod", "any", "all", "online_softmax_reduce"})
_ROUNDING = frozenset({"floor", "ceil", "rint", "round", "trunc", "nearbyint", "llrint", "lrint", "llround",
                       "lround", "fmod", "remainder", "modf", "float2int_rn", "float2int_rz", "float2int_rd",
                       "float2int_ru", "double2int_rn", "float2uint_rn", "float_as_int", "float_as_uint",
                       "double_as_longlong", "ilogb", "frexp"})
_DIVISIONS = frozenset({"fdiv", "div_rn", "div_rz", "div_rd", "div_ru", "fdividef"})
# Functions whose result is a reciprocal of their data argument: the original's "division" kind.
_RECIPROCALS = frozenset({"rsqrt", "rcp_rn", "reciprocal", "sigmoid"})
# Functions that saturate: outside a narrow range of their argument they return one value (exp underflows to 0,
# tanh rounds to +-1), so ``exp(-(k (x - c))^2)`` switches a term on only near c with no comparison at all.
# The probe's name says which values are the saturated ones (:mod:`.decision_probe`).
_SATURATING = {"exp": "saturation-exp", "exp2": "saturation-exp", "exp10": "saturation-exp", "pow": "saturation-exp",
               "expm1": "saturation-expm1", "tanh": "saturation-odd", "erf": "saturation-odd",
               "erfc": "saturation-erfc", "sigmoid": "saturation-unit"}
_INT_TYPES = ("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_MATH: dict[str, Callable[..., float]] = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "log10": math.log10,
         "exp2": lambda v: 2.0 ** v, "sin": math.sin, "cos": math.cos, "tan": math.tan, "tanh": math.tanh,
         "abs": abs, "fabs": abs, "floor": math.floor, "ceil": math.ceil, "rsqrt": lambda v: 1.0 / math.sqrt(v),
         "erf": math.erf, "atan": math.atan, "asin": math.asin, "acos": math.acos, "sinh": math.sinh,
         "cosh": math.cosh, "cbrt": lambda v: math.copysign(abs(v) ** (1.0 / 3.0), v), "trunc": math.trunc,
         "log1p": math.log1p, "expm1": math.expm1, "pow": math.pow, "fmin": min, "fmax": max,
         "minimum": min, "maximum": max, "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v))}
_MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}
_INDEX_CALLS = frozenset({"program_id", "num_programs", "arange"})

RULE_KIND = "decision-kind"
RULE_POINTER = "pointer-control"
RULE_WRITE_ONLY = "write-only-read"


@dataclass(frozen=True)
class Decision:
    """One data-dependent decision of a jit function.

    ``probe`` says how gate 2 records its outcomes (:mod:`.decision_probe`): ``cond`` the node is the
    condition, ``truthy`` the node's value != 0, ``lt`` its first two arguments ordered, ``clamp`` the
    data against each bound, ``divisor`` the divisor zero or not finite, ``bound`` the loop entered.
    ``masks`` are the texts of the masks whose lanes count (the loads feeding the decision, or the
    stores after a reduction), ``constants`` the values it involves (for gate 2's constants input set)."""

    line: int
    kind: str
    text: str
    constants: tuple[float, ...]
    function: str
    key: str
    probe: str
    col: int = 0
    end_line: int = 0
    end_col: int = 0
    masks: tuple[str, ...] = ()
    # a synchronisation decision: it reads only flags and counters in the launcher's own scratch, which the
    # kernels write with constants (a cooperative kernel's "did the partial arrive"); gate 2 may force it
    sync: bool = False
    # its outcome decides whether a loop goes on (inside a while test, or through the names one reads): forcing
    # it could make a wait that never ends, which no schedule gives
    loop: bool = False
    # advisory: a select whose condition holds an added decision, recorded where its two arms differ (an
    # outcome seen only where both arms agree shows nothing about the path); gate 2 searches on for such
    # lanes, but a candidate is not held back for want of them (a guard may be exact, ``x / 1`` is ``x``)
    advisory: bool = False
    covers: tuple[tuple[int, int, int, int], ...] = ()  # spans of what the select's condition computes from
    # a division whose divisor is a reduction's result (a row's sum or norm) or data with no constant of its own
    # but 0 and 1: a reworded division of the original's kind, not a switch built from a scale (1 + (k d)^2)
    plain_divisor: bool = False

    def describe(self) -> str:
        return f"line {self.line}: {_short(self.text)}"

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "kind": self.kind, "text": self.text, "function": self.function,
                "constants": list(self.constants), "probe": self.probe, "sync": self.sync, "loop": self.loop,
                "advisory": self.advisory}


@dataclass(frozen=True)
class KindUse:
    """A construct that decides without a recordable outcome (an integer view of data, a gather)."""

    kind: str
    line: int
    text: str


@dataclass
class FunctionDecisions:
    name: str
    decisions: list[Decision] = field(default_factory=list)
    kinds: list[KindUse] = field(default_factory=list)
    problems: list[tuple[str, str, int]] = field(default_factory=list)  # (rule, message, line)


# --- the facts of one function --------------------------------------------------------------


class _Function:
    """Bindings, data names, pointer names and folded constants of one jit function."""

    def __init__(self, func: ast.FunctionDef, aliases: dict[str, str], module_constants: dict[str, float],
                 helper: bool, pointer_types: dict[str, str] | None):
        self.func = func
        self.aliases = aliases
        self.params = [a.arg for a in func.args.args]
        self.constexpr = {a.arg for a in func.args.args
                          if a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr")}
        self.nodes = list(ast.walk(func))
        self.bindings: dict[str, list[tuple[ast.AST | None, int]]] = {}
        self.integer_names: dict[tuple[str, int], bool] = {}  # _integer_valued's judgements of names
        for name, value, line in _bindings(self.nodes):
            self.bindings.setdefault(name, []).append((value, line))
        # what each name's values read: names, names outside memory calls, and whether they read memory
        reads: dict[str, set[str]] = {}
        reads_outside: dict[str, set[str]] = {}
        loads: set[str] = set()
        for name, values in self.bindings.items():
            inside, outside = reads.setdefault(name, set()), reads_outside.setdefault(name, set())
            for value, _ in values:
                if value is not None and self._scan(value, inside, outside):
                    loads.add(name)
        self.data: set[str] = {p for p in self.params if helper and p not in self.constexpr} | loads
        self.data = _closure(self.data, reads)
        self.constants: dict[str, float] = {k: v for k, v in module_constants.items()
                                            if k not in self.bindings and k not in self.params}
        pending = [n for n in self.bindings if n not in self.params and n not in self.data]
        changed = True
        while changed:
            changed = False
            for name in pending:
                if name in self.constants:
                    continue
                folded = [self.fold(v) if v is not None else None for v, _ in self.bindings[name]]
                known = [f for f in folded if f is not None]
                if known and len(known) == len(folded) and len({_f32(f) for f in known}) == 1:
                    self.constants[name] = known[0]
                    changed = True
            pending = [n for n in pending if n not in self.constants and reads[n] & set(self.constants)] \
                if changed else []
        self.data -= set(self.constants)
        self.flag_params: set[str] = set()  # launcher scratch written only with constants (set by the module)
        self.loop_nodes = self._loop_nodes()
        self.pointer_types = pointer_types
        self.pointer_params = self._pointer_params(pointer_types)
        self.pointers: set[str] = _closure(set(self.pointer_params), reads_outside)

    def _loop_nodes(self) -> set[int]:
        """ids of the nodes whose value decides whether a loop goes on: inside a while test or a range's
        arguments, or inside the value of a name those read (transitively)."""
        roots: list[ast.AST] = [n.test for n in self.nodes if isinstance(n, ast.While)]
        roots += [n.iter for n in self.nodes if isinstance(n, ast.For)]
        feeding: set[str] = set()
        stack = [sub.id for root in roots for sub in ast.walk(root) if isinstance(sub, ast.Name)]
        while stack:
            name = stack.pop()
            if name in feeding:
                continue
            feeding.add(name)
            for value, _ in self.bindings.get(name, []):
                if value is not None:
                    stack.extend(sub.id for sub in ast.walk(value) if isinstance(sub, ast.Name))
        nodes = {id(sub) for root in roots for sub in ast.walk(root)}
        for name in feeding:
            for value, _ in self.bindings.get(name, []):
                if value is not None:
                    nodes |= {id(sub) for sub in ast.walk(value)}
        return nodes

    def _scan(self, value: ast.AST, inside: set[str], outside: set[str]) -> bool:
        """Adds the names ``value`` reads to ``inside`` (and those outside memory calls to ``outside``);
        True when it reads memory (a load or an atomic)."""
        memory = False
        stack: list[tuple[ast.AST, bool]] = [(value, False)]
        while stack:
            node, in_memory = stack.pop()
            if isinstance(node, ast.Attribute) and node.attr in ("shape", "dtype", "type", "element_ty", "numel"):
                continue
            if isinstance(node, ast.Name):
                inside.add(node.id)
                if not in_memory:
                    outside.add(node.id)
                continue
            if isinstance(node, ast.Call):
                kind = self.memory_call(node)
                if kind in ("load", "atomic"):
                    memory = True
                if kind is not None:
                    in_memory = True
            stack.extend((child, in_memory) for child in ast.iter_child_nodes(node))
        return memory

    # calls

    def function(self, call: ast.Call) -> str | None:
        name = qualified(call.func, self.aliases)
        if name is None or not name.startswith(_TRITON_PREFIXES):
            return None
        return name.rsplit(".", 1)[-1]

    def memory_call(self, call: ast.Call) -> str | None:
        """"load", "store" or "atomic" for a call that touches memory."""
        name = self.function(call)
        if name in _LOADS:
            return "load"
        if name in _STORES:
            return "store"
        if name is not None and name.startswith("atomic_"):
            return "atomic"
        return None

    @staticmethod
    def pointer_arg(call: ast.Call) -> ast.AST | None:
        if call.args:
            return call.args[0]
        return next((k.value for k in call.keywords if k.arg == "pointer"), None)

    @staticmethod
    def mask_arg(call: ast.Call, kind: str) -> ast.AST | None:
        position = 1 if kind == "load" else 2
        if len(call.args) > position:
            return call.args[position]
        return next((k.value for k in call.keywords if k.arg == "mask"), None)

    # facts of expressions

    def is_data(self, node: ast.AST) -> bool:
        for sub in _walk_skipping_shapes(node):
            if isinstance(sub, ast.Name) and sub.id in self.data:
                return True
            if isinstance(sub, ast.Call) and self.memory_call(sub) in ("load", "atomic"):
                return True
        return False

    def reads_pointer(self, node: ast.AST) -> bool:
        """The expression computes with a pointer outside a load/store/atomic (whose result is a value)."""
        stack = [node]
        while stack:
            sub = stack.pop()
            if isinstance(sub, ast.Call) and self.memory_call(sub) is not None:
                continue
            if isinstance(sub, ast.Attribute) and sub.attr in ("dtype", "shape", "type", "element_ty"):
                continue
            if isinstance(sub, ast.Name) and sub.id in getattr(self, "pointers", self.pointer_params):
                return True
            stack.extend(ast.iter_child_nodes(sub))
        return False

    def _pointer_params(self, pointer_types: dict[str, str] | None) -> set[str]:
        found: set[str] = set()
        if pointer_types:
            found |= {p for p, t in pointer_types.items() if isinstance(t, str) and t.startswith("*")
                      and p in self.params}
        for call in (n for n in self.nodes if isinstance(n, ast.Call)):
            if self.memory_call(call) is None:
                continue
            pointer = self.pointer_arg(call)
            for term in self._additive_terms(pointer, depth=4) if pointer is not None else ():
                if isinstance(term, ast.Name) and term.id in self.params and term.id not in self.constexpr:
                    found.add(term.id)
        return found

    def _additive_terms(self, node: ast.AST, depth: int) -> Iterator[ast.AST]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            yield from self._additive_terms(node.left, depth)
            if isinstance(node.op, ast.Add):
                yield from self._additive_terms(node.right, depth)
            return
        if isinstance(node, ast.Subscript):
            yield from self._additive_terms(node.value, depth)
            return
        if isinstance(node, ast.Name) and node.id not in self.params and depth > 0:
            for value, _ in self.bindings.get(node.id, []):
                if value is not None:
                    yield from self._additive_terms(value, depth - 1)
            return
        yield node

    def fold(self, node: ast.AST) -> float | None:
        """The node's constant value once run-time constants are folded (None: not a constant)."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                return float(node.value)
            return None
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.fold(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.BinOp):
            left, right = self.fold(node.left), self.fold(node.right)
            # anything that is not data, times 0, is 0: tl.program_id(0) * 0 + 7 is 7
            if isinstance(node.op, ast.Mult) and ((left == 0.0 and not self.is_data(node.right))
                                                  or (right == 0.0 and not self.is_data(node.left))):
                return 0.0
            if left is None or right is None:
                return None
            return _arithmetic(node.op, left, right)
        if isinstance(node, ast.Subscript):
            return self.fold(node.value)
        if isinstance(node, ast.Attribute):
            name = qualified(node, self.aliases)
            if name is not None and name.startswith("math.") and name[5:] in _MATH_CONSTANTS:
                return _MATH_CONSTANTS[name[5:]]
            return None
        if isinstance(node, ast.Call):
            return self._fold_call(node)
        return None

    def _fold_call(self, node: ast.Call) -> float | None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("float", "int") and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                try:
                    return float(arg.value)
                except ValueError:
                    return None
            inner = self.fold(arg)
            return None if inner is None else (float(int(inner)) if func.id == "int" and math.isfinite(inner)
                                               else inner)
        if isinstance(func, ast.Attribute) and func.attr in ("to", "cast") and qualified(func, self.aliases) is None:
            if any(k.arg == "bitcast" for k in node.keywords):
                return None
            return self.fold(func.value)
        name = self.function(node)
        if name is None:
            qualified_name = qualified(func, self.aliases)
            if qualified_name is not None and qualified_name.startswith("math."):
                name = qualified_name[5:]
            else:
                return None
        if name in ("full", "full_like"):
            value = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords
                                                                  if k.arg == "value"), None)
            return self.fold(value) if value is not None else None
        if name in ("zeros", "zeros_like"):
            return 0.0
        if name in ("broadcast_to", "reshape", "view", "expand_dims") and node.args:
            return self.fold(node.args[0])
        if name == "cast" and node.args and not any(k.arg == "bitcast" for k in node.keywords):
            return self.fold(node.args[0])
        if name in _MATH and node.args and len(node.args) <= 2:
            folded = [self.fold(a) for a in node.args]
            values = [v for v in folded if v is not None]
            if len(values) != len(folded):
                return None
            try:
                result = float(_MATH[name](*values))
            except (ValueError, OverflowError, ZeroDivisionError, TypeError):
                return None
            return result
        return None


def _closure(seed: set[str], reads: dict[str, set[str]]) -> set[str]:
    """``seed`` and every name whose values read a name already in the set."""
    found = set(seed)
    readers: dict[str, list[str]] = {}
    for name, names in reads.items():
        for read in names:
            readers.setdefault(read, []).append(name)
    stack = list(found)
    while stack:
        for reader in readers.get(stack.pop(), []):
            if reader not in found:
                found.add(reader)
                stack.append(reader)
    return found


def _bindings(nodes: list[ast.AST]) -> Iterator[tuple[str, ast.AST | None, int]]:
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                single = isinstance(target, ast.Name)
                for name in target_names(target):
                    yield name, node.value if single else _first_of_tuple(node.value), node.lineno
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            yield node.target.id, node.value, node.lineno
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, ast.BinOp(left=ast.Name(node.target.id, ast.Load()), op=node.op,
                                            right=node.value), node.lineno
        elif isinstance(node, ast.For):
            for name in target_names(node.target):
                yield name, ast.Call(func=ast.Name("iter", ast.Load()), args=[node.iter], keywords=[]), node.lineno
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id, node.value, node.lineno


def _first_of_tuple(value: ast.AST) -> ast.AST:
    """A tuple target's value for the data facts: the whole right-hand side (what it reads)."""
    return value



def _walk_skipping_shapes(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, but not into ``.shape``/``.dtype`` (a value's shape is not its data)."""
    stack = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "dtype", "type", "element_ty", "numel"):
            continue
        yield sub
        stack.extend(ast.iter_child_nodes(sub))


def _arithmetic(op: ast.operator, a: float, b: float) -> float | None:
    """Gate 1's arithmetic on folded constants, and the bitwise operations a hash is built from."""
    if not isinstance(op, (ast.BitXor, ast.BitAnd, ast.BitOr, ast.LShift, ast.RShift)):
        return fold_arithmetic(op, a, b)
    if not (a.is_integer() and b.is_integer() and abs(b) < 64):
        return None
    x, y = int(a), int(b)
    try:
        ops = {ast.BitXor: x ^ y, ast.BitAnd: x & y, ast.BitOr: x | y}
        if type(op) in ops:
            return float(ops[type(op)])
        return float(x << y if isinstance(op, ast.LShift) else x >> y)
    except (OverflowError, ValueError):
        return None


def _f32(value: float) -> str:
    try:
        return repr(struct.unpack("f", struct.pack("f", value))[0])
    except (OverflowError, struct.error):
        return repr(float(value))


# --- canonical text: "the same comparison of the same values" --------------------------------

_COMMUTATIVE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_FLIP = {ast.Gt: "<", ast.GtE: "<=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_TRANSPARENT = frozenset({"broadcast_to", "reshape", "view", "expand_dims", "to"})


def canonical(node: ast.AST, fn: _Function, depth: int = 10) -> str:
    """Text of what ``node`` computes: names replaced by what they are bound to, loads by the buffer
    they read, constants by their float32 value, operands of commutative operations sorted."""
    folded = fn.fold(node)
    if folded is not None:
        return _f32(folded)
    if depth <= 0:
        return "<deep>"
    if isinstance(node, ast.Name):
        bound = fn.bindings.get(node.id)
        if node.id in fn.params or not bound:
            return node.id
        if len(bound) > 1 or bound[0][0] is None:
            return f"<loop-carried {_kind_of_values(bound, fn)}>"
        return canonical(bound[0][0], fn, depth - 1)
    if isinstance(node, ast.Subscript):
        return canonical(node.value, fn, depth)
    if isinstance(node, ast.Call):
        memory = fn.memory_call(node)
        if memory is not None:
            pointer = fn.pointer_arg(node)
            bases = sorted({t.id for t in fn._additive_terms(pointer, 4) if isinstance(t, ast.Name)
                            and t.id in fn.pointer_params}) if pointer is not None else []
            return f"{memory}({','.join(bases) or '?'})"
        name = fn.function(node)
        if isinstance(node.func, ast.Attribute) and name is None:
            method = node.func.attr
            if method in _TRANSPARENT and not any(k.arg == "bitcast" for k in node.keywords):
                return canonical(node.func.value, fn, depth)
            inner = canonical(node.func.value, fn, depth - 1)
            return f"{inner}.{method}({','.join(canonical(a, fn, depth - 1) for a in node.args)})"
        if name in _TRANSPARENT and node.args:
            return canonical(node.args[0], fn, depth)
        label = name or (node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func))
        args = [canonical(a, fn, depth - 1) for a in node.args]
        if label in ("maximum", "minimum", "fmax", "fmin"):
            args.sort()
        return f"{label}({','.join(args)})"
    if isinstance(node, ast.BinOp):
        left, right = canonical(node.left, fn, depth - 1), canonical(node.right, fn, depth - 1)
        if isinstance(node.op, _COMMUTATIVE) and right < left:
            left, right = right, left
        return f"({left} {type(node.op).__name__} {right})"
    if isinstance(node, ast.UnaryOp):
        return f"{type(node.op).__name__}({canonical(node.operand, fn, depth - 1)})"
    if isinstance(node, ast.Compare):
        operands = [canonical(o, fn, depth - 1) for o in [node.left, *node.comparators]]
        parts = []
        for op, a, b in zip(node.ops, operands, operands[1:], strict=False):
            if isinstance(op, (ast.Gt, ast.GtE)):
                a, b = b, a
            elif isinstance(op, (ast.Eq, ast.NotEq)) and b < a:
                a, b = b, a
            parts.append(f"{a} {_FLIP.get(type(op), type(op).__name__)} {b}")
        return " and ".join(parts)
    if isinstance(node, ast.BoolOp):
        return f"{type(node.op).__name__}({','.join(sorted(canonical(v, fn, depth - 1) for v in node.values))})"
    if isinstance(node, ast.IfExp):
        return (f"ifexp({canonical(node.test, fn, depth - 1)},{canonical(node.body, fn, depth - 1)},"
                f"{canonical(node.orelse, fn, depth - 1)})")
    return ast.unparse(node)


def _kind_of_values(bound: list[tuple[ast.AST | None, int]], fn: _Function) -> str:
    """A loop-carried name stands for the calls that update it (``maximum``, ``where``...)."""
    calls = sorted({fn.function(v) or "" for v, _ in bound if isinstance(v, ast.Call)})
    return "/".join(c for c in calls if c) or "value"


# --- listing ------------------------------------------------------------------------------------


def _constants_in(node: ast.AST, fn: _Function, depth: int = 3) -> set[float]:
    """Every folded constant in the expression and, a few bindings deep, in what its names compute."""
    found: set[float] = set()
    seen: set[str] = set()

    def visit(sub: ast.AST, level: int) -> None:
        value = fn.fold(sub)
        if value is not None:
            if not math.isnan(value):
                found.add(float(value))
            return
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "dtype"):
            return
        if isinstance(sub, ast.Name):
            if level > 0 and sub.id not in seen and sub.id in fn.data:
                seen.add(sub.id)
                for bound, _ in fn.bindings.get(sub.id, []):
                    if bound is not None:
                        visit(bound, level - 1)
            return
        if isinstance(sub, ast.Call):
            if fn.memory_call(sub) is not None:
                return  # an address's offsets are not values the data is compared with
            for arg in sub.args:
                visit(arg, level)
            for keyword in sub.keywords:
                if keyword.arg not in ("dtype", "bitcast", "eviction_policy", "cache_modifier", "sem", "scope"):
                    visit(keyword.value, level)
            if isinstance(sub.func, ast.Attribute):
                visit(sub.func.value, level)
            return
        for child in ast.iter_child_nodes(sub):
            visit(child, level)

    visit(node, depth)
    return found


def _asserted(fn: _Function) -> set[int]:
    inside: set[int] = set()
    for node in fn.nodes:
        if isinstance(node, ast.Assert) or (isinstance(node, ast.Call) and fn.function(node) in ASSERTS):
            inside |= {id(sub) for sub in ast.walk(node)}
    return inside


def _has_compare(node: ast.AST, fn: _Function, depth: int = 4) -> bool:
    """The condition holds a comparison of data (itself, or in what its names compute): that comparison is
    the decision, listed where it is written."""
    seen: set[str] = set()  # each name's bindings once (breadth first: at its greatest depth left)
    queue: deque[tuple[ast.AST, int]] = deque([(node, depth)])
    while queue:
        root, level = queue.popleft()
        for sub in ast.walk(root):
            if isinstance(sub, ast.Compare) and fn.is_data(sub):
                return True
            if isinstance(sub, ast.Name) and level > 0 and sub.id not in seen:
                seen.add(sub.id)
                queue.extend((v, level - 1) for v, _ in fn.bindings.get(sub.id, []) if v is not None)
    return False


def _compound(node: ast.AST, fn: _Function, depth: int = 4) -> bool:
    """The condition combines two or more comparisons of data (in itself, or in what its names compute; a
    comparison inside another's operand is part of that one): each may be seen both ways on its own while their
    conjunction never holds (``x == y`` and ``x > 4`` together), so the condition as a whole is a decision of its
    own."""
    count = 0
    seen: set[str] = set()
    stack: list[tuple[ast.AST, int]] = [(node, depth)]
    while stack:
        root, level = stack.pop()
        inner = [root]
        while inner:  # not into loads: a load's mask is where the value comes from, not part of the condition
            sub = inner.pop()
            if isinstance(sub, ast.Call) and fn.memory_call(sub) is not None:
                continue
            if isinstance(sub, ast.Compare):
                count += 1 if fn.is_data(sub) else 0
                continue
            if isinstance(sub, ast.Name) and level > 0 and sub.id not in seen:
                seen.add(sub.id)
                stack.extend((v, level - 1) for v, _ in fn.bindings.get(sub.id, []) if v is not None)
            inner.extend(ast.iter_child_nodes(sub))
    return count >= 2


def _integer_valued(node: ast.AST, fn: _Function, depth: int = 6) -> bool:
    """The value is already an integer or a truth value (a comparison, a flag an atomic returned, a load of an
    integer buffer): converting it to an integer type reads no bits of a floating value."""
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _integer_valued(node.operand, fn, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _integer_valued(node.left, fn, depth) and _integer_valued(node.right, fn, depth)
    if isinstance(node, ast.Subscript):
        return _integer_valued(node.value, fn, depth)
    if isinstance(node, ast.Call):
        kind = fn.memory_call(node)
        if kind == "atomic":
            return True
        if kind == "load":
            pointer = fn.pointer_arg(node)
            types = fn.pointer_types or {}
            bases = [t.id for t in fn._additive_terms(pointer, 4) if isinstance(t, ast.Name)] if pointer else []
            return bool(bases) and all(str(types.get(b, "")).startswith(("*i", "*u")) for b in bases
                                       if b in fn.pointer_params)
        name = fn.function(node)
        if name in ("where",) and len(node.args) == 3:
            return _integer_valued(node.args[1], fn, depth) and _integer_valued(node.args[2], fn, depth)
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (bool, int))
    if isinstance(node, ast.Name) and depth > 0:
        key = (node.id, depth)  # a name reached by many paths is judged once
        if key not in fn.integer_names:
            fn.integer_names[key] = False  # a name bound through itself is not shown integer by that binding
            bound = fn.bindings.get(node.id) or []
            fn.integer_names[key] = bool(bound) and all(v is not None and _integer_valued(v, fn, depth - 1)
                                                        for v, _ in bound)
        return fn.integer_names[key]
    return False


def _through_reduction(node: ast.AST, fn: _Function, depth: int = 8) -> bool:
    # each name's bindings once (_nodes_feeding): a chain of reassignments, ``acc = max(acc, v)`` unrolled over a
    # window, would otherwise be walked once per path through it
    for sub in _nodes_feeding(node, fn, depth):
        if isinstance(sub, ast.Call):
            name = fn.function(sub)
            if name in _REDUCTIONS or (isinstance(sub.func, ast.Attribute) and sub.func.attr in _REDUCTIONS
                                       and name is None):
                return True
    return False


def _feeding_memory(node: ast.AST, fn: _Function, depth: int = 8,
                    kinds: tuple[str, ...] = ("load", "atomic")) -> list[ast.Call]:
    """Every memory call of ``kinds`` (loads and atomics) whose result flows into ``node`` (through the
    names it reads)."""
    return [sub for sub in _nodes_feeding(node, fn, depth) if isinstance(sub, ast.Call) and fn.memory_call(sub) in kinds]


def _nodes_feeding(node: ast.AST, fn: _Function, depth: int = 8) -> Iterator[ast.AST]:
    """Every node of ``node`` and, ``depth`` bindings deep, of what the data names it reads compute."""
    seen: set[str] = set()

    def visit(root: ast.AST, level: int) -> Iterator[ast.AST]:
        for sub in ast.walk(root):
            yield sub
            if isinstance(sub, ast.Name) and level > 0 and sub.id in fn.data and sub.id not in seen:
                seen.add(sub.id)
                for bound, _ in fn.bindings.get(sub.id, []):
                    if bound is not None:
                        yield from visit(bound, level - 1)

    yield from visit(node, depth)


def _is_sync(node: ast.AST, fn: _Function) -> bool:
    if not fn.flag_params:
        return False
    sources = _feeding_memory(node, fn)
    for call in sources:
        pointer = fn.pointer_arg(call)
        bases = {t.id for t in fn._additive_terms(pointer, 4) if isinstance(t, ast.Name)
                 and t.id in fn.pointer_params} if pointer is not None else set()
        if not bases or not bases <= fn.flag_params:
            return False
    return bool(sources)


def _masks(node: ast.AST, line: int, fn: _Function) -> tuple[str, ...]:
    """The masks whose lanes count for a decision at ``line``: those of the loads feeding it when no
    reduction lies between (a masked lane's ``other`` value must not credit an outcome), else those of the
    function's stores (the lanes whose output is kept). Only masks whose names are bound by then."""
    calls: list[tuple[ast.Call, str]]
    if _through_reduction(node, fn):
        calls = [(c, "store") for c in fn.nodes if isinstance(c, ast.Call) and fn.memory_call(c) == "store"]
    else:
        calls = [(c, "load") for c in _feeding_memory(node, fn, kinds=("load",))]
    found: list[str] = []
    for call, kind in calls:
        mask = fn.mask_arg(call, kind)
        if mask is None or (isinstance(mask, ast.Constant) and mask.value is None) or fn.is_data(mask):
            continue  # (``mask=None``: every lane is one)
        names = {n.id for n in ast.walk(mask) if isinstance(n, ast.Name)}
        if all(n in fn.params or n in fn.constants or any(bound_line <= line for _, bound_line in
                                                          fn.bindings.get(n, [])) for n in names):
            text = ast.unparse(mask)
            if text not in found:
                found.append(text)
    return tuple(found)


def _decision(fn: _Function, node: ast.AST, kind: str, probe: str, focus: ast.AST | None = None) -> Decision:
    focus = focus if focus is not None else node
    constants = tuple(sorted(_constants_in(focus, fn)))
    line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
    return Decision(line=line, kind=kind, text=ast.unparse(node), constants=constants,
                    function=fn.func.name, key=f"{kind}: {canonical(focus, fn)}", probe=probe,
                    col=col, end_line=getattr(node, "end_lineno", None) or line,
                    end_col=getattr(node, "end_col_offset", None) or 0,
                    masks=_masks(focus, line, fn), sync=_is_sync(focus, fn), loop=id(node) in fn.loop_nodes)


def _function_decisions(fn: _Function) -> FunctionDecisions:
    out = FunctionDecisions(fn.func.name)
    skip = _asserted(fn)

    def problem(rule: str, message: str, node: ast.AST) -> None:
        out.problems.append((rule, message, getattr(node, "lineno", 0)))

    for node in fn.nodes:
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(fn.reads_pointer(o) for o in operands):
                problem(RULE_POINTER, f"`{_short(ast.unparse(node))}` compares pointers: a kernel's result may not "
                        "depend on where its buffers lie (an aliasing shortcut is invisible to inputs at other "
                        "addresses); compare sizes or indices instead", node)
            elif any(fn.is_data(o) for o in operands):
                out.decisions.append(_decision(fn, node, "comparison", "cond"))
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            if fn.reads_pointer(node.test) and not any(isinstance(n, ast.Compare) for n in ast.walk(node.test)):
                problem(RULE_POINTER, f"`{_short(ast.unparse(node.test))}`: a condition on an address (pointer "
                        "arithmetic inside a condition); a kernel's control flow may not depend on where its "
                        "buffers lie", node)
            elif fn.is_data(node.test) and (not _has_compare(node.test, fn) or _compound(node.test, fn)):
                out.decisions.append(_decision(fn, node.test, "branch", "truthy"))
        elif isinstance(node, ast.For):
            _loop_bound(fn, node, out)
        elif isinstance(node, ast.BinOp):
            _binop(fn, node, out)
        elif isinstance(node, ast.Call):
            _call(fn, node, out, problem)
    return out


def _loop_bound(fn: _Function, node: ast.For, out: FunctionDecisions) -> None:
    it = node.iter
    if isinstance(it, ast.Call) and it.args and fn.is_data(it):
        out.decisions.append(_decision(fn, it, "loop bound", "bound"))


def _binop(fn: _Function, node: ast.BinOp, out: FunctionDecisions) -> None:
    if isinstance(node.op, ast.Div) and fn.is_data(node.right) and fn.fold(node.right) is None:
        out.decisions.append(_division(fn, node, node.right))
    elif isinstance(node.op, (ast.FloorDiv, ast.Mod)) and (fn.is_data(node.left) or fn.is_data(node.right)):
        out.kinds.append(KindUse("integer view", node.lineno, ast.unparse(node)))


def _call(fn: _Function, node: ast.Call, out: FunctionDecisions, report: Callable[[str, str, ast.AST], None]) -> None:
    name = fn.function(node)
    memory = fn.memory_call(node)
    if memory is not None:
        pointer = fn.pointer_arg(node)
        if pointer is not None and fn.is_data(pointer):
            out.kinds.append(KindUse("gather", node.lineno, ast.unparse(node)))
        return
    if name == "where" and len(node.args) == 3 and fn.is_data(node.args[0]):
        out.decisions.append(_select_effect(fn, node))
    if name == "where" and node.args and fn.reads_pointer(node.args[0]) and \
            not any(isinstance(n, ast.Compare) for n in ast.walk(node.args[0])):
        report(RULE_POINTER, f"`{_short(ast.unparse(node.args[0]))}`: a condition on an address (pointer arithmetic "
               "inside a condition); a kernel's control flow may not depend on where its buffers lie", node)
        return
    method = node.func.attr if isinstance(node.func, ast.Attribute) and name is None else None
    if method in ("to", "cast") or name in ("cast",):
        value = node.func.value if isinstance(node.func, ast.Attribute) and method else \
            (node.args[0] if node.args else None)
        target = (node.args[0] if method and node.args else node.args[1] if not method and len(node.args) > 1
                  else next((k.value for k in node.keywords if k.arg == "dtype"), None))
        bitcast = any(k.arg == "bitcast" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                      for k in node.keywords)
        target_text = ast.unparse(target) if target is not None else ""
        if value is not None and fn.reads_pointer(value) and "pointer_type" not in target_text:
            report(RULE_POINTER, f"`{_short(ast.unparse(node))}` casts a pointer to a number: a kernel's result may "
                   "not depend on where its buffers lie", node)
        elif value is not None and fn.is_data(value):
            if bitcast:
                out.kinds.append(KindUse("integer view", node.lineno, ast.unparse(node)))
            elif target_text.rsplit(".", 1)[-1] in _INT_TYPES and not _integer_valued(value, fn):
                out.kinds.append(KindUse("float to int", node.lineno, ast.unparse(node)))
        return
    if name in ("int",) or (isinstance(node.func, ast.Name) and node.func.id == "int"):
        if node.args and fn.reads_pointer(node.args[0]):
            report(RULE_POINTER, f"`{_short(ast.unparse(node))}` casts a pointer to a number", node)
        return
    if name is None:
        return
    data_args = [a for a in node.args if fn.is_data(a)]
    if not data_args:
        return
    if name in _ROUNDING:
        out.kinds.append(KindUse("integer view", node.lineno, ast.unparse(node)))
    elif name in MIN_MAX and len(node.args) >= 2:
        if not _never_decides(fn, node):
            out.decisions.append(_decision(fn, node, "min/max", "clamp" if name == "clamp" else "lt"))
    elif name in _DIVISIONS and len(node.args) >= 2 and fn.is_data(node.args[1]):
        out.decisions.append(_division(fn, node, node.args[1]))
    elif name == "where" and node.args and fn.is_data(node.args[0]) and \
            (not _has_compare(node.args[0], fn) or _compound(node.args[0], fn)):
        out.decisions.append(_decision(fn, node.args[0], "select", "truthy"))
    elif name in _SATURATING and len(node.args) == (2 if name == "pow" else 1):
        out.decisions.append(_decision(fn, node, "saturation", _SATURATING[name]))
    if name in _RECIPROCALS:
        out.kinds.append(KindUse("reciprocal", node.lineno, ast.unparse(node)))


def _never_decides(fn: _Function, node: ast.Call) -> bool:
    """A NaN-propagating min/max of two values one of which exceeds the other on every input (hardswish's
    ``maximum(tanh(x) + 3, 0)``): it has one path, NaN or not, so there is no other outcome to see."""
    return len(node.args) == 2 and propagates_nan(node, fn) and always_ordered(node.args[0], node.args[1], fn)


def _division(fn: _Function, node: ast.AST, divisor: ast.AST) -> Decision:
    decision = _decision(fn, node, "division", "divisor", focus=divisor)
    plain = _through_reduction(divisor, fn) or _constants_in(divisor, fn, depth=8) <= {0.0, 1.0, -1.0}
    return replace(decision, plain_divisor=plain)


def _select_effect(fn: _Function, node: ast.Call) -> Decision:
    """The advisory record of a ``tl.where``: its condition's outcomes where its two arms differ."""
    decision = _decision(fn, node, "select effect", "effect")
    return replace(decision, advisory=True, covers=tuple(sorted(_spans_feeding(node.args[0], fn))))


def _spans_feeding(node: ast.AST, fn: _Function, depth: int = 8) -> set[tuple[int, int, int, int]]:
    """The source spans of every expression ``node`` computes from, through the names it reads."""
    return {(sub.lineno, sub.col_offset, sub.end_lineno or sub.lineno, sub.end_col_offset or 0)
            for sub in _nodes_feeding(node, fn, depth) if isinstance(sub, ast.expr)}


# --- the module ---------------------------------------------------------------------------------


@dataclass
class ModuleDecisions:
    functions: list[FunctionDecisions]
    facts: list[_Function] = field(default_factory=list)

    @property
    def decisions(self) -> list[Decision]:
        return [d for f in self.functions for d in f.decisions]

    @property
    def kinds(self) -> list[KindUse]:
        return [k for f in self.functions for k in f.kinds]

    @property
    def problems(self) -> list[tuple[str, str, int]]:
        return [p for f in self.functions for p in f.problems]


def module_decisions(tree: ast.Module) -> ModuleDecisions:
    aliases = import_aliases(tree)
    module_constants: dict[str, float] = {}
    jit = [n for n in tree.body if isinstance(n, ast.FunctionDef) and is_jit(n, aliases)]
    probe = _Function(ast.FunctionDef(name="<module>", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                                         kw_defaults=[], defaults=[]),
                                      body=[], decorator_list=[], lineno=0), aliases, {}, False, None)
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            probe.constants = dict(module_constants)
            value = probe.fold(stmt.value)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    module_constants[target.id] = value
    called = {c.func.id for f in jit for c in ast.walk(f) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    facts = [_Function(func, aliases, module_constants, helper=func.name in called and func.name in
                       {f.name for f in jit}, pointer_types=_signature(func)) for func in jit]
    for fn, flags in zip(facts, _flag_params(tree, aliases, facts), strict=True):
        fn.flag_params = flags
    return ModuleDecisions([_function_decisions(fn) for fn in facts], facts)


_SCRATCH_CALLS = frozenset({"torch.empty", "torch.zeros", "torch.empty_like", "torch.zeros_like"})


def _flag_params(tree: ast.Module, aliases: dict[str, str], facts: list[_Function]) -> list[set[str]]:
    """Per jit function, the parameters that are always passed a scratch buffer the module's launcher allocates
    itself and that every kernel writes only with constants (flags, arrival counters): what they hold says
    how the programs were scheduled, never what the inputs were."""
    by_name = {fn.func.name: fn for fn in facts}
    pairs: dict[str, list[tuple[str, str]]] = {}  # scratch name -> (kernel, parameter) it is passed as
    passed: dict[tuple[str, str], bool] = {}  # (kernel, parameter) -> always a scratch buffer
    for launcher in (n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list):
        assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(launcher):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in target_names(target):
                        assigned.setdefault(name, []).append(node.value if isinstance(target, ast.Name) else target)
        scratch = {name for name, values in assigned.items() if len(values) == 1 and isinstance(values[0], ast.Call)
                   and qualified(values[0].func, aliases) in _SCRATCH_CALLS}
        for call in (n for n in ast.walk(launcher) if isinstance(n, ast.Call)):
            launched = call.func.value if isinstance(call.func, ast.Subscript) else None
            if not isinstance(launched, ast.Name) or launched.id not in by_name:
                continue
            params = by_name[launched.id].params
            given = [(params[i], a) for i, a in enumerate(call.args) if i < len(params)]
            given += [(k.arg, k.value) for k in call.keywords if k.arg in params]
            for param, value in given:
                is_scratch = isinstance(value, ast.Name) and value.id in scratch
                key = (launched.id, param)
                passed[key] = passed.get(key, True) and is_scratch
                if isinstance(value, ast.Name) and is_scratch:
                    pairs.setdefault(value.id, []).append(key)
    flag_like = {key for buffer, keys in pairs.items() if all(passed.get(k) for k in keys)
                 and all(_writes_constants(by_name[k], p) for k, p in keys) for key in keys}
    return [{p for k, p in flag_like if k == fn.func.name} for fn in facts]


def _writes_constants(fn: _Function, param: str) -> bool:
    """Every store and atomic into ``param`` writes a constant (an atomic adding 0 reads)."""
    for call in (n for n in fn.nodes if isinstance(n, ast.Call)):
        kind = fn.memory_call(call)
        if kind not in ("store", "atomic"):
            continue
        pointer = fn.pointer_arg(call)
        bases = {t.id for t in fn._additive_terms(pointer, 4) if isinstance(t, ast.Name)} if pointer is not None \
            else set()
        if param not in bases:
            continue
        name = fn.function(call) or ""
        position = 2 if name == "atomic_cas" else 1
        value = call.args[position] if len(call.args) > position else next(
            (k.value for k in call.keywords if k.arg in ("value", "val")), None)
        if value is None or fn.fold(value) is None:
            return False
    return True


def _signature(func: ast.FunctionDef) -> dict[str, str] | None:
    for deco in func.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        for keyword in deco.keywords:
            if keyword.arg == "triton_meta" and isinstance(keyword.value, ast.Dict):
                for k, v in zip(keyword.value.keys, keyword.value.values, strict=False):
                    if isinstance(k, ast.Constant) and k.value == "signature":
                        try:
                            value = ast.literal_eval(v)
                        except (ValueError, SyntaxError, TypeError):
                            return None
                        return value if isinstance(value, dict) else None
    return None


@lru_cache(maxsize=32)
def source_decisions(source: str) -> ModuleDecisions | None:
    """:func:`module_decisions` of a source (None when it does not parse); cached, since an original is read
    for each of its many candidates. Read-only."""
    try:
        return module_decisions(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _buffers_touched(fn: _Function) -> tuple[dict[str, int], dict[str, int]]:
    """(first load line, first store line) per pointer parameter."""
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    for call in (n for n in fn.nodes if isinstance(n, ast.Call)):
        memory = fn.memory_call(call)
        pointer = fn.pointer_arg(call) if memory else None
        if pointer is None:
            continue
        for name in _pointer_sources(fn, pointer):
            table = loads if memory == "load" else stores
            table[name] = min(table.get(name, call.lineno), call.lineno)
    return loads, stores


def _pointer_sources(fn: _Function, pointer: ast.AST, depth: int = 6) -> set[str]:
    """Every pointer parameter an address may be based on: its additive bases, and any pointer parameter named in
    it or in what its names compute (``tl.where(c, out_ptr0, in_ptr0) + x0`` may be either buffer)."""
    found: set[str] = set()
    seen: set[str] = set()
    stack: list[tuple[ast.AST, int]] = [(pointer, depth)]
    while stack:
        node, level = stack.pop()
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Name):
                continue
            if sub.id in fn.pointer_params:
                found.add(sub.id)
            elif level > 0 and sub.id not in seen and sub.id not in fn.params:
                seen.add(sub.id)
                stack.extend((value, level - 1) for value, _ in fn.bindings.get(sub.id, []) if value is not None)
    return found


def _statement_lists(func: ast.FunctionDef) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """(statement id -> (id of the list holding it, its index there)), (node id -> id of its innermost statement)."""
    place: dict[int, tuple[int, int]] = {}
    owner: dict[int, int] = {}

    def visit(statements: list[ast.stmt]) -> None:
        for index, stmt in enumerate(statements):
            place[id(stmt)] = (id(statements), index)
            for sub in ast.walk(stmt):
                owner[id(sub)] = id(stmt)  # inner statements overwrite this below
            for field_name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field_name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner)

    visit(func.body)
    return place, owner


def _write_only_reads(fn: _Function, write_only: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """Loads of a buffer the original only writes that no earlier store of the same address and mask covers. A
    store covers a load when it runs whenever the load does (it is a statement of a block that holds the load, or
    holds a statement holding it, and comes first there) and writes every lane the load reads (the same address,
    the same mask or none): a store under an ``if`` that may not run, or with a mask that may be empty, leaves the
    load reading what an earlier call left."""
    if not write_only:
        return []
    place, owner = _statement_lists(fn.func)
    parents: dict[int, ast.stmt] = {id(n): n for n in fn.nodes if isinstance(n, ast.stmt)}
    enclosing: dict[int, int] = {}  # statement id -> id of the statement whose block holds it
    for stmt in parents.values():
        for field_name in ("body", "orelse", "finalbody"):
            for inner in getattr(stmt, field_name, None) or []:
                if isinstance(inner, ast.stmt):
                    enclosing[id(inner)] = id(stmt)

    def chain(stmt_id: int) -> list[int]:
        ids = [stmt_id]
        while ids[-1] in enclosing:
            ids.append(enclosing[ids[-1]])
        return ids

    def mask_text(call: ast.Call, kind: str) -> str | None:
        mask = fn.mask_arg(call, kind)
        return None if mask is None or (isinstance(mask, ast.Constant) and mask.value is None) else \
            canonical(mask, fn)

    calls = [(c, fn.memory_call(c)) for c in fn.nodes if isinstance(c, ast.Call)]
    stores = []
    for c, kind in calls:
        target = fn.pointer_arg(c) if kind == "store" else None
        if target is not None:
            stores.append((c, _pointer_sources(fn, target), canonical(target, fn), mask_text(c, "store")))
    problems = []
    for call, kind in sorted(calls, key=lambda item: (item[0].lineno, item[0].col_offset)):
        pointer = fn.pointer_arg(call) if kind == "load" else None
        if pointer is None:
            continue
        buffers = _pointer_sources(fn, pointer) & set(write_only)
        if not buffers:
            continue
        address, mask = canonical(pointer, fn), mask_text(call, "load")
        holders = {place[s] for s in chain(owner[id(call)]) if s in place}
        covered = any(
            buffers <= sources and store_address == address and store_mask in (None, mask)
            and isinstance(parents.get(owner[id(store)]), ast.Expr) and owner[id(store)] in place
            and any(lst == place[owner[id(store)]][0] and index > place[owner[id(store)]][1] for lst, index in holders)
            for store, sources, store_address, store_mask in stores)
        if not covered:
            problems.append((RULE_WRITE_ONLY, f"loads {', '.join(sorted(buffers))}, a buffer the original only "
                             "writes, where no earlier store of the same address and mask always runs: what it holds "
                             "then is what an earlier call left there (a stale or cached result), not an input",
                             call.lineno))
    return problems


def original_write_only(original: ModuleDecisions) -> tuple[str, ...]:
    """Pointer parameters the original's jit functions store to and never load (its outputs)."""
    written: set[str] = set()
    read: set[str] = set()
    for fn in original.facts:
        loads, stores = _buffers_touched(fn)
        written |= set(stores)
        read |= set(loads)
    return tuple(sorted(written - read))


@dataclass
class AddedDecisions:
    """What a candidate decides that its original does not, and gate 1's findings on it."""

    added: list[Decision] = field(default_factory=list)
    original_count: int = 0
    findings: list[tuple[str, str, int]] = field(default_factory=list)  # (rule, message, line)

    @property
    def constants(self) -> list[float]:
        """Every constant the added decisions involve (for gate 2's constants input set)."""
        return sorted({c for d in self.added if not d.advisory for c in d.constants})

    @property
    def required(self) -> list[Decision]:
        """The added decisions that must be seen both ways (the advisory select effects left out)."""
        return [d for d in self.added if not d.advisory]


_KIND_NAMES = {"integer view": "an integer view of data (a bit cast, floor/rint-like rounding, // or %)",
               "float to int": "a conversion of data to an integer type", "gather": "an address computed from loaded "
               "values (a gather keyed on data)"}


def added_decisions(original_source: str, candidate_source: str, *, check_write_only: bool = True) -> AddedDecisions:
    """The candidate's decisions less the original's (by :func:`canonical` key), and the gate-1 findings:
    pointer control flow, kinds the original has none of, loads of buffers the original only writes."""
    result = AddedDecisions()
    candidate = source_decisions(candidate_source)
    if candidate is None:
        return result
    original = source_decisions(original_source) or ModuleDecisions([])
    result.original_count = len(original.decisions)
    known = {d.key for d in original.decisions}
    original_kinds = {k.kind for k in original.kinds}
    divides = any(d.kind == "division" for d in original.decisions) or "reciprocal" in original_kinds
    for decision in candidate.decisions:
        # a reworded division by a row's sum or norm, where the original divides too, is no new path: such a
        # divisor is never zero nor infinite on any input; one built with a scale of its own can be (1 / (1 + d
        # * d * 1e38) is a switch), so it must be seen both ways
        if decision.key in known or (decision.kind == "division" and divides and decision.plain_divisor) \
                or decision.advisory:
            continue
        result.added.append(decision)
    # a select's effect is recorded only where its condition holds a decision on data the candidate adds (not a
    # synchronisation flag's: the withholding run forces those)
    spans = {(d.function, d.line, d.col, d.end_line, d.end_col) for d in result.added if not d.sync}
    result.added.extend(d for d in candidate.decisions if d.advisory and d.key not in known
                        and any((d.function, *span) in spans for span in d.covers))
    result.findings.extend(candidate.problems)
    reported: set[str] = set()
    for use in candidate.kinds:
        if use.kind == "reciprocal" or use.kind in original_kinds or use.kind in reported:
            continue
        if use.kind == "float to int" and "integer view" in original_kinds:
            continue
        reported.add(use.kind)
        result.findings.append((RULE_KIND, f"`{_short(use.text)}` is {_KIND_NAMES[use.kind]}, which the original "
                                "never uses: its outcomes cannot be recorded, so no test can show that every value "
                                "takes the path the original would; keep to the original's arithmetic", use.line))
    if check_write_only and original.facts:
        write_only = original_write_only(original)
        for fn in candidate.facts:
            result.findings.extend(_write_only_reads(fn, tuple(w for w in write_only if w in fn.params)))
    return result


COMPUTED_STEPS = 4096  # statements evaluated per function when following its constant loops


def computed_constants(source: str) -> list[float]:
    """Every value a name that holds no data takes as a ``@triton.jit`` function runs: its folded constants, and
    what straight-line code and loops of constant bounds compute from them (``k = 0.0; for i in range(3): k +=
    0.25`` takes 0.25, 0.5 and 0.75, a threshold no literal shows). Loops of other bounds and branches on
    unknown tests are not followed, and what they assign is forgotten. Unparsable source gives none."""
    try:
        facts = module_decisions(ast.parse(source)).facts
    except (SyntaxError, ValueError, RecursionError):
        return []
    found: list[float] = []
    for fn in facts:
        found.extend(_ConstantRun(fn).values)
    return list(dict.fromkeys(v for v in found if math.isfinite(v)))


class _ConstantRun:
    """Runs one function's statements on the values of its names that hold no data."""

    def __init__(self, fn: _Function):
        self.fn = fn
        self.env: dict[str, float] = dict(fn.constants)
        self.values: list[float] = list(self.env.values())
        self.steps = 0
        saved = fn.constants
        try:
            self.block(fn.func.body)
        finally:
            fn.constants = saved

    def value(self, node: ast.AST) -> float | None:
        self.fn.constants = self.env
        return self.fn.fold(node)

    def bind(self, name: str, value: float | None) -> None:
        if value is None or name in self.fn.data:
            self.env.pop(name, None)
        else:
            self.env[name] = value
            self.values.append(value)

    def forget(self, statements: list[ast.stmt]) -> None:
        for stmt in statements:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for name in target_names(target):
                            self.env.pop(name, None)

    def block(self, statements: list[ast.stmt]) -> None:
        for stmt in statements:
            self.steps += 1
            if self.steps > COMPUTED_STEPS:
                return
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.bind(stmt.targets[0].id, self.value(stmt.value))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self.bind(stmt.target.id, self.value(stmt.value))
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                self.bind(stmt.target.id, self.value(ast.BinOp(left=ast.Name(stmt.target.id, ast.Load()),
                                                               op=stmt.op, right=stmt.value)))
            elif isinstance(stmt, ast.For):
                self.loop(stmt)
            elif isinstance(stmt, (ast.If, ast.While)):
                test = self.value(stmt.test) if isinstance(stmt, ast.If) else None
                if test is None:
                    self.forget([stmt])
                else:
                    self.block(stmt.body if test else stmt.orelse)
            else:
                self.forget([stmt])

    def loop(self, stmt: ast.For) -> None:
        call = stmt.iter
        bounds = [self.value(a) for a in call.args] if isinstance(call, ast.Call) and call.args else [None]
        if not isinstance(stmt.target, ast.Name) or any(b is None or not float(b).is_integer() for b in bounds) \
                or len(bounds) > 3:
            self.forget([stmt])
            return
        for index in range(*(int(b) for b in bounds if b is not None)):  # (the bounds are all known here)
            if self.steps > COMPUTED_STEPS:
                break
            self.env[stmt.target.id] = float(index)
            self.block(stmt.body)


def jit_bodies_differ(original_source: str, candidate_source: str) -> bool:
    """Whether the candidate's ``@triton.jit`` functions compute anything the original's do not: a function the
    original lacks, or one whose body (its decorators and docstring aside) differs from the same-named one's.
    A switch needs no listed decision (``(k d + 1) - k d`` is one, by rounding alone), so every candidate that
    changes a kernel body meets every input set; only a change of launch configuration is spared. Unreadable
    sources count as different."""
    try:
        original, candidate = ast.parse(original_source), ast.parse(candidate_source)
    except (SyntaxError, ValueError, RecursionError):
        return True
    bodies = [{f.name: _body_text(f) for f in tree.body if isinstance(f, ast.FunctionDef)
               and is_jit(f, import_aliases(tree))} for tree in (original, candidate)]
    return any(bodies[0].get(name) != body for name, body in bodies[1].items())


def _body_text(func: ast.FunctionDef) -> str:
    body = func.body[1:] if func.body and isinstance(func.body[0], ast.Expr) and \
        isinstance(func.body[0].value, ast.Constant) and isinstance(func.body[0].value.value, str) else func.body
    return ast.dump(ast.arguments(posonlyargs=[], args=[ast.arg(a.arg) for a in func.args.args], kwonlyargs=[],
                                  kw_defaults=[], defaults=[])) + "".join(ast.dump(stmt) for stmt in body)


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["AddedDecisions", "Decision", "FunctionDecisions", "KindUse", "ModuleDecisions", "RULE_KIND",
           "RULE_POINTER", "RULE_WRITE_ONLY", "added_decisions", "canonical", "computed_constants", "jit_bodies_differ", "module_decisions",
           "original_write_only", "source_decisions"]
