"""``kernelopt account PROBLEM.py``: where a torch.compile callable's time goes beyond its kernels.

Times the full compiled callable (as the user calls it), each compiled module's ``call()``, eager
and the same mode with CUDA graphs toggled, and splits the callable's time into kernels,
CUDA-graph input copy, launch gaps and guard + wrapper. Prints the deterministic configuration
recommendation when the overhead it removes is worth it (10% of the callable); ``--verify`` checks each of its options like any
candidate (gate 3 on seeds 0/42/123, gate 4 through the full callable) and says which one was
accepted and what it assumes about the caller.
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
                        help="verify the recommended configuration's options through gates 3 and 4")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..config_findings import find_config_changes
    from ..events import json_line_sink
    from ..measure.accounting import describe_overhead
    from ..measure.accounting_run import AccountingError, account_problem
    from ..recommend import verify_option

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
    def verify(rec: Any, option: Any) -> Any:
        if sink:
            sink.progress(f"verifying {option.change}", stage="gate", percentage=60)
        return verify_option(args.problem, option, rec.baseline_mode or args.mode, device=args.device)

    findings = find_config_changes(acct, allowed=args.verify, verify=verify)
    rec = findings.recommendation
    for failed in (r for r in findings.results if r.error):
        err_console.print(f"[yellow]verifying {failed.option.name} failed:[/yellow] {failed.error}")
    chosen = findings.chosen
    verdict = chosen.verdict if chosen is not None else next((r.verdict for r in findings.results if r.verdict), None)
    noise = [note for note in (timing_noise(t.label, t.stats) for t in acct.timings()) if note]
    load = machine_load_note()
    result = {**acct.to_json(), "recommendation": rec.to_json() if rec else None,
              "verification": verdict.to_json() if verdict else None, "config_change": findings.config_change(),
              "noise": noise + ([load] if load else [])}
    output_result(args, result, lambda: _print(acct, rec, findings, describe_overhead, result["noise"]))
    return 0


def _print(acct: Any, rec: Any, findings: Any, describe: Any, noise: list[str]) -> None:
    from rich.console import JustifyMethod
    from rich.table import Table

    console.print(f"\n[bold]{acct.name}[/bold]: {acct.mode} on {acct.device}")
    table = Table(box=None, header_style="bold")
    columns: list[tuple[str, JustifyMethod]] = [("timed", "left"), ("path", "left"), ("median", "right"),
                                                ("IQR", "right"), ("spread", "right"), ("n", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for timing in acct.timings():
        stats = timing.stats
        spread = f"{stats.iqr_ms / stats.median_ms:.0%}" if stats.median_ms > 0 else "-"
        table.add_row(timing.label, timing.path, f"{stats.median_ms:.4f} ms", f"{stats.iqr_ms:.4f} ms", spread,
                      str(stats.n))
    console.print(table)
    for note in noise:
        console.print(f"[yellow]noisy[/yellow] {note}", soft_wrap=True, highlight=False)
    console.print(acct.split_text())
    for item in acct.overheads:
        console.print(f"  {describe(item)}")
        if item.suggestion:
            console.print(f"    [cyan]hint[/cyan] {item.suggestion}")
    for line in acct.speedup_lines():
        console.print(f"  {line}")
    for note in acct.notes:
        console.print(f"  [yellow]note[/yellow] {note}")
    if rec is not None:
        console.print(f"\n[bold green]recommendation[/bold green] {rec.title}\n  {rec.reason}")
        for option in rec.options:
            console.print(f"  option [bold]{option.name}[/bold]: {option.title}; assumes {option.assumes}")
        for alt in rec.alternatives:
            console.print(f"  or: {alt}")
    elif acct.overhead_dominates:
        console.print("\noverhead dominates, but no configuration change is expected to remove it")
    for found in findings.results:
        if found.verdict is not None:
            state = "[green]accepted[/green]" if found.verdict.accepted else "[red]rejected[/red]"
            console.print(f"verification of {found.option.name} {state}: {found.verdict.reason}")
    chosen = findings.chosen
    if chosen is not None:
        console.print(f"[bold]chosen[/bold]: {chosen.option.title} (assumes {chosen.option.assumes})\n"
                      f"{chosen.option.snippet}")
