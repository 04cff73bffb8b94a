"""Code lenses above each kernel: ``12.3% of graph · memory-bound · Optimize · Profile``.

The summary is a lens of its own with no command (clients show it as a label); the actions are
lenses that run the server commands of docs/lsp-contract.md.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from kernelopt_core.job_runner import Job

from .kernel_facts import KernelView, lens_summary

CMD_OPTIMIZE = "kernelopt.server.optimize"
CMD_PROFILE = "kernelopt.server.profile"
CMD_VERIFY = "kernelopt.server.verify"
CMD_SHOW_DIFF = "kernelopt.server.showDiff"
CMD_APPLY = "kernelopt.server.apply"
CMD_CANCEL = "kernelopt.server.cancel"
CMD_REMOVE_ACCEPTED = "kernelopt.server.removeAccepted"
SERVER_COMMANDS = (CMD_OPTIMIZE, CMD_PROFILE, CMD_VERIFY, CMD_SHOW_DIFF, CMD_APPLY, CMD_CANCEL, CMD_REMOVE_ACCEPTED)


def kernel_lenses(uri: str, views: list[KernelView], active_jobs: list[Job],
                  accepted: dict[str, list[Any]] | None = None) -> list[types.CodeLens]:
    """``accepted`` maps a kernel name to the accepted-store entries that replace it at run time."""
    lenses: list[types.CodeLens] = []
    accepted = accepted or {}
    for view in views:
        line = view.kernel.name_range.start_line
        where = types.Range(types.Position(line, 0), types.Position(line, 0))
        target = {"uri": uri, "kernel": view.kernel.name}
        lenses.append(types.CodeLens(range=where, command=types.Command(title=lens_summary(view), command="")))
        running = [j for j in active_jobs
                   if j.request.meta.get("uri") == uri and j.request.meta.get("kernel") == view.kernel.name]
        if running:
            job = running[0]
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title=f"Cancel {job.request.kind} ({job.state})", command=CMD_CANCEL, arguments=[{"jobId": job.id}])))
        else:
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title="Optimize", command=CMD_OPTIMIZE, arguments=[target])))
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title="Profile", command=CMD_PROFILE, arguments=[target])))
        if view.run is not None and view.run.optimized_source is not None:
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title=f"Show diff ({view.run.speedup:.2f}×)" if view.run.speedup else "Show diff",
                command=CMD_SHOW_DIFF, arguments=[{"runId": view.run.run_id}])))
        for entry in accepted.get(view.kernel.name, [])[:1]:
            speed = f" ({entry.speedup:.2f}×)" if entry.speedup else ""
            lenses.append(types.CodeLens(range=where, command=types.Command(
                title=f"accepted replacement {entry.id}{speed} · Remove", command=CMD_REMOVE_ACCEPTED,
                arguments=[{"entryId": entry.id, "uri": uri}])))
    return lenses
