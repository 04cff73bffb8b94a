"""Recognise a pooling window in an Inductor kernel, exactly, or say why not.

Inductor writes max/avg pooling as a flat pointwise kernel: one masked scalar load per window
tap, every tap of the same input pointer at a constant offset, the padding in the masks (``other``
= -inf for max, 0 for avg), a chain of ``maximum`` or ``+`` and, for avg, a division by the
window's element count. :func:`recognise_window` states the hypothesis from the launch's tensors
(input (planes, H, W), output (planes, OH, OW), from the analyst's ``launch_args``) and checks it
against what the kernel really does at sample outputs chosen to hit every edge: each tap's address
and mask, the padding value, the combine chain and the divisor. Only an exact match yields a
:class:`PoolWindow` (kernel size, stride, padding, dilation, op, divisor rule); anything else is a
reason to decline, so the family never guesses.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from .kernel_eval import KernelEvalError, Sym, evaluate_kernel, leaves
from .kernel_source import KernelModule
from .launcher_source import DTYPES, NotRecognised, numel

MAX_TAP_OFFSET = 64  # |row| and |column| offsets of a tap considered when splitting its address
MAX_TAPS = 256


class WindowMismatch(NotRecognised):
    """The kernel is not a pooling window this package can rewrite exactly; the message says why."""


@dataclass(frozen=True)
class PoolWindow:
    """A 2D window op over ``planes`` contiguous (H, W) planes into contiguous (OH, OW) planes.

    1D pooling is the case H = OH = 1. ``divisor`` (avg only): ``include_pad`` (the window's
    extent clipped to the padded input, torch's count_include_pad), ``exclude_pad`` (its extent
    clipped to the input), ``scale`` (a constant factor ``scale``) or ``const`` (a division by the
    constant ``scale``).
    """

    op: str  # max | avg | sum
    planes: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    in_param: str
    out_param: str
    in_dtype: str  # tl.float32 ...
    out_dtype: str
    divisor: str | None = None
    scale: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def identity(self) -> str:
        return 'float("-inf")' if self.op == "max" else "0.0"

    def describe(self) -> str:
        kh, kw = self.kernel
        shape = f"{kw}" if kh == 1 and self.in_h == 1 else f"{kh}x{kw}"
        parts = [f"{self.op} window {shape}", f"stride {self.stride[1] if kh == 1 else self.stride}",
                 f"padding {self.padding[1] if kh == 1 else self.padding}"]
        if self.dilation != (1, 1):
            parts.append(f"dilation {self.dilation}")
        if self.divisor:
            parts.append({"include_pad": "count_include_pad", "exclude_pad": "count_include_pad=False",
                          "scale": f"times {self.scale!r}", "const": f"divided by {self.scale!r}"}[self.divisor])
        plane = f"{self.in_w}" if self.in_h == 1 else f"{self.in_h}x{self.in_w}"
        return ", ".join(parts) + f" over {self.planes} planes of {plane}"

    def divisor_constant(self) -> float | None:
        """The avg divisor when it is the same for every output (no window hangs past the padding)."""
        if self.divisor in ("scale", "const"):
            return None
        kh, kw = self.kernel
        (sh, sw), (ph, pw) = self.stride, self.padding
        if self.divisor == "include_pad":
            inside_h = (self.out_h - 1) * sh - ph + kh <= self.in_h + ph
            inside_w = (self.out_w - 1) * sw - pw + kw <= self.in_w + pw
            return float(kh * kw) if inside_h and inside_w else None
        if self.divisor == "exclude_pad" and ph == 0 and pw == 0:
            inside_h = (self.out_h - 1) * sh + kh <= self.in_h
            inside_w = (self.out_w - 1) * sw + kw <= self.in_w
            return float(kh * kw) if inside_h and inside_w else None
        return None


def _plane_views(shape: list[int]) -> list[tuple[int, int, int]]:
    """(planes, H, W) readings of a tensor: its last two dims pooled (2D), or its last one (1D, H = 1)."""
    views = []
    if len(shape) >= 3 or (len(shape) == 2 and shape[0] > 0):
        views.append((numel(shape[:-2]), shape[-2], shape[-1]))
    if len(shape) >= 1:
        views.append((numel(shape[:-1]), 1, shape[-1]))
    return list(dict.fromkeys(views))


def sample_points(planes: int, out_h: int, out_w: int) -> list[tuple[int, int, int]]:
    """Outputs that touch every edge case: the first and last planes, rows and columns near both
    borders (padding, ragged tiles) and a few in the middle."""

    def around(size: int) -> list[int]:
        picks = {0, 1, 2, 3, size // 2, size // 2 + 1, size - 4, size - 3, size - 2, size - 1}
        picks |= set(range(min(size, 12)))
        return sorted(p for p in picks if 0 <= p < size)

    plane_picks = sorted({0, planes // 2, planes - 1} & set(range(planes))) or [0]
    if planes > 1:
        plane_picks = sorted(set(plane_picks) | {1})
    return [(p, r, c) for p in plane_picks for r in around(out_h) for c in around(out_w)]


def recognise_window(module: KernelModule, launch_args: list[dict[str, Any]] | None) -> PoolWindow:
    """The exact pooling window of an Inductor pointwise kernel, or :class:`WindowMismatch`."""
    found = _recognise_cached(module.text, module.name, _freeze(launch_args))
    if isinstance(found, str):
        raise WindowMismatch(found)
    return found


def _freeze(args: list[dict[str, Any]] | None) -> tuple:
    return tuple((a.get("name"), tuple(a.get("shape") or ()), tuple(a.get("stride") or ()), a.get("dtype"))
                 for a in (args or []) if isinstance(a, dict) and a.get("shape") is not None)


@lru_cache(maxsize=64)
def _recognise_cached(text: str, name: str, args: tuple) -> PoolWindow | str:
    from .kernel_source import KernelSourceError, parse_kernel_module

    try:
        module = parse_kernel_module(text, name)
        return _recognise(module, [{"name": n, "shape": list(s), "stride": list(st), "dtype": d}
                                   for n, s, st, d in args])
    except (WindowMismatch, KernelEvalError, KernelSourceError) as exc:
        return str(exc)


def _recognise(module: KernelModule, launch_args: list[dict[str, Any]]) -> PoolWindow:

    if module.heuristic != "pointwise" or module.func is None:
        raise WindowMismatch(f"not a pointwise kernel ({module.heuristic})")
    if set(module.block_params) != {"XBLOCK"}:
        raise WindowMismatch("not a one-dimensional pointwise kernel (blocks "
                             f"{', '.join(module.block_params) or 'none'})")
    pointers = [p for p in module.params if "ptr" in p]
    inputs = [p for p in pointers if p.startswith("in_ptr")]
    outputs = [p for p in pointers if p.startswith(("out_ptr", "in_out_ptr"))]
    if len(inputs) != 1 or len(outputs) != 1:
        raise WindowMismatch(f"a window reads one input and writes one output; this kernel has inputs {inputs} "
                             f"and outputs {outputs}")
    xnumel = module.numels.get("xnumel")
    if xnumel is None:
        raise WindowMismatch("xnumel is not fixed in the kernel (dynamic shapes)")
    args = {a["name"]: a for a in launch_args}
    if inputs[0] not in args or outputs[0] not in args:
        raise WindowMismatch("the launch's tensor shapes are unknown (no launch arguments in the evidence)")
    in_arg, out_arg = args[inputs[0]], args[outputs[0]]
    for arg in (in_arg, out_arg):
        if arg.get("dtype") not in DTYPES:
            raise WindowMismatch(f"{arg['name']} is {arg.get('dtype')}: only float32/float16/bfloat16 windows")
    pairs = [(i, o) for i in _plane_views(list(in_arg["shape"])) for o in _plane_views(list(out_arg["shape"]))
             if i[0] == o[0] and o[0] * o[1] * o[2] == xnumel]
    if not pairs:
        raise WindowMismatch(f"input {in_arg['shape']} and output {out_arg['shape']} are not planes pooled into "
                             f"planes of xnumel={xnumel} elements")
    problems = []
    for (planes, in_h, in_w), (_, out_h, out_w) in pairs:
        try:
            return _fit(module, inputs[0], outputs[0], in_arg, out_arg, planes, in_h, in_w, out_h, out_w)
        except WindowMismatch as exc:
            problems.append(str(exc))
    raise WindowMismatch(problems[0])


def _fit(module: KernelModule, in_param: str, out_param: str, in_arg: dict[str, Any], out_arg: dict[str, Any],
         planes: int, in_h: int, in_w: int, out_h: int, out_w: int) -> PoolWindow:
    """Check the hypothesis "planes of (in_h, in_w) pooled into (out_h, out_w)" at the sample outputs."""
    import numpy as np

    assert module.func is not None
    inputs, outputs = [in_param], [out_param]
    points = sample_points(planes, out_h, out_w)
    p = np.array([q[0] for q in points], dtype=np.int64)
    oh = np.array([q[1] for q in points], dtype=np.int64)
    ow = np.array([q[2] for q in points], dtype=np.int64)
    flat = (p * out_h + oh) * out_w + ow
    evaluation = evaluate_kernel(module.func, {"x": flat})

    def full(value: Any, dtype: Any) -> Any:
        return np.broadcast_to(np.asarray(value, dtype=dtype), flat.shape)

    if len(evaluation.stores) != 1:
        raise WindowMismatch(f"{len(evaluation.stores)} stores: a window writes one output")
    store = evaluation.stores[0]
    if store.pointer != outputs[0] or not np.array_equal(full(store.offset, np.int64), flat):
        raise WindowMismatch("the store is not the contiguous output element of each index")
    if not bool(np.all(full(store.mask, bool))):
        raise WindowMismatch("the store is masked inside the output")
    loads = evaluation.loads
    if not 2 <= len(loads) <= MAX_TAPS:
        raise WindowMismatch(f"{len(loads)} loads: not a window")
    if any(load.pointer != inputs[0] for load in loads):
        raise WindowMismatch("loads of more than one tensor: the window is fused with other inputs")
    op, tree, divisor = _value_shape(store.value)
    if sorted(t.args[0] for t in tree) != list(range(len(loads))):
        raise WindowMismatch("the stored value does not combine every load exactly once")
    identity = -math.inf if op == "max" else 0.0
    for load in loads:
        if load.other != identity:
            raise WindowMismatch(f"line {load.line}: masked lanes read {load.other}, not the {op} identity "
                                 f"{identity}")
    # Strides and plane size from the first tap's addresses at neighbouring outputs.
    addresses = [full(load.offset, np.int64) for load in loads]
    masks = [full(load.mask, bool) for load in loads]
    index = {q: i for i, q in enumerate(points)}

    def at(tap: int, q: tuple[int, int, int]) -> int:
        # sample_points holds the origin and, where the output has more than one, its next plane, row
        # and column: every point asked for here
        return int(addresses[tap][index[q]])

    base = at(0, (0, 0, 0))
    sw = (at(0, (0, 0, 1)) - base) if out_w > 1 else 1
    sh_w = (at(0, (0, 1, 0)) - base) if out_h > 1 else in_w
    if sh_w % in_w or sh_w <= 0 or sw <= 0:
        raise WindowMismatch("the taps do not move by whole input rows and columns per output")
    sh = sh_w // in_w
    if planes > 1 and at(0, (1, 0, 0)) - base != in_h * in_w:
        raise WindowMismatch("the input planes are not contiguous (H*W elements apart)")
    row = oh * sh
    col = ow * sw
    taps: list[tuple[int, int]] = []
    for i, load in enumerate(loads):
        c0 = at(i, (0, 0, 0))
        matches = []
        for dh in range(-MAX_TAP_OFFSET, MAX_TAP_OFFSET + 1):
            dw = c0 - dh * in_w
            if abs(dw) > MAX_TAP_OFFSET + in_w:
                continue
            ih, iw = row + dh, col + dw
            want = p * (in_h * in_w) + ih * in_w + iw
            if not np.array_equal(addresses[i], want):
                continue
            live = (ih >= 0) & (ih < in_h) & (iw >= 0) & (iw < in_w)
            if np.array_equal(masks[i], live):
                matches.append((dh, dw))
        if len(matches) != 1:
            raise WindowMismatch(f"line {load.line}: the load is not one tap of a padded window "
                                 f"({'no' if not matches else 'several'} row/column offsets fit its address and mask)")
        taps.append(matches[0])
    kernel, padding, dilation = _grid(taps)
    window = PoolWindow(op=op, planes=planes, in_h=in_h, in_w=in_w, out_h=out_h, out_w=out_w, kernel=kernel,
                        stride=(sh, sw), padding=padding, dilation=dilation, in_param=inputs[0],
                        out_param=outputs[0], in_dtype=DTYPES[in_arg["dtype"]], out_dtype=DTYPES[out_arg["dtype"]])
    if op == "avg":
        window = _with_divisor(window, divisor, oh, ow)
    return window


def _value_shape(value: Any) -> tuple[str, list[Sym], Any]:
    """(op, the loads it combines, the divisor) of the stored value."""
    if isinstance(value, Sym) and value.op == "max":
        found = leaves(value, "max")
        if found is not None:
            return "max", found, None
    if isinstance(value, Sym) and value.op in ("div", "mul") and isinstance(value.args[0], Sym):
        found = leaves(value.args[0], "add")
        if found is not None and not isinstance(value.args[1], Sym):
            return "avg", found, (value.op, value.args[1])
    if isinstance(value, Sym) and value.op == "add":
        found = leaves(value, "add")
        if found is not None:
            return "sum", found, None
    raise WindowMismatch("the stored value is not a chain of maxima or a sum (divided by a count) of the loads: "
                         "other computation is fused in")


def _grid(taps: list[tuple[int, int]]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    rows = sorted({t[0] for t in taps})
    cols = sorted({t[1] for t in taps})
    if len(taps) != len(set(taps)) or len(rows) * len(cols) != len(taps):
        raise WindowMismatch("the taps do not form a rectangular window")

    def spacing(values: list[int]) -> int:
        if len(values) == 1:
            return 1
        steps = {b - a for a, b in zip(values, values[1:], strict=False)}
        if len(steps) != 1:
            raise WindowMismatch(f"tap offsets {values} are not evenly spaced")
        return steps.pop()

    dh, dw = spacing(rows), spacing(cols)
    ph, pw = -rows[0], -cols[0]
    if ph < 0 or pw < 0:
        raise WindowMismatch("the window starts after its output position (negative padding)")
    return (len(rows), len(cols)), (ph, pw), (dh, dw)


def _with_divisor(window: PoolWindow, divisor: Any, oh: Any, ow: Any) -> PoolWindow:
    import numpy as np

    kind, value = divisor
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        from dataclasses import replace

        return replace(window, divisor="scale" if kind == "mul" else "const", scale=float(value))
    if kind != "div":
        raise WindowMismatch("the average is multiplied by something that is not a constant")
    got = np.asarray(value, dtype=np.float64)
    for rule in ("include_pad", "exclude_pad"):
        if np.array_equal(np.broadcast_to(got, oh.shape), divisor_values(window, rule, oh, ow)):
            from dataclasses import replace

            return replace(window, divisor=rule)
    raise WindowMismatch("the average's divisor matches neither count_include_pad rule")


def divisor_values(window: PoolWindow, rule: str, oh: Any, ow: Any) -> Any:
    """torch's avg_pool divisor at outputs (oh, ow) for ``rule`` (include_pad / exclude_pad)."""
    import numpy as np

    (kh, kw), (sh, sw), (ph, pw) = window.kernel, window.stride, window.padding

    def extent(start: Any, k: int, size: int, pad: int) -> Any:
        end = np.minimum(start + k, size + pad)
        if rule == "include_pad":
            return end - start
        return np.minimum(end, size) - np.maximum(start, 0)

    return (extent(oh * sh - ph, kh, window.in_h, ph) * extent(ow * sw - pw, kw, window.in_w, pw)).astype(np.float64)


__all__ = ["PoolWindow", "WindowMismatch", "divisor_values", "recognise_window", "sample_points"]
