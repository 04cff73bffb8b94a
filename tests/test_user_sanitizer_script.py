"""benchmarks/gpu/user_sanitizer.py at the examples' CPU size (issue 28, item 4): the correct softmax edit passes
gates 1-3 and its gate 3 verdict says races and stray accesses were not checked; the GPU-only planted stores are
recorded as skipped. On the H200 the same script records memcheck's and racecheck's verdicts and seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt_core.gates.sanitize import NOT_ON_CPU

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a worker, gate 1's compile and gates 2-3 on the interpreter (~1 min on 2 cores)
def test_user_sanitizer_on_the_cpu_records_not_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("KERNELOPT_GPU_BUDGET_S", "150")
    sys.modules.pop("benchmarks.gpu.user_sanitizer", None)
    from benchmarks.gpu.user_sanitizer import run

    summary = run(str(tmp_path), "cpu")
    assert summary["errors"] == [] and summary["device"] == "cpu", summary
    exp2 = summary["runs"]["exp2"]
    assert exp2["accepted"] and exp2["tools"] == {} and exp2["note"] == NOT_ON_CPU
    for planted in ("shifted-store", "far-store"):  # stores past the output: only memcheck on a GPU sees them
        assert summary["runs"][planted]["skipped"].startswith("GPU only")
    recorded = json.loads((tmp_path / "user_sanitizer.json").read_text())
    assert [r["run"] for r in recorded["runs"]] == ["exp2", "shifted-store", "far-store"]
    markdown = (tmp_path / "user_sanitizer.md").read_text()
    assert "| exp2 | 1,2,3 | passed: " in markdown and "races and stray accesses not checked" in markdown
