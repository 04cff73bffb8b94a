"""``kernelopt profile PATH [--kernel NAME] [--json] [--ncu-csv FILE [--peaks FILE]] [--events] [--device D]``.

``PATH`` may also be a project's own kernel file: ``kernelopt profile my_kernels.py --kernel K
--harness H`` (docs/user-kernels.md). Per Triton kernel: time, time share, speed of light (ideal
bytes against the kernel time at the measured copy bandwidth), traffic ratio (DRAM bytes / ideal
bytes), tier and causes, the paper's SOL-memory tier, DRAM/SM throughput, occupancy, registers, top
ncu rule; per graph: its speed of light (inputs and outputs once, against the timed graph).
Three sources, in order of preference:
* ``--ncu-csv FILE``: analyse an existing ncu CSV; nothing runs (ideal bytes from the wrapper's
  allocations when the dump is given, peaks from ``--peaks FILE``);
* ncu on a GPU, through :mod:`kernelopt_core.measure.ncu_profile` (cached), with the launch
  arguments and graph time from one timed run in the worker and the device's cached peaks;
* no ncu (or a CPU-backend graph): the kernels are timed in a worker, the tier is "unknown"
  unless the timed speed of light says near-optimal, and the output says why ncu was not used.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import DEVICE_HELP, console, err_console, fail, output_result

if TYPE_CHECKING:
    from ..artifacts.model import CompiledGraph
    from ..events import EventSink
    from ..measure.ncu import KernelMetrics


def register(sub: Any) -> None:
    parser = sub.add_parser("profile", help="per-kernel time, tier and ncu metrics of compiled graphs")
    parser.add_argument("path", nargs="?", help="a dump folder, an output_code.py, or your own kernel file (FILE.py "
                                               "with @triton.jit kernels; see --harness); optional with --ncu-csv")
    parser.add_argument("--kernel", help="only this Triton kernel")
    parser.add_argument("--ncu-csv", metavar="FILE", help="analyse this ncu --csv output; run nothing")
    parser.add_argument("--peaks", metavar="FILE", help="with --ncu-csv: the device peaks JSON (as cached by "
                                                        "kernelopt; gives the speed of light)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--iters", type=int, default=1, help="profiled calls per graph under ncu")
    parser.add_argument("--no-cache", action="store_true", help="re-run ncu even when results are cached")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines on stdout")
    from ..userkernels.cli import add_harness_argument

    add_harness_argument(parser)
    parser.set_defaults(handler=run)


@dataclass
class ProfileResult:
    source: str  # "ncu-csv", "ncu" or "timing"
    kernels: list[dict[str, Any]] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ncu_available: bool = True
    overheads: list[dict[str, Any]] = field(default_factory=list)  # wrapper-level items, per graph
    graph_sol: list[dict[str, Any]] = field(default_factory=list)  # per graph: inputs and outputs once
    peaks: dict[str, Any] | None = None  # the device peaks the figures used

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "ncu_available": self.ncu_available, "graphs": self.graphs,
                "kernels": self.kernels, "graph_sol": self.graph_sol, "peaks": self.peaks,
                "overheads": self.overheads, "notes": self.notes}


class ProfileFailed(Exception):
    """A problem the user must fix (bad file, unknown kernel); printed, exit status 2."""


def run(args: argparse.Namespace) -> int:
    from ..events import EventSink, emit_result, heartbeat, json_line_sink

    sink = json_line_sink() if args.events else EventSink()
    try:
        with heartbeat(sink, 10.0) as beating:  # a job runner hears from a long ncu run or timing task
            result = profile(args, beating)
    except ProfileFailed as exc:
        if args.events:
            emit_result({"error": str(exc)})
        return fail(str(exc))
    output_result(args, result.to_json(), lambda: _print(result))
    return 0 if result.kernels else 1


def profile(args: argparse.Namespace, sink: EventSink) -> ProfileResult:
    from ..userkernels.cli import is_user_kernel_path, profile_user_kernel

    if not args.ncu_csv and is_user_kernel_path(args.path):  # a project's own @triton.jit kernel
        return profile_user_kernel(args, sink, ProfileResult, ProfileFailed)
    graphs = _graphs(args.path) if args.path else []
    if args.kernel and graphs:
        graphs = [g for g in graphs if g.kernel(args.kernel) is not None]
        if not graphs:
            raise ProfileFailed(f"no graph under {args.path} has a Triton kernel named {args.kernel}")
    if args.ncu_csv:
        return _from_csv(args, graphs, sink)
    if not args.path:
        raise ProfileFailed("give a dump folder or output_code.py, or --ncu-csv FILE")
    if not graphs:
        raise ProfileFailed(f"no Inductor dumps found under {args.path}")
    result = ProfileResult(source="ncu", graphs=[g.path for g in graphs])
    for index, graph in enumerate(graphs):
        sink.check_cancelled()
        sink.progress(f"profiling {graph.name}", percentage=int(100 * index / len(graphs)), stage="profile")
        _profile_graph(graph, args, sink, result)
    if not result.ncu_available and any(row["source"] == "ncu" for row in result.kernels):
        result.source = "mixed"
    elif not result.ncu_available:
        result.source = "timing"
    sink.progress("profile done", percentage=100, stage="profile")
    return result


def _graphs(path: str) -> list[CompiledGraph]:
    from ..artifacts import discover

    if not Path(path).exists():
        raise ProfileFailed(f"{path}: no such file or folder")
    graphs, problems = discover(path)
    for problem in problems:
        err_console.print(f"[yellow]skipped[/yellow] {problem}")
    return graphs


def _from_csv(args: argparse.Namespace, graphs: list[CompiledGraph], sink: EventSink) -> ProfileResult:
    from ..measure.ncu import NcuError, parse_ncu_csv, summarize_launches

    path = Path(args.ncu_csv)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        launches = parse_ncu_csv(text, source=str(path))
    except OSError as exc:
        raise ProfileFailed(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except NcuError as exc:
        raise ProfileFailed(str(exc)) from exc
    sink.progress(f"read {len(launches)} profiled launch(es) from {path.name}", stage="profile")
    metrics = summarize_launches(launches)
    if args.kernel:
        metrics = [m for m in metrics if m.name == args.kernel]
        if not metrics:
            raise ProfileFailed(f"{path}: no launch of a kernel named {args.kernel}")
    kernels = {k.name: (g, k) for g in graphs for k in g.kernels}
    result = ProfileResult(source="ncu-csv", graphs=[g.path for g in graphs])
    peaks = _peaks_file(args.peaks) if args.peaks else None
    result.peaks = peaks.to_json() if peaks is not None else None
    if peaks is None:
        result.notes.append("no device peaks given (--peaks FILE): the speed of light is unknown")
    from ..measure.traffic import static_graph_traffic

    traffic = {item.kernel: item for g in graphs for item in static_graph_traffic(g)}
    result.kernels = _rows_from_metrics(metrics, kernels, peaks=peaks, source="ncu-csv", traffic=traffic)
    return result


def _peaks_file(path: str) -> Any:
    import json

    from ..measure.peaks import DevicePeaks

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return DevicePeaks.from_json(data)
    except OSError as exc:
        raise ProfileFailed(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (ValueError, TypeError) as exc:
        raise ProfileFailed(f"{path}: not a device peaks JSON ({exc})") from exc


def _rows_from_metrics(metrics: list[KernelMetrics], kernels: dict[str, Any], peaks: Any,
                       source: str, traffic: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``traffic`` maps a kernel name to the LaunchTraffic standing for it (its ideal bytes)."""
    from ..analyst import analyze_kernel

    def per_call_ns(m: KernelMetrics) -> float:
        graph, _ = kernels.get(m.name, (None, None))
        count = len(graph.launches_of(m.name)) if graph is not None else 1
        return (m.duration_ns or 0.0) * max(1, count)

    total = sum(per_call_ns(m) for m in metrics)
    rows = []
    for m in metrics:
        graph, kernel = kernels.get(m.name, (None, None))
        analysis = analyze_kernel(m, None, peaks, kernel, launch_args=(traffic or {}).get(m.name))
        rows.append({
            "name": m.name, "graph": graph.path if graph is not None else None,
            "kind": kernel.kind if kernel is not None else None,
            "duration_ns": m.duration_ns, "time_share": per_call_ns(m) / total if total else None,
            "time_share_of": "profiled kernels",
            "tier": analysis.tier, "dram_pct": m.dram_pct, "sm_pct": m.compute_pct, "memory_pct": m.memory_pct,
            "occupancy_pct": m.achieved_occupancy_pct, "registers": m.registers,
            "block_size": m.block_size, "grid_size": m.grid_size, "launches": m.launches,
            "rules": [r.to_json() for r in m.top_rules(len(m.rules))],
            "top_rule": analysis.top_rules[0].name if analysis.top_rules else None,
            "evidence": analysis.evidence, "directions": [d.to_json() for d in analysis.directions],
            "achieved": analysis.achieved, "source": source,
            "l2_hit_pct": m.l2_hit_pct, "sector_efficiency_pct": m.sector_efficiency_pct,
            **analysis.sol_fields(),
        })
    return rows


def _profile_graph(graph: CompiledGraph, args: argparse.Namespace, sink: EventSink, result: ProfileResult) -> None:
    from ..measure.devices import DeviceMismatch, device_for_graph
    from ..measure.ncu import NcuError, NcuNotFound, NcuPermissionDenied

    try:
        device = device_for_graph(args.device, graph.device, graph.name)
    except DeviceMismatch as exc:
        raise ProfileFailed(str(exc)) from exc
    kernels = [args.kernel] if args.kernel else None
    reason = None
    if device == "cpu":
        reason = f"{graph.name} runs on the CPU backend; ncu needs an NVIDIA GPU"
    else:
        from ..measure.ncu_profile import profile_graph
        from ..measure.peaks import device_peaks

        try:
            profiled = profile_graph(graph, kernels=kernels, iters=args.iters, device=device,
                                     use_cache=not args.no_cache, cancel=sink.cancel_event)
        except NcuNotFound as exc:
            reason = str(exc)
        except NcuPermissionDenied as exc:
            reason = str(exc)
        except NcuError as exc:
            reason = f"ncu failed on {graph.name}: {exc}"
        else:
            sink.progress(f"ncu: {len(profiled.kernels)} kernel(s) of {graph.name}"
                          + (f" ({len(profiled.from_cache)} from cache)" if profiled.from_cache else ""),
                          stage="profile")
            peaks = device_peaks(device, cancel=sink.cancel_event)
            if peaks is None:
                result.notes.append(f"the peaks of {device} could not be measured: the speed of light is unknown")
            else:
                result.peaks = peaks.to_json()
            result.notes.extend(profiled.notes)
            timing = _launch_timing(graph, device, sink, result)
            traffic = _traffic_by_kernel(graph, timing)
            result.kernels.extend(_rows_from_metrics(profiled.kernels, {k.name: (graph, k) for k in graph.kernels},
                                                     peaks, "ncu", traffic))
            result.graph_sol.append(_graph_sol(graph, timing, peaks, cpu=False))
            return
    result.ncu_available = False
    result.notes.append(f"ncu not available: {reason}; kernels timed in a {device} worker instead, tier unknown")
    sink.progress(f"ncu not available; timing {graph.name} on {device}", stage="profile")
    _timed_rows(graph, device, kernels, sink, result, reason or "")


def _launch_timing(graph: CompiledGraph, device: str, sink: EventSink, result: ProfileResult) -> Any:
    """One timed run for the launch arguments and the graph time (None, with a note, on failure)."""
    from ..measure.launch_timing import MeasurementError, time_launches

    sink.progress(f"recording launch arguments of {graph.name}", stage="profile")
    try:
        timing = time_launches(graph, device=device, cancel=sink.cancel_event)
    except MeasurementError as exc:
        result.notes.append(f"launch arguments not recorded ({exc}); ideal bytes from the wrapper's allocations "
                            "where they resolve")
        return None
    result.notes.extend(timing.notes)
    return timing


def _traffic_by_kernel(graph: CompiledGraph, timing: Any) -> dict[str, Any]:
    """Per kernel, the launch standing for it: recorded in the run, else read from the wrapper."""
    from ..measure.traffic import kernel_launch, static_graph_traffic

    recorded = list(timing.launch_traffic.values()) if timing is not None else []
    static = static_graph_traffic(graph)
    out: dict[str, Any] = {}
    for kernel in graph.kernels:
        found = kernel_launch(recorded, kernel.name) or kernel_launch(static, kernel.name)
        if found is not None:
            out[kernel.name] = found
    return out


def _graph_sol(graph: CompiledGraph, timing: Any, peaks: Any, cpu: bool) -> dict[str, Any]:
    """The graph's inputs and outputs once, against the timed graph (module-call path)."""
    from ..measure.traffic import speed_of_light

    ideal = timing.graph_ideal if timing is not None else None
    sol = speed_of_light(ideal, duration_ms=timing.total_ms if timing is not None else None,
                         duration_source=f"timed graph, {timing.path} path" if timing is not None else None,
                         copy_bytes_per_s=peaks.copy_bytes_per_s if peaks is not None else None, cpu=cpu,
                         ideal_unknown_reason="unknown: the graph's inputs and outputs were not recorded")
    return {"graph": graph.path, "name": graph.name, **{k: v for k, v in sol.to_json().items()
                                                         if not k.startswith("dram") and k != "traffic_ratio"
                                                         and k != "traffic_unknown_reason"}}


def _timed_rows(graph: CompiledGraph, device: str, only: list[str] | None, sink: EventSink,
                result: ProfileResult, ncu_reason: str) -> None:
    from ..analyst import analyze_kernel
    from ..measure.launch_timing import MeasurementError, time_launches

    try:
        timing = time_launches(graph, device=device, cancel=sink.cancel_event)
    except MeasurementError as exc:
        raise ProfileFailed(f"ncu not available ({ncu_reason}), and timing without it failed too: {exc}") from exc
    result.notes.extend(timing.notes)
    peaks = None
    cpu = device == "cpu"
    if not cpu:
        from ..measure.peaks import device_peaks

        peaks = device_peaks(device, cancel=sink.cancel_event)
        result.peaks = peaks.to_json() if peaks is not None else None
    traffic = _traffic_by_kernel(graph, timing)
    result.graph_sol.append(_graph_sol(graph, timing, peaks, cpu))
    from ..measure.accounting import describe_overhead

    for item in timing.overheads:
        result.overheads.append({"graph": graph.path, **item.to_json(), "description": describe_overhead(item)})
    for kernel in graph.kernels:
        if only and kernel.name not in only:
            continue
        orders = [launch.order for launch in graph.launches_of(kernel.name)]
        times = [timing.launch_times_ms[o] for o in orders if o in timing.launch_times_ms]
        kernel_ms = sum(times) if times else None
        launch = traffic.get(kernel.name)
        launch_ms = timing.launch_times_ms.get(launch.order) if launch is not None else None
        analysis = analyze_kernel(None, None, peaks, kernel, launch_args=launch, duration_ms=launch_ms,
                                  duration_source=f"timed launch, {timing.path} path (CUDA events; no ncu)",
                                  cpu=cpu)
        analysis.evidence.append(f"time per graph call: {kernel_ms:.4f} ms over {len(times)} launch(es), "
                                 f"median of {timing.iters} runs ({timing.path} path, {timing.device})"
                                 if kernel_ms is not None else "no time recorded for this kernel")
        result.kernels.append({
            "name": kernel.name, "graph": graph.path, "kind": kernel.kind,
            "duration_ns": kernel_ms * 1e6 if kernel_ms is not None else None,
            "time_share": kernel_ms / timing.share_basis_ms if kernel_ms is not None and timing.share_basis_ms
            else None,
            "time_share_of": "graph", "tier": analysis.tier, "dram_pct": None, "sm_pct": None,
            "memory_pct": None, "occupancy_pct": None, "registers": None, "block_size": None,
            "grid_size": None, "launches": len(orders), "rules": [], "top_rule": None,
            "evidence": analysis.evidence, "directions": [d.to_json() for d in analysis.directions],
            "achieved": {}, "source": "timing", "timing_path": timing.path, "device": timing.device,
            "graph_total_ms": timing.total_ms, "l2_hit_pct": None, "sector_efficiency_pct": None,
            **analysis.sol_fields(),
        })


def _fmt(value: Any, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _print(result: ProfileResult) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("kernel", overflow="fold")
    for column in ("time", "share"):
        table.add_column(column, justify="right", no_wrap=True)
    for column in ("SOL", "traffic"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("tier", no_wrap=True)
    for column in ("DRAM", "SM", "occ.", "regs"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("top rule", overflow="fold")
    styles = {"near-optimal": "green", "memory-bound": "yellow", "compute-bound": "yellow",
              "underutilized": "red", "unknown": "dim"}
    for row in result.kernels:
        duration = row["duration_ns"]
        time_text = "-" if duration is None else (f"{duration / 1e3:,.1f} us" if duration < 1e6
                                                  else f"{duration / 1e6:,.2f} ms")
        style = styles.get(row["tier"], "")
        # no share figure, said why in a note: "all of it, within noise" (a share over 100% means nothing)
        share_text = "~100%" if row.get("time_share_note") else _fmt(row["time_share"], ".1%")
        table.add_row(row["name"], time_text, share_text, _fmt(row.get("sol_pct"), ".0f", "%"),
                      _fmt(row.get("traffic_ratio"), ".2f", "x"), f"[{style}]{row['tier']}[/{style}]",
                      _fmt(row["dram_pct"], ".1f", "%"), _fmt(row["sm_pct"], ".1f", "%"),
                      _fmt(row["occupancy_pct"], ".1f", "%"), _fmt(row["registers"], "d"), row["top_rule"] or "-")
    console.print(f"[bold]profile[/bold] ({result.source}; time share of {_share_basis(result)})")
    console.print(table)
    for item in result.graph_sol:
        if item.get("sol_pct") is not None:
            console.print(f"[cyan]graph[/cyan] {item['name']}: {item['sol_pct']:.0f}% of speed of light "
                          f"({item['ideal_bytes']:,} bytes of inputs and outputs in {item['duration_ms']:.4f} ms, "
                          f"{item['duration_source']})", highlight=False)
        else:
            console.print(f"[cyan]graph[/cyan] {item['name']}: speed of light {item.get('unknown_reason')}",
                          highlight=False)
    for item in result.overheads:
        console.print(f"[cyan]overhead[/cyan] {item['description']}", highlight=False)
        if item.get("suggestion"):
            console.print(f"  hint: {item['suggestion']}", highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note[/yellow] {note}")
    for row in result.kernels:
        causes = f" ({', '.join(row['causes'])})" if row.get("causes") else ""
        console.print(f"\n[bold]{row['name']}[/bold]  {row['tier']}{causes}  {row.get('sol_text') or ''}")
        for line in row["evidence"]:
            console.print(f"  {line}", highlight=False)
        for direction in row["directions"]:
            console.print(f"  [cyan]{direction['name']}[/cyan]: {direction['rationale']} ({direction['evidence']})",
                          highlight=False)


def _share_basis(result: ProfileResult) -> str:
    bases = {str(row["time_share_of"]) for row in result.kernels if row.get("time_share_of") is not None}
    return " / ".join(sorted(bases)) or "n/a"
