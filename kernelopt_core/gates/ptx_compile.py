"""Compile a candidate kernel module to PTX for sm_90 without a GPU (gate 1's compile step).

Triton compiles for any target it knows without a device: ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))`` runs the front end (ttir, ttgir), LLVM (llir), the NVPTX
back end (ptx) and Triton's bundled ``ptxas`` (cubin). Compiling imports the candidate's module,
so each compile runs in a fresh contained process (:class:`PtxCompiler`), forked from a zygote
without ``TRITON_INTERPRET`` (which would turn ``@triton.jit`` into the interpreter).

The client half of this module imports nothing heavy; :func:`compile_source` imports torch and
triton and runs only in that process.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SM90_TARGET = ("cuda", 90, 32)
SM90_MAX_SHARED_BYTES = 232448  # 227 KiB of dynamic shared memory per block on H100/H200
MAX_CONFIGS = 16
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class PtxCompiler:
    """Compiles each candidate in a fresh contained process forked from a "compile" zygote.

    The candidate's module is imported to compile it, so it gets the same containment as in
    gates 2-4 (:mod:`kernelopt_core.sandbox`): a process of its own, shared with no other
    candidate, writing nowhere but its scratch folder.
    """

    def __init__(self, python: str | None = None):
        from ..sandbox.zygote import Zygote

        self._zygote = Zygote("compile", python=python)
        self._lock = threading.Lock()

    def compile(self, kernel_name: str, source: str, timeout_s: float = 300.0,
                launches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """{"ok", "stage", "configs": [...], "error"?, "seconds", "containment"} for one kernel module.

        ``launches``: a launcher module's compile plans (gate 1's ``SourceReport.launch_plans``:
        kernel, signature, constants, num_warps, num_stages); each is compiled instead of the
        heuristics-decorated kernel's configs.
        """
        from ..sandbox.process import SandboxError, SandboxProcess

        begin = time.monotonic()
        with self._lock:
            try:
                process = SandboxProcess.start("compile", "cpu", zygote=self._zygote)
            except SandboxError as exc:
                return _failure("start", f"the compile process could not start: {exc}", begin)
            try:
                reply = process.call("compile", timeout_s=timeout_s, name=kernel_name, source=source,
                                     launches=launches)
            except SandboxError as exc:
                what = "did not finish within the time limit" if exc.kind == "timeout" else "crashed"
                return _failure("crash", f"the Triton compile {what}: {exc}", begin)
            finally:
                process.close()
        result = reply.get("result") if reply.get("ok") else None
        if not isinstance(result, dict):
            return _failure("crash", f"the compile process failed: {reply.get('error')}", begin)
        result["seconds"] = round(time.monotonic() - begin, 3)
        result["containment"] = {"pid": process.pid, **process.containment.to_json()}
        return result

    def close(self) -> None:
        self._zygote.close()


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


# --- the compile itself (runs only in the contained compile process) ----------------------------


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

    ptxas_log = io.StringIO()
    try:
        with _ptxas_log_to(ptxas_log):
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
                 shared_bytes=shared, stages=[k for k in ("ttir", "ttgir", "llir", "ptx", "cubin") if k in asm],
                 **(usage_from_ptxas_log(ptxas_log.getvalue())
                    or register_usage(asm.get("ptx"), options.get("enable_fp_fusion", True))))
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


@contextlib.contextmanager
def _ptxas_log_to(stream: io.StringIO) -> Iterator[None]:
    """Triton runs ``ptxas -v`` to make the cubin; with its ``dump_ptxas_log`` knob it prints the log,
    which holds the registers and spills. Reading it there saves a second ``ptxas`` run, which for a
    kernel that spills takes as long as the compile (13 s of 45 s measured on this machine).
    A Triton without the knob, or a cached compile that runs no ptxas, leaves ``stream`` empty."""
    import triton

    nvidia = getattr(getattr(triton, "knobs", None), "nvidia", None)
    if nvidia is None or not hasattr(nvidia, "dump_ptxas_log"):
        yield
        return
    previous = nvidia.dump_ptxas_log
    nvidia.dump_ptxas_log = True
    try:
        with contextlib.redirect_stdout(stream):
            yield
    finally:
        nvidia.dump_ptxas_log = previous


def parse_ptxas_usage(log: str) -> dict[str, int | None]:
    """``{"n_regs", "n_spills"}`` read from a ``ptxas -v`` log; None each that the log does not state."""
    regs = re.search(r"Used (\d+) registers", log)
    stores = re.search(r"(\d+) bytes spill stores", log)
    loads = re.search(r"(\d+) bytes spill loads", log)
    return {"n_regs": int(regs.group(1)) if regs else None,
            "n_spills": int(stores.group(1)) + int(loads.group(1)) if stores and loads else None}


def usage_from_ptxas_log(log: str) -> dict[str, int | None] | None:
    """:func:`parse_ptxas_usage` when the log states both figures, else None (assemble once more)."""
    usage = parse_ptxas_usage(log)
    return usage if None not in usage.values() else None


def register_usage(ptx: str | None, fp_fusion: bool = True) -> dict[str, int | None]:
    """``{"n_regs", "n_spills"}`` of a kernel's PTX assembled for sm_90a by Triton's ``ptxas -v``
    (registers per thread; spill stores + loads in bytes); None each when ptxas is unavailable.

    Triton reads these from the loaded binary, which needs a GPU; ``ptxas -v`` prints them without one.
    """
    import subprocess
    import tempfile

    unknown: dict[str, int | None] = {"n_regs": None, "n_spills": None}
    if not ptx:
        return unknown
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        try:
            ptxas = get_ptxas(90).path
        except TypeError:  # older Triton: get_ptxas() takes no architecture
            ptxas = get_ptxas().path
    except Exception:  # noqa: BLE001 - no ptxas: the usage is unknown, the compile still stands
        return unknown
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(ptx)
        command = [ptxas, "-v", "--gpu-name=sm_90a", source, "-o", os.path.join(folder, "kernel.o")]
        if not fp_fusion:
            command.insert(1, "--fmad=false")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return unknown
    return parse_ptxas_usage(done.stdout + done.stderr)
