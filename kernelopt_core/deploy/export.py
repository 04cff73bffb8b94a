"""Export a graph with its accepted kernels: a re-stitched ``output_code.py`` plus a loader.

For users who ship a compiled graph without recompiling. The source is an optimize run (its
``result.json``) or an accepted-store entry; the original dump is only read. Pure Python.
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..accepted import AcceptedEntry, AcceptedStore, AcceptedStoreError, entries_from_run
from ..artifacts import CompiledGraph, DumpError, parse_output_code, read_dump_text, source_hash
from ..gates.restitch import RestitchError, restitch, unified_diff
from ..module_files import import_module_file

LOADER_NAME = "kernelopt_loader.py"


class ExportError(Exception):
    """What cannot be exported, and why."""


@dataclass
class ExportResult:
    out_dir: str
    output_code: str
    loader: str
    manifest: str
    diff: str
    graph_path: str
    kernels: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def resolve_entries(target: str, store: AcceptedStore | None = None, runs_root: str = ".kernelopt/runs") -> list[AcceptedEntry]:
    """The entries ``target`` names: a run folder, a run id under ``runs_root``, or a store entry id."""
    if os.path.isfile(os.path.join(target, "result.json")):
        return entries_from_run(target)
    run_dir = os.path.join(runs_root, target)
    if os.path.isfile(os.path.join(run_dir, "result.json")):
        return entries_from_run(run_dir)
    store = store or AcceptedStore()
    try:
        entry = store.get(target)
    except AcceptedStoreError as exc:
        raise ExportError(str(exc)) from None
    if entry is None:
        raise ExportError(f"{target!r} is neither a run folder, a run id in {runs_root}, nor an entry in {store.root}")
    return [entry]


def export_graph(entries: list[AcceptedEntry], out_dir: str, graph_path: str | None = None) -> ExportResult:
    """Write the graph with ``entries`` stitched in, a loader and a manifest into ``out_dir``."""
    if not entries:
        raise ExportError("nothing to export: no accepted kernels")
    path = graph_path or entries[0].graph_path
    if not path:
        raise ExportError(f"entry {entries[0].id} does not record its graph; pass the dump with --graph")
    try:
        text = read_dump_text(path)
        graph = parse_output_code(path, text)
    except DumpError as exc:
        raise ExportError(f"the graph cannot be read: {exc}") from None
    candidates = _candidates_by_hash(graph, entries)
    out_dir = os.path.abspath(out_dir)
    if out_dir == os.path.dirname(os.path.abspath(path)):
        raise ExportError("refusing to export into the folder of the original dump (it is never modified)")
    try:
        new_text = restitch(graph, candidates, text)
    except RestitchError as exc:
        raise ExportError(str(exc)) from None
    os.makedirs(out_dir, exist_ok=True)
    output_code = os.path.join(out_dir, "output_code.py")
    _write(output_code, new_text)
    diff = unified_diff(text, new_text, os.path.abspath(path))
    diff_path = os.path.join(out_dir, "changes.diff")
    _write(diff_path, diff)
    manifest = {
        "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source_graph": os.path.abspath(path),
        "source_graph_hash": graph.text_hash,
        "output_code_hash": source_hash(new_text),
        "device": graph.device,
        "torch_version": entries[0].torch_version,
        "triton_version": entries[0].triton_version,
        "kernels": [{"kernel": name, "entry": e.id, "original_hash": e.original_hash,
                     "accepted_hash": e.accepted_hash, "speedup": e.speedup, "ci": list(e.ci) if e.ci else None,
                     "run_id": e.run_id, "gpu": e.gpu}
                    for name, e in _named(graph, entries)],
        "inputs": [spec.__dict__ for spec in graph.inputs],
    }
    manifest_path = os.path.join(out_dir, "manifest.json")
    _write(manifest_path, json.dumps(manifest, indent=1, default=str) + "\n")
    loader_path = os.path.join(out_dir, LOADER_NAME)
    _write(loader_path, loader_source())
    return ExportResult(out_dir=out_dir, output_code=output_code, loader=loader_path, manifest=manifest_path,
                        diff=diff_path, graph_path=os.path.abspath(path), kernels=sorted(candidates),
                        entries=[e.id for e in entries])


def _candidates_by_hash(graph: CompiledGraph, entries: list[AcceptedEntry]) -> dict[str, str]:
    """Kernel name -> accepted source, matching each entry to its kernel by exact source hash."""
    return {name: entry.accepted_source for name, entry in _named(graph, entries)}


def _named(graph: CompiledGraph, entries: list[AcceptedEntry]) -> list[tuple[str, AcceptedEntry]]:
    by_hash = {k.source_hash: k.name for k in graph.kernels}
    pairs = []
    for entry in entries:
        name = by_hash.get(entry.original_hash)
        if name is None:
            raise ExportError(f"entry {entry.id} ({entry.kernel_name}) replaces a kernel that is not in {graph.path} "
                              "(no kernel there has its source hash; the dump was recompiled or edited?)")
        pairs.append((name, entry))
    return pairs


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


LOADER_SOURCE = '''"""Load the exported graph (output_code.py beside this file) and call it. Written by kernelopt export.

    import kernelopt_loader
    graph = kernelopt_loader.load()          # imports output_code.py (compiles its kernels)
    outputs = kernelopt_loader.call(graph, [arg0, arg1, ...])   # the graph's flat inputs
    inputs = kernelopt_loader.example_inputs(graph)              # random inputs of the right shapes

The graph was verified with the torch/triton versions in manifest.json; load() warns on others.
"""

import importlib.util
import json
import os
import sys
import warnings
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))


# <import_module_file>


def manifest():
    with open(os.path.join(HERE, "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def load(module_name=None):
    info = manifest()
    import torch

    if torch.__version__.split("+")[0] != str(info.get("torch_version", "")).split("+")[0]:
        warnings.warn(f"this graph was verified with torch {info.get('torch_version')}, "
                      f"this is torch {torch.__version__}", stacklevel=2)
    if info.get("device") == "cpu":
        try:  # graphs compiled for the CPU Triton backend need its shims
            from kernelopt_core.backends import cpu_triton

            cpu_triton.activate()
        except ImportError:
            pass
    name = module_name or "kernelopt_exported_" + str(info.get("output_code_hash", "graph"))[:16]
    return import_module_file(os.path.join(HERE, "output_code.py"), name)


def call(graph, inputs):
    """Run the graph on its flat inputs (the list is copied: Inductor's call() empties it)."""
    return graph.call(list(inputs))


def example_inputs(graph, seed=0):
    import torch

    torch.manual_seed(seed)
    return list(graph.get_args())
'''


def loader_source() -> str:
    """The loader module. It runs without KernelOPT installed, so it carries its own copy of
    :func:`kernelopt_core.module_files.import_module_file`, taken from that function's source."""
    return LOADER_SOURCE.replace("# <import_module_file>\n", inspect.getsource(import_module_file))
