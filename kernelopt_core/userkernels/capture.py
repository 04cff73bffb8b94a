"""Capture a user kernel's launches while its harness runs. Worker side (imports inside functions).

``kernel[grid](*args, **kwargs)`` calls ``kernel.run(*args, grid=grid, warmup=False, **kwargs)``
on the outermost object (an ``Autotuner``, ``Heuristics`` or the ``JITFunction``); autotuning then
calls the JIT function once per config it tries and once more for the real launch. An instance
attribute ``run`` on each of the two objects records, per launch of the wrapper: what the wrapper
passed (arguments, tensors cloned *before* the launch so in-place arguments keep their input
values, and the grid), what the JIT function received at the real launch (every keyword, the
autotuner's or heuristics' choices included, and the resolved grid), and each autotuner's chosen
configuration. The originals are restored on exit. :func:`launch_plan` turns one capture into the
JSON a generated launcher needs (:mod:`.launcher`): which arguments are runtime values and which
are literals, and the grid as a table over the meta-parameters it reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..gates.launch_capture import clone_value
from .runtime import best_configs, decorator_chain, jsonable

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")
MAX_LAUNCHES = 4


class LaunchPlanError(ValueError):
    """A captured launch cannot be written as a launcher (an argument of a kind it cannot carry)."""


@dataclass
class UserLaunch:
    index: int
    args: list[Any]
    kwargs: dict[str, Any]
    grid: Any  # as the wrapper passed it (a tuple or a callable)
    resolved_grid: tuple[int, ...] | None = None
    resolved_kwargs: dict[str, Any] = field(default_factory=dict)
    autotune: list[dict[str, Any]] = field(default_factory=list)
    grid_meta: dict[str, Any] | None = None  # the meta dict the grid callable was given at the real launch
    grid_reads: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the wrapper's launch, autotuning included on a first call


@dataclass
class Capture:
    launches: list[UserLaunch] = field(default_factory=list)  # the first few, with their arguments
    count: int = 0  # every launch of the kernel while capturing


class _ReadingMeta(dict[str, Any]):
    """The grid's meta dict, noting which keys the grid reads."""

    def __init__(self, data: Any, reads: list[str]):
        super().__init__(data)
        self._reads = reads

    def __getitem__(self, key: Any) -> Any:
        if key not in self._reads:
            self._reads.append(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self._reads:
            self._reads.append(key)
        return super().get(key, default)


def _synchronize(values: list[Any]) -> None:
    import torch

    if torch.cuda.is_available() and any(isinstance(v, torch.Tensor) and v.is_cuda for v in values):
        torch.cuda.synchronize()


@contextmanager
def capturing(obj: Any, limit: int = MAX_LAUNCHES) -> Iterator[Capture]:
    """Record up to ``limit`` launches of the kernel object ``obj`` (its decorators included)."""
    chain = decorator_chain(obj)
    outer, base = chain[0], chain[-1]
    capture = Capture()
    captured = capture.launches
    state: dict[str, Any] = {"depth": 0, "last": None}

    def resolve(grid: Any) -> Any:
        if not callable(grid):
            state["last_grid"] = tuple(int(g) for g in grid)
            return grid

        def spy(meta: Any) -> Any:
            reads: list[str] = []
            result = grid(_ReadingMeta(meta, reads))
            state["last_grid"] = tuple(int(g) for g in result)
            state["last_meta"] = dict(meta)
            state["last_reads"] = reads
            return result

        return spy

    def wrapper_launch(target: Any, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any]) -> Any:
        index = capture.count
        capture.count += 1
        keep = index < limit
        launch = UserLaunch(index, [clone_value(a) for a in args] if keep else [],
                            {k: clone_value(v) for k, v in kwargs.items()} if keep else {}, grid)
        state["depth"] += 1
        state["last"] = None
        begin = time.perf_counter()
        try:
            result = _call_run(target, args, grid, kwargs, resolve if target is base else None)
            _synchronize(list(args))
        finally:
            state["depth"] -= 1
        launch.seconds = time.perf_counter() - begin
        if keep:
            last = state.get("last") or {}
            launch.resolved_kwargs = last.get("kwargs", dict(kwargs))
            launch.resolved_grid = state.get("last_grid")
            launch.grid_meta = state.get("last_meta")
            launch.grid_reads = list(state.get("last_reads") or [])
            launch.autotune = best_configs(outer)
            captured.append(launch)
        return result

    def outer_run(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup or state["depth"]:
            return _call_run(outer, args, grid, kwargs, None, warmup)
        return wrapper_launch(outer, args, grid, kwargs)

    def base_run(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup:
            return _call_run(base, args, grid, kwargs, None, True)
        if state["depth"] == 0:  # a plain @triton.jit launched by the wrapper
            return wrapper_launch(base, args, grid, kwargs)
        state["last"] = {"kwargs": dict(kwargs)}
        return _call_run(base, args, grid, kwargs, resolve)

    patched = [(base, base_run)] + ([(outer, outer_run)] if outer is not base else [])
    for target, function in patched:
        target.run = function
    try:
        yield capture
    finally:
        for target, _ in patched:
            try:
                del target.run
            except AttributeError:
                pass


def _call_run(target: Any, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any], resolve: Any,
              warmup: bool = False) -> Any:
    launch_grid = resolve(grid) if resolve is not None else grid
    return type(target).run(target, *args, grid=launch_grid, warmup=warmup, **kwargs)


def capture_launches(harness: Any, inputs: list[Any], limit: int = MAX_LAUNCHES) -> tuple[Capture, Any]:
    """Run the harness once on ``inputs``; the kernel's launches and the harness's output."""
    with capturing(harness.kernel_object, limit) as capture:
        output = harness.run(inputs)
        _synchronize(list(inputs))
    return capture, output


def plan_values(launch: UserLaunch, plan: dict[str, Any]) -> list[Any]:
    """The values of a plan's launcher arguments, from the captured launch (worker side)."""
    values: list[Any] = [None] * len(plan["arguments"])
    for item, value in zip(plan["positional"], launch.args, strict=False):
        if "arg" in item:
            values[item["arg"]] = value
    for key, item in plan["keywords"].items():
        if "arg" in item:
            values[item["arg"]] = launch.kwargs[key]
    for key, item in plan["pinned"]["keywords"].items():
        if "arg" in item and values[item["arg"]] is None and key in launch.resolved_kwargs:
            values[item["arg"]] = launch.resolved_kwargs[key]
    return values


# --- the launch, as JSON for a generated launcher ------------------------------------------------------


def literal_text(value: Any) -> str:
    """Python source for a literal meta-parameter or option value."""
    import math

    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    try:
        import triton.language as tl

        if isinstance(value, tl.dtype):
            for attr in dir(tl):
                if not attr.startswith("_") and getattr(tl, attr, None) is value:
                    return f"tl.{attr}"
    except ImportError:
        pass
    raise LaunchPlanError(f"a launch argument of type {type(value).__name__} ({value!r}) cannot be written as a literal")


def _is_runtime_scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tensor_spec(value: Any) -> dict[str, Any]:
    return {"dtype": str(value.dtype), "shape": list(value.shape), "stride": list(value.stride())}


def launch_plan(launch: UserLaunch, params: list[str], constexprs: list[str],
                candidate_configs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """How to repeat ``launch`` from a generated launcher (JSON): the launcher's arguments, the
    literals, the wrapper's grid (as a table over the meta-parameters it reads) and the pinned
    launch the JIT function received."""
    import torch

    slots: list[dict[str, Any]] = []  # the launcher's arguments: {param, kind, dtype/shape/stride or value}

    def slot(param: str, value: Any) -> dict[str, Any]:
        if isinstance(value, torch.Tensor):  # one tensor passed twice stays one argument
            for index, existing in enumerate(slots):
                if existing.get("_value") is value:
                    return {"arg": index}
        entry: dict[str, Any] = {"param": param, "_value": value}
        if isinstance(value, torch.Tensor):
            entry.update(kind="tensor", **_tensor_spec(value))
        else:
            entry.update(kind="scalar", value=value)
        slots.append(entry)
        return {"arg": len(slots) - 1}

    def encode(param: str, value: Any) -> dict[str, Any]:
        if isinstance(value, torch.Tensor):
            return slot(param, value)
        if param not in constexprs and param not in LAUNCH_OPTIONS and _is_runtime_scalar(value):
            return slot(param, value)
        return {"literal": literal_text(value)}

    positional = [encode(params[i] if i < len(params) else f"arg{i}", v) for i, v in enumerate(launch.args)]
    keywords = {k: encode(k, v) for k, v in launch.kwargs.items()}
    outer_values: dict[int, int | str] = {id(v): i for i, v in enumerate(launch.args) if isinstance(v, torch.Tensor)}
    outer_values |= {id(v): k for k, v in launch.kwargs.items() if isinstance(v, torch.Tensor)}
    pinned_keywords: dict[str, Any] = {}
    for key, value in launch.resolved_kwargs.items():
        if key in launch.kwargs and launch.kwargs[key] is value:
            pinned_keywords[key] = keywords[key]
        elif isinstance(value, torch.Tensor) and id(value) in outer_values:
            position = outer_values[id(value)]
            pinned_keywords[key] = positional[position] if isinstance(position, int) else keywords[position]
        else:
            pinned_keywords[key] = encode(key, value)
    plan: dict[str, Any] = {
        "arguments": [{k: v for k, v in s.items() if k != "_value"} for s in slots],
        "positional": positional, "keywords": keywords,
        "pinned": {"keywords": pinned_keywords,
                   "grid": list(launch.resolved_grid) if launch.resolved_grid is not None else None},
        "autotune": launch.autotune,
    }
    plan["grid"] = grid_table(launch, constexprs, candidate_configs or [])
    return plan


def grid_table(launch: UserLaunch, constexprs: list[str], candidate_configs: list[dict[str, Any]]) -> dict[str, Any]:
    """The wrapper's grid: a fixed tuple, or its values for every meta-parameter set a launch may use."""
    if not callable(launch.grid):
        return {"tuple": [int(g) for g in launch.grid]}
    meta = dict(launch.grid_meta or {})
    keys = [k for k in launch.grid_reads if k in constexprs or any(k in c for c in candidate_configs)]
    rows: list[list[Any]] = []
    seen: set[str] = set()
    for overrides in [{}, *candidate_configs]:
        values = {**meta, **{k: v for k, v in overrides.items() if k not in LAUNCH_OPTIONS}}
        try:
            grid = tuple(int(g) for g in launch.grid(values))
        except Exception:  # noqa: BLE001 - a meta set the wrapper's grid cannot take: no row for it
            continue
        key_values = [jsonable(getattr(values.get(k), "value", values.get(k))) for k in keys]
        marker = repr(key_values)
        if marker not in seen:
            seen.add(marker)
            rows.append([key_values, list(grid)])
    return {"keys": keys, "table": rows}


def launch_summary(launch: UserLaunch, params: list[str], roles: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A captured launch for reports and hovers (tensors as metadata only)."""
    import torch

    def describe(name: str, value: Any) -> dict[str, Any]:
        if isinstance(value, torch.Tensor):
            return {"name": name, **_tensor_spec(value), "role": (roles or {}).get(name, "input")}
        return {"name": name, "value": jsonable(value)}

    args = [describe(params[i] if i < len(params) else f"arg{i}", v) for i, v in enumerate(launch.args)]
    args += [describe(k, v) for k, v in launch.kwargs.items()]
    meta = {k: jsonable(v) for k, v in launch.resolved_kwargs.items() if not isinstance(v, torch.Tensor)}
    return {"index": launch.index, "args": args, "grid": list(launch.resolved_grid or []),
            "grid_source": "callable" if callable(launch.grid) else "tuple", "meta": meta,
            "autotune": launch.autotune, "caller_keywords": sorted(launch.kwargs),
            "first_call_seconds": round(launch.seconds, 6)}


__all__ = ["Capture", "LaunchPlanError", "UserLaunch", "capture_launches", "capturing", "grid_table",
           "launch_plan", "launch_summary", "literal_text", "plan_values"]
