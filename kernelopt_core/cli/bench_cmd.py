"""``kernelopt bench SUITE``: run a benchmark campaign over a KernelBench-format suite.

Per problem: time eager and max-autotune, account for the whole compiled callable, compile,
classify, optimize through the gates, and record optimized / matched / fallback (with its reason)
/ error. ``--timeout`` is each problem's budget: the optimizer gets what the problem's own stages
left of it and plans its search against it; ``--budget`` is the whole campaign's (no problem
starts after it). The report gives each problem's time split and the campaign's totals. With ``--allow-config-changes`` the recommended torch.compile configuration change is
verified through gates 3-4 on the full callable and reported in its own column, with a geomean
"with configuration changes" beside the kernel-only one. Writes ``<out>/problems/*.json`` as
problems finish, then ``results.json``, ``report.md`` and ``speedups.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ..events import HEARTBEAT_STAGE, EventSink, ProgressEvent, heartbeat, json_line_sink
from .common import (
    DEVICE_HELP,
    EXIT_INTERRUPTED,
    EXIT_NEGATIVE,
    EXIT_OK,
    TerminalDisplay,
    console,
    err_console,
    output_result,
)
from .common import fail as _fail

if TYPE_CHECKING:
    from rich.progress import Progress

HEARTBEAT_S = 8.0  # with nothing new for this long, the last step is repeated with its clock (a line every 10 s)


def fail(message: str, code: int = 2) -> int:
    return _fail(escape(message), code)  # messages name paths and extras like kernelopt[ray]: not markup


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="run a benchmark campaign over a folder of KernelBench-format problems")
    parser.add_argument("suite", help="a folder of problems (files, or level1/ level2/ ... folders) or one problem file")
    parser.add_argument("--levels", help="comma-separated levels to run, e.g. 1,2 (default: all)")
    parser.add_argument("--out", help="output folder (default: .kernelopt/bench/<suite name>)")
    parser.add_argument("--resume", action="store_true", help="skip problems that already have a result file")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="the problems' float type")
    parser.add_argument("--scale", help="set KERNELOPT_PROBLEM_SCALE for the problems (e.g. tiny: CPU-sized inputs)")
    parser.add_argument("--gpus", type=int, default=0, help="spread problems over N local GPUs (one worker each)")
    parser.add_argument("--workers", type=int, default=1, help="parallel problems on the CPU (or local Ray CPUs)")
    parser.add_argument("--ray", dest="ray_address", metavar="ADDRESS",
                        help="run one Ray task per problem: 'local' or a cluster address")
    parser.add_argument("--provider", default="offline", help="offline, anthropic or vertex")
    parser.add_argument("--model", help="LLM model for LLM providers")
    parser.add_argument("--beam-width", type=int, help="beam width B (default: the optimizer's, 4)")
    parser.add_argument("--iterations", type=int, help="search iterations T (default: the optimizer's, 5)")
    parser.add_argument("--plans", type=int, help="plans per beam node N (default: the optimizer's, 4)")
    parser.add_argument("--retries", type=int, help="executor attempts per plan K (default: the optimizer's, 4)")
    parser.add_argument("--force", action="store_true", help="optimize vendor-dominated graphs too")
    parser.add_argument("--optimizer-option", action="append", default=[], metavar="KEY=VALUE",
                        help="any other optimizer setting, e.g. ab_rounds=5 or use_ncu=false (repeatable)")
    parser.add_argument("--no-optimize", action="store_true", help="time, compile and classify only")
    parser.add_argument("--allow-config-changes", action="store_true",
                        help="verify the recommended torch.compile configuration change (e.g. "
                             "mode='max-autotune-no-cudagraphs', static inputs) through gates 3-4 on the full "
                             "callable; reported apart from kernel rewrites")
    parser.add_argument("--accounting", default="auto", choices=["auto", "on", "off"],
                        help="account for the whole torch.compile callable, its overheads beyond the kernels "
                             "(auto: on a GPU; it compiles each problem once more)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds per problem (default 1800): the problem's budget, compile and search included; "
                             "the search plans against what is left of it, and the process is killed only as a "
                             "backstop a grace period later (a quarter of it, 10 s to 2 min), keeping what the "
                             "search had verified")
    parser.add_argument("--budget", type=float, help="campaign seconds: no problem starts after this")
    parser.add_argument("--reps", type=int, help="timing repetitions (default: adapt to each callable)")
    parser.add_argument("--confirm-rounds", type=int, help="rounds of the confirmation A/B")
    parser.add_argument("--no-plot", action="store_true", help="do not draw speedups.png")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines on stdout")
    parser.add_argument("--json", action="store_true", help="print the campaign summary as JSON")
    parser.set_defaults(handler=run)


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["ab_rounds=5", "use_ncu=false"]`` -> {"ab_rounds": 5, "use_ncu": False}; values are JSON, else text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--optimizer-option wants KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            options[key.strip()] = text
    return options


def _default_out(suite: str) -> str:
    name = os.path.basename(os.path.normpath(os.path.abspath(suite))) or "suite"
    return os.path.join(".kernelopt", "bench", os.path.splitext(name)[0])


def run(args: argparse.Namespace) -> int:
    from ..bench.campaign import run_campaign
    from ..bench.config import CampaignConfig
    from ..bench.ray_runner import RayUnavailable
    from ..bench.scheduler import SlotError
    from ..bench.suite import SuiteError, discover_suite, parse_levels

    try:
        problems = discover_suite(args.suite, parse_levels(args.levels))
        options = parse_options(args.optimizer_option)
        config = CampaignConfig(
            device=args.device, dtype=args.dtype, scale=args.scale, provider=args.provider, model=args.model,
            beam_width=args.beam_width, iterations=args.iterations, plans=args.plans, retries=args.retries,
            force=args.force, optimizer_options=options, optimize=not args.no_optimize, gpus=args.gpus, workers=args.workers,
            account=args.accounting, allow_config_changes=args.allow_config_changes,
            ray_address=args.ray_address, resume=args.resume, timeout_s=args.timeout, deadline_s=args.budget,
            timing_reps=args.reps, confirm_rounds=args.confirm_rounds, plot=not args.no_plot,
        )
    except (SuiteError, ValueError) as exc:
        return fail(str(exc))
    if config.ray_address:
        try:
            from ..bench.ray_runner import import_ray

            import_ray()
        except RayUnavailable as exc:
            return fail(str(exc))
    out_dir = args.out or _default_out(args.suite)
    try:
        if args.events:
            result = run_campaign(problems, config, out_dir, json_line_sink(), suite=args.suite)
        else:
            # the progress goes where the report goes (stdout), or to stderr when stdout is JSON
            with BenchProgress(len(problems), err_console if args.json else console) as progress, \
                    heartbeat(progress.sink, HEARTBEAT_S) as sink:
                result = run_campaign(problems, config, out_dir, sink, suite=args.suite)
    except (SlotError, RayUnavailable) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        # the running problems were ended and recorded as cancelled; --resume runs them again
        err_console.print(f"[yellow]interrupted[/yellow]: the finished problems are in {escape(out_dir)}; "
                          "run the same command with --resume to go on")
        return EXIT_INTERRUPTED
    output_result(args, result.to_json(), lambda: _print_summary(result))
    if result.regressions:
        err_console.print(f"[bold red]REGRESSIONS: {len(result.regressions)} accepted result(s) slower than "
                          f"max-autotune: {', '.join(result.regressions)}[/bold red]")
        return EXIT_NEGATIVE
    return EXIT_OK


class BenchProgress(TerminalDisplay):
    """The campaign's progress. On a terminal: a bar over problems, its current step, and a line per
    finished problem. Elsewhere (a log, a pipe): one timestamped line per step, finished problems
    included, and the heartbeat's line while a step lasts, so a line comes at least every 10 s."""

    def __init__(self, total: int, out: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.out = out
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self._progress = Progress(TextColumn("[bold]bench[/bold]"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("{task.description}"), console=out) \
            if out.is_terminal else None
        self._task = self._progress.add_task("starting", total=total) if self._progress is not None else None
        self._lock = threading.Lock()
        self.sink = EventSink(self._on_event)

    def _display(self) -> Progress | None:
        return self._progress

    def _on_event(self, event: ProgressEvent) -> None:
        with self._lock:
            extra = event.extra
            if isinstance(extra.get("done"), int):
                self.done = extra["done"]
            if self._progress is None:
                self._line(event)
                return
            if event.stage == HEARTBEAT_STAGE:
                return  # the bar's clock already shows it
            assert self._task is not None  # made with the bar
            if "done" in extra:
                self._progress.update(self._task, completed=extra["done"])
            if event.stage == "problem-done":
                colour = {"optimized": "green", "matched": "blue", "fallback": "yellow"}.get(
                    str(extra.get("outcome")), "red")
                self._progress.console.print(f"[{colour}]{escape(event.message)}[/{colour}]")
            else:
                self._progress.update(self._task, description=escape(event.message[:80]))

    def _line(self, event: ProgressEvent) -> None:
        message = event.message
        waiting = event.extra.get("waiting_stage") if event.stage == HEARTBEAT_STAGE else None
        if waiting in ("problem-done", "campaign"):  # between problems: a problem's process is starting
            first = "first" if waiting == "campaign" else "next"
            message = f"the {first} problem is starting ({float(event.extra.get('waiting_s') or 0):.0f} s)"
        self.out.print(f"{time.monotonic() - self.started:6.0f} s  [{self.done}/{self.total}]  {message}",
                       soft_wrap=True, highlight=False, markup=False)


def ratio_text(value: float | None) -> str:
    """A speedup ratio that never prints as 0.000x: three decimals, or two significant digits when smaller."""
    if value is None or value <= 0:
        return "-"
    return f"{value:.3f}x" if value >= 0.01 else f"{value:.2g}x"


def level_rows(levels: dict[int, Any] | dict[str, Any]) -> list[tuple[str, Any]]:
    """The per-level rows: ``L1``, ``L2``, ...; problems outside level folders are "other", and a suite
    with no levels at all has only its "all" row. The summary's keys are the levels as text (JSON's)."""
    by_level = {int(level): group for level, group in levels.items()}
    rows = [(f"L{level}", group) for level, group in sorted(by_level.items()) if level > 0]
    if 0 in by_level and rows:
        rows.append(("other", by_level[0]))
    return rows


def _print_summary(result: Any) -> None:
    from rich.table import Table

    from ..bench.outcome import NOT_OPTIMIZED

    summary = result.summary
    table = Table(title="benchmark campaign", header_style="bold")
    # short headers: the table must fit an 80-column terminal (report.md has the long names)
    for column in ("L", "n", "opt", "match", "fallb", "err", "gm/MA", "gm/cfg", "gm/eager", "f1.0", "f1.03", "f1.1"):
        table.add_column(column, justify="right")

    def row(label: str, group: Any) -> None:
        table.add_row(label, str(group.problems), *(str(group.counts[o]) for o in ("optimized", "matched", "fallback", "error")),
                      ratio_text(group.geomean_vs_max_autotune), ratio_text(group.geomean_with_config_changes),
                      ratio_text(group.geomean_vs_eager),
                      *(f"{100 * v:.0f}%" for v in group.fast_p.values()))

    for label, group in level_rows(summary.levels):
        row(label, group)
    row("all", summary.overall)
    console.print(table)
    console.print("gm/MA, gm/eager: geomean speedup over max-autotune / eager (kernel rewrites); gm/cfg: over "
                  "max-autotune counting verified configuration changes (the better figure per problem, never a "
                  "product); f<p>: fast_p over max-autotune")
    if str(result.info.device).startswith("cpu"):
        console.print("[yellow]note[/yellow] on the CPU backend Triton's interpreter runs the compiled kernels: "
                      "gm/eager compares it with PyTorch's native CPU kernels and says nothing about a GPU",
                      soft_wrap=True)
    timed_only = summary.fallback_reasons.get("not-optimized", 0)
    if timed_only:
        console.print(f"{timed_only} problem(s) {NOT_OPTIMIZED} (--no-optimize): nothing was "
                      "searched; the table counts them under fallb", highlight=False)
    check = summary.regression
    verdict = "[green]0 regressions[/green]" if check.passed else f"[bold red]{len(check.regressions)} REGRESSIONS[/bold red]"
    console.print(f"{verdict} among {check.checked} accepted result(s)")
    if result.not_reached:
        console.print(f"[yellow]not reached (budget):[/yellow] {', '.join(result.not_reached)}")
    console.print(f"report: {os.path.join(result.out_dir, 'report.md')}")
