"""The editor on the other end: what its capabilities allow, and everything the server sends it.

Features reach the client only through :class:`EditorClient` (never through the server shell),
so what a feature may do to the editor is visible in one small interface.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .uris import path_uri


class EditorClient:
    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self.name = ""  # clientInfo.name from initialize

    # --- what the client can do -----------------------------------------------------------------

    @property
    def caps(self) -> types.ClientCapabilities:
        return self._server.client_capabilities

    def supports_progress(self) -> bool:
        return bool(self.caps.window and self.caps.window.work_done_progress)

    def supports_show_document(self) -> bool:
        return bool(self.caps.window and self.caps.window.show_document and self.caps.window.show_document.support)

    def supports_configuration(self) -> bool:
        return bool(self.caps.workspace and self.caps.workspace.configuration)

    def supports_document_changes(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.workspace_edit and ws.workspace_edit.document_changes)

    def supports_action_literals(self) -> bool:
        td = self.caps.text_document
        return bool(td and td.code_action and td.code_action.code_action_literal_support)

    def supports_lens_refresh(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    def shows_job_status(self) -> bool:
        """Does the client turn kernelopt/jobStatus into its own messages? (Others get showMessage.)

        A client says so with ``capabilities.experimental.kernelopt.jobStatus = true``; the VS Code
        extension is also recognised by the client name VS Code sends."""
        return self._declares("jobStatus")

    def writes_clipboard(self) -> bool:
        """Does the client copy ``kernelopt.server.copyConfig``'s text to the clipboard itself?

        The VS Code extension does (its executeCommand middleware); another client says so with
        ``capabilities.experimental.kernelopt.clipboard = true``. Others get the text shown."""
        return self._declares("clipboard")

    def _declares(self, key: str) -> bool:
        experimental = self.caps.experimental if isinstance(self.caps.experimental, dict) else {}
        declared = experimental.get("kernelopt")
        if isinstance(declared, dict) and declared.get(key) is True:
            return True
        name = self.name.lower()
        return "visual studio code" in name or "vscode" in name

    # --- what the server sends --------------------------------------------------------------------

    def message(self, text: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self._server.window_show_message(types.ShowMessageParams(type=kind, message=f"KernelOPT: {text}"))

    def log(self, text: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self._server.window_log_message(types.LogMessageParams(type=kind, message=text))

    def notify(self, method: str, payload: Any) -> None:
        self._server.protocol.notify(method, payload)

    def publish_diagnostics(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        self._server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))

    def refresh_lenses(self) -> None:
        if self.supports_lens_refresh():
            try:
                self._server.workspace_code_lens_refresh(None)
            except Exception:  # noqa: BLE001 - a refresh is a courtesy
                pass

    async def show_file(self, path: str) -> bool:
        if not self.supports_show_document():
            self.message(f"result written to {path}")
            return False
        try:
            answer = await asyncio.wait_for(self._server.window_show_document_async(
                types.ShowDocumentParams(uri=path_uri(path), take_focus=True)), timeout=10.0)
        except Exception as exc:  # noqa: BLE001
            self.log(f"window/showDocument {path} failed: {exc}", types.MessageType.Warning)
            return False
        return bool(answer and answer.success)

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult | None:
        return await self._server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))

    async def configuration(self, section: str) -> Any:
        """The client's settings section (None when it cannot say); within 5 s."""
        if not self.supports_configuration():
            return None
        try:
            answer = await asyncio.wait_for(self._server.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=section)])), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the defaults
            self.log(f"workspace/configuration failed: {exc}", types.MessageType.Warning)
            return None
        return answer[0] if answer else None

    # --- $/progress ---------------------------------------------------------------------------------

    async def create_progress(self, token: str) -> None:
        await asyncio.wait_for(self._server.work_done_progress.create_async(token), timeout=5.0)

    def begin_progress(self, token: str, title: str, message: str) -> None:
        self._server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, cancellable=True, message=message, percentage=0))

    def report_progress(self, token: str, message: str, percentage: int | None) -> None:
        self._server.work_done_progress.report(token, types.WorkDoneProgressReport(
            message=message, percentage=percentage, cancellable=True))

    def end_progress(self, token: str, message: str) -> None:
        self._server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
