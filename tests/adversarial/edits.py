"""The adversarial corpus' building blocks: what a case is (:class:`Case`, :class:`Witness`), the problems and
the labels, and the templated edits that turn a real Inductor kernel into a candidate. ``corpus.py`` (the
original cases) and ``redteam.py`` (issue 39's red-team cases) are written with these. Pure Python: no torch.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelopt_core.gates.launcher import set_launch_configs

PROBLEMS = ("elementwise", "row_sum", "softmax", "layer_norm", "clamp", "pair")
CONTAINMENT = "containment"  # expected_gate of a case that only containment can stop
# expected_gate of a wrong case that must never be accepted, whichever way it is stopped: rejected by any gate, or
# "not verified" (a decision it adds was never seen both ways). Which one depends on whether an input set reaches
# the candidate's path, which is the defences' search to make, not the corpus' to fix.
REFUSED = "refused"
# Reduction length of each problem's rows (input sets' rows; None: pointwise, rows are the last dim)
# and whether its output keeps the reduced dimension (outputs sharing a row share its errors).
PROBLEM_ROWS: dict[str, tuple[int | None, bool]] = {
    "elementwise": (None, False), "row_sum": (1500, False), "softmax": (37, True), "layer_norm": (1000, True),
    "clamp": (None, False), "pair": (None, False),
}


class EditNotApplicable(ValueError):
    """The kernel source lacks the text an edit expects (another codegen, another torch)."""


@dataclass(frozen=True)
class Witness:
    """A concrete input on which a wrong candidate differs from the original by gate 3's rule (atol = rtol = 1e-4,
    then the float64 ratio), or on which a correct one takes its unusual path and still matches. Functions of the
    torch module (this module imports no torch); they run in the witness probe's process (witness_probe.py)."""

    make: Callable[[Any, list[Any]], list[Any]]  # (torch, the graph's own seed-0 inputs) -> the inputs to call with
    alias: tuple[int, int] | None = None  # (i, j): input j is input i itself, the same tensor
    # inputs of an earlier call of the candidate whose output buffer this call gets back (a caching allocator's reuse)
    stale: Callable[[Any, list[Any]], list[Any]] | None = None
    # (torch, inputs, the buffer the wrapper would allocate) -> the buffer it gets instead (where it lies in memory)
    output_at: Callable[[Any, list[Any], Any], Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Case:
    id: str
    problem: str  # one of PROBLEMS
    klass: str  # the bug class, or "correct"
    expected_gate: int | str | None  # the gate that must reject it, CONTAINMENT, or None: must pass gates 1-3
    description: str
    edit: Callable[[str, str], str]  # (kernel source, kernel name) -> candidate source
    needs: tuple[str, ...] = ()  # capabilities (kernelopt_core.gates.CAPABILITIES) the check depends on
    # input sets that expose it ("name@i": in the i-th floating input alone, the others as drawn);
    # () the graph's inputs + error structure
    input_sets: tuple[str, ...] | None = None
    probe: bool = True  # input_set_probe may run it in-process (False: it writes memory it must not, or needs poison)
    # wrong: an input showing it wrong; correct: an input that takes its unusual path (witness_probe.py runs both)
    witness: Witness | None = None
    # a correct case whose added decision no input set reaches: "not verified" is its right verdict
    expect_not_verified: bool = False

    @property
    def wrong(self) -> bool:
        return self.expected_gate is not None

    def candidate(self, source: str, kernel_name: str) -> str:
        return self.edit(source, kernel_name)

    def missing(self, capabilities: frozenset[str]) -> list[str]:
        return [need for need in self.needs if need not in capabilities]


def sentinel_path(case_id: str) -> str:
    """A file a hostile candidate tries to create; it must never exist after the corpus ran."""
    return os.path.join(tempfile.gettempdir(), f"kernelopt-corpus-wrote-{case_id}")


# --- edit helpers ------------------------------------------------------------------------------


def sub(old: str, new: str, count: int = 1) -> Callable[[str, str], str]:
    """Replace exact text (``count`` occurrences must exist; 0 means all, at least one)."""

    def edit(source: str, _name: str) -> str:
        found = source.count(old)
        if found == 0 or (count and found != count):
            raise EditNotApplicable(f"expected {count or 'some'} occurrence(s) of {old!r}, found {found}")
        return source.replace(old, new)

    return edit


def regex(pattern: str, new: str) -> Callable[[str, str], str]:
    def edit(source: str, _name: str) -> str:
        out, n = re.subn(pattern, new, source, count=1, flags=re.M)
        if n != 1:
            raise EditNotApplicable(f"pattern {pattern!r} not found")
        return out

    return edit


def first_of(*edits: Callable[[str, str], str]) -> Callable[[str, str], str]:
    """The first edit that applies: the CPU backend's exact text first, then a pattern that also
    matches the CUDA codegen (other temporaries, other buffer names)."""

    def edit(source: str, name: str) -> str:
        reasons = []
        for step in edits:
            try:
                return step(source, name)
            except EditNotApplicable as exc:
                reasons.append(str(exc))
        raise EditNotApplicable("; ".join(reasons))

    return edit


def chain(*edits: Callable[[str, str], str]) -> Callable[[str, str], str]:
    def edit(source: str, name: str) -> str:
        for step in edits:
            source = step(source, name)
        return source

    return edit


def launch(*configs: dict[str, int], grid: tuple[str | int, ...] | None = None) -> Callable[[str, str], str]:
    """Fix the launch configuration(s) (and optionally the grid) through the launcher contract."""

    def edit(source: str, name: str) -> str:
        return set_launch_configs(source, name, list(configs), grid)

    return edit


def prepend_module(text: str) -> Callable[[str, str], str]:
    """Insert module-level lines right after the imports (before the decorator)."""

    def edit(source: str, _name: str) -> str:
        at = source.find("\n@triton_heuristics.")
        if at < 0:
            raise EditNotApplicable("no @triton_heuristics decorator")
        return source[:at] + "\n" + text.rstrip("\n") + "\n" + source[at:]

    return edit


def append_body(text: str, after: str) -> Callable[[str, str], str]:
    """Insert kernel-body lines (4-space indented) right after the line containing ``after``."""

    def edit(source: str, _name: str) -> str:
        lines = source.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if after in line:
                block = "".join(f"    {row}\n" for row in text.strip("\n").splitlines())
                return "".join(lines[: i + 1]) + block + "".join(lines[i + 1:])
        raise EditNotApplicable(f"no line containing {after!r}")

    return edit


def append_module(text: str) -> Callable[[str, str], str]:
    def edit(source: str, _name: str) -> str:
        return source.rstrip("\n") + "\n" + text.strip("\n") + "\n"

    return edit


def kernel_name_line(template: str) -> Callable[[str, str], str]:
    """Append a module-level line that mentions the kernel's own name (``{name}``)."""

    def edit(source: str, name: str) -> str:
        return source.rstrip("\n") + "\n" + template.format(name=name) + "\n"

    return edit


def replace_between(start: str, end: str, text: str) -> Callable[[str, str], str]:
    """Replace everything from the line starting with ``start`` up to and including ``end``."""

    def edit(source: str, _name: str) -> str:
        a = source.find(start)
        b = source.find(end, a + 1) if a >= 0 else -1
        if a < 0 or b < 0:
            raise EditNotApplicable(f"no text from {start!r} to {end!r}")
        return source[:a] + text + source[b + len(end):]

    return edit


def module(template: str) -> Callable[[str, str], str]:
    """A whole candidate module (a launcher), with ``{name}`` the kernel's name."""

    def edit(_source: str, name: str) -> str:
        return template.replace("{name}", name)

    return edit


def writes_sentinel(case_id: str, edit_for: Callable[[str], Callable[[str, str], str]]) -> Callable[[str, str], str]:
    """An edit that embeds the case's sentinel path (a file the candidate must never manage to create)."""
    return edit_for(sentinel_path(case_id))
