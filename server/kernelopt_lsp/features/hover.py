"""Hover on a kernel's name: its facts, profile and last results, answered by the provider that
claims the document (providers/)."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..providers import Providers
from ..workspace import ProjectWorkspace


@dataclass
class HoverContext:
    workspace: ProjectWorkspace  # the hovered line's text
    providers: Providers


async def hover(ctx: HoverContext, params: types.HoverParams) -> types.Hover | None:
    uri, line, col = params.text_document.uri, params.position.line, params.position.character
    document = await ctx.providers.document(uri)
    if document is None:
        return None
    lines = ctx.workspace.lines(uri)
    if line >= len(lines):
        return None
    return document.hover(line, col, lines[line].rstrip("\r\n"))


def register(server: LanguageServer, ctx: HoverContext) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(params: types.HoverParams) -> types.Hover | None:
        return await hover(ctx, params)
