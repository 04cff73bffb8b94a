"""A project's own Triton kernels in the editor: hints, hovers, lenses, actions, jobs and the edit.

Any ``.py`` file of the workspace that defines ``@triton.jit`` functions (and is not an Inductor
dump) is read without running it (:mod:`kernelopt_core.userkernels`): each kernel gets static
hints as diagnostics (source ``kernelopt.kernel``), a hover with its facts, code lenses and
actions. Profile, Optimize and Verify run ``kernelopt profile|optimize|verify FILE.py --kernel K``
(with ``--harness`` when the ``harnesses`` setting names one; else the file's
``# kernelopt: harness=`` comment decides). Applying an optimize result edits the kernel
function (and what the candidate changed around it) in the user's file, as one undoable
workspace edit, only when the user asks for it.

The server's own handlers ask :class:`UserKernelFeatures` first for such a file. No torch here.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from kernelopt_core.artifacts.model import CompiledGraph, Launch, TritonKernel, source_hash
from kernelopt_core.jobs import Job
from kernelopt_core.userkernels.extract import (
    ApplyError,
    ExtractError,
    candidate_edits,
    extract_kernel_module,
)
from kernelopt_core.userkernels.harness import harness_advice
from kernelopt_core.userkernels.hints import Hint, kernel_facts, kernel_hints, lens_summary
from kernelopt_core.userkernels.index import is_candidate_user_file
from kernelopt_core.userkernels.model import UserKernel, UserKernelFile
from kernelopt_core.userkernels.parse import UserKernelError, looks_like_user_kernels, parse_user_kernels

from .diagnostics import SOURCE_GATES, SOURCE_KERNEL, SOURCE_PROFILE, STALE_SUFFIX, to_range
from .hover import _METRICS, _metric_text, _one_line, _sol_rows, word_at
from .kernel_facts import gate_line, is_applied, is_stale, profile_line, speedup_text
from .lenses import CMD_APPLY, CMD_CANCEL, CMD_OPTIMIZE, CMD_PROFILE, CMD_SHOW_DIFF, CMD_VERIFY
from .results import GateRecord, ProfileRecord, RunRecord

if TYPE_CHECKING:
    from .server import KernelOptServer

ACTION_KIND = "refactor.kernelopt"
_SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
             "information": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}


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
class UserView:
    """One kernel with what the server remembers about it."""

    file: UserKernelFile
    kernel: UserKernel
    profile: ProfileRecord | None
    profile_stale: bool
    gate_records: list[tuple[GateRecord, bool]]
    run: RunRecord | None
    hints: list[Hint]


class UserKernelFeatures:
    def __init__(self, server: KernelOptServer):
        self.server = server
        self._buffers: dict[str, tuple[tuple[int, str], UserState | None]] = {}

    # --- the file behind a uri ----------------------------------------------------------------

    async def state(self, uri: str) -> UserState | None:
        from .server import uri_path

        path = uri_path(uri)
        if path is None or not is_candidate_user_file(path):
            return None
        doc = self.server.workspace.text_documents.get(uri)
        if doc is None:
            found = self.server.index.user.file_at(path)
            return UserState(path, None, found) if found is not None else None
        text, version = doc.source, doc.version or 0
        key = (version, source_hash(text))
        cached = self._buffers.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        state = await asyncio.get_running_loop().run_in_executor(self.server.indexer, _state_from_text, path, text,
                                                                 version)
        self._buffers[path] = (key, state)
        return state

    def forget(self, path: str) -> None:
        self._buffers.pop(path, None)

    def disk_file(self, path: str) -> UserKernelFile | None:
        found = self.server.index.user.file_at(path)
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

    # --- views, diagnostics --------------------------------------------------------------------

    def views(self, state: UserState) -> list[UserView]:
        store = self.server.results
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

    def diagnostics(self, state: UserState) -> dict[str, list[types.Diagnostic]]:
        hints: list[types.Diagnostic] = []
        profiles: list[types.Diagnostic] = []
        gates: list[types.Diagnostic] = []
        seen: set[tuple[str, int, int]] = set()
        for view in self.views(state):
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
                profiles.append(_stale(diagnostic, view.profile_stale))
            current = view.kernel.source_hash
            for record, stale in view.gate_records:
                applied = is_applied(record, current)
                if applied or record.accepted or record.decision == "matched":
                    severity = types.DiagnosticSeverity.Information
                elif record.kind == "verify" and record.failed_gate in (1, 2, 3):
                    severity = types.DiagnosticSeverity.Error
                else:
                    severity = types.DiagnosticSeverity.Warning
                code = f"gate-{record.failed_gate}" if record.failed_gate else (record.decision or record.kind)
                gates.append(_stale(types.Diagnostic(range=where, severity=severity, source=SOURCE_GATES, code=code,
                                                     message=gate_line(record, applied=applied)), stale))
        return {SOURCE_KERNEL: hints, SOURCE_PROFILE: profiles, SOURCE_GATES: gates}

    # --- hover -------------------------------------------------------------------------------

    def hover(self, state: UserState, line: int, col: int, line_text: str) -> types.Hover | None:
        span = word_at(line_text, col)
        if span is None:
            return None
        name = line_text[span[0]:span[1]]
        view = next((v for v in self.views(state) if v.kernel.name == name), None)
        if view is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(view)),
                           range=types.Range(types.Position(line, span[0]), types.Position(line, span[1])))

    # --- lenses and actions ----------------------------------------------------------------------

    def lenses(self, uri: str, state: UserState, active: list[Job]) -> list[types.CodeLens]:
        out: list[types.CodeLens] = []
        for view in self.views(state):
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

    def actions(self, uri: str, state: UserState, line: int, only: list[str] | None, active: list[Job],
                edited: bool) -> list[types.CodeAction]:
        if only and not any(kind in ("", ACTION_KIND) or ACTION_KIND.startswith(kind + ".") for kind in only):
            return []
        kernel = state.file.kernel_at(line)
        if kernel is None:
            return []
        view = next(v for v in self.views(state) if v.kernel.name == kernel.name)
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

    # --- commands ------------------------------------------------------------------------------

    def handles(self, argument: Any) -> bool:
        from .server import uri_path

        if not isinstance(argument, dict) or not isinstance(argument.get("uri"), str):
            return False
        path = uri_path(argument["uri"])
        return path is not None and is_candidate_user_file(path) and self.disk_file(path) is not None

    def _resolve(self, argument: Any) -> tuple[str, str, UserKernelFile, UserKernel]:
        from .server import CommandError, uri_path

        uri, name = argument.get("uri"), argument.get("kernel")
        if not isinstance(name, str) or not name:
            raise CommandError("expected one argument {uri, kernel} with both set")
        path = uri_path(uri) or ""
        file = self.disk_file(path)
        kernel = file.kernel(name) if file is not None else None
        if file is None or kernel is None:
            raise CommandError(f"no @triton.jit kernel named {name} in {path} (as saved on disk)")
        return uri, path, file, kernel

    def start(self, kind: str, argument: Any) -> dict[str, Any]:
        from .job_requests import optimize_args, profile_args

        uri, path, file, kernel = self._resolve(argument)
        harness = self.server.settings.harness_for(path, kernel.name)
        args = optimize_args(path, kernel.name, self.server.settings, harness) if kind == "optimize" else \
            profile_args(path, kernel.name, self.server.settings, harness)
        job = self.server.start_job(kind, args, uri=uri, kernel=kernel.name, graph=user_graph(file),
                                    kernel_hash=kernel.source_hash, user_kernel=True)
        return {"jobId": job.id}

    async def verify(self, argument: Any) -> dict[str, Any]:
        from .job_requests import verify_args
        from .server import CommandError

        uri, path, file, disk_kernel = self._resolve(argument)
        state = await self.state(uri)
        edited = state.file.kernel(disk_kernel.name) if state is not None else None
        if edited is None:
            raise CommandError(f"kernel {disk_kernel.name} is not in the open document any more")
        if state is not None and edited.source == disk_kernel.source and _helpers_same(state.file, file, edited):
            raise CommandError(f"{disk_kernel.name} is the same as on disk: edit the kernel first, then verify")
        doc = self.server.workspace.text_documents.get(uri)
        text = doc.source if doc is not None else ""
        try:
            module = extract_kernel_module(text, edited.name, path, edited.caller_passed()).source
        except ExtractError as exc:
            raise CommandError(f"the edited {edited.name} cannot be checked on its own: {exc}") from None
        temp_dir = tempfile.mkdtemp(prefix="kernelopt-verify-")
        candidate = os.path.join(temp_dir, f"{edited.name}.py")
        with open(candidate, "w", encoding="utf-8") as handle:
            handle.write(module)
        harness = self.server.settings.harness_for(path, edited.name)
        job = self.server.start_job("verify", verify_args(path, edited.name, candidate, self.server.settings, harness),
                                    uri=uri, kernel=edited.name, graph=user_graph(file), kernel_hash=edited.source_hash,
                                    temp_dir=temp_dir, user_kernel=True)
        return {"jobId": job.id}

    async def apply_edit(self, run: RunRecord) -> dict[str, Any]:
        """The optimized kernel into the user's file: one undoable workspace edit, sent on request only."""
        from .server import CommandError, path_uri

        uri = path_uri(run.graph_path)
        doc = self.server.workspace.text_documents.get(uri)
        if doc is not None:
            text, version = doc.source, doc.version
        else:
            try:
                with open(run.graph_path, encoding="utf-8") as handle:
                    text, version = handle.read(), None
            except OSError as exc:
                raise CommandError(f"cannot read {run.graph_path}: {exc.strerror}") from None
        try:
            edits = candidate_edits(text, run.kernel, run.optimized_source or "", run.graph_path)
        except ApplyError as exc:
            raise CommandError(str(exc)) from None
        if not edits:
            raise CommandError(f"{run.kernel} in {os.path.basename(run.graph_path)} already is the optimized kernel")
        text_edits = [types.TextEdit(range=types.Range(types.Position(e.first, 0),
                                                       types.Position(e.first if e.is_insert else e.last + 1, 0)),
                                     new_text=e.new_text) for e in edits]
        if self.server.supports_document_changes():
            edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=text_edits)])
        else:
            edit = types.WorkspaceEdit(changes={uri: text_edits})
        answer = await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
            edit=edit, label=f"KernelOPT: apply optimized {run.kernel} (run {run.run_id})"))
        applied = bool(answer and answer.applied)
        if applied:
            self.server.schedule_refresh(uri, 0.0)
        return {"applied": applied, "mode": "edit", "edits": len(text_edits),
                "failureReason": getattr(answer, "failure_reason", None) if not applied else None}


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


def _stale(diagnostic: types.Diagnostic, stale: bool) -> types.Diagnostic:
    if stale:
        diagnostic.message += STALE_SUFFIX
        diagnostic.severity = types.DiagnosticSeverity.Hint
        diagnostic.tags = [types.DiagnosticTag.Unnecessary]
    return diagnostic


def lens_title(view: UserView) -> str:
    profile = view.profile
    if profile is None:
        return lens_summary(view.file, view.kernel)
    parts = []
    share = profile.time_share
    if share is not None:
        parts.append(f"{share * 100:.1f}% of {profile.share_basis}")
    elif profile.share_over_whole:
        parts.append(f"~100% of {profile.share_basis}")
    parts.append(profile.tier or "profiled")
    duration = profile.number("duration_ns")
    if duration is not None:
        from .kernel_facts import duration_text

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


__all__ = ["UserKernelFeatures", "function_hash", "hover_markdown", "user_graph"]
