"""The per-problem speedup plot (matplotlib, Agg backend): sorted bars with confidence intervals.

matplotlib is optional (the ``plot``/``dev`` extras): without it the report says so and goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

from .results import ProblemResult

OUTCOME_COLORS = {"optimized": "#2a9d4a", "matched": "#4a78c2", "fallback": "#9a9a9a"}


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed, or there is nothing to plot."""


def plot_speedups(results: Sequence[ProblemResult], path: str, title: str = "") -> str:
    """Write the PNG to ``path``: one panel per figure (vs max-autotune, vs eager), bars sorted."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: write files only
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("matplotlib is not installed (pip install 'kernelopt[plot]')") from exc
    panels = [("vs_max_autotune", "speedup vs max-autotune"), ("vs_eager", "speedup vs eager")]
    series = []
    for key, label in panels:
        rows = sorted(((r.name, getattr(r, key), r.outcome) for r in results
                       if r.outcome != "error" and getattr(r, key) is not None), key=lambda row: row[1].value)
        if rows:
            series.append((label, rows))
    if not series:
        raise PlotUnavailable("no problem has a speedup to plot")
    width = max(6.0, 0.28 * max(len(rows) for _, rows in series) + 2.0)
    figure, axes = plt.subplots(len(series), 1, figsize=(width, 3.6 * len(series)), squeeze=False)
    for axis, (label, rows) in zip(axes[:, 0], series, strict=True):
        values = [fig.value for _, fig, _ in rows]
        lower = [max(0.0, fig.value - fig.ci_low) for _, fig, _ in rows]
        upper = [max(0.0, fig.ci_high - fig.value) for _, fig, _ in rows]
        colors = [OUTCOME_COLORS.get(outcome, "#cccccc") for _, _, outcome in rows]
        positions = list(range(len(rows)))
        axis.bar(positions, values, color=colors, yerr=[lower, upper], capsize=2, error_kw={"linewidth": 0.8})
        axis.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        axis.set_yscale("log")
        axis.set_ylabel(label)
        axis.set_xticks(positions)
        axis.set_xticklabels([name for name, _, _ in rows], rotation=75, ha="right", fontsize=7)
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in OUTCOME_COLORS.values()]
        axis.legend(handles, list(OUTCOME_COLORS), fontsize=7, loc="upper left")
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
