"""What a new user meets in the first hour (issue 21): one vocabulary across commands (help,
exit statuses, --version, --device, vendor share), errors first and on one line, quiet torch,
compile failing fast, interrupt -> resume command, optimize -> deploy, heartbeats, labels.
CLI-level and cheap: no torch in this process, and subprocesses only where the process is the point."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import H200_DUMPS, ROOT
from rich.console import Console
from test_accepted_store import KERNEL, RMSNORM, _write_run

from kernelopt_core.accepted import AcceptedStore
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.cli import common
from kernelopt_core.cli.bench_cmd import level_rows, ratio_text
from kernelopt_core.cli.main import build_parser, main
from kernelopt_core.cli.optimize_cmd import LiveProgress, resume_command
from kernelopt_core.dispatch import analyze
from kernelopt_core.events import HEARTBEAT_STAGE, EventSink, ProgressEvent, heartbeat
from kernelopt_core.measure.statistics import TimingStats
from kernelopt_core.quiet import silence_known_torch_noise
from kernelopt_core.runs import RunFolder
from kernelopt_core.search.rewrites.describe import describe_change
from kernelopt_core.search.rewrites.eviction import rewrite_hints
from kernelopt_core.search.rewrites.kernel_source import LaunchConfig, parse_kernel_module, with_launch_config

CLI = [sys.executable, "-m", "kernelopt_core.cli.main"]


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


# --- help, exit statuses, --version, --device ------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("kernelopt 0.") and "torch " in out and "Python " in out


def test_every_command_documents_itself_the_same_way() -> None:
    commands = _commands()
    assert {"compile", "inspect", "profile", "verify", "optimize", "account", "bench", "demo", "accepted",
            "export"} <= set(commands)
    device_helps = set()
    for name, command in commands.items():
        text = command.format_help()
        assert command.description and len(command.description) > 20, name
        for code in ("0", "2", "130"):
            assert f"\n  {code} " in text, (name, code)
        assert ("\n  1 " in text) == (name in common.EXIT_1), name
        for action in command._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert action.help, (name, action.option_strings)
            if "--device" in action.option_strings:
                device_helps.add(action.help)
        assert "-v, --verbose" in text, name
    assert device_helps == {common.DEVICE_HELP}  # --device described one way
    optimize = commands["optimize"].format_help()
    assert "(default: 4)" in optimize and "(default: offline)" in optimize and "(default: False)" not in optimize


# --- errors: first, one line, exit 2 -------------------------------------------------------------------


def test_inspect_fails_like_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    (tmp_path / "empty").mkdir()
    assert main(["inspect", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no Inductor dumps found") and len(err.strip().splitlines()) == 1


def test_fail_prints_one_line_unless_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    assert common.fail("torch.compile failed: X\npage one\npage two") == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: torch.compile failed: X (run with -v for the full message)"
    common.set_verbose(True)
    try:
        common.fail("torch.compile failed: X\npage one")
    finally:
        common.set_verbose(False)
    assert capsys.readouterr().err.splitlines() == ["error: torch.compile failed: X", "page one"]


def test_error_summary_names_the_cause_and_the_user_line() -> None:
    cause = RuntimeError("Attempting to broadcast a dimension of length 8\nmore")
    try:
        try:
            raise cause
        except RuntimeError as inner:
            raise ValueError('fake call failed\n\nfrom user code:\n   File "/p/model.py", line 10, in forward\n'
                             '    return x') from inner
    except ValueError as outer:
        summary = common.error_summary(outer)
    assert summary == ("RuntimeError: Attempting to broadcast a dimension of length 8 "
                       "(at /p/model.py:10, in forward)")


@pytest.mark.parametrize("content, words", [
    (None, "no such problem file"),
    ("def broken(:\n", ":1: syntax error"),
    ("import torch\nclass Model: pass\n", "no get_inputs, get_init_inputs"),
])
def test_compile_checks_its_input_before_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               content: str | None, words: str) -> None:
    problem = tmp_path / "problem.py"
    if content is not None:
        problem.write_text(content)
    out = tmp_path / "out"
    started = time.monotonic()
    assert main(["compile", str(problem), "--out", str(out), "--device", "cpu"]) == 2
    assert time.monotonic() - started < 5  # no torch import, no compile
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_compile_accepts_definitions_under_if_and_rejects_nothing_valid(tmp_path: Path) -> None:
    from kernelopt_core.cli.compile_cmd import check_problem

    guarded = tmp_path / "guarded.py"
    guarded.write_text("import torch\nif True:\n    class Model: pass\ndef get_inputs(): return []\n"
                       "get_init_inputs = lambda: []\nif __name__ == '__main__':\n    pass\n")
    assert check_problem(str(guarded)) is None
    assert check_problem(str(ROOT / "examples" / "gelu_mlp.py")) is None
    assert "is a folder" in (check_problem(str(tmp_path)) or "")


def test_a_shape_error_is_one_line_with_the_user_line_and_no_torch_log(tmp_path: Path) -> None:
    problem = tmp_path / "shape.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def __init__(self):\n        super().__init__()\n        self.linear = nn.Linear(32, 16)\n\n"
                       "    def forward(self, x):\n        return self.linear(x) + torch.ones(8)\n\n\n"
                       "def get_inputs():\n    return [torch.randn(4, 32)]\n\n\ndef get_init_inputs():\n    return []\n")
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "compile", str(problem), "--out", str(out), "--device", "cpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # no torch log before it (E... fake_tensor.py lines), no traceback
    assert lines[0].startswith("error: torch.compile failed: ") and "broadcast" in lines[0]
    assert f"{problem}:11, in forward" in lines[0] and "-v" in lines[0]
    assert not out.exists()  # the folder it created is removed again


def test_known_torch_noise_is_filtered() -> None:
    silence_known_torch_noise()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        silence_known_torch_noise()  # idempotent, and effective inside a fresh filter state
        warnings.warn("Could not find an active CPU backend. Generated kernels will not be executable!",
                      UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]
    debug = logging.getLogger("torch._inductor.debug")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    debug.addHandler(handler)
    try:
        debug.warning("%s debug trace: %s", "model__0_inference_0", "/tmp/x")
        debug.warning("a real warning")
    finally:
        debug.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["a real warning"]


# --- interrupt and resume; optimize -> deploy ---------------------------------------------------------


class _FakeResult:
    def __init__(self, data: dict[str, Any]):
        self.data = data

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


def _fake_optimize(run_dir: Path, then: BaseException | None = None) -> Any:
    def optimize(path: str, *, kernel: Any = None, config: Any = None, sink: EventSink, resume: Any = None,
                 target: Any = None) -> Any:
        sink.progress(f"run {run_dir.name}: g", stage="start", run_id=run_dir.name, run_dir=str(run_dir))
        if then is not None:
            raise then
        return _FakeResult(json.loads((run_dir / "result.json").read_text()))

    return optimize


def test_interrupt_prints_the_exact_resume_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_dir = runs / "20261201-000000-g-abcd"
    run_dir.mkdir(parents=True)
    monkeypatch.setattr("kernelopt_core.search.pipeline.optimize", _fake_optimize(run_dir, KeyboardInterrupt()))
    assert main(["optimize", str(RMSNORM), "--run-root", str(runs)]) == 130
    err = capsys.readouterr().err
    assert f"run {run_dir.name} keeps everything it measured" in err
    assert f"resume with: kernelopt optimize --resume {run_dir.name} --run-root {runs}" in err
    assert resume_command(run_dir.name, str(run_dir)) == f"kernelopt optimize --resume {run_dir}"  # default root


def test_ctrl_c_on_a_real_run(cpu_example_dump: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    process = subprocess.Popen([*CLI, "optimize", str(cpu_example_dump), "--run-root", str(runs), "--device", "cpu"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    started = threading.Event()

    def watch() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            if " run " in f" {line}":
                started.set()

    threading.Thread(target=watch, daemon=True).start()
    assert started.wait(300), "the run never reported its start"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    (run_dir,) = runs.iterdir()
    assert f"resume with: kernelopt optimize --resume {run_dir.name} --run-root {runs}" in err
    assert (run_dir / "journal.jsonl").is_file() and "Traceback" not in err


def test_optimize_ends_with_the_deploy_command_and_deploy_adds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _write_run(tmp_path / "runs" / "20261201-000000-rmsnorm-abcd")
    monkeypatch.setattr("kernelopt_core.search.pipeline.optimize", _fake_optimize(run_dir))
    store = tmp_path / "store"
    assert main(["optimize", str(RMSNORM), "--run-root", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    # the printed line runs from here as typed (the venv's kernelopt by its path when it is not on PATH)
    assert f"deploy it: {common.kernelopt_command()} accepted add {run_dir}" in out and "kernelopt.enable()" in out
    assert AcceptedStore(str(store)).list() == []
    assert main(["optimize", str(RMSNORM), "--run-root", str(tmp_path / "runs"), "--deploy", "--store", str(store),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = AcceptedStore(str(store)).list()
    assert data["deployed"] == {"store": str(store), "entries": [entry.id]} and entry.kernel_name == KERNEL
    assert data["deploy_command"] == f"kernelopt accepted add {run_dir}"


# --- enable() says what it replaced, and why nothing ----------------------------------------------------


def test_enable_explains_why_nothing_was_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_deploy_hook import PASSED, FakeInductor

    from kernelopt_core.accepted import entry_from_cascade
    from kernelopt_core.deploy import runtime_hook
    from kernelopt_core.deploy.substitution import SubstitutionTable

    graph = parse_output_code(str(H200_DUMPS / "softmax" / "output_code.py"))
    (kernel,) = graph.kernels
    entry = entry_from_cascade(graph, kernel.name, kernel.source.replace("@triton.jit\n", "@triton.jit\n# a\n", 1),
                               PASSED, torch_version="2.11.0", triton_version="3.6.0", gpu="NVIDIA H200")
    table = SubstitutionTable()
    table.add_entries([entry], "2.11.0", "3.6.0")
    state = runtime_hook._State(table=table, original=FakeInductor(), backend_note="no CUDA GPU, and ...")
    monkeypatch.setattr(runtime_hook, "_STATE", state)
    monkeypatch.delenv(runtime_hook.DISABLE_ENV, raising=False)
    assert "Inductor loaded no Triton kernel in this process (no CUDA GPU" in runtime_hook.usage_summary()
    runtime_hook._hooked_triton(object(), kernel.name, kernel.source.replace("8192", "8191", 1))
    assert f"{kernel.name} was loaded, but its source differs" in runtime_hook.usage_summary()
    runtime_hook._hooked_triton(object(), kernel.name, kernel.source)
    assert runtime_hook.usage_summary() == f"kernelopt: 1 accepted kernel(s) in use: {kernel.name}"
    report = runtime_hook.EnableReport(True, "enabled", "/store", 1, [], [kernel.name], ["no CUDA GPU"])
    assert str(report) == ("kernelopt: enabled, but no kernel can be replaced in this process: no CUDA GPU; the "
                           f"store has 1 accepted kernel(s) from /store ({kernel.name})")
    report = runtime_hook.EnableReport(True, "enabled", "/store", 1, [], [kernel.name])
    assert str(report) == (f"kernelopt: 1 accepted kernel(s) from /store will replace {kernel.name} when "
                           "torch.compile loads them")
    assert "nothing can be replaced" in str(runtime_hook.EnableReport(True, "the store is empty", "/s"))


def test_enable_on_a_cpu_without_the_triton_backend_says_so() -> None:
    from kernelopt_core.deploy.runtime_hook import _no_triton_backend

    class NoCuda:
        class cuda:  # noqa: N801 - torch's attribute name
            @staticmethod
            def is_available() -> bool:
                return False

    note = _no_triton_backend(NoCuda())
    assert note is not None and "torch.compile writes C++ kernels for the CPU" in note


# --- one vocabulary: vendor share, noise, bench figures, labels ------------------------------------------


def test_vendor_share_is_always_a_share_of_graph_time() -> None:
    graph = parse_output_code(str(H200_DUMPS / "matmul_bias_relu" / "output_code.py"))
    untimed = analyze(graph).to_json()
    assert untimed["vendor_share"] is None and untimed["share_basis"] == "launches"
    assert untimed["launch_counts"] == {"triton": 1, "vendor": 1, "total": 2}
    assert "vendor calls 50% of launches" in untimed["evidence"] and "--time" in untimed["evidence"]
    timed = analyze(graph, {0: 3.0, 1: 1.0})
    assert timed.to_json()["vendor_share"] == pytest.approx(0.75) and timed.share_basis == "graph time"
    assert "vendor calls" not in timed.evidence or "of graph time" in timed.evidence


def test_inspect_says_the_vendor_share_was_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(H200_DUMPS / "matmul_bias_relu")]) == 0
    out = capsys.readouterr().out
    assert "vendor share: not measured (1 of 2 launches are vendor calls" in out and "share of launches" in out


def test_noisy_timings_carry_their_spread_and_a_warning() -> None:
    def stats(median: float, iqr: float, n: int = 20) -> TimingStats:
        return TimingStats(median, iqr, median - iqr / 4, median + iqr / 4, median, median - iqr, n, "module-call")

    assert common.timing_noise("eager", stats(1.0, 0.01)) is None
    noisy = common.timing_noise("eager", stats(1.0, 0.5))
    assert noisy is not None and noisy.startswith("eager: ") and "50% of the median" in noisy
    assert "only 3 sample(s)" in (common.timing_noise("eager", stats(1.0, 0.01, n=3)) or "")


def test_bench_figures_never_print_zero_and_name_levels() -> None:
    assert ratio_text(0.00041) == "0.00041x" and ratio_text(1.5) == "1.500x" and ratio_text(None) == "-"
    assert level_rows({0: "files"}) == []  # no level folders: only the "all" row
    assert level_rows({1: "a", 2: "b", 0: "c"}) == [("L1", "a"), ("L2", "b"), ("other", "c")]


def test_label_names_every_change_of_the_chain() -> None:
    graph = parse_output_code(str(H200_DUMPS / "rmsnorm" / "output_code.py"))
    (kernel,) = graph.kernels
    configured = with_launch_config(parse_kernel_module(kernel.source, kernel.name),
                                    LaunchConfig.of({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=8))
    child = rewrite_hints(configured, "evict_first", "evict_last", None, ".cs")
    label = describe_change(kernel.source, child, kernel.name)
    assert label.startswith("fixed config XBLOCK=1, R0_BLOCK=2048, num_warps=8") and ".cs on 1 store" in label
    assert "line(s)" not in label  # everything that changed is named
    assert describe_change(kernel.source, kernel.source, kernel.name).startswith("no change")


# --- progress: heartbeats, line mode, file modes ------------------------------------------------------


def test_heartbeat_repeats_the_last_step_while_it_lasts() -> None:
    got: list[ProgressEvent] = []
    with heartbeat(EventSink(got.append), interval_s=0.2) as sink:
        sink.progress("gate 2 (kernel)", stage="gate", percentage=50)
        time.sleep(0.75)
    beats = [e for e in got if e.stage == HEARTBEAT_STAGE]
    assert got[0].message == "gate 2 (kernel)" and len(beats) >= 2
    assert beats[-1].extra["waiting_for"] == "gate 2 (kernel)" and beats[-1].percentage == 50
    assert beats[-1].extra["waiting_s"] >= 0.4 and "still running" in beats[-1].message
    count = len(got)
    time.sleep(0.5)
    assert len(got) == count  # stopped with the block


def test_progress_without_a_terminal_is_one_line_per_step() -> None:
    buffer = io.StringIO()
    view = LiveProgress(Console(file=buffer, force_terminal=False, width=200))
    with view:
        sink = view.sink()
        sink.progress("run r1: g", stage="start", run_id="r1")
        sink.progress("gate 1 (static) (still running, 10 s)", stage=HEARTBEAT_STAGE)
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].endswith("run r1: g") and "still running, 10 s" in lines[1]


def test_run_artifacts_are_readable_by_others(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "g")
    path = run.write_text("report.md", "# run\n")
    candidate = run.write_candidate("k", "0" * 16, "src")
    mask = os.umask(0o022)
    os.umask(mask)
    for written in (path, candidate):
        assert written.stat().st_mode & 0o777 == 0o666 & ~mask
