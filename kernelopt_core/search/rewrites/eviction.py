"""Cache and eviction hints on loads and stores.

Data read once per program (indexed by the program's rows) streams through: ``evict_first``, or
``.cg`` (skip L1; never both on one load: ptxas refuses the pair). Data every program re-reads (weights, a bias: indexed without
the row index) should stay: ``evict_last``. Stores of results nobody re-reads soon: ``.cs``.
"""

from __future__ import annotations

import re

from .base import Rewrite, RewriteContext, RewriteFamily, call_spans, split_args
from .describe import change_parts

# the names Inductor gives a program's index and its parts
INDEX_NAMES = re.compile(r"\b(x\d+|xindex|y\d+|yindex)\b")
# x0 = xindex % 4096, x1 = (xindex // 4096), x2 = ((xindex // 64) % 64): a part of the index only
_PART_OF_INDEX = re.compile(r"^\s*([xy]\d+)\s*=\s*\(*\s*[xy]index\s*(//|%)\s*\d+\s*\)*\s*((//|%)\s*\d+\s*\)*)?\s*$",
                            re.MULTILINE)


def broadcast_names(text: str) -> set[str]:
    """Index names that are a part of the program's index (``xindex % C``, ``xindex // C``): a tensor read
    through one of them alone is smaller than the output, and every element of it is read by many programs
    (a bias, a weight, a row's mean), so it is shared data, not a streamed row."""
    return {match.group(1) for match in _PART_OF_INDEX.finditer(text)}


def _streamed(pointer: str, broadcast: set[str]) -> bool:
    """Whether a load's pointer reads data no other program reads: an index of the program's own elements."""
    names = set(INDEX_NAMES.findall(pointer))
    if not names:
        return False
    parts = names & broadcast
    # two parts together may rebuild the whole index (x0 + 4096 * x1): counted as streamed
    return bool(names - broadcast) or len(parts) > 1


def _set_kwarg(args: list[str], key: str, value: str | None) -> list[str]:
    kept = [a for a in args if not a.replace(" ", "").startswith(f"{key}=")]
    if value is not None:
        kept.append(f"{key}={value}")
    return kept


def rewrite_hints(text: str, streaming: str | None, reused: str | None, cache_modifier: str | None,
                  store_modifier: str | None) -> str:
    """Set eviction policies (and cache modifiers) by whether each load's pointer depends on the row.

    A row read again later (Inductor's multi-pass reductions) counts as reused until its last read.
    """
    edits = []
    broadcast = broadcast_names(text)
    spans = call_spans(text, "tl.load(")
    pointers = [(split_args(text[s + len("tl.load("):e - 1]) or [""])[0].replace(" ", "") for s, e in spans]
    for position, (start, end) in enumerate(spans):
        args = split_args(text[start + len("tl.load("):end - 1])
        if not args:
            continue
        read_again = pointers[position] in pointers[position + 1:]
        row_dependent = _streamed(args[0], broadcast) and not read_again
        policy = streaming if row_dependent else reused
        args = _set_kwarg(args, "eviction_policy", f"'{policy}'" if policy else None)
        args = _set_kwarg(args, "cache_modifier", f"'{cache_modifier}'" if cache_modifier and row_dependent else None)
        edits.append((start, end, "tl.load(" + ", ".join(args) + ")"))
    if store_modifier is not None:
        for start, end in call_spans(text, "tl.store("):
            args = split_args(text[start + len("tl.store("):end - 1])
            args = _set_kwarg(args, "cache_modifier", f"'{store_modifier}'")
            edits.append((start, end, "tl.store(" + ", ".join(args) + ")"))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


_VARIANTS = [
    ("stream rows, keep shared data", "evict_first", "evict_last", None, None),
    # .cg alone: ptxas refuses ".evict_first cannot be combined with .cg" (sm_90, H100, session 18)
    ("stream rows through L2 only (.cg), keep shared data", None, "evict_last", ".cg", None),
    ("streaming stores (.cs), stream rows, keep shared data", "evict_first", "evict_last", None, ".cs"),
    ("no eviction hints", None, None, None, None),
    ("keep everything resident", "evict_last", "evict_last", None, None),
]


class EvictionHintsFamily(RewriteFamily):
    name = "eviction_hints"
    summary = "cache/eviction hints: stream row data (evict_first, .cg), keep re-read data (evict_last)"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if "tl.load(" not in ctx.module.text:
            return "no loads"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        out, seen = [], {ctx.module.text}
        for title, streaming, reused, cache, store in _VARIANTS:
            source = rewrite_hints(ctx.module.text, streaming, reused, cache, store)
            if source in seen:
                continue
            seen.add(source)
            # The title says what changed in this source, not what the variant aimed at: a kernel
            # whose loads Inductor already marked evict_first gains only the rest, or nothing.
            changes = change_parts(ctx.module.text, source, ctx.module.name)
            if not changes:
                continue  # the hints were already there (only the argument order would differ)
            out.append(Rewrite(family=self.name, title="; ".join(changes),
                               detail=f"load/store hints only; same math ({title})",
                               source=source, params={"streaming": streaming, "reused": reused,
                                                      "cache_modifier": cache, "store_modifier": store}))
        return out
