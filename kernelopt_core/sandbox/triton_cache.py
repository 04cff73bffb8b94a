"""Triton's compile cache for a candidate process: read the user's cache, write only to scratch.

A candidate process may not write outside its scratch folder, yet recompiling every kernel of a
graph (and Triton's own launcher stubs) in every candidate process would cost seconds. Triton
looks its cache manager up in ``TRITON_CACHE_MANAGER`` ("module:Class"); this one reads entries
from the shared cache (``KERNELOPT_SHARED_TRITON_CACHE``, read-only) and writes new ones into
``TRITON_CACHE_DIR`` (the scratch folder). A candidate therefore cannot plant a compiled kernel
that a later process would load. Imported only inside candidate processes (it imports triton).
"""

from __future__ import annotations

import os

from triton.runtime.cache import FileCacheManager

SHARED_CACHE_ENV = "KERNELOPT_SHARED_TRITON_CACHE"


class ReadThroughCacheManager(FileCacheManager):
    cache_dir: str  # Triton's manager sets it; get_group swaps it for a moment
    def __init__(self, key: str, override: bool = False, dump: bool = False):
        super().__init__(key, override=override, dump=dump)
        shared = os.environ.get(SHARED_CACHE_ENV, "")
        self.shared_dir = os.path.join(shared, key) if shared and not (override or dump) else ""

    def _shared_path(self, filename: str) -> str | None:
        if not self.shared_dir:
            return None
        path = os.path.join(self.shared_dir, filename)
        return path if os.path.exists(path) else None

    def get_file(self, filename: str) -> str | None:
        return super().get_file(filename) or self._shared_path(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        group = super().get_group(filename)
        if group is not None or not self.shared_dir:
            return group
        saved: str = self.cache_dir
        self.cache_dir = self.shared_dir
        try:
            return super().get_group(filename)
        finally:
            self.cache_dir = saved
