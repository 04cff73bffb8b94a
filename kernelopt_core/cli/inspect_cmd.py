"""``kernelopt inspect PATH [--json] [--time]``: what Inductor wrote, per graph.

Reads the dumps without running anything: each graph's Triton kernels (kind, fused ATen ops),
vendor calls and launch order, and whether the graph is worth optimizing. Without --time the
shares are launch counts; --time runs each graph in a worker and reports shares of graph time
(the vendor share of every command is a share of graph time), and per Triton launch its ideal
bytes (from the launch's recorded arguments) and speed of light against the launch's timed
duration (CUDA events, no ncu) at the device's measured copy bandwidth; the graph's speed of light
is its inputs and outputs once against the timed graph. Each figure says its time source. Files
that cannot be read are listed as skipped; when none can, the command fails.
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
    sol: dict[str, dict[str, Any]] = {}
    for graph in graphs:
        reports[graph.path], timing = _report(graph, args)
        if timing is not None:
            sol[graph.path] = _speed_of_light(graph, timing)
    if args.json:
        print_json({
            "graphs": [{**g.to_json(), **_dispatch_json(reports[g.path]),
                        **({"speed_of_light": sol[g.path]} if g.path in sol else {})} for g in graphs],
            "problems": [{"path": p.path, "problem": p.problem, "line": p.line} for p in problems],
        })
    else:
        for graph in graphs:
            _print_graph(graph, reports[graph.path], sol.get(graph.path))
        # escape(): paths and messages may hold [brackets]; soft_wrap keeps one message per line
        for problem in problems:
            err_console.print(f"[yellow]skipped[/yellow] {escape(str(problem))}", soft_wrap=True)
    if graphs:
        return 0
    skipped = f" ({len(problems)} file(s) skipped, each named above)" if problems and not args.json else ""
    return fail(escape(f"no Inductor dumps found under {args.path}{skipped}"))


def _report(graph: CompiledGraph, args: argparse.Namespace) -> tuple[DispatchReport, Any]:
    if not args.time:
        return analyze(graph), None
    from ..measure.launch_timing import time_launches  # imports the worker machinery lazily

    try:
        timing = time_launches(graph, device=args.device)
    except Exception as exc:  # noqa: BLE001 - timing is optional: say why, keep the static view
        err_console.print(f"[yellow]timing {escape(graph.name)} failed:[/yellow] {escape(str(exc))}")
        return analyze(graph), None
    return analyze(graph, timing.launch_times_ms, timing.overheads, timing.path), timing


def _speed_of_light(graph: CompiledGraph, timing: Any) -> dict[str, Any]:
    """Per Triton launch and for the graph: ideal bytes against the timed duration (no ncu)."""
    from ..measure.traffic import speed_of_light

    cpu = timing.device == "cpu"
    peaks = None
    if not cpu:
        from ..measure.peaks import device_peaks

        try:
            peaks = device_peaks(timing.device)
        except Exception as exc:  # noqa: BLE001 - the figures say "unknown" with the reason
            err_console.print(f"[yellow]device peaks of {escape(timing.device)} not measured:[/yellow] "
                              f"{escape(str(exc))}")
    copy = peaks.copy_bytes_per_s if peaks is not None else None
    source = f"timed launch, {timing.path} path ({'CUDA events' if not cpu else 'wall clock'}; no ncu)"
    launches = []
    for launch in graph.launches:
        traffic = timing.launch_traffic.get(launch.order)
        sol = speed_of_light(traffic.ideal if traffic is not None else None,
                             duration_ms=timing.launch_times_ms.get(launch.order), duration_source=source,
                             copy_bytes_per_s=copy, cpu=cpu)
        launches.append({"order": launch.order, "kernel": launch.kernel, "ideal_bytes": sol.ideal_bytes,
                         "time_ms": sol.duration_ms, "sol_pct": sol.sol_pct, "time_source": sol.duration_source,
                         "unknown_reason": sol.unknown_reason})
    whole = speed_of_light(timing.graph_ideal, duration_ms=timing.total_ms,
                           duration_source=f"timed graph, {timing.path} path", copy_bytes_per_s=copy, cpu=cpu,
                           ideal_unknown_reason="unknown: the graph's inputs and outputs were not recorded")
    return {"graph": {"ideal_bytes": whole.ideal_bytes, "read_bytes": whole.ideal_read_bytes,
                      "write_bytes": whole.ideal_write_bytes, "time_ms": whole.duration_ms,
                      "sol_pct": whole.sol_pct, "time_source": whole.duration_source,
                      "unknown_reason": whole.unknown_reason},
            "copy_bytes_per_s": copy, "gpu": peaks.gpu if peaks is not None else None, "launches": launches}


def _dispatch_json(report: DispatchReport) -> dict[str, Any]:
    data = report.to_json()
    return {"classification": data.pop("classification"), "dispatch": data}


def _print_graph(graph: CompiledGraph, report: DispatchReport, sol: dict[str, Any] | None = None) -> None:
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
    if sol is not None:
        table.add_column("SOL", justify="right")
    per_launch = {item["order"]: item for item in (sol or {}).get("launches", [])}
    kinds = {k.name: k for k in graph.kernels}
    for share in report.launches:
        kind: str
        if share.type == "triton":
            kernel = kinds.get(share.name)
            kind = kernel.kind if kernel else "?"
            ops = ", ".join(op.removeprefix("aten.") for op in (kernel.aten_ops if kernel else []))
        else:
            kind, ops = "vendor", ""
        time_text = f"{share.time_ms:.3f} ms" if share.time_ms is not None else "-"
        cells = [str(share.order), share.name, kind, ops, time_text, f"{share.share:.1%}"]
        if sol is not None:
            figure = per_launch.get(share.order, {}).get("sol_pct")
            cells.append(f"{figure:.0f}%" if figure is not None else "-")
        table.add_row(*cells)
    for item in report.overheads:
        cells = ["", item.name, "overhead", item.detail, f"{item.time_ms:.3f} ms", f"{item.share:.1%}"]
        table.add_row(*cells, *([""] if sol is not None else []))
    if console.width >= longest + 70:
        console.print(table)
    else:  # a console at least as wide as the table needs (rich cannot widen one per call)
        Console(width=longest + 70, highlight=False).print(table)
    for item in report.overheads:
        if item.suggestion:
            console.print(f"  [cyan]hint[/cyan] {escape(item.name)}: {escape(item.suggestion)}")
    if sol is not None:
        whole = sol["graph"]
        if whole["sol_pct"] is not None:
            text = (f"{whole['sol_pct']:.0f}%: {whole['ideal_bytes']:,} bytes of inputs and outputs "
                    f"in {whole['time_ms']:.3f} ms ({whole['time_source']}) at {sol['copy_bytes_per_s'] / 1e9:,.0f} GB/s")
        else:
            text = str(whole["unknown_reason"])
            if whole["ideal_bytes"]:
                text += f" (ideal {whole['ideal_bytes']:,} bytes of inputs and outputs)"
        console.print(f"  [cyan]graph speed of light[/cyan] {escape(text)}; the SOL column: each launch's ideal "
                      "bytes against its timed duration (no ncu)")
    for warning in graph.warnings:
        console.print(f"  [yellow]warning[/yellow] {escape(warning)}")
