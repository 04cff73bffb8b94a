"""``kernelopt optimize PATH``: search faster versions of a graph's Triton kernels, verified by four gates.

``PATH`` may also be a project's own kernel file (``my_kernels.py --kernel K --harness H``): the
result's diff then edits that file's kernel function (docs/user-kernels.md).

Live progress (rich) on a terminal; ``--json`` prints the result as JSON on stdout; ``--events``
streams ``@kernelopt-event`` lines for the language server. ``--resume RUN`` continues a run that
was interrupted. Exit code 0 when the run completed (whatever its decision), 2 when it could not
run, 130 when cancelled.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..events import EventSink, ProgressEvent
from .common import console, err_console, fail, output_result


def register(sub: Any) -> None:
    parser = sub.add_parser("optimize", help="rewrite a compiled graph's Triton kernels and verify them (4 gates)")
    parser.add_argument("path", nargs="?", help="an output_code.py or a dump folder (not needed with --resume)")
    parser.add_argument("--kernel", help="optimize only this Triton kernel")
    parser.add_argument("--provider", default="offline", choices=["offline", "anthropic", "vertex"],
                        help="who writes candidates: offline rewrite families (no API key) or an LLM")
    parser.add_argument("--model", default="claude-sonnet-4-6", help="the LLM model id (anthropic/vertex)")
    parser.add_argument("--beam-width", type=int, default=4, metavar="B")
    parser.add_argument("--iterations", type=int, default=5, metavar="T")
    parser.add_argument("--plans", type=int, default=4, metavar="N", help="plans per beam node and iteration")
    parser.add_argument("--retries", type=int, default=4, metavar="K", help="executor attempts per plan")
    parser.add_argument("--resume", metavar="RUN", help="continue an interrupted run (its id or folder)")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:N] (must match the dump)")
    parser.add_argument("--force", action="store_true", help="search vendor-dominated graphs too")
    parser.add_argument("--allow-config-changes", action="store_true",
                        help="also verify the recommended torch.compile configuration change (gates 3-4 on the "
                             "full callable; needs the problem file: compile_report.json above the dump)")
    parser.add_argument("--accounting", default="auto", choices=["auto", "on", "off"],
                        help="account for the whole torch.compile callable when the problem file is known "
                             "(auto: on a GPU; on the CPU backend it runs the interpreted graph some 15 times)")
    parser.add_argument("--run-root", default=".kernelopt/runs", help="where run folders go")
    parser.add_argument("--max-kernels", type=int, default=3, help="kernels searched, largest share first")
    parser.add_argument("--ab-rounds", type=int, default=None, help="gate 4 A/B rounds (default: device budget)")
    ablation = parser.add_argument_group("ablation (switch components off)")
    ablation.add_argument("--no-beam", action="store_true", help="greedy search, width 1")
    ablation.add_argument("--no-ncu", action="store_true", help="no Nsight Compute profiling")
    ablation.add_argument("--no-memory", action="store_true", help="no experience memory or AVOID list")
    ablation.add_argument("--no-perf-gate", action="store_true", help="skip gate 4 (kernel timing decides)")
    ablation.add_argument("--single-iteration", action="store_true", help="one iteration only")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines on stdout")
    from ..userkernels.cli import add_harness_argument

    add_harness_argument(parser)
    parser.set_defaults(handler=run)


def build_config(args: argparse.Namespace) -> Any:
    from ..search.pipeline import OptimizeConfig

    for name in ("beam_width", "iterations", "plans", "retries", "max_kernels"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    return OptimizeConfig(
        provider=args.provider, model=args.model, beam_width=args.beam_width, iterations=args.iterations,
        plans=args.plans, retries=args.retries, device=args.device, force=args.force,
        allow_config_changes=args.allow_config_changes, account_callable=args.accounting,
        run_root=args.run_root, max_kernels=args.max_kernels,
        ab_rounds=args.ab_rounds, use_beam=not args.no_beam, use_ncu=not args.no_ncu,
        use_memory=not args.no_memory, use_perf_gate=not args.no_perf_gate,
        multi_iteration=not args.single_iteration,
    )


def run(args: argparse.Namespace) -> int:
    from ..events import CancelledError, json_line_sink
    from ..search.pipeline import OptimizeError, optimize

    if not args.path and not args.resume:
        return fail("give a dump PATH to optimize, or --resume RUN")
    try:
        config = build_config(args)
    except ValueError as exc:
        return fail(str(exc))
    from ..userkernels.cli import is_user_kernel_path, target_from_args
    from ..userkernels.target import TargetError

    target = None
    if args.path and not args.resume and is_user_kernel_path(args.path):  # a project's own kernel
        try:
            target = target_from_args(args, args.path)
        except TargetError as exc:
            return fail(str(exc))
        args.kernel = target.kernel
    try:
        if args.events:
            result = optimize(args.path or "", kernel=args.kernel, config=config, sink=json_line_sink(),
                              resume=args.resume, target=target)
        else:
            view_console = err_console if args.json else console
            with LiveProgress(view_console) as view:
                result = optimize(args.path or "", kernel=args.kernel, config=config, sink=view.sink(),
                                  resume=args.resume, target=target)
    except OptimizeError as exc:
        return fail(str(exc))  # on stderr: a job runner reports it as the job's failure
    except CancelledError:
        err_console.print("[yellow]cancelled[/yellow]; resume with --resume")
        return 130
    data = result.to_json()
    output_result(args, data, lambda: print_result(console, data))
    return 0


# --- rendering (shared with `kernelopt demo`) ----------------------------------------------------

_STYLES = {"optimized": "bold green", "matched": "bold yellow", "fallback": "bold red"}


@dataclass
class _State:
    run: str = ""
    kernel: str = ""
    iteration: str = ""
    candidate: str = ""
    gate: str = ""
    best: float | None = None
    last: str = "starting"


class LiveProgress:
    """A small live panel: run, kernel, iteration, candidate, gate and best speedup so far."""

    def __init__(self, console: Console):
        self.console = console
        self.state = _State()
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=True)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)

    def sink(self, cancel: Any = None) -> EventSink:
        return EventSink(self.update, cancel)

    def update(self, event: ProgressEvent) -> None:
        s = self.state
        extra = event.extra or {}
        if event.stage == "start":
            s.run = str(extra.get("run_id", ""))
        if extra.get("kernel"):
            s.kernel = str(extra["kernel"])
        if event.iteration is not None and event.iterations:
            s.iteration = f"{event.iteration}/{event.iterations}"
        if event.stage == "candidate":
            s.candidate = f"{extra.get('candidate', '')} {extra.get('family', '')} (attempt {extra.get('attempt', 1)})"
            s.gate = ""
        if event.stage == "gate":
            s.gate = event.message
        if event.best_speedup is not None:
            s.best = event.best_speedup
        s.last = event.message
        if event.stage in ("dispatch", "done") or (event.stage == "iteration" and "done" in event.message):
            self.console.print(f"[dim]{event.message}[/dim]")
        self.live.update(self._render())

    def _render(self) -> Table:
        s = self.state
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        table.add_row("run", s.run or "-")
        table.add_row("kernel", s.kernel or "-")
        table.add_row("iteration", s.iteration or "-")
        table.add_row("candidate", s.candidate or "-")
        table.add_row("gate", s.gate or "-")
        table.add_row("best kernel speedup", f"{s.best:.3f}x" if s.best else "-")
        table.add_row("", Text(s.last[:120], style="dim"))
        return table


def print_result(console: Console, result: dict[str, Any]) -> None:
    decision = str(result.get("decision"))
    console.print()
    console.print(Text(f"{decision.upper()}", style=_STYLES.get(decision, "bold")), Text(f" {result.get('reason')}"))
    speedup, ci = result.get("speedup"), result.get("ci")
    if isinstance(speedup, (int, float)):
        interval = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
        console.print(f"end-to-end speedup: [bold]{speedup:.3f}x[/bold]{interval} through {result.get('timing_path')}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("kernel", "share", "decision", "best rewrite", "kernel speedup", "candidates", "passed 1-2"):
        table.add_column(column)
    for kernel in result.get("kernels", []):
        share = kernel.get("share")
        ks = kernel.get("kernel_speedup")
        table.add_row(str(kernel.get("name")), f"{share:.0%}" if isinstance(share, (int, float)) else "-",
                      str(kernel.get("decision")), str(kernel.get("best_title") or "-"),
                      f"{ks:.3f}x" if isinstance(ks, (int, float)) else "-", str(kernel.get("candidates", 0)),
                      str(kernel.get("screened_ok", 0)))
    if result.get("kernels"):
        console.print(table)
    for suggestion in result.get("suggestions") or []:
        console.print(f"[cyan]suggestion[/cyan] {suggestion}")
    usage = result.get("llm_usage") or {}
    if usage.get("calls"):
        cost = usage.get("cost_usd")
        console.print(f"LLM: {usage['calls']} calls, {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} "
                      f"out tokens" + (f", ${cost:.4f}" if isinstance(cost, (int, float)) else ""))
    console.print(Group(Text(f"run folder: {result.get('run_dir')}"), Text(f"report: {result.get('report')}"),
                        Text(f"diff: {result.get('diff')}")))
