"""Code lenses above each kernel (built by lenses.py, and user_kernel_items.py for a project's own
kernels): its summary, Optimize and Profile (or Cancel while a job runs), Show diff, and the
accepted-store entry that replaces it at run time, with Remove."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.artifacts.model import CompiledGraph
from kernelopt_core.jobs import JobRunner

from ..lenses import kernel_lenses
from ..uris import uri_path
from ..user_kernel_items import user_lenses
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace


@dataclass
class LensContext:
    workspace: ProjectWorkspace  # where a dump's accepted store is
    views: DumpViews
    user_kernels: UserKernelFiles
    runner: JobRunner  # the jobs running now


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


async def code_lenses(ctx: LensContext, params: types.CodeLensParams) -> list[types.CodeLens]:
    uri = params.text_document.uri
    user = await ctx.user_kernels.state(uri)
    if user is not None:
        return user_lenses(uri, ctx.user_kernels.views(user), ctx.runner.active())
    state = await ctx.views.state(uri)
    if state is None or state.graph is None:
        return []
    return kernel_lenses(uri, ctx.views.kernel_views(state), ctx.runner.active(),
                         accepted_for(ctx.workspace, uri_path(uri) or "", state.graph))


def register(server: LanguageServer, ctx: LensContext) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def on_code_lens(params: types.CodeLensParams) -> list[types.CodeLens]:
        return await code_lenses(ctx, params)
