"""A pre-warmed fork server: a fresh, contained process per candidate in a fraction of a second.

Starting Python and importing torch and Triton costs seconds; a candidate must still never share a
process with its checker or with another candidate. The zygote (``python -m
kernelopt_core.sandbox.zygote --flavor F``) imports torch and Triton once, never touches a device
and never starts a thread, then forks one child per request, which closes what it inherited,
connects to its checker's authenticated Unix socket, applies the sandbox policy and serves
(:mod:`.child`). Flavours: ``cpu`` (the Triton interpreter), ``cuda`` and ``compile`` (compiling for
a GPU target without a GPU). A client may name modules to import before forking (``preload``); the
sandbox itself imports nothing of its clients. Protocol on stdin/stdout, one JSON line each:
``{"spawn": id, "address", "authkey", "scratch", "policy", "env", "device"}`` -> ``{"spawned": id,
"pid"}``, and ``{"exited": pid, "status": "..."}`` at each child's end. :class:`Zygote` is the
client side; it imports nothing heavy.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..process_lifetime import (
    OWNER_GONE_STATUS,
    SharedProcesses,
    die_with_owner,
    end_tree,
    set_parent_death_signal,
    start_owned,
)
from .compiler_hashes import hash_the_compilers_once

FLAVORS = ("cpu", "cuda", "compile")
PRELOAD_VARIABLE = "KERNELOPT_ZYGOTE_PRELOAD"  # the client's modules, comma-separated
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
START_TIMEOUT_S = 300.0


# --- the server (runs in the zygote process) ---------------------------------------------------


def _preload(flavor: str) -> None:
    if flavor == "cpu":
        from ..backends import cpu_triton

        cpu_triton.activate()
    import torch  # noqa: F401 - imported once here, inherited by every child
    import triton  # noqa: F401

    from . import child  # noqa: F401
    if flavor != "cuda":
        # On a GPU machine some of Inductor's imports ask the driver how many devices there are,
        # and torch then refuses CUDA in every forked child: the cuda flavour imports them per child.
        from torch._inductor import async_compile  # noqa: F401
        from torch._inductor.runtime import triton_heuristics  # noqa: F401

        from .. import graph_module, launchers  # noqa: F401
        from . import guarded_buffers  # noqa: F401

    if flavor == "compile":
        from torch._inductor.runtime import triton_helpers

        # Kernel modules pick a driver when imported; compiling for a target needs none.
        triton_helpers.set_driver_to_gpu = lambda: None
        triton_helpers.set_driver_to_cpu = lambda: None
        hash_the_compilers_once()
    import importlib

    for module in filter(None, os.environ.get(PRELOAD_VARIABLE, "").split(",")):
        importlib.import_module(module.strip())


def _child_main(request: dict[str, Any], flavor: str, zygote: int) -> None:
    """In the child (forked, or spawned by the zygote ``zygote``): never returns. It dies with the
    zygote (a dead zygote takes its candidates; none keeps running or holds a pipe open)."""
    code = 0
    try:
        set_parent_death_signal()
        if os.getppid() != zygote:
            os._exit(OWNER_GONE_STATUS)  # the zygote went before the signal was set
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(2, 1)
        os.closerange(3, 65536)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        import tempfile

        tempfile.tempdir = None  # computed again from TMPDIR (the scratch folder), not the zygote's
        from multiprocessing.connection import Client

        connection = Client(str(request["address"]), family="AF_UNIX", authkey=bytes.fromhex(request["authkey"]))
        from .policy import ContainmentReport, SandboxPolicy, apply_policy

        device = str(request.get("device") or ("cpu" if flavor != "cuda" else "cuda:0"))
        if device.startswith("cuda"):
            # The driver opens and creates what it needs while it sets up the context (seen on a
            # GPU: initialised under the policy, it failed with "OS call failed"); that happens
            # here, before the policy and long before any candidate code is imported.
            import torch

            torch.cuda.set_device(torch.device(device))
            torch.empty(1, device=device)
            torch.cuda.synchronize()
        if request.get("contain", True):
            report = apply_policy(SandboxPolicy.from_json(request["policy"]))
        else:
            report = ContainmentReport(pid=os.getpid(), filesystem="NOT restricted",
                                       network="NOT restricted", limits="not applied",
                                       notes=[str(request.get("uncontained_reason") or "containment off")])
        from .child import serve

        serve(connection, device, str(request["scratch"]), report)
    except BaseException:  # noqa: BLE001 - report on stderr, then leave
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fork_is_safe() -> bool:
    """Whether a forked child may still use CUDA (torch refuses once the parent asked the driver)."""
    import torch

    probe = getattr(torch._C, "_cuda_isInBadFork", None)
    if probe is None:
        return True
    pid = os.fork()
    if pid == 0:
        os._exit(1 if probe() else 0)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def forks_children(flavor: str) -> bool:
    """Whether this zygote forks its children (else each is a fresh interpreter that imports torch).

    Only a cuda child needs a CUDA context that a fork may have spoiled. A compile or cpu child never
    touches the device, so it forks even where Inductor's imports asked the driver for its devices: a
    spawned compile child takes seconds to start (its imports), a forked one milliseconds, and gate 1's
    compile of one launch config is that much slower (figures: docs/design-notes.md, "Measurements").
    """
    if os.environ.get("KERNELOPT_ZYGOTE_SPAWN") == "1":
        return False
    return flavor != "cuda" or _fork_is_safe()


def _spawn_child(request: dict[str, Any], flavor: str) -> int:
    """A fresh interpreter for one child (when forking cannot give a usable CUDA context)."""
    popen = start_owned([sys.executable, "-m", "kernelopt_core.sandbox.zygote", "--flavor", flavor, "--child"],
                        stdin=subprocess.PIPE, stdout=sys.stderr, stderr=None)
    assert popen.stdin is not None
    popen.stdin.write(json.dumps(request).encode("utf-8"))
    popen.stdin.close()
    return popen.pid


def _reap(out: int) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if os.WIFSIGNALED(status):
            try:
                what = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
            except ValueError:
                what = f"killed by signal {os.WTERMSIG(status)}"
        else:
            what = f"exited with status {os.WEXITSTATUS(status)}"
        _send(out, {"exited": pid, "status": what})


def _send(fd: int, message: dict[str, Any]) -> None:
    """One protocol line in one unbuffered write. SIGCHLD's handler writes too: a buffered stream
    shared with it fails with "reentrant call" (seen under load, which took the zygote down), while a
    single write of less than PIPE_BUF bytes to a pipe is atomic."""
    os.write(fd, (json.dumps(message) + "\n").encode("utf-8"))


def serve(flavor: str) -> int:
    # The parent-death signal (a killed worker takes its zygote); no watch thread: the zygote forks.
    die_with_owner(watch=False)
    protocol = os.dup(1)
    os.dup2(2, 1)  # whatever torch prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    _preload(flavor)
    fork = forks_children(flavor)
    signal.signal(signal.SIGCHLD, lambda *_: _reap(protocol))
    _send(protocol, {"ready": True, "pid": os.getpid(), "flavor": flavor, "fork": fork})
    for raw in sys.stdin:
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if "spawn" not in request:
            continue
        if not fork:
            pid = _spawn_child(request, flavor)
        else:
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                os.close(protocol)
                _child_main(request, flavor, zygote)
        _send(protocol, {"spawned": request["spawn"], "pid": pid})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelopt-zygote")
    parser.add_argument("--flavor", choices=FLAVORS, required=True)
    parser.add_argument("--child", action="store_true", help="serve one candidate; its request comes on stdin")
    args = parser.parse_args(argv)
    if args.child:
        die_with_owner(watch=False)  # before the seconds of imports: a zygote gone meanwhile ends it here
        zygote = os.getppid()
        request = json.loads(sys.stdin.read())
        _preload(args.flavor)
        _child_main(request, args.flavor, zygote)
    return serve(args.flavor)


# --- the client (runs in the checker) ----------------------------------------------------------


class ZygoteError(RuntimeError):
    pass


class Zygote:
    """One fork server of a flavour; started on first use, restarted if it dies. ``preload``: modules
    it imports before it forks, named by the client."""

    def __init__(self, flavor: str, python: str | None = None, env: dict[str, str] | None = None,
                 preload: tuple[str, ...] = ()):
        if flavor not in FLAVORS:
            raise ValueError(f"unknown zygote flavour {flavor!r}")
        self.flavor = flavor
        self.python = python or sys.executable
        self.env = dict(env or {})
        self.preload = tuple(preload)
        self.env[PRELOAD_VARIABLE] = ",".join(self.preload)  # set even when empty: never the caller's own
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._spawned: dict[str, int] = {}
        self._exits: dict[int, str] = {}
        self._changed = threading.Condition()
        self._next = 0
        self._stderr: list[str] = []

    def _environment(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        if self.flavor == "compile":
            env.pop("TRITON_INTERPRET", None)
            env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
            env["PYTHONWARNINGS"] = "ignore"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # children compile in-process: no pools
        return env

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._popen is not None and self._popen.poll() is None:
            return self._popen
        # Its own stderr pipe (drained here): the zygote and its children must not hold the caller's
        # stderr open, or a reader of the caller's stderr would wait for them forever.
        popen = start_owned([self.python, "-m", "kernelopt_core.sandbox.zygote", "--flavor", self.flavor],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=self._environment(), start_new_session=True)
        threading.Thread(target=self._drain, args=(popen,), daemon=True).start()
        assert popen.stdout is not None
        ready = popen.stdout.readline()
        try:
            hello = json.loads(ready) if ready else {}
        except json.JSONDecodeError:
            hello = {}
        if not hello.get("ready"):
            popen.kill()
            code = popen.wait()
            time.sleep(0.2)
            raise ZygoteError(f"the {self.flavor} zygote did not start (exit {code}): {self.stderr_tail(10)}")
        self._popen = popen
        threading.Thread(target=self._read, args=(popen,), daemon=True).start()
        return popen

    @property
    def pid(self) -> int | None:
        """The zygote's pid while it runs (None before its start and after it ended)."""
        popen = self._popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def start_in_background(self) -> None:
        """Start the zygote on a thread of its own, so that its imports (seconds) overlap the caller's
        other work; a start that fails here is tried again, and reported, by the first spawn."""

        def start() -> None:
            try:
                with self._lock:
                    self._ensure()
            except Exception:  # noqa: BLE001 - only a head start; spawn() starts it and names the error
                pass

        threading.Thread(target=start, name=f"kernelopt-{self.flavor}-zygote-start", daemon=True).start()

    def _drain(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stderr is not None
        echo = os.environ.get("KERNELOPT_WORKER_ECHO") == "1"
        for raw in popen.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._stderr.append(line)
            del self._stderr[:-200]
            if echo:
                sys.stderr.write(f"[{self.flavor} sandbox] {line}\n")

    def stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self._stderr[-lines:])

    def _read(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdout is not None
        for raw in popen.stdout:
            try:
                message = json.loads(raw)
            except json.JSONDecodeError:
                continue
            with self._changed:
                if "spawned" in message:
                    self._spawned[str(message["spawned"])] = int(message["pid"])
                elif "exited" in message:
                    self._exits[int(message["exited"])] = str(message["status"])
                self._changed.notify_all()

    def spawn(self, request: dict[str, Any], timeout_s: float = START_TIMEOUT_S) -> int:
        """Fork a child for ``request`` (without its "spawn" id); returns its pid."""
        with self._lock:
            popen = self._ensure()
            self._next += 1
            ident = f"{os.getpid()}-{self._next}"
            assert popen.stdin is not None
            try:
                popen.stdin.write((json.dumps({**request, "spawn": ident}) + "\n").encode("utf-8"))
                popen.stdin.flush()
            except OSError as exc:
                self._popen = None
                raise ZygoteError(f"the {self.flavor} zygote went away: {exc}") from exc
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while ident not in self._spawned:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or popen.poll() is not None:
                    raise ZygoteError(f"the {self.flavor} zygote did not fork a child")
                self._changed.wait(min(remaining, 0.5))
            return self._spawned.pop(ident)

    def exit_status(self, pid: int, wait_s: float = 0.0) -> str | None:
        deadline = time.monotonic() + wait_s
        with self._changed:
            while pid not in self._exits and time.monotonic() < deadline:
                self._changed.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            return self._exits.get(pid)

    def close(self) -> None:
        with self._lock:
            popen, self._popen = self._popen, None
        if popen is None:
            return
        try:
            if popen.stdin is not None:
                popen.stdin.close()
        except OSError:
            pass
        end_tree(popen.pid)  # the zygote and its candidates
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


_ZYGOTES: SharedProcesses[tuple[str, tuple[str, ...]], Zygote] = SharedProcesses(
    lambda key: Zygote(key[0], preload=key[1]))


def shared_zygote(flavor: str, preload: tuple[str, ...] = ()) -> Zygote:
    """This process's zygote of a flavour and preload (started on first use, closed at exit)."""
    return _ZYGOTES.get((flavor, tuple(preload)))


def close_zygotes() -> None:
    _ZYGOTES.close_all()

if __name__ == "__main__":
    sys.exit(main())
