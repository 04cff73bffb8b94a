"""Small runtime pieces for a user kernel in a worker or a candidate process (imports triton inside
functions only): the JIT function under the decorators, the CPU interpreter's autotuning, and
the launch grid of a captured launch as a table.

* ``base_function(obj)``: the ``JITFunction`` (or the interpreter's ``InterpretedFunction``)
  under ``@triton.autotune`` / ``@triton.heuristics``.
* ``prepare_kernel(obj)``: on Triton's CPU interpreter an ``Autotuner`` with several configs asks
  the (absent) GPU driver for a benchmarker and fails; here it times each config on the wall
  clock instead (the interpreter's time, which is what runs). No-op on a GPU.
* ``TableGrid``: the wrapper's grid, evaluated by the checker for every set of meta-parameters
  a kernel may launch with; a candidate launch looks its grid up (never runs the wrapper's code).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def decorator_chain(obj: Any) -> list[Any]:
    """The kernel object and every decorator object under it, outermost first, down to the JIT function."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    chain = [obj]
    while isinstance(chain[-1], (Autotuner, Heuristics)) and len(chain) < 16:
        chain.append(chain[-1].fn)
    return chain


def base_function(obj: Any) -> Any:
    return decorator_chain(obj)[-1]


def autotuners(obj: Any) -> list[Any]:
    from triton.runtime.autotuner import Autotuner

    return [item for item in decorator_chain(obj) if isinstance(item, Autotuner)]


def _interpreter_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> float | list[float]:
    """Wall-clock time of one interpreted run (ms), in the shape Triton's benchmarker returns."""
    times = []
    for _run in range(2):
        begin = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - begin) * 1e3)
    best = min(times)
    return [best] * len(quantiles) if quantiles else best


def prepare_kernel(obj: Any) -> Any:
    """Make a kernel object launchable here (the CPU interpreter's autotuning); returns it."""
    if interpreting():
        for tuner in autotuners(obj):
            # ``do_bench`` is a cached_property: an instance entry takes precedence over it.
            tuner.__dict__["do_bench"] = _interpreter_bench
    return obj


def best_configs(obj: Any) -> list[dict[str, Any]]:
    """The configuration each autotuner of the chain chose for its last launch."""
    found = []
    for tuner in autotuners(obj):
        config = getattr(tuner, "best_config", None)
        if config is not None:
            found.append(jsonable(config.all_kwargs()))
    return found


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class TableGrid:
    """A launch grid by meta-parameter values: ``grid(meta)`` looks the values of ``keys`` up.

    Keys the checker saw the wrapper's grid read; a launch with values it was not evaluated for
    fails with a message that says so (the candidate chose meta-parameters the wrapper's grid
    was never asked about).
    """

    def __init__(self, keys: list[str], table: list[tuple[list[Any], list[int]]]):
        self.keys = list(keys)
        self.table = {tuple(_freeze(v) for v in values): tuple(int(g) for g in grid) for values, grid in table}

    def __call__(self, meta: Any) -> tuple[int, ...]:
        values = tuple(_freeze(_meta_value(meta, key)) for key in self.keys)
        grid = self.table.get(values)
        if grid is None:
            known = ", ".join(str(dict(zip(self.keys, k, strict=True))) for k in list(self.table)[:4])
            raise RuntimeError(f"the launch grid is known for {known}, not for "
                               f"{dict(zip(self.keys, values, strict=True))}: the wrapper's grid was evaluated for "
                               "the original's meta-parameters and the candidate's literal autotune configs only")
        return grid


class CompileTarget:
    """What gate 1's compile step (``sm90_compile.compile_source``) asks of a kernel object: the JIT
    function, its launch configs and ``_create_compile_meta(config)``, with the signature and
    constexpr values of the captured launch (a user kernel has no Inductor ``triton_meta``)."""

    def __init__(self, obj: Any, signature: dict[str, str], constants: dict[str, Any],
                 configs: list[dict[str, Any]]):
        import triton

        self.fn = base_function(obj)
        self.signature = dict(signature)
        self.constants = dict(constants)
        self.configs = [triton.Config(dict(c.get("kwargs") or {}), num_warps=int(c.get("num_warps") or 4),
                                      num_stages=int(c.get("num_stages") or 3)) for c in configs]

    def _create_compile_meta(self, config: Any) -> dict[str, Any]:
        return {"num_warps": config.num_warps, "num_stages": config.num_stages, "signature": dict(self.signature),
                "constants": {**self.constants, **config.kwargs}, "configs": []}


def _meta_value(meta: Any, key: str) -> Any:
    try:
        value = meta[key]
    except (KeyError, TypeError):
        return None
    return getattr(value, "value", value)  # tl.constexpr wraps its value


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


__all__ = ["CompileTarget", "TableGrid", "autotuners", "base_function", "best_configs", "decorator_chain", "interpreting",
           "jsonable", "prepare_kernel"]
