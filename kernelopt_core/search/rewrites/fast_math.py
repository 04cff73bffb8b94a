"""Cheaper math intrinsics: Triton's own ``exp``/``log``/``rsqrt``/... instead of libdevice calls.

libdevice's versions are correctly rounded and slow; Triton lowers ``tl_math.exp`` to
``ex2.approx`` with a scale. The differences are a few ulp, far inside gate 2's 1e-3.
libdevice's ``tanh`` becomes ``2 / (1 + exp(-2x)) - 1`` on that exp: about 1e-7 absolute error (relative
error grows as x nears 0, where gate 2's tolerance decides); +-inf and NaN come out as tanh's.
"""

from __future__ import annotations

import re

from .base import Rewrite, RewriteContext, RewriteFamily, call_spans

FAST = {"exp": "tl_math.exp", "exp2": "tl_math.exp2", "log": "tl_math.log", "log2": "tl_math.log2",
        "sqrt": "tl.sqrt", "rsqrt": "tl_math.rsqrt", "sin": "tl_math.sin", "cos": "tl_math.cos",
        "abs": "tl_math.abs"}


def _fast_tanh(text: str) -> tuple[str, bool]:
    """Every ``libdevice.tanh(x)`` as ``2 / (1 + exp(-2x)) - 1`` (x evaluated once)."""
    spans = call_spans(text, "libdevice.tanh(")
    for start, end in reversed(spans):
        argument = text[start + len("libdevice.tanh("):end - 1]
        text = text[:start] + f"(2.0 / (1.0 + tl_math.exp(-2.0 * ({argument}))) - 1.0)" + text[end:]
    return text, bool(spans)


def fast_intrinsics(text: str) -> tuple[str, list[str]]:
    changed = []

    def swap(match: re.Match[str]) -> str:
        changed.append(match.group(1))
        return FAST[match.group(1)] + "("

    new = re.sub(r"\blibdevice\.(" + "|".join(FAST) + r")\(", swap, text)
    new, tanh = _fast_tanh(new)
    if tanh:
        changed.append("tanh")
    return new, sorted(set(changed))


class FastMathFamily(RewriteFamily):
    name = "fast_math"
    summary = "approximate intrinsics (tl_math.exp/log/rsqrt) instead of libdevice calls"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        _, changed = fast_intrinsics(ctx.module.text)
        return None if changed else "no libdevice calls with a fast equivalent"

    def variants(self, ctx: RewriteContext) -> list[Rewrite]:
        source, changed = fast_intrinsics(ctx.module.text)
        if not changed:
            return []
        return [Rewrite(self.name, f"fast {', '.join(changed)}", "libdevice calls -> Triton intrinsics", source,
                        {"functions": changed})]
