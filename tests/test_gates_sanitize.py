"""compute-sanitizer on a finalist (issue 28): memcheck and racecheck on every finalist's captured launch on a
GPU, each timed; on the CPU the verdict says races were not checked. The sanitizer itself needs a GPU: here
a stand-in executable prints what compute-sanitizer prints, so the parsing and the verdict are what is tested."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from kernelopt_core.gates import sanitize
from kernelopt_core.gates.sanitize import NOT_ON_CPU, SanitizerRun, run_sanitizer, sanitize_finalist


def test_on_the_cpu_races_are_not_checked() -> None:
    report = sanitize_finalist("g.py", "r.py", ["k"], {}, "cpu")
    assert report.runs == [] and report.errors == [] and report.note == NOT_ON_CPU
    assert "races and stray accesses not checked" in report.note


def test_every_finalist_gets_memcheck_and_racecheck_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def stand_in(tool: str, graph: str, restitched: str, kernel: str, device: str, timeout_s: float) -> SanitizerRun:
        calls.append((kernel, tool))
        if kernel == "racy" and tool == "racecheck":
            return SanitizerRun(tool, True, 2, 3.25, "Error: Race reported between Write access and Read access")
        return SanitizerRun(tool, True, 0, 1.5, "no errors")

    monkeypatch.setattr(sanitize, "run_sanitizer", stand_in)
    compiled = {"k": {"configs": [{"shared_bytes": 0}]}, "racy": {"configs": [{"shared_bytes": 4096}]}}
    report = sanitize_finalist("g.py", "r.py", ["k", "racy"], compiled, "cuda:0")
    assert calls == [("k", "memcheck"), ("k", "racecheck"), ("racy", "memcheck"), ("racy", "racecheck")]
    assert [r["seconds"] for r in report.runs] == [1.5, 1.5, 1.5, 3.25]
    assert report.errors == ["compute-sanitizer racecheck found 2 error(s) in racy: Error: Race reported between "
                             "Write access and Read access"]
    assert report.note == ("compute-sanitizer: memcheck 0 errors (1.5 s), racecheck 0 hazards (1.5 s; the kernel uses "
                           "no shared memory), memcheck 0 errors (1.5 s), racecheck 2 hazards (3.2 s)")


def test_a_sanitizer_that_cannot_run_says_what_was_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sanitize, "run_sanitizer", lambda tool, *a, **k: SanitizerRun(
        tool, False, None, 0.0, "compute-sanitizer was not found (set KERNELOPT_COMPUTE_SANITIZER)"))
    report = sanitize_finalist("g.py", "r.py", ["k"], {}, "cuda:0")
    assert not report.errors
    assert "racecheck did not run (compute-sanitizer was not found" in report.note and "races not checked" in report.note


@pytest.mark.parametrize("tool,printed,errors", [
    ("racecheck", "========= Error: Race reported between Write access at 0x1f0 in k and Read access at 0x2a0\n"
                  "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n", 1),
    ("memcheck", "SANITIZE-TARGET-OK\n========= ERROR SUMMARY: 0 errors\n", 0),
])
def test_the_sanitizer_report_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, printed: str,
                                      errors: int) -> None:
    fake = tmp_path / "compute-sanitizer"
    (tmp_path / "printed.txt").write_text(printed)
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'printed.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELOPT_COMPUTE_SANITIZER", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its scratch folder goes
    run = run_sanitizer(tool, "g.py", "r.py", "k", "cuda:0", timeout_s=30)
    assert run.ran and run.errors == errors and run.seconds >= 0
    if errors:
        assert "Race reported" in run.summary
    assert not [p for p in os.listdir(tmp_path) if p.startswith("kernelopt-sanitize-")]  # scratch removed
