"""Follow a child process's stdout line by line without blocking the parent's deadline checks."""

from __future__ import annotations

import queue
import subprocess
import threading


def stdout_lines(process: subprocess.Popen[str], name: str) -> queue.Queue[str | None]:
    """A queue fed with each stdout line by a daemon thread; ``None`` marks the end of output."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True, name=name).start()
    return lines
