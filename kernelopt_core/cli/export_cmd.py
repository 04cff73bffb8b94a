"""``kernelopt export RUN_OR_ENTRY --out DIR``: the re-stitched graph and a loader, for shipping.

RUN_OR_ENTRY is an optimize run folder, a run id under ``.kernelopt/runs``, or an accepted-store
entry id. DIR receives ``output_code.py`` (the original dump with the accepted kernels stitched
in), ``kernelopt_loader.py``, ``manifest.json`` and ``changes.diff``. The dump is only read.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from .common import console, fail, print_json


def register(sub: Any) -> None:
    parser = sub.add_parser("export", help="write a graph with its accepted kernels and a loader module")
    parser.add_argument("target", metavar="RUN_OR_ENTRY", help="an optimize run folder or id, or an accepted entry id")
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--graph", help="the dump to stitch into (default: the one the run or entry recorded)")
    parser.add_argument("--store", help="the accepted-kernel store (default: .kernelopt/accepted of the project)")
    parser.add_argument("--runs", default=".kernelopt/runs", help="where run ids are looked up")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..accepted import AcceptedStore, AcceptedStoreError
    from ..deploy.export import ExportError, export_graph, resolve_entries

    try:
        entries = resolve_entries(args.target, AcceptedStore(args.store), args.runs)
        result = export_graph(entries, args.out, args.graph)
    except (ExportError, AcceptedStoreError) as exc:
        return fail(escape(str(exc)))
    if args.json:
        print_json(result.to_json())
        return 0
    console.print(f"exported {len(result.kernels)} accepted kernel(s) of {escape(result.graph_path)}", soft_wrap=True)
    for name in result.kernels:
        console.print(f"  {name}", soft_wrap=True)
    console.print(f"  -> {escape(result.output_code)}\n  -> {escape(result.loader)} "
                  "(kernelopt_loader.load(), then kernelopt_loader.call(graph, inputs))", soft_wrap=True)
    return 0
