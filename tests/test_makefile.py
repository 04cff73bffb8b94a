"""The Makefile's promises: PyTorch's CPU build from PyTorch's CPU index (never PyPI's CUDA build),
an unreachable index costs seconds, and `make test` runs the VS Code part whatever the Python part
did, reporting both. Dry runs and stand-in commands only: nothing is installed or tested twice."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    if env_extra is not None:  # a machine with no pip configuration of its own
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")} | env_extra
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cpu_wheel_comes_from_the_cpu_index() -> None:
    dry = _make("-n", "torch-install-check", "HAS_GPU=")
    assert dry.returncode == 0, dry.stderr
    assert "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu" in dry.stdout
    assert "--retries 2 --timeout 20" in dry.stdout  # an unreachable index fails in seconds
    # The install asks PyTorch's index for torch alone; its dependencies come from the default index.
    steps = _make("-n", "-B", "venv", "HAS_GPU=", "VENV=/nonexistent-venv").stdout.splitlines()
    torch_step = next(line for line in steps if "torch==2.13.0+cpu" in line and "--no-deps" in line)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in torch_step
    deps_step = next(line for line in steps if 'install -q torch "triton' in line)
    assert "index" not in deps_step and "--no-deps" not in deps_step
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


def _wheel(folder: Path, version: str) -> None:
    """A minimal valid wheel of a package called torch (metadata only), for a stand-in index."""
    name = f"torch-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{name}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        wheel.writestr(f"{name}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n")
        wheel.writestr(f"{name}.dist-info/RECORD", "")


@pytest.fixture()
def stand_in_indexes(tmp_path: Path):
    """Two package indexes on 127.0.0.1: 'pypi' has only the plain (CUDA) build, 'cpu' only the +cpu one,
    as on the real PyPI and download.pytorch.org/whl/cpu."""
    _wheel(tmp_path / "pypi" / "torch", "2.13.0")
    _wheel(tmp_path / "cpu" / "torch", "2.13.0+cpu")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _fresh_pip(pypi: str) -> dict[str, str]:
    # No pip.conf and no PIP_* variables of this machine, so its local wheel folder cannot help:
    # pip sees only the two stand-in indexes, like a fresh machine.
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": pypi, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv (make creates it)")
def test_a_machine_with_nothing_preinstalled_takes_the_cpu_wheel_from_the_cpu_index(stand_in_indexes: str) -> None:
    base = stand_in_indexes
    done = _make("torch-install-check", "HAS_GPU=", f"TORCH_CPU_INDEX={base}/cpu",
                 env_extra=_fresh_pip(base + "/pypi"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "would install torch 2.13.0+cpu from " + base + "/cpu/torch/" in done.stdout, done.stdout
    # The same pip without the Makefile's CPU index gets the plain build: the index is what makes it CPU.
    plain = _make("torch-install-check", "HAS_GPU=", "TORCH_INSTALL=torch==2.13.0",
                  env_extra=_fresh_pip(base + "/pypi"))
    assert "would install torch 2.13.0 from " + base + "/pypi/torch/" in plain.stdout, plain.stdout + plain.stderr


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv (make creates it)")
def test_an_unreachable_cpu_index_fails_and_never_falls_back_to_the_cuda_build(stand_in_indexes: str) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}/cpu"
    done = _make("torch-install-check", "HAS_GPU=", f"TORCH_CPU_INDEX={dead}",
                 env_extra=_fresh_pip(stand_in_indexes + "/pypi"))
    assert done.returncode != 0
    assert "would install" not in done.stdout
    assert "torch==2.13.0+cpu" in done.stdout + done.stderr
