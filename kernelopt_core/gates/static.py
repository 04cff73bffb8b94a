"""Gate 1, static: the candidate parses, keeps the launcher contract, uses nothing forbidden,
and compiles with Triton to PTX for sm_90 (no GPU needed).

The source checks are pure Python (:mod:`ast`); the compile runs in the subprocess of
:mod:`kernelopt_core.gates.ptx_compile`. Every rejection names the line and the construct.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.model import CompiledGraph
from ..artifacts.parse import dotted_name
from .verdict import GateVerdict

MAX_SOURCE_BYTES = 1 << 20

# Modules a kernel module may import from, and what it may take from each.
ALLOWED_IMPORTS: dict[str, frozenset[str] | None] = {
    # None: any name (except a forbidden module name) may be imported from it
    "triton": None,
    "triton.language": None,
    "triton.language.extra": frozenset({"libdevice", "cuda"}),
    "triton.language.extra.cuda": frozenset({"libdevice"}),
    "triton.language.extra.libdevice": None,
    "triton.language.extra.cuda.libdevice": None,
    "math": None,
    "torch._inductor.runtime": frozenset({"triton_helpers", "triton_heuristics", "hints", "triton_compat"}),
    "torch._inductor.runtime.triton_helpers": None,
    "torch._inductor.runtime.triton_heuristics": None,
    "torch._inductor.runtime.hints": None,
    "torch._inductor.runtime.triton_compat": None,
}
# Never allowed as a name or an attribute anywhere in a kernel module.
FORBIDDEN_NAMES = frozenset({"torch", "extern_kernels", "aten"})
# Modules with side effects (processes, files, sockets, threads, native calls, the interpreter).
FORBIDDEN_MODULES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "threading", "multiprocessing", "shutil",
    "pathlib", "io", "builtins", "importlib", "pickle", "marshal", "signal", "inspect", "gc", "weakref",
    "functools", "asyncio", "concurrent", "urllib", "http", "requests", "tempfile", "glob", "cffi",
    "numpy", "random", "time", "atexit",
})
# Attributes that reach Triton's runtime (driver, device memory, streams) rather than its language.
FORBIDDEN_ATTRIBUTES = FORBIDDEN_MODULES | {"runtime", "driver", "compiler", "backends", "testing"}
FORBIDDEN_CALLS = {
    "open": "file I/O", "eval": "eval", "exec": "exec", "compile": "compile()", "__import__": "__import__",
    "getattr": "getattr tricks", "setattr": "setattr tricks", "delattr": "delattr tricks",
    "globals": "globals()", "locals": "locals()", "vars": "vars()", "input": "input()",
    "breakpoint": "breakpoint()", "print": "print (I/O)", "exit": "exit()", "quit": "quit()",
    "memoryview": "memoryview", "id": "id() (identity caching)", "hash": "hash() (identity caching)",
}
STREAM_ATTRIBUTES = frozenset({"Stream", "ExternalStream", "set_stream", "current_stream", "stream",
                               "get_current_stream", "set_current_stream", "Event", "synchronize"})
ALLOWED_TRITON_ATTRIBUTES = frozenset({"jit", "cdiv", "next_power_of_2", "language", "Config", "constexpr",
                                       "heuristics", "autotune", "must_use_result"})
HEURISTIC_DECORATORS = frozenset({"pointwise", "reduction", "persistent_reduction", "template", "fixed_config",
                                  "user_autotune", "split_scan", "cooperative_reduction", "foreach"})
ALLOWED_DUNDER_NAMES = frozenset({"__file__", "__name__"})
TOP_LEVEL_CALLS = frozenset({"triton_helpers.set_driver_to_cpu", "triton_helpers.set_driver_to_gpu"})
GRID_TYPES = frozenset({"Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow", "BatchMatmulGrid3D",
                        "FixedGrid", "PrecomputedGrid", "CooperativeReductionGrid", "SplitScanGrid",
                        "MixOrderReductionGrid"})


_RULE_ORDER = ["syntax", "torch", "forbidden-import", "forbidden-call", "try-except", "global-state", "stream",
               "top-level", "contract"]


@dataclass
class StaticFinding:
    rule: str  # syntax, contract, forbidden-call, forbidden-import, torch, try-except, stream, global-state, ...
    message: str
    line: int | None = None  # 1-based line in the candidate source

    def describe(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "line": self.line}


@dataclass
class SourceReport:
    findings: list[StaticFinding] = field(default_factory=list)
    constexpr_params: list[str] = field(default_factory=list)
    runtime_params: list[str] = field(default_factory=list)
    heuristic: str | None = None
    uses_atomics: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings


def check_source(original_source: str, kernel_name: str, candidate_source: str) -> SourceReport:
    """The source half of gate 1: everything but the compile."""
    report = SourceReport()
    if len(candidate_source.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        report.findings.append(StaticFinding("size", f"the candidate is over {MAX_SOURCE_BYTES} bytes"))
        return report
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as exc:
        report.findings.append(StaticFinding("syntax", f"Python syntax error: {exc.msg}", exc.lineno))
        return report
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        report.findings.append(StaticFinding("syntax", f"not parseable Python source ({type(exc).__name__}: {exc})"))
        return report
    try:
        checker = _Checker(report)
        checker.check_module(tree)
        _check_contract(tree, original_source, kernel_name, report)
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
                               "uses_atomics": report.uses_atomics}
    if not report.ok:
        first = report.findings[0]
        more = f" (and {len(report.findings) - 1} more)" if len(report.findings) > 1 else ""
        return GateVerdict(1, "static", False, f"{kernel_name}: {first.describe()}{more}", numbers,
                           time.monotonic() - begin)
    if compiler is None:
        from .ptx_compile import shared_compiler

        compiler = shared_compiler()
    compiled = compiler.compile(kernel_name, candidate_source, timeout_s=compile_timeout_s)
    numbers["compile"] = compiled
    numbers["stage"] = compiled.get("stage")
    if not compiled.get("ok"):
        error = str(compiled.get("error") or "unknown error").strip()
        short = error.splitlines()[-1] if error else "unknown error"
        return GateVerdict(1, "static", False,
                           f"{kernel_name} does not compile for sm_90 (stopped at {compiled.get('stage')}): {short}",
                           numbers, time.monotonic() - begin)
    count = len(compiled.get("configs", []))
    return GateVerdict(1, "static", True,
                       f"{kernel_name}: source checks passed; {count} launch config(s) compiled to "
                       f"{compiled.get('stage')} for sm_90", numbers, time.monotonic() - begin)


# --- the source rules ------------------------------------------------------------------------


def _is_constant_expression(node: ast.AST) -> bool:
    """Immutable module-level values: numbers, strings, tuples of them, tl.constexpr(...)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(_is_constant_expression(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_constant_expression(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_constant_expression(node.left) and _is_constant_expression(node.right)
    if isinstance(node, ast.Call) and dotted_name(node.func) in ("tl.constexpr", "triton.language.constexpr"):
        return all(_is_constant_expression(a) for a in node.args) and not node.keywords
    return False


_MUTABLE_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)


class _Checker(ast.NodeVisitor):
    def __init__(self, report: SourceReport):
        self.report = report
        self.bound: set[str] = set()

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None) if node is not None else None
        self.report.findings.append(StaticFinding(rule, message, line))

    # module level
    def check_module(self, tree: ast.Module) -> None:
        self.bound = _bound_names(tree)
        for stmt in tree.body:
            self._check_top_level(stmt)
        self.visit(tree)

    def _check_top_level(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
            return  # checked by the visitor
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # a docstring
            if (isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) in TOP_LEVEL_CALLS
                    and not stmt.value.args and not stmt.value.keywords):
                return
            self.add("top-level", f"module-level expression `{_short(stmt)}` runs code at import; only "
                                  "imports, constants and @triton.jit functions are allowed", stmt)
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value = stmt.value
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                self.add("global-state", f"module-level assignment to `{_short(targets[0])}` (state shared "
                                         "between calls)", stmt)
                return
            if value is None or _is_constant_expression(value):
                return
            if isinstance(value, _MUTABLE_NODES) or (isinstance(value, ast.Call) and dotted_name(value.func) in (
                    "list", "dict", "set", "bytearray", "collections.defaultdict", "collections.OrderedDict")):
                self.add("global-state", f"global mutable state: module-level `{_short(stmt)}` can cache "
                                         "results between calls", stmt)
                return
            self.add("top-level", f"module-level assignment `{_short(stmt)}` is not a constant", stmt)
            return
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.add("try-except", "try/except fallback at module level", stmt)
            return
        if isinstance(stmt, ast.ClassDef):
            self.add("top-level", f"class {stmt.name}: a kernel module defines functions only", stmt)
            return
        if isinstance(stmt, ast.Global):
            return  # reported by the visitor
        self.add("top-level", f"module-level `{type(stmt).__name__}` statement is not allowed", stmt)

    # everywhere
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            # `import torch._inductor...` would bind `torch` itself: plain imports are Triton and math only.
            if alias.name not in ALLOWED_IMPORTS or alias.name.startswith("torch"):
                self.add("forbidden-import", f"import of `{alias.name}` is outside the allowlist "
                                             f"({_allowlist_text()})", node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("forbidden-import", "relative imports are not allowed", node)
            return
        if module not in ALLOWED_IMPORTS:
            self.add("forbidden-import", f"import from `{module}` is outside the allowlist ({_allowlist_text()})", node)
            return
        allowed = ALLOWED_IMPORTS[module]
        for alias in node.names:
            if alias.name == "*":
                self.add("forbidden-import", f"`from {module} import *` hides what the kernel uses", node)
            elif alias.name in FORBIDDEN_NAMES or (allowed is not None and alias.name not in allowed):
                self.add("forbidden-import", f"`from {module} import {alias.name}` is outside the allowlist", node)

    def visit_Try(self, node: ast.AST) -> None:
        self.add("try-except", "try/except fallback: a kernel may not catch its own failure and do "
                               "something else", node)
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global) -> None:
        self.add("global-state", f"`global {', '.join(node.names)}`: state shared between calls", node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add("global-state", f"`nonlocal {', '.join(node.names)}`: state shared between calls", node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.add("top-level", "lambda: a kernel module defines @triton.jit functions only", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store_target(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store_target(node.target, node)
        self.generic_visit(node)

    def _check_store_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            self.add("global-state", f"assignment to attribute `{_short(target)}` (function attributes used as "
                                     "a cache)", node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_store_target(element, node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for deco in node.decorator_list:
            name = dotted_name(deco.func if isinstance(deco, ast.Call) else deco) or ""
            if name not in ("triton.jit", "triton.heuristics", "triton.autotune") and not name.startswith(
                    "triton_heuristics."):
                self.add("contract", f"function {node.name} has decorator `{_short(deco)}`; only @triton.jit and "
                                     "the triton_heuristics decorators are allowed", deco)
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
            self.add("contract", f"function {node.name} takes *args/**kwargs/keyword-only parameters", node)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None and not _is_constant_expression(default):
                self.add("global-state", f"function {node.name} has a mutable default argument", default)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted_name(node.func)
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            pass  # reported by visit_Name
        elif name is not None and name.split(".")[-1].startswith("atomic_"):
            self.report.uses_atomics = True
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        ident = node.id
        if ident in FORBIDDEN_NAMES:
            self.add("torch", f"`{ident}` used inside the kernel module: a candidate is Triton only, with no "
                              "torch or vendor-library calls", node)
        elif not isinstance(node.ctx, ast.Load) or ident in self.bound:
            return  # a local variable that happens to share a builtin's name
        elif ident in FORBIDDEN_CALLS:
            self.add("forbidden-call", f"`{ident}` is not allowed ({FORBIDDEN_CALLS[ident]})", node)
        elif ident in FORBIDDEN_MODULES:
            self.add("forbidden-import", f"`{ident}` is not allowed in a kernel module", node)
        elif ident.startswith("__") and ident.endswith("__") and ident not in ALLOWED_DUNDER_NAMES:
            self.add("forbidden-call", f"`{ident}` (dunder names reach the interpreter's internals)", node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        chain = dotted_name(node)
        if attr.startswith("__") and attr.endswith("__"):
            self.add("forbidden-call", f"dunder attribute `.{attr}` (getattr tricks)", node)
        elif attr in FORBIDDEN_NAMES:
            self.add("torch", f"`{_short(node)}` reaches torch from inside the kernel module", node)
        elif attr in STREAM_ATTRIBUTES:
            self.add("stream", f"`{_short(node)}`: kernels launch on the stream the wrapper gives them; new "
                               "streams, events and synchronisation escape the timer", node)
        elif attr in FORBIDDEN_ATTRIBUTES:
            self.add("forbidden-import", f"`{_short(node)}` reaches `{attr}` from inside the kernel module", node)
        elif chain is not None and chain.startswith("triton.") and chain.count(".") == 1 \
                and attr not in ALLOWED_TRITON_ATTRIBUTES:
            self.add("forbidden-import", f"`{chain}` is outside the Triton kernel language", node)
        self.generic_visit(node)


def _bound_names(tree: ast.Module) -> set[str]:
    """Names the module assigns or takes as parameters (imports excluded)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
    return bound


def _short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _allowlist_text() -> str:
    return "triton, triton.language, math, torch._inductor.runtime.{triton_helpers, triton_heuristics, hints}, libdevice"


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


def _check_contract(tree: ast.Module, original_source: str, kernel_name: str, report: SourceReport) -> None:
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
            "`.run(..., stream=...)`, which that decorator provides", func)
    else:
        report.heuristic = heuristics[0].split(".", 1)[1]
        if report.heuristic not in HEURISTIC_DECORATORS:
            add(f"unknown launcher `@{heuristics[0]}` (use one of {', '.join(sorted(HEURISTIC_DECORATORS))})", func)
    if not decorators or decorators[-1] != "triton.jit":
        add(f"{kernel_name} must be decorated with @triton.jit directly above its def", func)
    try:
        original_tree = ast.parse(original_source)
    except SyntaxError:
        return  # nothing to compare against; the compile step decides
    original = _kernel_def(original_tree, kernel_name) or next(
        (n for n in original_tree.body if isinstance(n, ast.FunctionDef)), None)
    if original is None:
        return
    runtime = [a.arg for a in func.args.args if not _is_constexpr(a)]
    original_runtime = [a.arg for a in original.args.args if not _is_constexpr(a)]
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
                add(f"triton_meta['signature'] lists ({', '.join(signature)}) but the kernel takes "
                    f"({', '.join(order)})", func)
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
        grid_type = inductor_meta.get("grid_type")
        if report.heuristic != "template" and grid_type is not None and grid_type not in GRID_TYPES:
            add(f"unknown grid_type {grid_type!r} (use one of {', '.join(sorted(GRID_TYPES))})", func)
        wanted = set(original_meta.get("mutated_arg_names") or [])
        declared = set(inductor_meta.get("mutated_arg_names") or [])
        if wanted - declared:
            add(f"inductor_meta['mutated_arg_names'] drops {', '.join(sorted(wanted - declared))}: autotuning "
                "would run on the live buffers", func)
