"""Small pieces shared by the CLI commands: consoles, JSON output, errors, exit codes, help texts."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from rich.console import Console, ConsoleDimensions

# Output that is not a terminal (a pipe, a log, a CI job) is as wide as this unless COLUMNS says
# otherwise: rich's default of 80 columns cut kernel names in tables to `kern…`. Tables print at
# their natural width (never wider), and a log viewer wraps long lines itself.
PIPE_COLUMNS = 1000


class CliConsole(Console):
    """rich's Console for every command: on a terminal its width; elsewhere ``COLUMNS`` when set,
    else :data:`PIPE_COLUMNS` (so no table cell is cut). Rules stay short off a terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            self._width = None  # rich fixed COLUMNS as found at import; :attr:`size` reads it when printing

    @property
    def size(self) -> ConsoleDimensions:
        measured = super().size
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(PIPE_COLUMNS, measured.height)
        return measured

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def rule(self, title: Any = "", **kwargs: Any) -> None:
        from rich.rule import Rule

        self.print(Rule(title, **kwargs), width=min(self.width, 100))


console = CliConsole()
err_console = CliConsole(stderr=True)

# Exit statuses: the same meaning in every command (each command's help lists them).
EXIT_OK = 0  # the command did what was asked
EXIT_NEGATIVE = 1  # it ran, and the answer is "no" (what "no" is depends on the command: see EXIT_1)
EXIT_ERROR = 2  # it could not run: bad arguments, unreadable input, no device for the graph
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, what shells report)

# What exit status 1 means, per command; a command not listed never exits with 1.
EXIT_1 = {
    "verify": "the candidate was rejected (the original kernel is kept: the compiler's, or your file's own)",
    "profile": "no kernel could be profiled or timed",
    "bench": "a regression: an accepted result ran slower than max-autotune",
}

DEVICE_HELP = ("where to run: auto (a CUDA GPU when there is one, else the CPU), cpu (the CPU Triton backend: "
               "Triton's interpreter runs Inductor's kernels), cuda or cuda:N. A dump runs only on the kind of "
               "device it was compiled for")

_state = {"verbose": False}


def set_verbose(verbose: bool) -> None:
    _state["verbose"] = verbose


def verbose() -> bool:
    return _state["verbose"]


def exit_codes_epilog(command: str) -> str:
    negative = EXIT_1.get(command)
    lines = ["exit status:", f"  {EXIT_OK}    done"]
    if negative:
        lines.append(f"  {EXIT_NEGATIVE}    {negative}")
    lines += [f"  {EXIT_ERROR}    could not run (bad arguments or input; the message starts with 'error:')",
              f"  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"]
    return "\n".join(lines)


def exit_codes_summary() -> str:
    """The exit statuses of all commands, for ``kernelopt -h``."""
    negative = "; ".join(f"{command}: {meaning}" for command, meaning in EXIT_1.items())
    return "\n".join([
        "exit status (the same in every command):", f"  {EXIT_OK}    done",
        f"  {EXIT_NEGATIVE}    it ran and the answer is no ({negative})",
        f"  {EXIT_ERROR}    could not run (bad arguments or input; the message starts with 'error:')",
        f"  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"])


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their line breaks; every option with a real default shows it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, argparse.SUPPRESS, [])
                or not action.option_strings or isinstance(action, argparse._VersionAction)):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


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


def fail(message: str, code: int = EXIT_ERROR) -> int:
    """``error: ...`` on stderr, one line; a longer message's remaining lines only with ``-v``."""
    first, _, rest = message.strip().partition("\n")
    if rest.strip() and not verbose():
        first += " (run with -v for the full message)"
    err_console.print(f"[bold red]error:[/bold red] {first}", soft_wrap=True)  # one line per error: greppable
    if rest.strip() and verbose():
        err_console.print(rest, soft_wrap=True, highlight=False, markup=False)
    return code


_USER_FRAME = re.compile(r'from user code:\s*\n\s*File "([^"]+)", line (\d+), in (\S+)')
# Dynamo wraps the error it met in its own ("... fake tensor call ...: got RuntimeError('...')").
_WRAPPED = re.compile(r"""\bgot (\w+(?:Error|Exception))\((['"])(.+?)\2\)""", re.DOTALL)


def error_summary(exc: BaseException) -> str:
    """One line for an exception raised through torch: the innermost cause, and where in the user's
    code torch.compile met it (torch's own message is pages long; ``-v`` prints it)."""
    root: BaseException = exc
    seen = {id(root)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    text = f"{type(root).__name__}: {str(root).strip().splitlines()[0] if str(root).strip() else ''}".rstrip(": ")
    wrapped = _WRAPPED.search(str(root)) or _WRAPPED.search(str(exc))
    if wrapped:
        text = f"{wrapped.group(1)}: {wrapped.group(3).splitlines()[0]}"
    for link in (exc, exc.__cause__):
        found = _USER_FRAME.search(str(link or ""))
        if found:
            text += f" (at {found.group(1)}:{found.group(2)}, in {found.group(3)})"
            break
    return text


class Step:
    """A step that prints nothing while it runs (a compile, a measurement): a spinner with its clock on a
    terminal; elsewhere a line when it starts and one every ``every_s`` seconds while it lasts."""

    def __init__(self, out: Console, text: str, every_s: float = 10.0):
        import threading
        import time

        self.out = out
        self.text = text
        self.every_s = every_s
        self._time = time.monotonic
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kernelopt-step", daemon=True)
        self._live: Any = None

    def _render(self) -> Any:
        from rich.spinner import Spinner

        return Spinner("dots", f"{self.text} · {self._time() - self.started:.0f} s")

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.out.print(f"  ... {self.text}: {self._time() - self.started:.0f} s", soft_wrap=True,
                           highlight=False, markup=False)

    def __enter__(self) -> Step:
        from rich.live import Live

        if self.out.is_terminal:
            self._live = Live(console=self.out, refresh_per_second=4, transient=True, get_renderable=self._render)
            self._live.__enter__()
        else:
            self.out.print(f"{self.text} ...", soft_wrap=True, highlight=False, markup=False)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.__exit__(*exc)
        elif self._thread.is_alive():
            self._thread.join(timeout=2)


# A timing whose middle half spans more than this fraction of its median, or whose median's 95%
# interval is wider than this, is reported as noisy: another run may well give another number.
NOISY_SPREAD = 0.10


def timing_noise(label: str, stats: Any) -> str | None:
    """Why the timing ``stats`` (a TimingStats) should not be trusted as one number, or None."""
    median = float(getattr(stats, "median_ms", 0.0) or 0.0)
    if median <= 0:
        return f"{label}: no usable samples"
    reasons = []
    spread = float(getattr(stats, "iqr_ms", 0.0) or 0.0) / median
    if spread > NOISY_SPREAD:
        reasons.append(f"the middle half of its samples spans {spread:.0%} of the median")
    low, high = getattr(stats, "ci_low_ms", None), getattr(stats, "ci_high_ms", None)
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and (high - low) / median > NOISY_SPREAD:
        reasons.append(f"the median's 95% interval is {low:.4g}-{high:.4g} ms")
    n = int(getattr(stats, "n", 0) or 0)
    if 0 < n < 5:
        reasons.append(f"only {n} sample(s)")
    return f"{label}: {'; '.join(reasons)}" if reasons else None


def machine_load_note() -> str | None:
    """A note when other work shares the CPU (timings then vary from run to run), else None."""
    import os

    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    cores = os.cpu_count() or 1
    if load <= 0.75 * cores:
        return None
    return (f"the machine is busy (load {load:.1f} on {cores} core(s)): timings vary from run to run; "
            "compare numbers taken on an idle machine")


def kernelopt_command() -> str:
    """How to run ``kernelopt`` from here, as a printed command must say it: ``kernelopt`` when it is on
    PATH, else the venv's script by its path (``.venv/bin/kernelopt`` from the repository root: `make`
    installs it there and no venv need be active), else this Python with ``-m``."""
    import shlex
    import shutil

    script = os.path.join(os.path.dirname(sys.executable), "kernelopt")
    on_path = shutil.which("kernelopt")
    if on_path and (not os.path.isfile(script) or os.path.samefile(on_path, script)):
        return "kernelopt"
    if os.path.isfile(script) and os.access(script, os.X_OK):
        relative = os.path.relpath(script)
        path = relative if not relative.startswith("..") else script
        return shlex.quote(path if os.sep in path else os.path.join(".", path))
    return f"{shlex.quote(sys.executable)} -m kernelopt_core.cli.main"


Shown = TypeVar("Shown", bound="TerminalDisplay")


class TerminalDisplay:
    """Progress shown by a rich display (a live panel, a bar) while inside, on a terminal; elsewhere
    (a log, a pipe) the command writes lines and there is no display."""

    def _display(self) -> AbstractContextManager[Any] | None:
        """The rich display, or None off a terminal."""
        raise NotImplementedError

    def __enter__(self: Shown) -> Shown:
        display = self._display()
        if display is not None:
            display.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        display = self._display()
        if display is not None:
            display.__exit__(*exc)
