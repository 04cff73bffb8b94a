"""What each expression of a launcher is, and the expressions a launcher may not hold.

A launcher computes with ints and reads its tensors' ``.device``, ``.dtype``, ``.shape``,
``.stride(i)`` and ``.numel()``; it calls ``min``, ``max``, ``triton.cdiv``,
``triton.next_power_of_2`` and allocates scratch with ``torch.empty``/``zeros`` (``dtype=``,
``device=<tensor>.device``) or ``torch.empty_like``/``zeros_like``. :class:`LauncherExpressions`
gives each expression its :class:`~.static_launcher_values.Value` and rejects, with the line and
the construct, anything else (other torch attributes, tensor methods that compute or write,
indexing a tensor, lambdas, comprehensions, I/O). Used by :mod:`.static_launcher`; pure :mod:`ast`.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from . import static_names as names
from .static_launcher_values import (
    UNKNOWN,
    UNKNOWN_CONST,
    Value,
    fold_binary,
    fold_compare,
    fold_host_int,
    fold_min_max,
    fold_unary,
    merge,
    scalar,
)
from .static_names import Member
from .static_resolution import NameResolver
from .static_tables import Ref, is_dunder, short

TENSOR_READS = frozenset({"device", "dtype", "shape"})
TENSOR_CALLS = frozenset({"stride", "numel"})


class LauncherExpressions:
    """The launcher's expressions: a value for each, a finding for what a launcher may not compute."""

    def __init__(self, resolver: NameResolver, env: dict[str, Value], local: set[str],
                 context: str = "in the launcher"):
        self.resolver = resolver
        self.env = env  # the launcher's names and what they hold (its statements update it)
        self.local = local
        self.context = context
        self.kernels = {f.name: f for f in resolver.facts.jit_functions}

    def add(self, rule: str, message: str, node: ast.AST) -> None:
        self.resolver.add(rule, message, node)

    def reject(self, node: ast.AST, what: str) -> None:
        self.add("launcher", f"{what} {self.context}: a launcher reads its parameters, computes with ints, "
                             "allocates scratch and launches its kernels, nothing else (docs/launchers.md)", node)

    def is_launch(self, node: ast.AST) -> TypeGuard[ast.Call]:
        """``kernel[grid](...)``, a launch of one of the module's kernels."""
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.kernels
                and node.func.value.id not in self.local)

    def number(self, node: ast.AST) -> Value:
        value = self.expression(node)
        if not value.number:
            self.reject(node, f"`{short(node)}` is not a number")
        return value

    def expression(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes) or node.value is Ellipsis:
                self.reject(node, f"the constant `{short(node)}`")
            return scalar(node.value)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expression(node.left), self.expression(node.right), node)
        if isinstance(node, ast.UnaryOp):
            operand = self.expression(node.operand)
            if not operand.number:
                self.reject(node, f"`{short(node)}` on a non-number")
                return UNKNOWN
            return fold_unary(node.op, operand)
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
            return fold_compare(node.ops, values)
        if isinstance(node, ast.IfExp):
            self.expression(node.test)
            return merge(self.expression(node.body), self.expression(node.orelse))
        if isinstance(node, (ast.Tuple, ast.List)):
            items = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    self.reject(element, f"`*{short(element.value)}`")
                    items.append(UNKNOWN)
                    continue
                items.append(self.expression(element))
            return Value("tuple", None, tuple(i.const for i in items) if all(i.known for i in items) else UNKNOWN_CONST,
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
                return scalar(ast.literal_eval(value)) if value is not None else UNKNOWN
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return Value("int", "i32")
        if ref.kind == "builtin" and node.id in ("True", "False", "None"):
            return scalar({"True": True, "False": False, "None": None}[node.id])
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
        return fold_binary(op, left, right)

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
        if self.is_launch(node):
            self.reject(node, "a launch used as a value (launch kernels as statements)")
            return UNKNOWN
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("min", "max") and func.id not in self.local \
                and func.id not in self.resolver.facts.symbols:
            if node.keywords or not node.args:
                self.reject(node, f"`{short(node)}` (min/max of numbers)")
                return UNKNOWN
            return fold_min_max(func.id, [self.number(a) for a in node.args])
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
        return fold_host_int(member.target, values)

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
