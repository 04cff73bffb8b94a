"""The offline provider end to end on the CPU backend, through the CLI: a run killed (SIGKILL) in the
middle of its first iteration resumes, loses nothing it recorded, and finishes with a rewrite that
all four gates accepted (gate 4 measures the interpreter's real wall-clock time)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import H200_DUMPS, ROOT, run_watched

# A run reports at least every 10 s (progress or heartbeat); this long without a line, it is stuck.
STALL_S = 240


def _journal(run_dir: Path) -> list[dict]:
    path = run_dir / "journal.jsonl"
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            break
    return entries


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "KERNELOPT_CACHE_DIR": str(tmp_path / "cache")}


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a backstop only: the waits below fail when the run stops reporting
def test_killed_run_resumes_and_accepts_a_rewrite(cpu_example_dump: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "kernelopt_core.cli.main", "optimize", str(cpu_example_dump), "--run-root",
               str(runs), "--beam-width", "1", "--iterations", "1", "--plans", "1", "--retries", "1",
               "--ab-rounds", "4", "--budget", "0", "--events"]  # no budget: the gates decide, however busy the machine
    process = subprocess.Popen(command, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    events: list[str] = []
    reader = threading.Thread(target=lambda: events.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        run_dir = None
        seen, last_progress = 0, time.monotonic()
        while process.poll() is None:
            if len(events) > seen:  # progress or a heartbeat: the run is alive and working
                seen, last_progress = len(events), time.monotonic()
            assert time.monotonic() - last_progress < STALL_S, f"no event for {STALL_S} s: {events[-3:]}"
            found = list(runs.glob("*/journal.jsonl")) if runs.exists() else []
            if found:
                run_dir = found[0].parent
                if any(e["kind"] == "screen" for e in _journal(run_dir)):
                    break  # a gate result is on disk and the iteration is still going: kill now
            time.sleep(0.2)
        assert run_dir is not None and process.poll() is None, "the run ended before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)  # the CLI and its worker, mid-iteration
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    reader.join(timeout=10)
    events = [line for line in events if line.startswith("@kernelopt-event ")]
    assert any('"stage": "candidate"' in line for line in events)  # --events streamed progress before the kill
    before = (run_dir / "journal.jsonl").read_text().splitlines()
    before = [line for line in before if line.endswith("}")]
    killed_entries = [json.loads(line) for line in before]
    assert not any(e["kind"] == "result" for e in killed_entries)

    resumed = run_watched([sys.executable, "-m", "kernelopt_core.cli.main", "optimize", "--resume", run_dir.name,
                           "--run-root", str(runs), "--budget", "0", "--json"], stall_s=STALL_S, cwd=ROOT,
                          env=_env(tmp_path))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert {"run_id", "run_dir", "decision", "reason", "speedup", "ci", "kernels"} <= set(result)
    assert result["run_id"] == run_dir.name
    assert result["decision"] == "optimized", result["reason"]
    assert result["speedup"] >= 1.03 and result["ci"][0] >= 1.03  # gate 4's rule, measured for real
    gates = {g["gate"]: g for g in result["cascade"]["gates"]}
    assert gates[3]["passed"] and gates[4]["passed"] and gates[4]["timing_path"] == "module-call"

    entries = _journal(run_dir)
    after = [json.dumps(e) for e in entries]
    assert [json.loads(line) for line in before] == [json.loads(line) for line in after[: len(before)]]
    assert [e["seq"] for e in entries] == list(range(len(entries)))
    keyed = Counter((e["kind"], e["key"]) for e in entries if "key" in e)
    assert max(keyed.values()) == 1  # the screen recorded before the kill was not run again
    assert sum(1 for e in entries if e["kind"] == "resumed") == 1
    for kind in ("plan", "candidate", "iteration_done"):
        assert len([e for e in entries if e["kind"] == kind]) == len({json.dumps({k: v for k, v in e.items()
                                                                               if k not in ("seq", "time")})
                                                                   for e in entries if e["kind"] == kind})
    assert [e for e in entries if e["kind"] == "result"][-1]["decision"] == "optimized"

    files = {p.name for p in run_dir.iterdir()}
    assert {"report.md", "final.diff", "result.json", "original_kernel.py", "optimized_kernel.py"} <= files
    diff = (run_dir / "final.diff").read_text()
    assert diff.startswith("---") and "fixed_config" in diff
    assert "**decision: optimized**" in (run_dir / "report.md").read_text()
    assert json.loads((run_dir / "result.json").read_text())["decision"] == "optimized"


def test_cli_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in _env(tmp_path).items() if not k.startswith("ANTHROPIC_")}
    base = [sys.executable, "-m", "kernelopt_core.cli.main", "optimize", "--run-root", str(tmp_path / "runs")]
    missing = subprocess.run([*base, str(tmp_path / "nope.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    no_key = subprocess.run([*base, str(H200_DUMPS / "softmax"), "--provider", "anthropic"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert no_key.returncode == 2 and "--provider offline" in no_key.stderr and "Traceback" not in no_key.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    nothing = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert nothing.returncode == 2 and "--resume" in nothing.stderr


def test_demo_refuses_a_missing_problem(tmp_path: Path) -> None:
    demo = subprocess.run([sys.executable, "-m", "kernelopt_core.cli.main", "demo", "--out", str(tmp_path / "demo"),
                           "--problem", str(tmp_path / "missing.py")], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 2 and "no such problem file" in demo.stderr and "Traceback" not in demo.stderr


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a backstop only: run_watched fails when the run stops reporting
def test_the_default_search_ends_within_its_budget(cpu_example_dump: Path, tmp_path: Path) -> None:
    """The default search (B=4, T=5, N=4, K=4) on the CPU backend within a 4-minute budget: it stops starting
    candidates for its final gates, reports its best verified outcome and the time split. The run may pass
    the deadline only by the one step that was under way past its estimate (a screen or a finalist)."""
    budget = 240
    done = run_watched([sys.executable, "-m", "kernelopt_core.cli.main", "optimize", str(cpu_example_dump),
                        "--run-root", str(tmp_path / "runs"), "--budget", str(budget), "--json"],
                       stall_s=STALL_S, cwd=ROOT, env=_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "budget: 4 min" in done.stderr  # printed when the run starts
    result = json.loads(done.stdout)
    assert result["decision"] in ("optimized", "matched", "fallback")
    assert result["budget"]["seconds"] == budget
    split = result["time_split"]
    steps = [c["screen_s"] + c["time_s"] for c in split["candidates"]] + split["finalize_s"] + [0.0]
    assert result["budget"]["elapsed_s"] <= budget + max(steps) + 5.0
    if result["budget_reached"]:
        assert result["reason"].startswith("budget reached")
    assert split["screened"] == len(split["candidates"]) and split["stages"]["dispatch"] > 0
    if split["finalize_s"]:  # each finalist's seconds per gate (gate 3 always runs in the final gates)
        assert split["final_gates_s"] and all(g["3"] > 0 for g in split["final_gates_s"])
    assert "## Time" in Path(result["run_dir"], "report.md").read_text()
