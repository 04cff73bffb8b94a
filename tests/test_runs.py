"""Run folders: the append-only journal, torn-line recovery, lookups, report rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt_core.runs import Journal, RunError, RunFolder, render_report


def test_journal_appends_numbered_lines_and_indexes_keys(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "journal.jsonl")
    journal.append("run_started", "run", graph_path="/x/output_code.py")
    journal.append("screen", "k:abc", passed=True, value={"reason": "ok"})
    journal.append("plan", plan={"direction": "launch_config"})
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [0, 1, 2]
    assert journal.lookup("screen", "k:abc")["value"] == {"reason": "ok"}
    assert journal.lookup("screen", "missing") is None
    assert [e["kind"] for e in journal.of_kind("plan")] == ["plan"]
    reopened = Journal.open(tmp_path / "journal.jsonl")
    assert len(reopened.entries) == 3 and not reopened.dropped_tail
    assert reopened.lookup("run_started", "run")["graph_path"] == "/x/output_code.py"


def test_a_torn_last_line_is_dropped_and_appending_continues(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal.open(path)
    journal.append("a", "1", value=1)
    journal.append("b", "2", value=2)
    with open(path, "a") as handle:  # a SIGKILL in the middle of a write
        handle.write('{"seq": 2, "kind": "screen", "key": "half')
    reopened = Journal.open(path)
    assert reopened.dropped_tail
    assert [e["kind"] for e in reopened.entries] == ["a", "b"]
    reopened.append("c", "3", value=3)
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["a", "b", "c"]  # the torn bytes were truncated, the journal stays valid JSON lines
    assert json.loads(path.read_text().splitlines()[-1])["seq"] == 2


def test_run_folders_are_created_and_found(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path / "runs", "model__0_inference_0.0")
    assert run.path.parent == tmp_path / "runs" and (run.path / "candidates").is_dir() and (run.path / "ncu").is_dir()
    assert "model-0-inference-0-0" in run.id
    run.journal.append("run_started", "run")
    path = run.write_candidate("k", "0123456789abcdef", "source")
    assert path.read_text() == "source" and path.name == "k.0123456789ab.py"
    run.write_json("result.json", {"decision": "matched"})
    assert run.read_json("result.json") == {"decision": "matched"}
    assert RunFolder.open(run.id, tmp_path / "runs").path == run.path
    assert RunFolder.open(str(run.path)).id == run.id
    with pytest.raises(RunError, match="no run to resume"):
        RunFolder.open("nope", tmp_path / "runs")


def test_report_has_the_decision_table_gates_and_fallback(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "journal.jsonl")
    journal.append("run_started", "run", graph_path="/g/output_code.py", device="cpu", provider="offline",
                   config={"beam_width": 4, "iterations": 5, "plans": 4, "retries": 4})
    journal.append("screen", "k:1", passed=False, failed_gate=2)
    journal.append("screen", "k:2", passed=True, failed_gate=None)
    result = {
        "run_id": "r1", "decision": "matched", "reason": "2 correct candidates, none cleared 1.03x",
        "speedup": None, "ci": None, "timing_path": "module-call",
        "kernels": [{"name": "triton_per_x", "share": 0.9, "decision": "matched", "best_title": "launch config XBLOCK=8",
                     "kernel_speedup": 1.01, "candidates": 2, "screened_ok": 1},
                    {"name": "triton_red_y", "share": 0.1, "decision": "optimized", "best_title": "persistent",
                     "kernel_speedup": 1.4, "candidates": 3, "screened_ok": 2, "ideal_bytes": 268435456,
                     "sol_pct": 65.0, "sol_after_pct": 91.0, "traffic_ratio": 1.5, "causes": ["re-reads"],
                     "paper_tier": "near-optimal"}],
        "cascade": {"gates": [{"gate": 3, "name": "model", "passed": True, "reason": "ok", "seconds": 1.0,
                               "steps_s": {"seeds": 0.6, "sanitizer_wait": 0.2, "checks_s": 0.9, "reference": 0.5}},
                              {"gate": 4, "name": "perf", "passed": False, "reason": "speedup 1.010x | below",
                               "seconds": 2.0}]},
        "llm_usage": {"calls": 3, "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.001},
    }
    text = render_report(result, journal)
    assert "**decision: matched**" in text
    assert "| `triton_per_x` | 90% | - | - | - | matched | launch config XBLOCK=8 | 1.010x | - | 2 | 1 |" in text
    assert "| `triton_red_y` | 10% | 65% | 1.50x | re-reads | optimized | persistent | 1.400x | 91% | 3 | 2 |" in text
    assert "`triton_red_y` near-optimal" in text  # the paper's tier, labelled, beside the SOL figures
    assert "| 4 perf | no | speedup 1.010x \\| below | 2.0 | - |" in text
    assert "| 3 model | yes | ok | 1.0 | seeds 0.6 s, reference 0.5 s |" in text  # its steps of 0.5 s or more
    assert "- gate 2: 1" in text
    assert "## Fallback" in text and "CPU Triton-interpreter" in text
    assert "3 call(s)" in text and "$0.0010" in text
