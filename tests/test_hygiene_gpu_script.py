"""benchmarks/gpu/hygiene_check.py at its CPU scale: the same campaign the lead runs on the H200 (a
problem timed out while its worker holds memory mid-job, between two real ones), without the
device memory part. About four minutes on two cores: slow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_hygiene_check_passes_on_the_cpu(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gpu_hygiene_check", ROOT / "benchmarks" / "gpu" / "hygiene_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run(str(tmp_path))
    assert result["device"] == "cpu"
    assert result["ok"], result["checks"]
    holder = result["problems"]["b_holds_memory_mid_job"]
    assert any("worker_main" in ended for ended in holder["processes_ended"])
    assert [s["left"] for s in result["after_each_problem"]] == [{}, {}, {}] and result["after_campaign"]["left"] == {}
