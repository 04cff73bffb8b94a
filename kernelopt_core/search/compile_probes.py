"""The rewrite families' compile probes: registers, spills and shared memory of variants compiled for sm_90.

Each probe compiles a plain kernel module's first launch config on gate 1's compile pool
(:func:`kernelopt_core.gates.ptx_compile.shared_compiler`), all of a family's variants at once.
Answers are journaled, so a resumed run proposes the same variants without compiling again (and
the pool's disk cache answers a source any earlier run compiled).
"""

from __future__ import annotations

from concurrent.futures import CancelledError
from typing import Any, Protocol

from .rewrites.kernel_source import KernelSourceError, parse_kernel_module, source_digest

PROBE_TIMEOUT_S = 300.0


class ProbeJournal(Protocol):
    def lookup(self, kind: str, key: str) -> dict[str, Any] | None: ...

    def append(self, kind: str, key: str | None = None, **data: Any) -> dict[str, Any]: ...

    def record(self, kind: str, **data: Any) -> dict[str, Any]: ...


def probe_sources(journal: ProbeJournal, sources: list[str]) -> list[dict[str, Any] | None]:
    """``{"regs", "spills", "shared_bytes"}`` of each source's first launch config (None when it does
    not compile), in order; the sources not yet journaled compile concurrently."""
    from ..gates import ptx_compile

    answers: dict[str, dict[str, Any] | None] = {}
    pending: dict[str, Any] = {}
    for source in sources:
        key = source_digest(source)
        if key in answers or key in pending:
            continue
        entry = journal.lookup("compile_probe", key)
        if entry is not None:
            answers[key] = entry.get("value")
            continue
        try:
            name = parse_kernel_module(source).name
            pending[key] = ptx_compile.shared_compiler().submit(name, source, timeout_s=PROBE_TIMEOUT_S, max_configs=1)
        except (KernelSourceError, OSError, RuntimeError) as exc:
            journal.record("note", message=f"compile probe unavailable: {exc}")
            answers[key] = None
            journal.append("compile_probe", key, value=None)
    for key, future in pending.items():
        value: dict[str, Any] | None = None
        try:
            value = _resources(future.result())
        except (OSError, RuntimeError, CancelledError) as exc:  # cancelled: the pool closed (at exit)
            journal.record("note", message=f"compile probe unavailable: {exc}")
        answers[key] = value
        journal.append("compile_probe", key, value=value)
    return [answers[source_digest(source)] for source in sources]


def _resources(result: dict[str, Any]) -> dict[str, Any] | None:
    first = (result.get("configs") or [None])[0] if result.get("ok") else None
    if not isinstance(first, dict):
        return None
    return {"regs": first.get("n_regs"), "spills": first.get("n_spills"), "shared_bytes": first.get("shared_bytes")}


__all__ = ["probe_sources"]
