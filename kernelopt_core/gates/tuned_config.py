"""The original kernel's tuned launch config, given to a candidate that keeps the original's config space.

A candidate loaded in a fresh process autotunes on its first launch: every config of its heuristics,
then coordinate descent under max-autotune, seconds at a 12 GB working set. A rewrite that leaves the
``@triton_heuristics`` decorator as the original had it (hints, fast math, eviction policies, index
types) has the same configs, sizes and metadata; the original's config, as its graph tuned it, is then
the candidate's launch config (:func:`.sandbox.pinned_config.pin_config`, in its process), and it is timed
against the original at the original's config. A rewrite that changes the decorator tunes as before.

This is the worker's side: it reads the loaded baseline and the two sources. Torch is not imported.
"""

from __future__ import annotations

import ast
from typing import Any

from ..sandbox.pinned_config import OPTIONS as _OPTIONS


def _decorators(source: str, name: str) -> str | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return "\n".join(ast.unparse(d) for d in node.decorator_list)
    return None


def same_config_space(original: str, candidate: str, name: str) -> bool:
    """Whether the candidate's kernel ``name`` carries the original's decorators, word for word: the same
    configs to tune over, the same size hints and metadata. False where either has no such function."""
    mine = _decorators(candidate, name)
    return bool(mine) and mine == _decorators(original, name)


def original_config(kernel: Any) -> dict[str, Any] | None:
    """The one launch config a loaded Inductor kernel was tuned to (under the CPU interpreter: the config it
    runs), as JSON; None before it ran, for a kernel that kept several, or for values that are not numbers."""
    launchers = getattr(kernel, "launchers", None)
    configs = getattr(kernel, "configs", None)
    if getattr(kernel, "triton_interpret", False) and configs:  # the interpreter runs the first config
        config = configs[0]
    elif isinstance(launchers, list) and len(launchers) == 1:
        config = getattr(launchers[0], "config", None)
    else:
        return None
    kwargs = getattr(config, "kwargs", None)
    if not isinstance(kwargs, dict) or not all(isinstance(v, (int, float, bool)) for v in kwargs.values()):
        return None
    out: dict[str, Any] = {"kwargs": dict(kwargs)}
    for option in _OPTIONS:
        value = getattr(config, option, None)
        if isinstance(value, int) and not isinstance(value, bool):
            out[option] = value
    return out if "num_warps" in out else None


__all__ = ["original_config", "same_config_space"]
