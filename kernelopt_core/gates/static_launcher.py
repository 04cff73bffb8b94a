"""Gate 1's launcher dialect (docs/launchers.md), and the compile plans of a launcher's kernels.

A launcher is plain Python that runs on the host with torch at hand, so it is held to a small
language and nothing else:

* read its parameters; int/float/bool arithmetic (``+ - * / // % ** & | ^ << >>``, comparisons,
  ``and/or/not``, ``x if c else y``), ``min``, ``max``, ``triton.cdiv``, ``triton.next_power_of_2``;
* ``if``/``else``; ``for i in range(...)``; assignments to plain names;
* ``.device``, ``.dtype``, ``.shape`` (and ``.shape[i]``), ``.stride(i)``, ``.numel()`` of its
  tensor parameters and of the scratch it allocated;
* ``torch.empty``/``torch.zeros`` with ``dtype=torch.<dtype>`` (or ``<tensor>.dtype``) and
  ``device=<tensor>.device``, ``torch.empty_like``/``torch.zeros_like`` of a tensor;
* ``kernel[grid](args..., META=value, num_warps=..., num_stages=...)`` for the module's own
  ``@triton.jit`` kernels, as a statement. The grid is a tuple of int expressions, or a grid function
  ``lambda meta: (...)`` of the same arithmetic over ``meta['NAME']`` (for ``@triton.autotune``d
  kernels whose block size decides the grid): the one lambda a launcher may contain.

Anything else is rejected and named: other torch attributes, tensor methods that compute or write,
indexing a tensor, ``while``, ``try``, ``with``, nested functions, lambdas elsewhere,
comprehensions, ``global``, attribute or item assignment, I/O.

While checking, the launcher is followed abstractly (types and, where they are constants,
values) to know what each launch passes: a launch whose runtime arguments all have a known type
and whose ``tl.constexpr`` parameters all have a known value becomes a *compile plan* (signature,
constants, ``num_warps``/``num_stages``) that gate 1 compiles for sm_90; a launch that depends on
runtime values (a block size computed from ``r0_numel``) is not compiled, with a note saying why
(gate 2 runs it).
"""

from __future__ import annotations

import ast
import json
import operator
from dataclasses import dataclass, field
from typing import Any

from . import static_names as names
from .static_names import Member
from .static_resolution import NameResolver
from .static_tables import Ref, is_dunder, local_names, short

MAX_PLANS = 16
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
TENSOR_READS = frozenset({"device", "dtype", "shape"})
TENSOR_CALLS = frozenset({"stride", "numel"})
_UNKNOWN: Any = object()
_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
         ast.Mod: operator.mod, ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
         ast.BitXor: operator.xor, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
_DTYPE_BY_TYPE = {f"*{t}": name for name, t in names.TORCH_DTYPES.items()}


@dataclass(frozen=True)
class Value:
    """What a launcher expression is, as far as the source tells."""

    kind: str  # tensor, int, float, bool, str, none, tuple, device, dtype, param (type unknown), unknown
    type: str | None = None  # Triton type: '*fp32' for a tensor, 'i32'/'fp32'/'i1' for scalars; a dtype's too
    const: Any = _UNKNOWN
    items: tuple[Value, ...] = ()

    @property
    def known(self) -> bool:
        return self.const is not _UNKNOWN

    @property
    def tensor_like(self) -> bool:
        return self.kind in ("tensor", "param")

    @property
    def number(self) -> bool:
        return self.kind in ("int", "float", "bool", "param", "unknown")


UNKNOWN = Value("unknown")


def _scalar(value: Any) -> Value:
    if isinstance(value, bool):
        return Value("bool", "i1", value)
    if isinstance(value, int):
        return Value("int", "i32" if -2**31 <= value < 2**31 else "i64", value)
    if isinstance(value, float):
        return Value("float", "fp32", value)
    if isinstance(value, str):
        return Value("str", None, value)
    if value is None:
        return Value("none", None, None)
    return UNKNOWN


def _merge(a: Value, b: Value) -> Value:
    if a == b:
        return a
    if a.kind == b.kind and a.type == b.type:
        return Value(a.kind, a.type)
    if a.kind in ("int", "float", "bool") and b.kind in ("int", "float", "bool"):
        kind = "float" if "float" in (a.kind, b.kind) else "int"
        return Value(kind, "fp32" if kind == "float" else "i32")
    return UNKNOWN


@dataclass
class LauncherFacts:
    plans: list[dict[str, Any]] = field(default_factory=list)  # compile plans (JSON-able)
    notes: list[str] = field(default_factory=list)  # launches not compiled, and why
    launched: set[str] = field(default_factory=set)


def parameter_values(func: ast.FunctionDef, signature: dict[str, Any] | None,
                     sizes: dict[str, int] | None = None) -> dict[str, Value]:
    """The launcher's parameters, typed from the original kernel's triton_meta signature; ``sizes``: the
    integer parameters whose value the original kernel fixes (``xnumel = 6`` at the top of its body)."""
    out: dict[str, Value] = {}
    for arg in func.args.args:
        typ = signature.get(arg.arg) if isinstance(signature, dict) else None
        if not isinstance(typ, str):
            out[arg.arg] = Value("param")
        elif typ.startswith("*"):
            out[arg.arg] = Value("tensor", typ)
        elif typ.startswith(("fp", "bf")):
            out[arg.arg] = Value("float", typ)
        elif typ in ("i1", "B"):
            out[arg.arg] = Value("bool", "i1")
        elif sizes and arg.arg in sizes:
            out[arg.arg] = Value("int", typ, sizes[arg.arg])
        else:
            out[arg.arg] = Value("int", typ)
    return out


def fixed_sizes(original: ast.FunctionDef | None) -> dict[str, int]:
    """Runtime size parameters an Inductor kernel overwrites with constants (static shapes: ``xnumel = 6``).

    The wrapper passes exactly these values, so a launcher's block sizes computed from them are known.
    """
    if original is None:
        return {}
    params = {a.arg for a in original.args.args}
    out: dict[str, int] = {}
    for stmt in original.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id in params and isinstance(stmt.value, ast.Constant) \
                and type(stmt.value.value) is int:
            out[stmt.targets[0].id] = stmt.value.value
    return out


class LauncherChecker:
    """Checks the launcher function and collects the compile plans of its launches."""

    def __init__(self, resolver: NameResolver, func: ast.FunctionDef, signature: dict[str, Any] | None,
                 sizes: dict[str, int] | None = None):
        self.resolver = resolver
        self.func = func
        self.local = local_names(func)
        self.env: dict[str, Value] = parameter_values(func, signature, sizes)
        self.facts = LauncherFacts()
        self.context = "in the launcher"
        self.kernels = {f.name: f for f in resolver.facts.jit_functions}

    def add(self, rule: str, message: str, node: ast.AST) -> None:
        self.resolver.add(rule, message, node)

    def reject(self, node: ast.AST, what: str) -> None:
        self.add("launcher", f"{what} {self.context}: a launcher reads its parameters, computes with ints, "
                             "allocates scratch and launches its kernels, nothing else (docs/launchers.md)", node)

    def run(self) -> LauncherFacts:
        self.block(self.func.body)
        for name, kernel in self.kernels.items():
            if name not in self.facts.launched and not self._called_from_jit(name):
                self.facts.notes.append(f"kernel {name} (line {kernel.lineno}) is never launched")
        return self.facts

    def _called_from_jit(self, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for f in self.kernels.values() if f.name != name
                   for stmt in f.body for n in ast.walk(stmt))

    # --- statements ------------------------------------------------------------------------

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # docstring
            if self._is_launch(stmt.value):
                self.launch(stmt.value)  # type: ignore[arg-type]
                return
            if isinstance(stmt.value, ast.Call):
                self.expression(stmt.value)  # names what is wrong with the call
                return
            self.reject(stmt, f"the expression statement `{short(stmt)}`")
            return
        if isinstance(stmt, ast.Assign):
            value = self.expression(stmt.value)
            for target in stmt.targets:
                self.assign(target, value, stmt)
            return
        if isinstance(stmt, ast.AugAssign):
            if not isinstance(stmt.target, ast.Name):
                self.assign(stmt.target, UNKNOWN, stmt)
                return
            current = self.env.get(stmt.target.id)
            if current is None:
                self.resolver.reject_name(stmt.target.id, stmt.target)
                return
            self.env[stmt.target.id] = self.binop(stmt.op, current, self.expression(stmt.value), stmt)
            return
        if isinstance(stmt, ast.If):
            self.expression(stmt.test)
            before = dict(self.env)
            self.block(stmt.body)
            after_body, self.env = self.env, dict(before)
            self.block(stmt.orelse)
            self.env = self._join(after_body, self.env)
            return
        if isinstance(stmt, ast.For):
            self._for(stmt)
            return
        if isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Return):
            if stmt.value is not None and not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None):
                self.reject(stmt, f"`{short(stmt)}` (the launcher returns nothing; it writes the outputs it is given)")
            return
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.add("try-except", "try/except fallback in the launcher: a candidate may not catch its own failure "
                                   "and do something else", stmt)
            return
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.add("global-state", f"`{short(stmt)}`: state shared between calls", stmt)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.add("forbidden-import", f"`{short(stmt)}` inside the launcher (imports are module-level and "
                                         "listed)", stmt)
            return
        what = {ast.While: "a while loop", ast.With: "a with block", ast.FunctionDef: "a nested function",
                ast.AsyncFunctionDef: "a nested function", ast.ClassDef: "a class", ast.Delete: "del",
                ast.Raise: "raise", ast.Assert: "assert", ast.AnnAssign: "an annotated assignment",
                ast.AsyncFor: "async for", ast.AsyncWith: "async with"}.get(type(stmt), type(stmt).__name__)
        self.reject(stmt, what)

    def _for(self, stmt: ast.For) -> None:
        call = stmt.iter
        is_range = (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
                    and "range" not in self.local and "range" not in self.resolver.facts.symbols and not call.keywords
                    and 1 <= len(call.args) <= 3)
        if not is_range or not isinstance(stmt.target, ast.Name) or stmt.orelse:
            self.reject(stmt, f"`for {short(stmt.target)} in {short(stmt.iter)}` (only `for i in range(...)`)")
            return
        assert isinstance(call, ast.Call)
        for arg in call.args:
            self.number(arg)
        before = dict(self.env)
        self.env[stmt.target.id] = Value("int", "i32")
        self.block(stmt.body)
        self.env = self._join(before, self.env)

    @staticmethod
    def _join(a: dict[str, Value], b: dict[str, Value]) -> dict[str, Value]:
        out = {}
        for key in a.keys() | b.keys():
            if key in a and key in b:
                out[key] = _merge(a[key], b[key])
            else:
                out[key] = Value((a.get(key) or b[key]).kind, (a.get(key) or b[key]).type)
        return out

    def assign(self, target: ast.AST, value: Value, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if is_dunder(target.id):
                self.resolver.reject_name(target.id, target)
            self.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            items = value.items if value.kind == "tuple" and len(value.items) == len(target.elts) else None
            for position, element in enumerate(target.elts):
                self.assign(element, items[position] if items else UNKNOWN, stmt)
            return
        if isinstance(target, ast.Attribute):
            self.add("global-state", f"assignment to attribute `{short(target)}` in the launcher (state kept between "
                                     "calls)", stmt)
            return
        self.reject(stmt, f"the assignment to `{short(target)}` (a tensor is written only by the kernels)")

    # --- expressions -----------------------------------------------------------------------

    def number(self, node: ast.AST) -> Value:
        value = self.expression(node)
        if not value.number:
            self.reject(node, f"`{short(node)}` is not a number")
        return value

    def expression(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes) or node.value is Ellipsis:
                self.reject(node, f"the constant `{short(node)}`")
            return _scalar(node.value)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expression(node.left), self.expression(node.right), node)
        if isinstance(node, ast.UnaryOp):
            operand = self.expression(node.operand)
            if not operand.number:
                self.reject(node, f"`{short(node)}` on a non-number")
                return UNKNOWN
            if isinstance(node.op, ast.Not):
                return Value("bool", "i1", (not operand.const) if operand.known else _UNKNOWN)
            if operand.known and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)) \
                    and not (isinstance(node.op, ast.Invert) and isinstance(operand.const, float)):
                folded = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)]
                return _scalar(folded(operand.const))
            return Value(operand.kind, operand.type)
        if isinstance(node, ast.BoolOp):
            values = [self.expression(v) for v in node.values]
            if not all(v.number for v in values):
                self.reject(node, f"`{short(node)}` on non-numbers")
            return Value("bool", "i1")
        if isinstance(node, ast.Compare):
            values = [self.expression(node.left), *(self.expression(c) for c in node.comparators)]
            if not all(v.number or v.kind in ("dtype", "str", "none") for v in values) or any(
                    isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                self.reject(node, f"the comparison `{short(node)}`")
                return Value("bool", "i1")
            if all(v.known for v in values) and all(type(op) in _COMPARE for op in node.ops):
                result = all(_COMPARE[type(op)](a.const, b.const)
                             for op, a, b in zip(node.ops, values, values[1:], strict=False))
                return Value("bool", "i1", result)
            return Value("bool", "i1")
        if isinstance(node, ast.IfExp):
            self.expression(node.test)
            return _merge(self.expression(node.body), self.expression(node.orelse))
        if isinstance(node, (ast.Tuple, ast.List)):
            items = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    self.reject(element, f"`*{short(element.value)}`")
                    items.append(UNKNOWN)
                    continue
                items.append(self.expression(element))
            return Value("tuple", None, tuple(i.const for i in items) if all(i.known for i in items) else _UNKNOWN,
                         tuple(items))
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Lambda):
            self.reject(node, "a lambda (the only lambda a launcher may hold is a launch's grid function)")
            return UNKNOWN
        what = {ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
                ast.GeneratorExp: "a generator", ast.Dict: "a dict", ast.Set: "a set", ast.NamedExpr: "`:=`",
                ast.JoinedStr: "an f-string", ast.Await: "await", ast.Yield: "yield"}.get(type(node),
                                                                                          type(node).__name__)
        self.reject(node, what)
        return UNKNOWN

    def name(self, node: ast.Name) -> Value:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in self.local:
            return UNKNOWN  # assigned on another path (the checker does not follow every order)
        ref = self.resolver.resolve_name(node.id, frozenset())
        if ref.kind == "constant":
            symbol = self.resolver.facts.symbols[node.id]
            value = getattr(symbol.node, "value", None)
            try:
                return _scalar(ast.literal_eval(value)) if value is not None else UNKNOWN
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return Value("int", "i32")
        if ref.kind == "builtin" and node.id in ("True", "False", "None"):
            return _scalar({"True": True, "False": False, "None": None}[node.id])
        if ref.kind == "jit":
            self.reject(node, f"the kernel `{node.id}` used other than in a launch `{node.id}[grid](...)`")
            return UNKNOWN
        if ref.kind == "launcher":
            self.reject(node, "the launcher itself")
            return UNKNOWN
        if ref.kind == "member":
            self.add("launcher" if not (ref.member and ref.member.target == names.TORCH) else "torch",
                     f"`{node.id}` (`{ref.member.target if ref.member else node.id}`) used as a value "
                     f"{self.context}", node)
            return UNKNOWN
        if ref.kind == "builtin" and node.id in ("min", "max", "range"):
            self.reject(node, f"`{node.id}` used other than in a call")
            return UNKNOWN
        self.resolver.reject_name(node.id, node)
        return UNKNOWN

    def binop(self, op: ast.operator, left: Value, right: Value, node: ast.AST) -> Value:
        if not (left.number and right.number):
            self.reject(node, f"`{short(node)}`: arithmetic on a non-number (tensors are computed by the kernels)")
            return UNKNOWN
        if left.known and right.known and type(op) in _FOLD:
            if isinstance(op, (ast.Pow, ast.LShift)) and (not isinstance(right.const, int) or abs(right.const) > 64
                                                          or abs(left.const) > 2**32):
                return Value("int", "i32")  # no folding of huge powers in the checker
            try:
                return _scalar(_FOLD[type(op)](left.const, right.const))
            except (ZeroDivisionError, OverflowError, TypeError, ValueError):
                return UNKNOWN
        if isinstance(op, ast.Div) or "float" in (left.kind, right.kind):
            return Value("float", "fp32")
        return Value("int", "i32")

    def subscript(self, node: ast.Subscript) -> Value:
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            owner = self.expression(base.value)
            if owner.tensor_like:
                self.number(node.slice)
                return Value("int", "i32")
        value = self.expression(base)
        if value.kind == "tuple":
            index = self.expression(node.slice)
            if index.known and isinstance(index.const, int) and -len(value.items) <= index.const < len(value.items):
                return value.items[index.const]
            return UNKNOWN
        if value.tensor_like:
            self.reject(node, f"indexing the tensor `{short(node)}` (it computes a view or a value on the host)")
        else:
            self.reject(node, f"the subscript `{short(node)}`")
        return UNKNOWN

    def attribute(self, node: ast.Attribute) -> Value:
        if is_dunder(node.attr):
            self.add("forbidden-call", f"dunder attribute `.{node.attr}` (getattr tricks)", node)
            return UNKNOWN
        chain = self.resolver.chain(node)
        if chain is not None and chain[0].id not in self.env and chain[0].id not in self.local:
            ref = self.resolver.resolve_chain(node, frozenset())
            if ref is None:
                return UNKNOWN
            if ref.member is not None and ref.member.kind == names.DTYPE:
                return Value("dtype", f"*{names.TORCH_DTYPES[ref.member.target.split('.')[-1]]}")
            self._reject_member(ref, node)
            return UNKNOWN
        owner = self.expression(node.value)
        if owner.tensor_like and node.attr in TENSOR_READS:
            if node.attr == "device":
                return Value("device")
            if node.attr == "dtype":
                return Value("dtype", owner.type)
            return Value("tuple")
        if owner.tensor_like:
            self.reject(node, f"`{short(node)}` (of a tensor: .device, .dtype, .shape, .stride(), .numel() only)")
        else:
            self.reject(node, f"the attribute `{short(node)}`")
        return UNKNOWN

    def _reject_member(self, ref: Ref, node: ast.AST) -> None:
        target = ref.member.target if ref.member is not None else ref.name
        if target.startswith(names.TORCH + ".") and not target.startswith(names.RUNTIME):
            self.add("torch", f"`{short(node)}` (`{target}`): a launcher uses torch only for torch.empty, "
                              "empty_like, zeros, zeros_like and dtypes", node)
        else:
            self.reject(node, f"`{short(node)}` (`{target}`)")

    def call(self, node: ast.Call) -> Value:
        if self._is_launch(node):
            self.reject(node, "a launch used as a value (launch kernels as statements)")
            return UNKNOWN
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("min", "max") and func.id not in self.local \
                and func.id not in self.resolver.facts.symbols:
            if node.keywords or not node.args:
                self.reject(node, f"`{short(node)}` (min/max of numbers)")
                return UNKNOWN
            values = [self.number(a) for a in node.args]
            if all(v.known for v in values):
                try:
                    return _scalar((min if func.id == "min" else max)(v.const for v in values))
                except (TypeError, ValueError):
                    return UNKNOWN
            return Value("float", "fp32") if any(v.kind == "float" for v in values) else Value("int", "i32")
        if isinstance(func, ast.Attribute):
            chain = self.resolver.chain(func)
            if chain is not None and chain[0].id not in self.env and chain[0].id not in self.local:
                ref = self.resolver.resolve_chain(func, frozenset())
                if ref is None:
                    return UNKNOWN
                member = ref.member
                if member is not None and member.kind == names.HOST_INT:
                    return self.host_int(member, node)
                if member is not None and member.kind == names.SCRATCH:
                    return self.scratch(member, node)
                self._reject_member(ref, func)
                return UNKNOWN
            owner = self.expression(func.value)
            if owner.tensor_like and func.attr in TENSOR_CALLS:
                if node.keywords or len(node.args) > (1 if func.attr == "stride" else 0):
                    self.reject(node, f"`{short(node)}`")
                for arg in node.args:
                    self.number(arg)
                return Value("int", "i32")
            if owner.tensor_like:
                self.reject(node, f"`.{func.attr}()` on a tensor (it computes or writes; the kernels do that)")
            else:
                self.reject(node, f"the call `{short(node)}`")
            return UNKNOWN
        if isinstance(func, ast.Name):
            ref = self.resolver.resolve_name(func.id, self.local)
            if ref.kind == "builtin" and func.id == "range":
                self.reject(node, "range(...) outside `for i in range(...)`")
            elif ref.kind == "builtin":
                self.resolver.reject_name(func.id, func)
            elif ref.kind == "member" and ref.member is not None and ref.member.kind in (names.HOST_INT, names.SCRATCH):
                return self.host_int(ref.member, node) if ref.member.kind == names.HOST_INT else \
                    self.scratch(ref.member, node)
            elif ref.kind == "member":
                self._reject_member(ref, func)
            elif ref.kind == "undefined":
                self.resolver.reject_name(func.id, func)
            else:
                self.reject(node, f"the call `{short(node)}`")
            return UNKNOWN
        self.reject(node, f"the call `{short(node)}`")
        return UNKNOWN

    def host_int(self, member: Member, node: ast.Call) -> Value:
        if node.keywords:
            self.reject(node, f"`{short(node)}` with keywords")
        values = [self.number(a) for a in node.args]
        expected = 2 if member.target == "triton.cdiv" else 1
        if len(values) != expected:
            self.reject(node, f"`{short(node)}` takes {expected} argument(s)")
            return Value("int", "i32")
        if all(v.known and isinstance(v.const, int) for v in values):
            if member.target == "triton.cdiv" and values[1].const != 0:
                return _scalar(-(-values[0].const // values[1].const))
            if member.target == "triton.next_power_of_2" and 0 <= values[0].const < 2**62:
                return _scalar(1 << max(values[0].const - 1, 0).bit_length())
        return Value("int", "i32")

    def scratch(self, member: Member, node: ast.Call) -> Value:
        function = member.target.split(".")[-1]
        like = function.endswith("_like")
        dtype: str | None = None
        device = False
        for kw in node.keywords:
            if kw.arg == "dtype":
                value = self.expression(kw.value)
                if value.kind != "dtype":
                    self.reject(kw.value, f"dtype=`{short(kw.value)}` (use torch.<dtype> or <tensor>.dtype)")
                dtype = value.type
            elif kw.arg == "device":
                value = self.expression(kw.value)
                if value.kind != "device":
                    self.reject(kw.value, f"device=`{short(kw.value)}`: scratch lives on the arguments' device "
                                          "(device=<tensor>.device)")
                device = True
            else:
                self.reject(kw.value if kw.arg else node, f"`{kw.arg or '**'}=` in torch.{function} (dtype= and device= "
                                                          "only)")
        if like:
            if len(node.args) != 1:
                self.reject(node, f"torch.{function} takes one tensor")
                return Value("tensor", dtype)
            source = self.expression(node.args[0])
            if not source.tensor_like:
                self.reject(node.args[0], f"torch.{function} of `{short(node.args[0])}`, which is not a tensor")
            return Value("tensor", dtype or source.type)
        if not dtype or not device:
            self.reject(node, f"torch.{function}(...) needs dtype=torch.<dtype> and device=<tensor>.device")
        if not node.args:
            self.reject(node, f"torch.{function}(...) needs a shape")
        for arg in node.args:
            value = self.expression(arg)
            if value.kind == "tuple":
                if not all(item.number for item in value.items):
                    self.reject(arg, f"the shape `{short(arg)}` holds a non-number")
            elif not value.number:
                self.reject(arg, f"the shape `{short(arg)}` is not a number")
        return Value("tensor", dtype)

    # --- launches ---------------------------------------------------------------------------

    def _is_launch(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.kernels
                and node.func.value.id not in self.local)

    def launch(self, node: ast.Call) -> None:
        assert isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name)
        name = node.func.value.id
        kernel = self.kernels[name]
        self.facts.launched.add(name)
        self.grid(node.func.slice)
        params = [a.arg for a in kernel.args.args]
        bound: dict[str, Value] = {}
        options: dict[str, Value] = {}
        if len(node.args) > len(params):
            self.reject(node, f"{name} takes {len(params)} arguments, the launch passes {len(node.args)}")
        for param, arg in zip(params, node.args, strict=False):
            if isinstance(arg, ast.Starred):
                self.reject(arg, f"`*{short(arg.value)}` in a launch")
                continue
            bound[param] = self.expression(arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.reject(kw.value, f"`**{short(kw.value)}` in a launch")
            elif kw.arg in LAUNCH_OPTIONS:
                options[kw.arg] = self.number(kw.value)
            elif kw.arg not in params:
                self.reject(kw.value, f"{name}[...]({kw.arg}=...): {name} has no parameter {kw.arg}")
            elif kw.arg in bound:
                self.reject(kw.value, f"{name}[...]({kw.arg}=...) passes {kw.arg} twice")
            else:
                bound[kw.arg] = self.expression(kw.value)
        for param, value in bound.items():
            if value.kind in ("device", "dtype", "tuple", "none", "str") and param not in self._constexprs(kernel):
                self.reject(node, f"{name}'s argument {param} is a {value.kind}, not a tensor or a number")
        self._plans(kernel, node, bound, options)

    def grid(self, node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            self._grid_function(node)
            return
        value = self.expression(node)
        items = value.items if value.kind == "tuple" else ()
        if value.kind != "tuple" or not 1 <= len(items) <= 3 or not all(i.number for i in items):
            if value.kind != "tuple" or items:
                self.reject(node, f"the grid `{short(node)}` (a tuple of 1-3 ints, or lambda meta: (...))")

    def _grid_function(self, node: ast.Lambda) -> None:
        if len(node.args.args) != 1 or node.args.vararg or node.args.kwarg or node.args.kwonlyargs \
                or node.args.defaults:
            self.reject(node, "a grid function other than `lambda meta: (...)`")
            return
        param = node.args.args[0].arg
        body = node.body
        axes = body.elts if isinstance(body, ast.Tuple) else None
        if not axes or not 1 <= len(axes) <= 3:
            self.reject(node, "a grid function that does not return a tuple of 1-3 ints")
            return
        saved = self.env
        self.env = {**self.env, param: Value("meta")}
        try:
            for axis in axes:
                for sub in ast.walk(axis):
                    if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == param:
                        if not (isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str)):
                            self.reject(sub, f"`{short(sub)}` (meta['NAME'] only)")
                self._meta_expression(axis, param)
        finally:
            self.env = saved

    def _meta_expression(self, node: ast.AST, param: str) -> None:
        """Numbers from the launcher's arithmetic, where ``meta['NAME']`` is a number too."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param:
            return
        if isinstance(node, ast.Name) and node.id == param:
            self.reject(node, f"`{param}` used other than as {param}['NAME']")
            return
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call)):
            if isinstance(node, ast.Call):
                func = node.func
                ok = (isinstance(func, ast.Name) and func.id in ("min", "max")) or (
                    isinstance(func, ast.Attribute) and self.resolver.chain(func) is not None
                    and (ref := self.resolver.resolve_chain(func, frozenset())) is not None
                    and ref.member is not None and ref.member.kind == names.HOST_INT)
                if not ok or node.keywords:
                    self.reject(node, f"the call `{short(node)}` in a grid function")
                    return
                for arg in node.args:
                    self._meta_expression(arg, param)
                return
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._meta_expression(child, param)
            return
        self.number(node)

    # --- compile plans -----------------------------------------------------------------------

    def _constexprs(self, kernel: ast.FunctionDef) -> set[str]:
        return {a.arg for a in kernel.args.args
                if a.annotation is not None and self.resolver.is_constexpr_annotation(a.annotation)}

    def _configs(self, kernel: ast.FunctionDef) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(meta-parameters, launch options) of each @triton.autotune config; one empty pair without."""
        for deco in kernel.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            ref = self.resolver.resolve_chain(deco.func, frozenset()) if self.resolver.chain(deco.func) else None
            if ref is None or ref.member is None or ref.member.target != "triton.autotune":
                continue
            configs = next((kw.value for kw in deco.keywords if kw.arg == "configs"), None)
            out = []
            for element in configs.elts if isinstance(configs, (ast.List, ast.Tuple)) else []:
                if not isinstance(element, ast.Call):
                    continue
                try:
                    meta = ast.literal_eval(element.args[0]) if element.args else {}
                    meta.update(next((ast.literal_eval(kw.value) for kw in element.keywords if kw.arg == "kwargs"), {}))
                    opts = {kw.arg: ast.literal_eval(kw.value) for kw in element.keywords if kw.arg in LAUNCH_OPTIONS}
                except (ValueError, SyntaxError, TypeError, AttributeError):
                    continue
                if isinstance(meta, dict):
                    out.append((meta, opts))
            return out or [({}, {})]
        return [({}, {})]

    def _heuristic_values(self, kernel: ast.FunctionDef, known: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for deco in kernel.decorator_list:
            if not (isinstance(deco, ast.Call) and self.resolver.chain(deco.func)):
                continue
            ref = self.resolver.resolve_chain(deco.func, frozenset())
            if ref is None or ref.member is None or ref.member.target != "triton.heuristics" or not deco.args:
                continue
            table = deco.args[0]
            if not isinstance(table, ast.Dict):
                continue
            for key, value in zip(table.keys, table.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Lambda) and value.args.args:
                    result = _evaluate_arithmetic(value.body, value.args.args[0].arg, known)
                    out[key.value] = result
        return out

    def _plans(self, kernel: ast.FunctionDef, node: ast.Call, bound: dict[str, Value],
               options: dict[str, Value]) -> None:
        params = [a.arg for a in kernel.args.args]
        constexprs = self._constexprs(kernel)
        defaults = dict(zip(params[len(params) - len(kernel.args.defaults):], kernel.args.defaults, strict=True))
        where = f"the launch of {kernel.name} on line {node.lineno}"
        for meta, config_options in self._configs(kernel):
            known = {p: v.const for p, v in bound.items() if v.known}
            known.update(meta)
            heuristics = self._heuristic_values(kernel, known)
            signature: dict[str, str] = {}
            constants: dict[str, Any] = {}
            missing: list[str] = []
            for param in params:
                if param in constexprs:
                    signature[param] = "constexpr"
                    value = bound[param].const if param in bound and bound[param].known else _UNKNOWN
                    if value is _UNKNOWN and param in meta:
                        value = meta[param]
                    if value is _UNKNOWN and heuristics.get(param, _UNKNOWN) is not _UNKNOWN:
                        value = heuristics[param]
                    if value is _UNKNOWN and param in defaults:
                        try:
                            value = ast.literal_eval(defaults[param])
                        except (ValueError, SyntaxError, TypeError):
                            value = _UNKNOWN
                    if value is _UNKNOWN or not _json_scalar(value):
                        missing.append(f"the constexpr {param} depends on runtime values")
                    else:
                        constants[param] = value
                    continue
                value_of = bound.get(param)
                if value_of is None and param in defaults:
                    try:
                        value_of = _scalar(ast.literal_eval(defaults[param]))
                    except (ValueError, SyntaxError, TypeError):
                        value_of = None
                if value_of is None:
                    missing.append(f"{param} is not passed")
                    continue
                if value_of.kind == "none":
                    signature[param] = "constexpr"
                    constants[param] = None
                    continue
                if value_of.type is None:
                    missing.append(f"the type of {param} is not known from the source")
                    continue
                signature[param] = value_of.type
            if missing:
                self.facts.notes.append(f"{where} is not compiled for sm_90 ({'; '.join(missing)}); gate 2 runs it")
                continue
            num_warps = _option(options, config_options, "num_warps", 4)
            num_stages = _option(options, config_options, "num_stages", 3)
            plan = {"kernel": kernel.name, "line": node.lineno, "signature": signature, "constants": constants,
                    "num_warps": num_warps, "num_stages": num_stages}
            if any(_same_plan(plan, other) for other in self.facts.plans):
                continue
            if len(self.facts.plans) >= MAX_PLANS:
                self.facts.notes.append(f"more than {MAX_PLANS} distinct launches: {where} is not compiled")
                continue
            self.facts.plans.append(plan)


def _option(options: dict[str, Value], config: dict[str, Any], key: str, default: int) -> int:
    value = options.get(key)
    if value is not None and value.known and isinstance(value.const, int):
        return value.const
    return int(config.get(key, default)) if isinstance(config.get(key, default), int) else default


def _json_scalar(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, (int, float, bool, str)) or value is None


def _same_plan(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "line"} == {k: v for k, v in b.items() if k != "line"}


def _evaluate_arithmetic(node: ast.AST, param: str, known: dict[str, Any]) -> Any:
    """A heuristic's value from known arguments (``_UNKNOWN`` when it needs a runtime value)."""
    try:
        return _arith(node, param, known)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return _UNKNOWN


def _arith(node: ast.AST, param: str, known: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param \
            and isinstance(node.slice, ast.Constant):
        return known[node.slice.value]
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        left, right = _arith(node.left, param, known), _arith(node.right, param, known)
        if isinstance(node.op, (ast.Pow, ast.LShift)) and (abs(right) > 64 or abs(left) > 2**32):
            raise ValueError("too large")
        return _FOLD[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _arith(node.operand, param, known)
        return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                ast.Invert: operator.invert}[type(node.op)](operand)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_arith(node.left, param, known), _arith(node.comparators[0], param, known))
    if isinstance(node, ast.IfExp):
        return _arith(node.body if _arith(node.test, param, known) else node.orelse, param, known)
    if isinstance(node, ast.Call) and not node.keywords:
        args = [_arith(a, param, known) for a in node.args]
        name = ast.unparse(node.func)
        if name in ("min", "max"):
            return (min if name == "min" else max)(args)
        if name.endswith("cdiv") and len(args) == 2:
            return -(-args[0] // args[1])
        if name.endswith("next_power_of_2") and len(args) == 1 and 0 <= args[0] < 2**62:
            return 1 << max(args[0] - 1, 0).bit_length()
    raise ValueError("not arithmetic")


def check_launcher(resolver: NameResolver, func: ast.FunctionDef, original: ast.FunctionDef | None,
                   original_signature: dict[str, Any] | None) -> LauncherFacts:
    """Check a launcher body (findings go to ``resolver``) and return its compile plans and notes."""
    return LauncherChecker(resolver, func, original_signature, fixed_sizes(original)).run()


__all__ = ["LauncherFacts", "Value", "check_launcher", "fixed_sizes", "parameter_values"]
