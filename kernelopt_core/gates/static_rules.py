"""Gate 1's source rules: a kernel module may use only what it can be shown to reach.

Every name is resolved (:mod:`.static_resolution`) and looked up in the allowed namespace of
:mod:`.static_names`; everything else is rejected with the line and the construct. What a module
may contain depends on its :class:`Dialect`: ``INDUCTOR`` (a kernel module as Inductor writes it),
``LAUNCHER`` (docs/launchers.md: jit kernels and one launcher function, :mod:`.static_launcher`) or
``USER`` (hand-written ``@triton.jit``/``@triton.autotune`` kernels, whose rules are in place and
whose contract is not yet).

This module checks the module level and the functions' shape; jit bodies are :mod:`.static_jit`'s,
decorator arguments :mod:`.static_decorators`', shared tables :mod:`.static_tables`'. No dunder
names anywhere (``__file__`` in decorator arguments aside). Pure Python (:mod:`ast`): nothing of
the candidate runs. The dialects in full: docs/design-notes.md, "gates/static_rules.py".
"""

from __future__ import annotations

import ast

from . import static_names as names
from .static_functions import FunctionShapeRules
from .static_jit import JitBodyChecker
from .static_names import KernelNamespace, Member
from .static_resolution import NameResolver
from .static_tables import (
    FORBIDDEN_CALLS,
    FORBIDDEN_NAMES,
    POLICIES,
    Dialect,
    ModuleFacts,
    StaticFinding,
    Symbol,
    allowlist_text,
    local_names,
    short,
)


class ModuleChecker:
    """Checks one kernel module; findings go to ``findings``, facts to ``facts``.

    The module level (imports, constants, expressions) is checked here; its functions' shape by
    :class:`.static_functions.FunctionShapeRules`, their ``@triton.jit`` bodies by
    :class:`.static_jit.JitBodyChecker`, every name by one :class:`.static_resolution.NameResolver`.
    """

    def __init__(self, namespace: KernelNamespace, dialect: Dialect, kernel_name: str | None = None):
        self.policy = POLICIES[dialect]
        self.resolver = NameResolver(namespace, self.policy)
        self.functions = FunctionShapeRules(self.resolver, dialect, kernel_name)

    @property
    def findings(self) -> list[StaticFinding]:
        return self.resolver.findings

    @property
    def facts(self) -> ModuleFacts:
        return self.resolver.facts

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        self.resolver.add(rule, message, node)

    # --- the module ---------------------------------------------------------------------------

    def check_module(self, tree: ast.Module) -> ModuleFacts:
        for stmt in tree.body:
            self._top_level(stmt)
        for func in self.facts.jit_functions:
            JitBodyChecker(self.resolver, func, local_names(func)).run()
        return self.facts

    def _top_level(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            self._import(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            self._import_from(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self.functions.check(stmt)
        elif isinstance(stmt, ast.Expr):
            self._top_level_expression(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._constant(stmt)
        elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.add("try-except", "try/except fallback at module level", stmt)
        elif isinstance(stmt, ast.ClassDef):
            self.add("top-level", f"class {stmt.name}: a kernel module defines functions only", stmt)
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.add("global-state", f"`{short(stmt)}`: state shared between calls", stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.add("global-state", f"module-level `{short(stmt)}` changes module state", stmt)
        elif isinstance(stmt, ast.AsyncFunctionDef):
            self.add("top-level", f"async def {stmt.name}: a kernel module defines @triton.jit functions", stmt)
        else:
            self.add("top-level", f"module-level `{type(stmt).__name__}` statement `{short(stmt)}` is not allowed; "
                                  "only imports, constants and @triton.jit functions are", stmt)

    def _import(self, stmt: ast.Import) -> None:
        for alias in stmt.names:
            if not self.resolver.module_allowed(alias.name) or not self.resolver.ns.is_module(alias.name):
                self._reject_import(alias.name, stmt)
                continue
            if alias.asname:
                self.resolver.bind(alias.asname, Symbol("import", stmt, Member(names.MODULE, alias.name)), stmt)
                continue
            top = alias.name.split(".")[0]  # `import a.b` binds `a`
            if not self.resolver.module_allowed(top) or not self.resolver.ns.is_module(top):
                self._reject_import(alias.name, stmt, binds=top)
                continue
            symbol = self.facts.symbols.get(top)
            if symbol is not None and symbol.kind == "import" and symbol.member == Member(names.MODULE, top):
                continue  # `import triton` then `import triton.language`: the same binding
            self.resolver.bind(top, Symbol("import", stmt, Member(names.MODULE, top)), stmt)

    def _reject_import(self, module: str, stmt: ast.stmt, binds: str | None = None) -> None:
        what = f"import of `{module}`" + (f" (it binds `{binds}`)" if binds else "")
        if module.split(".")[0] == "torch" and not self.policy.torch_import:
            self.add("forbidden-import", f"{what}: a kernel module does not import torch (Inductor's runtime helpers "
                                         "come from `from torch._inductor.runtime import ...`)", stmt)
        else:
            self.add("forbidden-import", f"{what} is outside the allowlist ({allowlist_text(self.policy)})", stmt)

    def _import_from(self, stmt: ast.ImportFrom) -> None:
        module = stmt.module or ""
        if stmt.level:
            self.add("forbidden-import", "relative imports are not allowed", stmt)
            return
        if not self.resolver.module_allowed(module) or not self.resolver.ns.is_module(module):
            self.add("forbidden-import", f"import from `{module}` is outside the allowlist "
                                         f"({allowlist_text(self.policy)})", stmt)
            return
        for alias in stmt.names:
            if alias.name == "*":
                self.add("forbidden-import", f"`from {module} import *` hides what the kernel uses", stmt)
                continue
            member = self.resolver.ns.member(module, alias.name)
            if member is None or (member.target == names.TORCH and not self.policy.torch_import):
                if alias.name in FORBIDDEN_NAMES:
                    self.add("forbidden-import", f"`from {module} import {alias.name}` imports torch", stmt)
                else:
                    self.add("forbidden-import", f"`from {module} import {alias.name}`: `{module}.{alias.name}` is not "
                                                 "in the allowed set", stmt)
                continue
            self.resolver.bind(alias.asname or alias.name, Symbol("import", stmt, member), stmt)

    def _top_level_expression(self, stmt: ast.Expr) -> None:
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # a docstring
        if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)) \
                and self.resolver.chain(value.func) is not None:
            ref = self.resolver.resolve_chain(value.func, frozenset())
            if ref is None:
                return
            if ref.member is not None and ref.member.kind == names.DRIVER and not value.args and not value.keywords:
                return
            if ref.kind == "builtin" and ref.name in FORBIDDEN_CALLS:
                self.add("forbidden-call", f"`{ref.name}` is not allowed ({FORBIDDEN_CALLS[ref.name]})", stmt)
                return
        self.add("top-level", f"module-level expression `{short(stmt)}` runs code at import; only imports, constants, "
                              "@triton.jit functions and `triton_helpers.set_driver_to_gpu()` are allowed", stmt)

    def _constant(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            first = targets[0]
            if isinstance(first, (ast.Attribute, ast.Subscript)):
                self.add("global-state", f"module-level assignment to `{short(first)}` (state shared between calls; "
                                         "function attributes used as a cache)", stmt)
            else:
                self.add("top-level", f"module-level `{short(stmt)}`: one name per constant", stmt)
            return
        if isinstance(stmt, ast.AnnAssign) and not self.resolver.is_constexpr_annotation(stmt.annotation):
            self.add("top-level", f"annotation `{short(stmt.annotation)}` runs at import; only tl.constexpr", stmt)
            return
        value = stmt.value
        if value is None:
            self.add("top-level", f"`{short(stmt)}` declares a name without a value", stmt)
            return
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp,
                              ast.GeneratorExp)) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                                     and value.func.id in ("list", "dict", "set", "bytearray")):
            self.add("global-state", f"global mutable state: module-level `{short(stmt)}` can cache results between "
                                     "calls", stmt)
            return
        if not self.resolver.is_constant(value):
            self.add("top-level", f"module-level assignment `{short(stmt)}` is not a constant (numbers, strings, "
                                  "tuples of them, tl.constexpr(...), math constants)", stmt)
            return
        self.resolver.bind(targets[0].id, Symbol("constant", stmt), stmt)

