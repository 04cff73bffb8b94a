"""Gate 1's sm_90 compiles, remembered across candidates, kernels and runs.

One entry per unit of a compile (one launch config of one kernel module, or the count of its
configs), keyed by the module's source hash, the kernel's name, the unit (config index or launch
plan), the target, and what else decides the outcome: the Triton and torch versions, the ``TRITON_*``
settings and this cache's format. Entries live in the user cache folder
(:mod:`kernelopt_core.measure.cache_dir`, kind ``sm90-compile``) and are written atomically, so
processes compiling at once at worst compile the same unit twice and write the same entry.

Only what the candidate decides is kept: a config that compiled to a cubin, and a failure of the
candidate's own making. An outcome the machine may have caused (ptxas missing, memory or disk
running out, a crash or a timeout, which never reach here) is compiled again next time.
Imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from typing import Any

from ..measure.cache_dir import cache_file, key_of, read_json, write_json
from .sm90_compile import SM90_TARGET

CACHE_KIND = "sm90-compile"
FORMAT = 1  # bump when what a unit's entry holds changes
# Words in an error that point at the machine or its installed packages rather than the candidate:
# such outcomes are not kept.
_MACHINE_TROUBLE = ("memoryerror", "out of memory", "no space left", "resource temporarily unavailable",
                    "killed", "timeout", "timed out", "broken pipe", "importerror", "modulenotfounderror")
# Triton settings that only move files around, and so do not change what a compile yields.
_IGNORED_SETTINGS = ("TRITON_CACHE_DIR", "TRITON_CACHE_MANAGER", "TRITON_INTERPRET", "TRITON_HOME",
                     "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def toolchain_identity() -> dict[str, Any]:
    """What besides the source decides a compile's outcome, read without importing torch or triton."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("TRITON_") and k not in _IGNORED_SETTINGS}
    return {"format": FORMAT, "target": list(SM90_TARGET), "triton": _version("triton"), "torch": _version("torch"),
            "settings": dict(sorted(settings.items()))}


def keepable(answer: dict[str, Any]) -> bool:
    """Whether a compile unit's answer is the candidate's own doing (and so the same next time)."""
    failure = answer.get("failure")
    if isinstance(failure, dict):  # the module as a whole ("start" and "crash" are the machine's)
        return failure.get("stage") in ("import", "config") and not _machine_trouble(failure.get("error"))
    config = answer.get("config")
    if config is None:
        return isinstance(answer.get("total"), int)  # a count
    if not isinstance(config, dict):
        return False
    if config.get("ok"):
        return config.get("stage") == "cubin"  # "ptx" with ok: ptxas was missing on this machine
    return config.get("stage") in ("config", "frontend", "import") and not _machine_trouble(config.get("error"))


def _machine_trouble(error: Any) -> bool:
    text = str(error or "").lower()
    return any(word in text for word in _MACHINE_TROUBLE)


@dataclass
class CompileCache:
    """Compile units' answers on disk (``None`` toolchain: read it from this environment)."""

    toolchain: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.toolchain is None:
            self.toolchain = toolchain_identity()

    def key(self, kernel_name: str, source: str, unit: dict[str, Any]) -> str:
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        return key_of(self.toolchain, kernel_name, digest, unit)

    def get(self, kernel_name: str, source: str, unit: dict[str, Any]) -> dict[str, Any] | None:
        value = read_json(cache_file(CACHE_KIND, self.key(kernel_name, source, unit)))
        return value if isinstance(value, dict) and keepable(value) else None

    def put(self, kernel_name: str, source: str, unit: dict[str, Any], answer: dict[str, Any]) -> bool:
        """Keep ``answer`` if it is the candidate's own doing; True when kept."""
        if not keepable(answer):
            return False
        try:
            write_json(cache_file(CACHE_KIND, self.key(kernel_name, source, unit)), answer)
        except OSError:
            return False  # a cache that cannot be written is only a miss next time
        return True


__all__ = ["CACHE_KIND", "CompileCache", "keepable", "toolchain_identity"]
