"""End to end against the real server process, with the VS Code and the Neovim client profiles:
diagnostics, hovers, code lenses and code actions on fixture dumps; a malformed dump; a dump
that lands in a watched folder after start; bad settings.

The job commands here run tests/lsp/fake_cli.py (see fake_server.py); the real commands are
exercised in test_lsp_real_jobs.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import (
    FAKE_SERVER,
    H200,
    PROFILES,
    copy_dumps,
    initialize,
    make_client,
    open_document,
    uri,
    wait_for,
)

SOFTMAX_KERNEL = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client),
                    params=PROFILES)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, workspace: Path):
    copy_dumps(workspace, ["softmax", "matmul_bias_relu"])
    broken = workspace / "dumps" / "broken" / "output_code.py"
    broken.parent.mkdir(parents=True)
    text = (H200 / "softmax" / "output_code.py").read_text()
    broken.write_text(text[: len(text) // 2])  # cut mid-file, as a crashed compile leaves it
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    await initialize(lsp_client, workspace, request.param)
    yield
    await lsp_client.shutdown_session()


def _line_of(path: Path, needle: str, start: int = 0) -> tuple[int, int]:
    for number, line in enumerate(path.read_text().splitlines()):
        if number >= start and needle in line:
            return number, line.index(needle)
    raise AssertionError(f"{needle!r} not in {path}")


async def test_diagnostics_hover_lenses_actions(client: LanguageClient, workspace: Path):
    dump = workspace / "dumps" / "softmax" / "output_code.py"
    doc = uri(dump)
    # Diagnostics come for indexed dumps without opening them (the workspace is scanned).
    diagnostics = await wait_for(lambda: client.diagnostics.get(doc), what="softmax diagnostics")
    facts = [d for d in diagnostics if d.source == "kernelopt.dump" and d.code == "kernel"]
    assert len(facts) == 1
    name_line, name_col = _line_of(dump, f"{SOFTMAX_KERNEL} = async_compile")
    assert facts[0].range.start == types.Position(name_line, name_col)
    assert facts[0].severity == types.DiagnosticSeverity.Information
    assert "reduction" in facts[0].message and "prepare_softmax_online" in facts[0].message
    assert "1 of 1 launches" in facts[0].message

    # The malformed dump: an Error on line 1 that says what could not be read.
    broken = uri(workspace / "dumps" / "broken" / "output_code.py")
    bad = await wait_for(lambda: client.diagnostics.get(broken), what="broken-dump diagnostics")
    assert bad[0].severity == types.DiagnosticSeverity.Error and bad[0].range.start.line == 0
    assert "could not read this dump" in bad[0].message and "syntax error" in bad[0].message

    open_document(client, dump)
    # Hover on the name where it is assigned, at its def inside the source, and at its launch.
    def_line, def_col = _line_of(dump, f"def {SOFTMAX_KERNEL}")
    launch_line, launch_col = _line_of(dump, f"{SOFTMAX_KERNEL}.run(")
    for line, col in ((name_line, name_col + 3), (def_line, def_col + 6), (launch_line, launch_col + 1)):
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(line, col)))
        assert hover is not None, (line, col)
        assert SOFTMAX_KERNEL in hover.contents.value
        assert "reduction" in hover.contents.value and "prepare_softmax_online`" in hover.contents.value
        assert hover.range.start.line == line
    # Not on a kernel name: no hover.
    assert await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=doc), position=types.Position(1, 3))) is None

    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    titles = [lens.command.title for lens in lenses if lens.command]
    assert "Optimize" in titles and "Profile" in titles
    assert any("not profiled" in t for t in titles)
    optimize = next(lens for lens in lenses if lens.command and lens.command.title == "Optimize")
    assert optimize.command.command == "kernelopt.server.optimize"
    assert list(optimize.command.arguments) == [{"uri": doc, "kernel": SOFTMAX_KERNEL}]
    assert optimize.range.start.line == name_line

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=doc),
        range=types.Range(types.Position(def_line + 3, 4), types.Position(def_line + 3, 4)),
        context=types.CodeActionContext(diagnostics=[])))
    titles = [a.title for a in actions]
    assert any("Optimize this kernel" in t for t in titles)
    assert any("Profile this kernel" in t for t in titles)
    assert not any("Verify" in t for t in titles)  # nothing edited yet


async def test_dump_landing_in_watched_folder(client: LanguageClient, workspace: Path):
    await wait_for(lambda: client.diagnostics.get(uri(workspace / "dumps" / "softmax" / "output_code.py")),
                   what="initial scan")
    # A compile writes a new debug folder after the server started.
    target = workspace / "torch_compile_debug" / "run_1" / "torchinductor" / "model__0_inference_0.0"
    target.mkdir(parents=True)
    shutil.copy(H200 / "rmsnorm" / "output_code.py", target / "output_code.py")
    new_uri = uri(target / "output_code.py")
    diagnostics = await wait_for(lambda: client.diagnostics.get(new_uri), timeout=10, what="new dump diagnostics")
    assert any("triton_red_fused_add_mean_mul_pow_rsqrt_0" in d.message or d.code == "kernel" for d in diagnostics)
    # Deleted: the diagnostics go away.
    shutil.rmtree(workspace / "torch_compile_debug")
    await wait_for(lambda: len(client.diagnostics[new_uri]) == 0, timeout=10, what="diagnostics cleared")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client))
async def badly_configured(lsp_client: LanguageClient, workspace: Path):
    copy_dumps(workspace, ["softmax"])
    lsp_client.set_configuration({"provider": "openai", "beam": {"width": 0}}, section="kernelopt")
    await initialize(lsp_client, workspace, "neovim", options={"device": "tpu", "dumpFolders": ["missing"]})
    yield
    await lsp_client.shutdown_session()


async def test_bad_settings_give_a_message_not_a_crash(badly_configured: LanguageClient, workspace: Path):
    client = badly_configured
    await wait_for(lambda: client.messages, what="a settings message")
    text = " ".join(m.message for m in client.messages)
    for expected in ("kernelopt.device", "kernelopt.provider", "kernelopt.beam.width", "kernelopt.dumpFolders"):
        assert expected in text
    # Still serving: diagnostics for the dump arrive.
    await wait_for(lambda: client.diagnostics.get(uri(workspace / "dumps" / "softmax" / "output_code.py")),
                   what="diagnostics after bad settings")


def test_server_process_never_imports_torch():
    import subprocess

    # The server, and what it imports later (the watcher, the accepted-kernel store).
    code = ("import sys, kernelopt_lsp.main, kernelopt_lsp.server as s, kernelopt_lsp.watch, "
            "kernelopt_core.accepted, kernelopt_core.job_runner; s.create_server(); "
            "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "torch" not in out.stdout and "triton" not in out.stdout, out.stdout


async def test_dump_folders_setting_is_watched_and_dropped(client: LanguageClient, workspace: Path,
                                                          tmp_path: Path):
    outside = tmp_path / "elsewhere"
    copy_dumps(outside, ["transpose"])
    dump_uri = uri(outside / "dumps" / "transpose" / "output_code.py")
    await wait_for(lambda: client.diagnostics.get(uri(workspace / "dumps" / "softmax" / "output_code.py")),
                   what="initial scan")
    assert dump_uri not in client.diagnostics
    client.set_configuration({"dumpFolders": [str(outside)]}, section="kernelopt")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_for(lambda: client.diagnostics.get(dump_uri), what="diagnostics from the dump folder")
    # A new dump in that folder is picked up by the watcher.
    copy_dumps(outside, ["elementwise"])
    await wait_for(lambda: client.diagnostics.get(uri(outside / "dumps" / "elementwise" / "output_code.py")),
                   what="a new dump in the dump folder")
    client.set_configuration({"dumpFolders": []}, section="kernelopt")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_for(lambda: len(client.diagnostics[dump_uri]) == 0, what="diagnostics dropped with the folder")
