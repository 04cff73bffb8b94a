""".ci/run's promises, with a stand-in `make` on PATH (nothing is built or tested): the real-host VS Code
test's setup runs while `make test` runs, the host test runs after it, and either failing fails CI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT

# Records each call and its start/end; exits with FAKE_RC_<target> (default 0). The setup takes a while,
# as the real one downloads.
FAKE_MAKE = """#!/usr/bin/env bash
target=""
for arg in "$@"; do case "$arg" in -*|*=*) ;; *) target=$arg; break;; esac; done
echo "start $target $*" >> "$FAKE_LOG"
[ "$target" = vscode-host-setup ] && { echo "vscode-host setup: ready in 2 s"; sleep 2; }
echo "end $target" >> "$FAKE_LOG"
rc_var="FAKE_RC_${target//-/_}"
exit "${!rc_var:-0}"
"""


def _ci(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    make = bin_dir / "make"
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    log = tmp_path / "calls.log"
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "CI_LIMIT"))}
    run_env |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log), **env}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=run_env, capture_output=True, text=True,
                          timeout=120)
    return done, log.read_text().splitlines() if log.exists() else []


def test_setup_runs_during_make_test_then_the_host_test(tmp_path: Path) -> None:
    done, calls = _ci(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    starts = [c.split()[1] for c in calls if c.startswith("start")]
    assert starts[:2] == ["vscode-host-setup", "test"] or starts[:2] == ["test", "vscode-host-setup"]
    # make test started before the setup (2 s) ended: they ran side by side.
    first = {c.split()[1] + " " + c.split()[0]: i for i, c in reversed(list(enumerate(calls)))}
    assert first["test start"] < first["vscode-host-setup end"]
    assert starts[-1] == "test-vscode-host" and calls[-1] == "end test-vscode-host"
    host_call = next(c for c in calls if c.startswith("start test-vscode-host"))
    assert "VSCODE_HOST_TIMEOUT=3000" in host_call
    assert "  vscode-host setup: ready in 2 s" in done.stdout  # the setup's own report of its cost
    assert "ci: make test: passed" in done.stdout and "ci: make test-vscode-host: passed" in done.stdout


def test_a_failing_host_test_fails_ci(tmp_path: Path) -> None:
    done, calls = _ci(tmp_path, FAKE_RC_test_vscode_host="2")
    assert done.returncode != 0
    assert "ci: make test: passed" in done.stdout and "ci: make test-vscode-host: FAILED (exit 2)" in done.stdout


def test_a_failing_make_test_fails_ci_and_the_host_test_still_runs(tmp_path: Path) -> None:
    done, calls = _ci(tmp_path, FAKE_RC_test="2")
    assert done.returncode != 0
    assert "end test-vscode-host" in calls
    assert "ci: make test: FAILED (exit 2)" in done.stdout and "ci: make test-vscode-host: passed" in done.stdout


def test_a_failed_setup_fails_ci_without_starting_the_host_test(tmp_path: Path) -> None:
    done, calls = _ci(tmp_path, FAKE_RC_vscode_host_setup="1")
    assert done.returncode != 0
    assert not any(c.startswith("start test-vscode-host") for c in calls)
    assert "ci: test-vscode-host FAILED: its setup failed" in done.stdout


def test_no_time_left_for_the_host_test_fails_ci(tmp_path: Path) -> None:
    done, calls = _ci(tmp_path, CI_LIMIT_S="300")
    assert done.returncode != 0
    assert not any(c.startswith("start test-vscode-host") for c in calls)
    assert "of CI's time left after make test" in done.stdout
