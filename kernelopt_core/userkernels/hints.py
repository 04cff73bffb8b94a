"""Static facts and hints on a project's own Triton kernels (pure: a parsed file in, words out).

Each hint names where it applies (the load, the launch, the decorator) and why it matters; the
language server shows them as diagnostics and in hovers, the CLI prints them with ``profile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..artifacts.model import SourceRange
from .model import UserKernel, UserKernelFile

Severity = Literal["error", "warning", "information", "hint"]
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug"})


@dataclass(frozen=True)
class Hint:
    code: str
    severity: Severity
    message: str
    range: SourceRange
    kernel: str

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "severity": self.severity, "message": self.message, "kernel": self.kernel,
                "line": self.range.start_line}


def kernel_hints(file: UserKernelFile, kernel: UserKernel) -> list[Hint]:
    """Every hint for one kernel (its helpers' accesses included, where the kernel launches them)."""
    hints: list[Hint] = []
    hints += _unmasked_accesses(file, kernel)
    hints += _autotune_hints(kernel)
    hints += _launch_hints(kernel)
    hints += _dot_hints(file, kernel)
    return hints


def file_hints(file: UserKernelFile) -> list[Hint]:
    out: list[Hint] = []
    for kernel in file.kernels:
        out += kernel_hints(file, kernel)
    seen: set[tuple[str, int, int]] = set()
    unique = []
    for hint in out:  # a helper shared by two kernels is reported once
        key = (hint.code, hint.range.start_line, hint.range.start_col)
        if key not in seen:
            seen.add(key)
            unique.append(hint)
    return unique


def _with_helpers(file: UserKernelFile, kernel: UserKernel) -> list[UserKernel]:
    found = [kernel]
    for name in kernel.helpers:
        helper = file.function(name)
        if helper is not None and helper not in found:
            found.append(helper)
    return found


def _unmasked_accesses(file: UserKernelFile, kernel: UserKernel) -> list[Hint]:
    cdiv = [site for site in kernel.launches if site.grid_uses_cdiv]
    hints = []
    for function in _with_helpers(file, kernel):
        for site in function.accesses:
            if site.masked or not site.block:
                continue
            what = {"load": "tl.load", "store": "tl.store", "atomic": "an atomic"}[site.kind]
            if site.block_pointer:
                fix = "pass boundary_check=(0, 1) (the block's dimensions that may cross the edge)"
                what += " of a block pointer"
            else:
                fix = "pass mask=offsets < n" + (" and other=... " if site.kind == "load" else "")
            if cdiv:
                grid = cdiv[0].grid
                hints.append(Hint(
                    "unmasked-access", "warning",
                    f"{what} without a mask in {kernel.name}, launched with the rounding-up grid `{grid}`: the "
                    f"last program's block runs past the end of the tensor unless its size is a multiple of the "
                    f"block ({'reads garbage' if site.kind == 'load' else 'writes out of bounds'}); {fix}",
                    site.range, kernel.name))
            else:
                hints.append(Hint(
                    "unmasked-access", "information",
                    f"{what} without a mask: correct only while every program's block lies inside the tensor "
                    f"(sizes a multiple of the block); {fix} if it may not",
                    site.range, kernel.name))
    return hints


def _autotune_hints(kernel: UserKernel) -> list[Hint]:
    spec = kernel.autotune
    if spec is None:
        return []
    where = SourceRange(spec.line, 0, spec.line, 1_000)
    hints = []
    if len(spec.configs) > 1 or not spec.configs_literal:
        if spec.key is None or not spec.key:
            hints.append(Hint(
                "autotune-key", "warning",
                f"@triton.autotune of {kernel.name} has no key: the configuration chosen on the first call is "
                "reused for every later shape; list the size arguments the best configuration depends on "
                "(key=['n_elements'])", where, kernel.name))
    unknown = [k for k in spec.key or [] if k not in kernel.params]
    if unknown:
        hints.append(Hint("autotune-key", "error",
                          f"autotune key {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a parameter "
                          f"of {kernel.name} (parameters: {', '.join(kernel.params)})", where, kernel.name))
    for config in spec.configs:
        stray = [k for k in config.kwargs if k not in kernel.constexprs]
        if stray:
            hints.append(Hint(
                "autotune-config", "error",
                f"triton.Config({config.label()}) sets {', '.join(stray)}, which {'is' if len(stray) == 1 else 'are'} "
                f"not a tl.constexpr parameter of {kernel.name}: the launch fails on a GPU",
                SourceRange(config.line, 0, config.line, 1_000), kernel.name))
    tuned = {k for c in spec.configs for k in c.all_kwargs()}
    for site in kernel.launches:
        conflict = sorted(tuned & set(site.kwargs))
        if conflict:
            hints.append(Hint(
                "autotune-conflict", "error",
                f"this launch passes {', '.join(conflict)}, which @triton.autotune also sets: Triton raises "
                "\"Conflicting meta-parameters\" (let the autotuner choose, or drop it from the configs)",
                site.range, kernel.name))
    return hints


def _launch_hints(kernel: UserKernel) -> list[Hint]:
    hints = []
    tuned_warps = kernel.autotune is not None and any(c.num_warps is not None for c in kernel.autotune.configs)
    for site in kernel.launches:
        if "num_warps" not in site.kwargs and not tuned_warps:
            hints.append(Hint(
                "default-num-warps", "information",
                f"{kernel.name} is launched with Triton's default num_warps=4; the best value depends on the block "
                "size (pass num_warps=..., or @triton.autotune over a few values)",
                site.range, kernel.name))
        missing = [p for p in kernel.constexprs if p not in site.kwargs and p not in kernel.constexpr_defaults
                   and p not in kernel.heuristics and not _tuned(kernel, p)]
        positional = len(site.args)
        missing = [p for p in missing if kernel.params.index(p) >= positional]
        if missing:
            hints.append(Hint(
                "missing-meta", "error",
                f"this launch gives no value for {', '.join(missing)} (a tl.constexpr without a default, not set "
                "by @triton.autotune or @triton.heuristics)", site.range, kernel.name))
    return hints


def _tuned(kernel: UserKernel, name: str) -> bool:
    return kernel.autotune is not None and (not kernel.autotune.configs_literal or any(
        name in c.kwargs for c in kernel.autotune.configs))


def _dot_hints(file: UserKernelFile, kernel: UserKernel) -> list[Hint]:
    hints = []
    for function in _with_helpers(file, kernel):
        for site in function.dots:
            if site.precision is not None or site.low_precision_operands:
                continue
            hints.append(Hint(
                "dot-precision", "information",
                "tl.dot without input_precision=: with fp32 operands Triton uses TF32 on GPUs that have it "
                "(about 1e-3 relative error per product); pass input_precision='ieee' for full fp32, or "
                "input_precision='tf32' to make the faster choice explicit",
                site.range, kernel.name))
    return hints


# --- facts, for hovers and lenses ------------------------------------------------------------------


def kernel_facts(file: UserKernelFile, kernel: UserKernel) -> list[str]:
    """Short lines of what the source says about a kernel."""
    runtime = kernel.runtime_params
    facts = [f"parameters: {', '.join(runtime) or 'none'}"
             + (f"; tl.constexpr: {', '.join(kernel.constexprs)}" if kernel.constexprs else "")]
    decorators = ["@triton.jit"]
    if kernel.autotune is not None:
        spec = kernel.autotune
        configs = f"{len(spec.configs)} config(s)" if spec.configs_literal else f"configs from `{spec.configs_source}`"
        decorators.insert(0, f"@triton.autotune ({configs}, key {spec.key if spec.key is not None else 'none'})")
    if kernel.heuristics:
        decorators.insert(0, f"@triton.heuristics ({', '.join(kernel.heuristics)})")
    facts.append(" · ".join(decorators))
    accesses = [a for f in _with_helpers(file, kernel) for a in f.accesses]
    loads = [a for a in accesses if a.kind == "load"]
    stores = [a for a in accesses if a.kind != "load"]
    facts.append(f"{len(loads)} load(s) ({sum(a.masked for a in loads)} masked), "
                 f"{len(stores)} store(s) ({sum(a.masked for a in stores)} masked)"
                 + (f", {len(kernel.dots)} tl.dot" if kernel.dots else ""))
    if kernel.helpers:
        facts.append(f"calls {', '.join(kernel.helpers)}")
    for site in kernel.launches[:3]:
        passes = ", ".join(f"{k}={v}" for k, v in site.kwargs.items())
        facts.append(f"launched in {site.function or 'module level'}() with grid `{site.grid}`"
                     + (f" and {passes}" if passes else ""))
    if not kernel.launches:
        facts.append("not launched in this file")
    return facts


def lens_summary(file: UserKernelFile, kernel: UserKernel) -> str:
    """``Triton kernel · 2 loads, 1 store · harness bench_softmax`` (before any profile)."""
    accesses = [a for f in _with_helpers(file, kernel) for a in f.accesses]
    parts = ["Triton kernel"]
    if kernel.autotune is not None:
        parts.append(f"autotuned over {len(kernel.autotune.configs)} config(s)" if kernel.autotune.configs_literal
                     else "autotuned")
    parts.append(f"{sum(a.kind == 'load' for a in accesses)} loads, {sum(a.kind != 'load' for a in accesses)} stores")
    harness = file.harness_for(kernel.name)
    choices = file.harness_choices(kernel.name)
    parts.append(f"harness {harness}" if harness else
                 f"no harness (add `# kernelopt: harness={choices[0] if len(choices) == 1 else 'NAME'}` above it)")
    return " · ".join(parts)


__all__ = ["Hint", "file_hints", "kernel_facts", "kernel_hints", "lens_summary"]
