"""Diagnostics, published per document with every source together, answered by the provider that
claims the document (providers/). A document's diagnostics follow it as it opens and changes
(debounced); other features ask for them again through :class:`~kernelopt_lsp.context.Republish`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..client import EditorClient
from ..diagnostics import DiagnosticBoard
from ..providers import Providers
from ..uris import path_uri

log = logging.getLogger("kernelopt_lsp")
CHANGE_DEBOUNCE_S = 0.25


@dataclass
class DiagnosticsContext:
    client: EditorClient
    providers: Providers


class DiagnosticsPublisher:
    """Keeps each document's diagnostics by source and publishes them together (a Republish)."""

    def __init__(self, ctx: DiagnosticsContext) -> None:
        self.ctx = ctx
        self.board = DiagnosticBoard()
        self._published: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    async def refresh(self, uri: str) -> None:
        try:
            document = await self.ctx.providers.document(uri)
            by_source = document.diagnostics() if document is not None else {}
        except Exception as exc:  # noqa: BLE001 - one bad file never stops the others
            log.exception("reading %s failed", uri)
            self.ctx.client.log(f"reading {uri} failed: {exc}", types.MessageType.Error)
            return
        if document is None:
            self.board.clear(uri)
            if uri in self._published:
                self._publish(uri, [], None)
            return
        for source, items in by_source.items():
            self.board.set(uri, source, items)
        self._publish(uri, self.board.combined(uri), document.version)

    def _publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        self.ctx.client.publish_diagnostics(uri, diagnostics, version)
        if diagnostics:
            self._published.add(uri)
        else:
            self._published.discard(uri)

    def schedule(self, uri: str, delay: float = CHANGE_DEBOUNCE_S) -> None:
        loop = asyncio.get_running_loop()
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self._timers[uri] = loop.call_later(delay, lambda: loop.create_task(self.refresh(uri)))

    async def refresh_graph(self, graph_path: str) -> None:
        await self.refresh(path_uri(graph_path))
        self.ctx.client.refresh_lenses()


def register(server: LanguageServer, ctx: DiagnosticsContext) -> DiagnosticsPublisher:
    publisher = DiagnosticsPublisher(ctx)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def on_open(params: types.DidOpenTextDocumentParams) -> None:
        await publisher.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(params: types.DidChangeTextDocumentParams) -> None:
        publisher.schedule(params.text_document.uri)

    return publisher
