"""``kernelopt inspect PATH [--json] [--time]``: what Inductor wrote, per graph.

Reads the dumps without running anything: each graph's Triton kernels (kind, fused ATen ops),
vendor calls and launch order, and whether the graph is worth optimizing. Without --time the
shares are launch counts; --time runs each graph in a worker and reports shares of graph time
(the vendor share of every command is a share of graph time). Files that cannot be read are
listed as skipped; when none can, the command fails.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..artifacts import CompiledGraph, discover
from ..dispatch import DispatchReport, analyze
from .common import DEVICE_HELP, console, err_console, fail, print_json


def register(sub: Any) -> None:
    parser = sub.add_parser("inspect", help="list the kernels, vendor calls and launches of compiled graphs")
    parser.add_argument("path", help="a dump folder, a TORCHINDUCTOR_CACHE_DIR, or one output_code.py")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--time", action="store_true", help="run each graph and add per-launch time shares")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import os

    if not os.path.exists(args.path):
        return fail(escape(f"{args.path}: no such file or folder"))
    graphs, problems = discover(args.path)
    reports: dict[str, DispatchReport] = {}
    for graph in graphs:
        reports[graph.path] = _report(graph, args)
    if args.json:
        print_json({
            "graphs": [{**g.to_json(), **_dispatch_json(reports[g.path])} for g in graphs],
            "problems": [{"path": p.path, "problem": p.problem, "line": p.line} for p in problems],
        })
    else:
        for graph in graphs:
            _print_graph(graph, reports[graph.path])
        # escape(): paths and messages may hold [brackets]; soft_wrap keeps one message per line
        for problem in problems:
            err_console.print(f"[yellow]skipped[/yellow] {escape(str(problem))}", soft_wrap=True)
    if graphs:
        return 0
    skipped = f" ({len(problems)} file(s) skipped, each named above)" if problems and not args.json else ""
    return fail(escape(f"no Inductor dumps found under {args.path}{skipped}"))


def _report(graph: CompiledGraph, args: argparse.Namespace) -> DispatchReport:
    if not args.time:
        return analyze(graph)
    from ..measure.launch_timing import time_launches  # imports the worker machinery lazily

    try:
        timing = time_launches(graph, device=args.device)
    except Exception as exc:  # noqa: BLE001 - timing is optional: say why, keep the static view
        err_console.print(f"[yellow]timing {escape(graph.name)} failed:[/yellow] {escape(str(exc))}")
        return analyze(graph)
    return analyze(graph, timing.launch_times_ms, timing.overheads, timing.path)


def _dispatch_json(report: DispatchReport) -> dict[str, Any]:
    data = report.to_json()
    return {"classification": data.pop("classification"), "dispatch": data}


def _print_graph(graph: CompiledGraph, report: DispatchReport) -> None:
    style = {"optimizable": "green", "vendor-dominated": "yellow", "no-triton": "red"}[report.classification]
    console.print(f"\n[bold]{escape(graph.name)}[/bold]  {escape(graph.path)}")
    console.print(f"  [{style}]{report.classification}[/{style}]: {escape(report.evidence)}", soft_wrap=True)
    counts = f"{sum(1 for s in report.launches if s.type == 'extern')} of {len(report.launches)} launches"
    if report.timed:
        console.print(f"  vendor share: {report.vendor_share:.1%} of graph time ({counts} are vendor calls)")
    else:
        console.print(f"  vendor share: not measured ({counts} are vendor calls; --time measures the share of "
                      "graph time)", soft_wrap=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("#", justify="right")
    # Kernel names are identities users grep and copy: never cut them (the table grows instead).
    longest = max((len(share.name) for share in report.launches), default=6)
    table.add_column("launch", no_wrap=True)
    table.add_column("kind")
    table.add_column("fused ATen ops")
    table.add_column("time", justify="right")
    table.add_column("share of time" if report.timed else "share of launches", justify="right")
    kinds = {k.name: k for k in graph.kernels}
    for share in report.launches:
        if share.type == "triton":
            kernel = kinds.get(share.name)
            kind = kernel.kind if kernel else "?"
            ops = ", ".join(op.removeprefix("aten.") for op in (kernel.aten_ops if kernel else []))
        else:
            kind, ops = "vendor", ""
        time_text = f"{share.time_ms:.3f} ms" if share.time_ms is not None else "-"
        table.add_row(str(share.order), share.name, kind, ops, time_text, f"{share.share:.1%}")
    for item in report.overheads:
        table.add_row("", item.name, "overhead", item.detail, f"{item.time_ms:.3f} ms", f"{item.share:.1%}")
    if console.width >= longest + 70:
        console.print(table)
    else:  # a console at least as wide as the table needs (rich cannot widen one per call)
        Console(width=longest + 70, highlight=False).print(table)
    for item in report.overheads:
        if item.suggestion:
            console.print(f"  [cyan]hint[/cyan] {escape(item.name)}: {escape(item.suggestion)}")
    for warning in graph.warnings:
        console.print(f"  [yellow]warning[/yellow] {escape(warning)}")
