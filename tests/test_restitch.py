"""Re-stitching: only the candidate's source literal changes; everything else stays byte-identical."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.restitch import (
    RestitchError,
    kernel_source_literal,
    restitch,
    unified_diff,
    write_restitched,
)

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"
GRAPHS = sorted(p.name for p in H200.iterdir() if (p / "output_code.py").is_file())


def _graph(name: str):
    return parse_output_code(str(H200 / name / "output_code.py"))


@pytest.mark.parametrize("name", GRAPHS)
def test_unchanged_candidates_give_the_original_bytes(name: str) -> None:
    graph = _graph(name)
    original = Path(graph.path).read_text(encoding="utf-8")
    assert restitch(graph, {k.name: k.source for k in graph.kernels}) == original


@pytest.mark.parametrize("name", GRAPHS)
def test_only_the_named_kernel_changes(name: str) -> None:
    graph = _graph(name)
    original = Path(graph.path).read_text(encoding="utf-8")
    target = graph.kernels[-1]
    candidate = target.source.replace("xoffset = ", "xoffset = 0 + ", 1) + "\n# edited by hand\n"
    assert candidate != target.source
    new_text = restitch(graph, {target.name: candidate})
    again = parse_output_code(graph.path, text=new_text)
    assert again.kernel(target.name).source == candidate
    for kernel in graph.kernels:
        if kernel.name != target.name:
            assert again.kernel(kernel.name).source == kernel.source
    def calls(g):  # line numbers move by the lines the candidate added
        return [{k: v for k, v in c.to_json().items() if k != "line"} for c in g.extern_calls]

    assert calls(again) == calls(graph)
    assert [(x.kernel, x.args, x.kwargs) for x in again.launches] == [(x.kernel, x.args, x.kwargs) for x in graph.launches]
    # byte-identical before the kernel's statement and after it
    start = sum(len(line) for line in original.splitlines(keepends=True)[: target.statement_range.start_line])
    assert new_text[:start] == original[:start]
    tail = original.splitlines(keepends=True)[target.statement_range.end_line + 1:]
    assert new_text.endswith("".join(tail))


def test_several_kernels_at_once() -> None:
    graph = _graph("conv_bn_relu")
    assert len(graph.kernels) == 3
    first, _, last = graph.kernels
    edits = {first.name: first.source + "\n# a\n", last.name: last.source + "\n# c\n"}
    again = parse_output_code(graph.path, text=restitch(graph, edits))
    assert again.kernel(first.name).source == edits[first.name]
    assert again.kernel(graph.kernels[1].name).source == graph.kernels[1].source
    assert again.kernel(last.name).source == edits[last.name]


@pytest.mark.parametrize("text", [
    "a = '''quoted'''\n", "path = 'C:\\\\temp\\\\x'  # backslashes\n", "ends with a quote'",
    "caf\u00e9 = 1  # non-ASCII\n", 'mixed = """x""" + \'\'\'y\'\'\'\n', "tab\there\n",
])
def test_source_literal_round_trips(text: str) -> None:
    import ast

    assert ast.literal_eval(kernel_source_literal(text)) == text
    graph = _graph("elementwise")
    kernel = graph.kernels[0]
    candidate = kernel.source + "\n" + text
    again = parse_output_code(graph.path, text=restitch(graph, {kernel.name: candidate}))
    assert again.kernel(kernel.name).source == candidate


def test_unknown_kernel_is_refused() -> None:
    graph = _graph("softmax")
    with pytest.raises(RestitchError, match="no Triton kernel named triton_nope"):
        restitch(graph, {"triton_nope": "x = 1\n"})


def test_write_leaves_the_original_alone(tmp_path: Path) -> None:
    source_dir = tmp_path / "dump"
    shutil.copytree(H200 / "rmsnorm", source_dir)
    path = source_dir / "output_code.py"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    graph = parse_output_code(str(path))
    kernel = graph.kernels[0]
    out, diff = write_restitched(graph, {kernel.name: kernel.source + "\n# edit\n"}, str(tmp_path / "work"))
    assert Path(out).parent == tmp_path / "work"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert "+# edit" in diff and diff.startswith("--- a/")
    with pytest.raises(RestitchError, match="next to the original"):
        write_restitched(graph, {kernel.name: kernel.source}, str(source_dir))


def test_diff_applies_with_patch(tmp_path: Path) -> None:
    if shutil.which("patch") is None:
        pytest.skip("the patch tool is not installed")
    graph = _graph("layernorm_gelu")
    kernel = graph.kernels[0]
    original = Path(graph.path).read_text(encoding="utf-8")
    new_text = restitch(graph, {kernel.name: kernel.source.replace("tmp", "t", 3)})
    target = tmp_path / "output_code.py"
    target.write_text(original, encoding="utf-8")
    (tmp_path / "change.diff").write_text(unified_diff(original, new_text, "output_code.py"), encoding="utf-8")
    subprocess.run(["patch", "-p1", "-s", "-i", "change.diff"], cwd=tmp_path, check=True)
    assert target.read_text(encoding="utf-8") == new_text
