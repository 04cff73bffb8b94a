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
    text = (tmp_path / "hygiene_check.md").read_text()
    assert "| holder timed out | yes |" in text and "| the campaign |" in text


def _module():
    spec = importlib.util.spec_from_file_location("gpu_hygiene_check", ROOT / "benchmarks" / "gpu" / "hygiene_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_record_reads_the_h200_run() -> None:
    """The markdown written from the JSON the H200 run recorded (2026-12-02)."""
    import json

    result = json.loads((ROOT / "benchmarks" / "results" / "h200" / "session5" / "hygiene_check.json").read_text())
    lines = _module()._body(result)
    assert lines[0].startswith("`kernelopt bench ") and "holds 16 GiB mid-job and is timed out at 30 s" in lines[0]
    assert "| memory seen while held | yes |" in lines
    assert any("while the middle problem held its memory 17003 MiB (pid 877" in line for line in lines)
    assert "| b_holds_memory_mid_job | 113.7 | 0 | 0 | 0 |" in lines and "| the campaign | 116.5 | 0 | 0 | 0 |" in lines
