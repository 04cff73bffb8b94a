"""Gate 1's compile to sm_90, without a GPU: launch configs compiled in parallel, remembered on disk.

A kernel module's compile splits into units, one launch config each (:mod:`.sm90_compile` does
the compile). Each unit runs in a fresh contained process forked from the sandbox's "compile"
zygote (the compile imports the candidate's module, so it gets the containment of gates 2-4: a
process of its own, writing nowhere but its scratch folder), and :class:`PtxCompiler` keeps as many
of them going as the machine has cores. Answers are kept by source hash, unit, target and toolchain
(:mod:`.compile_cache`), so a source compiled once, by any candidate, kernel or run, is not compiled
again.

This module runs in the checker and imports nothing heavy.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .compile_cache import CompileCache
from .sm90_compile import MAX_CONFIGS, SM90_MAX_SHARED_BYTES, SM90_TARGET, summarize

COMPILE_CALLABLE = "kernelopt_core.gates.sm90_compile:compile_unit"
# Imported by the compile zygote before it forks, so no compile process pays for them (the code
# generator pulls in gluon: ~0.4 s each).
COMPILE_PRELOAD = ("kernelopt_core.gates.sm90_compile", "triton.compiler", "triton.compiler.code_generator",
                   "triton.backends.nvidia.compiler")
MAX_REQUESTS_AT_ONCE = 64  # compiles waiting on their units (threads that only wait)


def compile_workers() -> int:
    """Compile processes at once: ``$KERNELOPT_COMPILE_WORKERS``, else the cores this process may use."""
    explicit = os.environ.get("KERNELOPT_COMPILE_WORKERS", "").strip()
    if explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class CompileStats:
    """What a compiler did: units answered from the cache, and units compiled in a process."""

    cache_hits: int = 0
    compiled: int = 0  # units sent to a compile process (each a fresh contained process)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, *, hits: int = 0, compiled: int = 0) -> None:
        with self._lock:
            self.cache_hits += hits
            self.compiled += compiled


@dataclass
class _Outcome:
    """One unit's answer (see :func:`.sm90_compile.compile_unit`), and the process that gave it."""

    answer: dict[str, Any]
    containment: dict[str, Any] | None = None
    from_cache: bool = False
    steps_s: dict[str, float] = field(default_factory=dict)  # where a compiled unit's time went


class PtxCompiler:
    """Compiles kernel modules for sm_90 on a pool of ``workers`` contained processes at once.

    ``compile`` blocks; ``submit`` returns a future, so several modules (a rewrite family's variants)
    compile together. ``cache``: True for the user cache folder, False for none, or a :class:`CompileCache`.
    """

    def __init__(self, python: str | None = None, workers: int | None = None, cache: CompileCache | bool = True):
        from ..sandbox.zygote import Zygote, shared_zygote

        own_python = python is not None and python != sys.executable
        self._zygote = (Zygote("compile", python=python, preload=COMPILE_PRELOAD) if own_python
                        else shared_zygote("compile", preload=COMPILE_PRELOAD))
        self._owns_zygote = own_python
        self.workers = max(1, workers or compile_workers())
        if cache is True:
            # Another interpreter's toolchain is not this one's: its answers are not kept.
            self.cache: CompileCache | None = None if own_python else CompileCache()
        else:
            self.cache = cache or None
        self.stats = CompileStats()
        self._units = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sm90-compile")
        self._requests = ThreadPoolExecutor(max_workers=MAX_REQUESTS_AT_ONCE, thread_name_prefix="sm90-request")

    # --- asking ----------------------------------------------------------------------------------

    def compile(self, kernel_name: str, source: str, timeout_s: float = 300.0,
                launches: list[dict[str, Any]] | None = None, max_configs: int | None = None) -> dict[str, Any]:
        """{"ok", "stage", "configs": [...], "error"?, "configs_total", "seconds", "containment"?, "cache"}.

        ``launches``: a launcher module's compile plans (gate 1's ``SourceReport.launch_plans``:
        kernel, signature, constants, num_warps, num_stages); each is compiled instead of the
        heuristics-decorated kernel's configs. ``max_configs``: compile only the first configs
        (a compile probe needs one). ``timeout_s`` bounds the whole compile.
        """
        begin = time.monotonic()
        deadline = begin + timeout_s
        limit = min(MAX_CONFIGS, max_configs or MAX_CONFIGS)
        outcomes: list[_Outcome] = []
        units: list[dict[str, Any]]
        if launches is not None:
            units = [{"plan": plan} for plan in launches[:limit]]
            total: int | None = len(launches)
        elif limit == 1:
            units, total = [{"index": 0}], None
        else:
            outcomes = self._outcomes(kernel_name, source, [{"count": True}], deadline)
            count = outcomes[0].answer
            if "failure" in count:
                return self._result(count["failure"], outcomes, begin)
            total = int(count["total"])
            units = [{"index": i} for i in range(min(total, limit))]
        configs = self._outcomes(kernel_name, source, units, deadline)
        outcomes += configs
        failure = next((o.answer["failure"] for o in configs if "failure" in o.answer), None)
        if failure is not None:
            return self._result(failure, outcomes, begin)
        if total is None:
            total = next((o.answer.get("total") for o in configs if isinstance(o.answer.get("total"), int)), 0)
        return self._result(summarize([o.answer["config"] for o in configs], int(total or 0)), outcomes, begin)

    def submit(self, kernel_name: str, source: str, timeout_s: float = 300.0,
               launches: list[dict[str, Any]] | None = None, max_configs: int | None = None) -> Future[dict[str, Any]]:
        """:meth:`compile` without waiting: its units join the pool's queue now."""
        return self._requests.submit(self.compile, kernel_name, source, timeout_s, launches, max_configs)

    # --- units -----------------------------------------------------------------------------------

    def _outcomes(self, kernel_name: str, source: str, units: list[dict[str, Any]],
                  deadline: float) -> list[_Outcome]:
        """Each unit's outcome, in order: from the cache, else compiled on the pool (all at once)."""
        found: dict[int, _Outcome] = {}
        running: dict[int, Future[_Outcome]] = {}
        for index, unit in enumerate(units):
            kept = self.cache.get(kernel_name, source, unit) if self.cache is not None else None
            if kept is not None:
                found[index] = _Outcome(kept, from_cache=True)
            else:
                running[index] = self._units.submit(self._compile_unit, kernel_name, source, unit, deadline)
        self.stats.count(hits=len(found))
        for index, future in running.items():
            outcome = found[index] = future.result()
            if self.cache is not None and outcome.containment is not None:  # the process answered
                self.cache.put(kernel_name, source, units[index], outcome.answer)
        return [found[i] for i in range(len(units))]

    def _compile_unit(self, kernel_name: str, source: str, unit: dict[str, Any], deadline: float) -> _Outcome:
        """One unit in a fresh contained compile process (never raises)."""
        from ..sandbox.process import SandboxError, SandboxProcess

        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _Outcome({"failure": _failure("crash", "the Triton compile did not finish within the time limit")})
        begin = time.monotonic()
        try:
            process = SandboxProcess.start("compile", "cpu", zygote=self._zygote)
        except (SandboxError, OSError) as exc:  # OSError: no scratch folder or socket could be made
            return _Outcome({"failure": _failure("start", f"the compile process could not start: {exc}")})
        started = time.monotonic()
        self.stats.count(compiled=1)
        try:
            reply = process.call("call", timeout_s=max(0.1, deadline - time.monotonic()), callable=COMPILE_CALLABLE,
                                 kwargs={"kernel_name": kernel_name, "source": source, "unit": unit})
        except SandboxError as exc:
            what = "did not finish within the time limit" if exc.kind == "timeout" else "crashed"
            return _Outcome({"failure": _failure("crash", f"the Triton compile {what}: {exc}")})
        finally:
            process.close()
        containment = {"pid": process.pid, **process.containment.to_json()}
        result = reply.get("result")
        if reply.get("ok") and isinstance(result, dict) and ("failure" in result or "total" in result):
            steps = {"start_s": round(started - begin, 4), "call_s": round(time.monotonic() - started, 4),
                     **(result.pop("steps_s", None) or {})}
            return _Outcome(result, containment, steps_s=steps)
        if reply.get("ok") or reply.get("checker_error"):
            return _Outcome({"failure": _failure("crash", f"the compile process failed: {reply.get('error')}")})
        # The candidate's module raised past the compile: it tried to leave the process, or was refused something.
        return _Outcome({"failure": {"ok": False, "stage": "import", "configs": [], "error": reply.get("error"),
                                     "violation": bool(reply.get("violation"))}}, containment)

    def _result(self, result: dict[str, Any], outcomes: list[_Outcome], begin: float) -> dict[str, Any]:
        result = {**result, "seconds": round(time.monotonic() - begin, 3),
                  "cache": {"hits": sum(o.from_cache for o in outcomes),
                            "compiled": sum(not o.from_cache for o in outcomes)}}
        units = [o.steps_s for o in outcomes if o.steps_s]
        if units:  # each compiled unit's process start, its call, and within it the import and the compile
            result["units_s"] = units
        ran = [o.containment for o in outcomes if o.containment is not None]
        if ran:  # the least contained of its processes speaks for the compile
            result["containment"] = next((c for c in ran if not c.get("contained")), ran[0])
        return result

    def start_in_background(self) -> None:
        """Start the compile processes' zygote now (its imports take seconds), ahead of the first compile."""
        self._zygote.start_in_background()

    def close(self) -> None:
        self._requests.shutdown(wait=False, cancel_futures=True)
        self._units.shutdown(wait=False, cancel_futures=True)
        if self._owns_zygote:
            self._zygote.close()


def _failure(stage: str, message: str) -> dict[str, Any]:
    return {"ok": False, "stage": stage, "configs": [], "error": message}


_SHARED: PtxCompiler | None = None
_SHARED_LOCK = threading.Lock()


def shared_compiler() -> PtxCompiler:
    """The compile pool of this process (started on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = PtxCompiler()
        return _SHARED


@atexit.register
def _close_shared() -> None:
    if _SHARED is not None:
        _SHARED.close()


__all__ = ["COMPILE_CALLABLE", "MAX_CONFIGS", "SM90_MAX_SHARED_BYTES", "SM90_TARGET", "CompileStats", "PtxCompiler",
           "compile_workers", "shared_compiler"]
