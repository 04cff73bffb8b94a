"""Jobs end to end through the real server process: profile, optimize (progress, diff document,
apply as an undoable edit), verify a user edit (good and bad, then stale), cancel, a crashing job,
and hovers answered while a job runs. The job command is tests/lsp/fake_cli.py (fake_server.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernelopt_core.artifacts import parse_output_code

from .conftest import (
    FAKE_SERVER,
    PROFILES,
    apply_text_edits,
    copy_dumps,
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

KERNEL = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client),
                    params=PROFILES)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, workspace: Path):
    copy_dumps(workspace, ["softmax"])
    await initialize(lsp_client, workspace, request.param,
                     options={"beam": {"width": 1, "iterations": 3, "plans": 1, "retries": 1}, "device": "cpu"})
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def _dump(workspace: Path) -> Path:
    return workspace / "dumps" / "softmax" / "output_code.py"


async def _run(client: LanguageClient, command: str, argument: dict, timeout: float = 30) -> dict:
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command, arguments=[argument]))
    job_id = answer["jobId"]
    return await wait_for(lambda: final_status(client, job_id), timeout=timeout, what=f"{command} to finish")


def _hover(client: LanguageClient, doc: str, path: Path):
    line = next(i for i, text in enumerate(path.read_text().splitlines()) if text.startswith(f"{KERNEL} = "))
    return client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(line, 5)))


async def test_profile_then_optimize_then_apply_and_undo(client: LanguageClient, workspace: Path):
    path = _dump(workspace)
    doc = open_document(client, path)
    original_text = path.read_text()

    status = await _run(client, "kernelopt.server.profile", {"uri": doc, "kernel": KERNEL})
    assert status["state"] == "done" and status["kind"] == "profile" and status["kernel"] == KERNEL
    profile = await wait_for(lambda: [d for d in client.diagnostics.get(doc, []) if d.source == "kernelopt.profile"],
                             what="profile diagnostic")
    assert profile[0].message.startswith("memory-bound · DRAM 62% of peak · occupancy 48% · 31.0% of graph time")
    assert profile[0].severity == types.DiagnosticSeverity.Information
    hover = (await _hover(client, doc, path)).contents.value
    assert "| DRAM throughput | 62% of peak |" in hover and "| achieved occupancy | 48% |" in hover
    assert "1. **UncoalescedGlobalAccess**" in hover and "(est. speedup 25%)" in hover
    assert "31.0% of graph time" in hover
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    assert any(lens.command.title == "31.0% of graph · memory-bound" for lens in lenses)

    status = await _run(client, "kernelopt.server.optimize", {"uri": doc, "kernel": KERNEL})
    assert status["state"] == "done", status
    run_id = status["runId"]
    run_dir = workspace / ".kernelopt" / "runs" / run_id
    assert status["diffPath"] == str(run_dir / "final.diff")
    assert status["originalUri"] == uri(run_dir / "original_kernel.py")
    assert status["optimizedUri"] == uri(run_dir / "optimized_kernel.py")
    assert status["bestSpeedup"] == pytest.approx(1.21)
    # Running updates carried the iteration counters.
    running = [s for s in statuses(client, status["jobId"]) if s["state"] == "running" and "iteration" in s]
    assert [s["iteration"] for s in running] == [1, 2, 3] and running[-1]["iterations"] == 3
    # $/progress: begin, a report per iteration, end.
    token = f"kernelopt-{status['jobId']}"
    reports = await wait_for(lambda: client.progress_reports.get(token), what="progress")
    assert reports[0].kind == "begin" and reports[0].cancellable
    messages = [r.message for r in reports if r.kind == "report"]
    assert messages[:3] == [f"iteration {i}/3 · candidate 1/1 · gate 2 · best {1 + 0.1 * i:.2f}×" for i in (1, 2, 3)]
    assert reports[-1].kind == "end" and "optimized" in reports[-1].message
    # The diff opens via window/showDocument.
    await wait_for(lambda: client.shown_documents, what="showDocument")
    assert client.shown_documents[-1].uri == uri(run_dir / "final.diff")
    gates = await wait_for(lambda: [d for d in client.diagnostics.get(doc, []) if d.source == "kernelopt.gates"],
                           what="gate diagnostic")
    assert f"optimize run {run_id}: optimized 1.21× (95% CI 1.10–1.30×)" in gates[0].message
    hover = (await _hover(client, doc, path)).contents.value
    assert f"**Last optimization** (run `{run_id}`): optimized, 1.21× (95% CI 1.10–1.30×)" in hover

    # Show diff again through the command.
    shown = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.showDiff", arguments=[{"runId": run_id}]))
    assert shown["diffPath"] == str(run_dir / "final.diff")

    # Apply as an edit: exactly the kernel's source string changes.
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.apply", arguments=[{"runId": run_id, "mode": "edit"}]))
    assert answer["applied"] is True
    edit = client.applied_edits[-1].edit
    if client.profile == "visual-studio-code":  # documentChanges, pinned to the open version
        assert edit.document_changes[0].text_document.version == 1
    else:  # Neovim's profile has no documentChanges
        assert edit.document_changes is None and doc in edit.changes
    edits = edits_for(edit, doc)
    assert len(edits) == 1
    applied = apply_text_edits(original_text, edits)
    optimized = (run_dir / "optimized_kernel.py").read_text()
    graph = parse_output_code(str(path), applied)
    assert graph.kernel(KERNEL).source == optimized
    untouched = parse_output_code(str(path), original_text)
    assert [k.name for k in graph.kernels] == [k.name for k in untouched.kernels]
    assert len(graph.launches) == len(untouched.launches)
    replace_document(client, doc, applied, 2)
    applied_diag = await wait_for(lambda: [d for d in client.diagnostics.get(doc, [])
                                           if d.source == "kernelopt.gates" and "applied" in d.message],
                                  what="applied diagnostic")
    assert applied_diag[0].tags is None
    # Undo: the inverse edit gives back the original text byte for byte.
    restored = apply_text_edits(applied, undo_edits(original_text, edits))
    assert restored == original_text
    replace_document(client, doc, restored, 3)

    # The default apply mode records the kernel in the workspace's accepted store, and removes it.
    stored = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.apply", arguments=[{"runId": run_id}]))
    entry = workspace / ".kernelopt" / "accepted" / f"{stored['entryId']}.json"
    saved = json.loads(entry.read_text())
    assert saved["kernel_name"] == KERNEL and saved["accepted_source"] == optimized
    assert saved["run_id"] == run_id
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.removeAccepted", arguments=[{"entryId": stored["entryId"]}]))
    assert not entry.exists()


async def test_verify_good_and_bad_edit_then_stale(client: LanguageClient, workspace: Path):
    path = _dump(workspace)
    doc = open_document(client, path)
    text = path.read_text()
    good = text.replace("tmp0 = tl.load(", "tmp0 = tl.load(  ", 1)
    assert good != text
    replace_document(client, doc, good, 2)
    line = next(i for i, t in enumerate(good.splitlines()) if "tmp0 = tl.load(" in t)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=doc),
        range=types.Range(types.Position(line, 8), types.Position(line, 8)),
        context=types.CodeActionContext(diagnostics=[])))
    verify = next(a for a in actions if "Verify my edit" in a.title)
    assert verify.command.command == "kernelopt.server.verify"

    status = await _run(client, "kernelopt.server.verify", dict(verify.command.arguments[0]))
    assert status["state"] == "done", status
    passed = await wait_for(lambda: [d for d in client.diagnostics.get(doc, [])
                                     if d.source == "kernelopt.gates" and "verify" in d.message], what="verdict")
    assert passed[0].message == "verify: all gates passed · 1.12× (95% CI 1.05–1.19×)"
    assert passed[0].severity == types.DiagnosticSeverity.Information

    bad = good.replace("    tmp0 = tl.load(  ", "    # BAD edit\n    tmp0 = tl.load(  ", 1)
    replace_document(client, doc, bad, 3)
    status = await _run(client, "kernelopt.server.verify", {"uri": doc, "kernel": KERNEL})
    assert status["state"] == "done"

    def rejected():
        return [d for d in client.diagnostics.get(doc, []) if d.source == "kernelopt.gates" and "gate 2" in d.message]

    diag = (await wait_for(rejected, what="rejection"))[0]
    assert diag.message == "verify: rejected at gate 2 (kernel): max abs error 3.1e-01 > 1e-03 on seed 42"
    assert diag.severity == types.DiagnosticSeverity.Error
    # Editing the kernel again makes the verdict stale.
    replace_document(client, doc, bad.replace("# BAD edit", "# BAD edit, reworked"), 4)
    stale = await wait_for(lambda: [d for d in rejected() if "stale" in d.message], what="stale verdict")
    assert stale[0].message.endswith("(stale: kernel changed since this run)")
    assert stale[0].severity == types.DiagnosticSeverity.Hint
    assert list(stale[0].tags) == [types.DiagnosticTag.Unnecessary]


async def test_cancel_running_jobs_and_hover_meanwhile(client: LanguageClient, workspace: Path):
    (workspace / "fake-cli.json").write_text(json.dumps({"sleep": 30}))
    path = _dump(workspace)
    doc = open_document(client, path)
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.optimize", arguments=[{"uri": doc, "kernel": KERNEL}]))
    job_id = answer["jobId"]
    await wait_for(lambda: any(s["state"] == "running" for s in statuses(client, job_id)), what="running")
    pids = await wait_for(lambda: list((workspace / ".kernelopt" / "fake-pids").glob("*")), what="job pid")
    pid = int(pids[0].name)
    # The server answers hovers while the job runs.
    started = time.perf_counter()
    hover = await _hover(client, doc, path)
    assert hover is not None and time.perf_counter() - started < 2.0
    # A second job on the same device waits its turn.
    second = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.profile", arguments=[{"uri": doc, "kernel": KERNEL}]))
    assert statuses(client, second["jobId"])[-1]["state"] == "queued"
    # Cancel the first with the command, the second through $/progress.
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.cancel", arguments=[{"jobId": job_id}]))
    status = await wait_for(lambda: final_status(client, job_id), timeout=10, what="cancelled")
    assert status["state"] == "cancelled"
    await wait_for(lambda: not _alive(pid), timeout=10, what="the job's process to exit")
    token = f"kernelopt-{second['jobId']}"
    await wait_for(lambda: token in client.progress_reports and client.progress_reports[token], what="token")
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    status = await wait_for(lambda: final_status(client, second["jobId"]), timeout=10, what="second cancelled")
    assert status["state"] == "cancelled"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent, the server, reaps it).
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_crashing_job_fails_cleanly(client: LanguageClient, workspace: Path):
    (workspace / "fake-cli.json").write_text(json.dumps({"crash": True}))
    doc = open_document(client, _dump(workspace))
    status = await _run(client, "kernelopt.server.profile", {"uri": doc, "kernel": KERNEL})
    assert status["state"] == "failed"
    assert "exit code 3" in status["message"] and "the fake worker crashed" in status["message"]
    if client.profile == "neovim":  # no jobStatus UI there: the failure is shown as a message
        await wait_for(lambda: any("failed" in m.message for m in client.messages), what="failure message")
    # Commands with bad arguments answer with an error, and the server carries on.
    with pytest.raises(Exception, match="no kernel named nope"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="kernelopt.server.optimize", arguments=[{"uri": doc, "kernel": "nope"}]))
    assert await _hover(client, doc, _dump(workspace)) is not None
