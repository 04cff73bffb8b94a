"""Find compiled graphs in a folder: TORCH_COMPILE_DEBUG dumps and Inductor cache-dir files.

:class:`DumpIndex` is incremental: a watcher feeds it single file events (``update``/``remove``)
and it re-parses only what changed. Graphs are grouped per wrapper; the debug ``output_code.py``
and its identical cache-dir twin count once (the debug copy wins, it has ``fx_graph_runnable.py``).
"""

from __future__ import annotations

import gc
import os
import re
from dataclasses import dataclass, field

from .model import CompiledGraph, DumpError
from .parse import looks_like_kernel_file, looks_like_wrapper, parse_output_code, read_dump_text

# Inductor cache files: <cache>/<2 chars>/c<hash>.py
_CACHE_FILE = re.compile(r"^c[a-z0-9]{20,}\.py$")
SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".kernelopt", ".mypy_cache", ".ruff_cache"})


@dataclass
class DumpProblem:
    path: str
    problem: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line + 1}" if self.line is not None else self.path
        return f"{where}: {self.problem}"


@dataclass
class _Entry:
    stamp: tuple[float, int]
    graph: CompiledGraph | None = None
    problem: DumpProblem | None = None
    is_kernel_file: bool = False


def is_candidate_dump(path: str) -> bool:
    """Could this path be a wrapper or kernel file? (cheap; by name only)"""
    base = os.path.basename(path)
    if base == "output_code.py":
        return True
    parent = os.path.basename(os.path.dirname(path))
    return bool(_CACHE_FILE.match(base)) and len(parent) == 2


@dataclass
class DumpIndex:
    """Every graph and problem under some roots, kept up to date file by file."""

    entries: dict[str, _Entry] = field(default_factory=dict)

    # --- feeding ---------------------------------------------------------------------------

    def scan(self, root: str) -> None:
        """Walk a folder (or take one file) and index every dump in it."""
        if os.path.isfile(root):
            self.update(root)
            return
        # Parsing allocates millions of short-lived, acyclic AST nodes; the cyclic GC's passes over
        # them cost ~30% of a large scan and free nothing, so pause it for the scan.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._scan_folder(root)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _scan_folder(self, root: str) -> None:
        seen: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for filename in filenames:
                path = os.path.join(dirpath, filename)
                if is_candidate_dump(path):
                    seen.add(os.path.abspath(path))
                    self.update(path)
        prefix = os.path.abspath(root) + os.sep
        for path in [p for p in self.entries if p.startswith(prefix) and p not in seen]:
            del self.entries[path]

    def update(self, path: str) -> bool:
        """(Re-)index one file. Returns True if what the index holds for it changed."""
        path = os.path.abspath(path)
        try:
            st = os.stat(path)
        except OSError as exc:
            if not os.path.lexists(path):
                return self.remove(path)
            # It is there but cannot be followed (a dangling link, a permission problem): say so.
            reason = "broken symbolic link" if os.path.islink(path) else (exc.strerror or str(exc))
            self.entries[path] = _Entry((0.0, -1), problem=DumpProblem(path, f"cannot read file: {reason}"))
            return True
        stamp = (st.st_mtime, st.st_size)
        old = self.entries.get(path)
        if old is not None and old.stamp == stamp:
            return False
        self.entries[path] = self._read(path, stamp)
        return True

    def remove(self, path: str) -> bool:
        return self.entries.pop(os.path.abspath(path), None) is not None

    def _read(self, path: str, stamp: tuple[float, int]) -> _Entry:
        try:
            text = read_dump_text(path)
        except DumpError as exc:
            return _Entry(stamp, problem=DumpProblem(path, exc.problem, exc.line))
        if os.path.basename(path) != "output_code.py":
            if looks_like_kernel_file(text):
                return _Entry(stamp, is_kernel_file=True)
            if not looks_like_wrapper(text):
                return _Entry(stamp)  # some other cache file (e.g. a C++ kernel): not ours
        try:
            graph = parse_output_code(path, text)
        except DumpError as exc:
            return _Entry(stamp, problem=DumpProblem(path, exc.problem, exc.line))
        _attach_debug_files(graph)
        return _Entry(stamp, graph=graph)

    # --- reading ---------------------------------------------------------------------------

    def graphs(self) -> list[CompiledGraph]:
        kernel_files = {os.path.basename(p): p for p, e in self.entries.items() if e.is_kernel_file}
        by_text: dict[str, CompiledGraph] = {}
        for path in sorted(self.entries):
            graph = self.entries[path].graph
            if graph is None:
                continue
            for kernel in graph.kernels:
                if kernel.kernel_path:
                    kernel.kernel_file = kernel_files.get(os.path.basename(kernel.kernel_path))
            twin = by_text.get(graph.text_hash)
            if twin is None or _preference(graph) < _preference(twin):
                by_text[graph.text_hash] = graph
        return sorted(by_text.values(), key=lambda g: g.path)

    def problems(self) -> list[DumpProblem]:
        return [e.problem for _, e in sorted(self.entries.items()) if e.problem is not None]

    def graph_at(self, path: str) -> CompiledGraph | None:
        entry = self.entries.get(os.path.abspath(path))
        return entry.graph if entry else None

    def problem_at(self, path: str) -> DumpProblem | None:
        entry = self.entries.get(os.path.abspath(path))
        return entry.problem if entry else None


def _preference(graph: CompiledGraph) -> int:
    """Which copy of identical wrappers to show: the debug dump, then a cache .debug folder."""
    if f"{os.sep}torch_compile_debug{os.sep}" in graph.path:
        return 0
    if graph.fx_graph_runnable:
        return 1
    return 2


def _attach_debug_files(graph: CompiledGraph) -> None:
    folder = os.path.dirname(graph.path)
    for attr, filename in (("fx_graph_runnable", "fx_graph_runnable.py"), ("ir_post_fusion", "ir_post_fusion.txt")):
        candidate = os.path.join(folder, filename)
        if os.path.isfile(candidate):
            setattr(graph, attr, candidate)


def discover(path: str) -> tuple[list[CompiledGraph], list[DumpProblem]]:
    """One-shot discovery: every graph under ``path`` and every file that could not be read."""
    index = DumpIndex()
    if os.path.isfile(path):
        # A file named explicitly is read whatever its name.
        try:
            graph = parse_output_code(os.path.abspath(path))
        except DumpError as exc:
            return [], [DumpProblem(exc.path, exc.problem, exc.line)]
        _attach_debug_files(graph)
        return [graph], []
    if not os.path.isdir(path):
        return [], [DumpProblem(path, "no such file or folder")]
    index.scan(path)
    return index.graphs(), index.problems()
