"""``kernelopt optimize PATH``: search faster versions of a graph's Triton kernels, verified by four gates.

``PATH`` may also be a project's own kernel file (``my_kernels.py --kernel K --harness H``): the
result's diff then edits that file's kernel function (docs/user-kernels.md).

``--budget SECONDS`` (default 10 min, printed at the start; 0: no limit) is the deadline the search
plans against: it stops starting candidates when the time left is what the final gates need and
reports its best verified result, labelled "budget reached". Live progress (rich) on a terminal,
one line per step otherwise; ``--json`` prints the result as
JSON on stdout; ``--events`` streams ``@kernelopt-event`` lines for the language server. Every run
lives in its own folder (``--run-root``) and an interrupted one continues with ``--resume RUN``:
Ctrl-C prints the exact command. An optimized result ends with the command that deploys it;
``--deploy`` adds it to the accepted-kernel store at once.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..events import HEARTBEAT_STAGE, EventSink, ProgressEvent
from .common import DEVICE_HELP, EXIT_INTERRUPTED, TerminalDisplay, console, err_console, fail, output_result

DEFAULT_RUN_ROOT = ".kernelopt/runs"
HEARTBEAT_S = 8.0  # with nothing new for this long, the last step is repeated with its elapsed time (so a line
# comes at least every 10 s, with the time a busy machine takes to print it)


def register(sub: Any) -> None:
    parser = sub.add_parser("optimize", help="rewrite a compiled graph's Triton kernels and verify them (4 gates)")
    parser.add_argument("path", nargs="?", help="an output_code.py, a dump folder, or your own kernel file (FILE.py "
                                               "with @triton.jit kernels; see --harness); not needed with --resume")
    parser.add_argument("--kernel", help="optimize only this Triton kernel (default: the largest by time share)")
    parser.add_argument("--provider", default="offline", choices=["offline", "anthropic", "vertex"],
                        help="who writes candidates: offline rewrite families (no API key) or an LLM")
    parser.add_argument("--model", default="claude-sonnet-4-6", help="the LLM model id (anthropic/vertex)")
    parser.add_argument("--beam-width", type=int, default=4, metavar="B", help="beam nodes kept per iteration")
    parser.add_argument("--iterations", type=int, default=5, metavar="T", help="search iterations")
    parser.add_argument("--plans", type=int, default=4, metavar="N", help="plans per beam node and iteration")
    parser.add_argument("--retries", type=int, default=4, metavar="K", help="executor attempts per plan")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="seconds for the whole run (default 600: 10 min; 0: no limit). The search stops "
                             "starting candidates when the time left is what the final gates need, and reports "
                             "its best verified result")
    parser.add_argument("--resume", metavar="RUN", help="continue an interrupted run (its id or folder)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--force", action="store_true", help="search vendor-dominated graphs too")
    parser.add_argument("--allow-config-changes", action="store_true",
                        help="also verify the recommended torch.compile configuration change (gates 3-4 on the "
                             "full callable; needs the problem file: compile_report.json above the dump)")
    parser.add_argument("--accounting", default="auto", choices=["auto", "on", "off"],
                        help="account for the whole torch.compile callable when the problem file is known "
                             "(auto: on a GPU; on the CPU backend it runs the interpreted graph some 15 times)")
    parser.add_argument("--run-root", default=DEFAULT_RUN_ROOT, help="where run folders go")
    parser.add_argument("--max-kernels", type=int, default=3, help="kernels searched, largest share first")
    parser.add_argument("--ab-rounds", type=int, default=None,
                        help="gate 4 A/B rounds (default: the device's timing effort)")
    parser.add_argument("--deploy", action="store_true",
                        help="add an optimized result to the accepted-kernel store (see `kernelopt accepted`)")
    parser.add_argument("--store", help="with --deploy: the store folder (default: .kernelopt/accepted of the project)")
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


def budget_seconds(value: float | None) -> float | None:
    """``--budget``: None (not given) is the default budget, 0 no limit; a negative or non-finite value is an error."""
    import math

    from ..search.deadline import DEFAULT_BUDGET_S

    if value is None:
        return DEFAULT_BUDGET_S
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--budget must be a number of seconds (0: no limit), not {value}")
    return value or None


def budget_line(seconds: float | None) -> str:
    from ..search.time_split import seconds_text

    if seconds is None:
        return "budget: no limit (--budget 0)"
    return f"budget: {seconds_text(seconds)} (--budget SECONDS to change it, 0 for no limit)"


def build_config(args: argparse.Namespace) -> Any:
    from ..search.pipeline import OptimizeConfig

    for name in ("beam_width", "iterations", "plans", "retries", "max_kernels"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    return OptimizeConfig(budget_s=budget_seconds(args.budget),
        provider=args.provider, model=args.model, beam_width=args.beam_width, iterations=args.iterations,
        plans=args.plans, retries=args.retries, device=args.device, force=args.force,
        allow_config_changes=args.allow_config_changes, account_callable=args.accounting,
        run_root=args.run_root, max_kernels=args.max_kernels,
        ab_rounds=args.ab_rounds, use_beam=not args.no_beam, use_ncu=not args.no_ncu,
        use_memory=not args.no_memory, use_perf_gate=not args.no_perf_gate,
        multi_iteration=not args.single_iteration,
    )


def run(args: argparse.Namespace) -> int:
    from ..events import CancelledError, heartbeat, json_line_sink
    from ..search.pipeline import OptimizeError, optimize

    if not args.path and not args.resume:
        return fail("give a dump PATH to optimize, or --resume RUN")
    if args.store and not args.deploy:
        return fail("--store goes with --deploy")
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
    tracker = RunTracker(args.run_root, resumed=args.resume)
    if not args.events:
        (err_console if args.json else console).print(budget_line(config.budget_s), soft_wrap=True, highlight=False)
    try:
        if args.events:
            with heartbeat(tracker.wrap(json_line_sink()), HEARTBEAT_S) as sink:
                result = optimize(args.path or "", kernel=args.kernel, config=config, sink=sink, resume=args.resume,
                                  target=target)
        else:
            view_console = err_console if args.json else console
            with LiveProgress(view_console) as view, heartbeat(tracker.wrap(view.sink()), HEARTBEAT_S) as sink:
                result = optimize(args.path or "", kernel=args.kernel, config=config, sink=sink, resume=args.resume,
                                  target=target)
    except OptimizeError as exc:
        return fail(str(exc))  # on stderr: a job runner reports it as the job's failure
    except (CancelledError, KeyboardInterrupt):
        return tracker.interrupted()
    data = result.to_json()
    data["deploy_command"] = deploy_command(data)
    if args.deploy and data["decision"] == "optimized" and not is_user_kernel_run(data):  # yours: a diff
        code = deploy(data, args.store, args.json or args.events)
        if code:
            return code

    def report() -> None:
        print_result(console, data)
        print_deploy_hint(console, data, args.deploy)

    output_result(args, data, report)
    return 0


class RunTracker:
    """Remembers which run a command is in, so an interrupt can say how to continue it."""

    def __init__(self, run_root: str, resumed: str | None = None):
        self.run_root = run_root
        self.run_id: str | None = None
        self.run_dir: str | None = None
        self.resumed = resumed

    def wrap(self, sink: EventSink) -> EventSink:
        def forward(event: ProgressEvent) -> None:
            if event.stage == "start" and event.extra.get("run_id"):
                self.run_id = str(event.extra["run_id"])
                self.run_dir = str(event.extra.get("run_dir") or "") or None
            sink.progress(event.message, **{k: getattr(event, k) for k in ProgressEvent.__dataclass_fields__
                                            if k not in ("message", "extra")}, **event.extra)

        return EventSink(forward, sink.cancel_event)

    def resume_command(self) -> str | None:
        if self.run_id is None:
            return None
        return resume_command(self.run_id, self.run_dir, self.run_root)

    def interrupted(self) -> int:
        command = self.resume_command()
        if command is None:
            err_console.print("[yellow]interrupted[/yellow] before the run started: nothing was recorded, "
                              "nothing to resume", soft_wrap=True)
        else:
            err_console.print(f"[yellow]interrupted[/yellow]: run {escape(self.run_id or '')} keeps everything it "
                              f"measured in {escape(self.run_dir or self.run_root)}", soft_wrap=True)
            err_console.print(f"resume with: {escape(command)}", soft_wrap=True, highlight=False)
        return EXIT_INTERRUPTED


def resume_command(run_id: str, run_dir: str | None, run_root: str = DEFAULT_RUN_ROOT) -> str:
    """The shortest exact command that continues the run from this folder: the id when the
    run root finds it from here, else the run folder's path."""
    by_id = Path(run_root) / run_id
    if run_dir is None or (by_id.is_dir() and os.path.samefile(by_id, run_dir)):
        root = "" if os.path.normpath(run_root) == os.path.normpath(DEFAULT_RUN_ROOT) else \
            f" --run-root {_quote(run_root)}"
        return f"kernelopt optimize --resume {run_id}{root}"
    return f"kernelopt optimize --resume {_quote(run_dir)}"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def deploy_command(result: dict[str, Any]) -> str | None:
    """The command that puts an optimized run's kernels into the accepted store (None: nothing to deploy,
    or a project's own kernel, which comes back as a diff of its file instead)."""
    if result.get("decision") != "optimized" or not result.get("run_dir") or is_user_kernel_run(result):
        return None
    return f"kernelopt accepted add {_quote(str(result['run_dir']))}"


def runnable(command: str) -> str:
    """``command`` ("kernelopt ...") as it runs from here, typed as printed: with the venv's path to
    ``kernelopt`` when the venv is not active (``kernelopt_command``)."""
    from .common import kernelopt_command

    prefix = kernelopt_command()
    return prefix + command.removeprefix("kernelopt") if command.startswith("kernelopt ") else command


def is_user_kernel_run(result: dict[str, Any]) -> bool:
    from ..userkernels.cli import is_user_kernel_path

    return is_user_kernel_path(result.get("graph_path"))


def deploy(result: dict[str, Any], store_root: str | None, quiet: bool) -> int:
    """``--deploy``: add the run's accepted kernels to the store (what ``accepted add RUN`` does)."""
    from ..accepted import AcceptedStore, AcceptedStoreError, entries_from_run

    store = AcceptedStore(store_root)
    try:
        ids = [store.add(entry) for entry in entries_from_run(str(result["run_dir"]))]
    except AcceptedStoreError as exc:
        return fail(f"--deploy: {escape(str(exc))}")
    result["deployed"] = {"store": store.root, "entries": ids}
    return 0


def print_deploy_hint(out: Console, result: dict[str, Any], deploy_asked: bool = False) -> None:
    deployed = result.get("deployed")
    if deployed:
        out.print(f"[green]deployed[/green]: entry {', '.join(deployed['entries'])} added to "
                  f"{escape(deployed['store'])}", soft_wrap=True)
        out.print("use it: `import kernelopt; kernelopt.enable()` before torch.compile in your program "
                  "(or torch.compile(model, backend=\"kernelopt\"))", soft_wrap=True, highlight=False)
    elif result.get("deploy_command"):
        out.print(f"deploy it: {escape(runnable(str(result['deploy_command'])))}", soft_wrap=True, highlight=False)
        out.print("  then `import kernelopt; kernelopt.enable()` before torch.compile in your program "
                  "(or run optimize with --deploy)", soft_wrap=True, highlight=False)
    elif result.get("decision") == "optimized" and is_user_kernel_run(result):
        out.print(f"apply it to your file: patch -p1 < {escape(str(result.get('diff')))} (or Apply to this file in "
                  "the editor); nothing was written to your file", soft_wrap=True, highlight=False)
    elif deploy_asked:
        kept = "the original kernel" if is_user_kernel_run(result) else "the compiler's code"
        out.print(f"nothing deployed: the run kept {kept}", soft_wrap=True)
    if (deployed or result.get("deploy_command")) and str(result.get("device", "")).startswith("cpu"):
        # without it, enable() in the user's program finds only C++ kernels to replace (and says so)
        out.print("  on the CPU, torch.compile writes Triton kernels only with KernelOPT's CPU Triton backend: call "
                  "kernelopt_core.backends.cpu_triton.activate() before importing torch", soft_wrap=True,
                  highlight=False)


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
    last_at: float = 0.0  # monotonic time of the last real event: the step's clock starts there


# Stages whose message stays on screen (the live panel shows the rest while they last).
_KEPT_STAGES = ("dispatch", "done")


class LiveProgress(TerminalDisplay):
    """Progress of a run: on a terminal a live panel (run, kernel, iteration, candidate, gate, best
    speedup, the current step with its clock); elsewhere one timestamped line per step, and a
    heartbeat line while a step lasts (``heartbeat()`` in kernelopt_core.events sends them)."""

    def __init__(self, console: Console):
        self.console = console
        self.state = _State(last_at=time.monotonic())
        self.started = time.monotonic()
        self.live = Live(console=console, refresh_per_second=4, transient=True, get_renderable=self._render) \
            if console.is_terminal else None

    def _display(self) -> Live | None:
        return self.live

    def sink(self, cancel: Any = None) -> EventSink:
        return EventSink(self.update, cancel)

    def update(self, event: ProgressEvent) -> None:
        s = self.state
        extra = event.extra or {}
        if event.stage == HEARTBEAT_STAGE:
            if self.live is None:  # on a terminal the panel's clock already shows it
                self._line(event.message)
            return
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
        s.last_at = time.monotonic()
        kept = event.stage in _KEPT_STAGES or (event.stage == "iteration" and "done" in event.message)
        # the run's end: its decision; the result printed next gives the reason (said once)
        message = f"run done: {extra['decision']}" if event.stage == "done" and extra.get("decision") else event.message
        if self.live is None:
            self._line(message)
        elif kept:
            self.console.print(f"[dim]{escape(message)}[/dim]", soft_wrap=True)

    def _line(self, message: str) -> None:
        self.console.print(f"[dim]{time.monotonic() - self.started:6.0f} s[/dim]  {escape(message)}",
                           soft_wrap=True, highlight=False)

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
        elapsed = time.monotonic() - self.started
        table.add_row(f"{elapsed:.0f} s", Text(f"{s.last[:110]} · {time.monotonic() - s.last_at:.0f} s", style="dim"))
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
        share_text = "~100%" if kernel.get("share_note") else f"{share:.0%}" if isinstance(share, (int, float)) else "-"
        table.add_row(str(kernel.get("name")), share_text,
                      str(kernel.get("decision")), str(kernel.get("best_title") or "-"),
                      f"{ks:.3f}x" if isinstance(ks, (int, float)) else "-", str(kernel.get("candidates", 0)),
                      str(kernel.get("screened_ok", 0)))
    if result.get("kernels"):
        console.print(table)
    split = result.get("time_split") or {}
    if split.get("stages"):
        from ..search.time_split import summary_line

        console.print(summary_line(split), soft_wrap=True, highlight=False)
    for suggestion in result.get("suggestions") or []:
        console.print(f"[cyan]suggestion[/cyan] {suggestion}")
    usage = result.get("llm_usage") or {}
    if usage.get("calls"):
        cost = usage.get("cost_usd")
        console.print(f"LLM: {usage['calls']} calls, {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} "
                      f"out tokens" + (f", ${cost:.4f}" if isinstance(cost, (int, float)) else ""))
    diff = result.get("diff")
    changed = bool(diff) and os.path.isfile(str(diff)) and os.path.getsize(str(diff)) > 0
    console.print(Group(Text(f"run folder: {result.get('run_dir')}"), Text(f"report: {result.get('report')}"),
                        Text(f"diff: {diff}" if changed else "diff: none (no change: the original kernel is kept)")))
