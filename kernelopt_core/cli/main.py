"""``kernelopt``: a thin layer of commands over kernelopt_core.

Each command lives in its own module in this package and exposes ``register(subparsers)``;
the module is found automatically. Command modules never import torch at load time.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from rich.console import Console

import kernelopt_core.cli as cli_package

_NOT_COMMANDS = {"main", "common"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelopt",
        description="Profile, rewrite and verify the Triton kernels torch.compile wrote.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(cli_package.__path__), key=lambda m: m.name):
        if info.name in _NOT_COMMANDS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"kernelopt_core.cli.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        Console(stderr=True).print("[red]interrupted[/red]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
