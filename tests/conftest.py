"""Shared fixtures: the H200 dumps, and one graph compiled for the CPU Triton backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200_DUMPS = FIXTURES / "inductor-h200-torch2.11"
H200_GRAPHS = sorted(p.name for p in H200_DUMPS.iterdir() if (p / "output_code.py").is_file())


@pytest.fixture(scope="session")
def h200_dumps() -> Path:
    return H200_DUMPS


def compile_example(problem: Path, out: Path) -> Path:
    """Compile a KernelBench-format problem with the CPU Triton backend in a subprocess."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    subprocess.run(
        [sys.executable, "-m", "kernelopt_core.cli.main", "compile", str(problem), "--out", str(out),
         "--device", "cpu"],
        check=True, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    found = sorted(out.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py"))
    assert found, f"no dump written for {problem}"
    return found[0]


@pytest.fixture(scope="session")
def cpu_example_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """output_code.py of examples/gelu_mlp.py compiled for the CPU Triton backend (once per session)."""
    out = tmp_path_factory.mktemp("cpu_example")
    return compile_example(ROOT / "examples" / "gelu_mlp.py", out)
