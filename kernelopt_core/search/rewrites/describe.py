"""Labels read off a rewrite's source, not off the intent of the family that proposed it.

A candidate's title names what its family meant to do; the source it is measured and accepted
with may hold more (changes made by its ancestors in the beam) or less (a variant whose "keep
shared data" found no shared load). :func:`describe_change` compares a kernel module with
Inductor's original and names every change it can recognise, in the words a diff would show:
``fixed config XBLOCK=64, num_warps=4, num_stages=1; evict_first on 2 loads``.
"""

from __future__ import annotations

import difflib
import re

from .base import LAUNCHER_LABEL, call_spans, split_args
from .kernel_source import KernelSourceError, parse_kernel_module

_POLICY = re.compile(r"eviction_policy\s*=\s*['\"](evict_first|evict_last)['\"]")
_MODIFIER = re.compile(r"cache_modifier\s*=\s*['\"](\.\w+)['\"]")
_HINTS = ("tl.multiple_of", "tl.max_contiguous")
_INT64_CAST = ".to(tl.int64)"
_LIBDEVICE = re.compile(r"\blibdevice\.\w+\(")
_ALL_TRUE_MASK = re.compile(r"^\s*(\w*mask) = tl\.full\(", re.MULTILINE)
# a launcher module's first line names it (base.Rewrite)
_LAUNCHER = re.compile(rf"^{re.escape(LAUNCHER_LABEL)}(.+)$", re.MULTILINE)
# program_order's remap (rewrites/program_order.py): named, and read as the line it replaced
_REMAP = re.compile(r"^\s*xoffset = \(xpid % (\d+)\) \* (\d+) \+ \(xpid // \d+\) \* XBLOCK\s*$",
                    re.MULTILINE)
_REMAP_SETUP = re.compile(r"^\s*(?:xpid = tl\.program_id\(0\)|tl\.static_assert\(\d+ % XBLOCK == 0\))")


def _call_kwargs(text: str, prefix: str, pattern: re.Pattern[str]) -> list[str | None]:
    """Per ``prefix(...)`` call, in order: the value ``pattern`` finds among its arguments (None: none)."""
    found: list[str | None] = []
    for start, end in call_spans(text, prefix):
        values = [m.group(1) for arg in split_args(text[start + len(prefix):end - 1]) if (m := pattern.search(arg))]
        found.append(values[0] if values else None)
    return found


def _hint_changes(before: list[str | None], after: list[str | None], where: str) -> list[str]:
    """``evict_last on 2 loads``, ``evict_first removed from 1 load``: call by call when the calls
    pair up (the same number of them), else by totals."""
    set_to: dict[str, int] = {}
    removed: dict[str, int] = {}
    if len(before) == len(after):
        for old, new in zip(before, after, strict=True):
            if new != old and new is not None:
                set_to[new] = set_to.get(new, 0) + 1
            if new != old and old is not None and new is None:
                removed[old] = removed.get(old, 0) + 1
    else:
        for value in sorted({v for v in (*before, *after) if v is not None}):
            delta = after.count(value) - before.count(value)
            if delta > 0:
                set_to[value] = delta
            elif delta < 0:
                removed[value] = -delta

    def count(n: int) -> str:
        return f"{n} {where}{'s' if n > 1 else ''}"

    return ([f"{value} on {count(n)}" for value, n in sorted(set_to.items())]
            + [f"{value} removed from {count(n)}" for value, n in sorted(removed.items())])


def _config_change(original: str, candidate: str, kernel: str) -> list[str]:
    try:
        before = parse_kernel_module(original, kernel)
        after = parse_kernel_module(candidate, kernel)
    except KernelSourceError:
        return []
    parts = []
    if after.explicit_config is not None and after.explicit_config != before.explicit_config:
        parts.append(f"fixed config {after.explicit_config.label()}")
    if after.heuristic != before.heuristic and after.explicit_config is None:
        parts.append(f"{before.heuristic} -> {after.heuristic}")
    for name, value in after.fixed_blocks.items():
        if before.fixed_blocks.get(name) != value:
            parts.append(f"{name}={value}")
    return parts


def describe_change(original: str, candidate: str, kernel: str) -> str:
    """What ``candidate`` changes in Inductor's ``original`` kernel module, as a short label."""
    parts = change_parts(original, candidate, kernel)
    return "; ".join(parts) if parts else "no change to the kernel (text only: argument order, comments)"


def change_parts(original: str, candidate: str, kernel: str) -> list[str]:
    """Each change ``candidate`` makes to ``original``, named; empty when it changes nothing that runs."""
    if original == candidate:
        return []
    labels = [label for label in _LAUNCHER.findall(candidate) if label not in _LAUNCHER.findall(original)]
    # a launcher module has no heuristics decorator: "pointwise -> other" would say nothing its label does not
    parts = labels + [p for p in _config_change(original, candidate, kernel) if not (labels and " -> " in p)]
    parts += _hint_changes(_call_kwargs(original, "tl.load(", _POLICY), _call_kwargs(candidate, "tl.load(", _POLICY),
                           "load")
    for prefix, where in (("tl.load(", "load"), ("tl.store(", "store")):
        parts += _hint_changes(_call_kwargs(original, prefix, _MODIFIER), _call_kwargs(candidate, prefix, _MODIFIER),
                               where)
    remaps = sorted(set(_REMAP.findall(candidate)) - set(_REMAP.findall(original)))
    parts += [f"programs of one shared block back to back ({rows} rows per block of {columns})"
              for rows, columns in remaps]
    masks = sorted(set(_ALL_TRUE_MASK.findall(candidate)) - set(_ALL_TRUE_MASK.findall(original)))
    if masks:
        parts.append(f"no {', '.join(masks)}")
    hints = [hint.removeprefix("tl.") for hint in _HINTS if candidate.count(hint) > original.count(hint)]
    if hints:
        parts.append(" + ".join(hints) + " hints")
    if candidate.count(_INT64_CAST) < original.count(_INT64_CAST):
        parts.append("int32 index arithmetic")
    swapped = len(_LIBDEVICE.findall(original)) - len(_LIBDEVICE.findall(candidate))
    if swapped > 0:
        parts.append(f"{swapped} libdevice call{'s' if swapped > 1 else ''} -> fast intrinsics")
    other = sum(1 for line in difflib.ndiff(_residue(original), _residue(candidate)) if line.startswith(("+ ", "- ")))
    if other:
        parts.append(f"{other} {'other ' if parts else ''}line(s) of the kernel edited")
    return parts


_KWARG = re.compile(r",\s*(?:eviction_policy|cache_modifier)\s*=\s*['\"][^'\"]*['\"]")
_MASK_ARG = re.compile(r",\s*(?:\w*mask(?:\s*&\s*\w*mask)*|None)(?=\s*[,)])|,\s*other\s*=\s*[^,)]+")
_MATH = re.compile(r"\b(?:libdevice|tl_math)\.(\w+)\(|\btl\.sqrt\(")
_DROPPED_LINE = re.compile(r"^\s*(?:\w*mask = |[A-Z0-9_]*BLOCK\s*: tl\.constexpr = \d+)|tl\.multiple_of|tl\.max_contiguous")


def _residue(text: str) -> list[str]:
    """The kernel function's lines with every change the labels above name taken out."""
    body = text[text.find("@triton.jit"):] if "@triton.jit" in text else text
    lines = []
    for line in body.splitlines():
        line = line.split("  # kernelopt:", 1)[0].rstrip()
        if not line.strip() or _DROPPED_LINE.search(line) or _REMAP_SETUP.search(line):
            continue
        line = _REMAP.sub(lambda m: m.group(0).split("=")[0] + "= tl.program_id(0) * XBLOCK", line)
        line = _MASK_ARG.sub("", _KWARG.sub("", line)).replace(_INT64_CAST, "")
        lines.append(_MATH.sub(lambda m: f"M.{m.group(1) or 'sqrt'}(", line))
    return lines
