"""Gate 1, static: the candidate parses, keeps the launcher contract, uses nothing it cannot be
shown to reach, and compiles with Triton to PTX for sm_90 (no GPU needed).

The source rules are pure Python (:mod:`ast`): :mod:`.static_rules` resolves every name to what
it refers to and allows a listed set (:mod:`.static_names`), :mod:`.static_launcher` holds a
launcher module's launcher to its dialect (docs/launchers.md). The compile runs in the
subprocess of :mod:`kernelopt_core.gates.ptx_compile`. Every rejection names the line and the
construct.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.model import CompiledGraph
from ..artifacts.parse import dotted_name
from .decisions import RULE_KIND, RULE_POINTER, RULE_WRITE_ONLY, added_decisions
from .static_dataflow import module_flow
from .static_launcher import check_launcher
from .static_names import HEURISTIC_DECORATORS, kernel_namespace
from .static_reloads import RULE as RELOAD_RULE
from .static_reloads import check_reloads
from .static_rules import ModuleChecker
from .static_tables import (
    FORBIDDEN_CALLS,
    FORBIDDEN_MODULES,
    FORBIDDEN_NAMES,
    GRID_TYPES,
    STREAM_ATTRIBUTES,
    Dialect,
    StaticFinding,
    check_signature_types,
)
from .verdict import GateVerdict

MAX_SOURCE_BYTES = 1 << 20

__all__ = ["FORBIDDEN_CALLS", "FORBIDDEN_MODULES", "FORBIDDEN_NAMES", "GRID_TYPES", "HEURISTIC_DECORATORS",
           "STREAM_ATTRIBUTES", "Dialect", "SourceReport", "StaticFinding", "check_source", "run_static_gate"]

# on one line, a race explains a stale read better than the write-only rule does: it comes first
_RULE_ORDER = ["syntax", "torch", "forbidden-import", "forbidden-call", "undefined", "try-except", "global-state",
               "stream", "decorator", "top-level", "construct", "launcher", "contract", RULE_POINTER,
               RELOAD_RULE, RULE_WRITE_ONLY, RULE_KIND]


@dataclass
class SourceReport:
    findings: list[StaticFinding] = field(default_factory=list)
    constexpr_params: list[str] = field(default_factory=list)
    runtime_params: list[str] = field(default_factory=list)
    heuristic: str | None = None
    uses_atomics: bool = False
    dialect: str = Dialect.INDUCTOR.value
    kernels: list[str] = field(default_factory=list)  # the module's @triton.jit functions
    launch_plans: list[dict[str, Any]] = field(default_factory=list)  # launcher kernels to compile for sm_90
    notes: list[str] = field(default_factory=list)  # what was not checked, and why

    @property
    def ok(self) -> bool:
        return not self.findings

    def first_finding(self) -> str:
        """The first finding, and how many more there are: what a failing verdict says."""
        more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return f"{self.findings[0].describe()}{more}"


def detect_dialect(tree: ast.Module, kernel_name: str) -> Dialect:
    """A launcher module defines an undecorated function with the kernel's name (what
    :func:`kernelopt_core.launchers.launcher_function` looks for); else it is a plain candidate."""
    launcher = any(isinstance(n, ast.FunctionDef) and n.name == kernel_name and not n.decorator_list
                   for n in tree.body)
    return Dialect.LAUNCHER if launcher else Dialect.INDUCTOR


def parse_candidate(candidate_source: str, report: SourceReport) -> ast.Module | None:
    """The candidate's syntax tree, or None with the finding in ``report`` that says why it has none."""
    if len(candidate_source.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        report.findings.append(StaticFinding("size", f"the candidate is over {MAX_SOURCE_BYTES} bytes"))
        return None
    try:
        return ast.parse(candidate_source)
    except SyntaxError as exc:
        report.findings.append(StaticFinding("syntax", f"Python syntax error: {exc.msg}", exc.lineno))
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        report.findings.append(StaticFinding("syntax", f"not parseable Python source ({type(exc).__name__}: {exc})"))
    return None


def check_source(original_source: str, kernel_name: str, candidate_source: str,
                 dialect: Dialect | None = None) -> SourceReport:
    """The source half of gate 1: everything but the compile (``dialect`` None: detected)."""
    report = SourceReport()
    tree = parse_candidate(candidate_source, report)
    if tree is None:
        return report
    dialect = dialect or detect_dialect(tree, kernel_name)
    report.dialect = dialect.value
    namespace = kernel_namespace()
    report.notes.extend(namespace.notes)
    original = _original_kernel(original_source, kernel_name)
    try:
        checker = ModuleChecker(namespace, dialect, kernel_name)
        facts = checker.check_module(tree)
        report.kernels = [f.name for f in facts.jit_functions]
        if dialect is Dialect.LAUNCHER and facts.launcher is not None:
            original_signature = (_decorator_meta(original, "triton_meta") or {}).get("signature") \
                if original is not None else None
            launched = check_launcher(checker.resolver, facts.launcher, original, original_signature)
            report.launch_plans = launched.plans
            report.notes.extend(launched.notes)
        report.uses_atomics = facts.uses_atomics
        report.findings.extend(checker.findings)
        # the data rule: intra-program races, against the original (a value window is a decision the candidate
        # adds: gate 2 must see it both ways, drawing at and beside its constant)
        flow = module_flow(tree)
        for message, line in check_reloads(original_source, flow):
            report.findings.append(StaticFinding(RELOAD_RULE, message, line))
        # control flow on addresses, decisions of a kind no outcome can be recorded for, reads of outputs
        for rule, message, line in added_decisions(original_source, candidate_source).findings:
            report.findings.append(StaticFinding(rule, message, line or None))
        if dialect is Dialect.LAUNCHER:
            _check_launcher_contract(tree, original, kernel_name, report)
        elif dialect is Dialect.INDUCTOR:
            _check_contract(tree, original, kernel_name, report)
        else:
            report.notes.append(f"the {dialect.value} dialect has no launch contract yet: only the source rules ran")
    except RecursionError:
        report.findings.append(StaticFinding("syntax", "the source nests too deeply to check"))
    # Report in source order; on one line the most specific rule first.
    report.findings.sort(key=lambda f: (f.line or 0, _RULE_ORDER.index(f.rule) if f.rule in _RULE_ORDER else 99))
    return report


def run_static_gate(graph: CompiledGraph, kernel_name: str, candidate_source: str,
                    compile_timeout_s: float = 300.0, compiler: Any = None) -> GateVerdict:
    """Gate 1 for one kernel of ``graph``. ``compiler`` defaults to the shared PTX compile process."""
    begin = time.monotonic()
    original = graph.kernel(kernel_name)
    if original is None:
        known = ", ".join(k.name for k in graph.kernels) or "none"
        return GateVerdict(1, "static", False, f"{graph.path} has no Triton kernel named {kernel_name} "
                                               f"(kernels: {known})", {}, time.monotonic() - begin)
    report = check_source(original.source, kernel_name, candidate_source)
    numbers: dict[str, Any] = {"findings": [f.to_json() for f in report.findings], "heuristic": report.heuristic,
                               "uses_atomics": report.uses_atomics, "dialect": report.dialect}
    if report.notes:
        numbers["notes"] = list(report.notes)
    if not report.ok:
        return GateVerdict(1, "static", False, f"{kernel_name}: {report.first_finding()}", numbers,
                           time.monotonic() - begin)
    launcher = report.dialect == Dialect.LAUNCHER.value
    if launcher and not report.launch_plans:
        return GateVerdict(1, "static", True,
                           f"{kernel_name}: source checks passed (launcher); none of its launches could be typed "
                           f"from the source, so nothing was compiled for sm_90 ({'; '.join(report.notes)})",
                           numbers, time.monotonic() - begin)
    compiled, failure = compile_for_sm90(compiler, kernel_name, candidate_source, compile_timeout_s, numbers,
                                         launches=report.launch_plans if launcher else None)
    if failure is not None:
        return GateVerdict(1, "static", False,
                           f"{kernel_name} does not compile for sm_90 (stopped at {compiled.get('stage')}): {failure}",
                           numbers, time.monotonic() - begin)
    count = len(compiled.get("configs", []))
    if launcher:
        kernels = len({c.get("kernel") for c in compiled.get("configs", [])})
        skipped = f"; not compiled: {'; '.join(report.notes)}" if report.notes else ""
        return GateVerdict(1, "static", True,
                           f"{kernel_name}: source checks passed (launcher); {count} launch(es) of {kernels} "
                           f"kernel(s) compiled to {compiled.get('stage')} for sm_90{skipped}", numbers,
                           time.monotonic() - begin)
    return GateVerdict(1, "static", True,
                       f"{kernel_name}: source checks passed; {count} launch config(s) compiled to "
                       f"{compiled.get('stage')} for sm_90", numbers, time.monotonic() - begin)


def compile_for_sm90(compiler: Any, name: str, source: str, timeout_s: float, numbers: dict[str, Any],
                     launches: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], str | None]:
    """Compile ``source`` for sm_90 (in the shared PTX compile process unless ``compiler`` is given),
    recording the result in ``numbers``; returns it, with the last line of its error when it failed."""
    if compiler is None:
        from .ptx_compile import shared_compiler

        compiler = shared_compiler()
    if launches is None:
        compiled = compiler.compile(name, source, timeout_s=timeout_s)
    else:
        compiled = compiler.compile(name, source, timeout_s=timeout_s, launches=launches)
    numbers["compile"] = compiled
    numbers["stage"] = compiled.get("stage")
    if compiled.get("ok"):
        return compiled, None
    error = str(compiled.get("error") or "unknown error").strip()
    return compiled, error.splitlines()[-1] if error else "unknown error"


# --- the launcher contract ------------------------------------------------------------------


def _kernel_def(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and (dotted_name(arg.annotation) or "").endswith("constexpr")


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _decorator_meta(func: ast.FunctionDef, key: str) -> dict[str, Any] | None:
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and (dotted_name(deco.func) or "").startswith("triton_heuristics."):
            for kw in deco.keywords:
                if kw.arg == key and isinstance(kw.value, ast.Dict):
                    # Take the literal entries (DeviceProperties(...) and set() are not literals).
                    out: dict[str, Any] = {}
                    for k, v in zip(kw.value.keys, kw.value.values, strict=False):
                        key_value = _literal(k) if k is not None else None
                        if isinstance(key_value, str):
                            out[key_value] = _literal(v)
                    return out
    return None


def _original_kernel(original_source: str, kernel_name: str) -> ast.FunctionDef | None:
    try:
        original_tree = ast.parse(original_source)
    except (SyntaxError, ValueError, RecursionError):
        return None  # nothing to compare against; the compile step decides
    return _kernel_def(original_tree, kernel_name) or next(
        (n for n in original_tree.body if isinstance(n, ast.FunctionDef)), None)


def _runtime_params(func: ast.FunctionDef) -> list[str]:
    return [a.arg for a in func.args.args if not _is_constexpr(a)]


def _check_contract(tree: ast.Module, original: ast.FunctionDef | None, kernel_name: str,
                    report: SourceReport) -> None:
    """A plain candidate: the kernel's name and runtime parameters, under one triton_heuristics decorator."""
    def add(message: str, node: ast.AST | None = None) -> None:
        report.findings.append(StaticFinding("contract", message, getattr(node, "lineno", None)))

    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    func = _kernel_def(tree, kernel_name)
    if func is None:
        add(f"defines no function named {kernel_name} (found: {', '.join(functions) or 'none'}); a candidate "
            "keeps the kernel's name")
        return
    decorators = [dotted_name(d.func if isinstance(d, ast.Call) else d) or "" for d in func.decorator_list]
    heuristics = [d for d in decorators if d.startswith("triton_heuristics.")]
    if not heuristics:
        add(f"{kernel_name} has no @triton_heuristics.<kind>(...) decorator: the wrapper launches it with "
            "`.run(..., stream=...)`, which that decorator provides (or write a launcher: docs/launchers.md)", func)
    else:
        report.heuristic = heuristics[0].split(".", 1)[1]
        if report.heuristic not in HEURISTIC_DECORATORS:
            add(f"unknown launcher `@{heuristics[0]}` (use one of {', '.join(sorted(HEURISTIC_DECORATORS))})", func)
    if not decorators or decorators[-1] != "triton.jit":
        add(f"{kernel_name} must be decorated with @triton.jit directly above its def", func)
    if original is None:
        return
    runtime = _runtime_params(func)
    original_runtime = _runtime_params(original)
    report.runtime_params = runtime
    report.constexpr_params = [a.arg for a in func.args.args if _is_constexpr(a)]
    if runtime != original_runtime:
        add(f"signature changed: the wrapper passes ({', '.join(original_runtime)}) but the candidate takes "
            f"({', '.join(runtime)})", func)
    order = [a.arg for a in func.args.args]
    kinds = [_is_constexpr(a) for a in func.args.args]
    if True in kinds and False in kinds[kinds.index(True):]:
        add("constexpr parameters must come after the runtime parameters the wrapper passes", func)
    signature = (_decorator_meta(func, "triton_meta") or {}).get("signature")
    original_signature = (_decorator_meta(original, "triton_meta") or {}).get("signature")
    if report.heuristic and report.heuristic in HEURISTIC_DECORATORS:
        if not isinstance(signature, dict):
            add("triton_meta['signature'] is missing or not a literal dict", func)
        else:
            if list(signature) != order:
                add(f"triton_meta['signature'] lists ({', '.join(map(str, signature))}) but the kernel takes "
                    f"({', '.join(order)})", func)
            bad_types = check_signature_types(signature)
            if bad_types:
                add(f"triton_meta['signature'] holds what is not a Triton type ({'; '.join(bad_types)[:200]}); Triton "
                    "evaluates parts of these strings", func)
            for name in report.constexpr_params:
                if signature.get(name) not in (None, "constexpr"):
                    add(f"constexpr parameter {name} is typed {signature.get(name)!r} in triton_meta['signature']",
                        func)
            if isinstance(original_signature, dict):
                for name in original_runtime:
                    if name in signature and signature[name] != original_signature.get(name):
                        add(f"argument {name} changed type from {original_signature.get(name)!r} to "
                            f"{signature[name]!r}; the wrapper's buffers keep their dtype", func)
        inductor_meta = _decorator_meta(func, "inductor_meta") or {}
        original_meta = _decorator_meta(original, "inductor_meta") or {}
        wanted = set(original_meta.get("mutated_arg_names") or [])
        declared = set(inductor_meta.get("mutated_arg_names") or [])
        if wanted - declared:
            add(f"inductor_meta['mutated_arg_names'] drops {', '.join(sorted(wanted - declared))}: autotuning "
                "would run on the live buffers", func)


def _check_launcher_contract(tree: ast.Module, original: ast.FunctionDef | None, kernel_name: str,
                             report: SourceReport) -> None:
    """A launcher module: one launcher with the kernel's runtime parameters, and @triton.jit kernels to launch."""
    def add(message: str, node: ast.AST | None = None) -> None:
        report.findings.append(StaticFinding("contract", message, getattr(node, "lineno", None)))

    launcher = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel_name
                     and not n.decorator_list), None)
    if launcher is None:
        add(f"defines no launcher `def {kernel_name}(...)`")
        return
    if not report.kernels:
        add(f"the launcher module defines no @triton.jit kernel for {kernel_name} to launch", launcher)
    params = [a.arg for a in launcher.args.args]
    report.runtime_params = params
    if original is None:
        return
    original_runtime = _runtime_params(original)
    if params != original_runtime:
        add(f"signature changed: the wrapper passes ({', '.join(original_runtime)}) but the launcher takes "
            f"({', '.join(params)}); a launcher takes the kernel's runtime parameters, same names, same order",
            launcher)
