"""Code lenses above each kernel, answered by the provider that claims the document (providers/):
its summary, Optimize and Profile (or Cancel while a job runs), Show diff, and the accepted-store
entry that replaces it at run time, with Remove."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.job_runner import JobRunner

from ..providers import Providers


@dataclass
class LensContext:
    providers: Providers
    runner: JobRunner  # the jobs running now


async def code_lenses(ctx: LensContext, params: types.CodeLensParams) -> list[types.CodeLens]:
    document = await ctx.providers.document(params.text_document.uri)
    return document.lenses(ctx.runner.active()) if document is not None else []


def register(server: LanguageServer, ctx: LensContext) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def on_code_lens(params: types.CodeLensParams) -> list[types.CodeLens]:
        return await code_lenses(ctx, params)
