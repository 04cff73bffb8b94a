"""``kernelopt account PROBLEM.py``: where a torch.compile callable's time goes beyond its kernels.

Times the full compiled callable (as the user calls it), each compiled module's ``call()``, eager
and the same mode with CUDA graphs toggled, and splits the callable's time into kernels,
CUDA-graph input copy, launch gaps and guard + wrapper. Prints the deterministic configuration
recommendation when overhead dominates; ``--verify`` checks it like any candidate (gate 3 on
seeds 0/42/123, gate 4 through the full callable).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import DEVICE_HELP, console, err_console, fail, machine_load_note, output_result, timing_noise

MODES = ["max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead", "default"]


def register(sub: Any) -> None:
    parser = sub.add_parser("account", help="split a compiled callable's time into kernels and named overheads")
    parser.add_argument("problem", help="a .py file with Model, get_inputs() and get_init_inputs()")
    parser.add_argument("--mode", default="max-autotune", choices=MODES, help="the mode you compile with")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--no-alternatives", action="store_true", help="skip timing eager and the other mode")
    parser.add_argument("--verify", action="store_true",
                        help="verify the recommended configuration through gates 3 and 4")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..events import json_line_sink
    from ..measure.accounting import describe_overhead
    from ..measure.accounting_run import AccountingError, account_problem
    from ..recommend import ConfigVerificationError, recommend_config, verify_recommendation

    sink = json_line_sink() if args.events else None
    if sink:
        sink.progress(f"accounting {args.problem}", stage="profile", percentage=0)
    try:
        if sink or args.json:
            acct = account_problem(args.problem, args.mode, args.device, alternatives=not args.no_alternatives)
        else:
            with console.status(f"accounting {args.problem} ({args.mode}, {args.device})"):
                acct = account_problem(args.problem, args.mode, args.device, alternatives=not args.no_alternatives)
    except AccountingError as exc:
        return fail(str(exc))
    rec = recommend_config(acct)
    verdict = None
    if args.verify and rec is not None:
        if sink:
            sink.progress(f"verifying {rec.change}", stage="gate", percentage=60)
        try:
            verdict = verify_recommendation(args.problem, rec, device=args.device)
        except ConfigVerificationError as exc:
            err_console.print(f"[yellow]verification failed:[/yellow] {exc}")
    noise = [note for note in (timing_noise(t.label, t.stats) for t in acct.timings()) if note]
    load = machine_load_note()
    result = {**acct.to_json(), "recommendation": rec.to_json() if rec else None,
              "verification": verdict.to_json() if verdict else None,
              "noise": noise + ([load] if load else [])}
    output_result(args, result, lambda: _print(acct, rec, verdict, describe_overhead, result["noise"]))
    return 0


def _print(acct: Any, rec: Any, verdict: Any, describe: Any, noise: list[str]) -> None:
    from rich.table import Table

    console.print(f"\n[bold]{acct.name}[/bold]: {acct.mode} on {acct.device}")
    table = Table(box=None, header_style="bold")
    for column, justify in (("timed", "left"), ("path", "left"), ("median", "right"), ("IQR", "right"),
                            ("spread", "right"), ("n", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for timing in acct.timings():
        stats = timing.stats
        spread = f"{stats.iqr_ms / stats.median_ms:.0%}" if stats.median_ms > 0 else "-"
        table.add_row(timing.label, timing.path, f"{stats.median_ms:.4f} ms", f"{stats.iqr_ms:.4f} ms", spread,
                      str(stats.n))
    console.print(table)
    for note in noise:
        console.print(f"[yellow]noisy[/yellow] {note}", soft_wrap=True, highlight=False)
    console.print(f"callable {acct.callable_ms:.4f} ms = kernels {acct.kernel_ms:.4f} ms + overheads "
                  f"{acct.overhead_ms:.4f} ms ({acct.overhead_share:.0%})")
    for item in acct.overheads:
        console.print(f"  {describe(item)}")
        if item.suggestion:
            console.print(f"    [cyan]hint[/cyan] {item.suggestion}")
    for baseline, candidate, cmp in acct.speedups():
        console.print(f"  {candidate}: {cmp.describe(baseline, candidate)}")
    for note in acct.notes:
        console.print(f"  [yellow]note[/yellow] {note}")
    if rec is not None:
        console.print(f"\n[bold green]recommendation[/bold green] {rec.title}\n  {rec.reason}")
        for alt in rec.alternatives:
            console.print(f"  or: {alt}")
    elif acct.overhead_dominates:
        console.print("\noverhead dominates, but no configuration change is expected to remove it")
    if verdict is not None:
        state = "[green]accepted[/green]" if verdict.accepted else "[red]rejected[/red]"
        console.print(f"verification {state}: {verdict.reason}")
