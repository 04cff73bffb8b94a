"""Code actions on a kernel: Optimize, Profile, Verify my edit, Show diff, Apply optimized kernel,
Cancel; and on the graph's first line, Copy the recommended ``torch.compile`` call. Each runs a
server command; none edits anything by itself (Apply asks the client to apply an undoable
WorkspaceEdit only when the user picks it)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from kernelopt_core.job_runner import Job

from .kernel_facts import KernelView
from .lenses import CMD_APPLY, CMD_CANCEL, CMD_OPTIMIZE, CMD_PROFILE, CMD_SHOW_DIFF, CMD_VERIFY

ACTION_KIND = "refactor.kernelopt"  # a refactor sub-kind: shown in the light bulb and refactor menus
# Returns the torch.compile call to copy; VS Code's client writes it to the clipboard, other
# clients get it in a message and a document (docs/lsp-contract.md).
CMD_COPY_CONFIG = "kernelopt.server.copyConfig"


def _wanted(only: list[str] | None) -> bool:
    return not only or any(kind in ("", ACTION_KIND) or ACTION_KIND.startswith(kind + ".") for kind in only)


def config_change_actions(uri: str, finding: dict[str, Any] | None, *, diagnostics: list[types.Diagnostic],
                          only: list[str] | None = None) -> list[types.CodeAction]:
    """Copy the torch.compile call of a recommended configuration change (verified or not, said so)."""
    if not isinstance(finding, dict) or not isinstance(finding.get("recommendation"), dict) or not _wanted(only):
        return []
    if finding.get("allowed") and not finding.get("chosen"):
        return []  # verified and rejected by the gates: nothing to copy
    verified: dict[str, Any] = finding["verified"] if isinstance(finding.get("verified"), dict) else {}
    speedup = verified.get("speedup") if finding.get("chosen") else None
    change = (verified.get("change") if finding.get("chosen") else None) or \
        finding["recommendation"].get("change") or {}
    words = f"mode='{change.get('mode')}'" + (" + static inputs" if change.get("static_inputs") else "")
    state = f"verified {speedup:.2f}×" if isinstance(speedup, (int, float)) else "not verified"
    title = f"KernelOPT: Copy the torch.compile call ({words}, {state})"
    return [types.CodeAction(title=title, kind=ACTION_KIND, diagnostics=diagnostics or None,
                             is_preferred=bool(finding.get("chosen")) or None,
                             command=types.Command(title=title, command=CMD_COPY_CONFIG, arguments=[{"uri": uri}]))]


def kernel_actions(uri: str, view: KernelView, *, edited: bool, active_jobs: list[Job],
                   only: list[str] | None = None) -> list[types.CodeAction]:
    """The actions for one kernel. ``edited``: the open buffer's kernel differs from the file on disk."""
    if not _wanted(only):
        return []
    name = view.kernel.name
    target: dict[str, object] = {"uri": uri, "kernel": name}

    def action(title: str, command: str, argument: dict[str, object], preferred: bool = False) -> types.CodeAction:
        return types.CodeAction(title=title, kind=ACTION_KIND, is_preferred=preferred or None,
                                command=types.Command(title=title, command=command, arguments=[argument]))

    actions = [
        action(f"KernelOPT: Optimize this kernel ({name})", CMD_OPTIMIZE, target),
        action(f"KernelOPT: Profile this kernel ({name})", CMD_PROFILE, target),
    ]
    if edited:
        actions.append(action(f"KernelOPT: Verify my edit of {name} (run the gates)", CMD_VERIFY, target, True))
    run = view.run
    if run is not None:
        actions.append(action(f"KernelOPT: Show diff of run {run.run_id}", CMD_SHOW_DIFF, {"runId": run.run_id}))
        if run.optimized_source is not None:
            actions.append(action(f"KernelOPT: Apply optimized kernel (record as accepted, run {run.run_id})",
                                  CMD_APPLY, {"runId": run.run_id, "mode": "store"}))
            actions.append(action("KernelOPT: Apply optimized kernel to this dump (undoable edit)",
                                  CMD_APPLY, {"runId": run.run_id, "mode": "edit"}))
    for job in active_jobs:
        if job.request.meta.get("uri") == uri and job.request.meta.get("kernel") == name:
            actions.append(action(f"KernelOPT: Cancel {job.request.kind} of {name} ({job.state})",
                                  CMD_CANCEL, {"jobId": job.id}))
    return actions
