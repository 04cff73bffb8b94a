"""benchmarks/gpu/race_check.py at tiny scale on the CPU (issue 28, item 3): the race stops at gate 1's rule, the
correct candidate passes, and with gate 1 skipped the race passes gates 2-3 here, whose verdict says races were
not checked. On the H200 the same script records racecheck and memcheck with their times."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # compiles the softmax problem and runs three cascades on the interpreter (~2.5 min on 2 cores)
def test_race_check_on_the_cpu_records_races_not_checked(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gpu_race_check", ROOT / "benchmarks" / "gpu" / "race_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.run(str(tmp_path))
    assert summary["errors"] == [] and summary["device"] == "cpu"
    assert summary["race_rejected_by_gate"] == 1 and summary["race_rule"]
    assert summary["correct_accepted"] and summary["correct_sanitizer"] == []
    assert summary["race_without_gate1_failed_gate"] is None  # the interpreter cannot show it
    assert "races and stray accesses not checked" in summary["race_without_gate1_sanitizer_note"]
    recorded = json.loads((tmp_path / "race_check.json").read_text())
    assert [r["run"] for r in recorded["runs"]] == ["finalist", "finalist", "without gate 1"]
    assert "| without gate 1 | S-reload-race | 2,3 | passed |" in (tmp_path / "race_check.md").read_text()
