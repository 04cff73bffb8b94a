"""Compile a candidate kernel module to PTX for sm_90 without a GPU (gate 1's compile step).

Triton compiles for any target it knows without a device: ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))`` runs the front end (ttir, ttgir), LLVM (llir), the NVPTX
back end (ptx) and Triton's bundled ``ptxas`` (cubin). A worker on the CPU backend has
``TRITON_INTERPRET=1`` set, which turns ``@triton.jit`` into the interpreter, so the compile
runs in a subprocess of its own without that variable: :class:`PtxCompiler` keeps one alive
(``python -m kernelopt_core.gates.ptx_compile``) and talks to it with one JSON line per request.

The client half of this module imports nothing heavy; the server half (:func:`serve`) imports
torch and triton and runs only in that subprocess.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SM90_TARGET = ("cuda", 90, 32)
SM90_MAX_SHARED_BYTES = 232448  # 227 KiB of dynamic shared memory per block on H100/H200
MAX_CONFIGS = 16
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class PtxCompiler:
    """A long-lived compile subprocess; restarted when it dies or hangs."""

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self._popen: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._stderr_tail: list[str] = []

    def compile(self, kernel_name: str, source: str, timeout_s: float = 300.0,
                launches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """{"ok", "stage", "configs": [...], "error"?, "seconds"} for one kernel module source.

        ``launches``: a launcher module's compile plans (gate 1's ``SourceReport.launch_plans``:
        kernel, signature, constants, num_warps, num_stages); each is compiled instead of the
        heuristics-decorated kernel's configs.
        """
        with self._lock:
            begin = time.monotonic()
            try:
                popen = self._ensure_started()
                request: dict[str, Any] = {"kernel_name": kernel_name, "source": source}
                if launches is not None:
                    request["launches"] = launches
                line = json.dumps(request) + "\n"
                assert popen.stdin is not None
                popen.stdin.write(line.encode("utf-8"))
                popen.stdin.flush()
            except (OSError, ValueError) as exc:
                self._kill()
                return _failure("start", f"the compile subprocess could not take the request: {exc}", begin)
            reply = self._read_reply(timeout_s)
            if reply is None:
                alive = self._popen is not None and self._popen.poll() is None
                tail = "\n".join(self._stderr_tail[-20:])
                self._kill()
                what = f"did not finish within {timeout_s:g} s" if alive else "crashed"
                return _failure("crash", f"the Triton compile {what}" + (f"\n{tail}" if tail else ""), begin)
            reply["seconds"] = round(time.monotonic() - begin, 3)
            return reply

    def close(self) -> None:
        with self._lock:
            popen = self._popen
            if popen is not None and popen.poll() is None and popen.stdin is not None:
                try:  # end of input lets the server exit and remove its temp folder
                    popen.stdin.close()
                    popen.wait(timeout=3)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self._popen is not None and self._popen.poll() is None:
            return self._popen
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # keep Inductor's default, silence the warning
        env["PYTHONWARNINGS"] = "ignore"
        self._buffer = b""
        self._stderr_tail = []
        self._popen = subprocess.Popen(
            [self.python, "-m", "kernelopt_core.gates.ptx_compile"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
        )
        threading.Thread(target=self._drain, args=(self._popen,), daemon=True).start()
        return self._popen

    def _drain(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stderr is not None
        for raw in iter(popen.stderr.readline, b""):
            self._stderr_tail.append(raw.decode("utf-8", "replace").rstrip())
            del self._stderr_tail[:-200]

    def _read_reply(self, timeout_s: float) -> dict[str, Any] | None:
        popen = self._popen
        assert popen is not None and popen.stdout is not None
        deadline = time.monotonic() + timeout_s
        fd = popen.stdout.fileno()
        while True:
            while b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(data, dict) and "ok" in data:
                    return data
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if not ready:
                if popen.poll() is not None:
                    return None
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk

    def _kill(self) -> None:
        popen, self._popen = self._popen, None
        if popen is None:
            return
        if popen.poll() is None:
            try:
                os.killpg(popen.pid, 9)
            except (ProcessLookupError, PermissionError):
                popen.kill()
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (popen.stdin, popen.stdout, popen.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _failure(stage: str, message: str, begin: float) -> dict[str, Any]:
    return {"ok": False, "stage": stage, "configs": [], "error": message,
            "seconds": round(time.monotonic() - begin, 3)}


_SHARED: PtxCompiler | None = None
_SHARED_LOCK = threading.Lock()


def shared_compiler() -> PtxCompiler:
    """The one compile subprocess of this process (started on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = PtxCompiler()
        return _SHARED


@atexit.register
def _close_shared() -> None:
    if _SHARED is not None:
        _SHARED.close()


# --- the server (runs only in the compile subprocess) ------------------------------------------


def compile_source(kernel_name: str, source: str, workdir: str,
                   launches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Import the kernel module and compile each of its launch configs (or ``launches``) for sm_90."""
    import hashlib
    import importlib.util

    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    path = os.path.join(workdir, f"{kernel_name}_{digest}.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)
    module_name = f"kernelopt_candidate_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the candidate's own error, reported as such
        return {"ok": False, "stage": "import", "configs": [],
                "error": f"the kernel module fails to load: {type(exc).__name__}: {exc}"}
    if launches is not None:
        return _compile_launches(module, launches)
    autotuner = getattr(module, kernel_name, None)
    if autotuner is None or not hasattr(autotuner, "configs"):
        return {"ok": False, "stage": "import", "configs": [],
                "error": f"{kernel_name} is not a Triton kernel wrapped by a triton_heuristics decorator"}
    configs = list(autotuner.configs)[:MAX_CONFIGS]
    fn = autotuner.fn
    constexprs = {p.name for p in getattr(fn, "params", []) if getattr(p, "is_constexpr", False)}
    results: list[dict[str, Any]] = []
    for cfg in configs:
        entry: dict[str, Any] = {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps,
                                 "num_stages": cfg.num_stages}
        stray = sorted(set(cfg.kwargs) - constexprs) if constexprs else []
        if stray:
            # The CPU interpreter silently drops such keys; the GPU launcher would not.
            entry.update(ok=False, stage="config", error=f"the launch config sets {', '.join(stray)}, which "
                                                         f"{'is' if len(stray) == 1 else 'are'} not a constexpr "
                                                         "parameter of the kernel")
            results.append(entry)
            continue
        try:
            meta = autotuner._create_compile_meta(cfg)
            options = {"num_warps": meta["num_warps"], "num_stages": meta["num_stages"], "debug": False}
            if "enable_fp_fusion" in meta:
                options["enable_fp_fusion"] = meta["enable_fp_fusion"]
            attrs = meta["configs"][0] if meta.get("configs") else {}
            results.append(_compile_one(autotuner.fn, meta["signature"], meta["constants"], attrs, options, entry))
        except Exception as exc:  # noqa: BLE001 - the compile meta itself failed
            entry.update(ok=False, stage="frontend", error=f"{type(exc).__name__}: {exc}"[-4000:])
            results.append(entry)
    return _summary(results, total=len(autotuner.configs))


def _compile_one(fn: Any, signature: dict[str, Any], constants: dict[str, Any], attrs: dict[Any, Any],
                 options: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """Compile one (signature, constants, options) of ``fn`` for sm_90; the outcome goes into ``entry``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    try:
        compiled = triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget(*SM90_TARGET),
                                  options=options)
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {exc}"
        lowered = text.lower()
        if "ptxas" in lowered and any(w in lowered for w in ("not found", "no such file", "filenotfound")):
            # PTX is made before ptxas runs: without the assembler the kernel still reached PTX.
            entry.update(ok=True, stage="ptx", ptx_bytes=None, shared_bytes=None, stages=["ptx"],
                         note=f"ptxas is unavailable, so no cubin was assembled: {text[-300:]}")
            return entry
        entry.update(ok=False, stage="ptx" if "ptxas" in lowered else "frontend", error=text[-4000:])
        return entry
    asm = compiled.asm
    shared = int(getattr(compiled.metadata, "shared", 0) or 0)
    entry.update(ok=True, stage="cubin" if "cubin" in asm else "ptx", ptx_bytes=len(asm.get("ptx", "")),
                 shared_bytes=shared, stages=[k for k in ("ttir", "ttgir", "llir", "ptx", "cubin") if k in asm])
    if shared > SM90_MAX_SHARED_BYTES:
        entry.update(ok=False, error=f"needs {shared} bytes of shared memory; sm_90 allows "
                                     f"{SM90_MAX_SHARED_BYTES} per block")
    return entry


def _compile_launches(module: Any, launches: list[dict[str, Any]]) -> dict[str, Any]:
    """A launcher module: compile each launch plan's @triton.jit kernel with the types the launcher passes."""
    from triton.runtime.jit import JITFunction

    results: list[dict[str, Any]] = []
    for plan in launches[:MAX_CONFIGS]:
        name = str(plan.get("kernel"))
        entry: dict[str, Any] = {"kernel": name, "line": plan.get("line"), "kwargs": dict(plan.get("constants") or {}),
                                 "num_warps": plan.get("num_warps"), "num_stages": plan.get("num_stages")}
        fn = getattr(module, name, None)
        for _ in range(4):  # @triton.autotune / @triton.heuristics wrap the JITFunction in .fn
            if fn is None or isinstance(fn, JITFunction):
                break
            fn = getattr(fn, "fn", None)
        if not isinstance(fn, JITFunction):
            entry.update(ok=False, stage="import", error=f"{name} is not a @triton.jit function of the module")
            results.append(entry)
            continue
        options = {"num_warps": int(plan.get("num_warps") or 4), "num_stages": int(plan.get("num_stages") or 3),
                   "debug": False}
        signature = {str(k): str(v) for k, v in dict(plan.get("signature") or {}).items()}
        results.append(_compile_one(fn, signature, dict(plan.get("constants") or {}), {}, options, entry))
    return _summary(results, total=len(launches))


def _summary(results: list[dict[str, Any]], total: int) -> dict[str, Any]:
    failed = [r for r in results if not r["ok"]]
    if not results:
        return {"ok": False, "stage": "import", "configs": [], "error": "the kernel declares no launch config"}
    stage = min((r["stage"] for r in results), key=["import", "config", "frontend", "ptx", "cubin"].index)
    return {"ok": not failed, "stage": stage, "configs": results,
            "error": failed[0]["error"] if failed else None, "configs_total": total}


def serve() -> int:
    """Answer compile requests, one JSON line in and one out, until stdin closes."""
    import tempfile
    import traceback

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the compiler prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    from torch._inductor.runtime import triton_helpers

    # Kernel modules pick a driver when imported; compiling for a target needs none.
    triton_helpers.set_driver_to_gpu = lambda: None
    triton_helpers.set_driver_to_cpu = lambda: None
    workdir = tempfile.mkdtemp(prefix="kernelopt-ptx-")
    atexit.register(shutil.rmtree, workdir, True)
    for raw in sys.stdin:
        try:
            request = json.loads(raw)
            launches = request.get("launches")
            reply = compile_source(str(request["kernel_name"]), str(request["source"]), workdir,
                                   launches if isinstance(launches, list) else None)
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the server
            reply = {"ok": False, "stage": "import", "configs": [],
                     "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
        proto.write(json.dumps(reply, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve())
