"""Gate 1's launcher dialect (docs/launchers.md), and the compile plans of a launcher's kernels.

A launcher is plain Python that runs on the host with torch at hand, so it is held to a small
language: its parameters, int/float/bool arithmetic, ``if``/``else``, ``for ... in range``,
assignments to plain names, a tensor's ``.device``/``.dtype``/``.shape``/``.stride(i)``/
``.numel()``, scratch from ``torch.empty``/``zeros`` (and ``_like``), and launches
``kernel[grid](...)`` of the module's own jit kernels. Anything else is rejected and named.

While checking, the launcher is followed abstractly (:mod:`.static_launcher_values`): a launch whose
arguments all have known types and constexprs known values becomes a compile plan for sm_90
(:mod:`.static_launcher_plans`). This module walks statements and launches; expressions are
checked by :mod:`.static_launcher_expressions`. The full list: docs/design-notes.md,
"gates/static_launcher.py".
"""

from __future__ import annotations

import ast
from typing import Any

from . import static_names as names
from .static_launcher_expressions import LauncherExpressions
from .static_launcher_plans import LAUNCH_OPTIONS, CompilePlans, LauncherFacts
from .static_launcher_values import UNKNOWN, Value, fixed_sizes, join, parameter_values
from .static_resolution import NameResolver
from .static_tables import is_dunder, local_names, short


class LauncherChecker:
    """Checks the launcher function's statements and launches and collects the compile plans."""

    def __init__(self, resolver: NameResolver, func: ast.FunctionDef, signature: dict[str, Any] | None,
                 sizes: dict[str, int] | None = None):
        self.resolver = resolver
        self.func = func
        self.local = local_names(func)
        self.expressions = LauncherExpressions(resolver, parameter_values(func, signature, sizes), self.local)
        self.facts = LauncherFacts()
        self.plans = CompilePlans(resolver, self.facts)
        self.kernels = self.expressions.kernels

    @property
    def env(self) -> dict[str, Value]:
        """The launcher's names and what they hold (the expressions read them, the statements set them)."""
        return self.expressions.env

    @env.setter
    def env(self, env: dict[str, Value]) -> None:
        self.expressions.env = env

    def add(self, rule: str, message: str, node: ast.AST) -> None:
        self.resolver.add(rule, message, node)

    def reject(self, node: ast.AST, what: str) -> None:
        self.expressions.reject(node, what)

    def run(self) -> LauncherFacts:
        self.block(self.func.body)
        for name, kernel in self.kernels.items():
            if name not in self.facts.launched and not self._called_from_jit(name):
                self.facts.notes.append(f"kernel {name} (line {kernel.lineno}) is never launched")
        return self.facts

    def _called_from_jit(self, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for f in self.kernels.values() if f.name != name
                   for stmt in f.body for n in ast.walk(stmt))

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # docstring
            if self.expressions.is_launch(stmt.value):
                self.launch(stmt.value)
                return
            if isinstance(stmt.value, ast.Call):
                self.expressions.expression(stmt.value)  # names what is wrong with the call
                return
            self.reject(stmt, f"the expression statement `{short(stmt)}`")
            return
        if isinstance(stmt, ast.Assign):
            value = self.expressions.expression(stmt.value)
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
            value = self.expressions.expression(stmt.value)
            self.env[stmt.target.id] = self.expressions.binop(stmt.op, current, value, stmt)
            return
        if isinstance(stmt, ast.If):
            self.expressions.expression(stmt.test)
            before = dict(self.env)
            self.block(stmt.body)
            after_body, self.env = self.env, dict(before)
            self.block(stmt.orelse)
            self.env = join(after_body, self.env)
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
            self.expressions.number(arg)
        before = dict(self.env)
        self.env[stmt.target.id] = Value("int", "i32")
        self.block(stmt.body)
        self.env = join(before, self.env)

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
            bound[param] = self.expressions.expression(arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.reject(kw.value, f"`**{short(kw.value)}` in a launch")
            elif kw.arg in LAUNCH_OPTIONS:
                options[kw.arg] = self.expressions.number(kw.value)
            elif kw.arg not in params:
                self.reject(kw.value, f"{name}[...]({kw.arg}=...): {name} has no parameter {kw.arg}")
            elif kw.arg in bound:
                self.reject(kw.value, f"{name}[...]({kw.arg}=...) passes {kw.arg} twice")
            else:
                bound[kw.arg] = self.expressions.expression(kw.value)
        for param, value in bound.items():
            if value.kind in ("device", "dtype", "tuple", "none", "str") and param not in self.plans.constexprs(kernel):
                self.reject(node, f"{name}'s argument {param} is a {value.kind}, not a tensor or a number")
        self.plans.add(kernel, node, bound, options)

    def grid(self, node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            self._grid_function(node)
            return
        value = self.expressions.expression(node)
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
        self.expressions.number(node)


def check_launcher(resolver: NameResolver, func: ast.FunctionDef, original: ast.FunctionDef | None,
                   original_signature: dict[str, Any] | None) -> LauncherFacts:
    """Check a launcher body (findings go to ``resolver``) and return its compile plans and notes."""
    return LauncherChecker(resolver, func, original_signature, fixed_sizes(original)).run()


__all__ = ["LauncherFacts", "Value", "check_launcher", "fixed_sizes", "parameter_values"]
