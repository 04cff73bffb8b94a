"""Recognise strided access in an Inductor kernel, exactly, or say why not.

Two shapes of kernel walk a non-contiguous dimension:

* a **permuted copy** (``x.permute(...).contiguous()``, ``x.t().contiguous()``): one load, one
  store of the same value, the load's index moving with a stride > 1 along the output's
  contiguous dimension. :func:`recognise_permute` finds, from the launch's tensors and the
  kernel's own index arithmetic at sample points, the input stride of every output dimension.
* a **column reduction** (``x.sum(dim=0)`` and the middle dimension of (B, R, C)): the reduced
  index ``r`` moves by C elements while the output index moves by one. :func:`recognise_columns`
  finds (B, R, C), the reduction (sum, max, min) and a constant epilogue (a mean's division).

Both check the hypothesis at every sample (edges of every dimension, ragged tiles) against the
offsets and masks the kernel computes (:mod:`.kernel_eval`); anything else declines with the reason.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from .kernel_eval import KernelEvalError, Sym, evaluate_kernel
from .kernel_source import KernelModule, KernelSourceError, parse_kernel_module
from .launcher_source import DTYPES, NotRecognised, contiguous_strides, is_contiguous, numel


class StridedMismatch(NotRecognised):
    """The kernel is not a strided access this package rewrites exactly; the message says why."""


@dataclass(frozen=True)
class PermuteCopy:
    """``out[c] = in[sum(c[d] * in_strides[d])]`` with ``out`` contiguous of shape ``shape``.

    Dimensions are merged where the input is contiguous across them and size-1 ones dropped, so
    ``shape`` is the smallest description; ``inner`` is the output dimension the input is
    contiguous along (stride 1) and the last dimension is the output's contiguous one.
    """

    shape: tuple[int, ...]
    in_strides: tuple[int, ...]
    inner: int
    in_param: str
    out_param: str
    in_dtype: str
    out_dtype: str
    in_elements: int  # the input's storage extent in elements (for the index width)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (f"a permuted copy into a contiguous {list(self.shape)} (input strides {list(self.in_strides)}): "
                f"the output's contiguous dimension reads with stride {self.in_strides[-1]}")


@dataclass(frozen=True)
class ColumnReduction:
    """``out[b, c] = epilogue(reduce_r in[b, r, c])`` over a contiguous (B, R, C) input."""

    op: str  # sum | max | min
    batch: int
    rows: int
    cols: int
    in_param: str
    out_param: str
    in_dtype: str
    out_dtype: str
    epilogue: tuple[str, float] | None = None  # ("div", 64.0) for a mean, ("mul", c)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        shape = f"{self.rows} x {self.cols}" if self.batch == 1 else f"{self.batch} x {self.rows} x {self.cols}"
        epilogue = f", then {'/' if self.epilogue[0] == 'div' else '*'} {self.epilogue[1]!r}" if self.epilogue else ""
        return f"a column {self.op} over the {self.rows} rows of a contiguous {shape} input{epilogue}"


def _edges(size: int, limit: int = 12) -> list[int]:
    picks = set(range(min(size, limit))) | {size // 2, size // 2 + 1, size - 3, size - 2, size - 1}
    return sorted(p for p in picks if 0 <= p < size)


def _args(launch_args: list[dict[str, Any]] | None) -> tuple:
    return tuple((a.get("name"), tuple(a.get("shape") or ()), tuple(a.get("stride") or ()), a.get("dtype"),
                  a.get("storage_bytes"))
                 for a in (launch_args or []) if isinstance(a, dict) and a.get("shape") is not None)


def _unfreeze(args: tuple) -> dict[str, dict[str, Any]]:
    return {n: {"name": n, "shape": list(s), "stride": list(st), "dtype": d, "storage_bytes": b}
            for n, s, st, d, b in args}


def _pointers(module: KernelModule) -> tuple[list[str], list[str]]:
    pointers = [p for p in module.params if "ptr" in p]
    return ([p for p in pointers if p.startswith("in_ptr")],
            [p for p in pointers if p.startswith(("out_ptr", "in_out_ptr"))])


def _tensor(args: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    arg = args.get(name)
    if arg is None:
        raise StridedMismatch("the launch's tensor shapes are unknown (no launch arguments in the evidence)")
    if arg.get("dtype") not in DTYPES:
        raise StridedMismatch(f"{name} is {arg.get('dtype')}: only float32/float16/bfloat16 tensors")
    return arg


# --- permuted copies ---------------------------------------------------------------------------


def recognise_permute(module: KernelModule, launch_args: list[dict[str, Any]] | None) -> PermuteCopy:
    return _recognise("permute", module, launch_args)


def _recognise(kind: str, module: KernelModule, launch_args: list[dict[str, Any]] | None) -> Any:
    found = _recognised(kind, module.text, module.name, _args(launch_args))
    if isinstance(found, str):
        raise StridedMismatch(found)
    return found


@lru_cache(maxsize=128)
def _recognised(kind: str, text: str, name: str, args: tuple) -> Any:
    """One recogniser's answer for a kernel text and launch, remembered: the model or the reason it
    does not match (a string, so that a mismatch is cached as well)."""
    recognisers = {"permute": _permute, "columns": _columns}
    try:
        return recognisers[kind](parse_kernel_module(text, name), _unfreeze(args))
    except (StridedMismatch, KernelEvalError, KernelSourceError) as exc:
        return str(exc)


def _permute(module: KernelModule, args: dict[str, dict[str, Any]]) -> PermuteCopy:
    import numpy as np

    if module.heuristic != "pointwise" or module.func is None:
        raise StridedMismatch(f"not a pointwise kernel ({module.heuristic})")
    inputs, outputs = _pointers(module)
    if len(inputs) != 1 or len(outputs) != 1:
        raise StridedMismatch(f"a copy reads one tensor and writes one; this kernel has inputs {inputs} and "
                              f"outputs {outputs}")
    blocks = module.block_params
    axes = {"XBLOCK": ("x", "xnumel"), "YBLOCK": ("y", "ynumel")}
    if not blocks or any(b not in axes for b in blocks):
        raise StridedMismatch(f"blocks {blocks}: only 1D or 2D pointwise kernels")
    samples = {}
    for block in blocks:
        axis, numel_name = axes[block]
        size = module.numels.get(numel_name)
        if size is None:
            raise StridedMismatch(f"{numel_name} is not fixed in the kernel (dynamic shapes)")
        samples[axis] = np.array(_edges(size, 40), dtype=np.int64)
    evaluation = evaluate_kernel(module.func, samples)
    if len(evaluation.loads) != 1 or len(evaluation.stores) != 1:
        raise StridedMismatch(f"{len(evaluation.loads)} loads and {len(evaluation.stores)} stores: not a copy")
    load, store = evaluation.loads[0], evaluation.stores[0]
    if load.pointer != inputs[0] or store.pointer != outputs[0]:
        raise StridedMismatch("the load and store are not the input and output arguments")
    if not (isinstance(store.value, Sym) and store.value == Sym("load", (0,))):
        raise StridedMismatch("the stored value is not the loaded one: other computation is fused in")
    shape = np.broadcast_shapes(np.shape(load.offset), np.shape(store.offset), np.shape(load.mask),
                                np.shape(store.mask))

    def full(value: Any, dtype: Any) -> Any:
        return np.broadcast_to(np.asarray(value, dtype=dtype), shape).ravel()

    if not (bool(np.all(full(load.mask, bool))) and bool(np.all(full(store.mask, bool)))):
        raise StridedMismatch("the copy is masked inside its index space")
    p, q = full(load.offset, np.int64), full(store.offset, np.int64)
    in_arg, out_arg = _tensor(args, inputs[0]), _tensor(args, outputs[0])
    out_shape, in_shape = list(out_arg["shape"]), list(in_arg["shape"])
    if not is_contiguous(out_arg):
        raise StridedMismatch(f"the output {out_shape} is not contiguous")
    if sorted(s for s in out_shape if s != 1) != sorted(s for s in in_shape if s != 1):
        raise StridedMismatch(f"output {out_shape} is not a permutation of input {in_shape}")
    coords = np.stack(np.unravel_index(q, out_shape), axis=0) if out_shape else np.zeros((0, q.size), np.int64)
    if numel(out_shape) and (q.min() < 0 or q.max() >= numel(out_shape)):
        raise StridedMismatch("the store leaves the output")
    strides = _fit_strides(coords, p, out_shape, in_shape, list(in_arg["stride"]))
    merged_shape, merged_strides = _merge(out_shape, strides)
    if not merged_shape:
        raise StridedMismatch("a copy of a single element")
    if merged_strides[-1] == 1:
        raise StridedMismatch("loads and stores are both contiguous along the output's last dimension: no "
                              "strided access to remove")
    inner = [i for i, s in enumerate(merged_strides) if s == 1]
    if not inner:
        raise StridedMismatch("the input is not contiguous along any output dimension (a strided view)")
    extent = 1 + sum((size - 1) * abs(st) for size, st in zip(in_shape, in_arg["stride"], strict=True))
    return PermuteCopy(tuple(merged_shape), tuple(merged_strides), inner[-1], inputs[0], outputs[0],
                       DTYPES[in_arg["dtype"]], DTYPES[out_arg["dtype"]], extent)


def _fit_strides(coords: Any, p: Any, out_shape: list[int], in_shape: list[int], in_stride: list[int]) -> list[int]:
    """The input stride of every output dimension: a permutation of the input's dims that explains
    every sampled load offset."""
    import numpy as np

    dims_out = [d for d, s in enumerate(out_shape) if s != 1]
    dims_in = [d for d, s in enumerate(in_shape) if s != 1]
    if len(dims_out) > 6:
        raise StridedMismatch("more than 6 non-trivial dimensions")
    for order in itertools.permutations(dims_in):
        if any(out_shape[o] != in_shape[i] for o, i in zip(dims_out, order, strict=True)):
            continue
        strides = [0] * len(out_shape)
        for o, i in zip(dims_out, order, strict=True):
            strides[o] = in_stride[i]
        want = sum((coords[d] * strides[d] for d in range(len(out_shape))), np.zeros_like(p))
        if np.array_equal(want, p):
            return strides
    raise StridedMismatch("no permutation of the input's dimensions explains the kernel's load offsets")


def _merge(shape: list[int], strides: list[int]) -> tuple[list[int], list[int]]:
    """Drop size-1 dims; merge neighbours the input walks contiguously (stride_d = stride_{d+1} * size_{d+1})."""
    dims = [(s, st) for s, st in zip(shape, strides, strict=True) if s != 1]
    merged: list[list[int]] = []
    for size, stride in dims:
        if merged and merged[-1][1] == stride * size:
            merged[-1] = [merged[-1][0] * size, stride]
        else:
            merged.append([size, stride])
    return [m[0] for m in merged], [m[1] for m in merged]


# --- column reductions -------------------------------------------------------------------------

_IDENTITY = {"sum": 0.0, "max": -math.inf, "min": math.inf}


def recognise_columns(module: KernelModule, launch_args: list[dict[str, Any]] | None) -> ColumnReduction:
    return _recognise("columns", module, launch_args)


def _columns(module: KernelModule, args: dict[str, dict[str, Any]]) -> ColumnReduction:
    import numpy as np

    if module.heuristic not in ("reduction", "persistent_reduction") or module.func is None:
        raise StridedMismatch(f"not a reduction kernel ({module.heuristic})")
    inputs, outputs = _pointers(module)
    if len(inputs) != 1 or len(outputs) != 1:
        raise StridedMismatch(f"a column reduction reads one tensor and writes one; this kernel has inputs {inputs} "
                              f"and outputs {outputs}")
    xnumel, rnumel = module.numels.get("xnumel"), module.numels.get("r0_numel")
    if xnumel is None or rnumel is None:
        raise StridedMismatch("xnumel/r0_numel are not fixed in the kernel (dynamic shapes)")
    x = np.array(_edges(xnumel, 40), dtype=np.int64)
    r = np.array(_edges(rnumel, 40), dtype=np.int64)
    evaluation = evaluate_kernel(module.func, {"x": x, "r0_": r})
    if len(evaluation.loads) != 1 or len(evaluation.stores) != 1:
        raise StridedMismatch(f"{len(evaluation.loads)} loads and {len(evaluation.stores)} stores: not a single "
                              "reduction of one tensor")
    load, store = evaluation.loads[0], evaluation.stores[0]
    if load.pointer != inputs[0] or store.pointer != outputs[0]:
        raise StridedMismatch("the load and store are not the input and output arguments")
    op, epilogue = _reduction_shape(store.value)
    in_arg, out_arg = _tensor(args, inputs[0]), _tensor(args, outputs[0])
    if not is_contiguous(in_arg):
        raise StridedMismatch(f"the input {in_arg['shape']} is not contiguous")
    if numel(list(out_arg["shape"])) != xnumel or not is_contiguous(out_arg):
        raise StridedMismatch("the output is not a contiguous tensor of xnumel elements")
    grid = np.broadcast_shapes(np.shape(load.offset), (x.size, r.size))
    offsets = np.broadcast_to(np.asarray(load.offset, dtype=np.int64), grid)
    mask = np.broadcast_to(np.asarray(load.mask, dtype=bool), grid)
    if not bool(np.all(mask)):
        raise StridedMismatch("the load is masked inside the reduction")
    written = np.asarray(store.offset, dtype=np.int64)
    if written.size != x.size or not np.array_equal(written.reshape(-1), x) \
            or not bool(np.all(np.asarray(store.mask, dtype=bool))):
        raise StridedMismatch("the output is not written at the reduction's x index")
    in_numel = numel(list(in_arg["shape"]))
    if in_numel != xnumel * rnumel:
        raise StridedMismatch(f"the input has {in_numel} elements, not xnumel x r0_numel")
    for cols in sorted({d for d in _divisors(xnumel)}, reverse=True):
        batch = xnumel // cols
        want = (x // cols)[:, None] * (rnumel * cols) + r[None, :] * cols + (x % cols)[:, None]
        if np.array_equal(offsets, want):
            if cols == 1:
                raise StridedMismatch("the reduction walks the contiguous dimension (a row reduction)")
            return ColumnReduction(op, batch, rnumel, cols, inputs[0], outputs[0], DTYPES[in_arg["dtype"]],
                                   DTYPES[out_arg["dtype"]], epilogue)
    raise StridedMismatch("the load offsets are not those of a (B, R, C) input reduced over R")


def _divisors(n: int) -> list[int]:
    out: set[int] = set()
    i = 1
    while i * i <= n:
        if n % i == 0:
            out.update((i, n // i))
        i += 1
    return sorted(out)


def _reduction_shape(value: Any) -> tuple[str, tuple[str, float] | None]:
    """(reduction op, constant epilogue) of the stored value; raises when it is anything else."""
    epilogue = None
    if isinstance(value, Sym) and value.op in ("div", "mul") and isinstance(value.args[0], Sym) \
            and isinstance(value.args[1], (int, float)) and not isinstance(value.args[1], bool):
        epilogue = (value.op, float(value.args[1]))
        value = value.args[0]
    if not (isinstance(value, Sym) and value.op in _IDENTITY and len(value.args) == 1):
        raise StridedMismatch("the stored value is not a sum, max or min of the loaded values (other computation "
                              "is fused in)")
    op = value.op
    inner = _strip_where(value.args[0], op)
    if isinstance(inner, Sym) and inner.op == "loop":
        _, initial, updated = inner.args
        if initial != _IDENTITY[op]:
            raise StridedMismatch(f"the accumulator starts at {initial}, not the {op} identity")
        acc = Sym("acc", (inner.args[0],))
        step = updated
        if isinstance(step, Sym) and step.op == "where" and step.args[2] == acc:
            step = step.args[1]
        combine = {"sum": "add", "max": "max", "min": "min"}[op]
        if not (isinstance(step, Sym) and step.op == combine and acc in step.args):
            raise StridedMismatch("the reduction loop does not fold each row block into its accumulator")
        inner = step.args[1] if step.args[0] == acc else step.args[0]
    if inner != Sym("load", (0,)):
        raise StridedMismatch("the reduced values are computed from the load: other computation is fused in")
    return op, epilogue


def _strip_where(value: Any, op: str) -> Any:
    """``tl.where(mask, v, identity)`` -> v (Inductor's masking of the reduction's lanes)."""
    if isinstance(value, Sym) and value.op == "where" and isinstance(value.args[2], (int, float)) \
            and float(value.args[2]) == _IDENTITY[op]:
        return value.args[1]
    return value


__all__ = ["ColumnReduction", "PermuteCopy", "StridedMismatch", "contiguous_strides", "recognise_columns",
           "recognise_permute"]
