"""Jobs and progress: the Optimize, Profile, Verify and Cancel commands. Each job runs the CLI in
its own process (kernelopt_core.job_runner); while it runs the client gets ``$/progress`` (cancellable)
and ``kernelopt/jobStatus``; when it ends its results are remembered, the diagnostics and lenses
of its graph are published again, and an optimize run's diff is shown."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.artifacts.model import CompiledGraph, TritonKernel, source_hash
from kernelopt_core.job_runner import Job, JobRequest, JobRunner

from ..client import EditorClient
from ..commands import CommandError, register_command
from ..context import Lifecycle, Republish
from ..job_requests import (
    JobLink,
    job_env,
    job_status,
    optimize_args,
    profile_args,
    progress_text,
    verify_args,
)
from ..job_results import remember_result, result_error
from ..job_target import JobTarget
from ..lenses import CMD_CANCEL, CMD_OPTIMIZE, CMD_PROFILE, CMD_VERIFY
from ..results import ResultStore, RunRecord
from ..settings import Settings
from ..uris import path_uri, uri_path
from ..user_kernels import UserKernelFiles
from ..views import DumpViews
from ..workspace import ProjectWorkspace

JOB_STATUS = "kernelopt/jobStatus"


@dataclass
class JobsContext:
    client: EditorClient
    workspace: ProjectWorkspace  # jobs run in the workspace folder holding the file
    settings: Callable[[], Settings]
    runner: JobRunner
    results: ResultStore  # where finished jobs' findings go
    views: DumpViews
    user_kernels: UserKernelFiles
    diagnostics: Republish
    lifecycle: Lifecycle


class JobTracker:
    """The jobs the server started: their progress while they run, and what is kept when they end."""

    def __init__(self, ctx: JobsContext) -> None:
        self.ctx = ctx
        self.links: dict[str, JobLink] = {}
        self.token_jobs: dict[str, str] = {}
        self._progress_tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, kind: str, args: list[str], target: JobTarget, temp_dir: str | None = None) -> Job:
        settings, runner = self.ctx.settings(), self.ctx.runner
        runner.python = settings.interpreter or sys.executable
        cwd = self.ctx.workspace.job_cwd(target.graph.path)
        request = JobRequest(kind=kind, args=args, device=settings.device, cwd=cwd, env=job_env(settings),
                             meta={"uri": target.uri, "kernel": target.kernel})
        job = runner.submit(request, self._on_update)
        link = JobLink(job_id=job.id, kind=kind, uri=target.uri, kernel=target.kernel, graph_path=target.graph.path,
                       kernel_hash=target.kernel_hash, cwd=cwd, temp_dir=temp_dir,
                       kernel_hashes={k.name: k.source_hash for k in target.graph.kernels},
                       user_kernel=target.user_kernel)
        self.links[job.id] = link
        self._notify(job, link)
        self._progress_tasks[job.id] = asyncio.get_running_loop().create_task(self._begin_progress(job, link))
        self.ctx.client.refresh_lenses()
        return job

    def cancel_by_token(self, token: Any) -> None:
        job_id = self.token_jobs.get(str(token))
        if job_id is not None:
            self.ctx.runner.cancel(job_id)

    def _notify(self, job: Job, link: JobLink, **extra: Any) -> None:
        self.ctx.client.notify(JOB_STATUS, job_status(job, link, **extra))

    async def _begin_progress(self, job: Job, link: JobLink) -> None:
        client = self.ctx.client
        if not client.supports_progress():
            return
        token = f"kernelopt-{job.id}"
        try:
            await client.create_progress(token)
        except Exception as exc:  # noqa: BLE001 - progress is optional; jobStatus still flows
            client.log(f"no progress for {job.id}: {exc}")
            return
        self.token_jobs[token] = job.id
        link.token = token
        client.begin_progress(token, f"KernelOPT {link.kind} {link.kernel}", job.message)

    def _on_update(self, job: Job, event: dict[str, Any] | None) -> None:
        link = self.links.get(job.id)
        if link is None:
            return  # the queued notification during submit: start sends it
        if job.finished:
            asyncio.get_running_loop().create_task(self._finish(job, link))
            return
        if event is not None and link.token is not None:
            message, percentage = progress_text(event, link.kernel)
            self.ctx.client.report_progress(link.token, message, percentage)
        self._notify(job, link)

    async def _finish(self, job: Job, link: JobLink) -> None:
        client = self.ctx.client
        task = self._progress_tasks.pop(job.id, None)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        extra: dict[str, Any] = {}
        summary = job.message
        run: RunRecord | None = None
        if job.state == "done":
            error = result_error(job.result)
            if error is not None:  # the command ran but could not do the job (bad input, no device)
                job.state = "failed"
                summary = error
            else:
                try:
                    line, run = remember_result(self.ctx.results, link, job.result)
                    summary = line if line is not None else summary
                except Exception as exc:  # noqa: BLE001 - a malformed result is reported, not raised
                    job.state = "failed"
                    summary = f"could not read the {link.kind} result: {exc}"
        has_diff = run is not None and run.has_diff()
        if run is not None:
            link.run_id = run.run_id
            extra = {"runId": run.run_id, "bestSpeedup": run.speedup}
            if has_diff:
                extra.update(diffPath=run.diff_path, originalUri=path_uri(run.original_kernel_path),
                             optimizedUri=path_uri(run.optimized_kernel_path))
        job.message = summary
        if link.token is not None:
            client.end_progress(link.token, f"{job.state}: {summary}")
            self.token_jobs.pop(link.token, None)
        if link.temp_dir:
            shutil.rmtree(link.temp_dir, ignore_errors=True)
        # Diagnostics first, so a client that reacts to the final status sees them already.
        await self.ctx.diagnostics.refresh_graph(link.graph_path)
        self._notify(job, link, **extra)
        client.log(f"{link.kind} {link.kernel} [{job.id}] {job.state}: {summary}"
                   + (f"\n{job.stderr_tail}" if job.state == "failed" and job.stderr_tail else ""))
        if not client.shows_job_status() and job.state in ("done", "failed"):
            kind = types.MessageType.Info if job.state == "done" else types.MessageType.Error
            client.message(f"{link.kind} {link.kernel} {job.state}: {summary}", kind)
        self.links.pop(job.id, None)
        if run is not None and has_diff:
            await client.show_file(run.diff_path)


# --- what a command names -------------------------------------------------------------------------


async def job_target(ctx: JobsContext, argument: Any) -> JobTarget:
    """The kernel ``{uri, kernel}`` names, as saved on disk."""
    if ctx.user_kernels.owns(argument):
        return ctx.user_kernels.job_target(argument)
    uri, path, graph, kernel = await _dump_kernel(ctx, argument)
    return JobTarget(uri=uri, path=path, kernel=kernel.name, graph=graph, kernel_hash=kernel.source_hash)


async def verify_target(ctx: JobsContext, argument: Any) -> tuple[JobTarget, str]:
    """The kernel as edited in the open document, and the source the gates check."""
    if ctx.user_kernels.owns(argument):
        return await ctx.user_kernels.verify_target(argument)
    uri, path, graph, disk_kernel = await _dump_kernel(ctx, argument)
    state = await ctx.views.state(uri)
    if state is None or state.graph is None:
        problem = state.problem.problem if state and state.problem else "not a dump"
        raise CommandError(f"the open document cannot be read: {problem}")
    edited = state.graph.kernel(disk_kernel.name)
    if edited is None:
        raise CommandError(f"kernel {disk_kernel.name} is not in the open document any more")
    if edited.source == disk_kernel.source:
        raise CommandError(f"{disk_kernel.name} is the same as on disk: edit the kernel first, then verify")
    target = JobTarget(uri=uri, path=path, kernel=edited.name, graph=graph, kernel_hash=source_hash(edited.source))
    return target, edited.source


async def _dump_kernel(ctx: JobsContext, argument: Any) -> tuple[str, str, CompiledGraph, TritonKernel]:
    if not isinstance(argument, dict):
        raise CommandError("expected one argument {uri, kernel}")
    uri, name = argument.get("uri"), argument.get("kernel")
    if not isinstance(uri, str) or not isinstance(name, str) or not name:
        raise CommandError("expected one argument {uri, kernel} with both set")
    path = uri_path(uri)
    if path is None or not os.path.isfile(path):
        raise CommandError(f"{uri} is not a file on disk")
    graph = await ctx.views.disk_graph(path)
    if graph is None:
        problem = ctx.views.index.problem_at(path)
        raise CommandError(f"{path} is not a readable dump" + (f": {problem.problem}" if problem else ""))
    kernel = graph.kernel(name)
    if kernel is None:
        raise CommandError(f"no kernel named {name} in {path} (as saved on disk)")
    return uri, path, graph, kernel


def register(server: LanguageServer, ctx: JobsContext) -> JobTracker:
    tracker = JobTracker(ctx)
    ctx.lifecycle.on_shutdown(ctx.runner.close)

    async def optimize(argument: Any) -> dict[str, Any]:
        target = await job_target(ctx, argument)
        args = optimize_args(target.path, target.kernel, ctx.settings(), target.harness)
        return {"jobId": tracker.start("optimize", args, target).id}

    async def profile(argument: Any) -> dict[str, Any]:
        target = await job_target(ctx, argument)
        args = profile_args(target.path, target.kernel, ctx.settings(), target.harness)
        return {"jobId": tracker.start("profile", args, target).id}

    async def verify(argument: Any) -> dict[str, Any]:
        target, candidate_source = await verify_target(ctx, argument)
        temp_dir = tempfile.mkdtemp(prefix="kernelopt-verify-")
        candidate = os.path.join(temp_dir, f"{target.kernel}.py")
        with open(candidate, "w", encoding="utf-8") as handle:
            handle.write(candidate_source)
        args = verify_args(target.path, target.kernel, candidate, ctx.settings(), target.harness)
        return {"jobId": tracker.start("verify", args, target, temp_dir=temp_dir).id}

    async def cancel(argument: Any) -> dict[str, Any]:
        job_id = argument.get("jobId") if isinstance(argument, dict) else None
        if job_id is not None and not isinstance(job_id, str):
            raise CommandError("jobId must be a string")
        if job_id is not None and ctx.runner.get(job_id) is None:
            raise CommandError(f"no job {job_id}")
        return {"cancelled": ctx.runner.cancel(job_id)}

    for command_id, command in ((CMD_OPTIMIZE, optimize), (CMD_PROFILE, profile), (CMD_VERIFY, verify),
                                (CMD_CANCEL, cancel)):
        register_command(server, ctx.client, command_id, command)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def on_progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        tracker.cancel_by_token(params.token)

    return tracker
