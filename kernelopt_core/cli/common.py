"""Small pieces shared by the CLI commands: consoles and JSON output."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, default=str) + "\n")


def fail(message: str, code: int = 2) -> int:
    err_console.print(f"[bold red]error:[/bold red] {message}", soft_wrap=True)  # one line per error: greppable
    return code
