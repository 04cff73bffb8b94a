"""Gate 1's literal-window rule: a candidate may not add a comparison of loaded data with a literal
the original never compares data with.

A kernel whose output changes only inside a narrow window of values passes every random input and
input family, but the window is plain in the source: a comparison between a value computed from
memory (:mod:`.static_dataflow`) and a constant. Each such comparison in the candidate's jit
functions is rejected, with its line, unless the original compares data with the same constant
the same way, the constant is 0, +-Inf or NaN, it is a bounds comparison of a loaded index, or it
sits inside an assert.

Not seen: a threshold folded into arithmetic, and data read through an atomic; gate 2 judges those.
Pure :mod:`ast`. The rule in full: docs/design-notes.md, "gates/static_literals.py".
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from .static_dataflow import ASSERTS, MIN_MAX, Constant, FunctionFlow, ModuleFlow, source_flow

RULE = "literal-window"
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_EQUAL = (ast.Eq, ast.NotEq)


@dataclass(frozen=True)
class DataComparison:
    kind: str  # "order" or "equal"
    constant: Constant
    line: int
    text: str
    index: bool = False  # the data is a loaded index (it flows into an address)

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.constant.key


def data_comparisons(flow: ModuleFlow, include_min_max: bool = False) -> list[DataComparison]:
    """Every comparison of loaded data with a constant in the module's jit functions (assertions aside);
    with ``include_min_max`` also ``maximum``/``minimum``/``clamp`` of data and a constant."""
    found: list[DataComparison] = []
    for function in flow.functions:
        skip = _asserted(function, flow)
        for node in function.nodes:
            if id(node) in skip:
                continue
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                    kind = "order" if isinstance(op, _ORDER) else "equal" if isinstance(op, _EQUAL) else None
                    compared = _data_against_constant(left, right, function, flow) if kind else None
                    if kind is not None and compared is not None:
                        data, constant = compared
                        index = bool({n.id for n in ast.walk(data) if isinstance(n, ast.Name)} & function.addresses)
                        found.append(DataComparison(kind, constant, node.lineno, ast.unparse(node), index))
            elif include_min_max and isinstance(node, ast.Call) and flow.function(node) in MIN_MAX and node.args:
                for arg in node.args[1:]:
                    compared = _data_against_constant(node.args[0], arg, function, flow)
                    if compared is not None:
                        found.append(DataComparison("order", compared[1], node.lineno, ast.unparse(node)))
    return found


def _asserted(function: FunctionFlow, flow: ModuleFlow) -> set[int]:
    """ids of the nodes inside assertions, which compare without changing an output."""
    inside: set[int] = set()
    for node in function.nodes:
        if isinstance(node, ast.Assert) or (isinstance(node, ast.Call) and flow.function(node) in ASSERTS):
            inside |= {id(sub) for sub in ast.walk(node)}
    return inside


def _data_against_constant(a: ast.AST, b: ast.AST, function: FunctionFlow,
                           flow: ModuleFlow) -> tuple[ast.AST, Constant] | None:
    for data, other in ((a, b), (b, a)):
        constant = flow.constant(other, function)
        if constant is not None and flow.is_data(data, function):
            return data, constant
    return None


def _exempt(comparison: DataComparison) -> bool:
    value = comparison.constant.value
    if value is None:
        return False
    if value == 0.0 or math.isinf(value) or math.isnan(value):
        return True  # windows the input families draw
    return comparison.index and float(value).is_integer()  # a bounds check of a loaded index


def check_literal_windows(original_source: str, candidate: ModuleFlow) -> list[tuple[str, int]]:
    """(message, line) for each comparison of data with a literal the original does not compare data with."""
    original = source_flow(original_source)
    allowed = {c.key for c in data_comparisons(original, include_min_max=True)} if original is not None else set()
    problems = []
    for comparison in data_comparisons(candidate):
        if comparison.key in allowed or _exempt(comparison):
            continue
        what = "ordered against" if comparison.kind == "order" else "tested for equality with"
        problems.append((f"`{_short(comparison.text)}` compares data loaded from memory, {what} "
                         f"{comparison.constant.text}, a constant the original never compares data with: an output "
                         "that changes only inside such a window of values is invisible to random inputs (a value "
                         "backdoor); keep the original's comparisons", comparison.line))
    return problems


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["RULE", "DataComparison", "check_literal_windows", "data_comparisons"]
