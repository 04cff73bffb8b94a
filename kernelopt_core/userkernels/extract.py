"""A user kernel as a standalone kernel module, and a candidate module back into the user's file.

The *kernel module* of a kernel is what the optimizer rewrites and the gates check: the file's
Triton imports, the module-level constants the kernel uses, the ``@triton.jit`` helpers it calls
and the kernel itself with its decorators (autotune configs named by a module-level list are
written into the decorator). Everything else in the file (the wrapper, torch code, the harness)
stays the user's and is never part of a candidate.

Applying a candidate is the inverse: the kernel function (decorators included) is replaced, a
changed helper or constant is replaced, a new one is added above the kernel, and a new import is
added after the file's imports. Nothing else in the file changes. Pure ``ast`` and text.
"""

from __future__ import annotations

import ast
import builtins
import difflib
from dataclasses import dataclass, field

from .parse import Aliases

MODULE_HEADER = "# Kernel module of {kernel}, taken from {path} by KernelOPT."
CALLER_MARKER = "# kernelopt: the caller passes {names}"
_ALLOWED_IMPORT_MODULES = ("triton", "triton.language", "triton.language.extra", "triton.language.extra.cuda",
                           "triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "math")
_BUILTINS = frozenset(dir(builtins))


class ExtractError(ValueError):
    """The kernel cannot be taken out of its file as Triton code alone; the message says why."""


@dataclass
class Piece:
    kind: str  # import | constant | helper | kernel
    name: str
    first_line: int  # 0-based, whole lines
    last_line: int
    text: str


@dataclass
class KernelModule:
    kernel: str
    source: str
    pieces: list[Piece] = field(default_factory=list)
    inlined_configs: dict[str, str] = field(default_factory=dict)  # the list's text -> the name it had
    caller_passes: list[str] = field(default_factory=list)


def _module_nodes(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise ExtractError(f"the file does not parse: line {exc.lineno}: {exc.msg}") from None


def _lines_of(node: ast.stmt, lines: list[str]) -> tuple[int, int, str]:
    decorators: list[ast.expr] = getattr(node, "decorator_list", []) or []
    first = min([d.lineno for d in decorators] + [node.lineno]) - 1
    last = (node.end_lineno or node.lineno) - 1
    return first, last, "\n".join(lines[first:last + 1])


def _is_import_allowed(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(alias.name in _ALLOWED_IMPORT_MODULES for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and (node.module or "") in _ALLOWED_IMPORT_MODULES
    return False


def _bound_by_import(node: ast.stmt) -> set[str]:
    names: set[str] = set()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            names.add(alias.asname or alias.name.split(".")[0])
    return names


def _is_constant_value(node: ast.expr, aliases: Aliases) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_constant_value(e, aliases) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_constant_value(node.operand, aliases)
    if isinstance(node, ast.BinOp):
        return _is_constant_value(node.left, aliases) and _is_constant_value(node.right, aliases)
    if isinstance(node, ast.Call) and aliases.canonical(node.func) in ("tl.constexpr", "triton.Config"):
        return all(_is_constant_value(a, aliases) or isinstance(a, ast.Dict) for a in node.args)
    if isinstance(node, ast.Dict):
        return all(v is not None and _is_constant_value(v, aliases) for v in node.values)
    return False


def _used_names(func: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """Names a function's parameters and body read without binding them, and the names it binds
    (decorators are read apart: their autotune configs are written out)."""
    parts: list[ast.AST] = [func.args, *func.body]
    bound = {a.arg for a in func.args.args} | {a.arg for a in func.args.kwonlyargs}
    used: set[str] = set()
    for part in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name):
                used.add(node.id)
    return used - bound, bound


def extract_kernel_module(text: str, kernel: str, path: str = "<file>",
                          caller_passes: list[str] | None = None) -> KernelModule:
    """The standalone kernel module of ``kernel`` in ``text`` (raises :class:`ExtractError`)."""
    tree = _module_nodes(text)
    lines = text.splitlines()
    aliases = Aliases.of(tree)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    values: dict[str, ast.Assign] = {}
    imports: list[ast.stmt] = []
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and _is_import_allowed(node):
            imports.append(node)
            imported |= _bound_by_import(node)

    def is_jit(func: ast.FunctionDef) -> bool:
        return any(aliases.canonical(d.func if isinstance(d, ast.Call) else d) == "triton.jit"
                   for d in func.decorator_list)

    root = functions.get(kernel)
    if root is None or not is_jit(root):
        raise ExtractError(f"{path} defines no @triton.jit function named {kernel}")
    module = KernelModule(kernel=kernel, source="", caller_passes=list(caller_passes or []))
    order: list[str] = []  # helpers, callees first
    constants: list[str] = []
    pending = [kernel]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        func = functions[name]
        used, _ = _used_names(func)
        for deco in func.decorator_list:
            lambda_args = {a.arg for n in ast.walk(deco) if isinstance(n, ast.Lambda) for a in n.args.args}
            inlined = _configs_name(deco, aliases)  # written into the decorator, not kept as a constant
            used |= {n.id for n in ast.walk(deco) if isinstance(n, ast.Name) and n.id not in lambda_args
                     and n is not inlined}
        for ident in sorted(used):
            if ident in imported or ident in _BUILTINS or ident in seen:
                continue
            if ident in functions and is_jit(functions[ident]):
                pending.append(ident)
                if ident not in order:
                    order.append(ident)
            elif ident in values and _is_constant_value(values[ident].value, aliases):
                if ident not in constants:
                    constants.append(ident)
            elif ident in functions:
                raise ExtractError(f"{name} uses {ident}(), a plain Python function of the file (line "
                                   f"{functions[ident].lineno}); a kernel module holds Triton code only")
            else:
                where = f" (line {values[ident].lineno})" if ident in values else ""
                raise ExtractError(f"{name} uses `{ident}`{where}, which is not a Triton import, a constant or a "
                                   "@triton.jit function of the file; the optimizer works on Triton code alone")
    constants.sort(key=lambda n: values[n].lineno)
    parts = [MODULE_HEADER.format(kernel=kernel, path=path)]
    if module.caller_passes:
        parts.append(CALLER_MARKER.format(names=", ".join(module.caller_passes)))
    import_texts = []
    for node in imports:
        first, last, body = _lines_of(node, lines)
        import_texts.append(body)
        module.pieces.append(Piece("import", ast.unparse(node), first, last, body))
    if not any("triton.language" in t or " tl" in t for t in import_texts):
        import_texts.append("import triton.language as tl")
    if not any(t.startswith("import triton") and "language" not in t for t in import_texts):
        import_texts.insert(0, "import triton")
    sections = ["\n".join(parts), "\n".join(import_texts)]
    for name in constants:
        first, last, body = _lines_of(values[name], lines)
        module.pieces.append(Piece("constant", name, first, last, body))
        sections.append(body)
    helpers = [n for n in order if n != kernel]
    helpers.sort(key=lambda n: functions[n].lineno)
    for name in helpers:
        first, last, body = _lines_of(functions[name], lines)
        module.pieces.append(Piece("helper", name, first, last, body))
        sections.append(body)
    first, last, body = _lines_of(root, lines)
    body = _inline_configs(root, body, first, values, aliases, module, lines)
    module.pieces.append(Piece("kernel", kernel, first, last, body))
    sections.append(body)
    module.source = "\n\n\n".join(s.rstrip("\n") for s in sections if s.strip()) + "\n"
    return module


def _configs_name(deco: ast.expr, aliases: Aliases) -> ast.Name | None:
    """The ``NAME`` of ``@triton.autotune(configs=NAME, ...)``, if that is how the configs are given."""
    if not (isinstance(deco, ast.Call) and aliases.canonical(deco.func) == "triton.autotune"):
        return None
    node = next((kw.value for kw in deco.keywords if kw.arg == "configs"), deco.args[0] if deco.args else None)
    return node if isinstance(node, ast.Name) else None


def _inline_configs(func: ast.FunctionDef, body: str, first: int, values: dict[str, ast.Assign], aliases: Aliases,
                    module: KernelModule, lines: list[str]) -> str:
    """``configs=NAME`` of an autotune decorator becomes the literal list NAME holds."""
    for deco in func.decorator_list:
        if not (isinstance(deco, ast.Call) and aliases.canonical(deco.func) == "triton.autotune"):
            continue
        node = next((kw.value for kw in deco.keywords if kw.arg == "configs"), deco.args[0] if deco.args else None)
        if not (isinstance(node, ast.Name) and node.id in values):
            continue
        value = values[node.id].value
        if not isinstance(value, (ast.List, ast.Tuple)) or not _is_constant_value(value, aliases):
            raise ExtractError(f"the autotune configs {node.id} of {func.name} are not a literal list of "
                               "triton.Config(...); the optimizer needs them written out")
        literal_text = ast.get_source_segment("\n".join(lines), value) or ast.unparse(value)
        body_lines = body.split("\n")
        row = node.lineno - 1 - first
        line = body_lines[row]
        start, end = node.col_offset, node.end_col_offset or node.col_offset + len(node.id)
        body_lines[row] = line[:start] + literal_text + line[end:]
        module.inlined_configs[literal_text] = node.id
        body = "\n".join(body_lines)
    return body


# --- a candidate back into the user's file -----------------------------------------------------------


@dataclass(frozen=True)
class LineEdit:
    """Replace whole lines [first, last] (0-based; ``last = first - 1`` inserts before ``first``)."""

    first: int
    last: int
    new_text: str  # full lines, each ending with a newline
    old_text: str

    @property
    def is_insert(self) -> bool:
        return self.last < self.first


class ApplyError(ValueError):
    """The candidate cannot be put into the file (it has no such kernel, it does not parse, ...)."""


def candidate_edits(text: str, kernel: str, candidate: str, path: str = "<file>") -> list[LineEdit]:
    """The edits that put ``candidate`` (a kernel module) into the user's file ``text``."""
    try:
        current = extract_kernel_module(text, kernel, path)
    except ExtractError as exc:
        raise ApplyError(f"{kernel} cannot be located in {path} as it stands now: {exc}") from None
    try:
        new_tree = ast.parse(candidate)
    except SyntaxError as exc:
        raise ApplyError(f"the optimized module does not parse: line {exc.lineno}: {exc.msg}") from None
    new_lines = candidate.splitlines()
    new_functions = {n.name: n for n in new_tree.body if isinstance(n, ast.FunctionDef)}
    if kernel not in new_functions:
        raise ApplyError(f"the optimized module defines no function {kernel}")
    lines = text.splitlines()
    tree = _module_nodes(text)
    old_functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    old_values = {n.targets[0].id: n for n in tree.body
                  if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    kernel_piece = next(p for p in current.pieces if p.kind == "kernel")
    edits: list[LineEdit] = []
    inserts: list[str] = []

    def old_span(first: int, last: int) -> str:
        return "".join(line + "\n" for line in lines[first:last + 1])

    _, _, kernel_text = _lines_of(new_functions[kernel], new_lines)
    for literal_text, name in current.inlined_configs.items():
        if literal_text in kernel_text:
            kernel_text = kernel_text.replace(literal_text, name)  # the user's own configs list, unchanged
    if kernel_text.rstrip() != old_span(kernel_piece.first_line, kernel_piece.last_line).rstrip():
        edits.append(LineEdit(kernel_piece.first_line, kernel_piece.last_line, kernel_text.rstrip("\n") + "\n",
                              old_span(kernel_piece.first_line, kernel_piece.last_line)))
    for node in new_tree.body:
        if isinstance(node, ast.FunctionDef) and node.name != kernel:
            _, _, new_text = _lines_of(node, new_lines)
            old = old_functions.get(node.name)
            if old is None:
                inserts.append(new_text)
            else:
                first, last, old_text = _lines_of(old, lines)
                if old_text.rstrip() != new_text.rstrip():
                    edits.append(LineEdit(first, last, new_text.rstrip("\n") + "\n", old_span(first, last)))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            _, _, new_text = _lines_of(node, new_lines)
            old_node = old_values.get(name)
            if old_node is None:
                inserts.insert(0, new_text)
            else:
                first, last, old_text = _lines_of(old_node, lines)
                if old_text.rstrip() != new_text.rstrip():
                    edits.append(LineEdit(first, last, new_text.rstrip("\n") + "\n", old_span(first, last)))
    if inserts:
        block = "".join(t.rstrip("\n") + "\n\n\n" for t in inserts)
        edits.append(LineEdit(kernel_piece.first_line, kernel_piece.first_line - 1, block, ""))
    have = {ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    missing = [n for n in new_tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and ast.unparse(n) not in have]
    if missing:
        last_import = max((n.end_lineno or n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))),
                          default=0)
        block = "".join(ast.unparse(n) + "\n" for n in missing)
        edits.append(LineEdit(last_import, last_import - 1, block, ""))
    edits.sort(key=lambda e: (e.first, e.is_insert))
    for a, b in zip(edits, edits[1:], strict=False):
        if not a.is_insert and not b.is_insert and b.first <= a.last:
            raise ApplyError("the optimized module's pieces overlap in the file; apply it by hand")
    return edits


def apply_line_edits(text: str, edits: list[LineEdit]) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for edit in sorted(edits, key=lambda e: (e.first, not e.is_insert), reverse=True):
        new = edit.new_text.splitlines(keepends=True)
        if edit.is_insert:
            lines[edit.first:edit.first] = new
        else:
            lines[edit.first:edit.last + 1] = new
    return "".join(lines)


def apply_candidate(text: str, kernel: str, candidate: str, path: str = "<file>") -> str:
    return apply_line_edits(text, candidate_edits(text, kernel, candidate, path))


def unified_file_diff(old: str, new: str, label: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{label}", tofile=f"b/{label}"))


__all__ = ["ApplyError", "ExtractError", "KernelModule", "LineEdit", "apply_candidate", "apply_line_edits",
           "candidate_edits", "extract_kernel_module", "unified_file_diff"]
