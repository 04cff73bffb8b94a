"""The hook's own behaviour, in-process with a stand-in for Inductor's AsyncCompile.triton (no torch)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import H200_DUMPS

from kernelopt_core.accepted import AcceptedEntry, entry_from_cascade
from kernelopt_core.artifacts import parse_output_code, source_hash
from kernelopt_core.deploy import runtime_hook
from kernelopt_core.deploy.substitution import SubstitutionTable

PASSED = {"accepted": True, "reason": "all gates passed", "speedup": 1.25, "ci": [1.2, 1.3], "timing_path": "module-call"}


class FakeInductor:
    """Records what AsyncCompile.triton was asked to load; can refuse one source."""

    def __init__(self, refuse: str | None = None):
        self.loaded: list[tuple[str, str]] = []
        self.refuse = refuse

    def __call__(self, owner: Any, kernel_name: str, source_code: str, device_str: str = "cuda") -> str:
        if source_code == self.refuse:
            raise RuntimeError("triton compile error: out of resources")
        self.loaded.append((kernel_name, source_code))
        return f"kernel<{source_hash(source_code)[:8]}>"


@pytest.fixture
def kernel() -> tuple[str, str, AcceptedEntry]:
    graph = parse_output_code(str(H200_DUMPS / "softmax" / "output_code.py"))
    (k,) = graph.kernels
    accepted = k.source.replace("@triton.jit\n", "@triton.jit\n# accepted\n", 1)
    entry = entry_from_cascade(graph, k.name, accepted, PASSED, torch_version="2.11.0", triton_version="3.6.0",
                               gpu="NVIDIA H200")
    return k.name, k.source, entry


@pytest.fixture
def hooked(kernel: tuple[str, str, AcceptedEntry], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeInductor]:
    """The hook installed over a fake Inductor, with a table holding the one entry."""
    _, _, entry = kernel
    fake = FakeInductor()
    table = SubstitutionTable()
    table.add_entries([entry], "2.11.0", "3.6.0")
    monkeypatch.delenv(runtime_hook.DISABLE_ENV, raising=False)
    monkeypatch.setattr(runtime_hook, "_STATE", runtime_hook._State(table=table, original=fake))
    yield fake


def test_matching_kernel_gets_the_accepted_source_logged_once(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, caplog: pytest.LogCaptureFixture,
) -> None:
    name, source, entry = kernel
    caplog.set_level(logging.INFO, logger="kernelopt")
    first = runtime_hook._hooked_triton(object(), name, source, "cuda")
    runtime_hook._hooked_triton(object(), name, source, device_str="cuda")  # a second graph, same kernel
    assert hooked.loaded == [(name, entry.accepted_source)] * 2
    assert first == f"kernel<{entry.accepted_hash[:8]}>"
    messages = [r.getMessage() for r in caplog.records if r.name == "kernelopt"]
    assert messages == [f"kernelopt: replaced Triton kernel {name} with accepted entry {entry.id} "
                        "(verified speedup 1.250x (95% CI 1.200-1.300) via module-call, on NVIDIA H200)"]
    assert [(s.kernel, s.entry_id) for s in runtime_hook.substitutions()] == [(name, entry.id)] * 2


def test_other_kernels_pass_through_silently(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, caplog: pytest.LogCaptureFixture,
) -> None:
    name, source, _ = kernel
    caplog.set_level(logging.DEBUG, logger="kernelopt")
    changed = source.replace("8192", "8191", 1)
    runtime_hook._hooked_triton(object(), name, changed)
    assert hooked.loaded == [(name, changed)]
    assert caplog.records == [] and runtime_hook.substitutions() == []


def test_disable_env_is_read_at_load_time(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, source, _ = kernel
    monkeypatch.setenv(runtime_hook.DISABLE_ENV, "1")
    runtime_hook._hooked_triton(object(), name, source)
    assert hooked.loaded == [(name, source)]


def test_accepted_source_that_fails_to_load_falls_back(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, caplog: pytest.LogCaptureFixture,
) -> None:
    name, source, entry = kernel
    hooked.refuse = entry.accepted_source
    result = runtime_hook._hooked_triton(object(), name, source)
    assert result == f"kernel<{source_hash(source)[:8]}>" and hooked.loaded == [(name, source)]
    (record,) = [r for r in caplog.records if r.name == "kernelopt"]
    assert record.levelno == logging.ERROR
    assert f"the accepted {name} (entry {entry.id}) failed to load (RuntimeError" in record.getMessage()
    assert runtime_hook.substitutions() == []


def test_refused_match_is_explained_once(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, caplog: pytest.LogCaptureFixture,
) -> None:
    name, source, entry = kernel
    entry.launch_numels = [[1024, 8192]]  # verified on other shapes than this kernel pins
    for _ in range(3):
        runtime_hook._hooked_triton(object(), name, source)
    assert hooked.loaded == [(name, source)] * 3
    (record,) = [r for r in caplog.records if r.name == "kernelopt"]
    assert record.levelno == logging.WARNING and "outside those verified" in record.getMessage()


def test_a_failing_rule_never_breaks_the_compile(
    kernel: tuple[str, str, AcceptedEntry], hooked: FakeInductor, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    name, source, _ = kernel

    def broken(*args: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(runtime_hook._STATE.table, "decide", broken)
    runtime_hook._hooked_triton(object(), name, source)
    assert hooked.loaded == [(name, source)]
    assert "could not check" in caplog.records[0].getMessage() and "boom" in caplog.records[0].getMessage()


def test_install_respects_disable_without_importing_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime_hook.DISABLE_ENV, "1")
    monkeypatch.setattr(runtime_hook, "_STATE", runtime_hook._State())
    monkeypatch.setattr(runtime_hook, "uninstall", lambda: None)  # nothing installed: nothing to undo
    report = runtime_hook.install(announce=False)
    assert report.enabled is False and report.reason == "KERNELOPT_DISABLE is set"
