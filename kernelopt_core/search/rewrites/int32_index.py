"""int64 -> int32 index arithmetic where every index provably fits in 31 bits.

Inductor widens indices to int64 when it cannot bound them (dynamic shapes, huge tensors).
When all numels are fixed in the kernel and their product stays below 2**31, the 64-bit
arithmetic (twice the registers, slower integer multiply) is unnecessary.
"""

from __future__ import annotations

import re

from .base import Rewrite, RewriteContext, RewriteFamily

# Only casts of program ids and aranges: the index roots. Casts of values (argmax results...) stay.
_CASTS = re.compile(r"(tl\.program_id\(\d\)|tl\.arange\([^)]*\)(?:\[[^\]]*\])?)\.to\(tl\.int64\)")
INT32_LIMIT = 2**31 - 1


class Int32IndexFamily(RewriteFamily):
    name = "int32_index"
    summary = "int64 index arithmetic -> int32 when every index provably fits"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        text = ctx.module.text
        if not _CASTS.search(text):
            return "no 64-bit index arithmetic"
        numels = ctx.module.numels
        if not numels:
            return "sizes are not fixed in the kernel"
        total = 1
        for value in numels.values():
            total *= value
        if total > INT32_LIMIT // 4:  # headroom for strides larger than the numel product
            return f"index space {total} is too close to 2**31"
        return None

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        text = _CASTS.sub(r"\1", ctx.module.text)
        if text == ctx.module.text:
            return []
        return [Rewrite(self.name, "int32 index arithmetic", "64-bit casts of indices removed", text, {})]
