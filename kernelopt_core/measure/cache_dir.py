"""The user cache folder for measurements (ncu results, device peaks). No torch here.

``$KERNELOPT_CACHE_DIR`` wins; otherwise ``$XDG_CACHE_HOME/kernelopt`` or ``~/.cache/kernelopt``.
Entries are JSON, written atomically (a temporary file renamed into place), so two processes
measuring at once never leave half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..atomic_files import write_json_atomic


def cache_root() -> Path:
    explicit = os.environ.get("KERNELOPT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelopt"


def cache_file(kind: str, key: str) -> Path:
    return cache_root() / kind / f"{key}.json"


def key_of(*parts: Any) -> str:
    """A stable file-name key for JSON-able parts."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def read_json(path: Path) -> Any | None:
    """The cached value, or None when missing or unreadable (a bad entry is a miss, not a crash)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    """Replace a cache entry atomically (no fsync: a cache lost in a power cut is only a miss)."""
    write_json_atomic(path, value, durable=False)
