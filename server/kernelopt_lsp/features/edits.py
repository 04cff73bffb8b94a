"""Edits and undo: Show diff of a run, Apply its optimized kernel (recorded in the accepted-kernel
store, or put into the file as one undoable workspace edit, only when the user asks), and Remove
an accepted entry again. The client owns the undo of an edit."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..client import EditorClient
from ..commands import CommandError, register_command
from ..context import Republish
from ..kernel_edit import KernelEditError, kernel_source_replacement, workspace_edit
from ..lenses import CMD_APPLY, CMD_REMOVE_ACCEPTED, CMD_SHOW_DIFF
from ..results import ResultStore, RunRecord, find_run_dir, load_run
from ..uris import path_uri, uri_path
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class EditsContext:
    client: EditorClient
    workspace: ProjectWorkspace  # the open documents, and where runs and the accepted store are
    views: DumpViews
    user_kernels: UserKernelFiles
    results: ResultStore  # the runs the server knows
    diagnostics: Republish


class KernelEdits:
    def __init__(self, ctx: EditsContext) -> None:
        self.ctx = ctx

    def find_run(self, run_id: Any) -> RunRecord:
        if not isinstance(run_id, str) or not run_id:
            raise CommandError("expected one argument {runId}")
        run = self.ctx.results.run(run_id)
        if run is not None:
            return run
        run_dir = find_run_dir(run_id, [*self.ctx.workspace.roots(), os.getcwd()])
        if run_dir is None:
            raise CommandError(f"no run {run_id} (looked in .kernelopt/runs/ of the workspace)")
        try:
            run = load_run(run_dir)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.ctx.results.add_run(run)
        return run

    async def show_diff(self, argument: Any) -> dict[str, Any]:
        run = self.find_run(argument.get("runId") if isinstance(argument, dict) else None)
        if not run.has_diff():
            raise CommandError(f"run {run.run_id} has no diff ({run.decision}: {run.reason or 'no result'})")
        await self.ctx.client.show_file(run.diff_path)
        return {"diffPath": run.diff_path, "originalUri": path_uri(run.original_kernel_path),
                "optimizedUri": path_uri(run.optimized_kernel_path)}

    async def apply(self, argument: Any) -> dict[str, Any]:
        if not isinstance(argument, dict):
            raise CommandError("expected one argument {runId, mode?}")
        run = self.find_run(argument.get("runId"))
        user = self.ctx.user_kernels.is_user_run(run)  # a project's own kernel: applied to its file
        mode = argument.get("mode") or ("edit" if user else "store")
        if mode not in ("store", "edit"):
            raise CommandError(f"mode must be 'store' or 'edit', got {mode!r}")
        if user and mode == "store":
            raise CommandError(f"{run.kernel} is the project's own kernel: apply it to its file (mode 'edit')")
        if run.optimized_source is None:
            raise CommandError(f"run {run.run_id} has no optimized kernel to apply ({run.decision})")
        if mode == "store":
            return self.record_accepted(run)
        return await self.apply_edit(run, user)

    def record_accepted(self, run: RunRecord) -> dict[str, Any]:
        try:
            from kernelopt_core.accepted import (
                AcceptedStore,
                AcceptedStoreError,
                entry_from_cascade,
                entry_from_run,
            )
        except ImportError:
            raise CommandError("the accepted-kernel store is not available in this install; "
                               "use mode 'edit' to put the kernel into the dump") from None
        store_dir = self.ctx.workspace.accepted_store_dir(run.graph_path)
        try:
            try:
                entry = entry_from_run(run.run_dir)
            except AcceptedStoreError:
                # The run's result.json may name its kernels without their sources: build the entry
                # from what the server read (optimized_kernel.py) and the dump on disk.
                from kernelopt_core.artifacts import parse_output_code

                cascade = run.result.get("cascade") if isinstance(run.result.get("cascade"), dict) else None
                entry = entry_from_cascade(parse_output_code(run.graph_path), run.kernel, run.optimized_source or "",
                                           cascade, run_id=run.run_id)
            entry_id = AcceptedStore(store_dir).add(entry)
        except Exception as exc:  # noqa: BLE001 - the store's own errors, in words
            raise CommandError(f"could not record run {run.run_id}: {exc}") from None
        self.ctx.client.message(f"recorded the optimized {run.kernel} as accepted ({entry_id})")
        self.ctx.diagnostics.schedule(path_uri(run.graph_path), 0.0)
        return {"entryId": entry_id, "mode": "store"}

    async def apply_edit(self, run: RunRecord, user_kernel: bool) -> dict[str, Any]:
        """The optimized kernel into its file, against the text the client holds: one undoable edit."""
        uri = path_uri(run.graph_path)
        doc = self.ctx.workspace.document(uri)
        if doc is not None:
            text, version = doc.source, doc.version
        else:
            try:
                with open(run.graph_path, encoding="utf-8") as handle:
                    text, version = handle.read(), None
            except OSError as exc:
                raise CommandError(f"cannot read {run.graph_path}: {exc.strerror}") from None
        document_changes = self.ctx.client.supports_document_changes()
        extra: dict[str, Any] = {}
        if user_kernel:
            text_edits = self.ctx.user_kernels.text_edits(run, text)
            if document_changes:
                edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=text_edits)])
            else:
                edit = types.WorkspaceEdit(changes={uri: text_edits})
            extra["edits"] = len(text_edits)
        else:
            state = await self.ctx.views.state(uri)
            graph = state.graph if state is not None else None
            kernel = graph.kernel(run.kernel) if graph is not None else None
            if kernel is None:
                raise CommandError(f"kernel {run.kernel} is not in {run.graph_path} as it stands now")
            try:
                replacement = kernel_source_replacement(text, kernel, run.optimized_source or "")
            except KernelEditError as exc:
                raise CommandError(str(exc)) from None
            edit = workspace_edit(uri, version, replacement, document_changes)
        answer = await self.ctx.client.apply_edit(edit, f"KernelOPT: apply optimized {run.kernel} (run {run.run_id})")
        applied = bool(answer and answer.applied)
        if applied:
            self.ctx.diagnostics.schedule(uri, 0.0)
        return {"applied": applied, "mode": "edit", **extra,
                "failureReason": getattr(answer, "failure_reason", None) if not applied else None}

    async def remove_accepted(self, argument: Any) -> dict[str, Any]:
        entry_id = argument.get("entryId") if isinstance(argument, dict) else None
        if not isinstance(entry_id, str) or not entry_id:
            raise CommandError("expected one argument {entryId}")
        try:
            from kernelopt_core.accepted import AcceptedStore
        except ImportError:
            raise CommandError("the accepted-kernel store is not available in this install") from None
        dump_path = uri_path(argument.get("uri") or "") if isinstance(argument.get("uri"), str) else None
        roots = self.ctx.workspace.roots()
        if dump_path:
            store_dir = self.ctx.workspace.accepted_store_dir(dump_path)
        else:
            store_dir = None if os.environ.get("KERNELOPT_ACCEPTED_DIR") or not roots else \
                os.path.join(roots[0], ".kernelopt", "accepted")
        try:
            AcceptedStore(store_dir).remove(entry_id)
        except Exception as exc:  # noqa: BLE001
            raise CommandError(f"could not remove {entry_id}: {exc}") from None
        if dump_path:
            self.ctx.diagnostics.schedule(path_uri(dump_path), 0.0)
        return {"removed": entry_id}


def register(server: LanguageServer, ctx: EditsContext) -> KernelEdits:
    edits = KernelEdits(ctx)
    for command_id, command in ((CMD_SHOW_DIFF, edits.show_diff), (CMD_APPLY, edits.apply),
                                (CMD_REMOVE_ACCEPTED, edits.remove_accepted)):
        register_command(server, ctx.client, command_id, command)
    return edits
