"""The corpus problems compiled for the CPU Triton backend, once per test session.

Several test modules need these graphs; a module-level cache (keyed by the session's base temp
folder) makes the compile happen once however many modules ask.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import compile_problems

_COMPILED: dict[str, dict[str, str]] = {}


def compiled_corpus_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = str(tmp_path_factory.getbasetemp())
    if base not in _COMPILED:
        out = Path(base) / "gate-corpus-dumps"
        _COMPILED[base] = compile_problems(out)
    return _COMPILED[base]
