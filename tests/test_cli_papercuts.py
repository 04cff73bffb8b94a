"""The first hour with one's own things (issue 29), one test per paper cut, as a user meets it: the
command's home (README, make), tables in a pipe, what `kernelopt.enable()` says on a CPU, a file
harness that never launches a kernel, the user's words for their own kernel, an empty diff, a
launch-site-only edit, and a kernel timed over its whole harness call.

Cheap: no worker and no Triton interpreter here (the user-kernel commands stop before one, or run
the search with a stand-in evaluator); subprocesses only where the pipe or the process is the point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from conftest import H200_DUMPS, ROOT

from kernelopt_core.cli.main import main

CLI = [sys.executable, "-m", "kernelopt_core.cli.main"]
SCALE_KERNELS = ROOT / "tests" / "fixtures" / "user_kernels" / "scale_kernels.py"
RMSNORM_KERNEL = "triton_red_fused_add_mean_mul_pow_rsqrt_0"


@pytest.fixture(autouse=True)
def no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output off a terminal, as a user's pipe sees it: pytest-xdist's workers set COLUMNS=80 (execnet)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def own_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with scale_kernels.py (scale_kernel with a harness comment, copy_kernel without), as cwd."""
    shutil.copy(SCALE_KERNELS, tmp_path / "scale_kernels.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _pipe_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return {**env, "PYTHONWARNINGS": "ignore", **extra}


# --- 1. the command lives in the venv --------------------------------------------------------------------


def test_the_readme_and_make_say_where_the_kernelopt_command_is() -> None:
    using = (ROOT / "README.md").read_text(encoding="utf-8").split("## Using it", 1)[1]
    before_commands = using.split("```bash", 1)[0]
    assert "source .venv/bin/activate" in before_commands and ".venv/bin/kernelopt" in before_commands
    dry = subprocess.run(["make", "--no-print-directory", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    demo = next(i for i, line in enumerate(lines) if "kernelopt demo" in line)
    assert any("source .venv/bin/activate" in line and "kernelopt -h" in line for line in lines[demo + 1:])


# --- 2. a pipe keeps whole table cells -------------------------------------------------------------------


def test_profile_and_bench_tables_in_a_pipe_keep_full_kernel_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    csv = str(H200_DUMPS / "ncu" / "rmsnorm_sections.csv")
    piped = subprocess.run([*CLI, "profile", "--ncu-csv", csv], capture_output=True, text=True, env=_pipe_env(),
                           timeout=120)
    assert piped.returncode == 0, piped.stderr
    row = next(line for line in piped.stdout.splitlines() if line.startswith(RMSNORM_KERNEL))
    assert "memory-bound" in row and "SOLBottleneck" in row and "…" not in piped.stdout
    narrow = subprocess.run([*CLI, "profile", "--ncu-csv", csv], capture_output=True, text=True,
                            env=_pipe_env(COLUMNS="60"), timeout=120)
    assert RMSNORM_KERNEL not in narrow.stdout.split("\n\n")[0]  # COLUMNS, when set, still decides

    from kernelopt_core.bench import campaign
    from kernelopt_core.bench.results import ProblemResult, Speedup

    problem = "23_Softmax_over_the_last_dimension_of_a_wide_activation"
    kernel = "triton_per_fused__softmax__to_copy_amax_exp_sub_sum_div_0"
    (tmp_path / "suite" / "level1").mkdir(parents=True)
    (tmp_path / "suite" / "level1" / f"{problem}.py").write_text("# a stand-in: the runner below never runs it\n")

    def runner(spec: Any, config: Any, out_dir: str, slot: Any, sink: Any) -> ProblemResult:
        return ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="optimized", reason="stand-in",
                             kernels_changed=[kernel], vs_max_autotune=Speedup(1.2, 1.1, 1.3, "module-call", "stand-in"))

    real = campaign.run_campaign
    monkeypatch.setattr(campaign, "run_campaign", lambda *a, **k: real(*a, **{**k, "runner": runner}))
    assert main(["bench", str(tmp_path / "suite"), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--no-plot"]) == 0
    captured = capsys.readouterr()
    # the progress goes where the report goes (stdout), a line per step off a terminal
    assert f"level1/{problem}: optimized, 1.20x vs max-autotune, rewrote {kernel}" in captured.out
    header = next(line for line in captured.out.splitlines() if "gm/MA" in line)  # the summary table, one line
    assert all(column in header for column in ("fallb", "gm/cfg", "gm/eager", "f1.03", "f1.1"))
    assert "…" not in captured.out + captured.err


# --- 3. enable() on a CPU says one thing ------------------------------------------------------------------


def test_enable_on_a_cpu_says_why_nothing_can_be_replaced_and_how_to_change_it(tmp_path: Path) -> None:
    from test_deploy_hook import PASSED

    from kernelopt_core.accepted import AcceptedStore, entry_from_cascade
    from kernelopt_core.artifacts import parse_output_code

    graph = parse_output_code(str(H200_DUMPS / "softmax" / "output_code.py"))
    (kernel,) = graph.kernels
    entry = entry_from_cascade(graph, kernel.name, kernel.source.replace("@triton.jit\n", "@triton.jit\n# a\n", 1),
                               PASSED, torch_version=metadata.version("torch"),
                               triton_version=metadata.version("triton"), gpu="NVIDIA H200")
    AcceptedStore(str(tmp_path / "store")).add(entry)
    done = subprocess.run([sys.executable, "-c", "import kernelopt; print(kernelopt.enable())"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=_pipe_env(KERNELOPT_ACCEPTED_DIR=str(tmp_path / "store"), CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said.startswith("kernelopt: enabled, but no kernel can be replaced in this process: no CUDA GPU"), said
    assert "cpu_triton.activate() before importing torch" in said and "or run on a GPU" in said
    assert f"the store has 1 accepted kernel(s) from {tmp_path / 'store'} ({kernel.name})" in said
    assert "will replace" not in said and "cannot be used" not in said  # one statement, not two

    # and optimize's deploy hint on the CPU says it before the user meets it
    import io

    from rich.console import Console

    from kernelopt_core.cli.optimize_cmd import print_deploy_hint

    buffer = io.StringIO()
    print_deploy_hint(Console(file=buffer, width=300), {"decision": "optimized", "device": "cpu",
                                                       "deploy_command": "kernelopt accepted add RUN"})
    assert "call kernelopt_core.backends.cpu_triton.activate() before importing torch" in buffer.getvalue()


# --- 4. a file's harness comment is not offered for a kernel it never launches ---------------------------


def test_a_harness_that_never_launches_the_kernel_is_not_offered_for_it(own_kernels: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "scale_kernels.py", "--kernel", "copy_kernel", "--device", "cpu"]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert error.startswith("error: no harness for copy_kernel: the file's harness bench_scale never launches "
                            "copy_kernel; bench_copy() in scale_kernels.py returns (callable, inputs) and launches "
                            "copy_kernel: pass --harness bench_copy"), error

    from kernelopt_core.userkernels.hints import lens_summary
    from kernelopt_core.userkernels.parse import parse_user_kernels

    parsed = parse_user_kernels(str(own_kernels / "scale_kernels.py"), (own_kernels / "scale_kernels.py").read_text())
    assert parsed.harness_for("scale_kernel") == "bench_scale" and parsed.harness_for("copy_kernel") is None
    assert lens_summary(parsed, parsed.kernel("copy_kernel")).endswith(
        "no harness (add `# kernelopt: harness=bench_copy` above it)")


# --- 5, 6. the search of a project's own kernel, in its words; no empty diff offered -----------------------


class StandInUserEvaluator:
    """The measurements of a user-kernel run, stood in: a profile whose kernel timing overlaps the whole
    harness call (item 8), and gate 2 rejecting every candidate (so nothing changes: item 6)."""

    device = "cpu"

    def __init__(self, target: Any):
        from kernelopt_core.userkernels.share import harness_share

        self.target = target
        kernel, harness = {"median_ms": 4.2, "iqr_ms": 0.5}, {"median_ms": 4.0, "iqr_ms": 0.6}
        share = harness_share(target.kernel, kernel, harness)
        self.profile_reply = {"kernel_ms": 4.2, "harness_ms": 4.0, "launches_per_call": 1, "launch_args": [],
                              "share": share.share, "share_note": share.note}

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        return {"kernels": {name: {"configs": []} for name in kernels}}

    def launch_timing(self) -> dict[str, Any]:
        from kernelopt_core.userkernels.measurements import timing_from_profile

        return timing_from_profile(self.target, self.profile_reply)

    def profile(self, kernel: str, sections: tuple[str, ...], together: tuple[str, ...] = ()) -> dict[str, Any]:
        return {"error": "ncu needs a CUDA GPU"}

    def screen(self, kernel: str, source: str) -> Any:
        from kernelopt_core.search.evaluation import Screen

        return Screen(False, 2, "gate 2 (kernel): the stand-in rejects every candidate",
                      [{"gate": 2, "passed": False, "reason": "the stand-in rejects every candidate"}])

    def time(self, kernel: str, source: str, screen: Any) -> Any:
        raise AssertionError("no candidate passed gates 1-2")

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> Any:
        raise AssertionError("no candidate passed gates 1-2")


@pytest.fixture
def own_kernel_run(own_kernels: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> tuple[str, Path]:
    """``kernelopt optimize scale_kernels.py`` (its harness from the comment), measured by the stand-in."""
    from kernelopt_core.search import run_context

    monkeypatch.setattr(run_context, "GateEvaluator", lambda target, *a, **k: StandInUserEvaluator(target))
    assert main(["optimize", "scale_kernels.py", "--kernel", "scale_kernel", "--device", "cpu", "--iterations", "1",
                 "--plans", "1", "--beam-width", "1", "--no-memory", "--run-root", str(own_kernels / "runs")]) == 0
    out = capsys.readouterr().out
    (run_dir,) = (own_kernels / "runs").iterdir()
    return out, run_dir


def test_a_users_own_kernel_is_spoken_of_in_the_users_words(own_kernel_run: tuple[str, Path]) -> None:
    out, run_dir = own_kernel_run
    assert "timing scale_kernel alone and the harness bench_scale() in scale_kernels.py" in out
    assert "optimizable: scale_kernel alone took 4.2 ms per call (IQR 0.5 ms), the harness call 4 ms" in out
    assert "the original kernel is kept" in out
    report = (run_dir / "report.md").read_text()
    assert f"- your file: `{run_dir.parent.parent / 'scale_kernels.py'}`, kernel `scale_kernel`, harness " \
           "`bench_scale`" in report
    assert "Your file keeps its kernel" in report
    for inductor_words in ("graph time", "the graph's launches", "compiler's", "call()", "vendor calls", "graph:"):
        assert inductor_words not in out + report, inductor_words


def test_an_unchanged_run_offers_no_empty_diff(own_kernel_run: tuple[str, Path]) -> None:
    out, run_dir = own_kernel_run
    assert (run_dir / "final.diff").read_text() == ""
    assert "diff: none (no change: the original kernel is kept)" in out
    assert "final.diff" not in out and "deploy it" not in out
    assert "nothing changed, so `final.diff` is empty" in (run_dir / "report.md").read_text()


class AcceptingUserEvaluator(StandInUserEvaluator):
    """Every candidate passes every gate, 1.5x faster: the run ends optimized."""

    def screen(self, kernel: str, source: str) -> Any:
        from kernelopt_core.search.evaluation import Screen

        return Screen(True, None, "passed gates 1, 2", [], "/stand-in")

    def time(self, kernel: str, source: str, screen: Any) -> Any:
        from kernelopt_core.search.evaluation import KernelTime

        return KernelTime(1.5, (1.4, 1.6), 1.0, 1.0 / 1.5)

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> Any:
        from kernelopt_core.gates.verdict import CascadeResult, GateVerdict

        return CascadeResult(True, None, "passed all four gates", [GateVerdict(3, "model", True, "stand-in"),
                                                                   GateVerdict(4, "perf", True, "stand-in")],
                             speedup=1.5, ci=(1.4, 1.6), timing_path="harness")


def test_an_optimized_own_kernel_comes_back_as_a_diff_of_the_file(own_kernels: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from kernelopt_core.search import run_context

    monkeypatch.setattr(run_context, "GateEvaluator", lambda target, *a, **k: AcceptingUserEvaluator(target))
    original = (own_kernels / "scale_kernels.py").read_text()
    assert main(["optimize", "scale_kernels.py", "--kernel", "scale_kernel", "--device", "cpu", "--iterations", "1",
                 "--plans", "1", "--beam-width", "1", "--no-memory", "--run-root", str(own_kernels / "runs"),
                 "--deploy"]) == 0
    out = capsys.readouterr().out
    (run_dir,) = (own_kernels / "runs").iterdir()
    diff = (run_dir / "final.diff").read_text()
    assert diff.startswith("--- a/scale_kernels.py") and f"diff: {run_dir / 'final.diff'}" in out
    assert f"apply it to your file: patch -p1 < {run_dir / 'final.diff'}" in out
    assert "kernelopt accepted add" not in out and "deployed" not in out  # the store is for Inductor's kernels
    assert (own_kernels / "scale_kernels.py").read_text() == original  # nothing written without approval
    assert "apply it with `patch -p1`" in (run_dir / "report.md").read_text()


# --- 7. an edit of the launch site alone is verified with its launch -------------------------------------


def test_an_edit_of_the_launch_site_alone_runs_gates_2_3_with_the_edited_launch(
        own_kernels: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = (own_kernels / "scale_kernels.py").read_text()
    launch = "copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64, num_warps=2)"
    assert launch in original
    # a correct edit: a smaller block, the grid following it
    (own_kernels / "smaller.py").write_text(original.replace(launch, launch.replace("64", "32")))
    assert main(["verify", "scale_kernels.py", "--kernel", "copy_kernel", "--harness", "bench_copy", "--candidate",
                 "smaller.py", "--device", "cpu", "--gates", "2,3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["accepted"] and [(g["gate"], g["passed"]) for g in data["gates"]] == [(2, True), (3, True)], data
    line = next(i + 1 for i, text in enumerate(original.splitlines()) if launch in text)
    note = next(n for n in data["notes"] if n.startswith("your edit changes only the launch site"))
    assert f"line {line} in copy()" in note and "gate 2 ran copy_kernel with the edited launch" in note, note
    assert "BLOCK=32" in (data["diff"] or "") and not any("no change, no diff" in n for n in data["notes"])
    # a wrong one: the block halved at the launch, the grid not: half the output is never written. Gate 2
    # runs the edited launch (the original's would pass), so it rejects it
    (own_kernels / "half.py").write_text(original.replace(launch, launch.replace("BLOCK=64", "BLOCK=32")))
    assert main(["verify", "scale_kernels.py", "--kernel", "copy_kernel", "--harness", "bench_copy", "--candidate",
                 "half.py", "--device", "cpu", "--gates", "2", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["failed_gate"] == 2 and not data["accepted"], data


def test_an_edit_of_kernel_and_launch_site_checks_the_kernel_and_names_the_rest(own_kernels: Path) -> None:
    # with the kernel edited too, the kernel is the candidate and the rest of the edit is named as left out
    from kernelopt_core.userkernels.edited_file import outside_note, read_candidate
    from kernelopt_core.userkernels.target import user_target

    original = (own_kernels / "scale_kernels.py").read_text()
    wider = original.replace("BLOCK=64, num_warps=2)", "BLOCK=64, num_warps=4)")
    assert wider != original
    line = next(i + 1 for i, text in enumerate(wider.splitlines()) if "num_warps=4)" in text)

    target = user_target(str(own_kernels / "scale_kernels.py"), "copy_kernel", "bench_copy", "cpu")
    both = wider.replace("tl.load(x_ptr + offsets)", "tl.load(x_ptr + offsets, mask=offsets < n)")
    found = read_candidate(target, both)
    assert found.whole_file and found.kernel_changed and "mask=offsets < n" in found.module
    assert "def copy(" not in found.module and "num_warps=4" not in found.module  # the wrapper is no part of it
    assert f"line {line} in copy()" in outside_note(target, found)
    assert read_candidate(target, original.replace("tl.load(x_ptr + offsets)", "tl.load(x_ptr + offsets, "
                                                   "mask=offsets < n)")).outside == []


# --- 8. a kernel timed over its whole harness call ----------------------------------------------------------


def test_a_kernel_timed_over_its_harness_call_is_within_noise_not_100_percent(
        own_kernels: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelopt_core.gates import cascade
    from kernelopt_core.userkernels.share import harness_share

    kernel, harness = {"median_ms": 34.71, "iqr_ms": 2.4}, {"median_ms": 32.90, "iqr_ms": 1.6}
    share = harness_share("scale_kernel", kernel, harness)
    assert share.share is None and "within noise" in share.note  # 34.71 - 1.2 <= 32.90 + 0.8
    assert harness_share("k", {"median_ms": 3.0, "iqr_ms": 0.1}, harness).share == pytest.approx(3.0 / 32.90)
    apart = harness_share("k", {"median_ms": 40.0, "iqr_ms": 0.2}, {"median_ms": 30.0, "iqr_ms": 0.2})
    assert apart.share is None and "not comparable" in apart.note

    def task(name: str, payload: dict[str, Any]) -> dict[str, Any]:  # the worker's reply, its timings stood in
        assert name == "kernelopt_core.userkernels.tasks:profile_user_kernel"
        return {"kernel_ms": 34.71, "harness_ms": 32.90, "launches_per_call": 1, "launch_args": [],
                "kernel_timing": kernel, "harness_timing": harness, "harness": "bench_scale() in scale_kernels.py",
                "launches": [{"grid": [63], "meta": {"BLOCK": 16}}], "share": share.share, "share_note": share.note}

    monkeypatch.setattr(cascade, "task_caller", lambda *a, **k: task)
    assert main(["profile", "scale_kernels.py", "--kernel", "scale_kernel", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("scale_kernel "))
    assert "~100%" in row and "100.0%" not in out
    assert ("scale_kernel alone took 34.71 ms per call (IQR 2.4 ms), the harness call 32.9 ms (IQR 1.6 ms): within "
            "noise of each other") in out

    # the editor reads the same profile JSON: its diagnostic says ~100% of the harness, not a figure
    from kernelopt_lsp.kernel_facts import profile_line
    from kernelopt_lsp.results import ProfileRecord

    assert main(["profile", "scale_kernels.py", "--kernel", "scale_kernel", "--device", "cpu", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["kernels"]
    assert entry["time_share"] is None and "within noise" in entry["time_share_note"]
    assert profile_line(ProfileRecord("f", "scale_kernel", "h", entry)).endswith("· ~100% of harness time")
