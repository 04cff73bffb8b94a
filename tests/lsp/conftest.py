"""Shared pieces of the language-server tests: a test client that also records
``workspace/applyEdit`` and ``kernelopt/jobStatus``, workspace set-up, and waiting helpers."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
H200 = ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11"
REAL_SERVER = [sys.executable, "-m", "kernelopt_lsp.main"]
FAKE_SERVER = [sys.executable, str(HERE / "fake_server.py")]
# The two client-capability profiles every end-to-end feature test runs with.
PROFILES = ["visual-studio-code", "neovim"]


def _converter() -> Any:
    """pygls' converter, except that a CodeAction carrying a command is read as a CodeAction.

    lsprotocol reads any ``Command | CodeAction`` with a ``command`` key as a Command; clients
    (VS Code, Neovim) tell them apart by whether ``command`` is a string.
    """
    converter = default_converter()

    def code_action_or_command(obj: Any, _: type) -> Any:
        if isinstance(obj, dict) and isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], code_action_or_command)  # noqa: UP007
    return converter


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=_converter)
    register_lsp_features(client)
    client.applied_edits = []  # type: ignore[attr-defined]
    client.job_statuses = []  # type: ignore[attr-defined]
    client.lens_refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(ls: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        ls.applied_edits.append(params)  # type: ignore[attr-defined]
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature("kernelopt/jobStatus")
    def job_status(ls: LanguageClient, params: Any) -> None:
        ls.job_statuses.append(as_dict(params))  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(ls: LanguageClient, params: Any) -> None:
        ls.lens_refreshes += 1  # type: ignore[attr-defined]

    return client


def as_dict(params: Any) -> dict[str, Any]:
    """Custom notifications arrive as pygls objects (namedtuple-like); read them as dicts."""
    if isinstance(params, dict):
        return params
    if hasattr(params, "_asdict"):
        return {k: as_dict(v) if hasattr(v, "_asdict") else v for k, v in params._asdict().items()}
    return dict(vars(params))


def copy_dumps(workspace: Path, names: list[str]) -> dict[str, Path]:
    """Copy H200 fixture dumps into ``workspace/dumps/<name>/output_code.py``."""
    out = {}
    for name in names:
        target = workspace / "dumps" / name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(H200 / name / "output_code.py", target / "output_code.py")
        out[name] = target / "output_code.py"
    return out


def uri(path: Path) -> str:
    return from_fs_path(str(path)) or f"file://{path}"


async def initialize(client: LanguageClient, workspace: Path, profile: str,
                     options: dict[str, Any] | None = None) -> types.InitializeResult:
    return await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(profile),
        root_uri=uri(workspace),
        workspace_folders=[types.WorkspaceFolder(uri=uri(workspace), name="ws")],
        initialization_options=options,
        client_info=types.ClientInfo(name="Visual Studio Code" if "visual" in profile else "Neovim"),
    ))


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


def open_document(client: LanguageClient, path: Path, version: int = 1) -> str:
    doc_uri = uri(path)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=doc_uri, language_id="python", version=version, text=path.read_text())))
    return doc_uri


def replace_document(client: LanguageClient, doc_uri: str, text: str, version: int) -> None:
    """A whole-document change (what a client sends for a large edit)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
    ))


def statuses(client: LanguageClient, job_id: str) -> list[dict[str, Any]]:
    return [s for s in client.job_statuses if s.get("jobId") == job_id]  # type: ignore[attr-defined]


def final_status(client: LanguageClient, job_id: str) -> dict[str, Any] | None:
    for status in reversed(statuses(client, job_id)):
        if status.get("state") in ("done", "failed", "cancelled"):
            return status
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def edits_for(edit: types.WorkspaceEdit, doc_uri: str) -> list[types.TextEdit]:
    """The text edits of a WorkspaceEdit for one document, in either form a server may send."""
    if edit.document_changes:
        return [e for change in edit.document_changes if isinstance(change, types.TextDocumentEdit)
                and change.text_document.uri == doc_uri for e in change.edits]
    return list((edit.changes or {}).get(doc_uri, []))


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits as a client does (positions in characters; ASCII dumps)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(pos: types.Position) -> int:
        return len(text) if pos.line >= len(lines) else starts[pos.line] + min(pos.character, len(lines[pos.line]))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def undo_edits(before: str, edits: list[types.TextEdit]) -> list[types.TextEdit]:
    """The edits that undo ``edits`` (applied to ``before``), as an editor's undo computes them."""
    undo = []
    shift_lines = 0
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character)):
        old = _text_in(before, edit.range)
        start = types.Position(edit.range.start.line + shift_lines, edit.range.start.character)
        new_lines = edit.new_text.split("\n")
        end_line = start.line + len(new_lines) - 1
        end_char = start.character + len(new_lines[0]) if len(new_lines) == 1 else len(new_lines[-1])
        undo.append(types.TextEdit(range=types.Range(start, types.Position(end_line, end_char)), new_text=old))
        shift_lines += (len(new_lines) - 1) - (edit.range.end.line - edit.range.start.line)
    return undo


def _text_in(text: str, rng: types.Range) -> str:
    lines = text.splitlines(keepends=True)
    if rng.start.line == rng.end.line:
        return lines[rng.start.line][rng.start.character:rng.end.character]
    parts = [lines[rng.start.line][rng.start.character:], *lines[rng.start.line + 1:rng.end.line],
             lines[rng.end.line][:rng.end.character]]
    return "".join(parts)
