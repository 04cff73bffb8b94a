"""The job runner: long commands (optimize, profile, verify) as cancellable subprocesses.

Shared by the language server and the CLI. Each job runs ``python -m kernelopt_core.cli.main
<command> ... --events --json`` in its own process group; its ``@kernelopt-event`` lines become
progress updates and its result event becomes the job's result. Jobs on one device run one at
a time (a queued job waits its turn); cancelling interrupts the command, then ends everything it
started, by pid (:mod:`.process_lifetime`). A job's process also dies with the runner's process.

Pure asyncio and the standard library (psutil where installed): no torch, no rich, safe to import
in the language server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .events import parse_event_line
from .measure import worker_scratch
from .process_lifetime import ProcessTree, owned_environment

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED_STATES: frozenset[str] = frozenset({"done", "failed", "cancelled"})

# Builds the full argv of a job from the Python interpreter and the command's own arguments.
ArgvBuilder = Callable[[str, Sequence[str]], list[str]]

# Result lines can carry whole kernel sources and diffs: allow long lines on the pipe.
_LINE_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL_CHARS = 8000


def cli_argv(python: str, args: Sequence[str]) -> list[str]:
    """The production argv: the kernelopt CLI in event-streaming JSON mode."""
    return [python, "-m", "kernelopt_core.cli.main", *args, "--events", "--json"]


@dataclass
class JobRequest:
    """What to run. ``args`` is the CLI command and its arguments, e.g. ``["profile", dump, ...]``."""

    kind: str  # optimize | profile | verify (free-form for other commands)
    args: list[str]
    device: str = "auto"
    cwd: str | None = None
    env: dict[str, str] | None = None  # added to (and overriding) the runner's environment
    timeout_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # the caller's own bookkeeping (uri, kernel, ...)


@dataclass
class Job:
    id: str
    request: JobRequest
    argv: list[str]
    state: JobState = "queued"
    message: str = "queued"
    result: Any = None
    error: str | None = None
    returncode: int | None = None
    last_event: dict[str, Any] | None = None
    stderr_tail: str = ""
    output_lines: list[str] = field(default_factory=list)  # stdout lines that were not events
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    pid: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.request.kind, "state": self.state, "message": self.message,
            "device": self.request.device, "argv": self.argv, "result": self.result, "error": self.error,
            "returncode": self.returncode, "created_at": self.created_at, "started_at": self.started_at,
            "finished_at": self.finished_at, "meta": self.request.meta,
        }


# Called with the job and the progress event that caused the update (None for state changes).
JobListener = Callable[[Job, "dict[str, Any] | None"], None]


class JobRunner:
    """Runs jobs as subprocesses on the running asyncio loop; one at a time per device."""

    def __init__(self, *, python: str | None = None, argv_builder: ArgvBuilder = cli_argv,
                 env: dict[str, str] | None = None, kill_grace_s: float = 2.0, keep_finished: int = 50):
        self.python = python or sys.executable
        self.argv_builder = argv_builder
        self.env = env
        self.kill_grace_s = kill_grace_s
        self.keep_finished = keep_finished
        self._ids = itertools.count(1)
        self._jobs: dict[str, Job] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._trees: dict[str, ProcessTree] = {}
        self._cancel_requested: set[str] = set()
        self._starting: set[str] = set()
        self._device_locks: dict[str, asyncio.Lock] = {}
        self._listeners: dict[str, JobListener] = {}

    # --- submitting --------------------------------------------------------------------------

    def submit(self, request: JobRequest, on_update: JobListener | None = None) -> Job:
        """Queue a job and return at once; must be called with an asyncio loop running."""
        job_id = f"j{next(self._ids)}"
        job = Job(id=job_id, request=request, argv=self.argv_builder(self.python, request.args))
        self._jobs[job_id] = job
        if on_update is not None:
            self._listeners[job_id] = on_update
        self._tasks[job_id] = asyncio.get_running_loop().create_task(self._run(job), name=f"kernelopt-{job_id}")
        self._notify(job, None)
        self._forget_old()
        return job

    async def wait(self, job_id: str) -> Job:
        task = self._tasks.get(job_id)
        if task is not None:
            await asyncio.shield(task)
        return self._jobs[job_id]

    def cancel(self, job_id: str | None = None) -> list[str]:
        """Cancel one job, or every unfinished one. Returns the ids that were still unfinished."""
        targets = [job_id] if job_id is not None else [j.id for j in self._jobs.values() if not j.finished]
        cancelled: list[str] = []
        for jid in targets:
            job = self._jobs.get(jid)
            if job is None or job.finished:
                continue
            cancelled.append(jid)
            self._cancel_requested.add(jid)
            proc = self._procs.get(jid)
            if proc is not None:
                self._kill(jid)
            elif jid in self._starting:
                pass  # its process is being created: _run_process sees the flag and kills it
            elif job.state == "queued":
                # Not started: it ends now; its task sees the flag when its turn comes and skips.
                self._finish(job, "cancelled", "cancelled before it started")
        return cancelled

    async def close(self) -> None:
        """Cancel everything and wait until the processes are gone."""
        self.cancel()
        tasks = [t for t in self._tasks.values() if not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- reading -----------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def active(self) -> list[Job]:
        return [j for j in self._jobs.values() if not j.finished]

    # --- running -----------------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        lock = self._device_locks.setdefault(job.request.device, asyncio.Lock())
        try:
            async with lock:
                if job.id in self._cancel_requested or job.finished:
                    return
                await self._run_process(job)
        except asyncio.CancelledError:
            if job.id in self._procs:
                self._kill(job.id)
            if not job.finished:
                self._finish(job, "cancelled", "cancelled")
            raise
        except Exception as exc:  # noqa: BLE001 - a job never takes its runner down
            if not job.finished:
                self._finish(job, "failed", f"job runner error: {type(exc).__name__}: {exc}")
        finally:
            self._procs.pop(job.id, None)
            self._trees.pop(job.id, None)
            self._cancel_requested.discard(job.id)

    async def _run_process(self, job: Job) -> None:
        # Owned: the command dies with this process (it is started from the loop's thread, which
        # lives as long as the runner).
        env = owned_environment({**os.environ, **(self.env or {}), **(job.request.env or {})})
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._starting.add(job.id)
        try:
            proc = await asyncio.create_subprocess_exec(
                *job.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=job.request.cwd, env=env, limit=_LINE_LIMIT,
                **_new_process_group(),
            )
        except OSError as exc:
            self._finish(job, "failed", f"could not start {job.argv[0]}: {exc.strerror or exc}")
            return
        finally:
            self._starting.discard(job.id)
        self._procs[job.id] = proc
        self._trees[job.id] = ProcessTree(proc.pid)
        if job.id in self._cancel_requested:  # cancelled while the process was being created
            self._kill(job.id)
        job.pid = proc.pid
        job.started_at = time.time()
        job.state = "running"
        job.message = "running"
        self._notify(job, None)
        stderr_tail: deque[str] = deque()
        readers = asyncio.gather(self._read_stdout(job, proc), _read_tail(proc, stderr_tail))
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(readers), timeout=job.request.timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
            self._kill(job.id)
            await readers
        returncode = await proc.wait()
        # Whatever the command left running (nothing, normally) goes with it, and the temporary
        # folders of its workers when it was killed.
        await asyncio.get_running_loop().run_in_executor(None, _end_leftovers, self._trees[job.id])
        job.returncode = returncode
        job.stderr_tail = "".join(stderr_tail)[-_STDERR_TAIL_CHARS:]
        if job.id in self._cancel_requested:
            self._finish(job, "cancelled", "cancelled")
        elif timed_out:
            self._finish(job, "failed", f"timed out after {job.request.timeout_s:g} s")
        else:
            self._conclude(job, returncode)

    async def _read_stdout(self, job: Job, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readline()
            except ValueError:  # a line over the limit: skip it rather than stall the pipe
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            event = parse_event_line(line)
            if event is None:
                if line.strip() and len(job.output_lines) < 10000:
                    job.output_lines.append(line)
                continue
            if event.get("event") == "result":
                job.result = event.get("result")
            elif event.get("event") == "progress":
                job.last_event = event
                if event.get("message"):
                    job.message = str(event["message"])
                self._notify(job, event)

    def _conclude(self, job: Job, returncode: int) -> None:
        if job.result is None and job.output_lines:
            # No result event: a command that printed plain --json still gives its result.
            try:
                job.result = json.loads("\n".join(job.output_lines))
            except json.JSONDecodeError:
                pass
        if job.result is not None:
            # A command may exit non-zero with a result (e.g. a rejected candidate): the job
            # itself worked; the verdict is in the result.
            self._finish(job, "done", _summary(job.result) or "done")
            return
        why = _last_lines(job.stderr_tail) or (f"exited with code {returncode}" if returncode else "no result")
        self._finish(job, "failed", why if returncode == 0 else f"exit code {returncode}: {why}")

    def _finish(self, job: Job, state: JobState, message: str) -> None:
        job.state = state
        job.message = message
        if state == "failed":
            job.error = message
        job.finished_at = time.time()
        self._notify(job, None)
        self._listeners.pop(job.id, None)

    def _notify(self, job: Job, event: dict[str, Any] | None) -> None:
        listener = self._listeners.get(job.id)
        if listener is None:
            return
        try:
            listener(job, event)
        except Exception:  # noqa: BLE001 - a listener's bug must not kill the job
            pass

    def _kill(self, job_id: str) -> None:
        """SIGINT first (the CLI exits through KeyboardInterrupt and closes its worker), then, after
        the grace period, SIGKILL to everything the job started, by pid: a worker in a session of
        its own, and whatever was re-parented after its parent died."""
        proc, tree = self._procs.get(job_id), self._trees.get(job_id)
        if proc is None or proc.returncode is not None:
            return
        if tree is not None:
            tree.refresh()  # before the interrupt: what runs now is known by pid however it ends
        _signal_group(proc, signal.SIGINT)
        loop = asyncio.get_running_loop()
        if tree is not None:
            loop.call_later(self.kill_grace_s, lambda: loop.run_in_executor(None, tree.end, 0.0))

    def terminate_all(self) -> None:
        """Kill every running job now, without waiting (the server is going away)."""
        for tree in list(self._trees.values()):
            tree.end(0.0)

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.finished]
        for job in finished[: max(0, len(finished) - self.keep_finished)]:
            self._jobs.pop(job.id, None)
            self._tasks.pop(job.id, None)


def _end_leftovers(tree: ProcessTree) -> None:
    tree.end()
    worker_scratch.sweep()


def _new_process_group() -> dict[str, Any]:
    if os.name == "posix":
        return {"start_new_session": True}
    return {"creationflags": 0x00000200}  # CREATE_NEW_PROCESS_GROUP on Windows


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, sig)  # the job's own session: its worker processes go too
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


async def _read_tail(proc: asyncio.subprocess.Process, tail: deque[str]) -> None:
    assert proc.stderr is not None
    size = 0
    while True:
        chunk = await proc.stderr.read(65536)
        if not chunk:
            return
        text = chunk.decode("utf-8", errors="replace")
        tail.append(text)
        size += len(text)
        while size > 2 * _STDERR_TAIL_CHARS and len(tail) > 1:
            size -= len(tail.popleft())


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])


def _summary(result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    for key in ("reason", "message", "summary"):
        value = result.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def run_job(request: JobRequest, on_update: JobListener | None = None, *, python: str | None = None,
            argv_builder: ArgvBuilder = cli_argv) -> Job:
    """Run one job to the end from synchronous code (the CLI); Ctrl-C cancels it."""

    async def go() -> Job:
        runner = JobRunner(python=python, argv_builder=argv_builder)
        job = runner.submit(request, on_update)
        try:
            return await runner.wait(job.id)
        finally:
            await runner.close()

    return asyncio.run(go())
