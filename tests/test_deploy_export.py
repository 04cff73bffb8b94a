"""`kernelopt export`: the re-stitched graph, its loader and manifest; the dump is never modified."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import H200_DUMPS, ROOT

from kernelopt_core.accepted import AcceptedEntry, AcceptedStore, entry_from_cascade
from kernelopt_core.artifacts import parse_output_code, source_hash
from kernelopt_core.cli.main import main
from kernelopt_core.deploy.export import ExportError, export_graph, resolve_entries

PASSED = {"accepted": True, "reason": "all gates passed", "speedup": 1.1, "ci": [1.05, 1.15]}


def evict_last(source: str) -> str:
    changed = source.replace("eviction_policy='evict_first'", "eviction_policy='evict_last'", 1)
    assert changed != source
    return changed


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """A private copy of the conv_bn_relu dump (three kernels), so exports can be checked byte for byte."""
    folder = tmp_path / "dump"
    shutil.copytree(H200_DUMPS / "conv_bn_relu", folder)
    return folder / "output_code.py"


def entry_for(dump: Path, index: int) -> AcceptedEntry:
    graph = parse_output_code(str(dump))
    kernel = graph.kernels[index]
    accepted = kernel.source.replace("@triton.jit\n", f"@triton.jit\n# accepted {index}\n", 1)
    return entry_from_cascade(graph, kernel.name, accepted, PASSED, gpu="NVIDIA H200")


def test_export_replaces_exactly_the_accepted_kernels(dump: Path, tmp_path: Path) -> None:
    original_text = dump.read_text()
    entries = [entry_for(dump, 0), entry_for(dump, 2)]
    result = export_graph(entries, str(tmp_path / "out"))
    assert dump.read_text() == original_text  # the dump is only read
    exported = parse_output_code(result.output_code)
    original = parse_output_code(str(dump))
    by_name = {k.name: k.source_hash for k in exported.kernels}
    assert by_name[original.kernels[0].name] == entries[0].accepted_hash
    assert by_name[original.kernels[1].name] == original.kernels[1].source_hash  # not accepted: untouched
    assert by_name[original.kernels[2].name] == entries[1].accepted_hash
    # Everything outside the two kernel literals is byte-identical.
    assert [(c.op, c.args) for c in exported.extern_calls] == [(c.op, c.args) for c in original.extern_calls]
    assert [launch.args for launch in exported.launches] == [launch.args for launch in original.launches]
    diff = Path(result.diff).read_text()
    assert diff.count("\n+# accepted ") == 2 and "\n-" not in diff.replace("\n---", "")
    manifest = json.loads(Path(result.manifest).read_text())
    assert manifest["source_graph_hash"] == original.text_hash
    assert manifest["output_code_hash"] == source_hash(Path(result.output_code).read_text())
    assert [k["entry"] for k in manifest["kernels"]] == [e.id for e in entries]
    assert [spec["shape"] for spec in manifest["inputs"]][:2] == [[128, 64, 3, 3], [128]]
    compile(Path(result.loader).read_text(), result.loader, "exec")  # the loader is valid Python
    assert sorted(os.listdir(tmp_path / "out")) == ["changes.diff", "kernelopt_loader.py", "manifest.json",
                                                   "output_code.py"]


def test_export_refuses_what_does_not_fit(dump: Path, tmp_path: Path) -> None:
    entry = entry_for(dump, 0)
    with pytest.raises(ExportError, match="refusing to export into the folder of the original dump"):
        export_graph([entry], str(dump.parent))
    other = H200_DUMPS / "softmax" / "output_code.py"
    with pytest.raises(ExportError, match=f"replaces a kernel that is not in {other}"):
        export_graph([entry], str(tmp_path / "out"), graph_path=str(other))
    with pytest.raises(ExportError, match="nothing to export"):
        export_graph([], str(tmp_path / "out"))
    entry.graph_path = None
    with pytest.raises(ExportError, match="pass the dump with --graph"):
        export_graph([entry], str(tmp_path / "out"))


def test_resolve_run_dir_run_id_and_entry(dump: Path, tmp_path: Path) -> None:
    entry = entry_for(dump, 1)
    store = AcceptedStore(str(tmp_path / "store"))
    store.add(entry)
    assert [e.id for e in resolve_entries(entry.id[:8], store)] == [entry.id]
    runs = tmp_path / "runs"
    run = runs / "20261130-x"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({
        "run_id": run.name, "decision": "optimized", "reason": "ok", "graph_path": str(dump),
        "accepted_sources": {entry.kernel_name: entry.accepted_source}, "cascade": {**PASSED, "graph_path": str(dump)}}))
    assert [e.accepted_hash for e in resolve_entries(str(run), store)] == [entry.accepted_hash]
    assert [e.run_id for e in resolve_entries(run.name, store, runs_root=str(runs))] == [run.name]
    with pytest.raises(ExportError, match="neither a run folder"):
        resolve_entries("abcdef12", store, runs_root=str(runs))


def test_cli_export(dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = entry_for(dump, 1)
    store = tmp_path / "store"
    AcceptedStore(str(store)).add(entry)
    out = tmp_path / "out"
    assert main(["export", entry.id, "--out", str(out), "--store", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernels"] == [entry.kernel_name] and data["entries"] == [entry.id]
    assert Path(data["output_code"]).is_file()
    assert main(["export", "deadbeef", "--out", str(out), "--store", str(store)]) == 2
    assert "neither a run folder" in capsys.readouterr().err


LOAD_EXPORTED = r'''
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import kernelopt_loader
from kernelopt_core.graph_module import load_graph_module
graph = kernelopt_loader.load()
inputs = kernelopt_loader.example_inputs(graph, seed=3)
(out,) = kernelopt_loader.call(graph, inputs)
(ref,) = load_graph_module(sys.argv[2], "cpu").call(list(inputs))
kernel = getattr(graph, sys.argv[3])
loaded = open(kernel.fn.fn.__code__.co_filename, encoding="utf-8").read()
print("RESULT " + json.dumps({"max_abs_err": (out - ref).abs().max().item(), "inputs_left": len(inputs),
                              "loaded_hash": hashlib.sha256(loaded.encode()).hexdigest()}))
'''


def test_exported_graph_runs_with_its_loader(cpu_example_dump: Path, tmp_path: Path) -> None:
    graph = parse_output_code(str(cpu_example_dump))
    (kernel,) = graph.kernels
    entry = entry_from_cascade(graph, kernel.name, evict_last(kernel.source), PASSED, gpu="cpu")
    result = export_graph([entry], str(tmp_path / "export"))
    done = subprocess.run([sys.executable, "-c", LOAD_EXPORTED, str(tmp_path / "export"), str(cpu_example_dump),
                           kernel.name], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(next(li for li in done.stdout.splitlines() if li.startswith("RESULT ")).removeprefix("RESULT "))
    assert data["loaded_hash"] == entry.accepted_hash  # the exported graph runs the accepted kernel
    assert data["max_abs_err"] <= 1e-5 and data["inputs_left"] == 5
    assert Path(result.output_code).read_text() != cpu_example_dump.read_text()
