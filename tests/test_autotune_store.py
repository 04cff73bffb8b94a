"""A candidate's autotuning results are kept between its contained processes (sandbox/autotune_store.py),
and only its own processes get them back."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelopt_core.gates.tasks import skeleton
from kernelopt_core.sandbox.autotune_store import MAX_FILE_BYTES, keep, restore


def _process(root: Path, name: str) -> SimpleNamespace:
    scratch = root / name
    (scratch / "inductor").mkdir(parents=True)
    return SimpleNamespace(scratch=str(scratch), closed=False, close=lambda: None)


def test_the_results_go_back_to_the_same_candidate_only(tmp_path: Path) -> None:
    store = str(tmp_path / "worker")
    first = _process(tmp_path, "first")
    tuned = Path(first.scratch, "inductor", "ab", "cabc123.best_config")
    tuned.parent.mkdir(parents=True)
    tuned.write_text('{"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 8, "configs_hash": "h"}')
    Path(first.scratch, "inductor", "ab", "cabc123.py").write_text("source: not kept")
    Path(first.scratch, "inductor", "ab", "huge.best_config").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    assert keep(first.scratch, "candidate-a/output_code.py", store) == 1

    same = _process(tmp_path, "same")
    assert restore(same.scratch, "candidate-a/output_code.py", store) == 1
    assert Path(same.scratch, "inductor", "ab", "cabc123.best_config").read_text() == tuned.read_text()
    assert not Path(same.scratch, "inductor", "ab", "cabc123.py").exists()
    other = _process(tmp_path, "other")
    assert restore(other.scratch, "candidate-b/output_code.py", store) == 0
    assert os.listdir(Path(other.scratch, "inductor")) == []
    assert keep(first.scratch, "k", None) == 0 and restore(same.scratch, "k", None) == 0  # outside a worker


def test_the_candidates_process_holder_keeps_them_when_it_closes_a_process(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.measure import job_context

    monkeypatch.setattr(job_context, "worker_scratch", lambda: str(tmp_path / "worker"))
    holder = skeleton.ProcessHolder(keeps_autotuning=True)
    process = _process(tmp_path, "screen")
    Path(process.scratch, "inductor", "x1").mkdir()
    Path(process.scratch, "inductor", "x1", "k.best_config").write_text("{}")
    holder.get("candidate-a", lambda: skeleton.SandboxSlot("candidate-a", process))
    holder.get("candidate-b", lambda: skeleton.SandboxSlot("candidate-b", _process(tmp_path, "next")))
    later = _process(tmp_path, "final-gates")
    assert restore(later.scratch, "candidate-a", str(tmp_path / "worker")) == 1
    assert skeleton.CANDIDATE.keeps_autotuning and not skeleton.BASELINE.keeps_autotuning
