"""What a finished job leaves behind: its records in the server's :class:`ResultStore`, and one
line that says how it went."""

from __future__ import annotations

from typing import Any

from .job_requests import JobLink
from .kernel_facts import gate_line, profile_line, speedup_text
from .results import (
    ResultStore,
    RunRecord,
    callable_overhead_items,
    gate_record_from_cascade,
    gate_record_from_run,
    overhead_items,
    profile_records,
    run_record_from_result,
)
from .user_kernels import function_hash


def result_error(result: Any) -> str | None:
    """The ``{"error": ...}`` a command reports when it could not run (exit status 2)."""
    if isinstance(result, dict) and isinstance(result.get("error"), str) and result["error"]:
        return result["error"]
    return None


def remember_result(results: ResultStore, link: JobLink, result: Any) -> tuple[str | None, RunRecord | None]:
    """Remember what a finished job found; returns a one-line summary (None: the job's own
    message says it) and, for optimize, the run."""
    if link.kind == "profile":
        records = profile_records(result, link.graph_path, link.kernel_hashes)
        for record in records:
            results.set_profile(record)
        results.set_overheads(link.graph_path, overhead_items(result, link.graph_path))
        mine = next((r for r in records if r.kernel == link.kernel), None)
        return (profile_line(mine) if mine else f"profiled {len(records)} kernel(s)"), None
    if link.kind == "verify":
        cascade = result.get("cascade", result) if isinstance(result, dict) else result
        verdict = gate_record_from_cascade(cascade, graph_path=link.graph_path, kernel=link.kernel,
                                           kind="verify", kernel_hash=link.kernel_hash)
        results.set_gates(verdict)
        return gate_line(verdict), None
    if link.kind == "optimize":
        run = run_record_from_result(result, graph_path=link.graph_path, kernel=link.kernel,
                                     original_hash=link.kernel_hash, cwd=link.cwd)
        results.add_run(run)
        gates = gate_record_from_run(run)
        if link.user_kernel and run.optimized_source:  # "applied" compares the kernel function's text
            gates.optimized_hash = function_hash(run.optimized_source, link.kernel)
        results.set_gates(gates)
        overheads = callable_overhead_items(result)
        if overheads is not None:  # the whole callable's, when the run knew the problem
            results.set_overheads(link.graph_path, overheads)
        results.set_config_change(link.graph_path, result.get("config_change"))
        text = f"{run.decision}, {speedup_text(run.speedup, run.ci)}"
        return (f"{text}: {run.reason}" if run.reason else text), run
    return None, None
