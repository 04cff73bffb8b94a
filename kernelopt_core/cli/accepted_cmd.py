"""``kernelopt accepted``: list, show, add and remove accepted kernels.

    kernelopt accepted [--json]                   list the store
    kernelopt accepted show ID [--json]           one entry, with the diff of its kernel
    kernelopt accepted remove ID                  delete an entry
    kernelopt accepted add RUN_DIR [--kernel K]   record an optimize run's accepted kernel(s)
    kernelopt accepted add --from-verify VERIFY.json --candidate FILE [--kernel K] [--graph PATH]

Every form takes ``--store DIR`` (default: the project's ``.kernelopt/accepted``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .common import console, err_console, fail, print_json


def register(sub: Any) -> None:
    parser = sub.add_parser("accepted", help="list, show, add or remove accepted kernels (the deploy store)")
    parser.add_argument("--store", help="the store folder (default: .kernelopt/accepted of the project)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser("show", help="one entry and the diff of its kernel")
    show.add_argument("id", help="entry id (or a unique prefix)")
    remove = actions.add_parser("remove", help="delete an entry")
    remove.add_argument("id", help="entry id (or a unique prefix)")
    add = actions.add_parser("add", help="record accepted kernels from an optimize run or a verify result")
    add.add_argument("run_dir", nargs="?", help="an optimize run folder (.kernelopt/runs/<id>)")
    add.add_argument("--kernel", help="only this kernel")
    add.add_argument("--from-verify", metavar="JSON", help="a `kernelopt verify --json` result")
    add.add_argument("--candidate", metavar="FILE", help="with --from-verify: the verified kernel module source")
    add.add_argument("--graph", metavar="PATH", help="with --from-verify: the dump (default: the result's graph_path)")
    for child in (show, remove, add):
        child.add_argument("--store", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        child.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..accepted import AcceptedStore, AcceptedStoreError

    store = AcceptedStore(args.store)
    action = getattr(args, "action", None)
    try:
        if action == "remove":
            removed = store.remove(args.id)
            if args.json:
                print_json({"removed": removed, "store": store.root})
            else:
                console.print(f"removed accepted entry {removed} from {escape(store.root)}", soft_wrap=True)
            return 0
        if action == "show":
            return _show(store, args)
        if action == "add":
            return _add(store, args)
        return _list(store, args)
    except AcceptedStoreError as exc:
        return fail(escape(str(exc)))


def _list(store: Any, args: argparse.Namespace) -> int:
    from ..accepted import StoreUnreadable

    try:
        entries, problems = store.scan()
    except StoreUnreadable as exc:
        return fail(escape(str(exc)))
    if args.json:
        print_json({"store": store.root, "entries": [_entry_json(e) for e in entries],
                    "problems": [{"path": p.path, "problem": p.problem} for p in problems]})
        return 0
    if not entries:
        console.print(f"no accepted kernels in {escape(store.root)}", soft_wrap=True)
    else:
        columns = ("id", "kernel", "speedup", "95% CI", "torch", "triton", "gpu", "created", "run")
        rows = [(e.id, e.kernel_name, f"{e.speedup:.3f}x" if e.speedup is not None else "-",
                 f"{e.ci[0]:.3f}-{e.ci[1]:.3f}" if e.ci else "-", e.torch_version, e.triton_version,
                 e.gpu, e.created, e.run_id or "-") for e in entries]
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in columns:
            table.add_column(column, no_wrap=True)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(f"[bold]{len(entries)}[/bold] accepted kernel(s) in {escape(store.root)}", soft_wrap=True)
        # ids, kernel names and run ids are what users copy: never cut them (rich cannot widen one print)
        needed = sum(max(len(c) for c in cells) + 2 for cells in zip(columns, *rows, strict=True))
        (console if console.width >= needed else Console(width=needed, highlight=False)).print(table)
    for problem in problems:
        err_console.print(f"[yellow]skipped[/yellow] {escape(str(problem))}", soft_wrap=True)
    return 0


def _entry_json(entry: Any, full: bool = False) -> dict[str, Any]:
    data = entry.to_json()
    if not full:  # the listing stays small; `show` has the sources
        data.pop("accepted_source", None)
        data.pop("original_source", None)
        data.pop("gates", None)
        data["gates_passed"] = entry.gates_passed
    return data


def _show(store: Any, args: argparse.Namespace) -> int:
    from ..accepted import AcceptedStoreError

    entry = store.get(args.id)
    if entry is None:
        raise AcceptedStoreError(f"no accepted entry {args.id} in {store.root}")
    diff = "".join(difflib.unified_diff(
        (entry.original_source or "").splitlines(keepends=True), entry.accepted_source.splitlines(keepends=True),
        fromfile=f"a/{entry.kernel_name}.py (Inductor)", tofile=f"b/{entry.kernel_name}.py (accepted {entry.id})"))
    if args.json:
        print_json({**_entry_json(entry, full=True), "diff": diff})
        return 0
    console.print(escape(entry.summary()), soft_wrap=True)
    console.print(f"  replaces source {entry.original_hash[:16]}… of {escape(entry.graph_path or 'unknown graph')}",
                  soft_wrap=True)
    gates = entry.gates or {}
    for verdict in gates.get("gates", []):
        mark = "[green]pass[/green]" if verdict.get("passed") else "[red]fail[/red]"
        console.print(f"  gate {verdict.get('gate')} {escape(str(verdict.get('name')))}: {mark} "
                      f"{escape(str(verdict.get('reason', '')))}", soft_wrap=True)
    if diff:
        console.print(escape(diff), soft_wrap=True, highlight=False)
    else:
        console.print("  (the original source was not recorded: no diff)")
    return 0


def _add(store: Any, args: argparse.Namespace) -> int:
    from ..accepted import AcceptedStoreError, entries_from_run

    if args.from_verify:
        entries = [_entry_from_verify(args)]
    elif args.run_dir:
        entries = entries_from_run(args.run_dir)
        if args.kernel:
            entries = [e for e in entries if e.kernel_name == args.kernel]
            if not entries:
                raise AcceptedStoreError(f"{args.run_dir}: the run accepted no kernel named {args.kernel}")
    else:
        raise AcceptedStoreError("give an optimize run folder, or --from-verify JSON --candidate FILE")
    ids = [store.add(entry) for entry in entries]
    if args.json:
        print_json({"added": ids, "store": store.root})
    else:
        for entry in entries:
            console.print(f"accepted {escape(entry.summary())}", soft_wrap=True)
        console.print(f"store: {escape(store.root)}", soft_wrap=True)
    return 0


def _entry_from_verify(args: argparse.Namespace) -> Any:
    from ..accepted import AcceptedStoreError, entry_from_cascade
    from ..artifacts import DumpError, parse_output_code

    try:
        with open(args.from_verify, encoding="utf-8") as handle:
            result = json.load(handle)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AcceptedStoreError(f"{args.from_verify}: cannot read the verify result ({exc})") from None
    if isinstance(result, dict) and isinstance(result.get("cascade"), dict):
        result = {**result["cascade"], **{k: v for k, v in result.items() if k != "cascade"}}
    if not isinstance(result, dict) or "accepted" not in result:
        raise AcceptedStoreError(f"{args.from_verify}: not a verify result (no 'accepted' field)")
    graph_path = args.graph or result.get("graph_path")
    if not graph_path:
        raise AcceptedStoreError(f"{args.from_verify}: no graph_path in the result; pass --graph")
    try:
        graph = parse_output_code(graph_path)
    except DumpError as exc:
        raise AcceptedStoreError(str(exc)) from None
    kernel = args.kernel or _single(result.get("kernels"), args.from_verify)
    source = _candidate_source(args, result, kernel)
    return entry_from_cascade(graph, kernel, source, result,
                              run_id=os.path.splitext(os.path.basename(args.from_verify))[0])


def _single(kernels: Any, where: str) -> str:
    from ..accepted import AcceptedStoreError

    if isinstance(kernels, list) and len(kernels) == 1 and isinstance(kernels[0], str):
        return kernels[0]
    raise AcceptedStoreError(f"{where}: say which kernel with --kernel (the result names {kernels!r})")


def _candidate_source(args: argparse.Namespace, result: dict[str, Any], kernel: str) -> str:
    from ..accepted import AcceptedStoreError

    if args.candidate:
        try:
            with open(args.candidate, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise AcceptedStoreError(f"{args.candidate}: cannot read the candidate ({exc})") from None
    candidates = result.get("candidates")
    if isinstance(candidates, dict) and isinstance(candidates.get(kernel), str):
        return candidates[kernel]
    raise AcceptedStoreError(f"{args.from_verify}: the result does not hold the candidate source; pass --candidate FILE")
