"""A project's own Triton kernels as a provider: a document is claimed when it is a kernel file
(user_kernels.py reads it); the answers are its hint, profile and gate diagnostics, the hover, the
code lenses and the code actions of its kernels."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from kernelopt_core.job_runner import Job
from kernelopt_core.userkernels.harness import harness_advice
from kernelopt_core.userkernels.hints import Hint, kernel_facts, kernel_hints, lens_summary
from kernelopt_core.userkernels.model import UserKernel, UserKernelFile

from ..diagnostics import (
    SOURCE_GATES,
    SOURCE_KERNEL,
    SOURCE_PROFILE,
    STALE_SUFFIX,
    gate_record_diagnostic,
    mark_stale,
    to_range,
)
from ..hover import _METRICS, _metric_text, _one_line, _sol_rows, word_at
from ..kernel_facts import duration_text, gate_line, is_applied, is_stale, profile_line, speedup_text
from ..lenses import CMD_APPLY, CMD_CANCEL, CMD_OPTIMIZE, CMD_PROFILE, CMD_SHOW_DIFF, CMD_VERIFY
from ..results import GateRecord, ProfileRecord, ResultStore, RunRecord
from ..user_kernels import UserKernelFiles, UserState
from .base import ClaimedDocument

ACTION_KIND = "refactor.kernelopt"
_SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
             "information": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}


@dataclass
class UserView:
    """One kernel with what the server remembers about it."""

    file: UserKernelFile
    kernel: UserKernel
    profile: ProfileRecord | None
    profile_stale: bool
    gate_records: list[tuple[GateRecord, bool]]
    run: RunRecord | None
    hints: list[Hint]


class UserKernelProvider:
    def __init__(self, files: UserKernelFiles, results: ResultStore) -> None:
        self.files = files
        self.results = results

    async def claim(self, uri: str) -> UserKernelDocument | None:
        state = await self.files.state(uri)
        return UserKernelDocument(self, uri, state) if state is not None else None

    def views(self, state: UserState) -> list[UserView]:
        store = self.results
        out = []
        for kernel in state.file.kernels:
            current = kernel.source_hash
            profile = store.profile(state.path, kernel.name)
            out.append(UserView(
                file=state.file, kernel=kernel, profile=profile,
                profile_stale=profile is not None and profile.source_hash != current,
                gate_records=[(r, is_stale(r, current)) for r in store.gate_records(state.path, kernel.name)],
                run=store.last_run(state.path, kernel.name), hints=kernel_hints(state.file, kernel)))
        return out

    def view_at(self, state: UserState, line: int) -> tuple[UserView, bool] | None:
        """The kernel on a line, and whether the buffer's kernel differs from the file on disk."""
        kernel = state.file.kernel_at(line)
        if kernel is None:
            return None
        disk = self.files.disk_file(state.path)
        disk_kernel = disk.kernel(kernel.name) if disk is not None else None
        edited = disk_kernel is not None and disk_kernel.source != kernel.source
        return next(v for v in self.views(state) if v.kernel.name == kernel.name), edited


class UserKernelDocument(ClaimedDocument[UserKernelProvider, UserState]):
    def diagnostics(self) -> dict[str, list[types.Diagnostic]]:
        return user_diagnostics(self.provider.views(self.state))

    def hover(self, line: int, col: int, line_text: str) -> types.Hover | None:
        return user_hover(self.provider.views(self.state), line, col, line_text)

    def lenses(self, active_jobs: list[Job]) -> list[types.CodeLens]:
        return user_lenses(self.uri, self.provider.views(self.state), active_jobs)

    async def actions(self, params: types.CodeActionParams, active_jobs: list[Job]) -> list[types.CodeAction]:
        found = self.provider.view_at(self.state, params.range.start.line)
        if found is None:
            return []
        view, edited = found
        only = list(params.context.only) if params.context.only else None
        return user_actions(self.uri, view, only, active_jobs, edited)


def user_diagnostics(views: list[UserView]) -> dict[str, list[types.Diagnostic]]:
    """The diagnostics of a file's kernels, by source."""
    hints: list[types.Diagnostic] = []
    profiles: list[types.Diagnostic] = []
    gates: list[types.Diagnostic] = []
    seen: set[tuple[str, int, int]] = set()
    for view in views:
        for hint in view.hints:
            key = (hint.code, hint.range.start_line, hint.range.start_col)
            if key in seen:
                continue
            seen.add(key)
            hints.append(types.Diagnostic(range=to_range(hint.range), severity=_SEVERITY[hint.severity],
                                          source=SOURCE_KERNEL, code=hint.code, message=hint.message))
        where = to_range(view.kernel.name_range)
        if view.profile is not None:
            diagnostic = types.Diagnostic(range=where, severity=types.DiagnosticSeverity.Information,
                                          source=SOURCE_PROFILE, code=view.profile.tier or "profile",
                                          message=profile_line(view.profile))
            profiles.append(mark_stale(diagnostic, view.profile_stale))
        gates.extend(gate_record_diagnostic(record, stale, view.kernel.source_hash, where)
                     for record, stale in view.gate_records)
    return {SOURCE_KERNEL: hints, SOURCE_PROFILE: profiles, SOURCE_GATES: gates}


def user_hover(views: list[UserView], line: int, col: int, line_text: str) -> types.Hover | None:
    """The hover on a kernel's name, wherever it stands on the line."""
    span = word_at(line_text, col)
    if span is None:
        return None
    name = line_text[span[0]:span[1]]
    view = next((v for v in views if v.kernel.name == name), None)
    if view is None:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(view)),
                       range=types.Range(types.Position(line, span[0]), types.Position(line, span[1])))


def user_lenses(uri: str, views: list[UserView], active: list[Job]) -> list[types.CodeLens]:
    out: list[types.CodeLens] = []
    for view in views:
        line = view.kernel.statement_range.start_line
        where = types.Range(types.Position(line, 0), types.Position(line, 0))
        target = {"uri": uri, "kernel": view.kernel.name}
        out.append(types.CodeLens(range=where, command=types.Command(title=lens_title(view), command="")))
        running = [j for j in active if j.request.meta.get("uri") == uri
                   and j.request.meta.get("kernel") == view.kernel.name]
        if running:
            job = running[0]
            out.append(types.CodeLens(range=where, command=types.Command(
                title=f"Cancel {job.request.kind} ({job.state})", command=CMD_CANCEL, arguments=[{"jobId": job.id}])))
        else:
            out.append(types.CodeLens(range=where, command=types.Command(title="Optimize", command=CMD_OPTIMIZE,
                                                                         arguments=[target])))
            out.append(types.CodeLens(range=where, command=types.Command(title="Profile", command=CMD_PROFILE,
                                                                         arguments=[target])))
        if view.run is not None and view.run.optimized_source is not None:
            speed = f" ({view.run.speedup:.2f}×)" if view.run.speedup else ""
            out.append(types.CodeLens(range=where, command=types.Command(
                title=f"Show diff{speed}", command=CMD_SHOW_DIFF, arguments=[{"runId": view.run.run_id}])))
            out.append(types.CodeLens(range=where, command=types.Command(
                title="Apply to this file", command=CMD_APPLY, arguments=[{"runId": view.run.run_id,
                                                                           "mode": "edit"}])))
    return out


def user_actions(uri: str, view: UserView, only: list[str] | None, active: list[Job],
                 edited: bool) -> list[types.CodeAction]:
    """The actions on one kernel. ``edited``: the open buffer's kernel differs from the file on disk."""
    if only and not any(kind in ("", ACTION_KIND) or ACTION_KIND.startswith(kind + ".") for kind in only):
        return []
    kernel = view.kernel
    target = {"uri": uri, "kernel": kernel.name}

    def action(title: str, command: str, argument: dict[str, Any], preferred: bool = False) -> types.CodeAction:
        return types.CodeAction(title=title, kind=ACTION_KIND, is_preferred=preferred or None,
                                command=types.Command(title=title, command=command, arguments=[argument]))

    actions = [action(f"KernelOPT: Optimize this kernel ({kernel.name})", CMD_OPTIMIZE, target),
               action(f"KernelOPT: Profile this kernel ({kernel.name})", CMD_PROFILE, target)]
    if edited:
        actions.append(action(f"KernelOPT: Verify my edit of {kernel.name} (run the gates)", CMD_VERIFY, target,
                              True))
    run = view.run
    if run is not None:
        actions.append(action(f"KernelOPT: Show diff of run {run.run_id}", CMD_SHOW_DIFF, {"runId": run.run_id}))
        if run.optimized_source is not None:
            actions.append(action("KernelOPT: Apply optimized kernel to this file (undoable edit)", CMD_APPLY,
                                  {"runId": run.run_id, "mode": "edit"}))
    for job in active:
        if job.request.meta.get("uri") == uri and job.request.meta.get("kernel") == kernel.name:
            actions.append(action(f"KernelOPT: Cancel {job.request.kind} of {kernel.name} ({job.state})",
                                  CMD_CANCEL, {"jobId": job.id}))
    return actions


def lens_title(view: UserView) -> str:
    profile = view.profile
    if profile is None:
        return lens_summary(view.file, view.kernel)
    parts = []
    share = profile.time_share
    if profile.share_over_whole:  # within noise of the whole call: the figure would flip between runs
        parts.append(f"~100% of {profile.share_basis}")
    elif share is not None:
        parts.append(f"{share * 100:.1f}% of {profile.share_basis}")
    parts.append(profile.tier or "profiled")
    duration = profile.number("duration_ns")
    if duration is not None:
        parts.append(duration_text(duration))
    text = " · ".join(parts)
    return text + " (stale)" if view.profile_stale else text


def hover_markdown(view: UserView) -> str:
    kernel = view.kernel
    harness = view.file.harness_for(kernel.name)
    lines = [f"### `{kernel.name}`", "",
             f"**Triton kernel** in `{os.path.basename(view.file.path)}` · "
             + (f"harness `{harness}`" if harness else f"no harness: {harness_advice(view.file, kernel.name)}"), ""]
    lines += [f"- {fact}" for fact in kernel_facts(view.file, kernel)]
    if kernel.autotune is not None and kernel.autotune.configs:
        lines += ["", "**Autotune configs**", ""]
        lines += [f"- `{c.label()}`" for c in kernel.autotune.configs[:8]]
    if view.hints:
        lines += ["", "**Hints**", ""]
        icons = {"error": "✖", "warning": "⚠", "information": "ℹ", "hint": "·"}
        lines += [f"- {icons[h.severity]} line {h.range.start_line + 1}: {_one_line(h.message, 300)}"
                  for h in view.hints]
    profile = view.profile
    if profile is not None:
        lines += ["", "**Profile**" + (f" *{STALE_SUFFIX.strip()}*" if view.profile_stale else "") + f": "
                  f"{profile_line(profile)}", "", "| metric | value |", "|---|---|"]
        for key, label, unit in _METRICS:
            value = profile.metrics.get(key)
            if value is not None and value != "":
                lines.append(f"| {label} | {_metric_text(value, unit)} |")
        lines += _sol_rows(profile)
        grid, meta = profile.metrics.get("grid"), profile.metrics.get("meta")
        if grid:
            lines.append(f"| captured grid | {tuple(grid)} |")
        if isinstance(meta, dict) and meta:
            lines.append(f"| meta-parameters | {', '.join(f'{k}={v}' for k, v in meta.items())} |")
        autotune = profile.metrics.get("autotune")
        if isinstance(autotune, list) and autotune:
            lines.append(f"| autotune chose | {autotune[0]} |")
        harness_ms = profile.number("harness_ms")
        if harness_ms is not None:
            lines.append(f"| harness call | {harness_ms:.4f} ms |")
        share_note = profile.metrics.get("time_share_note")
        if share_note:  # no share figure: the kernel alone timed over the whole call, said with both spreads
            lines.append(f"| share of harness | ~100%: {_one_line(str(share_note), 300)} |")
    if view.run is not None:
        run = view.run
        lines += ["", f"**Last optimization** (run `{run.run_id}`): {run.decision}, {speedup_text(run.speedup, run.ci)}"]
        if run.reason:
            lines.append(f"> {_one_line(run.reason)}")
    current = kernel.source_hash
    for record, stale in view.gate_records:
        if record.kind == "optimize" and view.run is not None and record.run_id == view.run.run_id and not stale:
            continue
        lines += ["", f"**Last {record.kind}**: {gate_line(record, applied=is_applied(record, current))}"
                      f"{STALE_SUFFIX if stale else ''}"]
    return "\n".join(lines)
