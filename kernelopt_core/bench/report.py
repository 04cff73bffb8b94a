"""``results.json`` and ``report.md`` for a campaign (and the plot beside them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..atomic_files import write_json_atomic
from .config_change import config_figure
from .device_memory import HELD_CATEGORY
from .outcome import category_label
from .plot import PlotUnavailable, plot_speedups
from .results import OUTCOMES, ProblemResult, Speedup
from .summary import FAST_P, CampaignSummary, GroupSummary, summarize_campaign
from .time_totals import time_section

PLOT_NAME = "speedups.png"


@dataclass
class CampaignInfo:
    """What was run, where and how: the header of every report."""

    suite: str
    device: str
    dtype: str = "fp32"
    provider: str = "offline"
    created: str = ""
    wall_s: float = 0.0  # the campaign's own wall time (not the sum over problems)
    resumed: int = 0  # problems whose results an earlier run of this campaign wrote
    workers: int = 1
    runner: str = "local"  # "local" or "ray"
    config: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _without_samples(data: dict[str, Any]) -> dict[str, Any]:
    """results.json stays small: the per-problem files keep every sample."""
    slim = dict(data)
    for key in ("eager", "max_autotune"):
        if isinstance(slim.get(key), dict):
            slim[key] = {k: v for k, v in slim[key].items() if k != "samples_ms"}
    for key in ("gate4", "confirm"):
        if isinstance(slim.get(key), dict):
            slim[key] = {k: v for k, v in slim[key].items() if k not in ("a", "b")}
    return slim


def write_reports(out_dir: str, info: CampaignInfo, results: Sequence[ProblemResult],
                  not_reached: Sequence[str] = (), plot: bool = True) -> CampaignSummary:
    """Write results.json, report.md and (when ``plot``) speedups.png into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    ordered = sorted(results, key=lambda r: (r.level, r.name))
    summary = summarize_campaign(ordered, not_reached)
    plot_note = None
    if plot:
        try:
            plot_speedups(ordered, os.path.join(out_dir, PLOT_NAME), title=f"{info.suite} on {info.device}")
        except PlotUnavailable as exc:
            plot_note = f"no plot: {exc}"
        except Exception as exc:  # noqa: BLE001 - a plotting failure must not lose the results
            plot_note = f"no plot: {type(exc).__name__}: {exc}"
    write_json_atomic(os.path.join(out_dir, "results.json"), {
        "campaign": info.to_json(), "summary": summary.to_json(), "cleanup": cleanup_summary(ordered),
        "problems": [_without_samples(r.to_json()) for r in ordered], "plot": None if plot_note else PLOT_NAME,
        "plot_note": plot_note,
    })
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as handle:
        handle.write(render_markdown(info, ordered, summary, plot_note, plot))
    return summary


def _num(value: float, digits: int = 2) -> str:
    """Fixed digits, or significant ones for tiny values (the CPU interpreter vs eager is ~1e-4)."""
    return f"{value:.{digits}f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"


def _x(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{_num(value, digits)}×"


def _ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f" [{_num(ci[0])}, {_num(ci[1])}]"


def _speedup(figure: Speedup | None) -> str:
    return "–" if figure is None else f"{_num(figure.value)}× [{_num(figure.ci_low)}, {_num(figure.ci_high)}]"


def _ms(stats: dict[str, Any] | None) -> str:
    if not stats or "median_ms" not in stats:
        return "–"
    return f"{stats['median_ms']:.3g}"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _sol(sol: dict[str, Any] | None) -> str:
    """``65% → 92% (1.50x)``: the main kernel's speed of light before and after an accepted rewrite,
    and its traffic ratio."""
    if not sol or not isinstance(sol.get("baseline_pct"), (int, float)):
        return "–"
    text = f"{sol['baseline_pct']:.0f}%"
    if isinstance(sol.get("after_pct"), (int, float)):
        text += f" → {sol['after_pct']:.0f}%"
    if isinstance(sol.get("traffic_ratio"), (int, float)):
        text += f" ({sol['traffic_ratio']:.2f}x)"
    return text


def _level_row(label: str, group: GroupSummary) -> str:
    fast = " | ".join(_pct(group.fast_p[k]) for k in group.fast_p)
    return (f"| {label} | {group.problems} | {group.ran} | "
            + " | ".join(str(group.counts[o]) for o in OUTCOMES)
            + f" | {_x(group.geomean_vs_max_autotune, 3)}{_ci(group.geomean_vs_max_autotune_ci)}"
            + f" | {_x(group.geomean_with_config_changes, 3)}{_ci(group.geomean_with_config_changes_ci)}"
            + f" ({group.config_changes_accepted})"
            + f" | {_x(group.geomean_vs_eager, 3)}{_ci(group.geomean_vs_eager_ci)}"
            + f" | {_x(group.geomean_max_autotune_vs_eager, 3)} | {_x(group.max_vs_max_autotune)} | {fast} |")


def _paths(results: Sequence[ProblemResult]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"eager": set(), "max_autotune": set(), "vs_max_autotune": set(), "vs_eager": set()}
    for r in results:
        for key in ("eager", "max_autotune"):
            stats = getattr(r, key)
            if stats and stats.get("path"):
                found[key].add(str(stats["path"]))
        for key in ("vs_max_autotune", "vs_eager"):
            figure = getattr(r, key)
            if figure is not None and figure.path:
                found[key].add(figure.path)
    return found


def _config_cell(result: ProblemResult) -> str:
    """The configuration change column: the accepted one with its speedup, path and configuration."""
    figure = config_figure(result)
    if figure is not None:
        return (f"{_num(figure.value)}× [{_num(figure.ci_low)}, {_num(figure.ci_high)}] "
                f"{figure.describe_change()} (`{figure.path}`)")
    data = result.config_change
    if not isinstance(data, dict):
        return "–"
    mode = ((data.get("recommendation") or {}).get("change") or {}).get("mode")
    if not data.get("allowed"):
        return f"mode='{mode}' recommended, not verified"
    verified: dict[str, Any] = data["verified"] if isinstance(data.get("verified"), dict) else {}
    if verified.get("not_verified"):  # no time was left for the check: the accounting's figure, unverified
        measured = verified.get("measured_speedup")
        return f"mode='{mode}' recommended, not verified (no time left)" + (
            f"; measured {_num(measured)}× by the accounting" if isinstance(measured, (int, float)) else "")
    return f"mode='{mode}' recommended, rejected"


def _outside_kernels(results: Sequence[ProblemResult]) -> list[str]:
    """Per problem, where the full callable's time goes beyond its kernels, and what to change."""
    rows = [r for r in results if isinstance(r.accounting, dict)]
    if not rows:
        return []
    lines = ["## Outside the kernels (the whole torch.compile callable)",
             "| problem | callable ms | path | overheads | largest | recommended | verified | assumes about the caller |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acct = r.accounting or {}
        items = [i for i in acct.get("overheads") or [] if isinstance(i, dict)]
        largest = max(items, key=lambda i: float(i.get("time_ms") or 0.0), default=None)
        share = acct.get("overhead_share")
        change = r.config_change if isinstance(r.config_change, dict) else {}
        rec = change.get("recommendation") or {}
        verified = change.get("verified") if isinstance(change.get("verified"), dict) else {}
        figure = config_figure(r)
        if figure is not None:
            state = f"{figure.option}: accepted {_num(figure.value)}×"
        elif verified:
            state = f"{verified.get('option', '?')}: {'rejected' if verified.get('ok', True) else 'could not run'}"
        else:
            state = "–"
        callable_ms = acct.get("callable_ms")
        lines.append(
            f"| `{r.name}` | {f'{callable_ms:.3g}' if isinstance(callable_ms, (int, float)) else '–'} "
            f"| {acct.get('path', '–')} | {_pct(share) if isinstance(share, (int, float)) else '–'}"
            f"{' (dominates)' if acct.get('overhead_dominates') else ''} "
            f"| {largest['name'] + ' ' + _pct(float(largest.get('share') or 0.0)) if largest else '–'} "
            f"| {str(rec.get('title') or '–').replace('|', '/')} | {state} "
            f"| {str((figure.assumes if figure else '') or '–').replace('|', '/')} |")
    lines += ["", "Overheads are shares of the full callable (CUDA-graph input copy, launch gaps, guard + wrapper; "
                  "see docs/accounting.md). A recommendation is verified only with `--allow-config-changes`.", ""]
    return lines


def cleanup_summary(results: Sequence[ProblemResult]) -> dict[str, Any]:
    """What the bench had to end after each problem, and whether the device memory came back."""
    checks = {r.name: r.device_memory for r in results if isinstance(r.device_memory, dict)}
    notes = sorted({str(c["note"]) for c in checks.values() if c.get("note")})
    return {
        "processes_ended": {r.name: r.processes_ended for r in results if r.processes_ended},
        "memory_checked": sum(1 for c in checks.values() if c.get("baseline_mib") is not None),
        "memory_ended": {name: c["ended"] for name, c in checks.items() if c.get("ended")},
        "memory_not_released": {name: c.get("held_by") or [] for name, c in checks.items()
                                if not c.get("released", True)},
        "not_run_memory_held": [r.name for r in results if r.category == HELD_CATEGORY],
        "memory_notes": notes,
    }


def _cleanup_section(results: Sequence[ProblemResult]) -> list[str]:
    cleanup = cleanup_summary(results)
    lines = ["## Processes and device memory"]
    if cleanup["memory_checked"]:
        lines.append(f"- Device memory was read before and after {cleanup['memory_checked']} problem(s); "
                     f"{len(cleanup['memory_not_released'])} left it above its baseline.")
    for note in cleanup["memory_notes"]:
        lines.append(f"- Device memory not checked: {note}.")
    by_name = {r.name: r for r in results}
    for name, ended in cleanup["processes_ended"].items():
        how = "after it timed out or was cancelled" if by_name[name].category in ("timeout", "cancelled") \
            else "**left running after it ended**"
        lines.append(f"- `{name}`: the bench ended {len(ended)} process(es) {how}: " + "; ".join(ended))
    for name, ended in cleanup["memory_ended"].items():
        lines.append(f"- `{name}`: its processes still held GPU memory; ended: " + "; ".join(ended))
    for name, held in cleanup["memory_not_released"].items():
        lines.append(f"- **`{name}`: GPU memory not back to its baseline** (held by "
                     f"{'; '.join(held) or 'processes nvidia-smi does not name'})")
    if cleanup["not_run_memory_held"]:
        lines.append("- **Not run, the GPU's memory being held:** "
                     + ", ".join(f"`{n}`" for n in cleanup["not_run_memory_held"]))
    if len(lines) == 1:
        lines.append("- Every problem's processes ended with it.")
    return [*lines, ""]


def render_markdown(info: CampaignInfo, results: Sequence[ProblemResult], summary: CampaignSummary,
                    plot_note: str | None = None, plot: bool = True) -> str:
    lines: list[str] = ["# KernelOPT benchmark campaign", ""]
    lines.append(f"- suite: `{info.suite}`")
    lines.append(f"- device: {info.device}; dtype: {info.dtype}; provider: {info.provider}; runner: {info.runner} "
                 f"({info.workers} worker{'s' if info.workers != 1 else ''})")
    if info.environment:
        lines.append("- environment: " + ", ".join(f"{k} {v}" for k, v in sorted(info.environment.items())))
    resumed = (f"; {info.resumed} problem{'s' if info.resumed != 1 else ''} resumed from earlier runs, whose "
               "time is in the sum but not in this wall time") if info.resumed else ""
    lines.append(f"- created: {info.created}; campaign wall time {info.wall_s:.1f} s "
                 f"(sum over problems {summary.wall_s_total:.1f} s{resumed})")
    if info.device.startswith("cpu"):
        lines.append("- **CPU backend:** every time below is wall-clock time of the Triton CPU interpreter, "
                     "not GPU time; the speedups say nothing about a GPU.")
    lines.append("")

    check = summary.regression
    lines.append("## Regression check")
    if check.regressions:
        lines.append("")
        lines.append(f"> **⚠️ REGRESSIONS: {len(check.regressions)} accepted result(s) are SLOWER than "
                     "torch.compile max-autotune. This must be zero: treat it as a bug in the gates.**")
        by_name = {r.name: r for r in results}
        for name in check.regressions:
            lines.append(f"> - `{name}`: {_speedup(by_name[name].vs_max_autotune)}")
    else:
        lines.append(f"PASS: 0 regressions among {check.checked} accepted result(s) "
                     "(a regression is an accepted result measured slower than max-autotune).")
    if check.unconfirmed:
        lines.append("")
        lines.append("Accepted but not confirmed faster at 95% (interval reaches below 1.0, or no confirmation A/B): "
                     + ", ".join(f"`{n}`" for n in check.unconfirmed))
    lines.append("")

    lines.append("## Per level")
    fast_heads = " | ".join(f"fast_{k}" for k in summary.overall.fast_p)
    lines.append("| level | problems | ran | " + " | ".join(OUTCOMES)
                 + " | geomean vs max-autotune [95% CI] | with configuration changes [95% CI] (accepted) "
                   "| geomean vs eager [95% CI] | max-autotune vs eager | max | " + fast_heads + " |")
    lines.append("|" + "---|" * (10 + len(OUTCOMES) + len(summary.overall.fast_p) - 2))
    for level, group in summary.levels.items():
        lines.append(_level_row(f"L{level}" if level != 0 else "unleveled", group))
    lines.append(_level_row("**all**", summary.overall))
    lines.append("")
    lines.append("Geomeans are over problems that ran (errors excluded), with fallbacks and matches at 1.0; "
                 "their intervals bootstrap over problems. fast_p is the share of all problems (errors included) "
                 "that ran and are strictly faster than p over max-autotune. The kernel-only geomean counts "
                 "kernel rewrites alone; the one with configuration changes takes, per problem, the better of the "
                 "kernel figure and a verified configuration change (never their product: they are timed through "
                 "different paths), with the number of accepted changes in brackets.")
    lines.append("")

    lines.append("## fast_p")
    lines.append("| against | " + " | ".join(f"p = {p:g}" for p in FAST_P) + " |")
    lines.append("|---|" + "---|" * len(FAST_P))
    lines.append("| max-autotune | " + " | ".join(_pct(v) for v in summary.overall.fast_p.values()) + " |")
    lines.append("| eager | " + " | ".join(_pct(v) for v in summary.overall.fast_p_vs_eager.values()) + " |")
    lines.append("")

    lines.append("## Outcomes")
    lines.append("| outcome | count |")
    lines.append("|---|---|")
    for outcome in OUTCOMES:
        lines.append(f"| {outcome} | {summary.counts[outcome]} |")
    lines.extend(_reason_counts("fallback reason", "fallback", summary.fallback_reasons))
    lines.extend(_reason_counts("error (stage)", "error", summary.error_reasons))
    lines.append("")

    lines.append("## Per problem")
    lines.append("| problem | L | outcome | reason | eager ms | max-autotune ms | vs max-autotune [95% CI] "
                 "| configuration change | vs eager [95% CI] | SOL base → after | wall s |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        reason = r.reason.replace("|", "/").replace("\n", " ")
        if len(reason) > 140:
            reason = reason[:137] + "..."
        outcome_text = f"{r.outcome} (budget reached)" if r.budget_reached else r.outcome
        lines.append(f"| `{r.name}` | {r.level} | {outcome_text} | {reason} | {_ms(r.eager)} | {_ms(r.max_autotune)} | "
                     f"{_speedup(r.vs_max_autotune)} | {_config_cell(r)} | {_speedup(r.vs_eager)} | {_sol(r.sol)} | "
                     f"{r.wall_s:.1f} |")
    lines.append("")
    lines += time_section(results, summary.time)
    lines += _cleanup_section(results)
    lines += _outside_kernels(results)

    paths = _paths(results)
    lines.append("## How each number was timed")
    lines.append(f"- **eager ms**: the eager module, path `{', '.join(sorted(paths['eager'])) or 'eager'}`.")
    lines.append(f"- **max-autotune ms**: the full torch.compile callable, path "
                 f"`{', '.join(sorted(paths['max_autotune'])) or '–'}` (on a GPU this includes the CUDA-graph "
                 "input copy; on the CPU backend mode 'default' without CUDA graphs).")
    lines.append(f"- **vs max-autotune**: an interleaved A/B of the accepted graph against Inductor's graph, path "
                 f"`{', '.join(sorted(paths['vs_max_autotune'])) or 'module-call'}`, measured again after the "
                 "optimizer (a confirmation independent of the perf gate); fallbacks and matches keep the "
                 "compiler's code and are 1.0 by construction.")
    lines.append("- **vs eager**: eager time over the compiled callable's time less the kernel time the accepted "
                 "rewrite saved in the A/B (derived; the label in results.json says so).")
    lines.append("- **configuration change**: the verified torch.compile change (gates 3-4), an interleaved A/B of the "
                 "user's max-autotune callable against the changed one, both through the full callable (paths "
                 "`compiled-callable-*`, named in the cell). It is not a kernel rewrite: the outcome and the kernel "
                 "figures above do not count it.")
    lines.append("- **SOL base → after**: the main kernel's speed of light (its ideal bytes, each tensor read or "
                 "written once, over its time at the device's measured copy bandwidth; ncu time where the "
                 "optimizer profiled, else a timed launch), after an accepted rewrite the baseline times its "
                 "kernel speedup; in brackets the DRAM traffic over the ideal bytes. results.json keeps the "
                 "graph's own figure (inputs and outputs once, over the timed graph) and each figure's source.")
    lines.append("")
    if summary.not_reached:
        lines.append("## Not reached")
        lines.append(f"{len(summary.not_reached)} problem(s) were not started within the campaign's time budget: "
                     + ", ".join(f"`{n}`" for n in summary.not_reached))
        lines.append("")
    if plot:
        lines.append("## Plot")
        lines.append(f"_{plot_note}_" if plot_note else f"![per-problem speedups, sorted]({PLOT_NAME})")
        lines.append("")
    return "\n".join(lines)


def _reason_counts(heading: str, outcome: str, counts: dict[str, int]) -> list[str]:
    """A table of the reasons problems ended with ``outcome``, most frequent first (none: no table)."""
    if not counts:
        return []
    lines = ["", f"| {heading} | count |", "|---|---|"]
    for category, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {category_label(outcome, category)} | {count} |")
    return lines
