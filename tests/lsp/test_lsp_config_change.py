"""The configuration change in the editor: an optimize run's whole-callable overheads and its
verified torch.compile change on the graph's first line, and the code action that copies the
call (VS Code's client puts it on the clipboard; other clients get it shown as a message and a
document). The optimize job is tests/lsp/fake_cli.py, whose result carries the findings built
from the H200 recording of relu on 6.4 GB (benchmarks/results/h200/accounting.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from kernelopt_lsp.actions import CMD_COPY_CONFIG, config_change_actions
from kernelopt_lsp.diagnostics import config_change_diagnostics, overhead_diagnostics
from kernelopt_lsp.job_requests import optimize_args
from kernelopt_lsp.results import callable_overhead_items
from kernelopt_lsp.settings import parse_settings
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernelopt_core.config_findings import find_config_changes
from kernelopt_core.recommend import OPTION_MODE, ConfigVerdict

from .conftest import (
    FAKE_SERVER,
    PROFILES,
    copy_dumps,
    final_status,
    initialize,
    make_client,
    open_document,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
RECORDED = json.loads((ROOT / "benchmarks" / "results" / "h200" / "accounting.json").read_text())
KERNEL = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"


def _findings(allowed: bool = True, accept: bool = True) -> dict[str, Any]:
    """What an optimize run reports for the recorded relu case: the mode change verified (or not)."""

    def verify(rec: Any, option: Any) -> ConfigVerdict:
        verdict = ConfigVerdict.from_json(RECORDED["verification"])
        verdict.option, verdict.assumes, verdict.snippet = option.name, option.assumes, option.snippet
        verdict.change = dict(option.change)
        verdict.accepted = accept and option.name == OPTION_MODE
        return verdict

    findings = find_config_changes(RECORDED["accountings"]["relu_6p4GB"], allowed=allowed, verify=verify)
    accounting = dict(RECORDED["accountings"]["relu_6p4GB"])
    return {"accounting": accounting, "config_change": findings.config_change(), "suggestions": findings.suggestions()}


# --- units -------------------------------------------------------------------------------------------


def test_a_verified_change_is_shown_on_the_first_line_with_a_copy_action():
    finding = _findings()["config_change"]
    (diagnostic,) = config_change_diagnostics(finding, first_line_length=12)
    assert diagnostic.range.start.line == 0 and diagnostic.range.end.character == 12
    assert diagnostic.code == "config-change" and diagnostic.source == "kernelopt.gates"
    assert diagnostic.severity == types.DiagnosticSeverity.Information
    assert "verified (gates 3-4 on the full callable): mode='max-autotune-no-cudagraphs' is 2.12× [2.11, 2.13]" \
        in diagnostic.message
    assert "(compiled-callable-cudagraphs → compiled-callable)" in diagnostic.message
    assert "assumes nothing about the caller" in diagnostic.message and "Not a kernel rewrite" in diagnostic.message
    (action,) = config_change_actions("file:///d/output_code.py", finding, diagnostics=[diagnostic])
    assert action.title == "KernelOPT: Copy the torch.compile call (mode='max-autotune-no-cudagraphs', verified 2.12×)"
    assert action.command.command == CMD_COPY_CONFIG and action.command.arguments == [{"uri": "file:///d/output_code.py"}]
    assert action.diagnostics == [diagnostic] and action.is_preferred
    assert config_change_actions("file:///d", finding, diagnostics=[], only=["quickfix"]) == []


def test_an_unverified_or_rejected_change_says_so():
    unverified = _findings(allowed=False)["config_change"]
    (diagnostic,) = config_change_diagnostics(unverified, first_line_length=5)
    assert diagnostic.message.startswith("recommended, not verified: compile with mode='max-autotune-no-cudagraphs'")
    assert "kernelopt.allowConfigChanges" in diagnostic.message
    assert diagnostic.severity == types.DiagnosticSeverity.Hint
    (action,) = config_change_actions("file:///d", unverified, diagnostics=[])
    assert action.title.endswith("(mode='max-autotune-no-cudagraphs', not verified)") and not action.is_preferred
    rejected = _findings(accept=False)["config_change"]
    (diagnostic,) = config_change_diagnostics(rejected, first_line_length=5)
    assert "not accepted by the gates" in diagnostic.message and "mode: 2.12x" in diagnostic.message
    assert config_change_actions("file:///d", rejected, diagnostics=[]) == []  # nothing verified to copy
    assert config_change_diagnostics(None, 5) == [] and config_change_diagnostics({"bad": 1}, 5) == []


def test_the_whole_callable_overheads_read_as_shares_of_the_callable():
    items = callable_overhead_items(_findings())
    assert items is not None and [i["name"] for i in items][0] == "CUDA-graph input copy"
    (diagnostic,) = overhead_diagnostics(items, first_line_length=5)
    assert diagnostic.message.startswith("overhead dominates: 56% of the torch.compile callable's time "
                                         "(compiled-callable-cudagraphs)")
    assert callable_overhead_items({"decision": "fallback"}) is None  # a run without the problem: leave them


def test_the_allow_config_changes_setting_reaches_the_optimize_command():
    settings, problems = parse_settings({"allowConfigChanges": True})
    assert problems == [] and "--allow-config-changes" in optimize_args("/d/output_code.py", "k", settings)
    assert "--allow-config-changes" not in optimize_args("/d/output_code.py", "k", parse_settings({})[0])
    _, problems = parse_settings({"allowConfigChanges": "yes"})
    assert problems == ["kernelopt.allowConfigChanges must be true or false; got 'yes'"]


# --- end to end through the server ------------------------------------------------------------------


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client),
                    params=PROFILES)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, workspace: Path):
    copy_dumps(workspace, ["softmax"])
    (workspace / "fake-cli.json").write_text(json.dumps({"findings": _findings()}))
    await initialize(lsp_client, workspace, request.param, options={"device": "cpu", "allowConfigChanges": True})
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_optimize_shows_the_verified_change_and_copies_its_call(client: LanguageClient, workspace: Path):
    path = workspace / "dumps" / "softmax" / "output_code.py"
    doc = open_document(client, path)
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelopt.server.optimize", arguments=[{"uri": doc, "kernel": KERNEL}]))
    status = await wait_for(lambda: final_status(client, answer["jobId"]), timeout=30, what="optimize to finish")
    assert status["state"] == "done"

    def first_line(code: str) -> list[types.Diagnostic]:
        return [d for d in client.diagnostics.get(doc, []) if d.code == code and d.range.start.line == 0]

    (change,) = await wait_for(lambda: first_line("config-change"), what="the configuration change diagnostic")
    assert "mode='max-autotune-no-cudagraphs' is 2.12×" in change.message
    (overhead,) = first_line("graph-overhead")
    assert "of the torch.compile callable's time (compiled-callable-cudagraphs)" in overhead.message

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=doc),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[change])))
    copy = next(a for a in actions if a.title.startswith("KernelOPT: Copy the torch.compile call"))
    assert "verified 2.12×" in copy.title
    shown_before = len(client.messages)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=copy.command.command, arguments=copy.command.arguments))
    assert result["verified"] is True
    assert 'compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")' in result["text"]
    assert "assumes nothing about the caller" in result["text"]
    if client.profile == "visual-studio-code":  # type: ignore[attr-defined]
        # the extension's middleware writes the clipboard: the server shows nothing more
        assert len(client.messages) == shown_before and "path" not in result
    else:
        message = await wait_for(lambda: [m for m in client.messages[shown_before:] if "torch.compile" in m.message],
                                 what="the call shown as a message")
        assert 'mode="max-autotune-no-cudagraphs"' in message[0].message
        # Neovim shows documents: the call is also in a file to copy from
        assert Path(result["path"]).read_text() == result["text"]
        await wait_for(lambda: client.shown_documents, what="showDocument")
        assert client.shown_documents[-1].uri.endswith(".kernelopt/suggested_compile.py")

    # without a known change the command says why
    with pytest.raises(Exception, match="no configuration change is known"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=CMD_COPY_CONFIG, arguments=[{"uri": doc.replace("softmax", "absent")}]))
