"""The language server: the one module that registers each LSP method, fanning out to the
feature modules (diagnostics, hover, lenses, actions, watch, jobs, settings).

The server process never imports torch or triton: dumps are read with the AST parser, and all
profiling, compiling and gating happens in job subprocesses (``kernelopt ... --events --json``).
Parsing runs on one indexer thread, so hovers are answered while a file is being read and
while a job runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel, source_hash
from kernelopt_core.jobs import ArgvBuilder, Job, JobRequest, JobRunner, cli_argv

from . import __version__
from .actions import CMD_COPY_CONFIG, config_change_actions, kernel_actions
from .diagnostics import (
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
from .documents import DumpDocuments, DumpState, SharedIndex, is_skipped, state_from_text
from .hover import hover_markdown, kernel_named_at
from .job_requests import (
    JobLink,
    job_env,
    job_status,
    optimize_args,
    profile_args,
    progress_text,
    verify_args,
)
from .kernel_edit import KernelEditError, kernel_source_replacement, workspace_edit
from .kernel_facts import KernelView, gate_line, kernel_view, profile_line, speedup_text
from .lenses import (
    CMD_APPLY,
    CMD_CANCEL,
    CMD_OPTIMIZE,
    CMD_PROFILE,
    CMD_REMOVE_ACCEPTED,
    CMD_SHOW_DIFF,
    CMD_VERIFY,
    kernel_lenses,
)
from .results import (
    ResultStore,
    RunRecord,
    callable_overhead_items,
    find_run_dir,
    gate_record_from_cascade,
    gate_record_from_run,
    load_run,
    overhead_items,
    profile_records,
    run_record_from_result,
)
from .settings import Settings, parse_settings
from .user_kernels import UserKernelFeatures, function_hash

log = logging.getLogger("kernelopt_lsp")
JOB_STATUS = "kernelopt/jobStatus"
CHANGE_DEBOUNCE_S = 0.25


class CommandError(Exception):
    """A server command could not do what was asked; the message says why (sent to the client)."""


class KernelOptServer(LanguageServer):
    def __init__(self, *, argv_builder: ArgvBuilder = cli_argv, debounce_s: float = 0.15):
        super().__init__("kernelopt-lsp", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.index = SharedIndex()
        self.documents = DumpDocuments(self.index)
        self.results = ResultStore()
        self.board = DiagnosticBoard()
        self.runner = JobRunner(argv_builder=argv_builder)
        self.links: dict[str, JobLink] = {}
        self.token_jobs: dict[str, str] = {}
        self.debounce_s = debounce_s
        self.watcher: Any = None  # a DumpWatcher once initialized (watchdog is imported then, not at start)
        self.indexer = ThreadPoolExecutor(1, thread_name_prefix="kernelopt-index")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.init_options: Any = None
        self.client_name = ""
        self._published: set[str] = set()
        self._change_timers: dict[str, asyncio.TimerHandle] = {}
        self._progress_tasks: dict[str, asyncio.Task[None]] = {}
        self._indexed_roots: set[str] = set()
        self.user_kernels = UserKernelFeatures(self)  # a project's own @triton.jit files

    # --- client capabilities -------------------------------------------------------------------

    @property
    def caps(self) -> types.ClientCapabilities:
        return self.client_capabilities

    def supports_progress(self) -> bool:
        return bool(self.caps.window and self.caps.window.work_done_progress)

    def supports_show_document(self) -> bool:
        return bool(self.caps.window and self.caps.window.show_document and self.caps.window.show_document.support)

    def supports_configuration(self) -> bool:
        return bool(self.caps.workspace and self.caps.workspace.configuration)

    def supports_document_changes(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.workspace_edit and ws.workspace_edit.document_changes)

    def supports_action_literals(self) -> bool:
        td = self.caps.text_document
        return bool(td and td.code_action and td.code_action.code_action_literal_support)

    def supports_lens_refresh(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    def client_shows_job_status(self) -> bool:
        """Does the client turn kernelopt/jobStatus into its own messages? (Others get showMessage.)

        A client says so with ``capabilities.experimental.kernelopt.jobStatus = true``; the VS Code
        extension is also recognised by the client name VS Code sends."""
        experimental = self.caps.experimental if isinstance(self.caps.experimental, dict) else {}
        declared = experimental.get("kernelopt")
        if isinstance(declared, dict) and declared.get("jobStatus") is True:
            return True
        name = self.client_name.lower()
        return "visual studio code" in name or "vscode" in name

    def client_writes_clipboard(self) -> bool:
        """Does the client copy ``kernelopt.server.copyConfig``'s text to the clipboard itself?

        The VS Code extension does (its executeCommand middleware); another client says so with
        ``capabilities.experimental.kernelopt.clipboard = true``. Others get the text shown."""
        experimental = self.caps.experimental if isinstance(self.caps.experimental, dict) else {}
        declared = experimental.get("kernelopt")
        if isinstance(declared, dict) and declared.get("clipboard") is True:
            return True
        name = self.client_name.lower()
        return "visual studio code" in name or "vscode" in name

    def message(self, text: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"KernelOPT: {text}"))

    def log(self, text: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=text))

    # --- roots and settings ----------------------------------------------------------------------

    def workspace_roots(self) -> list[str]:
        roots: list[str] = []
        try:
            workspace = self.workspace
        except RuntimeError:
            return roots
        for folder in workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                roots.append(os.path.abspath(path))
        if not roots and workspace.root_path:
            roots.append(os.path.abspath(workspace.root_path))
        return roots

    def watch_roots(self) -> list[str]:
        return [*self.workspace_roots(), *self.settings.dump_folders]

    def apply_settings(self, raw: Any) -> list[str]:
        roots = self.workspace_roots()
        self.settings, problems = parse_settings(raw, self.settings, roots[0] if roots else None)
        return problems

    def report_setting_problems(self, problems: list[str]) -> None:
        if problems:
            self.message("bad setting: " + "; ".join(problems), types.MessageType.Warning)

    async def pull_configuration(self) -> list[str]:
        if not self.supports_configuration():
            return []
        try:
            answer = await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="kernelopt")])), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the defaults
            self.log(f"workspace/configuration failed: {exc}", types.MessageType.Warning)
            return []
        raw = answer[0] if answer else None
        return self.apply_settings(raw) if raw else []

    # --- indexing and watching -------------------------------------------------------------------

    async def start_watching(self) -> None:
        """Watch and index the workspace folders and the dump folders (again, after a change)."""
        loop = asyncio.get_running_loop()
        roots = self.watch_roots()
        if self.watcher is None:
            from .watch import DumpWatcher

            self.watcher = DumpWatcher(self._on_watched_paths, debounce_s=self.debounce_s)
        problems = await loop.run_in_executor(None, self.watcher.watch, roots)
        if problems:
            self.message("; ".join(problems), types.MessageType.Warning)
        new_roots = [r for r in roots if r not in self._indexed_roots]
        changed: set[str] = set()
        if any(r not in roots for r in self._indexed_roots):
            self._indexed_roots &= set(roots)
            changed |= await loop.run_in_executor(self.indexer, self.index.drop_outside, roots)
        for root in new_roots:
            self._indexed_roots.add(root)
            changed |= await loop.run_in_executor(self.indexer, self.index.scan, root)
        for path in sorted(changed):
            await self.refresh(path_uri(path))
        self.refresh_lenses()

    def _on_watched_paths(self, paths: set[str]) -> None:
        """From the watcher's timer thread: hand the paths to the server's loop."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.on_paths_changed(paths)))

    async def on_paths_changed(self, paths: set[str]) -> None:
        loop = asyncio.get_running_loop()

        def update() -> set[str]:
            changed: set[str] = set()
            for path in sorted(paths):
                changed |= self.index.update(path)
            return changed

        changed = await loop.run_in_executor(self.indexer, update)
        for path in sorted(changed):
            await self.refresh(path_uri(path))
        if changed:
            self.refresh_lenses()

    # --- the dump behind a uri -----------------------------------------------------------------

    async def dump_state(self, uri: str) -> DumpState | None:
        path = uri_path(uri)
        if path is None:
            return None
        doc = self.workspace.text_documents.get(uri)
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

    def views(self, state: DumpState) -> list[KernelView]:
        if state.graph is None or state.dispatch is None:
            return []
        return [kernel_view(state.graph, k, state.dispatch, self.results) for k in state.graph.kernels]

    # --- diagnostics -------------------------------------------------------------------------------

    async def refresh(self, uri: str) -> None:
        try:
            user = await self.user_kernels.state(uri)
            if user is not None:
                for source, items in self.user_kernels.diagnostics(user).items():
                    self.board.set(uri, source, items)
                self.publish(uri, self.board.combined(uri), user.version)
                return
            state = await self.dump_state(uri)
        except Exception as exc:  # noqa: BLE001 - one bad file never stops the others
            log.exception("reading %s failed", uri)
            self.log(f"reading {uri} failed: {exc}", types.MessageType.Error)
            return
        if state is None:
            self.board.clear(uri)
            if uri in self._published:
                self.publish(uri, [], None)
            return
        if state.problem is not None:
            self.board.set(uri, SOURCE_DUMP, problem_diagnostics(state.problem, state.first_line_length))
            self.board.set(uri, SOURCE_PROFILE, [])
            self.board.set(uri, SOURCE_GATES, [])
        elif state.graph is not None and state.dispatch is not None:
            views = self.views(state)
            self.board.set(uri, SOURCE_DUMP, dump_diagnostics(state.graph, state.dispatch, views,
                                                              state.first_line_length))
            self.board.set(uri, SOURCE_PROFILE, profile_diagnostics(views) + overhead_diagnostics(
                self.results.overheads(state.graph.path), state.first_line_length))
            self.board.set(uri, SOURCE_GATES, gate_diagnostics(views) + config_change_diagnostics(
                self.results.config_change(state.graph.path), state.first_line_length))
        self.publish(uri, self.board.combined(uri), state.version)

    def publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))
        if diagnostics:
            self._published.add(uri)
        else:
            self._published.discard(uri)

    def schedule_refresh(self, uri: str, delay: float = CHANGE_DEBOUNCE_S) -> None:
        loop = asyncio.get_running_loop()
        timer = self._change_timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self._change_timers[uri] = loop.call_later(delay, lambda: loop.create_task(self.refresh(uri)))

    async def refresh_graph(self, graph_path: str) -> None:
        await self.refresh(path_uri(graph_path))
        self.refresh_lenses()

    def refresh_lenses(self) -> None:
        if self.supports_lens_refresh():
            try:
                self.workspace_code_lens_refresh(None)
            except Exception:  # noqa: BLE001 - a refresh is a courtesy
                pass

    # --- features ------------------------------------------------------------------------------------

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        user = await self.user_kernels.state(params.text_document.uri)
        if user is not None:
            lines = self.workspace.get_text_document(params.text_document.uri).lines
            line = params.position.line
            return self.user_kernels.hover(user, line, params.position.character,
                                           lines[line].rstrip("\r\n")) if line < len(lines) else None
        state = await self.dump_state(params.text_document.uri)
        if state is None or state.graph is None or state.dispatch is None:
            return None
        doc = self.workspace.get_text_document(params.text_document.uri)
        line = params.position.line
        if line >= len(doc.lines):
            return None
        found = kernel_named_at(state.graph, doc.lines[line].rstrip("\r\n"), params.position.character)
        if found is None:
            return None
        kernel, start, end = found
        view = kernel_view(state.graph, kernel, state.dispatch, self.results)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(view)),
            range=types.Range(types.Position(line, start), types.Position(line, end)),
        )

    async def code_lenses(self, params: types.CodeLensParams) -> list[types.CodeLens]:
        user = await self.user_kernels.state(params.text_document.uri)
        if user is not None:
            return self.user_kernels.lenses(params.text_document.uri, user, self.runner.active())
        state = await self.dump_state(params.text_document.uri)
        if state is None or state.graph is None:
            return []
        return kernel_lenses(params.text_document.uri, self.views(state), self.runner.active(),
                             self.accepted_for(uri_path(params.text_document.uri) or "", state.graph))

    def accepted_store_dir(self, dump_path: str) -> str | None:
        """The store beside a dump's workspace (None: KERNELOPT_ACCEPTED_DIR or the default)."""
        if os.environ.get("KERNELOPT_ACCEPTED_DIR"):
            return None
        return os.path.join(self.job_cwd(dump_path), ".kernelopt", "accepted")

    def accepted_for(self, dump_path: str, graph: CompiledGraph) -> dict[str, list[Any]]:
        """Accepted-store entries that replace kernels of this graph, by kernel name."""
        try:
            from kernelopt_core.accepted import AcceptedStore
        except ImportError:
            return {}
        store = AcceptedStore(self.accepted_store_dir(dump_path))
        found: dict[str, list[Any]] = {}
        for kernel in graph.kernels:
            entries = store.find_by_source_hash(kernel.source_hash)
            if entries:
                found[kernel.name] = entries
        return found

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
        uri = params.text_document.uri
        start = params.range.start
        only = list(params.context.only) if params.context.only else None
        actions: list[types.CodeAction] = []
        user = await self.user_kernels.state(uri)
        if user is not None:
            kernel = user.file.kernel_at(start.line)
            disk = self.user_kernels.disk_file(user.path)
            disk_kernel = disk.kernel(kernel.name) if disk is not None and kernel is not None else None
            edited = kernel is not None and disk_kernel is not None and disk_kernel.source != kernel.source
            actions = self.user_kernels.actions(uri, user, start.line, only, self.runner.active(), edited)
            return actions if self.supports_action_literals() else [a.command for a in actions if a.command]
        state = await self.dump_state(uri)
        if state is None or state.graph is None or state.dispatch is None:
            return []
        if start.line == 0:  # the graph's first line carries the configuration change
            shown = [d for d in params.context.diagnostics if d.code == "config-change"]
            actions += config_change_actions(uri, self.results.config_change(state.graph.path), diagnostics=shown,
                                             only=only)
        kernel = state.graph.kernel_at(start.line, start.character) or _kernel_on_line(state.graph, start.line)
        if kernel is not None:
            view = kernel_view(state.graph, kernel, state.dispatch, self.results)
            path = uri_path(uri) or ""
            disk = await self.disk_graph(path)
            disk_kernel = disk.kernel(kernel.name) if disk else None
            edited = disk_kernel is not None and disk_kernel.source_hash != kernel.source_hash
            actions += kernel_actions(uri, view, edited=edited, active_jobs=self.runner.active(), only=only)
        if not self.supports_action_literals():
            return [a.command for a in actions if a.command is not None]  # an older client: plain commands
        return actions

    # --- jobs --------------------------------------------------------------------------------------------

    def job_cwd(self, path: str) -> str:
        """Jobs run in the workspace folder holding the dump, so runs land in its .kernelopt/."""
        for root in sorted(self.workspace_roots(), key=len, reverse=True):
            if path.startswith(root.rstrip(os.sep) + os.sep):
                return root
        roots = self.workspace_roots()
        return roots[0] if roots else os.path.dirname(path)

    async def resolve_target(self, argument: Any) -> tuple[str, str, CompiledGraph, TritonKernel]:
        if not isinstance(argument, dict):
            raise CommandError("expected one argument {uri, kernel}")
        uri, name = argument.get("uri"), argument.get("kernel")
        if not isinstance(uri, str) or not isinstance(name, str) or not name:
            raise CommandError("expected one argument {uri, kernel} with both set")
        path = uri_path(uri)
        if path is None or not os.path.isfile(path):
            raise CommandError(f"{uri} is not a file on disk")
        graph = await self.disk_graph(path)
        if graph is None:
            problem = self.index.problem_at(path)
            raise CommandError(f"{path} is not a readable dump" + (f": {problem.problem}" if problem else ""))
        kernel = graph.kernel(name)
        if kernel is None:
            raise CommandError(f"no kernel named {name} in {path} (as saved on disk)")
        return uri, path, graph, kernel

    def start_job(self, kind: str, args: list[str], *, uri: str, kernel: str, graph: CompiledGraph,
                  kernel_hash: str, temp_dir: str | None = None, user_kernel: bool = False) -> Job:
        self.runner.python = self.settings.interpreter or sys.executable
        cwd = self.job_cwd(graph.path)
        request = JobRequest(kind=kind, args=args, device=self.settings.device, cwd=cwd,
                             env=job_env(self.settings), meta={"uri": uri, "kernel": kernel})
        job = self.runner.submit(request, self._on_job_update)
        link = JobLink(job_id=job.id, kind=kind, uri=uri, kernel=kernel, graph_path=graph.path,
                       kernel_hash=kernel_hash, cwd=cwd, temp_dir=temp_dir,
                       kernel_hashes={k.name: k.source_hash for k in graph.kernels}, user_kernel=user_kernel)
        self.links[job.id] = link
        self.notify_status(job, link)
        self._progress_tasks[job.id] = asyncio.get_running_loop().create_task(self._begin_progress(job, link))
        self.refresh_lenses()
        return job

    def notify_status(self, job: Job, link: JobLink, **extra: Any) -> None:
        self.protocol.notify(JOB_STATUS, job_status(job, link, **extra))

    async def _begin_progress(self, job: Job, link: JobLink) -> None:
        if not self.supports_progress():
            return
        token = f"kernelopt-{job.id}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - progress is optional; jobStatus still flows
            self.log(f"no progress for {job.id}: {exc}")
            return
        self.token_jobs[token] = job.id
        link.token = token
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=f"KernelOPT {link.kind} {link.kernel}", cancellable=True, message=job.message, percentage=0))

    def _on_job_update(self, job: Job, event: dict[str, Any] | None) -> None:
        link = self.links.get(job.id)
        if link is None:
            return  # the queued notification during submit: start_job sends it
        if job.finished:
            asyncio.get_running_loop().create_task(self._finish_job(job, link))
            return
        if event is not None and link.token is not None:
            message, percentage = progress_text(event, link.kernel)
            self.work_done_progress.report(link.token, types.WorkDoneProgressReport(
                message=message, percentage=percentage, cancellable=True))
        self.notify_status(job, link)

    async def _finish_job(self, job: Job, link: JobLink) -> None:
        task = self._progress_tasks.pop(job.id, None)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        extra: dict[str, Any] = {}
        summary = job.message
        run: RunRecord | None = None
        if job.state == "done":
            error = _result_error(job.result)
            if error is not None:  # the command ran but could not do the job (bad input, no device)
                job.state = "failed"
                summary = error
            else:
                try:
                    summary, run = self._take_result(job, link)
                except Exception as exc:  # noqa: BLE001 - a malformed result is reported, not raised
                    job.state = "failed"
                    summary = f"could not read the {link.kind} result: {exc}"
        has_diff = run is not None and _non_empty(run.diff_path)
        if run is not None:
            link.run_id = run.run_id
            extra = {"runId": run.run_id, "bestSpeedup": run.speedup}
            if has_diff:
                extra.update(diffPath=run.diff_path, originalUri=path_uri(run.original_kernel_path),
                             optimizedUri=path_uri(run.optimized_kernel_path))
        job.message = summary
        if link.token is not None:
            self.work_done_progress.end(link.token, types.WorkDoneProgressEnd(message=f"{job.state}: {summary}"))
            self.token_jobs.pop(link.token, None)
        if link.temp_dir:
            shutil.rmtree(link.temp_dir, ignore_errors=True)
        # Diagnostics first, so a client that reacts to the final status sees them already.
        await self.refresh_graph(link.graph_path)
        self.notify_status(job, link, **extra)
        self.log(f"{link.kind} {link.kernel} [{job.id}] {job.state}: {summary}"
                 + (f"\n{job.stderr_tail}" if job.state == "failed" and job.stderr_tail else ""))
        if not self.client_shows_job_status() and job.state in ("done", "failed"):
            kind = types.MessageType.Info if job.state == "done" else types.MessageType.Error
            self.message(f"{link.kind} {link.kernel} {job.state}: {summary}", kind)
        self.links.pop(job.id, None)
        if run is not None and has_diff:
            await self.show_file(run.diff_path)

    def _take_result(self, job: Job, link: JobLink) -> tuple[str, RunRecord | None]:
        """Remember what a finished job found; returns a one-line summary (and the optimize run)."""
        result = job.result
        if link.kind == "profile":
            records = profile_records(result, link.graph_path, link.kernel_hashes)
            for record in records:
                self.results.set_profile(record)
            self.results.set_overheads(link.graph_path, overhead_items(result, link.graph_path))
            mine = next((r for r in records if r.kernel == link.kernel), None)
            return (profile_line(mine) if mine else f"profiled {len(records)} kernel(s)"), None
        if link.kind == "verify":
            cascade = result.get("cascade", result) if isinstance(result, dict) else result
            record = gate_record_from_cascade(cascade, graph_path=link.graph_path, kernel=link.kernel,
                                              kind="verify", kernel_hash=link.kernel_hash)
            self.results.set_gates(record)
            return gate_line(record), None
        if link.kind == "optimize":
            run = run_record_from_result(result, graph_path=link.graph_path, kernel=link.kernel,
                                         original_hash=link.kernel_hash, cwd=link.cwd)
            self.results.add_run(run)
            record = gate_record_from_run(run)
            if link.user_kernel and run.optimized_source:  # "applied" compares the kernel function's text
                record.optimized_hash = function_hash(run.optimized_source, link.kernel)
            self.results.set_gates(record)
            overheads = callable_overhead_items(result)
            if overheads is not None:  # the whole callable's, when the run knew the problem
                self.results.set_overheads(link.graph_path, overheads)
            self.results.set_config_change(link.graph_path, result.get("config_change"))
            text = f"{run.decision}, {speedup_text(run.speedup, run.ci)}"
            return (f"{text}: {run.reason}" if run.reason else text), run
        return job.message, None

    async def show_file(self, path: str) -> bool:
        if not self.supports_show_document():
            self.message(f"result written to {path}")
            return False
        try:
            answer = await asyncio.wait_for(self.window_show_document_async(
                types.ShowDocumentParams(uri=path_uri(path), take_focus=True)), timeout=10.0)
        except Exception as exc:  # noqa: BLE001
            self.log(f"window/showDocument {path} failed: {exc}", types.MessageType.Warning)
            return False
        return bool(answer and answer.success)

    # --- server commands ----------------------------------------------------------------------------------

    async def cmd_optimize(self, argument: Any) -> dict[str, Any]:
        if self.user_kernels.handles(argument):
            return self.user_kernels.start("optimize", argument)
        uri, path, graph, kernel = await self.resolve_target(argument)
        job = self.start_job("optimize", optimize_args(path, kernel.name, self.settings), uri=uri,
                             kernel=kernel.name, graph=graph, kernel_hash=kernel.source_hash)
        return {"jobId": job.id}

    async def cmd_profile(self, argument: Any) -> dict[str, Any]:
        if self.user_kernels.handles(argument):
            return self.user_kernels.start("profile", argument)
        uri, path, graph, kernel = await self.resolve_target(argument)
        job = self.start_job("profile", profile_args(path, kernel.name, self.settings), uri=uri,
                             kernel=kernel.name, graph=graph, kernel_hash=kernel.source_hash)
        return {"jobId": job.id}

    async def cmd_verify(self, argument: Any) -> dict[str, Any]:
        if self.user_kernels.handles(argument):
            return await self.user_kernels.verify(argument)
        uri, path, graph, disk_kernel = await self.resolve_target(argument)
        state = await self.dump_state(uri)
        if state is None or state.graph is None:
            problem = state.problem.problem if state and state.problem else "not a dump"
            raise CommandError(f"the open document cannot be read: {problem}")
        edited = state.graph.kernel(disk_kernel.name)
        if edited is None:
            raise CommandError(f"kernel {disk_kernel.name} is not in the open document any more")
        if edited.source == disk_kernel.source:
            raise CommandError(f"{disk_kernel.name} is the same as on disk: edit the kernel first, then verify")
        temp_dir = tempfile.mkdtemp(prefix="kernelopt-verify-")
        candidate = os.path.join(temp_dir, f"{edited.name}.py")
        with open(candidate, "w", encoding="utf-8") as handle:
            handle.write(edited.source)
        job = self.start_job("verify", verify_args(path, edited.name, candidate, self.settings), uri=uri,
                             kernel=edited.name, graph=graph, kernel_hash=source_hash(edited.source),
                             temp_dir=temp_dir)
        return {"jobId": job.id}

    def find_run(self, run_id: Any) -> RunRecord:
        if not isinstance(run_id, str) or not run_id:
            raise CommandError("expected one argument {runId}")
        run = self.results.run(run_id)
        if run is not None:
            return run
        run_dir = find_run_dir(run_id, [*self.workspace_roots(), os.getcwd()])
        if run_dir is None:
            raise CommandError(f"no run {run_id} (looked in .kernelopt/runs/ of the workspace)")
        try:
            run = load_run(run_dir)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.results.add_run(run)
        return run

    async def cmd_show_diff(self, argument: Any) -> dict[str, Any]:
        run = self.find_run(argument.get("runId") if isinstance(argument, dict) else None)
        if not _non_empty(run.diff_path):
            raise CommandError(f"run {run.run_id} has no diff ({run.decision}: {run.reason or 'no result'})")
        await self.show_file(run.diff_path)
        return {"diffPath": run.diff_path, "originalUri": path_uri(run.original_kernel_path),
                "optimizedUri": path_uri(run.optimized_kernel_path)}

    async def cmd_apply(self, argument: Any) -> dict[str, Any]:
        if not isinstance(argument, dict):
            raise CommandError("expected one argument {runId, mode?}")
        run = self.find_run(argument.get("runId"))
        user = self.user_kernels.is_user_run(run)  # a project's own kernel: applied to its file
        mode = argument.get("mode") or ("edit" if user else "store")
        if mode not in ("store", "edit"):
            raise CommandError(f"mode must be 'store' or 'edit', got {mode!r}")
        if user and mode == "store":
            raise CommandError(f"{run.kernel} is the project's own kernel: apply it to its file (mode 'edit')")
        if run.optimized_source is None:
            raise CommandError(f"run {run.run_id} has no optimized kernel to apply ({run.decision})")
        if mode == "store":
            return self.record_accepted(run)
        return await self.apply_edit(run)

    def record_accepted(self, run: RunRecord) -> dict[str, Any]:
        try:
            from kernelopt_core.accepted import (
                AcceptedStore,
                AcceptedStoreError,
                entry_from_cascade,
                entry_from_run,
            )
        except ImportError:
            raise CommandError("the accepted-kernel store is not available in this install; "
                               "use mode 'edit' to put the kernel into the dump") from None
        store_dir = self.accepted_store_dir(run.graph_path)
        try:
            try:
                entry = entry_from_run(run.run_dir)
            except AcceptedStoreError:
                # The run's result.json may name its kernels without their sources: build the entry
                # from what the server read (optimized_kernel.py) and the dump on disk.
                from kernelopt_core.artifacts import parse_output_code

                cascade = run.result.get("cascade") if isinstance(run.result.get("cascade"), dict) else None
                entry = entry_from_cascade(parse_output_code(run.graph_path), run.kernel, run.optimized_source or "",
                                           cascade, run_id=run.run_id)
            entry_id = AcceptedStore(store_dir).add(entry)
        except Exception as exc:  # noqa: BLE001 - the store's own errors, in words
            raise CommandError(f"could not record run {run.run_id}: {exc}") from None
        self.message(f"recorded the optimized {run.kernel} as accepted ({entry_id})")
        self.schedule_refresh(path_uri(run.graph_path), 0.0)
        return {"entryId": entry_id, "mode": "store"}

    async def apply_edit(self, run: RunRecord) -> dict[str, Any]:
        if self.user_kernels.is_user_run(run):
            return await self.user_kernels.apply_edit(run)
        uri = path_uri(run.graph_path)
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            text, version = doc.source, doc.version
        else:
            try:
                with open(run.graph_path, encoding="utf-8") as handle:
                    text, version = handle.read(), None
            except OSError as exc:
                raise CommandError(f"cannot read {run.graph_path}: {exc.strerror}") from None
        state = await self.dump_state(uri)
        graph = state.graph if state is not None else None
        kernel = graph.kernel(run.kernel) if graph is not None else None
        if kernel is None:
            raise CommandError(f"kernel {run.kernel} is not in {run.graph_path} as it stands now")
        try:
            replacement = kernel_source_replacement(text, kernel, run.optimized_source or "")
        except KernelEditError as exc:
            raise CommandError(str(exc)) from None
        edit = workspace_edit(uri, version, replacement, self.supports_document_changes())
        answer = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
            edit=edit, label=f"KernelOPT: apply optimized {run.kernel} (run {run.run_id})"))
        applied = bool(answer and answer.applied)
        if applied:
            self.schedule_refresh(uri, 0.0)
        return {"applied": applied, "mode": "edit",
                "failureReason": getattr(answer, "failure_reason", None) if not applied else None}

    async def cmd_copy_config(self, argument: Any) -> dict[str, Any]:
        """The torch.compile call of the graph's recommended configuration change.

        Returns ``{text, title, verified}``; the VS Code client copies ``text`` to the clipboard.
        For other clients the server shows it (window/showMessage) and, where the client can show
        documents, opens it as ``.kernelopt/suggested_compile.py`` to copy from."""
        doc_uri = argument.get("uri") if isinstance(argument, dict) else None
        path = uri_path(doc_uri) if isinstance(doc_uri, str) else None
        if path is None:
            raise CommandError("expected one argument {uri}")
        state = await self.dump_state(doc_uri)  # type: ignore[arg-type]
        finding = self.results.config_change(state.graph.path if state and state.graph else path)
        snippet = finding.get("snippet") if finding else None
        if not isinstance(snippet, str) or not snippet:
            raise CommandError(f"no configuration change is known for {path}: run optimize on it first")
        assert finding is not None
        verified = bool(finding.get("chosen"))
        rec = finding.get("recommendation")
        title = str(rec.get("title")) if isinstance(rec, dict) else "configuration change"
        if verified:
            assumes = (finding.get("verified") or {}).get("assumes") or "nothing stated"
            status = f"verified through gates 3-4 on the full callable; it assumes {assumes}"
        else:
            status = "not verified: optimize with configuration changes allowed checks it"
        text = f"# KernelOPT: {title}\n# {status}\n{snippet}\n"
        answer: dict[str, Any] = {"text": text, "title": title, "verified": verified}
        if not self.client_writes_clipboard():
            self.message("copy this torch.compile call:\n" + text)
            if self.supports_show_document():
                target = os.path.join(self.job_cwd(path), ".kernelopt", "suggested_compile.py")
                try:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "w", encoding="utf-8") as handle:
                        handle.write(text)
                except OSError as exc:
                    self.log(f"could not write {target}: {exc}", types.MessageType.Warning)
                else:
                    answer["path"] = target
                    await self.show_file(target)
        return answer

    async def cmd_cancel(self, argument: Any) -> dict[str, Any]:
        job_id = argument.get("jobId") if isinstance(argument, dict) else None
        if job_id is not None and not isinstance(job_id, str):
            raise CommandError("jobId must be a string")
        if job_id is not None and self.runner.get(job_id) is None:
            raise CommandError(f"no job {job_id}")
        return {"cancelled": self.runner.cancel(job_id)}

    async def cmd_remove_accepted(self, argument: Any) -> dict[str, Any]:
        entry_id = argument.get("entryId") if isinstance(argument, dict) else None
        if not isinstance(entry_id, str) or not entry_id:
            raise CommandError("expected one argument {entryId}")
        try:
            from kernelopt_core.accepted import AcceptedStore
        except ImportError:
            raise CommandError("the accepted-kernel store is not available in this install") from None
        dump_path = uri_path(argument.get("uri") or "") if isinstance(argument.get("uri"), str) else None
        roots = self.workspace_roots()
        if dump_path:
            store_dir = self.accepted_store_dir(dump_path)
        else:
            store_dir = None if os.environ.get("KERNELOPT_ACCEPTED_DIR") or not roots else \
                os.path.join(roots[0], ".kernelopt", "accepted")
        try:
            AcceptedStore(store_dir).remove(entry_id)
        except Exception as exc:  # noqa: BLE001
            raise CommandError(f"could not remove {entry_id}: {exc}") from None
        if dump_path:
            self.schedule_refresh(path_uri(dump_path), 0.0)
        return {"removed": entry_id}

    def cancel_by_token(self, token: Any) -> None:
        job_id = self.token_jobs.get(str(token))
        if job_id is not None:
            self.runner.cancel(job_id)

    async def close(self) -> None:
        await self.runner.close()
        if self.watcher is not None:
            self.watcher.stop()
        self.indexer.shutdown(wait=False, cancel_futures=True)


def _non_empty(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def _result_error(result: Any) -> str | None:
    """The ``{"error": ...}`` a command reports when it could not run (exit status 2)."""
    if isinstance(result, dict) and isinstance(result.get("error"), str) and result["error"]:
        return result["error"]
    return None


def _kernel_on_line(graph: CompiledGraph, line: int) -> TritonKernel | None:
    for kernel in graph.kernels:
        if kernel.statement_range.start_line <= line <= kernel.statement_range.end_line:
            return kernel
    for launch in graph.launches:
        if launch.line == line:
            return graph.kernel(launch.kernel)
    return None


def uri_path(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.abspath(path) if path else None


def path_uri(path: str) -> str:
    return from_fs_path(path) or f"file://{path}"


# --- registration: each LSP method once ---------------------------------------------------------------


def create_server(*, argv_builder: ArgvBuilder = cli_argv, debounce_s: float = 0.15) -> KernelOptServer:
    server = KernelOptServer(argv_builder=argv_builder, debounce_s=debounce_s)

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: KernelOptServer, params: types.InitializeParams) -> None:
        ls.init_options = params.initialization_options
        ls.client_name = params.client_info.name if params.client_info else ""

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: KernelOptServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        problems = ls.apply_settings(ls.init_options) if ls.init_options else []
        problems += await ls.pull_configuration()
        ls.report_setting_problems(problems)
        await ls.start_watching()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(ls: KernelOptServer, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        problems = ls.apply_settings(raw) if isinstance(raw, dict) and raw.get("kernelopt") else []
        if not problems and not (isinstance(raw, dict) and raw.get("kernelopt")):
            problems = await ls.pull_configuration()
        ls.report_setting_problems(problems)
        await ls.start_watching()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(ls: KernelOptServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        await ls.start_watching()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def on_open(ls: KernelOptServer, params: types.DidOpenTextDocumentParams) -> None:
        await ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(ls: KernelOptServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule_refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(ls: KernelOptServer, params: types.DidSaveTextDocumentParams) -> None:
        path = uri_path(params.text_document.uri)
        if path is not None and not is_skipped(path):
            await ls.on_paths_changed({path})
        await ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def on_close(ls: KernelOptServer, params: types.DidCloseTextDocumentParams) -> None:
        path = uri_path(params.text_document.uri)
        if path is not None:
            ls.documents.forget_buffer(path)
            ls.user_kernels.forget(path)
        await ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: KernelOptServer, params: types.HoverParams) -> types.Hover | None:
        return await ls.hover(params)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def on_code_lens(ls: KernelOptServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        return await ls.code_lenses(params)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.Refactor]))
    async def on_code_action(ls: KernelOptServer,
                             params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
        return await ls.code_actions(params)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def on_progress_cancel(ls: KernelOptServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.cancel_by_token(params.token)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: KernelOptServer, params: Any = None) -> None:
        await ls.close()

    commands = {
        CMD_OPTIMIZE: KernelOptServer.cmd_optimize, CMD_PROFILE: KernelOptServer.cmd_profile,
        CMD_VERIFY: KernelOptServer.cmd_verify, CMD_SHOW_DIFF: KernelOptServer.cmd_show_diff,
        CMD_APPLY: KernelOptServer.cmd_apply, CMD_CANCEL: KernelOptServer.cmd_cancel,
        CMD_REMOVE_ACCEPTED: KernelOptServer.cmd_remove_accepted, CMD_COPY_CONFIG: KernelOptServer.cmd_copy_config,
    }
    for command_id, method in commands.items():
        server.command(command_id)(_command_handler(command_id, method))
    return server


def _command_handler(command_id: str, method: Any) -> Any:
    async def handler(ls: KernelOptServer, *args: Any) -> Any:
        argument = args[0] if args else {}
        try:
            return await method(ls, argument)
        except CommandError as exc:
            ls.log(f"{command_id}: {exc}", types.MessageType.Warning)
            if not ls.client_shows_job_status():
                ls.message(str(exc), types.MessageType.Warning)
            raise
    handler.__name__ = command_id.rsplit(".", 1)[-1]
    return handler
