"""A campaign problem's verified configuration change, kept apart from its kernel speedup.

The kernel speedup (``vs_max_autotune``) is an A/B of two graphs' ``call()`` (``module-call``);
a configuration change is an A/B of two full ``torch.compile`` callables (``compiled-callable-*``).
The report shows both, and a geomean "with configuration changes" takes, per problem, the better
of the two verified figures: a product would claim that both wins add up, which nobody measured
(:func:`chain_speedups` refuses it with :class:`~kernelopt_core.measure.paths.CrossPathComparison`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..measure.paths import CrossPathComparison, require_same_path
from .results import ProblemResult, Speedup


@dataclass
class ConfigChangeFigure:
    """The accepted configuration change of one problem, as gate 4 measured it."""

    value: float
    ci_low: float
    ci_high: float
    baseline_path: str  # compiled-callable-cudagraphs: the user's max-autotune callable
    candidate_path: str  # compiled-callable (no CUDA graphs) or compiled-callable-cudagraphs (static inputs)
    change: dict[str, Any] = field(default_factory=dict)
    baseline_mode: str = "max-autotune"
    option: str = "mode"
    assumes: str = ""

    @property
    def path(self) -> str:
        return f"{self.baseline_path} -> {self.candidate_path}"

    def describe_change(self) -> str:
        text = f"mode='{self.change.get('mode')}'"
        return text + " + static inputs" if self.change.get("static_inputs") else text

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "path": self.path}


def config_figure(result: ProblemResult) -> ConfigChangeFigure | None:
    """The verified and accepted configuration change of ``result`` (the chosen option), else None."""
    data = result.config_change
    if not isinstance(data, dict) or not data.get("chosen"):
        return None
    verdict = data.get("verified")
    if not isinstance(verdict, dict) or not verdict.get("accepted"):
        return None
    try:
        value = float(verdict["speedup"])
        ci = verdict.get("ci") or (value, value)
        figure = ConfigChangeFigure(
            value=value, ci_low=float(ci[0]), ci_high=float(ci[1]), baseline_path=str(verdict["baseline_path"]),
            candidate_path=str(verdict["candidate_path"]), change=dict(verdict.get("change") or {}),
            baseline_mode=str(verdict.get("baseline_mode") or "max-autotune"),
            option=str(verdict.get("option") or "mode"), assumes=str(verdict.get("assumes") or ""))
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return figure if math.isfinite(figure.value) and figure.value > 0 else None


def chain_speedups(config: ConfigChangeFigure, kernel: Speedup) -> float:
    """The speedup of the configuration change followed by the kernel rewrite.

    A product only holds when the kernel's A/B was timed from where the change left off, through
    the change's candidate path. A kernel A/B through ``module-call`` never was: refused.
    """
    try:
        require_same_path(config.candidate_path, kernel.path)
    except CrossPathComparison:
        raise
    except ValueError as exc:  # a path outside the vocabulary cannot be chained with anything
        raise CrossPathComparison(f"refusing to chain with a speedup through {kernel.path!r}: {exc}") from exc
    return config.value * kernel.value


@dataclass
class WithConfigFigure:
    """A problem's figure for the geomean "with configuration changes", and which change it is."""

    value: float
    source: str  # "kernel", "configuration" or "configuration, then kernel"


def with_config_figure(result: ProblemResult) -> WithConfigFigure | None:
    """The problem's speedup over max-autotune counting a verified configuration change too.

    Each figure stands on its own measurement: the better of the kernel figure and the
    configuration figure, never their product across paths.
    """
    kernel = result.vs_max_autotune
    config = config_figure(result)
    if config is None:
        return WithConfigFigure(kernel.value, "kernel") if kernel is not None else None
    if kernel is None:
        return WithConfigFigure(config.value, "configuration")
    try:
        return WithConfigFigure(chain_speedups(config, kernel), "configuration, then kernel")
    except CrossPathComparison:
        pass
    if config.value > kernel.value:
        return WithConfigFigure(config.value, "configuration")
    return WithConfigFigure(kernel.value, "kernel")
