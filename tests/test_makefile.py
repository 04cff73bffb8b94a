"""The Makefile's promises: PyTorch's CPU build from PyTorch's CPU index (never PyPI's CUDA build),
an unreachable index costs seconds, and `make test` runs the VS Code part whatever the Python part
did, reporting both. Dry runs and stand-in commands only: nothing is installed or tested twice."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cpu_wheel_comes_from_the_cpu_index() -> None:
    dry = _make("-n", "torch-install-check", "HAS_GPU=")
    assert dry.returncode == 0, dry.stderr
    assert "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu" in dry.stdout
    assert "--retries 2 --timeout 20" in dry.stdout  # an unreachable index fails in seconds
    gpu = _make("-n", "torch-install-check", "HAS_GPU=1")
    assert "install --dry-run --ignore-installed --no-deps --report" in gpu.stdout
    assert "torch==2.13.0+cpu" not in gpu.stdout and "whl/cpu" not in gpu.stdout


def test_make_test_runs_both_parts_and_reports_both() -> None:
    # A Python part that fails (the test runner is `false`) and a VS Code part that passes (npm is `true`).
    done = _make("test", "PYTEST=false", "NPM=true")
    assert done.returncode != 0
    lines = done.stdout.strip().splitlines()
    assert lines[-2].startswith("make test: python") and "FAILED" in lines[-2]
    assert lines[-1] == "make test: vscode extension (build + tests + package): passed"
