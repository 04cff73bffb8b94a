"""Code actions on a kernel and on the graph's first line (built by actions.py, and
user_kernel_items.py for a project's own kernels), and the ``copyConfig`` command behind the
first line's action: the ``torch.compile`` call of a recommended configuration change."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel
from kernelopt_core.jobs import JobRunner

from ..actions import CMD_COPY_CONFIG, config_change_actions, kernel_actions
from ..client import EditorClient
from ..commands import CommandError, register_command
from ..kernel_facts import kernel_view
from ..results import ResultStore
from ..uris import uri_path
from ..user_kernel_items import user_actions
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class ActionContext:
    client: EditorClient
    workspace: ProjectWorkspace  # where the suggested compile call is written for other clients
    views: DumpViews
    user_kernels: UserKernelFiles
    results: ResultStore
    runner: JobRunner  # the jobs running now (Cancel)


async def code_actions(ctx: ActionContext, params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
    uri = params.text_document.uri
    start = params.range.start
    only = list(params.context.only) if params.context.only else None
    actions: list[types.CodeAction] = []
    user = await ctx.user_kernels.state(uri)
    if user is not None:
        found = ctx.user_kernels.view_at(user, start.line)
        if found is not None:
            view, edited = found
            actions = user_actions(uri, view, only, ctx.runner.active(), edited)
        return _for_client(ctx.client, actions)
    state = await ctx.views.state(uri)
    if state is None or state.graph is None or state.dispatch is None:
        return []
    if start.line == 0:  # the graph's first line carries the configuration change
        shown = [d for d in params.context.diagnostics if d.code == "config-change"]
        actions += config_change_actions(uri, ctx.results.config_change(state.graph.path), diagnostics=shown,
                                         only=only)
    kernel = state.graph.kernel_at(start.line, start.character) or _kernel_on_line(state.graph, start.line)
    if kernel is not None:
        view = kernel_view(state.graph, kernel, state.dispatch, ctx.results)
        disk = await ctx.views.disk_graph(uri_path(uri) or "")
        disk_kernel = disk.kernel(kernel.name) if disk else None
        edited = disk_kernel is not None and disk_kernel.source_hash != kernel.source_hash
        actions += kernel_actions(uri, view, edited=edited, active_jobs=ctx.runner.active(), only=only)
    return _for_client(ctx.client, actions)


def _for_client(client: EditorClient, actions: list[types.CodeAction]) -> list[types.CodeAction | types.Command]:
    if not client.supports_action_literals():
        return [a.command for a in actions if a.command is not None]  # an older client: plain commands
    return list(actions)


def _kernel_on_line(graph: CompiledGraph, line: int) -> TritonKernel | None:
    for kernel in graph.kernels:
        if kernel.statement_range.start_line <= line <= kernel.statement_range.end_line:
            return kernel
    for launch in graph.launches:
        if launch.line == line:
            return graph.kernel(launch.kernel)
    return None


async def copy_config(ctx: ActionContext, argument: Any) -> dict[str, Any]:
    """The torch.compile call of the graph's recommended configuration change.

    Returns ``{text, title, verified}``; the VS Code client copies ``text`` to the clipboard.
    For other clients the server shows it (window/showMessage) and, where the client can show
    documents, opens it as ``.kernelopt/suggested_compile.py`` to copy from."""
    doc_uri = argument.get("uri") if isinstance(argument, dict) else None
    path = uri_path(doc_uri) if isinstance(doc_uri, str) else None
    if path is None:
        raise CommandError("expected one argument {uri}")
    state = await ctx.views.state(doc_uri)  # type: ignore[arg-type]
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
