"""The CPU Triton backend: make Inductor emit *and run* real Triton kernels without a GPU.

This is the one place for every shim this needs. It combines:

* ``torch._inductor.config.cpu_backend = "triton"`` so Inductor writes Triton kernels for CPU tensors;
* ``TRITON_INTERPRET=1`` so Triton runs those kernels in its numpy interpreter;
* a numpy implementation of the ``libdevice`` functions Inductor calls, which the interpreter
  leaves as stubs that return ``None``;
* a fixed "backend" for Inductor's cache hash, which otherwise asks the (absent) GPU driver;
* a seeded shuffle of the interpreter's program order (:func:`shuffled_program_order`), which gate 2
  uses to expose races that the interpreter's in-order walk hides.

Call :func:`activate` *before* Triton is imported anywhere (it sets ``TRITON_INTERPRET``, which
Triton reads at import). Nothing here is needed on a machine with a GPU.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_ACTIVE = False


def activate() -> None:
    """Switch this process to the CPU Triton backend. Idempotent."""
    global _ACTIVE
    if _ACTIVE:
        return
    os.environ["TRITON_INTERPRET"] = "1"
    from ..quiet import silence_known_torch_noise

    silence_known_torch_noise()  # Triton's "no active CPU backend" warning is wrong under the interpreter
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton

    inductor_config.cpu_backend = "triton"
    # Inductor hashes the Triton backend into its cache keys; with no GPU driver the lookup raises.
    torch_triton.triton_hash_with_backend = _interpreter_backend_hash
    torch_triton.triton_backend = _sm90_backend
    _install_libdevice_shim()
    _install_fast_reductions()
    _ACTIVE = True


def is_active() -> bool:
    return _ACTIVE


def _interpreter_backend_hash() -> str:
    return hashlib.sha256(b"kernelopt-cpu-triton-interpreter").hexdigest().upper()


def _sm90_backend() -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    return make_backend(GPUTarget("cuda", 90, 32))


# --- reductions ------------------------------------------------------------------------------


def _install_fast_reductions() -> None:
    """Reduce with numpy when the combine function is one of Inductor's helpers.

    The interpreter only knows Triton's own combine functions; for Inductor's ``maximum``,
    ``minimum`` and ``*_with_index`` it calls the combine function element by element, which
    takes seconds per row. These numpy versions keep the helpers' NaN semantics (NaN wins).
    """
    import numpy as np
    from torch._inductor.runtime import triton_helpers as th
    from triton.runtime import interpreter

    original = interpreter.ReduceOps.apply_impl

    def values(op: Any, fn: Callable[..., Any], data: Any) -> Any:
        return fn(data, axis=op.axis, keepdims=op.keep_dims)

    def with_index(op: Any, inputs: Any, pick: Callable[..., Any]) -> Any:

        value, index = inputs[0].handle.data, inputs[1].handle.data
        nan = np.isnan(value) if np.issubdtype(value.dtype, np.floating) else np.zeros(value.shape, bool)
        # NaN wins; among equal values the lowest position (Inductor passes ascending indices).
        position = np.where(nan.any(axis=op.axis, keepdims=True), np.argmax(nan, axis=op.axis, keepdims=True),
                            pick(np.where(nan, 0, value), axis=op.axis, keepdims=True))
        picked_value = np.take_along_axis(value, position, axis=op.axis)
        picked_index = np.take_along_axis(index, position, axis=op.axis)
        if not op.keep_dims:
            picked_value = np.squeeze(picked_value, axis=op.axis)
            picked_index = np.squeeze(picked_index, axis=op.axis)
        return [op.to_tensor(picked_value, inputs[0].dtype), op.to_tensor(picked_index, inputs[1].dtype)]

    def apply_impl(self: Any, inputs: Any) -> Any:
        fn = self.combine_fn
        if self.axis is not None:
            data = inputs[0].handle.data
            if fn is th.maximum:
                return self.to_tensor(values(self, np.max, data), inputs[0].dtype)
            if fn is th.minimum:
                return self.to_tensor(values(self, np.min, data), inputs[0].dtype)
            if fn is th._prod_accumulate:
                return self.to_tensor(values(self, np.prod, data), inputs[0].dtype)
            if fn is th.maximum_with_index and len(inputs) == 2:
                return with_index(self, inputs, np.argmax)
            if fn is th.minimum_with_index and len(inputs) == 2:
                return with_index(self, inputs, np.argmin)
        return original(self, inputs)

    interpreter.ReduceOps.apply_impl = apply_impl


# --- libdevice -------------------------------------------------------------------------------


def _np_unary(name: str) -> Callable[[Any], Any]:
    import numpy as np

    return getattr(np, name)


def _numpy_table() -> dict[str, tuple[Callable[..., Any], bool]]:
    """libdevice name -> (numpy function, returns a boolean)."""
    import math

    import numpy as np

    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
    erfinv = np.vectorize(_erfinv, otypes=[np.float64])

    def rsqrt(x: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 / np.sqrt(x)

    def ilogb(x: Any) -> Any:
        return np.frexp(x)[1].astype(np.int32) - 1

    table: dict[str, tuple[Callable[..., Any], bool]] = {}
    for name in (
        "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "sin", "cos", "tan",
        "sinh", "cosh", "tanh", "floor", "ceil", "trunc", "fabs", "abs",
    ):
        table[name] = (_np_unary(name), False)
    aliases: dict[str, Callable[..., Any]] = {
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
        "acosh": np.arccosh, "atanh": np.arctanh, "atan2": np.arctan2, "pow": np.power,
        "fmod": np.fmod, "copysign": np.copysign, "hypot": np.hypot, "nextafter": np.nextafter,
        "nearbyint": np.rint, "rint": np.rint, "round": np.round, "fmax": np.fmax, "fmin": np.fmin,
        "ldexp": lambda x, e: np.ldexp(x, np.asarray(e, dtype=np.int32)),
        "fma": lambda a, b, c: a * b + c, "rsqrt": rsqrt, "erf": erf, "erfc": erfc,
        "lgamma": lgamma, "erfinv": erfinv, "ilogb": ilogb, "sqrt_rn": np.sqrt,
        "div_rn": np.divide, "exp10": lambda x: np.power(10.0, x),
    }
    for alias, fn in aliases.items():
        table[alias] = (fn, False)
    for name, fn in {"isnan": np.isnan, "isinf": np.isinf, "isfinited": np.isfinite,
                     "finitef": np.isfinite, "signbit": np.signbit}.items():
        table[name] = (fn, True)
    return table


def _erfinv(y: float) -> float:
    # Newton iterations on erf; libdevice's erfinv is only used by rare ops (e.g. torch.erfinv).
    import math

    if y <= -1.0:
        return -math.inf
    if y >= 1.0:
        return math.inf
    x = 0.0
    for _ in range(60):
        err = math.erf(x) - y
        x -= err / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def _make_shim(fn: Callable[..., Any], returns_bool: bool) -> Callable[..., Any]:
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def shim(*args: Any, **_: Any) -> Any:
        like = next((a for a in args if isinstance(a, tl.tensor)), None)
        values = []
        for a in args:
            if isinstance(a, tl.tensor):
                values.append(a.handle.data)
            elif isinstance(a, tl.constexpr):
                values.append(a.value)
            else:
                values.append(a)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values))
        if like is None:
            return out.item()
        if returns_bool:
            scalar = tl.int1
            data = out.astype(np.bool_)
        elif np.issubdtype(out.dtype, np.integer):
            scalar = tl.int32
            data = out.astype(np.int32)
        else:
            scalar = like.dtype if like.dtype.is_floating() else tl.float32
            data = out.astype(_np_float(scalar))
        ty = tl.block_type(scalar, list(data.shape)) if data.shape else scalar
        return tl.tensor(TensorHandle(data, scalar), ty)

    return shim


def _np_float(dtype: Any) -> Any:
    import numpy as np
    import triton.language as tl

    return {tl.float64: np.float64, tl.float16: np.float16}.get(dtype, np.float32)


def _install_libdevice_shim() -> None:
    """Give every libdevice stub Inductor may call a numpy body."""
    from triton.language.extra import libdevice

    modules = [libdevice]
    try:  # the CUDA flavour that Inductor's triton_compat may pick instead
        from triton.language.extra.cuda import libdevice as cuda_libdevice

        modules.append(cuda_libdevice)
    except ImportError:
        pass
    for name, (fn, returns_bool) in _numpy_table().items():
        shim = _make_shim(fn, returns_bool)
        for module in modules:
            setattr(module, name, shim)


@contextmanager
def shuffled_program_order(seed: int) -> Iterator[None]:
    """On the CPU interpreter, run a grid's program instances in a seeded random order.

    The interpreter walks the grid in order, which hides races and order-dependent float
    atomics; permuting the order (a bijection on program ids) exposes them. No-op on a GPU.
    """
    try:
        from triton.runtime import interpreter
    except ImportError:
        yield
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    if builder is None or not hasattr(builder, "set_grid_idx"):
        yield
        return
    original = builder.set_grid_idx
    permutations: dict[tuple[int, int, int], list[int]] = {}

    def permuted(x: int, y: int, z: int) -> Any:
        gx, gy, gz = builder.grid_dim
        key = (gx, gy, gz)
        if key not in permutations:
            order = list(range(gx * gy * gz))
            random.Random(seed).shuffle(order)
            permutations[key] = order
        linear = permutations[key][(x * gy + y) * gz + z]
        return original(linear // (gy * gz), (linear // gz) % gy, linear % gz)

    builder.set_grid_idx = permuted
    try:
        yield
    finally:
        builder.set_grid_idx = original
