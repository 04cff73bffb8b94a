"""benchmarks/gpu/gate2_scale.py, the H200 measurement of gate 2's two batteries: its wrong candidate and
its report here; the whole script at tiny scale on the CPU backend under -m slow."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
H200_SOFTMAX = ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11" / "softmax" / "output_code.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_gate2_scale_under_test",
                                                  ROOT / "benchmarks" / "gpu" / "gate2_scale.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wrong_candidate_reads_nan_as_zero_in_every_load_of_the_input() -> None:
    from kernelopt_core.artifacts import parse_output_code

    kernel = parse_output_code(str(H200_SOFTMAX)).kernels[0]
    wrong = _script().nan_as_zero(kernel.source)
    assert wrong.count("tl.where(tmp0 != tmp0, 0.0, tmp0)") == 1
    assert wrong.count("tl.where(tmp4 != tmp4, 0.0, tmp4)") == 1
    compile(wrong, "wrong.py", "exec")
    with pytest.raises(ValueError):
        _script().nan_as_zero("def k(in_ptr1):\n    tmp0 = tl.load(in_ptr1 + x0)\n")


def test_the_report_names_the_targets_and_each_run() -> None:
    script = _script()
    memory = {"working_set_bytes": 12_884_901_888, "tracked_peak_bytes": 26_000_000_000, "ratio_to_working_set": 2.02,
              "device_peak_bytes": 27_000_000_000, "device_peak_ratio": 2.1, "device_in_use_before_bytes": 600_000_000,
              "device_in_use_peak_bytes": 28_000_000_000}
    report = {"problem": "softmax_long_rows", "scale": "h200", "device": "cuda", "compile_s": 40.0, "wall_s": 90.0,
              "runs": [{"kernel": "k", "candidate": "correct", "battery": "full", "passed": True,
                        "could_not_verify": False, "gate_s": 6.2, "steps_s": {"checks_s": 4.1, "compare_s": 1.2},
                        "runs": {"original": 16, "candidate": 20}, "memory": memory},
                       {"kernel": "k", "candidate": "wrong", "battery": "screen", "skipped": "out of time"}]}
    text = script._markdown(report)
    assert "full battery <= 10 s, screen <= 3 s, device peak <= 3x" in text
    assert "| k | correct | full | passed | 6.2 | 4.1 | 16/20 | 12.88 | 2.02 | 2.1 | 27.00 | 0.60/28.00 |" in text
    assert "| k | wrong | screen | out of time |" in text and "compare 1.2" in text


@pytest.mark.slow
def test_the_script_runs_at_tiny_scale_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("KERNELOPT_GATE2_DEVICE", "cpu"), ("KERNELOPT_PROBLEM_SCALE", "tiny"),
                        ("KERNELOPT_GPU_BUDGET_S", "900")):
        monkeypatch.setenv(name, value)
    summary = _script().run(str(tmp_path))
    assert summary["verdicts_as_expected"], summary
    report = json.loads((tmp_path / "gate2_scale.json").read_text())
    batteries = [(r["candidate"], r["battery"], r["passed"]) for r in report["runs"]]
    assert batteries == [("correct", "screen", True), ("correct", "screen", True), ("correct", "full", True),
                         ("wrong", "screen", True), ("wrong", "full", False)]
    assert "NaN" in report["runs"][-1]["reason"] and "full battery" in report["runs"][-1]["reason"]
