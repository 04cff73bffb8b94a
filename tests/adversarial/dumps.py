"""The corpus problems compiled for the CPU Triton backend, once per test run.

Several test modules, on both pytest-xdist workers, need these graphs. They are compiled into a
folder the workers share, under a lock, and listed in a manifest there, so that each problem
compiles once per run however many modules and workers ask. A module that needs only some
problems passes ``problems`` and the others are not compiled for it.
"""

from __future__ import annotations

import json

import pytest
from conftest import shared_build_dir
from filelock import FileLock

from .corpus import PROBLEMS
from .runner import compile_problems


def compiled_corpus_graphs(tmp_path_factory: pytest.TempPathFactory,
                           problems: tuple[str, ...] = PROBLEMS) -> dict[str, str]:
    root = shared_build_dir(tmp_path_factory) / "gate-corpus-dumps"
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "manifest.json"
    with FileLock(str(root / "manifest.lock")):
        known: dict[str, str] = json.loads(manifest.read_text()) if manifest.is_file() else {}
        missing = tuple(p for p in problems if p not in known)
        if missing:
            known.update(compile_problems(root / "-".join(missing), problems=missing))
            manifest.write_text(json.dumps(known))
    return {p: known[p] for p in problems}
