"""Gate 1 for user kernels: the *user kernel* dialect of a candidate module, then the compile.

A candidate for a user kernel is a kernel module in the user's own style (docs/user-kernels.md):
imports of Triton (and ``math``, libdevice), constants, ``@triton.jit`` helpers and the kernel,
decorated ``@triton.jit`` and optionally ``@triton.autotune(configs=[...], key=[...])`` and
``@triton.heuristics({...})``. The wrapper that launches it stays the user's, so the kernel keeps
its name, its parameters in order and which are ``tl.constexpr``; autotune configs are a literal
list whose keys are ``tl.constexpr`` parameters the caller does not pass itself (Triton refuses a
meta-parameter set twice); no ``@triton_heuristics`` (Inductor's launcher), no plain functions.
The rest (no torch, no I/O, no forbidden imports, no try/except, no global state, no streams) is
Inductor's dialect, checked by gate 1's own checker (:mod:`kernelopt_core.gates.static`). Then each
launch config is compiled for sm_90 in a contained process (:mod:`kernelopt_core.gates.ptx_compile`)
with the captured launch's signature. Pure Python here; the compile runs in its own process.
"""

from __future__ import annotations

import ast
import re
import time
from typing import Any

from ..gates.static import SourceReport, StaticFinding, check_source, compile_for_sm90, parse_candidate
from ..gates.static_tables import Dialect
from ..gates.verdict import GateVerdict
from .parse import Aliases, parse_user_kernels

_CALLER_MARKER = re.compile(r"^# kernelopt: the caller passes (.+)$", re.MULTILINE)
_RULE_ORDER = ["syntax", "torch", "forbidden-import", "forbidden-call", "try-except", "global-state", "stream",
               "top-level", "contract"]
USER_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")


def caller_passes(module_source: str) -> list[str]:
    """The meta-parameters and options the caller passes (the extracted module's marker line)."""
    match = _CALLER_MARKER.search(module_source)
    return [n.strip() for n in match.group(1).split(",") if n.strip()] if match else []


def check_user_source(original_source: str, kernel: str, candidate_source: str) -> SourceReport:
    """The source half of gate 1 for a user kernel candidate."""
    report = SourceReport()
    if parse_candidate(candidate_source, report) is None:
        return report
    # Gate 1's own rules, on what each name resolves to, in the user-kernel dialect; then the contract
    # of a user kernel (its wrapper stays the user's).
    report = check_source(original_source, kernel, candidate_source, dialect=Dialect.USER)
    report.notes = [n for n in report.notes if "has no launch contract yet" not in n]
    try:
        _check_contract(original_source, kernel, candidate_source, report)
    except RecursionError:
        report.findings.append(StaticFinding("syntax", "the source nests too deeply to check"))
    report.findings.sort(key=lambda f: (f.line or 0, _RULE_ORDER.index(f.rule) if f.rule in _RULE_ORDER else 99))
    return report


def _check_contract(original_source: str, kernel: str, candidate_source: str, report: SourceReport) -> None:
    def add(message: str, line: int | None = None) -> None:
        report.findings.append(StaticFinding("contract", message, line))

    try:
        candidate_file = parse_user_kernels("<candidate>", candidate_source)
        original_file = parse_user_kernels("<original>", original_source)
    except Exception as exc:  # noqa: BLE001 - syntax problems are reported above
        add(f"the module cannot be read: {exc}")
        return
    found = candidate_file.function(kernel)
    original = original_file.function(kernel)
    if found is None:
        defined = ", ".join(k.name for k in [*candidate_file.kernels, *candidate_file.helpers]) or "none"
        add(f"defines no @triton.jit function named {kernel} (found: {defined}); a candidate keeps the kernel's name")
        return
    line = found.def_line + 1
    report.heuristic = "user"
    report.runtime_params = found.runtime_params
    report.constexpr_params = list(found.constexprs)
    report.uses_atomics = any(a.kind == "atomic" for a in found.accesses)
    tree = ast.parse(candidate_source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel)
    aliases = Aliases.of(tree)
    names = [aliases.canonical(d.func if isinstance(d, ast.Call) else d) for d in func.decorator_list]
    if not names or names[-1] != "triton.jit":
        add(f"{kernel} must be decorated with @triton.jit directly above its def", line)
    if original is None:
        return
    if found.params != original.params:
        add(f"signature changed: the wrapper passes ({', '.join(original.params)}) but the candidate takes "
            f"({', '.join(found.params)})", line)
    elif found.constexprs != original.constexprs:
        add(f"tl.constexpr parameters changed from ({', '.join(original.constexprs)}) to "
            f"({', '.join(found.constexprs)}); the wrapper's launch depends on which are meta-parameters", line)
    passed = set(caller_passes(original_source))
    spec = found.autotune
    if spec is not None:
        if not spec.configs_literal:
            add(f"@triton.autotune configs must be a literal list of triton.Config(...) (got `{spec.configs_source}`)",
                spec.line + 1)
        if not spec.configs:
            add("@triton.autotune declares no config", spec.line + 1)
        for config in spec.configs:
            stray = [k for k in config.kwargs if k not in found.constexprs]
            if stray:
                add(f"triton.Config({config.label()}) sets {', '.join(stray)}, not a tl.constexpr parameter of "
                    f"{kernel}", config.line + 1)
            twice = sorted(set(config.all_kwargs()) & passed)
            if twice:
                add(f"triton.Config({config.label()}) sets {', '.join(twice)}, which the wrapper passes itself "
                    "(Triton refuses a meta-parameter given twice)", config.line + 1)
        unknown = [k for k in spec.key or [] if k not in found.params]
        if unknown:
            add(f"autotune key {', '.join(unknown)} is not a parameter of {kernel}", spec.line + 1)
    twice = sorted(set(found.heuristics) & passed)
    if twice:
        add(f"@triton.heuristics computes {', '.join(twice)}, which the wrapper passes itself", line)
    stray = [k for k in found.heuristics if k not in found.constexprs]
    if stray:
        add(f"@triton.heuristics computes {', '.join(stray)}, not a tl.constexpr parameter of {kernel}", line)


def candidate_configs(candidate_source: str, kernel: str) -> list[dict[str, Any]]:
    """The candidate's literal autotune configs, each ``{**meta, num_warps, num_stages}``."""
    try:
        found = parse_user_kernels("<candidate>", candidate_source).function(kernel)
    except Exception:  # noqa: BLE001 - gate 1 reports what is wrong with it
        return []
    if found is None or found.autotune is None or not found.autotune.configs_literal:
        return []
    return [c.all_kwargs() for c in found.autotune.configs]


def compile_configs(candidate_source: str, kernel: str, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The launch configs to compile: the candidate's autotune configs, else the captured launch's options."""
    from ast import literal_eval

    options: dict[str, Any] = {}
    for name, item in plan["pinned"]["keywords"].items():
        if name in ("num_warps", "num_stages") and "literal" in item:
            try:
                options[name] = literal_eval(item["literal"])
            except (ValueError, SyntaxError):
                pass
    tuned = candidate_configs(candidate_source, kernel)
    if not tuned:
        return [{"kwargs": {}, **options}]
    out = []
    for config in tuned:
        meta = {k: v for k, v in config.items() if k not in ("num_warps", "num_stages", "num_ctas")}
        out.append({"kwargs": meta, "num_warps": config.get("num_warps", options.get("num_warps")),
                    "num_stages": config.get("num_stages", options.get("num_stages"))})
    return out


def run_user_static_gate(original_source: str, kernel: str, candidate_source: str, plan: dict[str, Any] | None,
                         compile_timeout_s: float = 300.0, compiler: Any = None,
                         device: str | None = None) -> GateVerdict:
    """Gate 1: the dialect checks, then every launch config compiled for sm_90 (needs the launch plan).
    ``device``: where gates 2-4 run it, named in the verdict (the compile itself is always Triton's CUDA
    back end, which needs no GPU)."""
    from .launcher import COMPILE_TARGET, compile_source, signature_types

    begin = time.monotonic()
    report = check_user_source(original_source, kernel, candidate_source)
    numbers: dict[str, Any] = {"findings": [f.to_json() for f in report.findings], "heuristic": "user",
                               "uses_atomics": report.uses_atomics, "dialect": "user kernel"}
    if not report.ok:
        return GateVerdict(1, "static", False, f"{kernel}: {report.first_finding()}", numbers, time.monotonic() - begin)
    if plan is None:
        numbers["compile"] = {"ok": None, "stage": "skipped", "reason": "no captured launch to take types from"}
        return GateVerdict(1, "static", True, f"{kernel}: source checks passed (not compiled: no captured launch)",
                           numbers, time.monotonic() - begin)
    found = parse_user_kernels("<candidate>", candidate_source).function(kernel)
    assert found is not None
    signature, constants = signature_types(plan, found.params, found.constexprs)
    source = compile_source(candidate_source, kernel, signature, constants,
                            compile_configs(candidate_source, kernel, plan))
    compiled, failure = compile_for_sm90(compiler, COMPILE_TARGET, source, compile_timeout_s, numbers)
    if failure is not None:
        return GateVerdict(1, "static", False, f"{kernel} does not compile for sm_90 with Triton's CUDA back end "
                                               f"(stopped at {compiled.get('stage')}): {failure}", numbers,
                           time.monotonic() - begin)
    count = len(compiled.get("configs", []))
    here = ("; a compile check only: on this machine gates 2-4 run it on Triton's CPU interpreter"
            if device is not None and not device.startswith("cuda") else "")
    return GateVerdict(1, "static", True, f"{kernel}: source checks passed; {count} launch config(s) compiled by "
                                          f"Triton's CUDA back end to {compiled.get('stage')} for sm_90{here}",
                       numbers, time.monotonic() - begin)


__all__ = ["caller_passes", "candidate_configs", "check_user_source", "compile_configs", "run_user_static_gate"]
