"""Vectorization hints: tell Triton's alignment analysis what Inductor knows but does not say.

A program's first index is a multiple of its block size (``tl.multiple_of``), and a 1-D
contiguous index run is contiguous for the whole block (``tl.max_contiguous``). With that the
compiler can emit 128-bit loads where it otherwise falls back to narrower ones.
"""

from __future__ import annotations

import re

from .base import Rewrite, RewriteContext, RewriteFamily

_OFFSET = re.compile(r"^(\s*)(x|y)offset = (.+) \* (XBLOCK|YBLOCK)\s*$", re.MULTILINE)
_LOOP_OFFSET = re.compile(r"^(\s*)for r0_offset in (?:tl\.)?range\(0, r0_numel, R0_BLOCK\):\n(\s*)", re.MULTILINE)
_INDEX_1D = re.compile(r"^(\s*)xindex = xoffset \+ tl\.arange\(0, XBLOCK\)\[:\]\s*$", re.MULTILINE)


def add_offset_hints(text: str) -> str:
    text = _OFFSET.sub(lambda m: f"{m.group(0)}\n{m.group(1)}{m.group(2)}offset = "
                       f"tl.multiple_of({m.group(2)}offset, {m.group(4)})", text)
    text = _LOOP_OFFSET.sub(lambda m: f"{m.group(0)}r0_offset = tl.multiple_of(r0_offset, R0_BLOCK)\n{m.group(2)}",
                            text)
    return text


def add_contiguity_hint(text: str) -> str:
    return _INDEX_1D.sub(lambda m: f"{m.group(0)}\n{m.group(1)}xindex = tl.max_contiguous("
                         f"tl.multiple_of(xindex, XBLOCK), XBLOCK)", text)


class VectorHintsFamily(RewriteFamily):
    name = "vector_hints"
    summary = "alignment/contiguity hints (tl.multiple_of, tl.max_contiguous) so loads vectorize"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if "tl.multiple_of" in ctx.module.text:
            return "hints already present"
        if not (_OFFSET.search(ctx.module.text) or _LOOP_OFFSET.search(ctx.module.text)):
            return "no block offsets to annotate"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        out = []
        hinted = add_offset_hints(ctx.module.text)
        if hinted != ctx.module.text:
            out.append(Rewrite(self.name, "block offsets are multiples of the block", "tl.multiple_of on offsets",
                               hinted, {"contiguity": False}))
        both = add_contiguity_hint(hinted)
        if both != hinted:
            out.append(Rewrite(self.name, "aligned offsets and contiguous 1-D index",
                               "tl.multiple_of + tl.max_contiguous", both, {"contiguity": True}))
        return out
