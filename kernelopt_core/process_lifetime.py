"""Every process KernelOPT starts ends with the work that started it.

Three layers, because each alone has a gap (the tree: docs/architecture.md, "Ownership of
processes"):

1. the parent-death signal (``prctl(PR_SET_PDEATHSIG)``), which belongs to the *thread* that
   started the child, so :func:`start_owned` starts children from the main thread or one
   long-lived spawner thread;
2. a watchdog in the child (:func:`die_with_owner`), for a process started through another
   program (ncu's target) and systems without prctl;
3. the owner ends what it started, by pid (:class:`ProcessTree`), re-parented descendants included.

The owner is passed in ``$KERNELOPT_OWNER`` ("pid:start time"). Standard library only; psutil when
importable. Details: docs/design-notes.md, "process_lifetime.py".
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, Protocol, TypeVar

OWNER_ENV = "KERNELOPT_OWNER"
OWNER_GONE_STATUS = 129  # 128 + SIGHUP: the owner hung up
WATCH_INTERVAL_S = 0.5
_PR_SET_PDEATHSIG = 1
_START_TOLERANCE_S = 0.02  # start times are in clock ticks (10 ms); a reused pid starts much later

_PSUTIL: list[Any] = []


def _psutil_module() -> Any:
    """psutil, or None: a dependency of the package, but worker-side processes run without it
    (imported on first use: the launcher of :func:`owned_command` never needs it)."""
    if not _PSUTIL:
        module: Any
        try:
            import psutil as module
        except ImportError:  # pragma: no cover - machines without psutil read /proc
            module = None
        _PSUTIL.append(module)
    return _PSUTIL[0]

T = TypeVar("T")


# --- who is alive -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    pid: int
    ppid: int
    pgid: int
    sid: int
    started: float | None
    zombie: bool


def _boot_time() -> float:
    with open("/proc/stat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


_BOOT: list[float] = []


def _proc_row(pid: int) -> _Row | None:
    """One process from /proc/PID/stat (the comm field may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    if len(fields) < 20:
        return None
    if not _BOOT:
        _BOOT.append(_boot_time())
    started = _BOOT[0] + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return _Row(pid, int(fields[1]), int(fields[2]), int(fields[3]), started, fields[0] in ("Z", "X"))


def _psutil_row(process: Any) -> _Row | None:
    ps = _psutil_module()
    try:
        with process.oneshot():
            ppid, started, status = process.ppid(), process.create_time(), process.status()
        pgid, sid = os.getpgid(process.pid), os.getsid(process.pid)
    except (ps.Error, OSError):  # gone, or not ours to read
        return None
    return _Row(process.pid, ppid, pgid, sid, started, status in (ps.STATUS_ZOMBIE, ps.STATUS_DEAD))


def _row(pid: int) -> _Row | None:
    ps = _psutil_module()
    if ps is not None:
        try:
            return _psutil_row(ps.Process(pid))
        except ps.Error:
            return None
    return _proc_row(pid) if os.path.isdir("/proc") else None


def _table() -> dict[int, _Row]:
    """Every process this user can see."""
    rows: dict[int, _Row] = {}
    ps = _psutil_module()
    if ps is not None:
        for process in ps.process_iter():
            row = _psutil_row(process)
            if row is not None:
                rows[row.pid] = row
        return rows
    try:
        entries = os.listdir("/proc")
    except OSError:
        return rows
    for entry in entries:
        if entry.isdigit() and (row := _proc_row(int(entry))) is not None:
            rows[row.pid] = row
    return rows


def _same_start(a: float | None, b: float | None) -> bool:
    return a is None or b is None or abs(a - b) < _START_TOLERANCE_S


def descendants(pid: int, table: Mapping[int, _Row] | None = None) -> list[int]:
    """Every live process below ``pid`` now (children first, then theirs)."""
    table = _table() if table is None else table
    children: dict[int, list[int]] = {}
    for row in table.values():
        children.setdefault(row.ppid, []).append(row.pid)
    found: list[int] = []
    frontier = [pid]
    while frontier:
        below = [c for p in frontier for c in children.get(p, []) if c not in found and c != pid]
        found.extend(below)
        frontier = below
    return found


def command_line(pid: int) -> str:
    """What ``pid`` runs, for messages ("" when it cannot be read)."""
    ps = _psutil_module()
    try:
        if ps is not None:
            return " ".join(ps.Process(pid).cmdline()) or ps.Process(pid).name()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return ""


# --- the owner, seen from the child -------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """A process, by pid and start time (so a reused pid is not mistaken for it)."""

    pid: int
    started: float | None

    @classmethod
    def of(cls, pid: int) -> Owner:
        row = _row(pid)
        return cls(pid, row.started if row is not None else None)

    def token(self) -> str:
        return f"{self.pid}:{self.started!r}" if self.started is not None else str(self.pid)

    @classmethod
    def parse(cls, token: str) -> Owner | None:
        pid_text, _, started_text = token.partition(":")
        try:
            return cls(int(pid_text), float(started_text) if started_text else None)
        except ValueError:
            return None

    def alive(self) -> bool:
        row = _row(self.pid)
        if row is None:
            if os.path.isdir("/proc") or _psutil_module() is not None:
                return False
            try:  # neither /proc nor psutil: existence is all we can ask
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True
        return not row.zombie and _same_start(row.started, self.started)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when the thread that started it ends
    (Linux only; False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_owner(*, watch: bool = True, on_gone: Callable[[], Any] | None = None) -> Owner | None:
    """At the start of a process we started: end with the owner named in ``$KERNELOPT_OWNER``.

    Started by the owner itself: the parent-death signal, then a check that the owner did not go
    before it was set. Started through another program (ncu's target): no signal, that program
    is not the owner. With ``watch``, a daemon thread also checks the owner every half second and
    calls ``on_gone`` (default :func:`end_self`) when it is gone; a process that must not start
    threads (the zygote, which forks) passes ``watch=False``. Without the variable: nothing.
    """
    token = os.environ.pop(OWNER_ENV, None)
    owner = Owner.parse(token) if token else None
    if owner is None:
        return None
    if owner.pid == os.getppid():
        set_parent_death_signal()
        if os.getppid() != owner.pid:  # it went before the signal was set
            os._exit(OWNER_GONE_STATUS)
    elif not owner.alive():
        os._exit(OWNER_GONE_STATUS)
    if watch:
        watch_owner(owner, on_gone)
    return owner


def watch_owner(owner: Owner, on_gone: Callable[[], Any] | None = None,
                interval_s: float = WATCH_INTERVAL_S) -> threading.Thread:
    """A daemon thread that calls ``on_gone`` (default: :func:`end_self`) once ``owner`` is gone."""

    def watch() -> None:
        while owner.alive():
            time.sleep(interval_s)
        (on_gone or end_self)()

    thread = threading.Thread(target=watch, name="kernelopt-owner-watch", daemon=True)
    thread.start()
    return thread


def end_self(status: int = OWNER_GONE_STATUS) -> NoReturn:
    """End every process below this one, then this one (and its process group, if it leads one:
    ncu and compute-sanitizer run in the worker's group). Nothing else runs first: the owner is
    gone or has closed the pipe, so nobody is waiting for an orderly exit."""
    for pid in reversed(descendants(os.getpid())):
        _kill(pid)
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the pipe may be gone with the owner
        pass
    if os.getpgrp() == os.getpid():
        try:
            os.killpg(os.getpid(), signal.SIGKILL)  # this process too
        except OSError:
            pass
    os._exit(status)


# --- the owner, starting children ---------------------------------------------------------------


def owned_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) naming this process as the owner."""
    return {**(os.environ if env is None else env), OWNER_ENV: Owner.of(os.getpid()).token()}


class _Spawner:
    """One long-lived thread that starts children: their parent-death signal then lasts as long as
    this process, whichever short-lived thread asked for them."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = queue.SimpleQueue()
        self.pid = os.getpid()
        threading.Thread(target=self._serve, name="kernelopt-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            work, box, done = self._requests.get()
            try:
                box.append((True, work()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box.append((False, exc))
            done.set()

    def run(self, work: Callable[[], T]) -> T:
        box: list[Any] = []
        done = threading.Event()
        self._requests.put((work, box, done))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_SPAWNER: list[_Spawner] = []
_SPAWNER_LOCK = threading.Lock()


def _on_spawner_thread(work: Callable[[], T]) -> T:
    if threading.current_thread() is threading.main_thread():
        return work()  # the main thread lives as long as the process
    with _SPAWNER_LOCK:
        if not _SPAWNER or _SPAWNER[0].pid != os.getpid():  # none yet, or inherited through fork
            _SPAWNER[:] = [_Spawner()]
        spawner = _SPAWNER[0]
    return spawner.run(work)


def start_owned(argv: Sequence[str], *, env: Mapping[str, str] | None = None, **popen_kwargs: Any,
                ) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, ...)`` for a child that ends with this process: it is started from
    a thread that lives as long as this process, with ``$KERNELOPT_OWNER`` naming this process.
    Our own entry points call :func:`die_with_owner`; a foreign program is wrapped with
    :func:`owned_command`."""
    child_env = owned_environment(env)
    return _on_spawner_thread(lambda: subprocess.Popen(list(argv), env=child_env, **popen_kwargs))


def owned_command(argv: Sequence[str]) -> list[str]:
    """A foreign program (ncu, compute-sanitizer) behind a tiny launcher that sets the parent-death
    signal and then becomes the program (exec: same pid). ``$KERNELOPT_OWNER`` is kept, so the
    program's own Python children (ncu's target) watch the owner."""
    # a script, isolated (-I): it needs no PYTHONPATH, and its folder is not put on sys.path
    return [sys.executable, "-I", os.path.abspath(__file__), "--", *argv]


# --- the owner, ending what it started ----------------------------------------------------------


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    started: float | None
    command: str

    def describe(self) -> str:
        return describe_process(self.pid, self.command, 160)


def describe_process(pid: int, command: str, width: int) -> str:
    """``pid 123 (python -m ...)``, the command cut to ``width`` characters."""
    shown = command if len(command) <= width else command[:width - 3] + "..."
    return f"pid {pid} ({shown or 'unknown command'})"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ProcessTree:
    """A root process and the processes below it, remembered by pid (and start time) as they are
    seen, so that they can be ended even after the root died and they were re-parented. Call
    :meth:`refresh` now and then while the root runs; :meth:`end` ends everything seen and the
    process groups and sessions they lead."""

    def __init__(self, root: int):
        self.root = root
        self.seen: dict[int, ProcessInfo] = {}
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self, table: Mapping[int, _Row] | None = None) -> None:
        table = _table() if table is None else table
        with self._lock:
            anchors = [self.root] + [p for p, info in self.seen.items()
                                     if p in table and _same_start(table[p].started, info.started)]
            for pid in [self.root, *descendants_of_any(anchors, table)]:
                row = table.get(pid)
                known = self.seen.get(pid)
                if row is None or row.zombie or (known is not None and _same_start(known.started, row.started)):
                    continue
                self.seen[pid] = ProcessInfo(pid, row.started, command_line(pid))

    def alive(self, table: Mapping[int, _Row] | None = None) -> list[ProcessInfo]:
        """The processes seen that still run, and the members of the groups and sessions they lead."""
        table = _table() if table is None else table
        with self._lock:
            seen = dict(self.seen)
        # a session or group id is not reused while a member lives; a leader's pid reused by a
        # newer process (another start time) leads someone else's session
        leaders = {p for p, info in seen.items() if p not in table or _same_start(table[p].started, info.started)}
        me, found = os.getpid(), {}
        for row in table.values():
            if row.zombie or row.pid == me:
                continue
            info = seen.get(row.pid)
            if info is not None and _same_start(info.started, row.started):
                found[row.pid] = info
            elif row.sid in leaders or row.pgid in leaders:
                found[row.pid] = ProcessInfo(row.pid, row.started, command_line(row.pid))
        return sorted(found.values(), key=lambda info: info.pid)

    def end(self, wait_s: float = 10.0, grace_s: float = 0.0) -> list[ProcessInfo]:
        """SIGKILL everything :meth:`alive` names, looking again until nothing is left (a fork in
        flight is caught by the next look) or ``wait_s`` passed; returns what had to be ended.
        ``wait_s=0`` kills once and does not wait. ``grace_s``: first give them that long to end
        by themselves (children whose parent-death signal is on its way are not leftovers)."""
        grace_end = time.monotonic() + grace_s
        while grace_s > 0 and time.monotonic() < grace_end:
            table = _table()
            self.refresh(table)
            if not self.alive(table):
                break
            time.sleep(0.05)
        ended: dict[int, ProcessInfo] = {}
        deadline = time.monotonic() + wait_s
        while True:
            table = _table()
            self.refresh(table)
            left = self.alive(table)
            if not left or (ended and time.monotonic() > deadline):
                break
            for info in left:
                ended.setdefault(info.pid, info)
                _kill(info.pid)
            time.sleep(0.02)
        return sorted(ended.values(), key=lambda info: info.pid)

    def pids(self) -> set[int]:
        with self._lock:
            return set(self.seen)


def descendants_of_any(roots: Iterable[int], table: Mapping[int, _Row]) -> list[int]:
    found: list[int] = []
    for root in roots:
        found.extend(p for p in descendants(root, table) if p not in found)
    return found


def end_tree(pid: int, wait_s: float = 10.0) -> list[ProcessInfo]:
    """End ``pid`` and everything below it now (the groups and sessions they lead included)."""
    return ProcessTree(pid).end(wait_s)


class Closable(Protocol):
    def close(self) -> None: ...


K = TypeVar("K", bound=Hashable)
C = TypeVar("C", bound=Closable)


class SharedProcesses(Generic[K, C]):
    """This process's long-lived helper processes (workers, zygotes), one per key: each started on
    its first use and shared after, all closed together by :meth:`close_all` and at exit."""

    def __init__(self, start: Callable[[K], C]) -> None:
        self._start = start
        self._by_key: dict[K, C] = {}
        self._lock = threading.Lock()
        atexit.register(self.close_all)

    def get(self, key: K) -> C:
        with self._lock:
            found = self._by_key.get(key)
            if found is None:
                found = self._by_key[key] = self._start(key)
            return found

    def close_all(self) -> None:
        with self._lock:
            started = list(self._by_key.values())
            self._by_key.clear()
        for helper in started:  # outside the lock: closing one waits for its process to end
            helper.close()

    def __len__(self) -> int:
        return len(self._by_key)


# --- the launcher for foreign programs ------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python process_lifetime.py -- PROGRAM ARGS...``: see :func:`owned_command`."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.stderr.write("usage: python process_lifetime.py -- PROGRAM [ARGS...]\n")
        return 2
    token = os.environ.get(OWNER_ENV)
    owner = Owner.parse(token) if token else None
    if owner is not None and owner.pid == os.getppid():
        set_parent_death_signal()
        if os.getppid() != owner.pid:
            return OWNER_GONE_STATUS
    try:
        os.execvp(args[0], args)
    except OSError as exc:
        sys.stderr.write(f"cannot run {args[0]!r}: {exc}\n")
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
