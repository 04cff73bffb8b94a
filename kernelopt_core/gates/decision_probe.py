"""An instrumented copy of a candidate that records which outcomes its added decisions took.

:mod:`.decisions` lists what a candidate decides on data that its original does not. This module
rewrites the candidate's source so that each such decision, wherever it is evaluated, adds to a
counter buffer ``_kopt_counters`` (int32, ``4 * len(decisions)``): slot ``4 i`` counts the
evaluations in which decision ``i`` was true in some lane that counts (the masks
:class:`~.decisions.Decision` names: a masked lane's ``other`` value proves nothing), slot
``4 i + 1`` those in which it was false; slots ``4 i + 2`` and ``4 i + 3`` are written by the
checker to force a synchronisation decision one way for a number of evaluations
(:mod:`.decision_coverage`). The buffer is one more argument of the kernel, the launcher or the
jit helpers (how each takes it: docs/gates.md, "The instrumented copy"). The copy runs only in
gate 2's coverage runs, never timed; its helpers use ``tl.sum`` and ``tl.atomic_add`` only, so it
runs on the CPU interpreter and compiles for the GPU alike. Pure :mod:`ast`.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from .decisions import Decision
from .static_dataflow import import_aliases, is_jit

COUNTER_PARAM = "_kopt_counters"
# A jit helper's lanes that count: the masks of the loads feeding its call, passed by the caller (a helper has no
# masks of its own, and a masked-off lane holds the load's ``other`` value, which the candidate chose).
VALID_PARAM = "_kopt_valid"
_SEEN = "_kopt_seen"
_NOTE = "_kopt_note"
_EFFECT = "_kopt_effect"
# The values at which each saturating function's result no longer moves with its argument: true is saturated.
_SATURATED = {"saturation-exp": "(({v}) == 0.0) | (({v}) == float('inf'))",
              "saturation-expm1": "(({v}) == -1.0) | (({v}) == float('inf'))",
              "saturation-odd": "(({v}) == 1.0) | (({v}) == -1.0)",
              "saturation-erfc": "(({v}) == 0.0) | (({v}) == 2.0)",
              "saturation-unit": "(({v}) == 0.0) | (({v}) == 1.0)"}

STRIDE = 4  # per decision: [times true, times false, force code, forced evaluations left]
FORCE_NONE, FORCE_TRUE, FORCE_FALSE = 0, 1, 2

_HELPERS = f'''

@triton.jit
def {_SEEN}(cond, valid, counters, slot: tl.constexpr):
    """Records whether ``cond`` was true / false in a lane where ``valid``; returns ``cond``, or, while the
    checker's count of forced evaluations lasts, the outcome it forces (synchronisation decisions only:
    a partial withheld, a wait that goes on a while)."""
    code = tl.load(counters + {STRIDE} * slot + 2)
    left = tl.atomic_add(counters + {STRIDE} * slot + 3, tl.where(code != 0, -1, 0))
    active = (code != 0) & (left > 0)
    # (a fresh int1 value: the interpreter refuses a broadcast view as a load's mask)
    cond = (tl.where(active, code == {FORCE_TRUE}, cond != 0).to(tl.int8) != 0)
    taken = tl.sum(tl.zeros([1], tl.int32) + (cond & (valid != 0)).to(tl.int32))
    skipped = tl.sum(tl.zeros([1], tl.int32) + ((cond == 0) & (valid != 0)).to(tl.int32))
    tl.atomic_add(counters + {STRIDE} * slot, tl.minimum(taken, 1))
    tl.atomic_add(counters + {STRIDE} * slot + 1, tl.minimum(skipped, 1))
    return cond


@triton.jit
def {_EFFECT}(cond, a, b, valid, counters, slot: tl.constexpr):
    """``tl.where(cond, a, b)``, recording ``cond`` only in lanes where ``a`` and ``b`` differ (NaN and NaN
    agree): where they agree the outcome changes nothing, and seeing it there shows nothing about the path."""
    differ = (a != b) & ((a == a) | (b == b))
    {_SEEN}(cond, valid & differ, counters, slot)
    return tl.where(cond, a, b)


@triton.jit
def {_NOTE}(value, cond, valid, counters, slot: tl.constexpr):
    """Records ``cond`` as {_SEEN} does; returns ``value`` unchanged."""
    {_SEEN}(cond, valid, counters, slot)
    return value
'''


@dataclass
class ProbedSource:
    """The instrumented source, and which decision each counter pair stands for."""

    source: str
    decisions: list[Decision] = field(default_factory=list)  # pair i <-> decisions[i]
    skipped: list[tuple[Decision, str]] = field(default_factory=list)  # not instrumented, and why
    launcher: bool = False

    @property
    def slots(self) -> int:
        return STRIDE * len(self.decisions)


class ProbeError(ValueError):
    """The source cannot be instrumented (the reason is the message)."""


def probe_source(source: str, kernel_name: str, decisions: list[Decision]) -> ProbedSource:
    """``source`` with ``decisions`` recorded into :data:`COUNTER_PARAM` (see the module docstring); a
    decision that cannot be recorded keeps its pair of counters at zero and is listed in ``skipped``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise ProbeError(f"the candidate does not parse: {exc}") from exc
    aliases = import_aliases(tree)
    jit = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and is_jit(n, aliases)}
    launcher = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel_name
                     and not n.decorator_list), None)
    result = ProbedSource(source="", launcher=launcher is not None)
    spans = _spans(tree, jit)
    targets: dict[int, tuple[Decision, int]] = {}
    for decision in decisions:
        node = spans.get((decision.function, decision.line, decision.col, decision.end_line, decision.end_col))
        if node is None:
            result.skipped.append((decision, "its expression was not found again in the source"))
            continue
        targets[id(node)] = (decision, len(result.decisions))
        result.decisions.append(decision)
    helpers = {c.func.id for f in jit.values() for c in ast.walk(f) if isinstance(c, ast.Call)
               and isinstance(c.func, ast.Name) and c.func.id in jit and c.func.id != f.name}
    site_masks = _helper_call_masks(source, helpers)
    replace = _Replace(targets, helpers)
    replace.visit(tree)  # in place: a module node is never a decision, so it is returned as it is
    result.skipped.extend(replace.skipped)
    for func in jit.values():
        _add_counter_param(func, kernel_name if launcher is None else None)
        if func.name in helpers:
            func.args.args.insert(func.args.args.index(next(a for a in func.args.args if a.arg == COUNTER_PARAM)),
                                  ast.arg(arg=VALID_PARAM))
        for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name) and call.func.id in jit:
                call.keywords.append(ast.keyword(arg=COUNTER_PARAM, value=ast.Name(COUNTER_PARAM, ast.Load())))
                if call.func.id in helpers:
                    valid = site_masks.get((func.name, call.lineno, call.col_offset)) or ast.Constant(1)
                    if func.name in helpers:
                        valid = ast.BinOp(left=valid, op=ast.BitAnd(), right=ast.Name(VALID_PARAM, ast.Load()))
                    call.keywords.append(ast.keyword(arg=VALID_PARAM, value=valid))
    if launcher is not None:
        launcher.args.args.append(ast.arg(arg=COUNTER_PARAM))
        for call in (n for n in ast.walk(launcher) if isinstance(n, ast.Call)):
            # kernel[grid](...): the launched kernel is a Subscript of one of the module's jit functions
            target = call.func.value if isinstance(call.func, ast.Subscript) else None
            if isinstance(target, ast.Name) and target.id in jit:
                call.keywords.append(ast.keyword(arg=COUNTER_PARAM, value=ast.Name(COUNTER_PARAM, ast.Load())))
    elif kernel_name not in jit:
        raise ProbeError(f"the candidate defines no @triton.jit kernel named {kernel_name}")
    helper_defs = ast.parse(_HELPERS).body
    position = next((i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef)), len(tree.body))
    tree.body[position:position] = helper_defs
    result.source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    return result


def _helper_call_masks(source: str, helpers: set[str]) -> dict[tuple[str, int, int], ast.expr]:
    """(calling function, line, column) of each call of a jit helper -> the masks of the loads feeding its
    arguments, as one expression in the caller's names (absent: none, every lane counts)."""
    from .decisions import _masks, module_decisions

    if not helpers:
        return {}
    out: dict[tuple[str, int, int], ast.expr] = {}
    for fn in module_decisions(ast.parse(source)).facts:
        for call in (n for n in fn.nodes if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name) and call.func.id in helpers:
                masks = _masks(call, call.lineno, fn)
                if masks:
                    out[(fn.func.name, call.lineno, call.col_offset)] = _mask_of(masks)
    return out


def _spans(tree: ast.Module, jit: dict[str, ast.FunctionDef]) -> dict[tuple[str, int, int, int, int], ast.AST]:
    out: dict[tuple[str, int, int, int, int], ast.AST] = {}
    for name, func in jit.items():
        for node in ast.walk(func):
            if isinstance(node, ast.expr):
                key = (name, node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)
                out.setdefault(key, node)  # the outermost expression of a span (a call before its func)
    return out


def _has_effects(node: ast.AST) -> bool:
    """The expression stores or runs an atomic: it may not be evaluated twice."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = sub.func.attr if isinstance(sub.func, ast.Attribute) else getattr(sub.func, "id", "")
            if name == "store" or name.startswith("atomic_"):
                return True
    return False


def _mask(decision: Decision, in_helper: bool = False) -> ast.expr:
    mask = _mask_of(decision.masks)
    if in_helper:
        mask = ast.BinOp(left=mask, op=ast.BitAnd(), right=ast.Name(VALID_PARAM, ast.Load()))
    return mask


def _mask_of(masks: tuple[str, ...]) -> ast.expr:
    if not masks:
        return ast.Constant(1)
    parts = [ast.parse(f"({m})", mode="eval").body for m in masks]
    mask = parts[0]
    for part in parts[1:]:
        mask = ast.BinOp(left=mask, op=ast.BitAnd(), right=part)
    return mask


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=list(args), keywords=[])


def _instrument(original: ast.AST, decision: Decision, slot: int, in_helper: bool = False) -> ast.AST | str:
    """The replacement of ``original`` that records the decision, or why it cannot be recorded."""
    if not isinstance(original, ast.expr):
        return "it is not an expression"
    counters = ast.Name(COUNTER_PARAM, ast.Load())
    mask = _mask(decision, in_helper)
    tail = (mask, counters, ast.Constant(slot))
    node = copy.deepcopy(original)
    condition: ast.expr
    if decision.probe == "cond":
        return _call(_SEEN, node, *tail)
    if decision.probe == "truthy":
        condition = ast.Compare(left=node, ops=[ast.NotEq()], comparators=[ast.Constant(0)])
        return _call(_SEEN, condition, *tail)
    if _has_effects(node):
        return "it stores or runs an atomic inside the decision, which recording would run twice"
    if decision.probe in _SATURATED:
        # true: saturated; a NaN result is neither (its lane does not count)
        text = ast.unparse(node)
        condition = ast.parse(_SATURATED[decision.probe].format(v=text), mode="eval").body
        finite = ast.parse(f"({text}) == ({text})", mode="eval").body
        valid: ast.expr = finite if not decision.masks and not in_helper else \
            ast.BinOp(left=mask, op=ast.BitAnd(), right=finite)
        return _call(_NOTE, node, condition, valid, counters, ast.Constant(slot))
    if decision.probe == "effect" and isinstance(node, ast.Call) and len(node.args) == 3:
        return _call(_EFFECT, *node.args, *tail)
    if decision.probe in ("lt", "clamp") and isinstance(node, ast.Call) and len(node.args) >= 2:
        first = node.args[0]
        if decision.probe == "lt":
            condition = ast.Compare(left=copy.deepcopy(first), ops=[ast.Lt()],
                                    comparators=[copy.deepcopy(node.args[1])])
        else:
            if len(node.args) < 3:
                return "a clamp without both bounds"
            condition = ast.BinOp(
                left=ast.Compare(left=copy.deepcopy(first), ops=[ast.Lt()], comparators=[copy.deepcopy(node.args[1])]),
                op=ast.BitOr(),
                right=ast.Compare(left=copy.deepcopy(first), ops=[ast.Gt()],
                                  comparators=[copy.deepcopy(node.args[2])]))
        node.args[0] = _call(_NOTE, first, condition, *tail)
        return node
    if decision.probe == "divisor":
        if isinstance(node, ast.BinOp):
            divisor = node.right
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            divisor = node.args[1]
        else:
            return "a division whose divisor was not found"
        # true: the divisor is finite and nonzero (inf * 0 and NaN * 0 are NaN, which is != 0)
        condition = ast.BinOp(
            left=ast.Compare(left=copy.deepcopy(divisor), ops=[ast.NotEq()], comparators=[ast.Constant(0)]),
            op=ast.BitAnd(),
            right=ast.Compare(left=ast.BinOp(left=copy.deepcopy(divisor), op=ast.Mult(), right=ast.Constant(0)),
                              ops=[ast.Eq()], comparators=[ast.Constant(0)]))
        noted = _call(_NOTE, divisor, condition, *tail)
        if isinstance(node, ast.BinOp):
            node.right = noted
        elif isinstance(node, ast.Call):
            node.args[1] = noted
        return node
    if decision.probe == "bound" and isinstance(node, ast.Call) and node.args:
        low: ast.expr = node.args[0] if len(node.args) >= 2 else ast.Constant(0)
        high_at = 1 if len(node.args) >= 2 else 0
        high = node.args[high_at]
        condition = ast.Compare(left=copy.deepcopy(high), ops=[ast.Gt()], comparators=[copy.deepcopy(low)])
        node.args[high_at] = _call(_NOTE, high, condition, *tail)
        return node
    return f"no way to record a {decision.kind} decision ({decision.probe})"


class _Replace(ast.NodeTransformer):
    """Post-order: a decision inside another is instrumented before the outer one copies it."""

    def __init__(self, targets: dict[int, tuple[Decision, int]], helpers: set[str]):
        self.targets = targets
        self.helpers = helpers
        self.skipped: list[tuple[Decision, str]] = []

    def visit(self, node: ast.AST) -> ast.AST:
        target = self.targets.get(id(node))
        node = self.generic_visit(node)
        if target is None:
            return node
        decision, slot = target
        replaced = _instrument(node, decision, slot, decision.function in self.helpers)
        if isinstance(replaced, str):
            self.skipped.append((decision, replaced))
            return node
        return replaced


def _add_counter_param(func: ast.FunctionDef, heuristics_kernel: str | None) -> None:
    """The counter parameter: after the runtime parameters of the Inductor kernel (and in its decorator's
    signature), else before the first parameter with a default (helpers and launched kernels take it by
    keyword)."""
    args = func.args.args
    constexpr = [a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr") for a in args]
    if func.name == heuristics_kernel:
        position = next((i for i, c in enumerate(constexpr) if c), len(args))
    else:
        first_default = len(args) - len(func.args.defaults)
        position = first_default
    args.insert(position, ast.arg(arg=COUNTER_PARAM))
    if func.name != heuristics_kernel:
        return
    for deco in func.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        for keyword in deco.keywords:
            if not isinstance(keyword.value, ast.Dict):
                continue
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=False):
                name = key.value if isinstance(key, ast.Constant) else None
                if keyword.arg == "triton_meta" and name == "signature" and isinstance(value, ast.Dict):
                    value.keys.insert(position, ast.Constant(COUNTER_PARAM))
                    value.values.insert(position, ast.Constant("*i32"))
                elif keyword.arg == "inductor_meta" and name == "mutated_arg_names" and \
                        isinstance(value, (ast.List, ast.Tuple)):
                    value.elts.append(ast.Constant(COUNTER_PARAM))


__all__ = ["COUNTER_PARAM", "VALID_PARAM", "FORCE_FALSE", "FORCE_NONE", "FORCE_TRUE", "STRIDE", "ProbeError", "ProbedSource",
           "probe_source"]
