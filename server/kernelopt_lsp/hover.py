"""Hovers on a kernel's name, wherever it stands: its ``async_compile.triton`` line, its ``def``
in the embedded source, its launch sites (and any other mention of the name)."""

from __future__ import annotations

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel
from kernelopt_core.measure.traffic import bytes_text

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
    sol_text,
    speedup_text,
)
from .results import ProfileRecord

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
        headline = sol_text(profile)
        lines += ["", "**Profile**" + (f" *{STALE_SUFFIX.strip()}*" if view.profile_stale else "")
                  + (f": {headline}" if headline else ""), "", "| metric | value |", "|---|---|"]
        for key, label, unit in _METRICS:
            value = profile.metrics.get(key)
            if value is None or value == "":
                continue
            lines.append(f"| {label} | {_metric_text(value, unit)} |")
        lines += _sol_rows(profile)
        if profile.time_share is not None:
            lines.append(f"| share {profile.share_words} | {share_text(profile.time_share)} |")
        details = profile.metrics.get("cause_details")
        if isinstance(details, list) and details:
            lines += ["", "**Why below speed of light**", ""]
            for item in details[:4]:
                if isinstance(item, dict) and item.get("id"):
                    lines.append(f"- **{item['id']}**: {_one_line(str(item.get('text', '')))}")
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


def _sol_rows(profile: ProfileRecord) -> list[str]:
    """Speed of light, traffic ratio, ideal bytes, causes and the paper's tier, each with its source."""
    metrics, number = profile.metrics, profile.number
    rows = []
    sol = number("sol_pct")
    if sol is not None:
        source = metrics.get("sol_time_source")
        rows.append(f"| speed of light | {sol:.0f}%" + (f" (time: {source})" if source else "") + " |")
    elif isinstance(metrics.get("sol_unknown_reason"), str):
        rows.append(f"| speed of light | {_one_line(metrics['sol_unknown_reason'], 160)} |")
    ratio = number("traffic_ratio")
    if ratio is not None:
        rows.append(f"| DRAM traffic | {ratio:.2f}× the minimum ({bytes_text(number('dram_bytes'))} moved) |")
    ideal = number("ideal_bytes")
    if ideal is not None:
        rows.append(f"| minimum bytes | {bytes_text(ideal)} (each tensor read or written once) |")
    causes = metrics.get("causes")
    if isinstance(causes, list) and causes:
        rows.append(f"| causes | {', '.join(str(c) for c in causes)} |")
    paper = metrics.get("paper_tier")
    if isinstance(paper, str) and paper:
        rows.append(f"| paper's SOL-memory tier | {paper} |")
    return rows


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
