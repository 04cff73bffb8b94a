"""The real language server with its job runner pointed at tests/lsp/fake_cli.py (dependency
injection through ``create_server(argv_builder=...)``, not an environment switch)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

FAKE_CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_cli.py")


def fake_argv(python: str, args: Sequence[str]) -> list[str]:
    return [python, FAKE_CLI, *args, "--events", "--json"]


if __name__ == "__main__":
    from kernelopt_lsp.server import create_server

    create_server(argv_builder=fake_argv).start_io()
