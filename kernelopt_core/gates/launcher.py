"""The launcher contract, as code: rewrite a kernel module's launch configuration.

The wrapper launches every kernel as ``kernel.run(<runtime args>, stream=...)``; the
``@triton_heuristics.<kind>(...)`` decorator makes the ``@triton.jit`` function the object that has
``run``, picks the block sizes and ``num_warps``/``num_stages`` from its configs, and computes the grid
from ``inductor_meta['grid_type']``. A candidate changes its launch configuration by changing that
decorator (the full contract: docs/gates.md, "The launcher contract"):

* one fixed config: ``@triton_heuristics.fixed_config(config={'XBLOCK': 64, 'num_warps': 2}, ...)``;
* several, autotuned on the GPU (the CPU interpreter runs the first): ``user_autotune(configs=[...])``;
* its own grid: ``inductor_meta['grid_type'] = 'PrecomputedGrid'`` with ``precomputed_grids``, one
  entry per config, each a Python expression per grid axis over the kernel's runtime arguments.

Pure Python (:mod:`ast`), no torch: the agents write candidates with it, the tests the adversarial corpus.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ..artifacts.parse import node_span


class LauncherEditError(ValueError):
    """The kernel module does not have the shape this edit expects."""


def _heuristics_decorator(tree: ast.Module, kernel_name: str) -> ast.Call:
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel_name), None)
    if func is None:
        raise LauncherEditError(f"no function named {kernel_name}")
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and ast.unparse(deco.func).startswith("triton_heuristics."):
            return deco
    raise LauncherEditError(f"{kernel_name} has no @triton_heuristics.<kind>(...) decorator")


def _keyword_source(source: str, call: ast.Call, name: str) -> str | None:
    for kw in call.keywords:
        if kw.arg == name:
            return ast.get_source_segment(source, kw.value)
    return None


def set_launch_configs(source: str, kernel_name: str, configs: Sequence[dict[str, Any]],
                       grid: Sequence[str | int] | None = None) -> str:
    """Replace the kernel's heuristics decorator by explicit launch configs (and optionally a grid).

    ``configs`` are dicts of constexpr values plus ``num_warps``/``num_stages``; ``grid`` holds one
    Python expression per axis over the runtime arguments, with ``{NAME}`` standing for a config
    value (e.g. ``("-(-xnumel // {XBLOCK})", 1, 1)``).
    """
    if not configs:
        raise LauncherEditError("at least one launch config is needed")
    tree = ast.parse(source)
    call = _heuristics_decorator(tree, kernel_name)
    triton_meta = _keyword_source(source, call, "triton_meta")
    inductor_meta = _keyword_source(source, call, "inductor_meta")
    if triton_meta is None or inductor_meta is None:
        raise LauncherEditError(f"{kernel_name}'s decorator lacks triton_meta or inductor_meta")
    if grid is not None:
        inductor_meta = _with_precomputed_grid(inductor_meta, configs, grid)
    if len(configs) == 1:
        head = f"triton_heuristics.fixed_config(\n    config={dict(configs[0])!r},"
    else:
        head = f"triton_heuristics.user_autotune(\n    configs={[dict(c) for c in configs]!r},"
    text = f"{head}\n    filename=__file__,\n    triton_meta={triton_meta},\n    inductor_meta={inductor_meta},\n)"
    start, end = node_span(source, call)
    return source[:start] + text + source[end:]


def _with_precomputed_grid(inductor_meta: str, configs: Sequence[dict[str, Any]],
                           grid: Sequence[str | int]) -> str:
    node = ast.parse(inductor_meta, mode="eval").body
    if not isinstance(node, ast.Dict):
        raise LauncherEditError("inductor_meta is not a dict literal")
    entries = []
    for config in configs:
        values = {k: v for k, v in config.items() if k not in ("num_warps", "num_stages")}
        axes = [axis.format(**values) if isinstance(axis, str) else axis for axis in grid]
        axes += [1] * (3 - len(axes))
        entries.append({"config": values, "python": axes, "cpp": axes})
    kept = [f"{ast.get_source_segment(inductor_meta, k)}: {ast.get_source_segment(inductor_meta, v)}"
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None and ast.literal_eval(k) not in ("grid_type", "precomputed_grids")]
    kept += ["'grid_type': 'PrecomputedGrid'", f"'precomputed_grids': {entries!r}"]
    return "{" + ", ".join(kept) + "}"
