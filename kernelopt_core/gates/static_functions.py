"""Gate 1's rules for a module-level function's shape: its decorators and its signature.

A kernel module's functions are ``@triton.jit`` functions, ``@triton.jit`` directly above the def;
above it the kernel carries the one decorator its dialect launches with (Inductor's
``@triton_heuristics.<kind>(...)``, or ``@triton.autotune``/``@triton.heuristics`` in launcher and
user modules), whose arguments :mod:`.static_decorators` checks. A launcher module has one
undecorated function more, named after the kernel (its body is :mod:`.static_launcher`'s).
Signatures take plain parameters, constant defaults and ``tl.constexpr`` annotations only.
Pure :mod:`ast`; used by :class:`.static_rules.ModuleChecker`.
"""

from __future__ import annotations

import ast

from . import static_names as names
from .static_decorators import DecoratorRules
from .static_resolution import NameResolver
from .static_tables import JIT_KEYWORDS, POLICIES, Dialect, Ref, Symbol, is_dunder, short


class FunctionShapeRules:
    """The module-level functions of one module: which decorators, in what order, and the signature."""

    def __init__(self, resolver: NameResolver, dialect: Dialect, kernel_name: str | None):
        self.resolver = resolver
        self.dialect = dialect
        self.policy = POLICIES[dialect]
        self.kernel_name = kernel_name
        self.decorators = DecoratorRules(resolver)

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        self.resolver.add(rule, message, node)

    def check(self, func: ast.FunctionDef) -> None:
        if not func.decorator_list:
            if self.policy.launcher and func.name == self.kernel_name:
                self.resolver.bind(func.name, Symbol("launcher", func), func)
                self.resolver.facts.launcher = func
                self.signature(func, launcher=True)
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
        self.resolver.bind(func.name, Symbol("jit", func, wrapped=bool(kinds)), func)
        self.resolver.facts.jit_functions.append(func)
        self.signature(func, launcher=False)

    def signature(self, func: ast.FunctionDef, launcher: bool) -> None:
        args = func.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            self.add("contract", f"function {func.name} takes *args/**kwargs/keyword-only parameters", func)
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None and (launcher or not self.resolver.is_constant(default)):
                what = "default arguments" if launcher else "a mutable or computed default argument"
                self.add("global-state", f"function {func.name} has {what} (`{short(default)}`)", default)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if is_dunder(arg.arg):
                self.add("forbidden-call", f"parameter `{arg.arg}` of {func.name} (dunder names)", arg)
            if arg.annotation is not None and (launcher or not self.resolver.is_constexpr_annotation(arg.annotation)):
                self.add("top-level", f"annotation `{short(arg.annotation)}` of {func.name}({arg.arg}) runs at "
                                      "import; parameters are annotated with tl.constexpr or not at all", arg)
        if func.returns is not None:
            self.add("top-level", f"return annotation `{short(func.returns)}` of {func.name} runs at import", func)

    def _decorator_ref(self, deco: ast.AST) -> Ref | None:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if not isinstance(target, (ast.Name, ast.Attribute)) or self.resolver.chain(target) is None:
            self.add("decorator", f"decorator `@{short(deco)}` is not a name; only @triton.jit and the listed launch "
                                  "decorators are allowed", deco)
            return None
        return self.resolver.resolve_chain(target, frozenset())

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
