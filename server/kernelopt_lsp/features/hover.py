"""Hover on a kernel's name: its facts, profile and last results (markdown: hover.py, and
user_kernel_items.py for a project's own kernels)."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..hover import hover_markdown, kernel_named_at
from ..kernel_facts import kernel_view
from ..results import ResultStore
from ..user_kernel_items import user_hover
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class HoverContext:
    workspace: ProjectWorkspace  # the hovered line's text
    views: DumpViews
    user_kernels: UserKernelFiles
    results: ResultStore


async def hover(ctx: HoverContext, params: types.HoverParams) -> types.Hover | None:
    uri, line, col = params.text_document.uri, params.position.line, params.position.character
    user = await ctx.user_kernels.state(uri)
    if user is not None:
        lines = ctx.workspace.lines(uri)
        return user_hover(ctx.user_kernels.views(user), line, col, lines[line].rstrip("\r\n")) \
            if line < len(lines) else None
    state = await ctx.views.state(uri)
    if state is None or state.graph is None or state.dispatch is None:
        return None
    lines = ctx.workspace.lines(uri)
    if line >= len(lines):
        return None
    found = kernel_named_at(state.graph, lines[line].rstrip("\r\n"), col)
    if found is None:
        return None
    kernel, start, end = found
    view = kernel_view(state.graph, kernel, state.dispatch, ctx.results)
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(view)),
        range=types.Range(types.Position(line, start), types.Position(line, end)),
    )


def register(server: LanguageServer, ctx: HoverContext) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(params: types.HoverParams) -> types.Hover | None:
        return await hover(ctx, params)
