"""compute-sanitizer on a user kernel's finalist (issue 28): gate 3 runs memcheck and racecheck on the user's
harness run once with the candidate, through gates/sanitize.py's machinery. There is no GPU here: the target
runs as a plain process on Triton's interpreter, and a stand-in compute-sanitizer runs that same target (its
device turned to the CPU) and prints what the real tool prints, so the command, the target, the report's
reading and gate 3's verdict are what is tested."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.gates import sanitize
from kernelopt_core.gates.registry import CommonSettings
from kernelopt_core.gates.sanitize import CHECKED_SUFFIX, NOT_ON_CPU, steps_line
from kernelopt_core.gates.verdict import CascadeConfig
from kernelopt_core.userkernels.payload import UserKernelPayload
from kernelopt_core.userkernels.sanitize_target import sanitize_user_finalist, user_sanitizer_target
from kernelopt_core.userkernels.target import user_target

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "user_kernels"
FIXTURES = ROOT / "tests" / "fixtures" / "user_kernels"
INVALID_WRITE = "========= Invalid __global__ write of size 4 bytes"
# A helper the candidate never launches: its inline assembly could address shared memory, so racecheck runs
# (elsewhere Triton owns the shared memory it uses, and racecheck is left out).
INLINE_ASM_HELPER = """

@triton.jit
def _bits_of(x):
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("user_sanitize")
    for path in [*EXAMPLES.glob("*.py"), FIXTURES / "tuned_kernels.py"]:
        shutil.copy(path, out / path.name)
    return out


def _payload(folder: Path, file: str, kernel: str, harness: str,
             edit: tuple[str, str] | None = None) -> UserKernelPayload:
    target = user_target(str(folder / file), kernel, harness, "cpu")
    candidate = target.module.source
    if edit is not None:
        assert edit[0] in candidate
        candidate = candidate.replace(*edit)
    return target.payload(candidate=candidate, workdir=str(folder / "work"))


def _settings(**config: Any) -> CommonSettings:
    return CommonSettings.of(CascadeConfig(**config))


def _run_target(folder: Path, payload: UserKernelPayload) -> subprocess.CompletedProcess[str]:
    """The target as a plain process on the CPU, as compute-sanitizer would start it."""
    target = user_sanitizer_target(payload, "cpu", str(folder / "work" / "sanitize"))
    assert not isinstance(target, str), target
    scratch = folder / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", target.module, *target.args, "--scratch", str(scratch)],
                          capture_output=True, text=True, env=env, timeout=240)


@pytest.mark.parametrize("file,kernel,harness,launch", [
    ("softmax.py", "softmax_kernel", "bench_softmax", "run the harness (1 launch)"),
    ("layer_norm.py", "_layer_norm_fwd_fused", "layer_norm_problem.py", "run the harness (1 launch)"),
    # an autotuned candidate: each config launched once while it tunes, not benchmarked under the tool
    ("tuned_kernels.py", "axpy_kernel", "bench_axpy", "run the harness (1 launch, 2 configs tried once)"),
])
def test_the_target_runs_the_harness_once_with_the_candidate(folder: Path, file: str, kernel: str, harness: str,
                                                              launch: str) -> None:
    done = _run_target(folder, _payload(folder, file, kernel, harness))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "SANITIZE-TARGET-OK" in done.stdout
    steps = steps_line(done.stdout)
    assert steps.startswith("import torch ") and "load the harness" in steps and launch in steps, steps


def test_the_target_instruments_the_candidate_alone_and_runs_it_in_the_harness(folder: Path) -> None:
    """The candidate's kernel is renamed (the tool's filter matches it alone); a wrong candidate makes the
    user's test fail inside the target: it is the candidate that the harness launched."""
    payload = _payload(folder, "softmax.py", "softmax_kernel", "test_softmax.py::test_softmax_matches_torch",
                       ("softmax_output = numerator / denominator", "softmax_output = 2.0 * numerator / denominator"))
    target = user_sanitizer_target(payload, "cuda:0", str(folder / "work" / "sanitize"))
    assert not isinstance(target, str)
    args = list(target.args)
    checked = Path(args[args.index("--candidate") + 1]).read_text()
    assert f"def softmax_kernel{CHECKED_SUFFIX}(" in checked and "def softmax_kernel(" not in checked
    assert args[args.index("--device") + 1] == "cuda:0"
    done = _run_target(folder, payload)
    assert done.returncode != 0 and "SANITIZE-TARGET-OK" not in done.stdout
    assert "AssertionError" in done.stderr and "Mismatched elements" in done.stderr, done.stderr[-2000:]


def test_a_candidate_without_its_jit_kernel_is_a_note(folder: Path) -> None:
    payload = _payload(folder, "softmax.py", "softmax_kernel", "bench_softmax").but(candidate="x = 1\n")
    report = sanitize_user_finalist(payload, _settings(), None, "cuda:0", str(folder / "work" / "sanitize"))
    assert report.errors == [] and report.note == ("races and stray accesses not checked: the candidate defines no "
                                                   "@triton.jit softmax_kernel to instrument")


# --- a stand-in compute-sanitizer -------------------------------------------------------------------------

STAND_IN = '''#!{python}
"""compute-sanitizer's stand-in: runs the target it is given on the CPU, then prints <tool>.txt."""
import os, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
argv = sys.argv[1:]
tool = argv[argv.index("--tool") + 1]
with open(os.path.join(here, "calls.txt"), "a") as log:
    log.write(" ".join(argv[:argv.index("--kernel-name") + 2]) + "\\n")
if os.path.exists(os.path.join(here, "hang")):
    print("SANITIZE-STEP import_torch_and_start_cuda 4.00", flush=True)
    time.sleep(60)
command = argv[argv.index("--kernel-name") + 2:]
command[command.index("--device") + 1] = "cpu"
done = subprocess.run(command, env={{**os.environ, "TRITON_INTERPRET": "1"}})
printed = os.path.join(here, tool + ".txt")
print(open(printed).read() if os.path.exists(printed) else "========= ERROR SUMMARY: 0 errors")
sys.exit(done.returncode)
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(STAND_IN.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    yield tmp_path


def test_memcheck_errors_reject_and_name_the_tool(folder: Path, stand_in: Path) -> None:
    (stand_in / "memcheck.txt").write_text(f"{INVALID_WRITE}\n=========     at softmax_kernel{CHECKED_SUFFIX}+0x1f0\n"
                                           "========= ERROR SUMMARY: 1 error\n")
    (stand_in / "racecheck.txt").write_text("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    payload = _payload(folder, "softmax.py", "softmax_kernel", "bench_softmax")
    report = sanitize_user_finalist(payload, _settings(sanitizer_timeout_s=200), {"configs": [{"shared_bytes": 0}]},
                                    "cuda:0", str(folder / "work" / "sanitize"))
    assert report.errors == [f"compute-sanitizer memcheck found 1 error(s) in softmax_kernel: {INVALID_WRITE.strip()}"]
    # the kernel compiles to no shared memory, the only memory racecheck watches: memcheck alone runs
    [memcheck] = report.runs
    assert memcheck["tool"] == "memcheck" and memcheck["errors"] == 1 and memcheck["seconds"] > 0
    # the target really ran under it: its steps came back, the launch included
    assert memcheck["ran"] and "run the harness (1 launch)" in memcheck["steps"]
    assert report.note.startswith("compute-sanitizer: memcheck 1 errors (")
    assert "racecheck not run: the kernel uses no shared memory" in report.note
    calls = sorted((stand_in / "calls.txt").read_text().splitlines())
    assert calls == [f"--tool memcheck --print-limit 20 --target-processes application-only --kernel-name kns={CHECKED_SUFFIX}"]


def test_racecheck_runs_only_where_the_candidates_own_code_can_address_shared_memory(
        folder: Path, stand_in: Path) -> None:
    payload = _payload(folder, "softmax.py", "softmax_kernel", "bench_softmax")
    compiled = {"configs": [{"shared_bytes": 4096}]}  # a reduction: Triton keeps partials there
    settings = _settings(sanitizer_timeout_s=200)
    report = sanitize_user_finalist(payload, settings, compiled, "cuda:0", str(folder / "work" / "sanitize"))
    assert [r["tool"] for r in report.runs] == ["memcheck"]
    assert "racecheck not run: the kernel addresses no shared memory itself (no inline assembly)" in report.note
    payload = payload.but(candidate=(payload.candidate or "") + INLINE_ASM_HELPER)
    report = sanitize_user_finalist(payload, settings, compiled, "cuda:0", str(folder / "work" / "sanitize"))
    assert [r["tool"] for r in report.runs] == ["memcheck", "racecheck"] and report.errors == []


def test_a_sanitizer_that_does_not_finish_or_is_missing_is_a_note(folder: Path, stand_in: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (stand_in / "hang").write_text("")
    payload = _payload(folder, "softmax.py", "softmax_kernel", "bench_softmax")
    payload = payload.but(candidate=(payload.candidate or "") + INLINE_ASM_HELPER)
    report = sanitize_user_finalist(payload, _settings(sanitizer_timeout_s=2), None, "cuda:0",
                                    str(folder / "work" / "sanitize"))
    assert report.errors == [] and [r["ran"] for r in report.runs] == [False, False]
    assert ("memcheck did not run (did not finish within 2 s (steps done: import torch and start cuda 4.0 s)): "
            "stray accesses not checked") in report.note
    assert "racecheck did not run (did not finish within 2 s" in report.note and "races not checked" in report.note
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: None)
    report = sanitize_user_finalist(payload, _settings(sanitizer_timeout_s=2), None, "cuda:0",
                                    str(folder / "work" / "sanitize"))
    assert report.errors == [] and "compute-sanitizer was not found" in report.note


# --- gate 3 ---------------------------------------------------------------------------------------------

# Gate 3 in a fresh process (the tasks in-process: the in-process worker must not inherit another test's
# Triton state), its sanitizer step as on a GPU when asked; the rest of the gate runs on the CPU.
_GATE3 = """
import json, sys
from kernelopt_core.gates.verdict import CascadeConfig
from kernelopt_core.userkernels import tasks
from kernelopt_core.userkernels.cascade import run_user_cascade
from kernelopt_core.userkernels.target import user_target

folder, timeout_s, where = sys.argv[1], float(sys.argv[2]), sys.argv[3]
if where == "gpu":
    real = tasks._sanitize
    tasks._sanitize = lambda request, device: real(request, "cuda:0")
target = user_target(folder + "/softmax.py", "softmax_kernel", "bench_softmax", "cpu")
candidate = target.module.source.replace("tl.exp(row_minus_max)", "tl.exp2(row_minus_max * 1.4426950408889634)")
candidate += sys.argv[4]
config = CascadeConfig(device="cpu", run_gates=(3,), workdir=folder + "/verify", sanitizer_timeout_s=timeout_s)
try:
    result = run_user_cascade(target, candidate, config, worker="in-process")
finally:
    tasks.close_user_processes()
print(json.dumps(result.to_json()))
"""


def _gate3(folder: Path, timeout_s: float, where: str) -> dict[str, Any]:
    import json

    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "server"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _GATE3, str(folder), str(timeout_s), where, INLINE_ASM_HELPER],
                          capture_output=True,
                          text=True, timeout=400, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_gate_3_rejects_a_candidate_the_sanitizer_finds_errors_in(folder: Path, stand_in: Path) -> None:
    (stand_in / "racecheck.txt").write_text("========= Error: Race reported between Write access at 0x1f0 in "
                                            f"softmax_kernel{CHECKED_SUFFIX} and Read access at 0x2a0\n"
                                            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
    result = _gate3(folder, 200, "gpu")
    assert not result["accepted"] and result["failed_gate"] == 3 and result["decision"] != "could-not-verify"
    assert result["reason"].startswith("gate 3 (model) rejected the candidate: compute-sanitizer racecheck found 1 "
                                       "error(s) in softmax_kernel: ========= Error: Race reported"), result["reason"]
    [gate] = result["gates"]
    assert [r["tool"] for r in gate["sanitizer"]] == ["memcheck", "racecheck"]
    assert "memcheck 0 errors" in gate["sanitizer_note"] and "seeds" not in gate  # no seed ran


def test_gate_3_passes_with_a_note_when_the_sanitizer_does_not_finish(folder: Path, stand_in: Path) -> None:
    (stand_in / "hang").write_text("")
    result = _gate3(folder, 3, "gpu")  # the cascade's sanitizer_timeout_s is the tool's limit
    assert result["accepted"] and result["failed_gate"] is None, result["reason"]
    [gate] = result["gates"]
    assert "memcheck did not run (did not finish within 3 s" in gate["reason"]
    assert "races not checked" in gate["reason"] and [s["seed"] for s in gate["seeds"]] == [0, 42, 123]
    assert any("did not finish within 3 s" in note for note in result["notes"])


def test_on_the_cpu_gate_3_says_races_were_not_checked(folder: Path, stand_in: Path) -> None:
    result = _gate3(folder, 200, "cpu")
    assert result["accepted"], result["reason"]
    [gate] = result["gates"]
    assert gate["sanitizer"] == [] and gate["sanitizer_note"] == NOT_ON_CPU
    assert gate["reason"].endswith(NOT_ON_CPU) and NOT_ON_CPU in result["notes"]
    assert not (stand_in / "calls.txt").exists()  # no sanitizer ran


def test_the_searchs_sanitizer_limit_reaches_a_user_kernels_cascade(folder: Path) -> None:
    """finalists.py sets each tool's limit on the evaluator from the budget; a user kernel's cascade gets it."""
    from kernelopt_core.search.evaluation import GateEvaluator

    evaluator = GateEvaluator(user_target(str(folder / "softmax.py"), "softmax_kernel", "bench_softmax", "cpu"), "cpu",
                              str(folder / "search"), worker="in-process")
    assert evaluator._config((1, 2, 3, 4)).sanitizer_timeout_s == 600.0
    evaluator.sanitizer_timeout_s = 75.0
    assert evaluator._config((1, 2, 3, 4)).sanitizer_timeout_s == 75.0
