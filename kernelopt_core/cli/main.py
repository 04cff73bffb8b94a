"""``kernelopt``: a thin layer of commands over kernelopt_core.

Each command lives in its own module in this package and exposes ``register(subparsers)``;
the module is found automatically. Command modules never import torch at load time.

Every command shares: ``-v/--verbose`` (torch's own log and warnings, and the full text of an
error), the exit statuses of :mod:`kernelopt_core.cli.common` (listed in each command's help),
and the ``--device`` wording. Without ``-v`` torch's log lines are hidden: an error is reported
first, on one line, by the command itself.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
import warnings
from importlib import metadata
from typing import Any

import kernelopt_core.cli as cli_package
from kernelopt_core.process_lifetime import die_with_owner

from .common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    HelpFormatter,
    err_console,
    exit_codes_epilog,
    exit_codes_summary,
    set_verbose,
)

_NOT_COMMANDS = {"main", "common"}


def version_text() -> str:
    """``kernelopt 0.1.0 (torch 2.13.0+cpu, triton 3.7.1, Python 3.11.7)``, read without importing torch."""

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    return (f"kernelopt {installed('kernelopt')} (torch {installed('torch')}, triton {installed('triton')}, "
            f"Python {python})")


def _describe(module: Any, help_text: str | None) -> str:
    """A command's description: its one-line help, then its module docstring's body."""
    lead = (help_text or "").strip()
    lead = lead[:1].upper() + lead[1:] + "." if lead and not lead.endswith(".") else lead
    doc = (module.__doc__ or "").strip()
    body = doc.split("\n\n", 1)[1].strip() if "\n\n" in doc else ""
    body = body.replace("``", "")
    return f"{lead}\n\n{body}" if body else lead


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelopt", formatter_class=HelpFormatter,
        description="Profile, rewrite and verify the Triton kernels torch.compile wrote.",
        epilog="Run `kernelopt COMMAND -h` for a command's options, defaults and exit statuses.\n\n"
               + exit_codes_summary(),
    )
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show torch's log and warnings, and errors in full")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(cli_package.__path__), key=lambda m: m.name):
        if info.name in _NOT_COMMANDS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"kernelopt_core.cli.{info.name}")
        if hasattr(module, "register"):
            known = set(sub.choices)
            module.register(sub)
            helps = {action.dest: action.help for action in sub._choices_actions}
            for name in set(sub.choices) - known:
                _finish_command(sub.choices[name], name, module, helps.get(name))
    return parser


def _finish_command(command: argparse.ArgumentParser, name: str, module: Any, help_text: str | None) -> None:
    """What every command shares: the formatter, a description, exit statuses, ``-v``."""
    command.formatter_class = HelpFormatter
    if not command.description:
        command.description = _describe(module, help_text)
    command.epilog = ((command.epilog + "\n\n") if command.epilog else "") + exit_codes_epilog(name)
    if not any("-v" in action.option_strings for action in command._actions):
        # SUPPRESS: `kernelopt -v COMMAND` and `kernelopt COMMAND -v` both work
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="show torch's log and warnings, and errors in full")
    for child in command._subparsers._group_actions if command._subparsers else []:
        for action_parser in getattr(child, "choices", {}).values():
            action_parser.formatter_class = HelpFormatter
            if not any("-v" in action.option_strings for action in action_parser._actions):
                action_parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                           help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    # Started by a job runner (the language server's) or a bench: end with it, even on a kill -9.
    die_with_owner()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_ERROR
    verbose = bool(getattr(args, "verbose", False))
    set_verbose(verbose)
    previous_disable = logging.root.manager.disable
    try:
        with warnings.catch_warnings():
            from ..quiet import silence_known_torch_noise

            silence_known_torch_noise()
            if not verbose:
                # torch's log lines (a failed compile writes pages of them) would bury the one-line
                # error the command reports; -v shows them.
                logging.disable(logging.ERROR)
            return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        # Commands with something to resume catch it themselves and say how.
        err_console.print("[yellow]interrupted[/yellow]")
        return EXIT_INTERRUPTED
    finally:
        logging.disable(previous_disable)
        set_verbose(False)


if __name__ == "__main__":
    sys.exit(main())
