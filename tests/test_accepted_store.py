"""The accepted-kernel store: entries, atomic writes, corruption, lookup, building entries, the CLI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import H200_DUMPS

from kernelopt_core.accepted import (
    STORE_ENV,
    AcceptedEntry,
    AcceptedStore,
    AcceptedStoreError,
    StoreUnreadable,
    default_store_root,
    entries_from_run,
    entry_from_cascade,
    entry_from_run,
    entry_id,
)
from kernelopt_core.artifacts import parse_output_code, source_hash
from kernelopt_core.cli.main import main

RMSNORM = H200_DUMPS / "rmsnorm" / "output_code.py"
KERNEL = "triton_red_fused_add_mean_mul_pow_rsqrt_0"
PASSED = {"accepted": True, "failed_gate": None, "reason": "all gates passed", "speedup": 1.21, "ci": [1.15, 1.27],
          "timing_path": "module-call", "gates": [{"gate": 1, "name": "static", "passed": True, "reason": "ok"}],
          "kernel_speedups": {KERNEL: 1.4}}


def variant(source: str, tag: str = "evict_last") -> str:
    """A different, equally correct kernel: another eviction hint on the first load."""
    changed = source.replace("eviction_policy='evict_first'", f"eviction_policy='{tag}'", 1)
    assert changed != source
    return changed


def make_entry(created: str = "2026-11-30T10:00:00+00:00", tag: str = "evict_last") -> AcceptedEntry:
    graph = parse_output_code(str(RMSNORM))
    entry = entry_from_cascade(graph, KERNEL, variant(graph.kernels[0].source, tag), PASSED, run_id="run-1",
                               gpu="NVIDIA H200", torch_version="2.11.0+cu128", triton_version="3.6.0")
    entry.created = created
    return entry


def test_entry_from_cascade_records_what_the_runtime_checks() -> None:
    graph = parse_output_code(str(RMSNORM))
    entry = make_entry()
    assert entry.original_hash == graph.kernels[0].source_hash == source_hash(entry.original_source or "")
    assert entry.kernel_name == KERNEL
    assert [spec["shape"] for spec in entry.input_specs] == [[8192, 4096], [4096]]
    assert entry.launch_numels == [[8192, 4096]]
    assert entry.signature == ["in_ptr0", "in_ptr1", "out_ptr1", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"]
    assert entry.speedup == 1.21 and entry.ci == (1.15, 1.27) and entry.timing_path == "module-call"
    assert entry.gates_passed and entry.gpu == "NVIDIA H200" and entry.run_id == "run-1"
    assert entry.notes == ["kernel speedup 1.400x"]
    assert entry.id == entry_id(entry.original_hash, entry.accepted_source) and len(entry.id) == 12


def test_entry_from_cascade_refuses_what_is_not_accepted() -> None:
    graph = parse_output_code(str(RMSNORM))
    source = graph.kernels[0].source
    with pytest.raises(AcceptedStoreError, match="did not pass the gates .gate 4: 1.01x."):
        entry_from_cascade(graph, KERNEL, variant(source), {"accepted": False, "reason": "gate 4: 1.01x"})
    with pytest.raises(AcceptedStoreError, match="is the original source"):
        entry_from_cascade(graph, KERNEL, source, PASSED)
    with pytest.raises(AcceptedStoreError, match="no Triton kernel triton_nope"):
        entry_from_cascade(graph, "triton_nope", variant(source), PASSED)


def test_add_list_get_remove_round_trip(tmp_path: Path) -> None:
    store = AcceptedStore(str(tmp_path / "store"))
    assert store.list() == [] and store.scan() == ([], [])  # a missing folder is an empty store
    entry = make_entry()
    entry_id_ = store.add(entry)
    assert entry_id_ == entry.id
    assert store.add(make_entry()) == entry_id_  # the same replacement again: one entry
    assert sorted(os.listdir(store.root)) == [f"{entry_id_}.json"]  # no temporary files left behind
    (listed,) = store.list()
    assert listed.to_json() == entry.to_json()
    got = store.get(entry_id_[:6])
    assert got is not None and got.accepted_source == entry.accepted_source
    assert store.get("ffffffff") is None
    assert store.remove(entry_id_[:5]) == entry_id_
    assert store.list() == []
    with pytest.raises(AcceptedStoreError, match=f"no accepted entry {entry_id_}"):
        store.remove(entry_id_)
    with pytest.raises(AcceptedStoreError, match="not an entry id"):
        store.remove("../../etc/passwd")


def test_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    store = AcceptedStore(str(tmp_path))
    ids = [store.add(make_entry(tag=tag)) for tag in ("evict_last", "evict_normal", "evict_fist")]
    common = os.path.commonprefix(ids)
    if len(common) >= 4:  # ids are hashes: a shared 4-char prefix is unlikely but possible
        with pytest.raises(AcceptedStoreError, match="matches"):
            store.remove(common)
    (tmp_path / "aaaa00000001.json").write_text("{}")
    (tmp_path / "aaaa00000002.json").write_text("{}")
    with pytest.raises(AcceptedStoreError, match="aaaa matches 2 entries"):
        store.remove("aaaa")


def test_find_by_source_hash_newest_first(tmp_path: Path) -> None:
    store = AcceptedStore(str(tmp_path))
    old = make_entry(created="2026-01-01T00:00:00+00:00", tag="evict_last")
    new = make_entry(created="2026-06-01T00:00:00+00:00", tag="evict_normal")
    store.add(old)
    store.add(new)
    found = store.find_by_source_hash(old.original_hash)
    assert [e.id for e in found] == [new.id, old.id]
    assert store.find_by_source_hash("0" * 64) == []
    assert [e.id for e in store.find_by_accepted_hash(old.accepted_hash)] == [old.id]


def test_atomic_write_keeps_the_old_entry_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AcceptedStore(str(tmp_path))
    entry = make_entry()
    store.add(entry)
    before = (tmp_path / f"{entry.id}.json").read_text()

    def broken_fsync(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)  # fails after the temporary file is written
    with pytest.raises(AcceptedStoreError, match="disk full"):
        store.add(entry)
    assert (tmp_path / f"{entry.id}.json").read_text() == before
    assert os.listdir(tmp_path) == [f"{entry.id}.json"]


@pytest.mark.parametrize(("content", "words"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"kernel_name": "x"}', "missing field(s) original_hash"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
])
def test_corrupted_entries_are_reported_and_skipped(tmp_path: Path, content: str | bytes, words: str) -> None:
    store = AcceptedStore(str(tmp_path))
    good = make_entry()
    store.add(good)
    bad = tmp_path / "0123456789ab.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    entries, problems = store.scan()
    assert [e.id for e in entries] == [good.id]
    (problem,) = problems
    assert problem.path == str(bad) and words in problem.problem
    assert str(problem).startswith(f"{bad}: ")


def test_tampered_entries_are_refused(tmp_path: Path) -> None:
    store = AcceptedStore(str(tmp_path))
    entry = make_entry()
    store.add(entry)
    path = tmp_path / f"{entry.id}.json"
    data = json.loads(path.read_text())
    data["accepted_source"] += "\n# edited by hand\n"
    path.write_text(json.dumps(data))
    (problem,) = store.scan()[1]
    assert "does not match its recorded hash" in problem.problem
    data = json.loads(path.read_text())
    data.pop("accepted_hash")
    data["speedup"] = "fast"
    path.write_text(json.dumps(data))
    assert "field 'speedup' has the wrong type" in store.scan()[1][0].problem
    data["speedup"] = 1.2
    path.write_text(json.dumps(data))
    assert "id" in store.scan()[1][0].problem  # content changed, id did not
    # A valid entry under another file name is not trusted either.
    path.unlink()
    store.add(entry)
    os.rename(tmp_path / f"{entry.id}.json", tmp_path / "aaaaaaaaaaaa.json")
    assert "file name does not match the entry id" in store.scan()[1][0].problem


def test_unreadable_store(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "accepted"
    not_a_folder.write_text("oops")
    store = AcceptedStore(str(not_a_folder))
    with pytest.raises(StoreUnreadable, match="not a folder"):
        store.scan()
    assert store.list() == []
    assert store.find_by_source_hash("0" * 64) == []


def test_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    project = tmp_path / "project"
    (project / ".kernelopt").mkdir(parents=True)
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert default_store_root(str(deep)) == str(project / ".kernelopt" / "accepted")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert default_store_root(str(lonely)) == str(lonely / ".kernelopt" / "accepted")
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "elsewhere"))
    assert default_store_root(str(deep)) == str(tmp_path / "elsewhere")
    assert AcceptedStore().root == str(tmp_path / "elsewhere")


def _write_run(run_dir: Path, decision: str = "optimized", with_cascade: bool = True) -> Path:
    """A run folder as kernelopt_core.search.pipeline writes it: result.json names the accepted kernels,
    optimized_output_code.py holds them."""
    graph = parse_output_code(str(RMSNORM))
    run_dir.mkdir(parents=True)
    result = {
        "run_id": run_dir.name, "run_dir": str(run_dir), "decision": decision, "reason": "gates passed",
        "speedup": 1.21, "ci": [1.15, 1.27], "timing_path": "module-call", "kernels": [{"name": KERNEL}],
        "accepted_kernels": [KERNEL] if decision == "optimized" else [],
        "cascade": {**PASSED, "graph_path": str(RMSNORM), "kernels": [KERNEL]} if with_cascade else None,
        "graph_path": str(RMSNORM), "device": "cuda",
    }
    if decision == "optimized":
        text = RMSNORM.read_text()
        source = graph.kernels[0].source
        assert text.count(source) == 1
        (run_dir / "optimized_output_code.py").write_text(text.replace(source, variant(source)))
    (run_dir / "result.json").write_text(json.dumps(result))
    return run_dir


def test_entry_from_run(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "runs" / "20261130-abc")
    entry = entry_from_run(str(run))
    assert entry.run_id == "20261130-abc" and entry.kernel_name == KERNEL and entry.gates_passed
    assert entry.speedup == 1.21 and entry.graph_path == str(RMSNORM)
    no_cascade = _write_run(tmp_path / "runs" / "no-cascade", with_cascade=False)
    (entry2,) = entries_from_run(str(no_cascade))
    assert entry2.gates_passed and entry2.ci == (1.15, 1.27)
    assert entry2.accepted_source == variant(parse_output_code(str(RMSNORM)).kernels[0].source)
    (no_cascade / "optimized_output_code.py").unlink()
    with pytest.raises(AcceptedStoreError, match="optimized graph cannot be read"):
        entries_from_run(str(no_cascade))
    fallback = _write_run(tmp_path / "runs" / "fallback", decision="fallback")
    with pytest.raises(AcceptedStoreError, match="no accepted kernel .decision 'fallback'"):
        entry_from_run(str(fallback))
    with pytest.raises(AcceptedStoreError, match="result.json: cannot read"):
        entry_from_run(str(tmp_path / "missing"))


def test_cli_add_list_show_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    run = _write_run(tmp_path / "runs" / "r1")
    assert main(["accepted", "--store", store, "add", str(run), "--json"]) == 0
    (added,) = json.loads(capsys.readouterr().out)["added"]
    assert main(["accepted", "--store", store, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in listing["entries"]] == [added] and listing["problems"] == []
    assert listing["entries"][0]["gates_passed"] is True and "accepted_source" not in listing["entries"][0]
    assert main(["accepted", "--store", store]) == 0
    table = capsys.readouterr().out
    assert added in table and KERNEL in table and "1.210x" in table and "1.150-1.270" in table
    assert main(["accepted", "show", added[:6], "--store", store]) == 0
    shown = capsys.readouterr().out
    # the diff of the kernel: exactly the eviction hint changed
    changed = [line for line in shown.splitlines() if line[:1] in ("+", "-") and not line.startswith(("+++", "---"))]
    assert len(changed) == 2
    assert changed[0].startswith("-") and "tmp5 = tl.load(" in changed[0] and "'evict_first'" in changed[0]
    assert changed[1].startswith("+") and "tmp5 = tl.load(" in changed[1] and "'evict_last'" in changed[1]
    assert "gate 1 static: pass" in shown
    assert main(["accepted", "remove", added, "--store", store]) == 0
    assert f"removed accepted entry {added}" in capsys.readouterr().out
    assert main(["accepted", "remove", added, "--store", store]) == 2
    assert f"no accepted entry {added}" in capsys.readouterr().err


def test_cli_add_from_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = parse_output_code(str(RMSNORM))
    candidate = tmp_path / "candidate.py"
    candidate.write_text(variant(graph.kernels[0].source))
    verify = tmp_path / "verify.json"
    verify.write_text(json.dumps({**PASSED, "graph_path": str(RMSNORM), "kernels": [KERNEL]}))
    store = str(tmp_path / "store")
    assert main(["accepted", "--store", store, "add", "--from-verify", str(verify), "--candidate", str(candidate)]) == 0
    assert "accepted " in capsys.readouterr().out
    (entry,) = AcceptedStore(store).list()
    assert entry.accepted_source == candidate.read_text() and entry.run_id == "verify"
    verify.write_text(json.dumps({**PASSED, "accepted": False, "reason": "gate 3 failed", "graph_path": str(RMSNORM),
                                  "kernels": [KERNEL]}))
    assert main(["accepted", "--store", store, "add", "--from-verify", str(verify), "--candidate", str(candidate)]) == 2
    assert "did not pass the gates (gate 3 failed)" in capsys.readouterr().err


def test_cli_reports_corrupt_entries_and_unreadable_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "0123456789ab.json").write_text("{broken")
    assert main(["accepted", "--store", str(store)]) == 0
    captured = capsys.readouterr()
    assert "no accepted kernels" in captured.out
    assert f"skipped {store / '0123456789ab.json'}: not valid JSON" in captured.err
    bad_root = tmp_path / "file"
    bad_root.write_text("x")
    assert main(["accepted", "--store", str(bad_root)]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_store_module_does_not_import_torch() -> None:
    import subprocess

    code = "import sys, kernelopt_core.accepted, kernelopt_core.deploy.substitution, kernelopt; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
