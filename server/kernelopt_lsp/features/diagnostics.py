"""Diagnostics, published per document with every source together (builders: diagnostics.py and
user_kernel_items.py). A document's diagnostics follow it as it opens and changes (debounced);
other features ask for them again through :class:`~kernelopt_lsp.context.Republish`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..client import EditorClient
from ..diagnostics import (
    SOURCE_DUMP,
    SOURCE_GATES,
    SOURCE_PROFILE,
    DiagnosticBoard,
    config_change_diagnostics,
    dump_diagnostics,
    gate_diagnostics,
    overhead_diagnostics,
    problem_diagnostics,
    profile_diagnostics,
)
from ..results import ResultStore
from ..uris import path_uri
from ..user_kernel_items import user_diagnostics
from ..user_kernels import UserKernelFiles
from ..views import DumpViews

log = logging.getLogger("kernelopt_lsp")
CHANGE_DEBOUNCE_S = 0.25


@dataclass
class DiagnosticsContext:
    client: EditorClient
    views: DumpViews
    user_kernels: UserKernelFiles
    results: ResultStore


class DiagnosticsPublisher:
    """Keeps each document's diagnostics by source and publishes them together (a Republish)."""

    def __init__(self, ctx: DiagnosticsContext) -> None:
        self.ctx = ctx
        self.board = DiagnosticBoard()
        self._published: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    async def refresh(self, uri: str) -> None:
        try:
            user = await self.ctx.user_kernels.state(uri)
            if user is not None:
                for source, items in user_diagnostics(self.ctx.user_kernels.views(user)).items():
                    self.board.set(uri, source, items)
                self._publish(uri, self.board.combined(uri), user.version)
                return
            state = await self.ctx.views.state(uri)
        except Exception as exc:  # noqa: BLE001 - one bad file never stops the others
            log.exception("reading %s failed", uri)
            self.ctx.client.log(f"reading {uri} failed: {exc}", types.MessageType.Error)
            return
        if state is None:
            self.board.clear(uri)
            if uri in self._published:
                self._publish(uri, [], None)
            return
        results = self.ctx.results
        if state.problem is not None:
            self.board.set(uri, SOURCE_DUMP, problem_diagnostics(state.problem, state.first_line_length))
            self.board.set(uri, SOURCE_PROFILE, [])
            self.board.set(uri, SOURCE_GATES, [])
        elif state.graph is not None and state.dispatch is not None:
            views = self.ctx.views.kernel_views(state)
            self.board.set(uri, SOURCE_DUMP, dump_diagnostics(state.graph, state.dispatch, views,
                                                              state.first_line_length))
            self.board.set(uri, SOURCE_PROFILE, profile_diagnostics(views) + overhead_diagnostics(
                results.overheads(state.graph.path), state.first_line_length))
            self.board.set(uri, SOURCE_GATES, gate_diagnostics(views) + config_change_diagnostics(
                results.config_change(state.graph.path), state.first_line_length))
        self._publish(uri, self.board.combined(uri), state.version)

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
