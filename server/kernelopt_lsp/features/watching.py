"""Dump watching and views: the workspace folders and the ``dumpFolders`` setting are watched
(watch.py) and indexed on the indexer thread; a save re-reads the file, a close drops the
buffer's parse. Whatever changed gets its diagnostics again, and the lenses are refreshed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ..client import EditorClient
from ..context import Lifecycle, Republish
from ..documents import is_skipped
from ..settings import Settings
from ..uris import path_uri, uri_path
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class WatchingContext:
    client: EditorClient
    workspace: ProjectWorkspace
    settings: Callable[[], Settings]  # its dumpFolders are watched too
    views: DumpViews  # the index and the indexer thread
    user_kernels: UserKernelFiles
    diagnostics: Republish
    lifecycle: Lifecycle
    debounce_s: float = 0.15


class FolderWatch:
    def __init__(self, ctx: WatchingContext) -> None:
        self.ctx = ctx
        self.watcher: Any = None  # a DumpWatcher once started (watchdog is imported then, not at start-up)
        self._indexed_roots: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Watch and index the workspace folders and the dump folders (again, after a change)."""
        loop = self._loop = asyncio.get_running_loop()
        index, indexer = self.ctx.views.index, self.ctx.views.indexer
        roots = [*self.ctx.workspace.roots(), *self.ctx.settings().dump_folders]
        if self.watcher is None:
            from ..watch import DumpWatcher

            self.watcher = DumpWatcher(self._on_watched_paths, debounce_s=self.ctx.debounce_s)
        problems = await loop.run_in_executor(None, self.watcher.watch, roots)
        if problems:
            self.ctx.client.message("; ".join(problems), types.MessageType.Warning)
        new_roots = [r for r in roots if r not in self._indexed_roots]
        changed: set[str] = set()
        if any(r not in roots for r in self._indexed_roots):
            self._indexed_roots &= set(roots)
            changed |= await loop.run_in_executor(indexer, index.drop_outside, roots)
        for root in new_roots:
            self._indexed_roots.add(root)
            changed |= await loop.run_in_executor(indexer, index.scan, root)
        for path in sorted(changed):
            await self.ctx.diagnostics.refresh(path_uri(path))
        self.ctx.client.refresh_lenses()

    def _on_watched_paths(self, paths: set[str]) -> None:
        """From the watcher's timer thread: hand the paths to the server's loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.on_paths_changed(paths)))

    async def on_paths_changed(self, paths: set[str]) -> None:
        index = self.ctx.views.index

        def update() -> set[str]:
            changed: set[str] = set()
            for path in sorted(paths):
                changed |= index.update(path)
            return changed

        changed = await asyncio.get_running_loop().run_in_executor(self.ctx.views.indexer, update)
        for path in sorted(changed):
            await self.ctx.diagnostics.refresh(path_uri(path))
        if changed:
            self.ctx.client.refresh_lenses()

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()


def register(server: LanguageServer, ctx: WatchingContext) -> FolderWatch:
    watch = FolderWatch(ctx)
    ctx.lifecycle.on_settings(watch.start)
    ctx.lifecycle.on_shutdown(watch.stop)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(params: types.DidChangeWorkspaceFoldersParams) -> None:
        await watch.start()

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(params: types.DidSaveTextDocumentParams) -> None:
        path = uri_path(params.text_document.uri)
        if path is not None and not is_skipped(path):
            await watch.on_paths_changed({path})
        await ctx.diagnostics.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def on_close(params: types.DidCloseTextDocumentParams) -> None:
        path = uri_path(params.text_document.uri)
        if path is not None:
            ctx.views.forget_buffer(path)
            ctx.user_kernels.forget(path)
        await ctx.diagnostics.refresh(params.text_document.uri)

    return watch
