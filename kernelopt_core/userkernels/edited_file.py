"""A verify candidate given as an edited copy of the user's file: its kernel module, and what the
edit changed outside it.

A candidate is a kernel (its function, decorators, jit helpers and constants: the kernel module);
gates 2-4 run it on the launch the user's own wrapper made, and an accepted one comes back as a
diff of the kernel. An edit of the launch site (``BLOCK = 128`` in the wrapper, another grid or
``num_warps``) is not part of it: :func:`read_candidate` finds such edits; an edit of the launch site
alone is verified as the edited file's launch (:mod:`.edited_launch`), and beside a kernel edit it is
named as left out. Pure Python.
"""

from __future__ import annotations

import ast
import difflib
import os
from dataclasses import dataclass, field

from .extract import _ALLOWED_IMPORT_MODULES, ApplyError, ExtractError, apply_candidate, extract_kernel_module
from .target import UserKernelTarget

MAX_SHOWN = 3  # changes named in a message


@dataclass
class CandidateFile:
    module: str  # the kernel module to verify
    whole_file: bool  # the candidate was an edited copy of the user's file
    kernel_changed: bool  # the module differs from the original kernel module
    outside: list[str] = field(default_factory=list)  # the copy's changes outside the kernel module, described

    def outside_text(self) -> str:
        shown = "; ".join(self.outside[:MAX_SHOWN])
        more = len(self.outside) - MAX_SHOWN
        return shown + (f"; and {more} more change(s)" if more > 0 else "")


def _is_whole_file(tree: ast.Module) -> bool:
    """A copy of a user file has plain functions (the wrapper, the harness) or imports a kernel module has not."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.decorator_list:
            return True
        if isinstance(node, ast.Import) and any(a.name not in _ALLOWED_IMPORT_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "") not in _ALLOWED_IMPORT_MODULES:
            return True
    return False


def read_candidate(target: UserKernelTarget, text: str) -> CandidateFile:
    """A candidate file is a kernel module, or a copy of the user's file with the kernel edited in it;
    from such a copy the kernel module is taken the same way as the original's."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return CandidateFile(text, False, True)  # gate 1 says what is wrong
    if not _is_whole_file(tree):
        return CandidateFile(text, False, text != target.module.source)
    try:
        module = extract_kernel_module(text, target.kernel, target.file, target.module.caller_passes).source
    except ExtractError:
        return CandidateFile(text, False, True)
    found = CandidateFile(module, True, module != target.module.source)
    try:  # the original file with the candidate's kernel module put in: what remains differs outside it
        expected = apply_candidate(target.text, target.kernel, module, target.file)
    except ApplyError:
        return found
    found.outside = _changed_lines(expected, text, tree)
    return found


def _changed_lines(expected: str, edited: str, tree: ast.Module) -> list[str]:
    old, new = expected.splitlines(), edited.splitlines()
    described: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = " / ".join(line.strip() for line in old[a0:a1] if line.strip())
        after = " / ".join(line.strip() for line in new[b0:b1] if line.strip())
        if not before and not after:
            continue  # blank lines only
        line = b0 + 1 if b1 > b0 else max(b0, 1)
        where = _function_at(tree, line)
        place = f"line {line}" + (f" in {where}()" if where else "")
        described.append(f"{place}: `{before}` -> `{after}`" if before and after else
                         f"{place}: added `{after}`" if after else f"{place}: removed `{before}`")
    return described


def _function_at(tree: ast.Module, line: int) -> str | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            return node.name
    return None


def write_edited_copy(target: UserKernelTarget, text: str, folder: str) -> str:
    """Write the edited copy of the user's file under ``folder`` with the file's own name, so it imports
    under the file's module name (a harness file importing the module then gets the copy); its path.
    Raises ValueError for a file inside a package, whose copy would import under another name."""
    from .harness import natural_module

    module = natural_module(target.file)[1]
    if "." in module:
        raise ValueError(f"{os.path.basename(target.file)} is module {module} of a package: an edit of its launch "
                         f"site alone cannot be verified yet; time the edited file instead (kernelopt profile "
                         f"COPY.py --kernel {target.kernel}) or change the kernel itself")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, os.path.basename(target.file))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def launch_edit_note(target: UserKernelTarget, candidate: CandidateFile, gates: tuple[int, ...]) -> str:
    """What was verified for an edit of the launch site alone."""
    ran = [f"gate 2 ran {target.kernel} with the edited launch against the original launch on the same "
           "arguments"] if 2 in gates else []
    if 3 in gates or 4 in gates:
        ran.append(f"gate{'s 3-4' if 3 in gates and 4 in gates else ' 3' if 3 in gates else ' 4'} ran the "
                   "harness with your edited file against the original file")
    what = "; ".join(ran) if ran else "the kernel itself is unchanged"
    return (f"your edit changes only the launch site ({candidate.outside_text()}): {what}; the diff is of the "
            "whole file")


def outside_note(target: UserKernelTarget, candidate: CandidateFile) -> str:
    return (f"your edit outside {target.kernel} is not part of the candidate ({candidate.outside_text()}): the "
            "gates ran the edited kernel on the launch of the original file, and the diff holds the kernel only")


__all__ = ["CandidateFile", "launch_edit_note", "outside_note", "read_candidate", "write_edited_copy"]
