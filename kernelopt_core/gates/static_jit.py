"""Gate 1's rules inside ``@triton.jit`` bodies: the Triton language and nothing else.

Calls resolve to the Triton language, ``triton_helpers``, ``libdevice``, ``tl_math``, ``math``,
``triton.cdiv``/``next_power_of_2``, plain ``@triton.jit`` helpers of the module, the builtins in
:data:`.static_tables.JIT_BUILTINS` and the tensor methods in :data:`.static_tables.TENSOR_METHODS`;
statements are the ones Triton compiles. Pure :mod:`ast`; used by :class:`.static_rules.ModuleChecker`, names resolved by
:class:`.static_resolution.NameResolver`.
"""

from __future__ import annotations

import ast
import sys
from typing import TYPE_CHECKING

from . import static_names as names
from .static_tables import JIT_BUILTINS, TENSOR_ATTRIBUTES, TENSOR_METHODS, Ref, is_dunder, short

if TYPE_CHECKING:
    from .static_resolution import NameResolver

# try/except, and from Python 3.11 try/except* (the same fields)
if sys.version_info >= (3, 11):
    TRY_STATEMENTS = (ast.Try, ast.TryStar)
else:
    TRY_STATEMENTS = (ast.Try,)

def check_call_target(resolver: NameResolver, call: ast.Call, local: set[str], context: str) -> Ref | None:
    """The function a call in a @triton.jit body resolves to (a finding when it is not allowed)."""
    func = call.func
    if isinstance(func, (ast.Name, ast.Attribute)) and resolver.chain(func) is not None:
        ref = resolver.resolve_chain(func, local)
        if ref is None:
            return None
        if ref.kind == "value":
            *attrs, method = ref.name.split(".")
            bad = [a for a in attrs if a not in TENSOR_ATTRIBUTES]
            if bad or method not in TENSOR_METHODS:
                resolver.add("forbidden-call", f"`{short(func)}(...)`: `.{bad[0] if bad else method}` is not a Triton "
                                           f"tensor method {context} uses", call)
                return None
            return ref
        if ref.kind == "member" and ref.member is not None:
            if ref.member.target.startswith(names.TORCH + ".") and not ref.member.target.startswith(names.RUNTIME):
                resolver.add("torch", f"`{short(func)}` calls torch (`{ref.member.target}`) {context}", call)
                return None
            if ref.member.kind in (names.DEVICE, names.HOST_INT, names.MATH_FUNCTION):
                if ref.member.target.rsplit(".", 1)[-1].startswith("atomic_"):
                    resolver.facts.uses_atomics = True
                return ref
            resolver.add("forbidden-call", f"`{short(func)}` (`{ref.member.target}`) cannot be called {context}", call)
            return None
        if ref.kind == "jit":
            symbol = resolver.facts.symbols[ref.name]
            if symbol.wrapped:
                resolver.add("forbidden-call", f"`{ref.name}` is a launched kernel (it has a launch decorator); "
                                           "only plain @triton.jit helpers are called from a kernel", call)
                return None
            return ref
        if ref.kind == "builtin":
            if ref.name in JIT_BUILTINS:
                return ref
            resolver.reject_name(ref.name, func)
            return None
        what = {"local": "a local variable", "constant": "a module-level constant",
                "launcher": "the launcher"}.get(ref.kind, ref.kind)
        resolver.add("forbidden-call", f"`{short(func)}(...)` calls {what}", call)
        return None
    if isinstance(func, ast.Attribute):
        if is_dunder(func.attr):
            resolver.add("forbidden-call", f"dunder attribute `.{func.attr}` (getattr tricks)", func)
            return None
        if func.attr not in TENSOR_METHODS:
            resolver.add("forbidden-call", f"`.{func.attr}(...)` is not a Triton tensor method {context} uses", call)
            return None
        return Ref("value", name=func.attr)
    resolver.add("forbidden-call", f"`{short(func)}(...)` calls a computed value", call)
    return None


_JIT_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.For, ast.While, ast.Return,
                   ast.Pass, ast.Break, ast.Continue, ast.Assert)
_JIT_EXPRESSIONS = (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Compare, ast.Call, ast.Constant,
                    ast.Attribute, ast.Subscript, ast.Name, ast.List, ast.Tuple, ast.Slice)


class JitBodyChecker:
    """One @triton.jit body: statements and expressions of the Triton language only."""

    def __init__(self, resolver: NameResolver, func: ast.FunctionDef, local: set[str]):
        self.resolver = resolver
        self.func = func
        self.local = local
        self.context = "inside a @triton.jit function"

    def add(self, rule: str, message: str, node: ast.AST) -> None:
        self.resolver.add(rule, message, node)

    def run(self) -> None:
        for stmt in self.func.body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, TRY_STATEMENTS):
            self.add("try-except", "try/except fallback: a kernel may not catch its own failure and do something "
                                   "else", stmt)
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                for inner in part:
                    self.statement(inner)
            return
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.add("global-state", f"`{short(stmt)}`: state shared between calls", stmt)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.add("forbidden-import", f"`{short(stmt)}` inside a function (imports are module-level and listed)",
                     stmt)
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.add("construct", f"`{type(stmt).__name__}` {stmt.name} nested in {self.func.name}: a kernel body "
                                  "is Triton code", stmt)
            return
        if not isinstance(stmt, _JIT_STATEMENTS):
            self.add("construct", f"`{type(stmt).__name__}` statement `{short(stmt)}` {self.context} is not Triton "
                                  "kernel code", stmt)
            return
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                self.target(target, stmt)
            if isinstance(stmt, ast.AnnAssign) and not self.resolver.is_constexpr_annotation(stmt.annotation):
                self.add("top-level", f"annotation `{short(stmt.annotation)}`: only tl.constexpr", stmt)
            if stmt.value is not None:
                self.expression(stmt.value)
            return
        if isinstance(stmt, ast.For):
            self.target(stmt.target, stmt)
            self.expression(stmt.iter)
            for inner in [*stmt.body, *stmt.orelse]:
                self.statement(inner)
            return
        if isinstance(stmt, (ast.If, ast.While)):
            self.expression(stmt.test)
            for inner in [*stmt.body, *stmt.orelse]:
                self.statement(inner)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expression(child)

    def target(self, target: ast.AST, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if is_dunder(target.id):
                self.resolver.reject_name(target.id, target)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.target(element, stmt)
            return
        if isinstance(target, ast.Attribute):
            self.add("global-state", f"assignment to attribute `{short(target)}` (function attributes used as a "
                                     "cache)", stmt)
            return
        self.add("construct", f"assignment to `{short(target)}` {self.context}: only names are assigned", stmt)

    def expression(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            check_call_target(self.resolver, node, self.local, self.context)
            func = node.func
            if isinstance(func, ast.Attribute) and self.resolver.chain(func) is None:
                self.expression(func.value)  # the tensor the method is called on
            elif not isinstance(func, (ast.Name, ast.Attribute)):
                pass  # already rejected
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    self.add("construct", f"`*{short(arg.value)}` in a call {self.context}", arg)
                    continue
                self.expression(arg)
            for kw in node.keywords:
                if kw.arg is None:
                    self.add("construct", f"`**{short(kw.value)}` in a call {self.context}", kw.value)
                    continue
                if is_dunder(kw.arg):
                    self.resolver.reject_name(kw.arg, kw.value)
                self.expression(kw.value)
            return
        if isinstance(node, (ast.Name, ast.Attribute)) and self.resolver.chain(node) is not None:
            ref = self.resolver.resolve_chain(node, self.local)
            if ref is None:
                return
            if ref.kind == "value":
                bad = [a for a in ref.name.split(".") if a not in TENSOR_ATTRIBUTES]
                if bad:
                    self.add("forbidden-call", f"`{short(node)}`: `.{bad[0]}` is not an attribute of a Triton value "
                                               f"{self.context}", node)
            elif ref.kind == "member" and ref.member is not None and ref.member.kind == names.MODULE:
                self.add("forbidden-import", f"the module `{ref.member.target}` used as a value (`{short(node)}`)",
                         node)
            elif ref.kind == "member" and ref.member is not None and ref.member.kind not in (
                    names.DEVICE, names.HOST_INT, names.MATH_FUNCTION, names.MATH_VALUE, names.ENUM):
                self.add("forbidden-call", f"`{short(node)}` (`{ref.member.target}`) cannot be used {self.context}", node)
            elif ref.kind == "launcher":
                self.add("forbidden-call", f"`{short(node)}`: the launcher used {self.context}", node)
            elif ref.kind == "builtin" and ref.name not in JIT_BUILTINS and ref.name not in ("True", "False", "None"):
                self.resolver.reject_name(ref.name, node)
            return
        if isinstance(node, ast.Attribute):
            if is_dunder(node.attr):
                self.add("forbidden-call", f"dunder attribute `.{node.attr}` (getattr tricks)", node)
            elif node.attr not in TENSOR_ATTRIBUTES:
                self.add("forbidden-call", f"`{short(node)}`: `.{node.attr}` is not an attribute of a Triton value "
                                           f"{self.context}", node)
            self.expression(node.value)
            return
        if isinstance(node, ast.Lambda):
            self.add("top-level", f"lambda {self.context}: a kernel module defines @triton.jit functions only", node)
            return
        if not isinstance(node, _JIT_EXPRESSIONS):
            self.add("construct", f"`{type(node).__name__}` expression `{short(node)}` {self.context} is not Triton "
                                  "kernel code", node)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child)
