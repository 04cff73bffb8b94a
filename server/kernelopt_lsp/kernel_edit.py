"""The edit that puts an optimized kernel into a dump: replace the source string of
``name = async_compile.triton('name', '''...''')`` and nothing else.

The edit is computed against the text the client holds (the open buffer when there is one), so
applying it and then its inverse gives back that text exactly; the client owns undo.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from lsprotocol import types

from kernelopt_core.artifacts.model import TritonKernel


class KernelEditError(Exception):
    """The kernel's source string could not be located in the text."""


@dataclass(frozen=True)
class TextReplacement:
    """Replace [start, end) (0-based line/character) with ``new_text``; ``old_text`` is what was there."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int
    new_text: str
    old_text: str

    @property
    def range(self) -> types.Range:
        return types.Range(types.Position(self.start_line, self.start_char),
                           types.Position(self.end_line, self.end_char))


def source_literal(source: str) -> str:
    """Inductor's spelling of a kernel source: a plain triple-quoted string, escaped only where needed."""
    body = source.replace("\\", "\\\\").replace("'''", "\\'\\'\\'")
    if body.endswith("'"):
        body = body[:-1] + "\\'"  # a quote right before the closing ''' would end the string early
    literal = f"'''{body}'''"
    try:
        if ast.literal_eval(literal) == source:
            return literal
    except (SyntaxError, ValueError):
        pass
    return repr(source)


def kernel_source_replacement(text: str, kernel: TritonKernel, new_source: str) -> TextReplacement:
    """Where the kernel's source literal stands in ``text`` and what replaces it."""
    lines = text.splitlines(keepends=True)
    first, last = kernel.statement_range.start_line, kernel.statement_range.end_line
    if last >= len(lines):
        raise KernelEditError(f"kernel {kernel.name}: its statement runs past the end of the text")
    segment = "".join(lines[first:last + 1])
    try:
        module = ast.parse(segment)
    except SyntaxError as exc:
        raise KernelEditError(f"kernel {kernel.name}: its statement does not parse ({exc.msg})") from None
    node = module.body[0] if module.body else None
    call = node.value if isinstance(node, ast.Assign) else None
    if not (isinstance(call, ast.Call) and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant)
            and isinstance(call.args[1].value, str)):
        raise KernelEditError(f"kernel {kernel.name}: no async_compile.triton source string found")
    literal = call.args[1]
    if literal.end_lineno is None or literal.end_col_offset is None:
        raise KernelEditError(f"kernel {kernel.name}: the source string has no end position")
    start_line = first + literal.lineno - 1
    end_line = first + literal.end_lineno - 1
    # ast columns are UTF-8 byte offsets; positions here count characters.
    start_char = _char_col(lines[start_line], literal.col_offset)
    end_char = _char_col(lines[end_line], literal.end_col_offset)
    old = _slice(lines, start_line, start_char, end_line, end_char)
    return TextReplacement(start_line, start_char, end_line, end_char, source_literal(new_source), old)


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _slice(lines: list[str], start_line: int, start_char: int, end_line: int, end_char: int) -> str:
    if start_line == end_line:
        return lines[start_line][start_char:end_char]
    parts = [lines[start_line][start_char:], *lines[start_line + 1:end_line], lines[end_line][:end_char]]
    return "".join(parts)


def apply_replacements(text: str, replacements: list[TextReplacement]) -> str:
    """Apply non-overlapping replacements to text (what a client does with the edit)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(line: int, char: int) -> int:
        if line >= len(lines):
            return len(text)
        return offsets[line] + min(char, len(lines[line]))

    out = text
    for rep in sorted(replacements, key=lambda r: (r.start_line, r.start_char), reverse=True):
        start, end = offset(rep.start_line, rep.start_char), offset(rep.end_line, rep.end_char)
        out = out[:start] + rep.new_text + out[end:]
    return out


def inverse(replacement: TextReplacement) -> TextReplacement:
    """The replacement that undoes ``replacement`` once it has been applied."""
    new_lines = replacement.new_text.split("\n")
    end_line = replacement.start_line + len(new_lines) - 1
    end_char = (replacement.start_char + len(new_lines[0])) if len(new_lines) == 1 else len(new_lines[-1])
    return TextReplacement(replacement.start_line, replacement.start_char, end_line, end_char,
                           replacement.old_text, replacement.new_text)


def workspace_edit(uri: str, version: int | None, replacement: TextReplacement,
                   document_changes: bool) -> types.WorkspaceEdit:
    """A WorkspaceEdit in the form the client supports (``documentChanges`` pins the version)."""
    edit = types.TextEdit(range=replacement.range, new_text=replacement.new_text)
    if document_changes:
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=[edit],
        )])
    return types.WorkspaceEdit(changes={uri: [edit]})
