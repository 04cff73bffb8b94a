"""The compile for sm_90 itself: runs only inside a contained "compile" process, never in the checker.

Triton compiles for any target it knows without a device: ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))`` runs the front end (ttir, ttgir), LLVM (llir), the NVPTX
back end (ptx) and Triton's bundled ``ptxas`` (cubin). Compiling imports the candidate's module,
so the checker (:mod:`.ptx_compile`) asks for it by name (:func:`compile_unit`) in a process of
the sandbox's "compile" flavour (no ``TRITON_INTERPRET``, which would turn ``@triton.jit`` into
the interpreter).

A kernel module's launch configs compile one per unit (:func:`compile_unit`), so the checker can
run them in parallel; :func:`compile_source` compiles them all, one after another, in this process.
Top-level imports are the standard library only; torch and triton are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import re
import tempfile
import time
from collections.abc import Iterator
from typing import Any

SM90_TARGET = ("cuda", 90, 32)
SM90_MAX_SHARED_BYTES = 232448  # 227 KiB of dynamic shared memory per block on H100/H200
MAX_CONFIGS = 16
_STAGES = ["import", "config", "frontend", "ptx", "cubin"]


class ModuleFailure(Exception):
    """The kernel module as a whole cannot be compiled (it does not load, or has no kernel to compile)."""

    def __init__(self, message: str, stage: str = "import"):
        super().__init__(message)
        self.stage = stage

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "stage": self.stage, "configs": [], "error": str(self)}


# --- what the checker asks of a compile process ------------------------------------------------


def compile_unit(kernel_name: str, source: str, unit: dict[str, Any]) -> dict[str, Any]:
    """One unit of a kernel module's compile, in a contained compile process.

    ``unit``: ``{"index": i}`` (the i-th config of a triton_heuristics-decorated kernel),
    ``{"plan": {...}}`` (one launch plan of a launcher module: kernel, signature, constants,
    num_warps, num_stages) or ``{"count": True}`` (only count the configs).
    Answers ``{"total": n, "config": entry}`` (no "config" for a count), or ``{"failure": {...}}``
    when the module as a whole fails, as :func:`compile_source` would report it.
    """
    workdir = tempfile.mkdtemp(prefix="compile-")  # beneath the process's scratch folder (its TMPDIR)
    begin = time.monotonic()
    steps: dict[str, float] = {}
    try:
        module = _load_module(kernel_name, source, workdir)
        steps["load_module_s"] = round(time.monotonic() - begin, 4)
        if "plan" in unit:
            answer: dict[str, Any] = {"total": None, "config": _compile_plan(module, dict(unit["plan"]))}
        else:
            autotuner = _heuristics_kernel(module, kernel_name)
            configs = list(autotuner.configs)
            if unit.get("count"):
                return {"total": len(configs), "steps_s": steps}
            index = int(unit["index"])
            if not 0 <= index < len(configs):
                raise ModuleFailure(f"{kernel_name} has {len(configs)} launch config(s), not a config {index}",
                                    stage="config")
            answer = {"total": len(configs), "config": _compile_config(autotuner, configs[index])}
        steps["compile_s"] = round(time.monotonic() - begin - steps["load_module_s"], 4)
        return {**answer, "steps_s": steps}
    except ModuleFailure as failure:
        return {"failure": failure.to_json()}


def compile_source(kernel_name: str, source: str, workdir: str,
                   launches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Import the kernel module and compile each of its launch configs (or ``launches``) for sm_90,
    one after another in this process: ``{"ok", "stage", "configs", "error", "configs_total"}``."""
    try:
        module = _load_module(kernel_name, source, workdir)
        if launches is not None:
            return summarize([_compile_plan(module, plan) for plan in launches[:MAX_CONFIGS]], len(launches))
        autotuner = _heuristics_kernel(module, kernel_name)
    except ModuleFailure as failure:
        return failure.to_json()
    configs = list(autotuner.configs)
    return summarize([_compile_config(autotuner, cfg) for cfg in configs[:MAX_CONFIGS]], len(configs))


def summarize(results: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """The kernel module's compile from its configs' outcomes (in launch order)."""
    failed = [r for r in results if not r["ok"]]
    if not results:
        return {"ok": False, "stage": "import", "configs": [], "error": "the kernel declares no launch config"}
    stage = min((r["stage"] for r in results), key=_STAGES.index)
    return {"ok": not failed, "stage": stage, "configs": results,
            "error": failed[0]["error"] if failed else None, "configs_total": total}


# --- loading the module ------------------------------------------------------------------------


def _load_module(kernel_name: str, source: str, workdir: str) -> Any:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    path = os.path.join(workdir, f"{kernel_name}_{digest}.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(f"kernelopt_candidate_{digest}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the candidate's own error, reported as such
        raise ModuleFailure(f"the kernel module fails to load: {type(exc).__name__}: {exc}") from None
    return module


def _heuristics_kernel(module: Any, kernel_name: str) -> Any:
    autotuner = getattr(module, kernel_name, None)
    if autotuner is None or not hasattr(autotuner, "configs"):
        raise ModuleFailure(f"{kernel_name} is not a Triton kernel wrapped by a triton_heuristics decorator")
    return autotuner


# --- one launch config -------------------------------------------------------------------------


def _compile_config(autotuner: Any, cfg: Any) -> dict[str, Any]:
    """One config of a triton_heuristics-decorated kernel."""
    fn = autotuner.fn
    constexprs = {p.name for p in getattr(fn, "params", []) if getattr(p, "is_constexpr", False)}
    entry: dict[str, Any] = {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    stray = sorted(set(cfg.kwargs) - constexprs) if constexprs else []
    if stray:
        # The CPU interpreter silently drops such keys; the GPU launcher would not.
        entry.update(ok=False, stage="config", error=f"the launch config sets {', '.join(stray)}, which "
                                                     f"{'is' if len(stray) == 1 else 'are'} not a constexpr "
                                                     "parameter of the kernel")
        return entry
    try:
        meta = autotuner._create_compile_meta(cfg)
        options = {"num_warps": meta["num_warps"], "num_stages": meta["num_stages"], "debug": False}
        if getattr(cfg, "maxnreg", None):
            options["maxnreg"] = int(cfg.maxnreg)  # the config caps registers per thread (.maxnreg)
        if "enable_fp_fusion" in meta:
            options["enable_fp_fusion"] = meta["enable_fp_fusion"]
        attrs = meta["configs"][0] if meta.get("configs") else {}
        return _compile_one(fn, meta["signature"], meta["constants"], attrs, options, entry)
    except Exception as exc:  # noqa: BLE001 - the compile meta itself failed
        entry.update(ok=False, stage="frontend", error=f"{type(exc).__name__}: {exc}"[-4000:])
        return entry


def _compile_plan(module: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """One launch plan of a launcher module: its @triton.jit kernel with the types the launcher passes."""
    from triton.runtime.jit import JITFunction

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
        return entry
    options = {"num_warps": int(plan.get("num_warps") or 4), "num_stages": int(plan.get("num_stages") or 3),
               "debug": False}
    signature = {str(k): str(v) for k, v in dict(plan.get("signature") or {}).items()}
    return _compile_one(fn, signature, dict(plan.get("constants") or {}), {}, options, entry)


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


# --- registers and spills ----------------------------------------------------------------------


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


__all__ = ["MAX_CONFIGS", "SM90_MAX_SHARED_BYTES", "SM90_TARGET", "compile_source", "compile_unit",
           "parse_ptxas_usage", "register_usage", "summarize", "usage_from_ptxas_log"]
