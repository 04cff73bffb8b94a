"""The compile plans of a launcher's launches: what gate 1 compiles for sm_90 (docs/launchers.md).

A launch whose runtime arguments all have a known type and whose ``tl.constexpr`` parameters all
have a known value (passed, from an ``@triton.autotune`` config, a ``@triton.heuristics`` entry or a
default) becomes a plan: signature, constants, ``num_warps``/``num_stages``, one per autotune
config. A launch that depends on runtime values (a block size computed from ``r0_numel``) gets a
note saying why it is not compiled (gate 2 runs it). Pure Python (:mod:`ast`), no torch.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from .static_launcher_values import COMPARE, FOLD, UNARY, UNKNOWN_CONST, Value, scalar
from .static_resolution import NameResolver

MAX_PLANS = 16
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


@dataclass
class LauncherFacts:
    """What checking a launcher found besides its findings."""

    plans: list[dict[str, Any]] = field(default_factory=list)  # compile plans (JSON-able)
    notes: list[str] = field(default_factory=list)  # launches not compiled, and why
    launched: set[str] = field(default_factory=set)  # kernels launched by the launcher


class CompilePlans:
    """The plans and notes of one launcher's launches (into its :class:`LauncherFacts`)."""

    def __init__(self, resolver: NameResolver, facts: LauncherFacts):
        self.resolver = resolver
        self.facts = facts

    def constexprs(self, kernel: ast.FunctionDef) -> set[str]:
        """The kernel's ``tl.constexpr`` parameters."""
        return {a.arg for a in kernel.args.args
                if a.annotation is not None and self.resolver.is_constexpr_annotation(a.annotation)}

    def _configs(self, kernel: ast.FunctionDef) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(meta-parameters, launch options) of each @triton.autotune config; one empty pair without."""
        for deco in kernel.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            func = deco.func
            ref = self.resolver.resolve_chain(func, frozenset()) \
                if isinstance(func, (ast.Name, ast.Attribute)) and self.resolver.chain(func) else None
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
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, (ast.Name, ast.Attribute))
                    and self.resolver.chain(deco.func)):
                continue
            ref = self.resolver.resolve_chain(deco.func, frozenset())
            if ref is None or ref.member is None or ref.member.target != "triton.heuristics" or not deco.args:
                continue
            table = deco.args[0]
            if not isinstance(table, ast.Dict):
                continue
            for key, value in zip(table.keys, table.values, strict=True):
                # a constexpr is looked up by its parameter's name: other keys name nothing
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Lambda) \
                        and value.args.args:
                    result = _evaluate_arithmetic(value.body, value.args.args[0].arg, known)
                    out[key.value] = result
        return out

    def add(self, kernel: ast.FunctionDef, node: ast.Call, bound: dict[str, Value], options: dict[str, Value]) -> None:
        """The plans of one launch ``node`` of ``kernel`` (``bound``: its arguments by parameter name,
        ``options``: its ``num_warps=``/``num_stages=``...), or a note that says why it has none."""
        params = [a.arg for a in kernel.args.args]
        constexprs = self.constexprs(kernel)
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
                    value = bound[param].const if param in bound and bound[param].known else UNKNOWN_CONST
                    if value is UNKNOWN_CONST and param in meta:
                        value = meta[param]
                    if value is UNKNOWN_CONST and heuristics.get(param, UNKNOWN_CONST) is not UNKNOWN_CONST:
                        value = heuristics[param]
                    if value is UNKNOWN_CONST and param in defaults:
                        try:
                            value = ast.literal_eval(defaults[param])
                        except (ValueError, SyntaxError, TypeError):
                            value = UNKNOWN_CONST
                    if value is UNKNOWN_CONST or not _json_scalar(value):
                        missing.append(f"the constexpr {param} depends on runtime values")
                    else:
                        constants[param] = value
                    continue
                value_of = bound.get(param)
                if value_of is None and param in defaults:
                    try:
                        value_of = scalar(ast.literal_eval(defaults[param]))
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
    """A heuristic's value from known arguments (``UNKNOWN_CONST`` when it needs a runtime value)."""
    try:
        return _arith(node, param, known)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return UNKNOWN_CONST


def _arith(node: ast.AST, param: str, known: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return known[node.slice.value]
    if isinstance(node, ast.BinOp) and type(node.op) in FOLD:
        left, right = _arith(node.left, param, known), _arith(node.right, param, known)
        if isinstance(node.op, (ast.Pow, ast.LShift)) and (abs(right) > 64 or abs(left) > 2**32):
            raise ValueError("too large")
        return FOLD[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _arith(node.operand, param, known)
        return UNARY[type(node.op)](operand)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE:
        return COMPARE[type(node.ops[0])](_arith(node.left, param, known), _arith(node.comparators[0], param, known))
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
