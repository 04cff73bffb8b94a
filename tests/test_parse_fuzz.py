"""Mutated fixture files (cut, splice, byte noise): the parser raises nothing but DumpError."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, H200_DUMPS, H200_GRAPHS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelopt_core.artifacts import CompiledGraph, DumpError, parse_output_code
from kernelopt_core.dispatch import analyze

SOURCES = [(H200_DUMPS / name / "output_code.py").read_bytes() for name in H200_GRAPHS]
SOURCES.append((FIXTURES / "synthetic" / "call_grid_style.py").read_bytes())
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _check(data: bytes, path: Path) -> None:
    path.write_bytes(data)
    try:
        graph = parse_output_code(str(path))
    except DumpError as exc:
        assert exc.path == str(path) and exc.problem
        return
    assert isinstance(graph, CompiledGraph)
    # Whatever parsed must be usable downstream without raising.
    graph.to_json()
    analyze(graph)


source_index = st.integers(min_value=0, max_value=len(SOURCES) - 1)


@FUZZ
@given(index=source_index, cut=st.floats(min_value=0.0, max_value=1.0))
def test_cut(tmp_path: Path, index: int, cut: float) -> None:
    data = SOURCES[index]
    _check(data[: int(len(data) * cut)], tmp_path / "output_code.py")


@FUZZ
@given(a=source_index, b=source_index, at_a=st.floats(0, 1), at_b=st.floats(0, 1), line_aligned=st.booleans())
def test_splice(tmp_path: Path, a: int, b: int, at_a: float, at_b: float, line_aligned: bool) -> None:
    first, second = SOURCES[a], SOURCES[b]
    i, j = int(len(first) * at_a), int(len(second) * at_b)
    if line_aligned:  # splices on line boundaries keep the file mostly valid Python: the hard case
        i = first.rfind(b"\n", 0, i) + 1
        j = second.rfind(b"\n", 0, j) + 1
    _check(first[:i] + second[j:], tmp_path / "output_code.py")


@FUZZ
@given(index=source_index, noise=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                          min_size=1, max_size=12))
def test_byte_noise(tmp_path: Path, index: int, noise: list[tuple[float, bytes]]) -> None:
    data = bytearray(SOURCES[index])
    for at, chunk in noise:
        pos = int(len(data) * at)
        data[pos:pos + len(chunk)] = chunk
    _check(bytes(data), tmp_path / "output_code.py")


@FUZZ
@given(index=source_index, swaps=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(
    [b"", b"(", b")", b"'''", b"async_compile.triton(", b"def call(args):\n", b"\\", b"[grid(1)]",
     b"extern_kernels.mm(", b"@triton_heuristics.pointwise(size_hints=", b"\t", b"# kernel path: "])),
    min_size=1, max_size=6))
def test_token_noise(tmp_path: Path, index: int, swaps: list[tuple[float, bytes]]) -> None:
    lines = SOURCES[index].split(b"\n")
    for at, token in swaps:
        row = int((len(lines) - 1) * at)
        lines[row] = token + lines[row][len(token):]
    _check(b"\n".join(lines), tmp_path / "output_code.py")
