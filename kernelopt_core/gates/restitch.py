"""Re-stitch a graph: put candidate kernel sources into a copy of its ``output_code.py``.

Only the string literal inside ``name = async_compile.triton('name', '''...''', ...)`` changes;
every other byte of the wrapper (other kernels, vendor calls, buffer plans) stays as it was.
The original dump is never written. Pure Python: no torch, no triton.
"""

from __future__ import annotations

import ast
import difflib
import os
from dataclasses import dataclass

from ..artifacts.model import CompiledGraph, DumpError
from ..artifacts.parse import read_dump_text


class RestitchError(ValueError):
    """A candidate cannot be put into the graph (unknown kernel, unreadable wrapper)."""


@dataclass(frozen=True)
class _Span:
    start: int  # character offsets into the wrapper text, end exclusive
    end: int


def restitch(graph: CompiledGraph, candidates: dict[str, str], original_text: str | None = None) -> str:
    """The wrapper text of ``graph`` with each named kernel's source replaced by its candidate."""
    if original_text is None:
        try:
            original_text = read_dump_text(graph.path)
        except DumpError as exc:
            raise RestitchError(str(exc)) from None
    unknown = sorted(name for name in candidates if graph.kernel(name) is None)
    if unknown:
        known = ", ".join(k.name for k in graph.kernels) or "none"
        raise RestitchError(f"{graph.path}: no Triton kernel named {', '.join(unknown)} (kernels: {known})")
    spans = _kernel_source_spans(original_text, graph.path)
    missing = sorted(name for name in candidates if name not in spans)
    if missing:
        raise RestitchError(f"{graph.path}: the source literal of {', '.join(missing)} was not found")
    pieces: list[str] = []
    cursor = 0
    for name, span in sorted(spans.items(), key=lambda item: item[1].start):
        if name not in candidates:
            continue
        pieces.append(original_text[cursor:span.start])
        pieces.append(kernel_source_literal(candidates[name]))
        cursor = span.end
    pieces.append(original_text[cursor:])
    return "".join(pieces)


def write_restitched(graph: CompiledGraph, candidates: dict[str, str], out_dir: str,
                     original_text: str | None = None) -> tuple[str, str]:
    """Write the re-stitched wrapper into ``out_dir``; returns (path, unified diff)."""
    if original_text is None:
        original_text = read_dump_text(graph.path)
    new_text = restitch(graph, candidates, original_text)
    if os.path.abspath(out_dir) == os.path.abspath(os.path.dirname(graph.path)):
        raise RestitchError("refusing to write the re-stitched graph next to the original dump")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "output_code.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(new_text)
    return path, unified_diff(original_text, new_text, graph.path)


def unified_diff(original_text: str, new_text: str, path: str) -> str:
    """A ``git apply``-style unified diff of the wrapper (a/ and b/ carry the same path)."""
    name = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path.lstrip("/")
    lines = difflib.unified_diff(
        original_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
        fromfile=f"a/{name}", tofile=f"b/{name}", n=3,
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def kernel_source_literal(source: str) -> str:
    """A Python literal for ``source``, written the way Inductor writes it (``'''...'''``)."""
    body = source.replace("\\", "\\\\").replace("'''", "\\'\\'\\'")
    if body.endswith("'"):
        body = body[:-1] + "\\'"
    literal = "'''" + body + "'''"
    try:  # belt and braces: the literal must read back as exactly the candidate
        if ast.literal_eval(literal) == source:
            return literal
    except (SyntaxError, ValueError):
        pass
    return repr(source)


def _kernel_source_spans(text: str, path: str) -> dict[str, _Span]:
    """Where each ``async_compile.triton`` source literal sits in the wrapper text."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise RestitchError(f"{path}: Python syntax error at line {exc.lineno}: {exc.msg}") from None
    line_starts = _line_starts(text)
    spans: dict[str, _Span] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "triton"
                and isinstance(func.value, ast.Name) and func.value.id == "async_compile"):
            continue
        if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant):
            continue
        literal = call.args[1]
        assert literal.end_lineno is not None and literal.end_col_offset is not None
        start = _offset(text, line_starts, literal.lineno, literal.col_offset)
        end = _offset(text, line_starts, literal.end_lineno, literal.end_col_offset)
        spans[node.targets[0].id] = _Span(start, end)
    return spans


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def _offset(text: str, line_starts: list[int], lineno: int, byte_col: int) -> int:
    """Character offset of an ast position (1-based line, UTF-8 byte column)."""
    line_start = line_starts[lineno - 1]
    line_end = line_starts[lineno] if lineno < len(line_starts) else len(text)
    line_bytes = text[line_start:line_end].encode("utf-8")
    return line_start + len(line_bytes[:byte_col].decode("utf-8", errors="ignore"))
