"""Gate 1's rules for decorator arguments: they run at import, so they are data.

Literals and containers of literals, ``__file__``, ``DeviceProperties(...)`` with literal keywords,
``ReductionHint.X``/``TileHint.X``/``AutotuneHint.X``, ``set()``, ``triton.Config(...)`` with
literal arguments (no hooks), and for ``@triton.heuristics`` lambdas of arithmetic on
``args['NAME']``. Inductor turns some metadata strings into code it executes (``precomputed_grids``
expressions, ``fixed_grid`` names, launch-config values formatted into grid code): those must be
integer arithmetic, identifiers and numbers. Pure :mod:`ast`; used by :class:`.static_functions.FunctionShapeRules`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import static_names as names
from .static_tables import (
    AUTOTUNE_KEYWORDS,
    CONFIG_KEYWORDS,
    GRID_TYPES,
    IDENTIFIER,
    ModuleFacts,
    Ref,
    is_dunder,
    short,
)

if TYPE_CHECKING:
    from .static_resolution import NameResolver


class DecoratorRules:
    """The decorator-argument checks of one module (findings go to its name resolver)."""

    def __init__(self, resolver: NameResolver):
        self.resolver = resolver

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        self.resolver.add(rule, message, node)

    def chain(self, node: ast.AST) -> tuple[ast.Name, list[ast.Attribute]] | None:
        return self.resolver.chain(node)

    def resolve_chain(self, node: ast.Name | ast.Attribute, local: frozenset[str] | set[str]) -> Ref | None:
        return self.resolver.resolve_chain(node, local)

    @property
    def facts(self) -> ModuleFacts:
        return self.resolver.facts

    def check_data(self, node: ast.AST, where: str) -> None:
        """Decorator arguments are data: nothing in them may run other code."""
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for element in node.elts:
                self.check_data(element, where)
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    self.add("decorator", f"`**{short(value)}` in the arguments of {where} hides what it passes", value)
                    continue
                self.check_data(key, where)
                self.check_data(value, where)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)) \
                and isinstance(node.operand, ast.Constant):
            return
        if isinstance(node, ast.Name) and node.id == "__file__":
            return
        if isinstance(node, ast.Attribute) and self.chain(node) is not None:
            ref = self.resolve_chain(node, frozenset())
            if ref is not None and ref.member is not None and ref.member.kind == names.ENUM:
                return
            if ref is None:
                return  # already named
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) \
                and self.chain(node.func) is not None:
            if isinstance(node.func, ast.Name) and node.func.id == "set" and "set" not in self.facts.symbols \
                    and not node.args and not node.keywords:
                return
            ref = self.resolve_chain(node.func, frozenset())
            if ref is None:
                return
            if ref.member is not None and ref.member.kind == names.DEVICE_PROPERTIES and not node.args:
                for kw in node.keywords:
                    if kw.arg is None or not self._is_literal_scalar(kw.value):
                        self.add("decorator", f"DeviceProperties(...) in {where} takes literal keyword arguments only "
                                              f"(found `{short(kw.value)}`)", kw.value)
                return
        self.add("decorator", f"`{short(node)}` in the arguments of {where} runs code at import; decorator arguments "
                              "are literals, containers of literals, __file__, DeviceProperties(...), "
                              "ReductionHint/TileHint/AutotuneHint members and set()", node)

    @staticmethod
    def _is_literal_scalar(node: ast.AST) -> bool:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        return isinstance(node, ast.Constant) and not isinstance(node.value, bytes)

    def config_values(self, node: ast.AST, where: str) -> None:
        """Launch-config values are numbers: Inductor formats them into the grid code it executes."""
        configs = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        for config in configs:
            if not isinstance(config, ast.Dict):
                continue
            for key, value in zip(config.keys, config.values, strict=True):
                number = value.operand if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)) \
                    else value
                if isinstance(number, ast.Constant) and (isinstance(number.value, (int, float)) or number.value is None):
                    continue
                self.add("decorator", f"launch config value `{short(value)}` for {short(key) if key else '**'} in "
                                      f"{where} is not a number (config values end up in generated grid code)", value)

    def inductor_meta_code(self, node: ast.AST, func: ast.FunctionDef) -> None:
        """The strings in inductor_meta that Inductor turns into code it executes must be arithmetic only."""
        if not isinstance(node, ast.Dict):
            return
        meta = {ast.literal_eval(k): v for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        grid_type = meta.get("grid_type")
        if isinstance(grid_type, ast.Constant) and grid_type.value not in GRID_TYPES:
            self.add("contract", f"unknown grid_type {grid_type.value!r} (use one of {', '.join(sorted(GRID_TYPES))})",
                     grid_type)
        kernel_name = meta.get("kernel_name")
        if isinstance(kernel_name, ast.Constant) and kernel_name.value != func.name:
            self.add("decorator", f"inductor_meta['kernel_name'] {kernel_name.value!r} is not the function's name",
                     kernel_name)
        for key in ("fixed_grid", "extra_launcher_args"):
            entries = meta.get(key)
            for element in entries.elts if isinstance(entries, (ast.List, ast.Tuple)) else []:
                if not (isinstance(element, ast.Constant) and isinstance(element.value, str)
                        and IDENTIFIER.match(element.value) and not is_dunder(element.value)):
                    self.add("decorator", f"inductor_meta['{key}'] entry `{short(element)}` must be an identifier "
                                          "(Inductor writes it into launcher code)", element)
        grids = meta.get("precomputed_grids")
        for entry in grids.elts if isinstance(grids, (ast.List, ast.Tuple)) else []:
            if not isinstance(entry, ast.Dict):
                continue
            for entry_key, value in zip(entry.keys, entry.values, strict=True):
                if isinstance(entry_key, ast.Constant) and entry_key.value in ("python", "cpp"):
                    for axis in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
                        self._grid_axis(axis)
                elif isinstance(entry_key, ast.Constant) and entry_key.value == "config":
                    self.config_values(value, "precomputed_grids")

    def _grid_axis(self, axis: ast.AST) -> None:
        if isinstance(axis, ast.Constant) and isinstance(axis.value, int):
            return
        if isinstance(axis, ast.Constant) and isinstance(axis.value, str):
            try:
                expr = ast.parse(axis.value, mode="eval").body
            except SyntaxError:
                self.add("decorator", f"precomputed grid `{axis.value[:60]}` is not an expression", axis)
                return
            bad = next((n for n in ast.walk(expr) if not _grid_node_ok(n)), None)
            if bad is None:
                return
            self.add("decorator", f"precomputed grid `{axis.value[:60]}` contains `{short(bad)}`; Inductor executes "
                                  "these strings, so they are integer arithmetic on names only", axis)
            return
        self.add("decorator", f"precomputed grid axis `{short(axis)}` must be an int or an arithmetic string", axis)

    def autotune(self, deco: ast.Call) -> None:
        if deco.args:
            self.add("decorator", "@triton.autotune takes keyword arguments (configs=[...], key=[...])", deco)
        for kw in deco.keywords:
            if kw.arg not in AUTOTUNE_KEYWORDS:
                self.add("decorator", f"@triton.autotune({kw.arg}=...) is not allowed (hooks and custom benchmarks run "
                                      f"code; use {', '.join(sorted(AUTOTUNE_KEYWORDS))})", kw.value)
            elif kw.arg == "configs":
                elements = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else None
                if not elements:
                    self.add("decorator", "@triton.autotune(configs=...) must be a list of triton.Config(...)", kw.value)
                for element in elements or []:
                    self._triton_config(element)
            else:
                self.check_data(kw.value, "@triton.autotune")

    def _triton_config(self, node: ast.AST) -> None:
        ref = None
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) \
                and self.chain(node.func) is not None:
            ref = self.resolve_chain(node.func, frozenset())
        if ref is None or ref.member is None or ref.member.kind != names.CONFIG:
            if ref is not None or not isinstance(node, ast.Call):
                self.add("decorator", f"`{short(node)}` in configs=[...] is not triton.Config(...)", node)
            return
        assert isinstance(node, ast.Call)
        if len(node.args) > 1 or (node.args and not isinstance(node.args[0], ast.Dict)):
            self.add("decorator", "triton.Config takes one dict literal of meta-parameters", node)
        for arg in node.args:
            self.check_data(arg, "triton.Config")
            self.config_values(arg, "triton.Config")
        for kw in node.keywords:
            if kw.arg == "kwargs":
                self.check_data(kw.value, "triton.Config")
                self.config_values(kw.value, "triton.Config")
            elif kw.arg not in CONFIG_KEYWORDS or not self._is_literal_scalar(kw.value):
                self.add("decorator", f"triton.Config({kw.arg}={short(kw.value)}) is not allowed (literal "
                                      f"{', '.join(sorted(CONFIG_KEYWORDS))} only; hooks run code)", kw.value)

    def heuristics(self, deco: ast.Call) -> None:
        values = deco.args[0] if len(deco.args) == 1 and not deco.keywords else next(
            (kw.value for kw in deco.keywords if kw.arg == "values" and not deco.args and len(deco.keywords) == 1), None)
        if not isinstance(values, ast.Dict):
            self.add("decorator", "@triton.heuristics takes one dict literal {'NAME': lambda args: ...}", deco)
            return
        for key, value in zip(values.keys, values.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                self.add("decorator", "@triton.heuristics keys are meta-parameter names (strings)", key or value)
                continue
            self.check_arithmetic_lambda(value, "@triton.heuristics")

    def check_arithmetic_lambda(self, node: ast.AST, where: str) -> None:
        """``lambda args: <arithmetic on args['NAME'], constants, min/max, triton.cdiv/next_power_of_2>``."""
        if not isinstance(node, ast.Lambda) or len(node.args.args) != 1 or node.args.vararg or node.args.kwarg \
                or node.args.kwonlyargs or node.args.defaults or node.args.posonlyargs:
            self.add("decorator", f"`{short(node)}` in {where} must be `lambda args: <arithmetic on args['NAME']>`",
                     node)
            return
        param = node.args.args[0].arg
        for sub in ast.walk(node.body):
            if not self._arithmetic_node_ok(sub, param):
                self.add("decorator", f"`{short(sub)}` in {where}: a heuristic is arithmetic on args['NAME'], "
                                      "constants, min/max and triton.cdiv/next_power_of_2", sub)
                return

    def _arithmetic_node_ok(self, node: ast.AST, param: str) -> bool:
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.operator, ast.unaryop,
                             ast.boolop, ast.cmpop, ast.expr_context, ast.Tuple)):
            return True
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, bool, str)) or node.value is None
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Name) and node.value.id == param and isinstance(node.slice, ast.Constant)
        if isinstance(node, ast.Name):
            symbol = self.facts.symbols.get(node.id)
            return node.id == param or (symbol is not None and symbol.kind in ("constant", "import")) or \
                (node.id in ("min", "max") and node.id not in self.facts.symbols)
        if isinstance(node, ast.Attribute):
            if self.chain(node) is None:
                return False
            ref = self.resolve_chain(node, frozenset())
            return ref is not None and ref.member is not None and ref.member.kind in (names.HOST_INT, names.MODULE)
        if isinstance(node, ast.Call):
            if node.keywords or not isinstance(node.func, (ast.Name, ast.Attribute)) or self.chain(node.func) is None:
                return False
            if isinstance(node.func, ast.Name):
                return node.func.id in ("min", "max") and node.func.id not in self.facts.symbols
            ref = self.resolve_chain(node.func, frozenset())
            return ref is not None and ref.member is not None and ref.member.kind == names.HOST_INT
        return False


def _grid_node_ok(node: ast.AST) -> bool:
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub,
                         ast.UAdd, ast.Load)):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return not is_dunder(node.id)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in ("min", "max") and not node.keywords
    return False
