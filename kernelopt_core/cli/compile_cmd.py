"""``kernelopt compile PROBLEM.py --out DIR``: compile a KernelBench-format problem, keep the dumps.

The problem file is checked before torch is imported (it exists, parses, defines Model,
get_inputs and get_init_inputs), so a wrong path or a typo fails in a second. A problem that
fails later (import, build, torch.compile) leaves no --out folder behind when it created it.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
from typing import Any

from rich.markup import escape

from .common import DEVICE_HELP, Step, console, error_summary, fail, print_json

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def register(sub: Any) -> None:
    parser = sub.add_parser("compile", help="torch.compile a KernelBench-format problem and write its dumps")
    parser.add_argument("problem", help="a .py file with Model, get_inputs() and get_init_inputs()")
    parser.add_argument("--out", required=True, help="folder for the dumps (created if missing)")
    parser.add_argument("--mode", default="max-autotune", choices=["max-autotune", "max-autotune-no-cudagraphs", "default"],
                        help="the torch.compile mode (on the CPU backend, always default)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..compile import ProblemError, compile_problem

    problem = check_problem(args.problem)
    if problem:
        return fail(escape(problem))
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return fail(escape(f"--out {args.out}: exists and is not a folder"))
    created = not os.path.exists(args.out)
    try:
        if args.json:
            result = compile_problem(args.problem, args.out, args.mode, args.device)
        else:
            mode = "default" if args.device == "cpu" else args.mode  # the CPU interpreter does not autotune
            with Step(console, f"compiling {args.problem} ({args.device}, {mode})"):
                result = compile_problem(args.problem, args.out, args.mode, args.device)
    except ProblemError as exc:
        _remove(args.out, created)
        return fail(escape(problem_message(exc)))
    except BaseException:
        _remove(args.out, created)
        raise
    if args.json:
        print_json(result.to_json())
        return 0
    console.print(f"compiled [bold]{escape(args.problem)}[/bold] on {result.device} ({result.mode}) in "
                  f"{result.compile_s:.1f} s", soft_wrap=True)
    console.print(f"max |compiled - eager| = {result.max_abs_err:.3g} (relative {result.max_rel_err:.3g})")
    for note in result.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}", soft_wrap=True)
    for path in result.graphs:
        console.print(f"  graph: {escape(path)}", soft_wrap=True)  # keep long paths copyable
    return 0


def _remove(out: str, created: bool) -> None:
    if created:
        shutil.rmtree(out, ignore_errors=True)


def check_problem(path: str) -> str | None:
    """Why ``path`` cannot be a KernelBench-format problem, found without importing it (None: it may be)."""
    if not os.path.exists(path):
        return f"{path}: no such problem file"
    if os.path.isdir(path):
        return f"{path}: is a folder; give the problem's .py file"
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror or exc})"
    except UnicodeDecodeError:
        return f"{path}: not a UTF-8 text file"
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return f"{path}:{exc.lineno}: syntax error: {exc.msg}"
    names = _defined_names(tree.body)
    if names is None:
        return None  # `from x import *`: the names may come from elsewhere; importing it will tell
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        return (f"{path}: not a KernelBench-format problem: no {', '.join(missing)} "
                "(a problem defines class Model(nn.Module), get_inputs() and get_init_inputs())")
    return None


def _defined_names(body: list[ast.stmt]) -> set[str] | None:
    """Names a module body binds at its top level, also under if/try/with (None: a star import)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                      *(stmt for handler in getattr(node, "handlers", []) for stmt in handler.body)]
            found = _defined_names(nested)
            if found is None:
                return None
            names |= found
    return names


def problem_message(exc: BaseException) -> str:
    """The error on one line (what failed, the innermost cause, where in the user's code); then
    the full message, which ``fail`` prints only with ``-v``."""
    full = str(exc)
    cause = exc.__cause__
    if cause is None:
        return full
    head = full.split(f"{type(cause).__name__}:", 1)[0].rstrip(" :") or "failed"
    return f"{head}: {error_summary(cause)}\n{full}"
