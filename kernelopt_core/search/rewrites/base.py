"""What every rewrite family shares: the context it reads and the rewrite it proposes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...analyst import EVIDENCE_KEYS
from .declaration import FamilyDeclaration
from .kernel_source import KernelModule, LaunchConfig


@dataclass
class RewriteContext:
    """Everything a family may look at when proposing variants of one kernel.

    ``evidence`` is the analyst's speed-of-light evidence for the original kernel (filled by the
    search pipeline; :func:`kernelopt_core.analyst.rewrite_evidence`). Its keys, any of them None
    when nothing measured or captured it:

    * ``ideal_bytes`` (int): every distinct tensor the launch reads, once, plus every tensor it
      writes, once (stride-aware storage extents);
    * ``dram_bytes`` (float): DRAM bytes read + written, measured by ncu;
    * ``traffic_ratio`` (float): dram_bytes / ideal_bytes;
    * ``sol_pct`` (float): speed of light, ideal_bytes / (duration x copy bandwidth), in percent;
    * ``duration_ms`` (float): the kernel time behind sol_pct (ncu, else a timed launch);
    * ``copy_bytes_per_s`` (float): the device's measured copy bandwidth (bytes read + written per s);
    * ``l2_bytes`` (int): the device's L2 size; ``sm_count`` (int): its SM count;
    * ``grid`` (int): programs launched (ncu's grid size); ``waves`` (float): waves per SM;
    * ``passes`` (int): reduction loops (``for r0_offset``) that load the same pointer, from the source;
    * ``xnumel``, ``r0_numel`` (int): the launch's sizes (rows and row length of a reduction);
    * ``causes`` (list[str]): the analyst's cause ids, among "re-reads", "low-parallelism",
      "strided-access", "l2-thrash" (empty when near-optimal or nothing found);
    * ``launch_args`` (list[dict]): the tensor arguments of the launch, each
      {name, role, shape, stride, dtype, storage_bytes}; role is input, output or inout.
    """

    module: KernelModule  # the kernel to rewrite (the beam node's current source)
    original: KernelModule  # Inductor's kernel, for reference
    device: str = "cuda"  # "cpu" means the CPU Triton interpreter: per-program cost dominates
    tier: str = "unknown"  # the analyst's tier for this kernel
    inductor_configs: list[LaunchConfig] = field(default_factory=list)  # what Inductor would try
    multiprocessors: int = 132
    evidence: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(EVIDENCE_KEYS))
    # Compiles a plain kernel module for sm_90 and answers {"regs", "spills", "shared_bytes"} of its
    # first launch config, or None when it cannot (the search pipeline provides it on GPU runs;
    # kernelopt_core.gates.ptx_compile). Families read register limits from it instead of guessing.
    compile_probe: Callable[[str], dict[str, Any] | None] | None = None
    # The same for several sources at once, compiled concurrently; answers in the sources' order.
    # Families ask through rewrites.cost_model.probe_all, which falls back to compile_probe one by one.
    compile_probes: Callable[[list[str]], list[dict[str, Any] | None]] | None = None

    @property
    def on_cpu(self) -> bool:
        return self.device.startswith("cpu")

    @property
    def can_probe(self) -> bool:
        """Whether variants can be compiled for their registers (``compile_probe(s)``)."""
        return self.compile_probe is not None or self.compile_probes is not None


LAUNCHER_LABEL = "# kernelopt launcher: "


@dataclass
class Rewrite:
    """One proposed candidate: which family made it, what it changed, and the new module source."""

    family: str
    title: str
    detail: str
    source: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A launcher module replaces the whole kernel, so a diff of it against Inductor's says only "116 lines
        # edited"; its first line names what it is, for reports and for the rewrites built on top of it.
        if self.params.get("launcher") and not self.source.startswith(LAUNCHER_LABEL):
            self.source = f"{LAUNCHER_LABEL}{self.family.replace('_', ' ')}, {self.title}\n{self.source}"

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "title": self.title, "detail": self.detail, "params": self.params}


class RewriteFamily:
    """What every rewrite family is. A family says why it cannot rewrite a kernel
    (:meth:`not_applicable`) and writes its variants for the kernels it can
    (:meth:`applicable_variants`); one whose check already finds what its variants need
    overrides :meth:`variants` instead, so as not to look twice."""

    name: str
    summary: str  # one line for prompts, reports and the planner's memory
    declaration: FamilyDeclaration  # when it is tried and its cost: given when registered in FAMILIES

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        """Why the family cannot rewrite this kernel, or None when it can."""
        raise NotImplementedError

    def variants(self, ctx: RewriteContext) -> list[Rewrite]:
        """The family's candidates for this kernel, best first (deterministic); none where it does not apply."""
        if self.not_applicable(ctx):
            return []
        return self.applicable_variants(ctx)

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        """The candidates for a kernel :meth:`not_applicable` has nothing against."""
        raise NotImplementedError


def pointer_loads(text: str) -> list[re.Match[str]]:
    return list(re.finditer(r"tl\.load\(", text))


def call_spans(text: str, prefix: str) -> list[tuple[int, int]]:
    """(start, end) of every ``prefix(...)`` call in text, matching parentheses."""
    spans = []
    for match in re.finditer(re.escape(prefix), text):
        depth = 0
        for i in range(match.end() - 1, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    spans.append((match.start(), i + 1))
                    break
    return spans


def split_args(inner: str) -> list[str]:
    """Split a call's argument text on top-level commas."""
    parts, depth, current = [], 0, []
    quote: str | None = None
    for ch in inner:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts
