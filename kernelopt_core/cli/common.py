"""Small pieces shared by the CLI commands: consoles and JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, default=str) + "\n")


def output_result(args: Any, data: Any, print_text: Callable[[], None]) -> None:
    """Hand a command's result over as the user asked: an event line (``--events``, for job
    runners), JSON (``--json``), or the readable report."""
    if getattr(args, "events", False):
        from ..events import emit_result

        emit_result(data)
    elif getattr(args, "json", False):
        print_json(data)
    else:
        print_text()


def fail(message: str, code: int = 2) -> int:
    err_console.print(f"[bold red]error:[/bold red] {message}", soft_wrap=True)  # one line per error: greppable
    return code
