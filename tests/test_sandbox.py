"""Containment (issue 20): a candidate runs in a fresh process that may write only under its scratch
folder, opens no IP socket, cannot reach into its checker, and is killed or named when it hangs or
crashes; a check that fails itself is "could not verify", never a rejection (issue 17).
"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.sandbox.policy import SandboxPolicy, apply_policy, landlock_abi
from kernelopt_core.sandbox.process import SandboxError, SandboxProcess

needs_landlock = pytest.mark.skipif(landlock_abi() == 0, reason="this kernel has no Landlock")


@needs_landlock
def test_the_policy_allows_scratch_writes_only_and_no_ip_sockets(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    outside = Path(tempfile.gettempdir()) / f"kernelopt-outside-{uuid.uuid4().hex}"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the restricted child reports what it could do, one letter each
        try:
            report = apply_policy(SandboxPolicy(scratch=str(scratch)))
            results = ["C" if report.contained else "c"]
            (scratch / "ok.txt").write_text("fine")
            results.append("S")
            try:
                outside.write_text("escaped")
                results.append("W")
            except OSError:
                results.append("w")
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
                results.append("N")
            except OSError:
                results.append("n")
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
            results.append("U")
            os.write(write_fd, "".join(results).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    seen = os.read(read_fd, 64).decode()
    os.close(read_fd)
    assert seen == "CSwnU", seen  # contained; scratch written; outside refused; IPv4 refused; unix allowed
    assert not outside.exists()


@pytest.fixture(scope="module")
def candidate() -> Any:
    process = SandboxProcess.start("cpu", "cpu")
    yield process
    process.close()


def _fresh() -> SandboxProcess:
    return SandboxProcess.start("cpu", "cpu")


@needs_landlock
def test_a_candidate_process_says_what_holds_and_refuses_a_file_write_at_import() -> None:
    target = Path(tempfile.gettempdir()) / f"kernelopt-planted-{uuid.uuid4().hex}"
    with _fresh() as process:
        assert process.containment.contained, process.containment.summary()
        assert process.pid != os.getpid()
        source = f"open({str(target)!r}, 'w').write('planted')\n"
        reply = process.call("load_kernel", name="k", source=source, device_str="cpu")
    assert not reply["ok"] and reply["violation"], reply
    assert "Permission denied" in reply["error"]
    assert not target.exists()


def test_a_candidate_that_kills_its_process_is_named_and_the_checker_goes_on() -> None:
    process = _fresh()
    with pytest.raises(SandboxError) as raised:
        process.call("load_kernel", name="k", source="import os\nos.abort()\n", device_str="cpu", timeout_s=120)
    assert raised.value.kind == "crash"
    assert "SIGABRT" in str(raised.value)
    with _fresh() as again:  # the next candidate gets a new process
        assert again.call("memory")["ok"]


def test_a_hanging_candidate_is_killed_at_its_time_limit() -> None:
    process = _fresh()
    with pytest.raises(SandboxError) as raised:
        process.call("load_kernel", name="k", source="while True:\n    pass\n", device_str="cpu", timeout_s=3)
    assert raised.value.kind == "timeout"
    assert process.closed
    assert process.zygote.exit_status(process.pid, wait_s=10) is not None  # really gone


def test_replies_are_json_and_files_it_names_must_be_its_own(candidate: SandboxProcess) -> None:
    assert candidate.owns_path(os.path.join(candidate.scratch, "nope")) is False
    assert candidate.owns_path("/etc/passwd") is False
    reply = candidate.call("no-such-command")
    assert reply == {"ok": False, "error": "unknown command 'no-such-command'", "checker_error": True}


def test_a_candidate_process_runs_a_function_named_by_its_import_path(candidate: SandboxProcess) -> None:
    """The sandbox runs what the checker names (gate 1's compile is one) and knows nothing of it."""
    reply = candidate.call("call", callable="json:dumps", kwargs={"obj": {"a": [1, 2]}, "sort_keys": True})
    assert reply == {"ok": True, "result": '{"a": [1, 2]}'}
    assert candidate.call("call", callable="os.path:basename", kwargs={"p": "/x/y.py"})["result"] == "y.py"
    raised = candidate.call("call", callable="json:loads", kwargs={"s": "{"})  # what it runs fails: its verdict
    assert raised["ok"] is False and "JSONDecodeError" in raised["error"] and not raised.get("checker_error")
    for wrong in ("json.dumps", "json:no_such_function", "no_such_module_kernelopt:f"):  # the checker's mistake
        reply = candidate.call("call", callable=wrong, kwargs={})
        assert reply["ok"] is False and reply["checker_error"] is True, (wrong, reply)
    assert candidate.call("hello")["ok"]  # and it goes on serving


def test_the_sandbox_imports_nothing_of_the_gates() -> None:
    """Issue 27: the sandbox is a layer below the gates; a gate names what it wants run, by path."""
    import ast

    sandbox = Path(__file__).resolve().parents[1] / "kernelopt_core" / "sandbox"
    found = []
    for path in sorted(sandbox.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] + [a.name for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(name == "gates" or name.startswith("gates.") or ".gates" in name for name in names):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, f"the sandbox imports gate modules at {', '.join(found)}"


def test_exchange_buffers_are_shared_without_copies(candidate: SandboxProcess, tmp_path: Path) -> None:
    import torch

    from kernelopt_core.sandbox.exchange import ExchangeArena, SharedRef, TensorView, open_shared, view_of

    arena = ExchangeArena("cpu")
    try:
        buffer, ref = arena.allocate(64 * 4)
        mine = buffer.view(torch.float32).as_strided((8, 4), (8, 2), 1)
        mine.copy_(torch.arange(32, dtype=torch.float32).reshape(8, 4))
        theirs = view_of(open_shared(SharedRef.from_json(ref.to_json())),
                         TensorView.from_json(TensorView(0, "torch.float32", (8, 4), (8, 2), 1).to_json()))
        assert torch.equal(theirs, mine)
        theirs.mul_(2.0)  # the other mapping sees the write
        assert torch.equal(mine, torch.arange(32, dtype=torch.float32).reshape(8, 4) * 2)
        assert arena.peak_bytes == 256
    finally:
        arena.close()
    assert not os.path.exists(ref.path or "")


def test_queued_gpu_work_is_finished_before_the_candidate_is_asked(candidate: SandboxProcess,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker's fills and copies of exchange buffers run asynchronously on its own CUDA stream and
    the candidate process launches on another context: each request first waits for them (on the H200,
    correct kernels on 4 GB inputs were seen "leaving outputs unwritten" when the poison fill landed
    after the candidate's stores)."""
    import torch

    from kernelopt_core.sandbox import process as process_module

    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("synchronize"))
    real_send = candidate.connection.send_bytes
    monkeypatch.setattr(candidate.connection, "send_bytes", lambda data: (events.append("send"), real_send(data)))
    candidate.call("no-such-command")
    assert events[:2] == ["synchronize", "send"]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # CUDA never started here: nothing to wait for
    events.clear()
    process_module.settle_device_work()
    assert events == []


def test_an_uncontained_fallback_says_so() -> None:
    """Where the contained process cannot start, the fallback is a fresh process whose report says it
    is not contained and why; it still shares nothing with the checker."""
    with SandboxProcess._start("cpu", "cpu", contain=False, uncontained_reason="the policy broke the driver") as p:
        assert not p.containment.contained
        assert p.containment.filesystem == "NOT restricted"
        assert "the policy broke the driver" in p.containment.notes[0]
        assert p.pid != os.getpid()


def test_only_a_cuda_zygote_gives_up_forking_when_the_driver_was_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU machine Inductor's imports ask the driver for its devices, and a forked child can then no
    longer use CUDA. Only cuda children need it: compile and cpu children still fork (spawned, each one
    re-imported torch: 7.5-11 s per gate-1 compile process on the H200)."""
    from kernelopt_core.sandbox import zygote

    monkeypatch.setattr(zygote, "_fork_is_safe", lambda: False)
    monkeypatch.delenv("KERNELOPT_ZYGOTE_SPAWN", raising=False)
    assert zygote.forks_children("compile") and zygote.forks_children("cpu")
    assert not zygote.forks_children("cuda")
    monkeypatch.setattr(zygote, "_fork_is_safe", lambda: True)
    assert zygote.forks_children("cuda")
    monkeypatch.setenv("KERNELOPT_ZYGOTE_SPAWN", "1")  # asked for: every flavour spawns
    assert not any(zygote.forks_children(f) for f in zygote.FLAVORS)
