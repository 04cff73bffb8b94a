"""A project's own Triton kernels: the files behind the documents, what a command on one of their
kernels runs on, and the edit that puts an optimized kernel back into its file.

Any ``.py`` file of the workspace that defines ``@triton.jit`` functions (and is not an Inductor
dump) is read without running it (:mod:`kernelopt_core.userkernels`): each kernel gets static hints
as diagnostics (source ``kernelopt.kernel``), a hover, code lenses and actions through its provider
(providers/user_kernel_provider.py). Profile, Optimize and Verify run ``kernelopt
profile|optimize|verify FILE.py --kernel K`` (with ``--harness`` when the ``harnesses`` setting names
one; else the file's ``# kernelopt: harness=`` comment decides). Applying an optimize result edits
the kernel function (and what the candidate changed around it) in the user's file, as one undoable
workspace edit, only when the user asks. This module registers no LSP method of its own: the jobs
and edits features ask it whether a command names such a file. No torch here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from kernelopt_core.artifacts.model import CompiledGraph, Launch, TritonKernel, source_hash
from kernelopt_core.userkernels.extract import (
    ApplyError,
    ExtractError,
    candidate_edits,
    extract_kernel_module,
)
from kernelopt_core.userkernels.index import is_candidate_user_file
from kernelopt_core.userkernels.model import UserKernel, UserKernelFile
from kernelopt_core.userkernels.parse import UserKernelError, looks_like_user_kernels, parse_user_kernels

from .commands import CommandError
from .documents import SharedIndex
from .job_target import JobTarget
from .results import RunRecord
from .settings import Settings
from .uris import uri_path
from .workspace import ProjectWorkspace


def function_hash(module_source: str, kernel: str) -> str | None:
    """The hash of a kernel function's text (decorators included) inside a module, as a parsed
    :class:`UserKernel` hashes it: a result made on that kernel is current while it stays."""
    try:
        found = parse_user_kernels("<module>", module_source).function(kernel)
    except UserKernelError:
        return None
    return found.source_hash if found is not None else None


def user_graph(file: UserKernelFile) -> CompiledGraph:
    """The file as the server's job bookkeeping reads a graph: one entry per kernel, hashed by its text."""
    kernels = [TritonKernel(name=k.name, kind="other", source=k.source, name_range=k.name_range,
                            statement_range=k.statement_range, source_start_line=k.statement_range.start_line,
                            def_line=k.def_line, heuristic="user", signature=list(k.params)) for k in file.kernels]
    launches = [Launch(order=i, kernel=k.name, style="grid", args=[], kwargs={}, int_args=[], grid=None, stream=None,
                       line=k.def_line, function="harness") for i, k in enumerate(file.kernels)]
    return CompiledGraph(path=file.path, name=os.path.basename(file.path), text_hash=file.text_hash,
                         wrapper_style="unknown", device=None, kernels=kernels, launches=launches)


@dataclass
class UserState:
    path: str
    version: int | None
    file: UserKernelFile


@dataclass
class UserKernelContext:
    workspace: ProjectWorkspace  # the open documents
    index: SharedIndex  # its ``user`` index: the kernel files as saved
    indexer: ThreadPoolExecutor  # where buffers are parsed
    settings: Callable[[], Settings]  # the harnesses and userKernels settings


class UserKernelFiles:
    def __init__(self, ctx: UserKernelContext):
        self.ctx = ctx
        self._buffers: dict[str, tuple[tuple[int, str], UserState | None]] = {}

    # --- the file behind a uri ----------------------------------------------------------------

    async def state(self, uri: str) -> UserState | None:
        """The kernels a document holds now (None: not a project's kernel file)."""
        path = uri_path(uri)
        if path is None or not self.ctx.settings().user_kernels or not is_candidate_user_file(path):
            return None
        doc = self.ctx.workspace.document(uri)
        if doc is None:
            found = self.ctx.index.user.file_at(path)
            return UserState(path, None, found) if found is not None else None
        text, version = doc.source, doc.version or 0
        key = (version, source_hash(text))
        cached = self._buffers.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        state = await asyncio.get_running_loop().run_in_executor(self.ctx.indexer, _state_from_text, path, text,
                                                                 version)
        self._buffers[path] = (key, state)
        return state

    def forget(self, path: str) -> None:
        self._buffers.pop(path, None)

    def disk_file(self, path: str) -> UserKernelFile | None:
        found = self.ctx.index.user.file_at(path)
        if found is None and os.path.isfile(path):
            try:
                text = open(path, encoding="utf-8").read()
                found = parse_user_kernels(path, text) if looks_like_user_kernels(text) else None
            except (OSError, UnicodeDecodeError, UserKernelError):
                return None
        return found

    def is_user_run(self, run: RunRecord) -> bool:
        return bool(run.graph_path) and is_candidate_user_file(run.graph_path) and self.disk_file(run.graph_path) \
            is not None

    # --- what commands run on -----------------------------------------------------------------

    def owns(self, argument: Any) -> bool:
        """Does a command's ``{uri, kernel}`` name a project's own kernel file?"""
        if not isinstance(argument, dict) or not isinstance(argument.get("uri"), str):
            return False
        path = uri_path(argument["uri"])
        return path is not None and is_candidate_user_file(path) and self.disk_file(path) is not None

    def _resolve(self, argument: Any) -> tuple[str, str, UserKernelFile, UserKernel]:
        uri, name = argument.get("uri"), argument.get("kernel")
        if not isinstance(name, str) or not name:
            raise CommandError("expected one argument {uri, kernel} with both set")
        path = uri_path(uri) or ""
        file = self.disk_file(path)
        kernel = file.kernel(name) if file is not None else None
        if file is None or kernel is None:
            raise CommandError(f"no @triton.jit kernel named {name} in {path} (as saved on disk)")
        return uri, path, file, kernel

    def job_target(self, argument: Any) -> JobTarget:
        """Profile or optimize: the kernel as saved on disk."""
        uri, path, file, kernel = self._resolve(argument)
        return JobTarget(uri=uri, path=path, kernel=kernel.name, graph=user_graph(file),
                         kernel_hash=kernel.source_hash, harness=self.ctx.settings().harness_for(path, kernel.name),
                         user_kernel=True)

    async def verify_target(self, argument: Any) -> tuple[JobTarget, str]:
        """Verify: the kernel as edited in the open document, and the module the gates check it in."""
        uri, path, file, disk_kernel = self._resolve(argument)
        state = await self.state(uri)
        edited = state.file.kernel(disk_kernel.name) if state is not None else None
        if edited is None:
            raise CommandError(f"kernel {disk_kernel.name} is not in the open document any more")
        if state is not None and edited.source == disk_kernel.source and _helpers_same(state.file, file, edited):
            raise CommandError(f"{disk_kernel.name} is the same as on disk: edit the kernel first, then verify")
        doc = self.ctx.workspace.document(uri)
        text = doc.source if doc is not None else ""
        try:
            module = extract_kernel_module(text, edited.name, path, edited.caller_passed()).source
        except ExtractError as exc:
            raise CommandError(f"the edited {edited.name} cannot be checked on its own: {exc}") from None
        target = JobTarget(uri=uri, path=path, kernel=edited.name, graph=user_graph(file),
                           kernel_hash=edited.source_hash,
                           harness=self.ctx.settings().harness_for(path, edited.name), user_kernel=True)
        return target, module

    # --- the edit -------------------------------------------------------------------------------

    def text_edits(self, run: RunRecord, text: str) -> list[types.TextEdit]:
        """The optimized kernel (and what the candidate changed around it) as edits of ``text``."""
        try:
            edits = candidate_edits(text, run.kernel, run.optimized_source or "", run.graph_path)
        except ApplyError as exc:
            raise CommandError(str(exc)) from None
        if not edits:
            raise CommandError(f"{run.kernel} in {os.path.basename(run.graph_path)} already is the optimized kernel")
        return [types.TextEdit(range=types.Range(types.Position(e.first, 0),
                                                 types.Position(e.first if e.is_insert else e.last + 1, 0)),
                               new_text=e.new_text) for e in edits]


def _helpers_same(edited: UserKernelFile, disk: UserKernelFile, kernel: UserKernel) -> bool:
    for name in kernel.helpers:
        a, b = edited.function(name), disk.function(name)
        if (a.source if a else None) != (b.source if b else None):
            return False
    return True


def _state_from_text(path: str, text: str, version: int) -> UserState | None:
    if not looks_like_user_kernels(text):
        return None
    try:
        parsed = parse_user_kernels(path, text)
    except UserKernelError:
        return None  # a file being typed: Python's own tools say what is wrong
    return UserState(path, version, parsed) if parsed.kernels else None
