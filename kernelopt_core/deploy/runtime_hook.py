"""Put accepted kernels into the user's own ``torch.compile``: the hook inside Inductor.

Runs in the user's process and imports torch when installed (never at module load).

Every Triton kernel Inductor loads goes through ``AsyncCompile.triton(kernel_name, source_code,
device_str)``: the compiled wrapper calls it at import, for a fresh compile and for an FX-graph-
cache hit alike (the cached wrapper is imported again). ``source_code`` is exactly the text our
parser hashes, so the hook looks the hash up in the accepted store and hands Inductor the accepted
source instead. The wrapper text itself is never changed, so caches never hold a replaced graph:
turning KernelOPT off (``KERNELOPT_DISABLE=1``) takes effect on the next load, warm cache or not.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..accepted import AcceptedStore, installed_version
from .substitution import Decision, SubstitutionTable

logger = logging.getLogger("kernelopt")
DISABLE_ENV = "KERNELOPT_DISABLE"


@dataclass
class Substitution:
    """One kernel replaced in this process."""

    kernel: str
    entry_id: str
    original_hash: str
    accepted_hash: str
    speedup: float | None
    ci: tuple[float, float] | None


@dataclass
class EnableReport:
    """What ``enable()`` did: whether it hooked Inductor, which kernels it can replace, and why it
    may replace nothing (``warnings``). ``str(report)`` says it in one line."""

    enabled: bool
    reason: str
    store_root: str | None = None
    entries: int = 0  # usable entries
    skipped: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # the Triton kernels the usable entries replace
    warnings: list[str] = field(default_factory=list)  # why no kernel may be replaced in this process

    def __str__(self) -> str:
        if not self.enabled:
            return f"kernelopt: not enabled ({self.reason})"
        if not self.entries:
            return f"kernelopt: enabled, but nothing can be replaced: {self.reason}"
        if self.warnings:  # one statement: nothing is replaced here, why, and how to change it
            return (f"kernelopt: enabled, but no kernel can be replaced in this process: {self.warnings[0]}; the "
                    f"store has {self.entries} accepted kernel(s) from {self.store_root} ({', '.join(self.kernels)})")
        return (f"kernelopt: {self.entries} accepted kernel(s) from {self.store_root} will replace "
                f"{', '.join(self.kernels)} when torch.compile loads them")


@dataclass
class _State:
    table: SubstitutionTable | None = None
    original: Callable[..., Any] | None = None
    substitutions: list[Substitution] = field(default_factory=list)
    said: set[str] = field(default_factory=set)  # messages already logged (each is logged once)
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: dict[str, int] = field(default_factory=dict)  # Triton kernels Inductor loaded while hooked, by name
    refused: int = 0  # loads that matched an entry the rules refused (each reason is logged)
    backend_note: str | None = None  # why Inductor may load no Triton kernel at all here
    exit_summary: bool = False  # the at-exit "why nothing" line is registered


_STATE = _State()


def disabled_by_env() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def install(store_root: str | None = None, announce: bool = True) -> EnableReport:
    """Read the store and hook Inductor. Calling it again re-reads the store."""
    if announce:
        _announce()
    if disabled_by_env():
        uninstall()
        logger.info("kernelopt: %s=1, accepted kernels are not used", DISABLE_ENV)
        return EnableReport(False, f"{DISABLE_ENV} is set")
    import torch
    from torch._inductor.async_compile import AsyncCompile

    store = AcceptedStore(store_root)
    table = SubstitutionTable.from_store(store, torch_version=torch.__version__,
                                         triton_version=_triton_version())
    for message in table.skipped:
        _say_once(logging.WARNING, f"kernelopt: {message}")
    backend_note = _no_triton_backend(torch)
    with _STATE.lock:
        _STATE.table = table
        _STATE.backend_note = backend_note
        if _STATE.original is None:
            _STATE.original = AsyncCompile.triton
            AsyncCompile.triton = _hooked_triton
        register_exit = not _STATE.exit_summary
        _STATE.exit_summary = True
    if register_exit:
        atexit.register(_summary_at_exit)
    kernels = sorted({entry.kernel_name for entry in table.by_hash.values()})
    if not table.by_hash:
        detail = (f"{len(table.skipped)} entr{'y' if len(table.skipped) == 1 else 'ies'} skipped (see above)"
                  if table.skipped else "the store is empty: `kernelopt optimize ... --deploy` or "
                                        "`kernelopt accepted add RUN` adds kernels")
        reason = f"no usable accepted kernel in {store.root}: {detail}"
        logger.warning("kernelopt: %s; no kernel will be replaced", reason)
        return EnableReport(True, reason, store.root, 0, list(table.skipped))
    logger.info("kernelopt: %d accepted kernel(s) from %s: %s", len(table.by_hash), store.root, ", ".join(kernels))
    if backend_note:
        logger.warning("kernelopt: %s", backend_note)
    _clear_loaded_wrappers()
    return EnableReport(True, "enabled", store.root, len(table.by_hash), list(table.skipped), kernels,
                        [backend_note] if backend_note else [])


def _no_triton_backend(torch: Any) -> str | None:
    """Why Inductor will write no Triton kernel in this process (so nothing can be replaced), or None."""
    try:
        if torch.cuda.is_available():
            return None
    except Exception:  # noqa: BLE001 - a broken CUDA setup is a reason in itself
        pass
    from ..backends import cpu_triton

    if cpu_triton.is_active():
        return None
    return ("no CUDA GPU, and KernelOPT's CPU Triton backend is off, so torch.compile writes C++ kernels for the "
            "CPU, not Triton kernels; to use accepted kernels here, call "
            "kernelopt_core.backends.cpu_triton.activate() before importing torch (Triton's interpreter then runs "
            "them), or run on a GPU")


def usage_summary() -> str:
    """One line: the kernels replaced in this process so far, or why none was."""
    with _STATE.lock:
        table, subs, loaded = _STATE.table, list(_STATE.substitutions), dict(_STATE.loaded)
        refused, backend_note = _STATE.refused, _STATE.backend_note
    if subs:
        names = sorted({s.kernel for s in subs})
        return f"kernelopt: {len(names)} accepted kernel(s) in use: {', '.join(names)}"
    if table is None:
        return "kernelopt: not enabled, no kernel replaced"
    if not table.by_hash:
        return "kernelopt: no kernel replaced: no usable accepted kernel in the store"
    wanted = sorted({entry.kernel_name for entry in table.by_hash.values()})
    if refused:
        return f"kernelopt: no kernel replaced: {refused} matching load(s) refused by the deploy rules (see above)"
    if not loaded:
        why = backend_note or ("no torch.compile ran after enable(); graphs compiled before it keep their kernels")
        return f"kernelopt: no kernel replaced: Inductor loaded no Triton kernel in this process ({why})"
    same_name = [name for name in wanted if name in loaded]
    if same_name:
        entry = next(e for e in table.by_hash.values() if e.kernel_name == same_name[0])
        return (f"kernelopt: no kernel replaced: {same_name[0]} was loaded, but its source differs from the one "
                f"the accepted entry was verified on; likely causes: {mismatch_causes(entry.graph_path)}")
    return (f"kernelopt: no kernel replaced: none of the {len(loaded)} Triton kernel(s) loaded has an accepted "
            f"entry (the store's entries are for {', '.join(wanted)})")


def mismatch_causes(graph_path: str | None) -> str:
    """Why a kernel of the same name can have another source, grad mode first: a model called under
    ``torch.no_grad()`` compiles an inference graph, one called with gradients a training forward that
    also saves what backward needs, so the same kernel name is another kernel. Inductor names the
    graph's folder after it (``model__0_inference_0`` or ``model__0_forward_0``)."""
    folder = os.path.basename(os.path.dirname(graph_path or "")) + os.path.basename(graph_path or "")
    if "inference" in folder:
        grad = ("grad mode: the entry was verified on an inference graph (compiled under torch.no_grad()); "
                "called with gradients enabled, the model compiles a training graph with other kernels, so "
                "call it under torch.no_grad() or torch.inference_mode()")
    elif "forward" in folder:
        grad = ("grad mode: the entry was verified on a training graph (compiled with gradients enabled); "
                "under torch.no_grad() or torch.inference_mode() the model compiles an inference graph with "
                "other kernels")
    else:
        grad = ("grad mode (torch.no_grad() or not: an inference graph and a training graph have different "
                "kernels)")
    return f"{grad}; or another model, input shape, dtype or torch.compile mode"


def _summary_at_exit() -> None:
    if _STATE.table is None or not _STATE.table.by_hash or disabled_by_env():
        return  # not enabled, or enable() already said the store had nothing usable
    with _STATE.lock:
        replaced = bool(_STATE.substitutions)
    if not replaced:  # each replacement was logged when it happened; silence needs a reason
        logger.warning(usage_summary())


def uninstall() -> None:
    from torch._inductor.async_compile import AsyncCompile

    with _STATE.lock:
        if _STATE.original is not None:
            AsyncCompile.triton = _STATE.original
        _STATE.original = None
        _STATE.table = None


def is_installed() -> bool:
    return _STATE.original is not None


def substitutions() -> list[Substitution]:
    with _STATE.lock:
        return list(_STATE.substitutions)


def _hooked_triton(self: Any, kernel_name: str, source_code: str, *args: Any, **kwargs: Any) -> Any:
    original = _STATE.original
    assert original is not None, "kernelopt hook called after uninstall"
    table = _STATE.table
    if table is None or disabled_by_env() or not isinstance(source_code, str):
        return original(self, kernel_name, source_code, *args, **kwargs)
    with _STATE.lock:
        _STATE.loaded[kernel_name] = _STATE.loaded.get(kernel_name, 0) + 1
    try:
        decision = table.decide(kernel_name, source_code)
    except Exception as exc:  # noqa: BLE001 - a rule that fails must never break the user's compile
        _say_once(logging.WARNING, f"kernelopt: could not check {kernel_name} ({type(exc).__name__}: {exc}); "
                                   "left as Inductor wrote it")
        return original(self, kernel_name, source_code, *args, **kwargs)
    if not decision.replace:
        if decision.entry is not None:  # a matching entry that the rules refused: say why, once
            with _STATE.lock:
                _STATE.refused += 1
            _say_once(logging.WARNING, f"kernelopt: not replacing {kernel_name}: {decision.reason}")
        return original(self, kernel_name, source_code, *args, **kwargs)
    assert decision.source is not None
    try:
        kernel = original(self, kernel_name, decision.source, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the accepted source must not take the program down
        _say_once(logging.ERROR, f"kernelopt: the accepted {kernel_name} (entry {decision.entry.id if decision.entry else '?'}) "
                                 f"failed to load ({type(exc).__name__}: {exc}); using Inductor's kernel")
        return original(self, kernel_name, source_code, *args, **kwargs)
    _record(kernel_name, decision)
    return kernel


def _record(kernel_name: str, decision: Decision) -> None:
    entry = decision.entry
    assert entry is not None
    with _STATE.lock:
        _STATE.substitutions.append(Substitution(
            kernel=kernel_name, entry_id=entry.id, original_hash=entry.original_hash,
            accepted_hash=entry.accepted_hash, speedup=entry.speedup, ci=entry.ci))
    speed = f"verified speedup {entry.speedup:.3f}x" if entry.speedup is not None else "speedup not measured"
    if entry.ci is not None:
        speed += f" (95% CI {entry.ci[0]:.3f}-{entry.ci[1]:.3f})"
    where = f" via {entry.timing_path}" if entry.timing_path else ""
    _say_once(logging.INFO, f"kernelopt: replaced Triton kernel {kernel_name} with accepted entry {entry.id} "
                            f"({speed}{where}, on {entry.gpu})")


def _say_once(level: int, message: str) -> None:
    with _STATE.lock:
        if message in _STATE.said:
            return
        _STATE.said.add(message)
    logger.log(level, message)


def _announce() -> None:
    """Show kernelopt's messages on stderr unless the program configured logging for it."""
    if logger.handlers or logging.getLogger().handlers:
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except ImportError:
        return installed_version("triton")


def _clear_loaded_wrappers() -> None:
    """Forget wrapper modules Inductor already imported in this process.

    Inductor keeps imported wrappers by the hash of their text; a graph compiled again after
    ``enable()`` would reuse the module (and its kernels) without calling the hook.
    """
    try:
        from torch._inductor.codecache import PyCodeCache

        PyCodeCache.cache_clear()
    except Exception as exc:  # noqa: BLE001 - an internal API: not having it only means less coverage
        logger.debug("kernelopt: could not clear Inductor's module cache: %s", exc)
