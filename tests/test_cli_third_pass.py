"""What a new user still met on the third pass over the first hour (issue 42): the deploy line as
printed, the deploy mismatch's likely cause, a correct but slower candidate, reasons said once, gate
labels that match what ran, help that names a user's own kernel file, a share within noise of 100%,
bench wording. CLI-level and cheap: no torch in this process; one subprocess where running the
printed line is the point."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import ROOT
from rich.console import Console
from test_accepted_store import KERNEL, _write_run

from kernelopt_core.cli.main import main
from kernelopt_core.cli.optimize_cmd import LiveProgress, deploy_command
from kernelopt_core.events import EventSink
from kernelopt_core.gates.registry import acceptance
from kernelopt_core.gates.verdict import CascadeResult, GateVerdict

# --- the deploy line runs as printed; a mismatch names grad mode ----------------------------------------


def _without_kernelopt_on_path() -> str:
    """PATH as in a shell with no venv active: no folder that holds a `kernelopt` command."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not os.path.isfile(os.path.join(f, "kernelopt")))


def test_the_demo_deploy_line_runs_as_printed_from_the_repository_root(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path / "runs" / "20261206-000000-rmsnorm-abcd")
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PATH=_without_kernelopt_on_path(), KERNELOPT_ACCEPTED_DIR=str(store), PYTHONWARNINGS="ignore")
    # what `make demo` runs: the venv's python (.venv/bin/kernelopt) with no venv active; the demo ends with
    # print_deploy_hint, as `optimize` does
    show = ("import json, sys\n"
            "from kernelopt_core.cli.common import console\n"
            "from kernelopt_core.cli.optimize_cmd import deploy_command, print_deploy_hint\n"
            "data = json.loads(sys.argv[1]); data['deploy_command'] = deploy_command(data)\n"
            "print_deploy_hint(console, data)\n")
    data = json.loads((run_dir / "result.json").read_text())
    shown = subprocess.run([sys.executable, "-c", show, json.dumps(data)], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    line = next(text for text in shown.stdout.splitlines() if text.startswith("deploy it: ")).removeprefix("deploy it: ")
    assert line.endswith(f"accepted add {run_dir}") and not line.startswith("kernelopt "), line
    deployed = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert deployed.returncode == 0, (line, deployed.stderr)
    assert [p.suffix for p in store.iterdir()] == [".json"] and KERNEL in next(store.iterdir()).read_text()
    assert deploy_command(data) == f"kernelopt accepted add {run_dir}"  # the JSON keeps the command's own name


def test_a_source_mismatch_names_grad_mode_first() -> None:
    from kernelopt_core.deploy.runtime_hook import mismatch_causes

    inference = mismatch_causes("/x/torchinductor/model__0_inference_0.0/output_code.py")
    assert inference.startswith("grad mode: the entry was verified on an inference graph (compiled under "
                                "torch.no_grad())") and "call it under torch.no_grad()" in inference
    assert "verified on a training graph" in mismatch_causes("/x/model__0_forward_0.1/output_code.py")
    unknown = mismatch_causes("/cache/ab/cabc.debug/output_code.py")
    assert unknown.startswith("grad mode (torch.no_grad() or not")
    for text in (inference, unknown):
        assert text.endswith("or another model, input shape, dtype or torch.compile mode")


# --- a correct candidate that is only slower; each reason said once ----------------------------------------


def _slower_result() -> CascadeResult:
    perf = "0.970x end to end (95% CI 0.961-0.979), below the 1.03x gate"
    return CascadeResult(False, 4, f"gate 4 (perf) rejected the candidate: {perf}",
                         [GateVerdict(1, "static", True, "ok"), GateVerdict(2, "kernel", True, "max |diff| 0"),
                          GateVerdict(3, "model", True, "matches"), GateVerdict(4, "perf", False, perf)],
                         graph_path="/p/my_kernels.py", kernels=["k"])


def test_a_correct_body_edit_that_is_only_slower_reads_correct_not_faster(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.cli import verify_cmd

    monkeypatch.setattr(verify_cmd, "console", Console(file=sys.stdout, width=300, force_terminal=False))
    result = _slower_result()
    assert verify_cmd.correct_not_faster(result)
    verify_cmd.print_report(result, show_diff=False, user=True)
    out = capsys.readouterr().out
    assert out.startswith("CORRECT, NOT FASTER k") and "REJECTED" not in out
    assert "correct, not faster: gates 1, 2, 3 passed" in out and "--gates 1,2,3" in out
    assert out.count("0.970x end to end") == 1, out  # the table's row only
    # gate 4 not run, or a gate before it failed: a rejection as before
    result.gates[2] = GateVerdict(3, "model", False, "seed 0: max |diff| 0.5")
    result.failed_gate = 3
    assert not verify_cmd.correct_not_faster(result)
    verify_cmd.print_report(result, show_diff=False, user=True)
    out = capsys.readouterr().out
    assert out.startswith("REJECTED") and "rejected by gate 3 (model), its reason in the table above" in out
    assert out.count("seed 0: max |diff| 0.5") == 1


def test_a_perf_rejection_is_said_once_in_the_decision_the_report_and_on_screen(tmp_path: Path) -> None:
    from kernelopt_core.runs import Journal, render_report
    from kernelopt_core.search.decision import decide

    final = _slower_result()
    search = SimpleNamespace(accepted=None, candidates=3, screened_ok=2, unverified=0, rejections={1: 1},
                             perf_rejected=1, not_searched=None, nodes=[], finalized=set(), out_of_reach={},
                             correct=True, brief=SimpleNamespace(name="k"))
    config = SimpleNamespace(min_speedup=1.03, use_perf_gate=True)
    decision, reason = decide([search], final, config)  # type: ignore[arg-type]
    assert decision == "matched" and "gate 4: gate 4" not in reason and "rejected by gate 4: 0.970x" in reason
    journal = Journal(tmp_path / "journal.jsonl")
    report = render_report({"run_id": "r", "decision": decision, "reason": reason, "kernels": []}, journal)
    assert report.count("0.970x end to end") == 1 and "## Fallback" in report, report
    buffer = io.StringIO()
    with LiveProgress(Console(file=buffer, force_terminal=False, width=300)) as view:
        view.sink().progress(f"{decision}: {reason}", stage="done", decision=decision)
    assert buffer.getvalue().strip().endswith("run done: matched") and "0.970x" not in buffer.getvalue()


# --- gate labels: what ran, and when --------------------------------------------------------------------------


def test_a_finalist_accepted_after_its_screen_passed_all_four_gates() -> None:
    assert acceptance((2, 3, 4), (1,)) == ("passed all four gates (gate 1 at its screen)", None)
    assert acceptance((3, 4), (1, 2)) == ("passed all four gates (gates 1, 2 at its screen)", None)
    assert acceptance((2, 3, 4), (1, 2)) == ("passed all four gates (gate 1 at its screen)", None)
    assert acceptance((1, 2, 3, 4)) == ("passed all four gates", None)
    reason, note = acceptance((1, 2))
    assert reason == "passed gates 1, 2 (gates 3, 4 not run)" and note == "gates 3, 4 did not run; this is not a full acceptance"
    reason, note = acceptance((2, 3), (1,))
    assert reason == "passed gates 2, 3 (gate 1 at its screen; gate 4 not run)" and note is not None


def test_a_finalist_is_announced_through_the_gates_it_then_shows() -> None:
    from kernelopt_core.gates.cascade_target import GraphGates
    from kernelopt_core.search.finalists import FinalistStage
    from kernelopt_core.userkernels.cascade import UserKernelGates

    def stage(gates: Any, perf: bool = True) -> FinalistStage:
        evaluator = SimpleNamespace(inner=SimpleNamespace(gates=gates))  # as the run's recorded evaluator
        ctx = SimpleNamespace(evaluator=evaluator, config=SimpleNamespace(use_perf_gate=perf),
                              schedule=SimpleNamespace(finalist_pending=None))
        return FinalistStage(ctx)  # type: ignore[arg-type]

    dump, user = GraphGates.__new__(GraphGates), UserKernelGates.__new__(UserKernelGates)
    assert stage(dump).final_gates_text() == "gate 2's full battery and gates 3-4"  # shows gates 2, 3, 4
    assert stage(user).final_gates_text() == "gates 3-4"  # a user kernel's screen ran all of gate 2
    assert stage(user, perf=False).final_gates_text() == "gate 3"
    assert stage(user).gates() == (3, 4) and stage(user, perf=False).gates() == (3,)


# --- help names a user's own kernel file ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["verify", "profile", "optimize"])
def test_help_says_the_first_argument_takes_your_own_kernel_file(command: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "-h"])
    text = " ".join(capsys.readouterr().out.split())
    assert "your own kernel file (FILE.py with @triton.jit kernels; see --harness)" in text
    assert "--harness" in text


# --- a share within noise of 100% ------------------------------------------------------------------------------


def test_a_share_within_noise_of_the_whole_call_reads_about_100_percent() -> None:
    from kernelopt_core.userkernels.share import harness_share

    harness = {"median_ms": 10.0, "iqr_ms": 0.6}
    near = harness_share("k", {"median_ms": 9.57, "iqr_ms": 0.4}, harness)  # 95.7%, spreads reach 100%
    assert near.share == pytest.approx(0.957) and near.note is not None
    assert "95.7% of the call, within noise of all of it" in near.note and "about 100%" in near.note
    clear = harness_share("k", {"median_ms": 8.0, "iqr_ms": 0.4}, harness)  # 80%: apart from 100%
    assert clear.share == pytest.approx(0.8) and clear.note is None


def test_the_tables_show_a_share_within_noise_as_about_100_percent(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelopt_core.cli.optimize_cmd import print_result

    console = Console(file=sys.stdout, width=200, force_terminal=False)
    print_result(console, {"decision": "matched", "reason": "r", "kernels": [
        {"name": "k", "share": 0.957, "share_note": "95.7% of the call, within noise of all of it"}]})
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("k "))
    assert "~100%" in row and "96%" not in row


# --- bench wording -----------------------------------------------------------------------------------------


def test_bench_outcomes_and_counts_read_as_text() -> None:
    from kernelopt_core.bench.outcome import counts_text, outcome_text

    assert outcome_text("fallback", "not-optimized") == "not optimized (timing only)"
    assert outcome_text("fallback", "gate-4-perf") == "fallback (gate-4-perf)" and outcome_text("matched", None) == "matched"
    counts = {"optimized": 2, "matched": 1, "fallback": 0, "error": 1}
    assert counts_text(counts) == "2 optimized, 1 matched, 0 fallback, 1 error"
    assert counts_text({"optimized": 0, "matched": 0, "fallback": 3, "error": 0}, 3) == \
        "3 not optimized (timing only), 0 error"


def test_bench_progress_off_a_terminal_is_a_line_per_step_with_its_clock() -> None:
    from kernelopt_core.cli.bench_cmd import BenchProgress
    from kernelopt_core.events import HEARTBEAT_STAGE

    buffer = io.StringIO()
    with BenchProgress(2, Console(file=buffer, force_terminal=False, width=300)) as progress:
        sink: EventSink = progress.sink
        sink.progress("p1: compile", stage="compile", problem="p1")
        sink.progress("p1: not optimized (timing only)", stage="problem-done", outcome="fallback", done=1, total=2)
        sink.progress("p1: not optimized (timing only) (still running, 8 s)", stage=HEARTBEAT_STAGE,
                      waiting_stage="problem-done", waiting_s=8.2)
    lines = buffer.getvalue().splitlines()
    assert [line.split("]  ", 1)[-1] for line in lines] == [
        "p1: compile", "p1: not optimized (timing only)", "the next problem is starting (8 s)"], lines
    assert "[0/2]" in lines[0] and "[1/2]" in lines[1]


# --- `make test` leaves no temporary folders behind ----------------------------------------------------------

LEAVES_FILES = '''
import pytest

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumps")
    (folder / "dump.bin").write_bytes(b"x" * 100_000)
    return folder

@pytest.mark.parametrize("n", range(4))
def test_writes(tmp_path, built, n):
    (tmp_path / "run.bin").write_bytes(b"y" * 100_000)
    assert (built / "dump.bin").is_file()
'''


def test_a_passing_run_of_the_suites_settings_leaves_no_temporary_folders(tmp_path: Path) -> None:
    """pytest with the project's settings, in a temporary folder of its own: the pytest-of-<user> folders of
    a passing run are gone when it ends; a failing run keeps its own. (Under `make test`'s workers the
    main process removes the folder that holds theirs, by the same setting.)"""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "test_leaves.py").write_text(LEAVES_FILES)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": ""}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                               str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path / "work"),
                               str(tmp_path / "work")], cwd=tmp_path / "work", env=env,
                              capture_output=True, text=True, timeout=300)

    done = run()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    left = [p for p in temp.rglob("*") if p.is_file()]
    assert left == [], left
    (tmp_path / "work" / "test_leaves.py").write_text(LEAVES_FILES.replace("assert (built", "assert n != 2 and (built"))
    assert run().returncode == 1
    kept = [p.name for p in temp.rglob("*.bin")]
    assert "run.bin" in kept and kept.count("run.bin") == 1  # the failing test's folder only, and the module's
