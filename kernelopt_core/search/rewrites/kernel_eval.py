"""Run an Inductor kernel's index arithmetic at sample points: what each load and store touches.

Inductor's pointwise and persistent-reduction kernels are straight-line code: index variables
computed from ``xindex`` (``yindex``, ``r0_index``) with ``+ - * // %``, comparisons and masks, then
loads, arithmetic on the loaded values, and stores. :func:`evaluate_kernel` runs that code with numpy
integer arrays standing for the index vectors (the sample points a caller chooses) and symbolic values
(:class:`Sym`) for the loaded data. The result lists every load (pointer, element offset, mask and
``other`` at every sample point) and every store (pointer, offset, mask, symbolic value), so a rewrite
family can check a hypothesis (a pooling window, a permutation, a column reduction) against what the
kernel really does, masks and padding values included, without a GPU or torch. Anything the evaluator
does not know raises :class:`KernelEvalError` naming the construct: a family then declines with that
reason instead of guessing. numpy is imported inside the functions (the search must stay light).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_BLOCK_AXIS = {"XBLOCK": "x", "YBLOCK": "y", "ZBLOCK": "z", "R0_BLOCK": "r0_", "RBLOCK": "r0_", "R1_BLOCK": "r1_"}
_SYM_CALLS = {"maximum": "max", "minimum": "min"}
_REDUCTIONS = {"tl.sum": "sum", "triton_helpers.max2": "max", "triton_helpers.min2": "min", "tl.max": "max",
               "tl.min": "min"}


class KernelEvalError(ValueError):
    """The kernel uses something the evaluator cannot run; the message names it."""


@dataclass(frozen=True)
class Sym:
    """Loaded data and what the kernel computes from it: ``op`` over ``args``.

    ``op`` is ``load`` (``args == (load number,)``), ``add``, ``sub``, ``mul``, ``div``, ``max``,
    ``min``, ``neg``, ``where``, ``sum`` (a reduction over r), ``call:<name>`` for other math;
    an argument that is not a Sym is an index array or a Python number.
    """

    op: str
    args: tuple[Any, ...] = ()


@dataclass
class Pointer:
    name: str
    offset: Any = 0  # element offset: an int array or a number

    def shifted(self, delta: Any) -> Pointer:
        return Pointer(self.name, self.offset + delta)


@dataclass
class LoadRecord:
    pointer: str
    offset: Any  # int array (or int) of element offsets at the sample points
    mask: Any  # bool array or bool: True where the load is live
    other: float | None  # the value of masked-off lanes (None: not given)
    line: int


@dataclass
class StoreRecord:
    pointer: str
    offset: Any
    value: Any  # a Sym (or a number)
    mask: Any
    line: int


@dataclass
class KernelEvaluation:
    loads: list[LoadRecord] = field(default_factory=list)
    stores: list[StoreRecord] = field(default_factory=list)
    numels: dict[str, int] = field(default_factory=dict)
    casts: set[str] = field(default_factory=set)  # dtypes data values were cast to (tl.float32, ...)


def evaluate_kernel(func: ast.FunctionDef, samples: dict[str, Any]) -> KernelEvaluation:
    """Run the body of ``func`` with ``tl.arange(0, XBLOCK)`` (YBLOCK, R0_BLOCK) replaced by
    ``samples["x"]`` (``"y"``, ``"r0_"``): integer arrays of the same rank Inductor uses before
    its ``[:, None]``/``[None, :]`` subscripts (1-D). Program ids are 0, so ``xindex`` is the
    samples themselves. A reduction loop runs once (see :meth:`_Runner.loop`). Raises
    :class:`KernelEvalError` on anything it cannot run."""
    runner = _Runner(samples)
    for param in func.args.args:
        if "ptr" in param.arg:
            runner.env[param.arg] = Pointer(param.arg)
        elif param.arg in _BLOCK_AXIS:
            runner.env[param.arg] = 1  # only ever multiplied by a program id (0) outside tl.arange
    for stmt in func.body:
        runner.statement(stmt)
    return runner.result


class _Runner:
    def __init__(self, samples: dict[str, Any]):
        import numpy as np

        self.np = np
        self.samples = samples
        self.env: dict[str, Any] = {}
        self.result = KernelEvaluation()
        self.line = 0

    # --- statements ------------------------------------------------------------------------

    def statement(self, stmt: ast.stmt) -> None:
        self.line = stmt.lineno
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            value = self.expr(stmt.value)
            if name.endswith("numel") and isinstance(value, int) and not isinstance(value, bool):
                self.result.numels[name] = value
            self.env[name] = value
            return
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            self.env[stmt.target.id] = self.expr(stmt.value)
            return
        if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and stmt.target.id in _LOOP_TARGETS:
            self.loop(stmt)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            if _dotted(stmt.value.func) == "tl.store":
                self.store(stmt.value)
                return
            if _dotted(stmt.value.func) in ("tl.debug_barrier", "tl.static_print"):
                return
        raise KernelEvalError(f"line {stmt.lineno}: cannot evaluate `{_short(stmt)}`")

    def loop(self, stmt: ast.For) -> None:
        """A reduction loop, run once at ``r0_offset = 0`` (``r0_index`` = the r samples).

        A name assigned before the loop and again inside it is an accumulator: inside the body it
        reads ``Sym("acc", (name,))``; after the loop it is ``Sym("loop", (name, initial, updated))``,
        which says how each trip combines into it.
        """
        if stmt.orelse:
            raise KernelEvalError(f"line {stmt.lineno}: a for/else loop")
        assigned = {t.id for node in stmt.body for n in ast.walk(node) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        accumulators = sorted(name for name in assigned if name in self.env)
        initial = {name: self.env[name] for name in accumulators}
        for name in accumulators:
            self.env[name] = Sym("acc", (name,))
        assert isinstance(stmt.target, ast.Name)
        self.env[stmt.target.id] = 0
        for inner in stmt.body:
            self.statement(inner)
        for name in accumulators:
            self.env[name] = Sym("loop", (name, initial[name], self.env[name]))

    def store(self, call: ast.Call) -> None:
        pointer, arguments = self.memory_access(call, "a store to", ("value", "mask"))
        value_node = arguments["value"]
        if value_node is None:
            raise KernelEvalError(f"line {self.line}: a store without a value")
        value = self.expr(value_node)
        mask = self.mask(arguments["mask"])
        self.result.stores.append(StoreRecord(pointer.name, pointer.offset, value, mask, self.line))

    def memory_access(self, call: ast.Call, what: str,
                      parameters: tuple[str, ...]) -> tuple[Pointer, dict[str, ast.expr | None]]:
        """The pointer a ``tl.load``/``tl.store`` reaches and its further arguments by name, given by
        position or keyword (None: not given)."""
        args = list(call.args)
        kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        pointer = self.expr(args[0])
        if not isinstance(pointer, Pointer):
            raise KernelEvalError(f"line {self.line}: {what} something that is not a pointer argument")
        return pointer, {name: args[position] if len(args) > position else kwargs.get(name)
                         for position, name in enumerate(parameters, start=1)}

    def mask(self, node: ast.expr | None) -> Any:
        return True if node is None else self.expr(node)  # no mask: every lane

    # --- expressions -----------------------------------------------------------------------

    def expr(self, node: ast.expr) -> Any:
        np = self.np
        if isinstance(node, ast.Constant):
            if node.value is None:
                return True  # a mask argument of None: every lane
            if isinstance(node.value, (int, float, bool)):
                return node.value
            raise KernelEvalError(f"line {self.line}: constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise KernelEvalError(f"line {self.line}: unknown name {node.id}")
            return self.env[node.id]
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                return Sym("neg", (operand,)) if isinstance(operand, Sym) else -operand
            if isinstance(node.op, ast.Invert) and not isinstance(operand, Sym):
                return ~operand if not isinstance(operand, bool) else not operand
            if isinstance(node.op, ast.UAdd):
                return operand
            raise KernelEvalError(f"line {self.line}: unary {type(node.op).__name__}")
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = self.expr(node.left), self.expr(node.comparators[0])
            if isinstance(left, Sym) or isinstance(right, Sym):
                return Sym("cmp:" + type(node.ops[0]).__name__, (left, right))
            op = node.ops[0]
            table = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
                     ast.Eq: np.equal, ast.NotEq: np.not_equal}
            if type(op) not in table:
                raise KernelEvalError(f"line {self.line}: comparison {type(op).__name__}")
            return table[type(op)](left, right)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value)
            if isinstance(base, (Sym, int, float, bool)):
                return base  # [:, None] on data or scalars: shape only
            return base[_index(node.slice, self.line)]
        if isinstance(node, ast.Call):
            return self.call(node)
        raise KernelEvalError(f"line {self.line}: cannot evaluate `{_short(node)}`")

    def binop(self, op: ast.operator, left: Any, right: Any) -> Any:
        np = self.np
        if isinstance(left, Pointer) or isinstance(right, Pointer):
            if isinstance(op, ast.Add) and isinstance(left, Pointer) and not isinstance(right, (Pointer, Sym)):
                return left.shifted(right)
            if isinstance(op, ast.Add) and isinstance(right, Pointer) and not isinstance(left, (Pointer, Sym)):
                return right.shifted(left)
            raise KernelEvalError(f"line {self.line}: pointer arithmetic other than pointer + index")
        if isinstance(left, Sym) or isinstance(right, Sym):
            if type(op) not in _SYMBOLIC_OPERATORS:
                raise KernelEvalError(f"line {self.line}: {type(op).__name__} on loaded data")
            return Sym(_SYMBOLIC_OPERATORS[type(op)], (left, right))
        same_as_python = _PYTHON_OPERATORS.get(type(op))
        if same_as_python is not None:
            return same_as_python(left, right)
        if isinstance(op, ast.FloorDiv):
            # Triton divides integers toward zero (C); the index operands here are never negative
            # where it matters, but mirror the semantics anyway.
            return np.sign(left) * np.sign(right) * (np.abs(left) // np.abs(right)) if _any_negative(np, left) \
                else left // right
        if isinstance(op, ast.Mod):
            return np.fmod(left, right) if _any_negative(np, left) else left % right
        if isinstance(op, ast.Div):
            return np.true_divide(left, right)
        raise KernelEvalError(f"line {self.line}: operator {type(op).__name__}")

    def call(self, node: ast.Call) -> Any:
        np = self.np
        name = _dotted(node.func)
        if isinstance(node.func, ast.Attribute) and name not in _KNOWN_CALLS and node.func.attr == "to":
            value = self.expr(node.func.value)
            dtype = _dotted(node.args[0]) if node.args else "?"
            if isinstance(value, Sym):
                self.result.casts.add(dtype)
                return value
            if isinstance(value, (int, float, bool)):
                return float(value) if "float" in dtype else value
            if "int1" in dtype:
                return value.astype(bool)
            return value.astype(np.float64) if ("fp" in dtype or "float" in dtype) else value.astype(np.int64)
        if name == "tl.arange":
            block = _dotted(node.args[1]) if len(node.args) > 1 else None
            axis = _BLOCK_AXIS.get(block or "")
            if axis is None or axis not in self.samples:
                raise KernelEvalError(f"line {self.line}: tl.arange over {block}")
            return self.samples[axis]
        if name in ("tl.program_id",):
            return 0
        if name in ("tl.num_programs",):
            return 1
        if name == "tl.full":
            value = self.expr(node.args[1])
            return value
        if name == "float" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, (int, float, str)):
            return float(node.args[0].value)
        if name == "tl.broadcast_to":
            return self.expr(node.args[0])
        if name == "tl.load":
            return self.load(node)
        if name == "tl.where":
            cond, a, b = (self.expr(arg) for arg in node.args[:3])
            if isinstance(a, Sym) or isinstance(b, Sym) or isinstance(cond, Sym):
                return Sym("where", (cond, a, b))
            return np.where(cond, a, b)
        if name in _REDUCTIONS:
            value = self.expr(node.args[0])
            if not isinstance(value, Sym):
                raise KernelEvalError(f"line {self.line}: a reduction of index values")
            return Sym(_REDUCTIONS[name], (value,))
        if name.startswith("triton_helpers."):
            attr = name.split(".", 1)[1]
            args = [self.expr(arg) for arg in node.args]
            if attr in _SYM_CALLS and len(args) == 2:
                if any(isinstance(a, Sym) for a in args):
                    return Sym(_SYM_CALLS[attr], tuple(args))
                return (np.maximum if attr == "maximum" else np.minimum)(*args)
            raise KernelEvalError(f"line {self.line}: triton_helpers.{attr}")
        if name.startswith(("libdevice.", "tl_math.", "tl.math.", "tl.")) and node.args:
            args = [self.expr(arg) for arg in node.args]
            if any(isinstance(a, Sym) for a in args):
                return Sym("call:" + name.rsplit(".", 1)[1], tuple(args))
            if name in ("tl.minimum", "tl.maximum"):
                return (np.minimum if name.endswith("minimum") else np.maximum)(*args[:2])
        raise KernelEvalError(f"line {self.line}: cannot evaluate the call `{_short(node)}`")

    def load(self, node: ast.Call) -> Sym:
        pointer, arguments = self.memory_access(node, "a load from", ("mask", "other"))
        mask = self.mask(arguments["mask"])
        other_node = arguments["other"]
        other = None
        if other_node is not None:
            value = self.expr(other_node)
            if not isinstance(value, (int, float, bool)):
                raise KernelEvalError(f"line {self.line}: a load whose `other` is not a constant")
            other = float(value)
        self.result.loads.append(LoadRecord(pointer.name, pointer.offset, mask, other, self.line))
        return Sym("load", (len(self.result.loads) - 1,))


# How loaded data enters an operator (a symbolic value names it), and the operators whose Triton
# meaning on index values is Python's (division and remainder differ: they round toward zero).
_SYMBOLIC_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.BitAnd: "and", ast.BitOr: "or",
    ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_PYTHON_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_}
_LOOP_TARGETS = ("r0_offset", "roffset")
_KNOWN_CALLS = {"tl.arange", "tl.program_id", "tl.num_programs", "tl.full", "tl.broadcast_to", "tl.load",
                "tl.where"}


def _any_negative(np: Any, value: Any) -> bool:
    return bool(np.any(np.asarray(value) < 0))


def _index(node: ast.expr, line: int) -> Any:
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    out: list[Any] = []
    for part in parts:
        if isinstance(part, ast.Slice) and part.lower is None and part.upper is None and part.step is None:
            out.append(slice(None))
        elif isinstance(part, ast.Constant) and part.value is None:
            out.append(None)
        else:
            raise KernelEvalError(f"line {line}: subscript other than [:] / [:, None] / [None, :]")
    return tuple(out)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _short(node: ast.AST, limit: int = 80) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def leaves(value: Any, op: str) -> list[Any] | None:
    """The operands of a tree made only of ``op`` (e.g. every load of a chain of maxima), in order;
    None when another operation is inside."""
    if isinstance(value, Sym) and value.op == op:
        out: list[Any] = []
        for arg in value.args:
            found = leaves(arg, op)
            if found is None:
                return None
            out.extend(found)
        return out
    if isinstance(value, Sym) and value.op == "load":
        return [value]
    return None


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


__all__ = ["KernelEvalError", "KernelEvaluation", "LoadRecord", "StoreRecord", "Sym", "evaluate_kernel",
           "is_finite_number", "leaves"]
