"""Diagnostics, kept per (source, uri) and published together.

Three sources:
- ``kernelopt.dump``: what the dump says alone: a dump that cannot be read (line 1), a
  vendor-dominated graph (line 1), and static facts on kernels that were not profiled;
- ``kernelopt.profile``: tier and key metrics of profiled kernels, and the overheads outside the
  kernels (line 1: of the graph's ``call()``, or of the whole ``torch.compile`` callable after an
  optimize run that knew the problem);
- ``kernelopt.gates``: the gates' verdicts of the last verify and optimize runs, and the
  configuration change an optimize run recommended and verified (line 1, with a code action that
  copies the ``torch.compile`` call).

Results from a run on an older version of a kernel are stale: said so in the message, shown
as a hint with the ``Unnecessary`` tag.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from kernelopt_core.artifacts import DumpProblem
from kernelopt_core.artifacts.model import CompiledGraph, SourceRange
from kernelopt_core.dispatch import DispatchReport
from kernelopt_core.measure.accounting import OVERHEAD_DOMINATES_SHARE

from .kernel_facts import STALE_SUFFIX, KernelView, gate_line, is_applied, profile_line, static_line
from .results import GateRecord

SOURCE_DUMP = "kernelopt.dump"
SOURCE_PROFILE = "kernelopt.profile"
SOURCE_GATES = "kernelopt.gates"
SOURCE_KERNEL = "kernelopt.kernel"  # static hints on a project's own kernels (user_kernels.py)
SOURCES = (SOURCE_DUMP, SOURCE_KERNEL, SOURCE_PROFILE, SOURCE_GATES)


def first_line_range(first_line_length: int) -> types.Range:
    return types.Range(types.Position(0, 0), types.Position(0, max(first_line_length, 1)))


def to_range(source_range: SourceRange) -> types.Range:
    return types.Range(
        types.Position(source_range.start_line, source_range.start_col),
        types.Position(source_range.end_line, source_range.end_col),
    )


def problem_diagnostics(problem: DumpProblem, first_line_length: int) -> list[types.Diagnostic]:
    where = f" (at line {problem.line + 1})" if problem.line is not None else ""
    return [types.Diagnostic(
        range=first_line_range(first_line_length), severity=types.DiagnosticSeverity.Error,
        source=SOURCE_DUMP, code="unreadable-dump",
        message=f"KernelOPT could not read this dump: {problem.problem}{where}",
    )]


def dump_diagnostics(graph: CompiledGraph, dispatch: DispatchReport, views: list[KernelView],
                     first_line_length: int) -> list[types.Diagnostic]:
    out: list[types.Diagnostic] = []
    head = first_line_range(first_line_length)
    if dispatch.classification == "vendor-dominated":
        out.append(types.Diagnostic(
            range=head, severity=types.DiagnosticSeverity.Warning, source=SOURCE_DUMP, code="vendor-dominated",
            message=f"vendor-dominated graph: {dispatch.evidence}. Rewriting its Triton kernels can "
                    "change little; KernelOPT keeps the vendor calls.",
        ))
    elif dispatch.classification == "no-triton":
        out.append(types.Diagnostic(
            range=head, severity=types.DiagnosticSeverity.Information, source=SOURCE_DUMP, code="no-triton",
            message=f"nothing to optimize: {dispatch.evidence}",
        ))
    for warning in graph.warnings:
        out.append(types.Diagnostic(
            range=head, severity=types.DiagnosticSeverity.Warning, source=SOURCE_DUMP, code="dump-warning",
            message=warning,
        ))
    for view in views:
        if view.profile is not None and not view.profile_stale:
            continue  # the profile source says more
        out.append(types.Diagnostic(
            range=to_range(view.kernel.name_range), severity=types.DiagnosticSeverity.Information,
            source=SOURCE_DUMP, code="kernel", message=static_line(view),
        ))
    return out


def profile_diagnostics(views: list[KernelView]) -> list[types.Diagnostic]:
    out: list[types.Diagnostic] = []
    for view in views:
        if view.profile is None:
            continue
        message = profile_line(view.profile)
        rules = view.profile.rules
        if rules and rules[0].get("name"):
            message += f" · top rule: {rules[0]['name']}"
        out.append(mark_stale(types.Diagnostic(
            range=to_range(view.kernel.name_range), severity=types.DiagnosticSeverity.Information,
            source=SOURCE_PROFILE, code=view.profile.tier or "profile", message=message,
        ), view.profile_stale))
    return out


def overhead_diagnostics(items: list[dict[str, Any]], first_line_length: int) -> list[types.Diagnostic]:
    """Wrapper-level overheads (CUDA-graph input copies, launch gaps, guards) on the graph's first line."""
    shown = [item for item in items if float(item.get("share") or 0.0) > 0.0]
    if not shown:
        return []
    total = sum(float(item.get("share") or 0.0) for item in shown)
    # items from an optimize run's whole-callable accounting are shares of what the user calls
    basis = "graph time" if shown[0].get("basis") != "callable" else \
        f"the torch.compile callable's time ({shown[0].get('path') or 'full callable'})"
    parts = [str(item.get("description") or f"{item['name']}: {float(item['share']):.0%}") for item in shown]
    hints = [f"{item['name']}: {item['suggestion']}" for item in shown if item.get("suggestion")]
    dominates = total >= OVERHEAD_DOMINATES_SHARE
    message = (f"{'overhead dominates: ' if dominates else ''}{total:.0%} of {basis} is outside kernels and "
               f"vendor calls — " + "; ".join(parts))
    if hints:
        message += ". Hint: " + " | ".join(hints)
    return [types.Diagnostic(
        range=first_line_range(first_line_length),
        severity=types.DiagnosticSeverity.Warning if dominates else types.DiagnosticSeverity.Information,
        source=SOURCE_PROFILE, code="graph-overhead", message=message,
    )]


def config_change_line(finding: dict[str, Any]) -> str | None:
    """One line on a recommended configuration change: verified and accepted, rejected, or not verified."""
    rec = finding.get("recommendation")
    if not isinstance(rec, dict):
        return None
    title = str(rec.get("title") or rec.get("change") or "a configuration change")
    verified = finding.get("verified") if isinstance(finding.get("verified"), dict) else None
    if finding.get("chosen") and verified and verified.get("accepted"):
        speedup, ci = verified.get("speedup"), verified.get("ci")
        figure = f"{speedup:.2f}×" if isinstance(speedup, (int, float)) else "faster"
        if isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
            figure += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        change = verified.get("change") or {}
        words = f"mode='{change.get('mode')}'" + (" with static inputs" if change.get("static_inputs") else "")
        return (f"configuration change verified (gates 3-4 on the full callable): {words} is {figure} "
                f"({verified.get('baseline_path')} → {verified.get('candidate_path')}); it assumes "
                f"{verified.get('assumes') or 'nothing stated'}. Not a kernel rewrite. "
                "Code action: copy the torch.compile call.")
    if finding.get("allowed"):
        reasons = "; ".join(f"{v.get('option')}: {v.get('reason')}" for v in finding.get("verifications") or []
                            if isinstance(v, dict))
        return f"recommended: {title}; not accepted by the gates ({reasons or 'no verdict'})"
    return (f"recommended, not verified: {title}. Verify it with kernelopt.allowConfigChanges "
            "(optimize --allow-config-changes).")


def config_change_diagnostics(finding: dict[str, Any] | None, first_line_length: int) -> list[types.Diagnostic]:
    """The configuration change an optimize run recommended for this graph, on its first line."""
    if not isinstance(finding, dict):
        return []
    message = config_change_line(finding)
    if message is None:
        return []
    accepted = bool(finding.get("chosen"))
    return [types.Diagnostic(
        range=first_line_range(first_line_length),
        severity=types.DiagnosticSeverity.Information if accepted else types.DiagnosticSeverity.Hint,
        source=SOURCE_GATES, code="config-change", message=message,
        data={"snippet": finding.get("snippet"), "chosen": finding.get("chosen")},
    )]


def gate_diagnostics(views: list[KernelView]) -> list[types.Diagnostic]:
    return [gate_record_diagnostic(record, stale, view.kernel.source_hash, to_range(view.kernel.name_range))
            for view in views for record, stale in view.gate_records]


def gate_record_diagnostic(record: GateRecord, stale: bool, current_hash: str, where: types.Range) -> types.Diagnostic:
    """One gate result on a kernel (a dump's or a user's), at ``where``; ``current_hash``: the kernel's source now."""
    applied = is_applied(record, current_hash)
    if applied or record.accepted or record.decision == "matched":
        severity = types.DiagnosticSeverity.Information
    elif record.kind == "verify" and record.failed_gate in (1, 2, 3):
        severity = types.DiagnosticSeverity.Error  # the edit is wrong or does not build
    else:
        severity = types.DiagnosticSeverity.Warning
    code = f"gate-{record.failed_gate}" if record.failed_gate else (record.decision or record.kind)
    return mark_stale(types.Diagnostic(range=where, severity=severity, source=SOURCE_GATES, code=code,
                                       message=gate_line(record, applied=applied)), stale)


def mark_stale(diagnostic: types.Diagnostic, stale: bool) -> types.Diagnostic:
    if stale:
        diagnostic.message += STALE_SUFFIX
        diagnostic.severity = types.DiagnosticSeverity.Hint
        diagnostic.tags = [types.DiagnosticTag.Unnecessary]
    return diagnostic


class DiagnosticBoard:
    """Diagnostics per (source, uri); a uri's publication is every source's list together."""

    def __init__(self) -> None:
        self._by_uri: dict[str, dict[str, list[types.Diagnostic]]] = {}

    def set(self, uri: str, source: str, diagnostics: list[types.Diagnostic]) -> None:
        self._by_uri.setdefault(uri, {})[source] = list(diagnostics)

    def get(self, uri: str, source: str) -> list[types.Diagnostic]:
        return list(self._by_uri.get(uri, {}).get(source, []))

    def combined(self, uri: str) -> list[types.Diagnostic]:
        sources = self._by_uri.get(uri, {})
        return [d for source in SOURCES for d in sources.get(source, [])]

    def clear(self, uri: str) -> bool:
        return self._by_uri.pop(uri, None) is not None

    def uris(self) -> list[str]:
        return list(self._by_uri)
