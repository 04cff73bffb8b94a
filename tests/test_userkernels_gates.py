"""User kernels through the CLI on the CPU backend: profile (a harness function, a KernelBench
problem), verify (gates 1-3 accept a correct rewrite; gate 2 rejects a wrong mask; gate 1 a torch
call; an autotuned candidate's grid is looked up for its own configs), and what cannot run.
The commands run in this process and share one worker, as a CLI run does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelopt_core.cli.main import main
from kernelopt_core.userkernels.extract import extract_kernel_module

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "user_kernels"
FIXTURES = ROOT / "tests" / "fixtures" / "user_kernels"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("user_kernels")
    for path in [*EXAMPLES.glob("*.py"), FIXTURES / "tuned_kernels.py", FIXTURES / "scale_kernels.py"]:
        shutil.copy(path, out / path.name)
    return out


@pytest.fixture
def here(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(folder)
    return folder


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_profile_through_the_harness_comment(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "softmax.py", "--kernel", "softmax_kernel", "--device", "cpu", "--json"]) == 0
    data = _json(capsys)
    [row] = data["kernels"]
    assert row["name"] == "softmax_kernel" and row["graph"] == str(here / "softmax.py")
    assert row["source"] == "timing" and row["time_share_of"] == "harness"
    # the kernel is nearly all of this harness: on a busy machine its own median can come out above the
    # harness's, and then there is no share figure but a note with both spreads (paper cut 8)
    if row["time_share"] is None:
        assert "alone took" in row["time_share_note"] and "IQR" in row["time_share_note"]
    else:
        assert 0 < row["time_share"] <= 1
    assert row["harness"] == "bench_softmax() in softmax.py" and row["duration_ns"] > 0
    assert row["grid"] == [6] and row["meta"] == {"num_warps": 4, "BLOCK_SIZE": 128}
    roles = {a["name"]: a.get("role") for a in row["user_launches"][0]["args"]}
    assert roles["output_ptr"] == "output" and roles["input_ptr"] == "input"
    assert any("captured launch: grid (6,)" in line for line in row["evidence"])


def test_profile_through_a_kernelbench_problem(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "layer_norm.py", "--harness", "layer_norm_problem.py", "--device", "cpu", "--json"]) == 0
    [row] = _json(capsys)["kernels"]
    assert row["harness"] == "KernelBench problem layer_norm_problem.py" and row["grid"] == [4]
    roles = {a["name"]: a.get("role") for a in row["user_launches"][0]["args"]}
    assert roles == {**roles, "X": "input", "Y": "output", "W": "input", "Mean": "output", "Rstd": "output"}


def test_profile_through_a_pytest_test(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "softmax.py", "--harness", "test_softmax.py::test_softmax_matches_torch", "--device", "cpu",
                 "--json"]) == 0
    [row] = _json(capsys)["kernels"]
    assert row["harness"] == "test test_softmax.py::test_softmax_matches_torch" and row["grid"] == [5]


def _candidate(here: Path, name: str, text: str) -> str:
    path = here / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_verify_accepts_a_correct_rewrite_and_rejects_wrong_ones(here: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    original = (here / "softmax.py").read_text()
    module = extract_kernel_module(original, "softmax_kernel", str(here / "softmax.py")).source
    good = _candidate(here, "good.py", module.replace("tl.exp(row_minus_max)",
                                                      "tl.exp2(row_minus_max * 1.4426950408889634)"))
    base = ["verify", "softmax.py", "--kernel", "softmax_kernel", "--device", "cpu", "--json"]
    assert main([*base, "--candidate", good, "--gates", "1,2,3"]) == 0
    data = _json(capsys)
    assert data["accepted"] and [g["gate"] for g in data["gates"]] == [1, 2, 3]
    assert data["gates"][0]["stage"] in ("cubin", "ptx")
    # the backend that compiled, and where the kernel really runs here
    assert "compiled by Triton's CUDA back end to" in data["gates"][0]["reason"]
    assert "on this machine gates 2-4 run it on Triton's CPU interpreter" in data["gates"][0]["reason"]
    assert data["gates"][2]["float64_reference"] is True
    assert "races and stray accesses not checked" in data["gates"][2]["reason"]  # issue 28: said, on the CPU
    assert "+    numerator = tl.exp2(row_minus_max * 1.4426950408889634)" in data["diff"]
    assert (here / "softmax.py").read_text() == original  # verify never writes the user's file

    short_mask = module.replace("mask=col_offsets < n_cols)", "mask=col_offsets < n_cols - 1)")
    assert main([*base, "--candidate", _candidate(here, "bad.py", short_mask), "--gates", "1,2"]) == 1
    data = _json(capsys)
    assert data["failed_gate"] == 2 and "left 6 of 600 elements of output_ptr unwritten" in data["reason"]

    torch_call = module.replace("tl.exp(row_minus_max)", "torch.exp(row_minus_max)")
    assert main([*base, "--candidate", _candidate(here, "torch.py", torch_call), "--gates", "1,2"]) == 1
    assert _json(capsys)["failed_gate"] == 1
    # the report, as read on a terminal or in a log: the user's file and kernel, not a graph's
    assert main([*base[:-1], "--candidate", str(here / "torch.py"), "--gates", "1,2"]) == 1
    out = capsys.readouterr().out
    assert "; your file keeps its kernel" in out and "candidate kernel module: " in out
    assert "graph" not in out and "compiler" not in out

    # the candidate may also be an edited copy of the whole file: its kernel module is taken out of it
    edited = original.replace("numerator = tl.exp(row_minus_max)", "numerator = tl.exp(row_minus_max) * 1.0")
    assert main([*base, "--candidate", _candidate(here, "edited_softmax.py", edited), "--gates", "1,2"]) == 0


def test_an_autotuned_candidate_launches_with_its_own_configs(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (here / "tuned_kernels.py").read_text()
    module = extract_kernel_module(text, "axpy_kernel", str(here / "tuned_kernels.py")).source
    wider = module.replace('triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)',
                           'triton.Config({"BLOCK": 128}, num_warps=4)')
    assert wider != module
    base = ["verify", "tuned_kernels.py", "--kernel", "axpy_kernel", "--device", "cpu", "--json", "--gates", "1,2"]
    assert main([*base, "--candidate", _candidate(here, "wider.py", wider)]) == 0
    assert _json(capsys)["accepted"]
    # a block the wrapper's grid was never evaluated for (the heuristics decide it here) is refused
    sneaky = module.replace('@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})',
                            '@triton.heuristics({"EVEN": lambda args: False, "BLOCK": lambda args: 256})')
    assert sneaky != module
    assert main([*base, "--candidate", _candidate(here, "sneaky.py", sneaky)]) == 1
    data = _json(capsys)
    assert data["failed_gate"] == 2 and "the launch grid is known for" in data["reason"]


@pytest.mark.parametrize("args,words", [
    (["softmax.py", "--kernel", "nope"], "no @triton.jit kernel named nope"),
    (["tuned_kernels.py", "--harness", "broken_harness"], "the harness itself is broken"),
    (["tuned_kernels.py", "--harness", "missing.py"], "harness file missing.py not found"),
    # the harness named runs another kernel of the file: the message names the one that launches this kernel
    (["scale_kernels.py", "--kernel", "copy_kernel", "--harness", "bench_scale"],
     "ran but never launched copy_kernel: bench_copy() in scale_kernels.py returns (callable, inputs) and launches "
     "copy_kernel: pass --harness bench_copy"),
])
def test_what_cannot_run_exits_2(here: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    assert main(["profile", *args, "--device", "cpu"]) == 2
    assert words in " ".join(capsys.readouterr().err.split())


def test_gate_2_runs_the_input_sets_on_a_user_kernel(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: an RMSNorm edit that drops `+ eps` (eps = 1e-6) agrees on random rows (gates 1-3 passed it,
    max diff 6.7e-06) and gives NaN on all-zero rows; gate 2 runs the input sets on a user kernel too."""
    shutil.copy(FIXTURES / "rms_norm.py", here / "rms_norm.py")
    module = extract_kernel_module((here / "rms_norm.py").read_text(), "rms_norm_kernel", str(here / "rms_norm.py")).source
    dropped = module.replace("tl.sqrt(mean_square + eps)", "tl.sqrt(mean_square)")
    assert dropped != module
    base = ["verify", "rms_norm.py", "--kernel", "rms_norm_kernel", "--device", "cpu", "--json", "--gates", "1,2"]
    assert main([*base, "--candidate", _candidate(here, "no_eps.py", dropped)]) == 1
    data = _json(capsys)
    assert data["failed_gate"] == 2, data["reason"]
    assert "inputs: all zeros" in data["reason"] and "NaN" in data["reason"], data["reason"]
    # a correct rewrite passes the same input sets, the one-input variants included
    rsqrt = module.replace("1.0 / tl.sqrt(mean_square + eps)", "tl.rsqrt(mean_square + eps)")
    assert main([*base[:-1], "2", "--candidate", _candidate(here, "rsqrt.py", rsqrt)]) == 0
    data = _json(capsys)
    labels = [c["label"] for c in data["gates"][0]["kernels"]["rms_norm_kernel"]["checks"]]
    assert "inputs: all zeros in x_ptr alone, the others randn" in labels, labels
    # the structured input sets and the magnitude sweep run on a user kernel as on an Inductor kernel
    assert any("sorted" in label for label in labels) and any("log-uniform magnitude" in label for label in labels)
    assert "input sets" in data["gates"][0]["reason"]
