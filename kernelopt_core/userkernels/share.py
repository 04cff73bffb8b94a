"""A user kernel's share of its harness call, from two timings taken apart.

The kernel is timed alone (its captured launch, through KernelOPT's launcher) and the harness as a
whole (through the user's wrapper). When the kernel is most of the call, noise can put its median
above the harness's: a share over 100% means nothing, and a share clamped to 100% hides that the
figures overlap. Then there is no share figure, and the note says why, with both spreads. A share
below 100% whose spreads reach 100% keeps its figure, but is said to be about 100% (within noise): one
run read 95.7% and the next ~100% for the same harness. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HarnessShare:
    share: float | None  # the kernel's time per harness call over the call's time; None when over 1
    note: str | None = None  # why there is no share figure, or why the figure is within noise of 100%


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def harness_share(kernel: str, kernel_timing: dict[str, Any], harness_timing: dict[str, Any],
                  launches_per_call: int = 1) -> HarnessShare:
    """``kernel_timing`` / ``harness_timing``: TimingStats JSON (``median_ms``, ``iqr_ms``)."""
    per_call = max(1, int(launches_per_call))
    harness_ms = float(harness_timing.get("median_ms") or 0.0)
    if harness_ms <= 0:
        return HarnessShare(None, "the harness call was not timed")
    kernel_ms = float(kernel_timing.get("median_ms") or 0.0) * per_call
    ratio = kernel_ms / harness_ms
    kernel_spread = float(kernel_timing.get("iqr_ms") or 0.0) * per_call
    harness_spread = float(harness_timing.get("iqr_ms") or 0.0)
    launches = f" ({per_call} launches per call)" if per_call > 1 else ""
    figures = (f"{kernel} alone took {_ms(kernel_ms)} per call{launches} (IQR {_ms(kernel_spread)}), the harness "
               f"call {_ms(harness_ms)} (IQR {_ms(harness_spread)})")
    if ratio <= 1.0:
        if kernel_ms + kernel_spread / 2 < harness_ms - harness_spread / 2:
            return HarnessShare(ratio)
        # below 100%, but the spreads reach it: another run may read ~100% (over it), so say it is all of it
        return HarnessShare(ratio, f"{figures}: {ratio:.1%} of the call, within noise of all of it (the two "
                                   f"spreads overlap), so about 100%; another run may read a little more or less")
    # the two spreads overlap: the medians' order is noise
    if kernel_ms - kernel_spread / 2 <= harness_ms + harness_spread / 2:
        return HarnessShare(None, f"{figures}: within noise of each other, so {kernel} is about all of the harness "
                                  "call; no share figure (it would read over 100%)")
    return HarnessShare(None, f"{figures}: more apart than both spreads, so the two timings are not comparable "
                              f"here ({kernel} alone runs through KernelOPT's launcher on copies of its captured "
                              "arguments, the harness through your wrapper); it is most or all of the harness "
                              "call, no share figure")


__all__ = ["HarnessShare", "harness_share"]
