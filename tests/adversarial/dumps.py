"""The corpus problems compiled for the CPU Triton backend, once per test session.

Several test modules need these graphs; a module-level cache (keyed by the session's base temp
folder) makes each problem compile once however many modules ask. A module that needs only some
problems passes ``problems`` and the others are not compiled for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import PROBLEMS
from .runner import compile_problems

_COMPILED: dict[str, dict[str, str]] = {}


def compiled_corpus_graphs(tmp_path_factory: pytest.TempPathFactory,
                           problems: tuple[str, ...] = PROBLEMS) -> dict[str, str]:
    base = str(tmp_path_factory.getbasetemp())
    known = _COMPILED.setdefault(base, {})
    missing = tuple(p for p in problems if p not in known)
    if missing:
        out = Path(base) / "gate-corpus-dumps" / "-".join(missing)
        known.update(compile_problems(out, problems=missing))
    return {p: known[p] for p in problems}
