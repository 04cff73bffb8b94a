"""Code actions on a kernel and on a graph's first line, answered by the provider that claims the
document (providers/), and the ``copyConfig`` command behind the first line's action: the
``torch.compile`` call of a recommended configuration change."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.job_runner import JobRunner

from ..actions import CMD_COPY_CONFIG
from ..client import EditorClient
from ..commands import CommandError, register_command
from ..providers import Providers
from ..results import ResultStore
from ..uris import uri_path
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class ActionContext:
    client: EditorClient
    workspace: ProjectWorkspace  # where the suggested compile call is written for other clients
    views: DumpViews  # copyConfig: the graph a document holds
    results: ResultStore  # copyConfig: its configuration change
    providers: Providers
    runner: JobRunner  # the jobs running now (Cancel)


async def code_actions(ctx: ActionContext, params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
    document = await ctx.providers.document(params.text_document.uri)
    if document is None:
        return []
    return _for_client(ctx.client, await document.actions(params, ctx.runner.active()))


def _for_client(client: EditorClient, actions: list[types.CodeAction]) -> list[types.CodeAction | types.Command]:
    if not client.supports_action_literals():
        return [a.command for a in actions if a.command is not None]  # an older client: plain commands
    return list(actions)


async def copy_config(ctx: ActionContext, argument: Any) -> dict[str, Any]:
    """The torch.compile call of the graph's recommended configuration change.

    Returns ``{text, title, verified}``; the VS Code client copies ``text`` to the clipboard.
    For other clients the server shows it (window/showMessage) and, where the client can show
    documents, opens it as ``.kernelopt/suggested_compile.py`` to copy from."""
    doc_uri = argument.get("uri") if isinstance(argument, dict) else None
    path = uri_path(doc_uri) if isinstance(doc_uri, str) else None
    if not isinstance(doc_uri, str) or path is None:
        raise CommandError("expected one argument {uri}")
    state = await ctx.views.state(doc_uri)
    finding = ctx.results.config_change(state.graph.path if state and state.graph else path)
    snippet = finding.get("snippet") if finding else None
    if not isinstance(snippet, str) or not snippet:
        raise CommandError(f"no configuration change is known for {path}: run optimize on it first")
    assert finding is not None
    verified = bool(finding.get("chosen"))
    rec = finding.get("recommendation")
    title = str(rec.get("title")) if isinstance(rec, dict) else "configuration change"
    if verified:
        assumes = (finding.get("verified") or {}).get("assumes") or "nothing stated"
        status = f"verified through gates 3-4 on the full callable; it assumes {assumes}"
    else:
        status = "not verified: optimize with configuration changes allowed checks it"
    text = f"# KernelOPT: {title}\n# {status}\n{snippet}\n"
    answer: dict[str, Any] = {"text": text, "title": title, "verified": verified}
    client = ctx.client
    if not client.writes_clipboard():
        client.message("copy this torch.compile call:\n" + text)
        if client.supports_show_document():
            target = os.path.join(ctx.workspace.job_cwd(path), ".kernelopt", "suggested_compile.py")
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as handle:
                    handle.write(text)
            except OSError as exc:
                client.log(f"could not write {target}: {exc}", types.MessageType.Warning)
            else:
                answer["path"] = target
                await client.show_file(target)
    return answer


def register(server: LanguageServer, ctx: ActionContext) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.Refactor]))
    async def on_code_action(params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
        return await code_actions(ctx, params)

    async def on_copy_config(argument: Any) -> dict[str, Any]:
        return await copy_config(ctx, argument)

    register_command(server, ctx.client, CMD_COPY_CONFIG, on_copy_config)
