"""The VS Code extension's contributed settings against what the server knows.

VS Code sends the whole ``kernelopt`` section (every contributed setting, at its default when unset) in
``workspace/configuration``: a setting the server does not know shows "bad setting: unknown kernelopt
setting(s) ignored" on every start. The real-host test (client-vscode/host-test) sees that toast; this
test catches it without a browser.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest_lsp
from kernelopt_lsp.settings import CLIENT_KEY_PREFIXES, KNOWN_KEYS, Settings, parse_settings
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import FAKE_SERVER, ROOT, initialize, make_client, open_document

MANIFEST = ROOT / "client-vscode" / "package.json"
USER_KERNEL_FIXTURE = ROOT / "tests" / "fixtures" / "user_kernels" / "scale_kernels.py"


def contributed_defaults() -> dict[str, Any]:
    """``kernelopt.X.Y`` -> default, as package.json contributes them."""
    properties = json.loads(MANIFEST.read_text())["contributes"]["configuration"]["properties"]
    return {key: spec.get("default") for key, spec in properties.items()}


def as_vscode_sends(defaults: dict[str, Any]) -> dict[str, Any]:
    """The section as ``workspace.getConfiguration('kernelopt')`` serialises it: dotted keys nested."""
    section: dict[str, Any] = {}
    for key, value in defaults.items():
        parts = key.removeprefix("kernelopt.").split(".")
        node = section
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return section


def test_every_contributed_setting_is_known_to_the_server():
    keys = [k.removeprefix("kernelopt.") for k in contributed_defaults()]
    unknown = [k for k in keys if k not in KNOWN_KEYS and not k.startswith(CLIENT_KEY_PREFIXES)]
    assert unknown == [], f"package.json contributes settings the server does not know: {unknown}"


def test_every_server_setting_is_contributed():
    contributed = {k.removeprefix("kernelopt.") for k in contributed_defaults()}
    assert sorted(KNOWN_KEYS - contributed) == []


def test_the_section_vscode_sends_at_its_defaults_parses_without_a_problem(tmp_path: Path):
    section = as_vscode_sends(contributed_defaults())
    assert section["trace"] == {"server": "off"} and section["beam"]["width"] == 4
    settings, problems = parse_settings({"kernelopt": section}, root=str(tmp_path))
    assert problems == []
    assert settings == Settings(), "the contributed defaults are the server's defaults"


def test_an_uncontributed_setting_is_reported(tmp_path: Path):
    section = as_vscode_sends({**contributed_defaults(), "kernelopt.newThing": True})
    _, problems = parse_settings(section, root=str(tmp_path))
    assert problems == ["unknown kernelopt setting(s) ignored: newThing"]


def test_user_kernels_is_a_boolean():
    settings, problems = parse_settings({"userKernels": False})
    assert problems == [] and settings.user_kernels is False
    settings, problems = parse_settings({"userKernels": "no"}, Settings(user_kernels=False))
    assert settings.user_kernels is False
    assert problems == ["kernelopt.userKernels must be true or false; got 'no'"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAKE_SERVER, client_factory=make_client))
async def client_without_user_kernels(lsp_client: LanguageClient, workspace: Path):
    shutil.copy(USER_KERNEL_FIXTURE, workspace / "scale_kernels.py")
    await initialize(lsp_client, workspace, "neovim", options={"device": "cpu", "userKernels": False})
    yield
    await lsp_client.shutdown_session()


async def test_user_kernels_off_serves_no_kernel_file(client_without_user_kernels: LanguageClient, workspace: Path):
    """An editor that sends every Python file (Neovim's `filetypes = { 'python' }`) gets nothing for a
    project's own kernels with userKernels false: no lens, no hover, no hint."""
    client = client_without_user_kernels
    path = workspace / "scale_kernels.py"
    doc = open_document(client, path)
    identifier = types.TextDocumentIdentifier(uri=doc)
    line = next(i for i, row in enumerate(path.read_text().splitlines()) if "def scale_kernel(" in row)
    assert not await client.text_document_code_lens_async(types.CodeLensParams(text_document=identifier))
    assert await client.text_document_hover_async(types.HoverParams(
        text_document=identifier, position=types.Position(line, 6))) is None
    assert not client.diagnostics.get(doc)
    assert not [m for m in client.messages if "bad setting" in m.message]
