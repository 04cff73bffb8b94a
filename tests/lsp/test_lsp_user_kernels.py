"""A project's own Triton kernels through the real server and the real CLI on the CPU backend:
the hint diagnostics, the code lens, the hover, a profile (Triton's interpreter, timed), and an
offline optimize whose accepted diff is applied to the user's file as an undoable edit and undone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import (
    FAKE_SERVER,
    REAL_SERVER,
    ROOT,
    apply_text_edits,
    edits_for,
    final_status,
    initialize,
    make_client,
    open_document,
    replace_document,
    undo_edits,
    wait_for,
)
from .conftest import uri as uri_of

FIXTURE = ROOT / "tests" / "fixtures" / "user_kernels" / "scale_kernels.py"
KERNEL = "scale_kernel"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=REAL_SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, workspace: Path):
    shutil.copy(FIXTURE, workspace / "scale_kernels.py")
    await initialize(lsp_client, workspace, "visual-studio-code",
                     options={"device": "cpu", "beam": {"width": 1, "iterations": 1, "plans": 1, "retries": 1}})
    yield
    await lsp_client.shutdown_session()


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if text in line)


async def _run(client: LanguageClient, command: str, argument: dict, timeout: float) -> dict:
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command, arguments=[argument]))
    job_id = answer["jobId"]
    return await wait_for(lambda: final_status(client, job_id), timeout=timeout, what=f"{command} to finish")


def _rejected_as_noise(client: LanguageClient) -> bool:
    """The last optimize ended with gate 4's "not distinguishable from noise" (its window/logMessage)."""
    messages = [m.message for m in client.log_messages if "optimize" in m.message and " done: " in m.message]
    return bool(messages) and "not distinguishable from noise" in messages[-1]


async def _hover(client: LanguageClient, doc: str, path: Path) -> str:
    line = _line_of(path, f"def {KERNEL}(")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(line, 6)))
    assert hover is not None
    return hover.contents.value


@pytest.mark.timeout(840)  # a backstop: two optimize runs at most
async def test_user_kernel_hints_lens_hover_profile_optimize_apply_undo(client: LanguageClient, workspace: Path):
    path = workspace / "scale_kernels.py"
    original = path.read_text()
    doc = open_document(client, path)

    # Static hints, without running anything: copy_kernel loads without a mask under a cdiv grid.
    hints = await wait_for(lambda: [d for d in client.diagnostics.get(doc, []) if d.source == "kernelopt.kernel"],
                           what="hint diagnostics")
    unmasked = [d for d in hints if d.code == "unmasked-access"]
    assert unmasked and unmasked[0].severity == types.DiagnosticSeverity.Warning
    assert unmasked[0].range.start.line == _line_of(path, "tl.load(x_ptr + offsets), mask")
    assert "triton.cdiv" in unmasked[0].message

    # The lens above the decorators: facts, then Optimize and Profile with {uri, kernel}.
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    mine = [lens for lens in lenses if lens.range.start.line == _line_of(path, "@triton.autotune")]
    titles = [lens.command.title for lens in mine]
    assert titles[0] == "Triton kernel · autotuned over 1 config(s) · 1 loads, 1 stores · harness bench_scale"
    assert titles[1:3] == ["Optimize", "Profile"]
    assert list(mine[1].command.arguments) == [{"uri": doc, "kernel": KERNEL}]

    hover = await _hover(client, doc, path)
    assert f"### `{KERNEL}`" in hover and "harness `bench_scale`" in hover
    assert "@triton.autotune (1 config(s), key ['n'])" in hover and "- `BLOCK=16, num_warps=1`" in hover

    # Profile on the CPU backend: the harness runs in a worker, the launch is captured and timed.
    status = await _run(client, "kernelopt.server.profile", {"uri": doc, "kernel": KERNEL}, timeout=180)
    assert status["state"] == "done", status
    profile = await wait_for(lambda: [d for d in client.diagnostics.get(doc, []) if d.source == "kernelopt.profile"],
                             what="profile diagnostic")
    assert profile[0].message.startswith("timed, no ncu metrics · ")
    assert "of harness time" in profile[0].message
    hover = await _hover(client, doc, path)
    assert "| captured grid | (63,) |" in hover  # cdiv(1000, 16) programs
    assert "| autotune chose | {'BLOCK': 16, 'num_warps': 1" in hover

    # Optimize offline: a larger block is faster on the interpreter; all four gates pass.
    status = await _run(client, "kernelopt.server.optimize", {"uri": doc, "kernel": KERNEL}, timeout=400)
    assert status["state"] == "done", status
    if not status.get("diffPath") and _rejected_as_noise(client):
        # Gate 4 times the interpreter's wall clock: on a machine busy with other tests, a real gain
        # (2.5x here) can come out with an interval too wide to accept. That is the gate being careful,
        # not what this test is about; one more run decides.
        status = await _run(client, "kernelopt.server.optimize", {"uri": doc, "kernel": KERNEL}, timeout=400)
        assert status["state"] == "done", status
    assert status.get("runId") and status.get("diffPath"), status
    diff = Path(status["diffPath"]).read_text()
    assert "-@triton.autotune(configs=[triton.Config({'BLOCK': 16}, num_warps=1)], key=['n'])" in diff
    assert path.read_text() == original  # nothing is written without approval

    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    apply = next(lens for lens in lenses if lens.command.title == "Apply to this file")
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=apply.command.command, arguments=apply.command.arguments))
    assert answer["applied"] is True and answer["mode"] == "edit"
    edits = edits_for(client.applied_edits[-1].edit, doc)
    applied = apply_text_edits(original, edits)
    assert "triton.Config({'BLOCK': 64}, num_warps=1)" in applied
    assert applied.replace(" ", "").count("defscale_kernel(") == 1
    assert applied.split("def scale(x, alpha):")[1] == original.split("def scale(x, alpha):")[1]
    assert apply_text_edits(applied, undo_edits(original, edits)) == original


async def test_a_new_kernel_file_is_watched_like_a_dump(client: LanguageClient, workspace: Path):
    """Written after start-up and never opened: indexed by the watcher, its hints published; deleted: cleared."""
    path = workspace / "lib" / "copy.py"
    path.parent.mkdir()
    path.write_text(FIXTURE.read_text().split("# kernelopt: harness=")[0])
    doc = uri_of(path)
    hints = await wait_for(lambda: client.diagnostics.get(doc), what="hints of the new file")
    assert [d.code for d in hints] == ["unmasked-access"]
    path.unlink()
    await wait_for(lambda: client.diagnostics.get(doc) is not None and not client.diagnostics[doc],
                   what="the hints to clear")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client))
async def fake_client(lsp_client: LanguageClient, workspace: Path):
    shutil.copy(FIXTURE, workspace / "scale_kernels.py")
    await initialize(lsp_client, workspace, "neovim", options={"device": "cpu"})
    yield
    await lsp_client.shutdown_session()


async def test_verify_my_edit_checks_the_edited_kernel_module(fake_client: LanguageClient, workspace: Path):
    """The buffer's edited kernel is taken out as a kernel module and verified (the job command is
    tests/lsp/fake_cli.py, which rejects a candidate containing BAD at gate 2)."""
    path = workspace / "scale_kernels.py"
    doc = open_document(fake_client, path)
    original = path.read_text()

    async def actions(text: str) -> list[str]:
        line = next(i for i, row in enumerate(text.splitlines()) if "tl.store(out_ptr + offsets, x * alpha" in row)
        found = await fake_client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc), range=types.Range(types.Position(line, 4),
                                                                                  types.Position(line, 4)),
            context=types.CodeActionContext(diagnostics=[])))
        return [a.title for a in found]

    assert not any("Verify my edit" in t for t in await actions(original))  # the buffer is the file on disk
    scaled = original.replace("x * alpha", "x * alpha * 1.0", 1)
    flagged = scaled.replace("    tl.store(out_ptr + offsets, x * alpha", "    # BAD\n    tl.store(out_ptr + offsets, x * alpha")
    for version, text, accepted in ((2, scaled, True), (3, flagged, False)):
        replace_document(fake_client, doc, text, version)
        titles = await actions(text)
        assert "KernelOPT: Verify my edit of scale_kernel (run the gates)" in titles
        status = await _run(fake_client, "kernelopt.server.verify", {"uri": doc, "kernel": KERNEL}, timeout=30)
        assert status["state"] == "done" and status["kind"] == "verify"

        def verdict(accepted: bool = accepted) -> list[types.Diagnostic]:
            return [d for d in fake_client.diagnostics.get(doc, []) if d.source == "kernelopt.gates"
                    and ("all gates passed" in d.message) == accepted]

        [diagnostic] = await wait_for(verdict, what="the verify verdict")
        assert diagnostic.severity == (types.DiagnosticSeverity.Information if accepted
                                       else types.DiagnosticSeverity.Error)


async def test_a_files_harness_that_never_launches_a_kernel_is_not_shown_for_it(fake_client: LanguageClient,
                                                                                 workspace: Path):
    """The file's `# kernelopt: harness=bench_scale` runs scale_kernel only: copy_kernel's lens and hover say
    it has no harness, and which function of the file would be one (read from the source, not run)."""
    path = workspace / "scale_kernels.py"
    doc = open_document(fake_client, path)
    lenses = await fake_client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    titles = {lens.range.start.line: lens.command.title for lens in lenses if not lens.command.command}
    assert titles[_line_of(path, "@triton.autotune")].endswith("· harness bench_scale")
    copy_line = _line_of(path, "def copy_kernel(") - 1  # its decorator
    assert titles[copy_line].endswith("· no harness (add `# kernelopt: harness=bench_copy` above it)")
    hover = await fake_client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(copy_line + 1, 6)))
    assert hover is not None
    assert ("no harness: the file's harness bench_scale never launches copy_kernel; bench_copy() in "
            "scale_kernels.py returns (callable, inputs) and launches copy_kernel") in hover.contents.value
