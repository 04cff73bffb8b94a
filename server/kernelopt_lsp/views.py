"""The dump behind a document as the features see it now: the open buffer when there is one
(parsed on the indexer thread, cached by version), else the file on disk as indexed."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

from kernelopt_core.artifacts.model import CompiledGraph

from .documents import DumpDocuments, DumpState, SharedIndex, state_from_text
from .kernel_facts import KernelView, kernel_view
from .results import ResultStore
from .uris import uri_path
from .workspace import ProjectWorkspace


class DumpViews:
    def __init__(self, index: SharedIndex, indexer: ThreadPoolExecutor, workspace: ProjectWorkspace,
                 results: ResultStore) -> None:
        self.index = index
        self.indexer = indexer  # the one thread that parses and writes the index
        self.workspace = workspace
        self.results = results
        self.documents = DumpDocuments(index)

    async def state(self, uri: str) -> DumpState | None:
        """The dump a document holds (None: not a dump)."""
        path = uri_path(uri)
        if path is None:
            return None
        doc = self.workspace.document(uri)
        if doc is None:
            return self.documents.disk_state(path)
        version = doc.version or 0
        hit, state = self.documents.cached_buffer(path, version)
        if hit:
            return state
        key = self.documents.entry_key(path)
        text = doc.source
        state = await asyncio.get_running_loop().run_in_executor(
            self.indexer, state_from_text, path, text, version, self.index)
        self.documents.store_buffer(path, version, key, state)
        return state

    async def disk_graph(self, path: str) -> CompiledGraph | None:
        """The graph as saved on disk (indexing the file first if no watched folder holds it)."""
        graph = self.index.graph_at(path)
        if graph is None and not self.index.knows(path) and os.path.isfile(path):
            await asyncio.get_running_loop().run_in_executor(self.indexer, self.index.update, path)
            graph = self.index.graph_at(path)
        return graph

    def kernel_views(self, state: DumpState) -> list[KernelView]:
        """Each kernel of the dump with what the server remembers about it."""
        if state.graph is None or state.dispatch is None:
            return []
        return [kernel_view(state.graph, k, state.dispatch, self.results) for k in state.graph.kernels]

    def forget_buffer(self, path: str) -> None:
        self.documents.forget_buffer(path)
