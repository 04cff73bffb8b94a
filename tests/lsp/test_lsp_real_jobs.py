"""The real job commands through the real server on a CPU-backend graph (examples/gelu_mlp.py
compiled once per session): ``kernelopt profile``, ``kernelopt optimize`` with the offline
provider and a beam of one (progress, the diff document, apply as an edit, undo), hovers while it
runs, and ``kernelopt verify`` on an edit that does not compile. The CPU Triton interpreter makes
these slow (about 100 s and 11 s), so they share one session. ``kernelopt profile`` is covered by
the fake command and by a unit test on its real output shape (test_lsp_units.py).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernelopt_core.artifacts import parse_output_code

from .conftest import (
    REAL_SERVER,
    apply_text_edits,
    edits_for,
    final_status,
    initialize,
    make_client,
    open_document,
    replace_document,
    statuses,
    undo_edits,
    uri,
    wait_for,
)


@pytest.fixture
def cpu_workspace(workspace: Path, cpu_example_dump: Path) -> Path:
    target = workspace / "dumps" / "gelu_mlp"
    shutil.copytree(cpu_example_dump.parent, target)
    return target / "output_code.py"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=REAL_SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, workspace: Path, cpu_workspace: Path):
    await initialize(lsp_client, workspace, "visual-studio-code", options={
        "device": "cpu", "provider": "offline", "beam": {"width": 1, "iterations": 1, "plans": 1, "retries": 1}})
    yield
    await lsp_client.shutdown_session()


# A job reports at least every 10 s (progress or the CLI's heartbeat); this long without a report,
# it is stuck. The whole wait has no fixed limit: a loaded machine only makes the reports slower.
STALL_S = 240.0


async def wait_while_reporting(client: LanguageClient, job_id: str, predicate: Callable[[], Any], what: str) -> Any:
    """Wait for ``predicate`` as long as the job keeps sending $/progress reports."""
    token = f"kernelopt-{job_id}"
    seen, last = -1, time.monotonic()
    while True:
        value = predicate()
        if value:
            return value
        count = len(client.progress_reports.get(token, []))
        if count != seen:
            seen, last = count, time.monotonic()
        if time.monotonic() - last > STALL_S:
            reports = [r.message for r in client.progress_reports.get(token, []) if getattr(r, "message", None)]
            raise AssertionError(f"{what}: no progress report for {STALL_S:g} s (last: {reports[-3:]})")
        await asyncio.sleep(0.05)


async def _run(client: LanguageClient, command: str, argument: dict) -> dict:
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command, arguments=[argument]))
    job_id = answer["jobId"]
    return await wait_while_reporting(client, job_id, lambda: final_status(client, job_id), command)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a backstop only: the waits fail when the job stops reporting
async def test_real_optimize_apply_undo_and_verify(client: LanguageClient, workspace: Path, cpu_workspace: Path):
    text = cpu_workspace.read_text()
    kernel = parse_output_code(str(cpu_workspace), text).kernels[0]
    doc = open_document(client, cpu_workspace)
    await wait_for(lambda: client.diagnostics.get(doc), what="diagnostics of the CPU graph")

    # Optimize with the offline provider and a beam of one; hovers are answered meanwhile.
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.optimize", arguments=[{"uri": doc, "kernel": kernel.name}]))
    job_id = answer["jobId"]
    await wait_while_reporting(client, job_id, lambda: any(s["state"] == "running" for s in statuses(client, job_id)),
                               "optimize running")
    worst = 0.0
    for _ in range(20):
        started = time.perf_counter()
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc),
            position=types.Position(kernel.name_range.start_line, 3)))
        worst = max(worst, time.perf_counter() - started)
        assert hover is not None and kernel.name in hover.contents.value
    assert worst < 1.0, f"a hover took {worst:.2f} s while a job ran"
    status = await wait_while_reporting(client, job_id, lambda: final_status(client, job_id), "optimize")
    assert status["state"] == "done", status
    reports = [r for r in client.progress_reports[f"kernelopt-{job_id}"] if r.kind == "report"]
    stages = " | ".join(r.message or "" for r in reports)
    assert "iteration 1/1" in stages and "candidate" in stages and "gate 2 (kernel)" in stages
    run_id = status["runId"]
    run_dir = workspace / ".kernelopt" / "runs" / run_id
    result = (run_dir / "result.json").read_text()
    gates = [d for d in client.diagnostics[doc] if d.source == "kernelopt.gates"]
    assert gates and gates[0].message.startswith(f"optimize run {run_id}: ")
    if '"decision": "optimized"' in result:
        assert client.shown_documents[-1].uri == uri(run_dir / "final.diff")
        assert status["optimizedUri"] == uri(run_dir / "optimized_kernel.py")
        await _apply_and_undo(client, doc, run_id, run_dir, text, kernel.name, cpu_workspace)
    else:  # gate 4 timing on a busy machine can keep the compiler's kernel: then it is a warning
        assert gates[0].severity in (types.DiagnosticSeverity.Warning, types.DiagnosticSeverity.Information)
        assert "diffPath" not in status

    # Verify an edit that does not compile: the real gates reject it at gate 1.
    broken = kernel.source.replace("tl.load(", "tl.lod(", 1)
    replace_document(client, doc, text.replace(kernel.source, broken, 1), 4)
    status = await _run(client, "kernelopt.server.verify", {"uri": doc, "kernel": kernel.name})
    assert status["state"] == "done", status
    rejected = [d for d in client.diagnostics[doc] if d.source == "kernelopt.gates" and "verify" in d.message]
    assert rejected and rejected[0].message.startswith("verify: gate 1 (static) rejected the candidate")
    assert rejected[0].severity == types.DiagnosticSeverity.Error


async def _apply_and_undo(client: LanguageClient, doc: str, run_id: str, run_dir: Path, text: str, name: str,
                          path: Path) -> None:
    """Apply as an undoable edit: only the kernel's source string changes; undo restores the text."""
    applied_answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.apply", arguments=[{"runId": run_id, "mode": "edit"}]))
    assert applied_answer["applied"] is True
    edits = edits_for(client.applied_edits[-1].edit, doc)
    applied = apply_text_edits(text, edits)
    optimized = (run_dir / "optimized_kernel.py").read_text()
    assert parse_output_code(str(path), applied).kernel(name).source == optimized
    replace_document(client, doc, applied, 2)
    assert apply_text_edits(applied, undo_edits(text, edits)) == text
    replace_document(client, doc, text, 3)
