"""Hovers on a kernel's name, wherever it stands: its ``async_compile.triton`` line, its ``def``
in the embedded source, its launch sites (and any other mention of the name)."""

from __future__ import annotations

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel

from .kernel_facts import (
    STALE_SUFFIX,
    KernelView,
    duration_text,
    fused_ops,
    gate_line,
    is_applied,
    kind_words,
    percent,
    share_text,
    speedup_text,
)

_IDENT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_METRICS = (
    ("tier", "tier", None), ("duration_ns", "duration", "ns"), ("dram_pct", "DRAM throughput", "% of peak"),
    ("sm_pct", "SM throughput", "% of peak"), ("occupancy_pct", "achieved occupancy", "%"),
    ("registers", "registers / thread", None), ("block_size", "block size", None), ("grid_size", "grid", None),
)


def word_at(line_text: str, col: int) -> tuple[int, int] | None:
    """The identifier touching column ``col``: its [start, end) columns."""
    if not line_text:
        return None
    col = min(max(col, 0), len(line_text))
    start = col
    while start > 0 and line_text[start - 1] in _IDENT:
        start -= 1
    end = col
    while end < len(line_text) and line_text[end] in _IDENT:
        end += 1
    return (start, end) if end > start else None


def kernel_named_at(graph: CompiledGraph, line_text: str, col: int) -> tuple[TritonKernel, int, int] | None:
    """The kernel whose name is under the cursor, and where that name stands on the line."""
    span = word_at(line_text, col)
    if span is None:
        return None
    kernel = graph.kernel(line_text[span[0]:span[1]])
    return (kernel, span[0], span[1]) if kernel is not None else None


def hover_markdown(view: KernelView) -> str:
    kernel = view.kernel
    lines = [f"### `{kernel.name}`", ""]
    head = f"**{kind_words(kernel)}**"
    if kernel.heuristic and kernel.heuristic != "unknown":
        head += f" (`{kernel.heuristic}`)"
    ops = fused_ops(kernel)
    if ops:
        head += " · fuses " + ", ".join(f"`{op}`" for op in ops)
    lines.append(head)
    lines.append("")
    total = len(view.graph.timeline())
    share = view.time_share
    if share is not None and view.profile is not None:
        lines.append(f"**{share_text(share)} {view.profile.share_words}** (profiled) · "
                     f"{view.launches} of {total} launches")
    elif view.launches:
        lines.append(f"{view.launches} of {total} launches ({share_text(view.launch_share)} of launches; "
                     "not timed: run *Profile this kernel*)")
    else:
        lines.append("not launched by the graph's `call()`")
    if kernel.size_hints:
        hints = ", ".join(f"{k}: {v}" for k, v in kernel.size_hints.items())
        lines.append(f"size hints: {hints}")
    if view.graph.name:
        lines.append(f"graph `{view.graph.name}` · {view.dispatch.classification}: {view.dispatch.evidence}")
    profile = view.profile
    if profile is not None:
        lines += ["", "**Profile**" + (f" *{STALE_SUFFIX.strip()}*" if view.profile_stale else ""), "",
                  "| metric | value |", "|---|---|"]
        for key, label, unit in _METRICS:
            value = profile.metrics.get(key)
            if value is None or value == "":
                continue
            lines.append(f"| {label} | {_metric_text(value, unit)} |")
        if profile.time_share is not None:
            lines.append(f"| share {profile.share_words} | {share_text(profile.time_share)} |")
        rules = profile.rules[:3]
        if rules:
            lines += ["", "**Top rules**", ""]
            for i, rule in enumerate(rules, 1):
                text = f"{i}. **{rule.get('name', 'rule')}**"
                if rule.get("description"):
                    text += f": {_one_line(str(rule['description']))}"
                est = rule.get("est_speedup_pct")
                if isinstance(est, (int, float)):
                    text += f" (est. speedup {est:.0f}%)"
                lines.append(text)
    if view.run is not None:
        run = view.run
        lines += ["", f"**Last optimization** (run `{run.run_id}`): {run.decision}, "
                      f"{speedup_text(run.speedup, run.ci)}"]
        if run.reason:
            lines.append(f"> {_one_line(run.reason)}")
    current = kernel.source_hash
    for record, stale in view.gate_records:
        if record.kind == "optimize" and view.run is not None and record.run_id == view.run.run_id and not stale:
            continue  # said just above
        text = gate_line(record, applied=is_applied(record, current))
        lines += ["", f"**Last {record.kind}**: {text}{STALE_SUFFIX if stale else ''}"]
    return "\n".join(lines)


def _metric_text(value: object, unit: str | None) -> str:
    if unit == "ns" and isinstance(value, (int, float)):
        return duration_text(float(value))
    if unit and unit.startswith("%") and isinstance(value, (int, float)):
        return percent(float(value)) + unit[1:]
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
