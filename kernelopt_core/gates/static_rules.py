"""Gate 1's source rules: a kernel module may use only what it can be shown to reach.

Every name is resolved to what it refers to and looked up in the allowed namespace of
:mod:`.static_names` (:mod:`.static_resolution`); everything else is rejected with the line and
the construct.

What a module may contain depends on its :class:`Dialect`:

* ``INDUCTOR``: a kernel module as Inductor writes it: a docstring, Inductor's imports,
  ``triton_helpers.set_driver_to_gpu()/set_driver_to_cpu()``, immutable constants and
  ``@triton.jit`` functions, the kernel under one ``@triton_heuristics.<kind>(...)``;
* ``LAUNCHER`` (docs/launchers.md): ``@triton.jit`` kernels, optionally under
  ``@triton.autotune(configs=[triton.Config(...)], key=[...])``/``@triton.heuristics({...})``,
  ``import torch`` and one undecorated launcher function checked by :mod:`.static_launcher`;
* ``USER`` (hand-written kernels, issue 19): ``@triton.jit``/``@triton.autotune`` kernels without
  Inductor's decorator and without a launcher. Its rules are in place; its contract is not.

This module checks the module level and the functions' shape; names are resolved by
:mod:`.static_resolution`, the ``@triton.jit`` bodies are checked by :mod:`.static_jit`, decorator
arguments by :mod:`.static_decorators`, a launcher's body by :mod:`.static_launcher`; the tables
they share are in :mod:`.static_tables`. No dunder names anywhere (``__file__`` in decorator
arguments aside).

Pure Python (:mod:`ast`): no torch, nothing of the candidate runs.
"""

from __future__ import annotations

import ast

from . import static_names as names
from .static_decorators import DecoratorRules
from .static_jit import JitBodyChecker
from .static_names import KernelNamespace, Member
from .static_resolution import NameResolver
from .static_tables import (
    FORBIDDEN_CALLS,
    FORBIDDEN_NAMES,
    JIT_KEYWORDS,
    POLICIES,
    Dialect,
    ModuleFacts,
    Ref,
    StaticFinding,
    Symbol,
    allowlist_text,
    is_dunder,
    local_names,
    short,
)


class ModuleChecker:
    """Checks one kernel module; findings go to ``findings``, facts to ``facts``."""

    def __init__(self, namespace: KernelNamespace, dialect: Dialect, kernel_name: str | None = None):
        self.dialect = dialect
        self.policy = POLICIES[dialect]
        self.kernel_name = kernel_name
        self.names = NameResolver(namespace, self.policy)
        self.decorators = DecoratorRules(self.names)

    @property
    def findings(self) -> list[StaticFinding]:
        return self.names.findings

    @property
    def facts(self) -> ModuleFacts:
        return self.names.facts

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        self.names.add(rule, message, node)

    # --- the module ---------------------------------------------------------------------------

    def check_module(self, tree: ast.Module) -> ModuleFacts:
        for stmt in tree.body:
            self._top_level(stmt)
        for func in self.facts.jit_functions:
            JitBodyChecker(self.names, func, local_names(func)).run()
        return self.facts

    def _top_level(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            self._import(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            self._import_from(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._function(stmt)
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
            if not self.names.module_allowed(alias.name) or not self.names.ns.is_module(alias.name):
                self._reject_import(alias.name, stmt)
                continue
            if alias.asname:
                self.names.bind(alias.asname, Symbol("import", stmt, Member(names.MODULE, alias.name)), stmt)
                continue
            top = alias.name.split(".")[0]  # `import a.b` binds `a`
            if not self.names.module_allowed(top) or not self.names.ns.is_module(top):
                self._reject_import(alias.name, stmt, binds=top)
                continue
            symbol = self.facts.symbols.get(top)
            if symbol is not None and symbol.kind == "import" and symbol.member == Member(names.MODULE, top):
                continue  # `import triton` then `import triton.language`: the same binding
            self.names.bind(top, Symbol("import", stmt, Member(names.MODULE, top)), stmt)

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
        if not self.names.module_allowed(module) or not self.names.ns.is_module(module):
            self.add("forbidden-import", f"import from `{module}` is outside the allowlist "
                                         f"({allowlist_text(self.policy)})", stmt)
            return
        for alias in stmt.names:
            if alias.name == "*":
                self.add("forbidden-import", f"`from {module} import *` hides what the kernel uses", stmt)
                continue
            member = self.names.ns.member(module, alias.name)
            if member is None or (member.target == names.TORCH and not self.policy.torch_import):
                if alias.name in FORBIDDEN_NAMES:
                    self.add("forbidden-import", f"`from {module} import {alias.name}` imports torch", stmt)
                else:
                    self.add("forbidden-import", f"`from {module} import {alias.name}`: `{module}.{alias.name}` is not "
                                                 "in the allowed set", stmt)
                continue
            self.names.bind(alias.asname or alias.name, Symbol("import", stmt, member), stmt)

    def _top_level_expression(self, stmt: ast.Expr) -> None:
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # a docstring
        if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)) \
                and self.names.chain(value.func) is not None:
            ref = self.names.resolve_chain(value.func, frozenset())
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
        if isinstance(stmt, ast.AnnAssign) and not self.names.is_constexpr_annotation(stmt.annotation):
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
        if not self.names.is_constant(value):
            self.add("top-level", f"module-level assignment `{short(stmt)}` is not a constant (numbers, strings, "
                                  "tuples of them, tl.constexpr(...), math constants)", stmt)
            return
        self.names.bind(targets[0].id, Symbol("constant", stmt), stmt)

    # --- functions and decorators -------------------------------------------------------------

    def _function(self, func: ast.FunctionDef) -> None:
        if not func.decorator_list:
            if self.policy.launcher and func.name == self.kernel_name:
                self.names.bind(func.name, Symbol("launcher", func), func)
                self.facts.launcher = func
                self._signature(func, launcher=True)
                return
            where = " (in a launcher module only the function named after the kernel)" if self.policy.launcher else ""
            self.add("top-level", f"undecorated module-level function `{func.name}` runs as plain Python; a kernel "
                                  f"module defines @triton.jit functions{where}", func)
            return
        *outer, innermost = func.decorator_list
        if not self._is_jit_decorator(innermost):
            self.add("contract", f"function {func.name} must be decorated with @triton.jit directly above its def "
                                 f"(found `@{short(innermost)}`)", innermost)
            return
        kinds = [self._outer_decorator(deco, func) for deco in outer]
        if any(kind is None for kind in kinds):
            return
        for kind in set(kinds):
            if kinds.count(kind) > 1:
                self.add("decorator", f"function {func.name} has more than one `{kind}` decorator", func)
        if "inductor" in kinds and len(kinds) > 1:
            self.add("decorator", f"function {func.name}: the @triton_heuristics decorator is the only one above "
                                  "@triton.jit", func)
        self.names.bind(func.name, Symbol("jit", func, wrapped=bool(kinds)), func)
        self.facts.jit_functions.append(func)
        self._signature(func, launcher=False)

    def _signature(self, func: ast.FunctionDef, launcher: bool) -> None:
        args = func.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            self.add("contract", f"function {func.name} takes *args/**kwargs/keyword-only parameters", func)
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None and (launcher or not self.names.is_constant(default)):
                what = "default arguments" if launcher else "a mutable or computed default argument"
                self.add("global-state", f"function {func.name} has {what} (`{short(default)}`)", default)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if is_dunder(arg.arg):
                self.add("forbidden-call", f"parameter `{arg.arg}` of {func.name} (dunder names)", arg)
            if arg.annotation is not None and (launcher or not self.names.is_constexpr_annotation(arg.annotation)):
                self.add("top-level", f"annotation `{short(arg.annotation)}` of {func.name}({arg.arg}) runs at "
                                      "import; parameters are annotated with tl.constexpr or not at all", arg)
        if func.returns is not None:
            self.add("top-level", f"return annotation `{short(func.returns)}` of {func.name} runs at import", func)

    def _decorator_ref(self, deco: ast.AST) -> Ref | None:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if not isinstance(target, (ast.Name, ast.Attribute)) or self.names.chain(target) is None:
            self.add("decorator", f"decorator `@{short(deco)}` is not a name; only @triton.jit and the listed launch "
                                  "decorators are allowed", deco)
            return None
        return self.names.resolve_chain(target, frozenset())

    def _is_jit_decorator(self, deco: ast.AST) -> bool:
        ref = self._decorator_ref(deco) if isinstance(deco, (ast.Name, ast.Attribute, ast.Call)) else None
        if ref is None or ref.member is None or ref.member.target != "triton.jit":
            return False
        if isinstance(deco, ast.Call):
            if deco.args:
                self.add("decorator", "@triton.jit(...) takes keyword arguments only", deco)
            for kw in deco.keywords:
                if kw.arg not in JIT_KEYWORDS:
                    self.add("decorator", f"@triton.jit({kw.arg}=...) is not allowed (use {', '.join(sorted(JIT_KEYWORDS))})",
                             deco)
                else:
                    self.decorators.check_data(kw.value, "@triton.jit")
        return True

    def _outer_decorator(self, deco: ast.AST, func: ast.FunctionDef) -> str | None:
        """Checks a decorator above @triton.jit; its kind ("inductor", "autotune", "heuristics") or None."""
        ref = self._decorator_ref(deco)
        if ref is None:
            return None
        target = ref.member.target if ref.member is not None else None
        if ref.member is not None and ref.member.kind == names.DECORATOR and target is not None \
                and target.startswith(names.HEURISTICS + "."):
            if not self.policy.inductor_decorator:
                self.add("decorator", f"`@{short(deco)}` is Inductor's launcher; a {self.dialect.value} module launches "
                                      "its kernels itself (kernel[grid](...))", deco)
                return None
            if not isinstance(deco, ast.Call):
                self.add("decorator", f"`@{short(deco)}` must be called with its launch metadata", deco)
                return None
            if self.kernel_name is not None and func.name != self.kernel_name:
                self.add("decorator", f"only the kernel {self.kernel_name} carries a @triton_heuristics decorator "
                                      f"({func.name} is a helper: plain @triton.jit)", deco)
            what = f"@{short(deco.func)}"
            for arg in deco.args:
                self.decorators.check_data(arg, what)
            for kw in deco.keywords:
                if kw.arg is None:
                    self.add("decorator", f"`**` in {what} hides what it passes", deco)
                else:
                    self.decorators.check_data(kw.value, what)
                    if kw.arg == "inductor_meta":
                        self.decorators.inductor_meta_code(kw.value, func)
                    if kw.arg in ("config", "configs"):
                        self.decorators.config_values(kw.value, what)
            return "inductor"
        if target in ("triton.autotune", "triton.heuristics"):
            if not self.policy.triton_autotune:
                self.add("decorator", f"`@{short(deco.func if isinstance(deco, ast.Call) else deco)}` is for launcher "
                                      "modules; a plain candidate is launched by its @triton_heuristics decorator",
                         deco)
                return None
            if not isinstance(deco, ast.Call):
                self.add("decorator", f"`@{short(deco)}` must be called with its arguments", deco)
                return None
            if target == "triton.autotune":
                self.decorators.autotune(deco)
                return "autotune"
            self.decorators.heuristics(deco)
            return "heuristics"
        self.add("decorator", f"function {func.name} has decorator `@{short(deco)}`"
                              + (f" (`{target}`)" if target else "") + "; only @triton.jit and "
                              + ("the triton_heuristics launch decorators" if self.policy.inductor_decorator
                                 else "@triton.autotune/@triton.heuristics") + " are allowed", deco)
        return None
