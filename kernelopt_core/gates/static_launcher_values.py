"""What a launcher's expressions are, as far as its source tells, and how known values fold.

The launcher rules (:mod:`.static_launcher`) follow a launcher abstractly: each expression is a
:class:`Value` (a tensor of a Triton type, an int, a float, a dtype, a tuple, ...) whose constant is
known where the source fixes it (``BLOCK = 128``, ``triton.cdiv(xnumel, BLOCK)`` of known sizes).
The arithmetic here is only on values the source fixes; nothing of the candidate runs. Pure Python.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

UNKNOWN_CONST: Any = object()  # a value the source does not fix
FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
        ast.BitXor: operator.xor, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}


@dataclass(frozen=True)
class Value:
    """What a launcher expression is, as far as the source tells."""

    kind: str  # tensor, int, float, bool, str, none, tuple, device, dtype, param (type unknown), unknown
    type: str | None = None  # Triton type: '*fp32' for a tensor, 'i32'/'fp32'/'i1' for scalars; a dtype's too
    const: Any = UNKNOWN_CONST
    items: tuple[Value, ...] = ()

    @property
    def known(self) -> bool:
        return self.const is not UNKNOWN_CONST

    @property
    def tensor_like(self) -> bool:
        return self.kind in ("tensor", "param")

    @property
    def number(self) -> bool:
        return self.kind in ("int", "float", "bool", "param", "unknown")


UNKNOWN = Value("unknown")


def scalar(value: Any) -> Value:
    """A Python constant as a known value."""
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


def merge(a: Value, b: Value) -> Value:
    """One value for two that may reach the same place (the constant only when both agree)."""
    if a == b:
        return a
    if a.kind == b.kind and a.type == b.type:
        return Value(a.kind, a.type)
    if a.kind in ("int", "float", "bool") and b.kind in ("int", "float", "bool"):
        kind = "float" if "float" in (a.kind, b.kind) else "int"
        return Value(kind, "fp32" if kind == "float" else "i32")
    return UNKNOWN


def join(a: dict[str, Value], b: dict[str, Value]) -> dict[str, Value]:
    """The names after two paths (an if and its else, a loop body run or not)."""
    out = {}
    for key in a.keys() | b.keys():
        if key in a and key in b:
            out[key] = merge(a[key], b[key])
        else:
            out[key] = Value((a.get(key) or b[key]).kind, (a.get(key) or b[key]).type)
    return out


# --- folding: operations on values, computed where both sides are known ------------------------


def fold_unary(op: ast.unaryop, operand: Value) -> Value:
    """``not x``, ``-x``, ``+x``, ``~x`` of a number."""
    if isinstance(op, ast.Not):
        return Value("bool", "i1", (not operand.const) if operand.known else UNKNOWN_CONST)
    if operand.known and isinstance(op, (ast.USub, ast.UAdd, ast.Invert)) \
            and not (isinstance(op, ast.Invert) and isinstance(operand.const, float)):
        return scalar(UNARY[type(op)](operand.const))
    return Value(operand.kind, operand.type)


def fold_binary(op: ast.operator, left: Value, right: Value) -> Value:
    """``left op right`` of two numbers."""
    if left.known and right.known and type(op) in FOLD:
        if isinstance(op, (ast.Pow, ast.LShift)) and (not isinstance(right.const, int) or abs(right.const) > 64
                                                      or abs(left.const) > 2**32):
            return Value("int", "i32")  # no folding of huge powers in the checker
        try:
            return scalar(FOLD[type(op)](left.const, right.const))
        except (ZeroDivisionError, OverflowError, TypeError, ValueError):
            return UNKNOWN
    if isinstance(op, ast.Div) or "float" in (left.kind, right.kind):
        return Value("float", "fp32")
    return Value("int", "i32")


def fold_compare(ops: list[ast.cmpop], values: list[Value]) -> Value:
    """A comparison chain ``a < b <= c`` (``values``: its operands in order)."""
    if all(v.known for v in values) and all(type(op) in COMPARE for op in ops):
        result = all(COMPARE[type(op)](a.const, b.const) for op, a, b in zip(ops, values, values[1:], strict=False))
        return Value("bool", "i1", result)
    return Value("bool", "i1")


def fold_min_max(function: str, values: list[Value]) -> Value:
    """``min(...)``/``max(...)`` of numbers."""
    if all(v.known for v in values):
        try:
            return scalar((min if function == "min" else max)(v.const for v in values))
        except (TypeError, ValueError):
            return UNKNOWN
    return Value("float", "fp32") if any(v.kind == "float" for v in values) else Value("int", "i32")


def fold_host_int(target: str, values: list[Value]) -> Value:
    """``triton.cdiv(a, b)`` and ``triton.next_power_of_2(n)`` (``target``: the qualified name)."""
    if all(v.known and isinstance(v.const, int) for v in values):
        if target == "triton.cdiv" and values[1].const != 0:
            return scalar(-(-values[0].const // values[1].const))
        if target == "triton.next_power_of_2" and 0 <= values[0].const < 2**62:
            return scalar(1 << max(values[0].const - 1, 0).bit_length())
    return Value("int", "i32")


# --- the launcher's parameters -------------------------------------------------------------------


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
