"""Interval bounds of a jit function's values, to tell a min/max that can only ever pick one side.

``maximum(tanh(x) + 3.0, 0.0)`` (Inductor's hardswish) is a min/max on data whose first argument is at
least 2 on every input: it never decides anything, and no input can show its other outcome. Gate 2's
evidence rule would wait for that outcome forever once a candidate rewrites the tanh (and so the
decision's text). :func:`always_ordered` proves such an order with interval arithmetic over the
function's own expressions. A load, a reduction, an unknown call, integer arithmetic (it wraps), a
narrower float than float32 and a folded in-kernel expression are unbounded, so the proof only ever
holds where float arithmetic alone decides it. Every step widens its bounds by bfloat16's roundoff and
past 60,000 to infinity (float16 overflows there); the order must hold by a sixteenth. NaN is not a
value here: a NaN-propagating min/max gives NaN on either side, which is why only those count.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Protocol

from .static_dataflow import qualified

Range = tuple[float, float]
UNBOUNDED: Range = (-math.inf, math.inf)
# Beyond this a step may overflow to infinity (float16's largest value is 65,504).
_BIG = 6.0e4
# Relative widening a step: bfloat16's unit roundoff (a candidate may compute in bfloat16 or with fast math).
_ROUNDING = 2.0 ** -8
_MARGIN = 1.0 / 16.0  # a proven order must hold by this much, relative, beyond the widened bounds
_EXACT_FLOATS = ("float32", "float64", "fp32", "fp64")
DEPTH = 24  # expression steps followed from a min/max's argument


class FunctionFacts(Protocol):
    """What :mod:`.decisions` knows of one jit function (its ``_Function``)."""

    bindings: dict[str, list[tuple[ast.AST | None, int]]]
    params: list[str]
    aliases: dict[str, str]

    def fold(self, node: ast.AST) -> float | None: ...

    def function(self, call: ast.Call) -> str | None: ...


def _widen(lo: float, hi: float) -> Range:
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        return UNBOUNDED
    lo = lo - abs(lo) * _ROUNDING - 1e-30
    hi = hi + abs(hi) * _ROUNDING + 1e-30
    lo = -math.inf if lo < -_BIG else min(lo, _BIG)
    hi = math.inf if hi > _BIG else max(hi, -_BIG)
    return lo, hi


def _monotone(f: Callable[[float], float], span: Range) -> Range:
    try:
        return _widen(f(span[0]), f(span[1]))
    except (OverflowError, ValueError):
        return UNBOUNDED


def _exp(v: float) -> float:
    return math.inf if v > 700 else math.exp(v)


def _products(a: Range, b: Range, op: Callable[[float, float], float]) -> Range:
    values = [op(x, y) for x in a for y in b]
    if any(math.isnan(v) for v in values):
        return UNBOUNDED
    return _widen(min(values), max(values))


def _binop(op: ast.operator, a: Range, b: Range) -> Range:
    if isinstance(op, ast.Add):
        return _widen(a[0] + b[0], a[1] + b[1])
    if isinstance(op, ast.Sub):
        return _widen(a[0] - b[1], a[1] - b[0])
    if isinstance(op, ast.Mult):
        return _products(a, b, lambda x, y: x * y)
    if isinstance(op, ast.Div) and (b[0] > 0 or b[1] < 0):
        return _products(a, b, lambda x, y: x / y if math.isfinite(y) else (0.0 if math.isfinite(x) else math.nan))
    return UNBOUNDED  # //, %, shifts: integer arithmetic, which wraps


_MONOTONE: dict[str, Callable[[float], float]] = {
    "exp": _exp, "exp2": lambda v: _exp(v * math.log(2.0)), "tanh": math.tanh,
    "sigmoid": lambda v: 1.0 / (1.0 + _exp(-v)),
}
_TRANSPARENT = frozenset({"broadcast_to", "reshape", "view", "expand_dims", "max2", "min2", "max", "min"})


def _exact_float(dtype: ast.AST | None) -> bool:
    """A float32 or float64 type: an integer type may wrap, a narrower float round or overflow early."""
    return dtype is not None and ast.unparse(dtype).endswith(_EXACT_FLOATS)


_HANDLED = frozenset({*_MONOTONE, "maximum", "minimum", "fmax", "fmin", "where", "abs", "fabs", "sqrt",
                      *_TRANSPARENT})


def propagates_nan(node: ast.Call, fn: FunctionFacts) -> bool:
    """Inductor's ``triton_helpers.maximum``/``minimum``, or ``tl.maximum(..., propagate_nan=ALL)``."""
    qualified_name = qualified(node.func, fn.aliases) or ""
    return qualified_name.startswith("torch._inductor.runtime.triton_helpers.") or any(
        k.arg == "propagate_nan" and ast.unparse(k.value).endswith("ALL") for k in node.keywords)


class _Bounds:
    """One function's bounds, each (node, depth) worked out once: a kernel's names form a graph whose shared
    sub-expressions a plain recursion would revisit once per path (a chain of ``tl.where(u, u, u)`` 30 deep
    took 0.8 s a min/max). Only the arguments a call's rule reads are bounded."""

    def __init__(self, fn: FunctionFacts) -> None:
        self.fn = fn
        self.memo: dict[tuple[int, int], Range] = {}

    def of(self, node: ast.AST, depth: int) -> Range:
        key = (id(node), depth)
        if key not in self.memo:
            self.memo[key] = self._of(node, depth)
        return self.memo[key]

    def _folded(self, node: ast.AST) -> Range:
        folded = self.fn.fold(node)
        return UNBOUNDED if folded is None or math.isnan(folded) else _widen(folded, folded)

    def _of(self, node: ast.AST, depth: int) -> Range:
        fn = self.fn
        if depth <= 0:
            return UNBOUNDED
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
                return _widen(float(value), float(value))
            return UNBOUNDED
        if isinstance(node, ast.Name):
            bound = fn.bindings.get(node.id)
            if node.id in fn.params:
                return UNBOUNDED
            if not bound:  # a module-level constant, computed by Python (no wrapping)
                return self._folded(node)
            if len(bound) > 1 or bound[0][0] is None:
                return UNBOUNDED
            return self.of(bound[0][0], depth - 1)
        if isinstance(node, ast.Attribute):  # math.pi
            return self._folded(node)
        if isinstance(node, ast.Subscript):
            return self.of(node.value, depth - 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            lo, hi = self.of(node.operand, depth - 1)
            return (-hi, -lo) if isinstance(node.op, ast.USub) else (lo, hi)
        if isinstance(node, ast.BinOp):
            return _binop(node.op, self.of(node.left, depth - 1), self.of(node.right, depth - 1))
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return UNBOUNDED

    def _full(self, node: ast.Call, depth: int) -> Range:
        value = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "value"),
                                                             None)
        dtype = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "dtype"),
                                                             None)
        return self.of(value, depth - 1) if value is not None and _exact_float(dtype) else UNBOUNDED

    def _call(self, node: ast.Call, depth: int) -> Range:
        fn = self.fn
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and fn.function(node) is None:
            exact = bool(node.args) and _exact_float(node.args[0]) and not node.keywords
            return self.of(node.func.value, depth - 1) if exact else UNBOUNDED
        if isinstance(node.func, ast.Name) and node.func.id == "float" and len(node.args) == 1:
            return self._folded(node)  # Python's own float(): float("inf"), float(2)
        name = fn.function(node)
        if name in ("full", "full_like"):
            return self._full(node, depth)
        if name not in _HANDLED or not node.args:
            return UNBOUNDED
        count = len(node.args)

        def arg(i: int) -> Range:
            return self.of(node.args[i], depth - 1)

        if name in _MONOTONE and count == 1:
            return _monotone(_MONOTONE[name], arg(0))
        if name in ("maximum", "minimum", "fmax", "fmin") and count == 2:
            (a_lo, a_hi), (b_lo, b_hi) = arg(0), arg(1)
            pick = max if name in ("maximum", "fmax") else min
            if propagates_nan(node, fn):
                return _widen(pick(a_lo, b_lo), pick(a_hi, b_hi))
            # without NaN propagation a NaN argument yields the other one, whatever it is
            return _widen(min(a_lo, b_lo), max(a_hi, b_hi))
        if name == "where" and count == 3:
            (a_lo, a_hi), (b_lo, b_hi) = arg(1), arg(2)
            return _widen(min(a_lo, b_lo), max(a_hi, b_hi))
        if name in ("abs", "fabs") and count == 1:
            lo, hi = arg(0)
            return _widen(0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        if name == "sqrt" and count == 1:
            return _monotone(lambda v: math.sqrt(max(v, 0.0)), arg(0))
        if name in _TRANSPARENT:
            return arg(0)
        return UNBOUNDED


def value_range(node: ast.AST, fn: FunctionFacts, depth: int = DEPTH) -> Range:
    """Bounds of every non-NaN value ``node`` takes (``UNBOUNDED`` where nothing bounds it).

    Constants are read from literals and module-level names only (``tl.full`` of a float32 value counts
    too): a folded in-kernel expression may have wrapped (integer tensors) or rounded (narrow floats)."""
    return _Bounds(fn).of(node, depth)


def always_ordered(first: ast.AST, second: ast.AST, fn: FunctionFacts) -> bool:
    """True when, on every input, one argument exceeds the other (so a min/max of them picks one side)."""
    bounds = _Bounds(fn)
    a, b = bounds.of(first, DEPTH), bounds.of(second, DEPTH)

    def above(x: Range, y: Range) -> bool:
        gap = _MARGIN * max(1.0, abs(x[0]), abs(y[1]))
        return math.isfinite(x[0]) and math.isfinite(y[1]) and x[0] - y[1] > gap

    return above(a, b) or above(b, a)
