"""``kernelopt compile PROBLEM.py --out DIR``: compile a KernelBench-format problem, keep the dumps."""

from __future__ import annotations

import argparse
from typing import Any

from .common import console, fail, print_json


def register(sub: Any) -> None:
    parser = sub.add_parser("compile", help="torch.compile a KernelBench-format problem and write its dumps")
    parser.add_argument("problem", help="a .py file with Model, get_inputs() and get_init_inputs()")
    parser.add_argument("--out", required=True, help="folder for the dumps")
    parser.add_argument("--mode", default="max-autotune", choices=["max-autotune", "max-autotune-no-cudagraphs", "default"])
    parser.add_argument("--device", default="auto", help="auto, cuda or cpu (the CPU Triton backend)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..compile import ProblemError, compile_problem

    try:
        with console.status(f"compiling {args.problem} ({args.device}, {args.mode})"):
            result = compile_problem(args.problem, args.out, args.mode, args.device)
    except ProblemError as exc:
        return fail(str(exc))
    if args.json:
        print_json(result.to_json())
        return 0
    console.print(f"compiled [bold]{args.problem}[/bold] on {result.device} ({result.mode}) in {result.compile_s:.1f} s")
    console.print(f"max |compiled - eager| = {result.max_abs_err:.3g} (relative {result.max_rel_err:.3g})")
    for note in result.notes:
        console.print(f"[yellow]note[/yellow] {note}")
    for path in result.graphs:
        console.print(f"  graph: {path}", soft_wrap=True)  # keep long paths copyable
    return 0
