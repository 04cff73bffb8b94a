"""Inductor dumps as a provider: a document is claimed when it holds a dump (or one that cannot be
read, which gets a diagnostic saying why); the answers are built by diagnostics.py, hover.py,
lenses.py and actions.py from the dump's kernel views."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel
from kernelopt_core.job_runner import Job

from ..actions import config_change_actions, kernel_actions
from ..diagnostics import (
    SOURCE_DUMP,
    SOURCE_GATES,
    SOURCE_PROFILE,
    config_change_diagnostics,
    dump_diagnostics,
    gate_diagnostics,
    overhead_diagnostics,
    problem_diagnostics,
    profile_diagnostics,
)
from ..documents import DumpState
from ..hover import hover_markdown, kernel_named_at
from ..kernel_facts import kernel_view
from ..lenses import kernel_lenses
from ..results import ResultStore
from ..uris import uri_path
from ..views import DumpViews
from ..workspace import ProjectWorkspace
from .base import ClaimedDocument


class DumpProvider:
    def __init__(self, views: DumpViews, results: ResultStore, workspace: ProjectWorkspace) -> None:
        self.views = views
        self.results = results
        self.workspace = workspace  # where a dump's accepted store is

    async def claim(self, uri: str) -> DumpDocument | None:
        state = await self.views.state(uri)
        return DumpDocument(self, uri, state) if state is not None else None


class DumpDocument(ClaimedDocument[DumpProvider, DumpState]):
    def diagnostics(self) -> dict[str, list[types.Diagnostic]]:
        state, results = self.state, self.provider.results
        if state.problem is not None:
            return {SOURCE_DUMP: problem_diagnostics(state.problem, state.first_line_length),
                    SOURCE_PROFILE: [], SOURCE_GATES: []}
        if state.graph is None or state.dispatch is None:
            return {}
        views = self.provider.views.kernel_views(state)
        return {
            SOURCE_DUMP: dump_diagnostics(state.graph, state.dispatch, views, state.first_line_length),
            SOURCE_PROFILE: profile_diagnostics(views) + overhead_diagnostics(
                results.overheads(state.graph.path), state.first_line_length),
            SOURCE_GATES: gate_diagnostics(views) + config_change_diagnostics(
                results.config_change(state.graph.path), state.first_line_length),
        }

    def hover(self, line: int, col: int, line_text: str) -> types.Hover | None:
        graph, dispatch = self.state.graph, self.state.dispatch
        if graph is None or dispatch is None:
            return None
        found = kernel_named_at(graph, line_text, col)
        if found is None:
            return None
        kernel, start, end = found
        view = kernel_view(graph, kernel, dispatch, self.provider.results)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(view)),
            range=types.Range(types.Position(line, start), types.Position(line, end)),
        )

    def lenses(self, active_jobs: list[Job]) -> list[types.CodeLens]:
        graph = self.state.graph
        if graph is None:
            return []
        return kernel_lenses(self.uri, self.provider.views.kernel_views(self.state), active_jobs,
                             accepted_for(self.provider.workspace, uri_path(self.uri) or "", graph))

    async def actions(self, params: types.CodeActionParams, active_jobs: list[Job]) -> list[types.CodeAction]:
        graph, dispatch = self.state.graph, self.state.dispatch
        if graph is None or dispatch is None:
            return []
        start = params.range.start
        only = list(params.context.only) if params.context.only else None
        actions: list[types.CodeAction] = []
        if start.line == 0:  # the graph's first line carries the configuration change
            shown = [d for d in params.context.diagnostics if d.code == "config-change"]
            actions += config_change_actions(self.uri, self.provider.results.config_change(graph.path),
                                             diagnostics=shown, only=only)
        kernel = graph.kernel_at(start.line, start.character) or _kernel_on_line(graph, start.line)
        if kernel is not None:
            view = kernel_view(graph, kernel, dispatch, self.provider.results)
            disk = await self.provider.views.disk_graph(uri_path(self.uri) or "")
            disk_kernel = disk.kernel(kernel.name) if disk else None
            edited = disk_kernel is not None and disk_kernel.source_hash != kernel.source_hash
            actions += kernel_actions(self.uri, view, edited=edited, active_jobs=active_jobs, only=only)
        return actions


def accepted_for(workspace: ProjectWorkspace, dump_path: str, graph: CompiledGraph) -> dict[str, list[Any]]:
    """Accepted-store entries that replace kernels of this graph, by kernel name."""
    try:
        from kernelopt_core.accepted import AcceptedStore
    except ImportError:
        return {}
    store = AcceptedStore(workspace.accepted_store_dir(dump_path))
    found: dict[str, list[Any]] = {}
    for kernel in graph.kernels:
        entries = store.find_by_source_hash(kernel.source_hash)
        if entries:
            found[kernel.name] = entries
    return found


def _kernel_on_line(graph: CompiledGraph, line: int) -> TritonKernel | None:
    for kernel in graph.kernels:
        if kernel.statement_range.start_line <= line <= kernel.statement_range.end_line:
            return kernel
    for launch in graph.launches:
        if launch.line == line:
            return graph.kernel(launch.kernel)
    return None
