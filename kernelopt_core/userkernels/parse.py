"""Find and read a project's ``@triton.jit`` functions without executing anything.

A ``.py`` file is read with :mod:`ast`: its jit functions (and their ``@triton.autotune`` /
``@triton.heuristics`` decorators), their loads, stores and ``tl.dot`` calls, the file's launch
sites ``kernel[grid](...)``, and ``# kernelopt: harness=NAME`` comments. Inductor's own files
(``async_compile`` wrappers, ``triton_heuristics`` kernel modules) are not user kernels.

:func:`parse_user_kernels` never raises anything but :class:`UserKernelError`.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.model import SourceFileError, SourceRange, source_hash
from ..artifacts.parse import dotted_name
from .model import (
    AccessKind,
    AccessSite,
    AutotuneSpec,
    ConfigSpec,
    DotSite,
    LaunchSite,
    UserKernel,
    UserKernelFile,
)

MAX_FILE_BYTES = 4 * 1024 * 1024  # a hand-written kernel file is far smaller
_DECORATOR = re.compile(r"^[ \t]*@[\w.]*\b(jit|autotune|heuristics)\b", re.MULTILINE)
_HARNESS = re.compile(r"#\s*kernelopt:\s*harness\s*=\s*(\S+)(?:\s+kernel\s*=\s*(\w+))?")
_CDIV_IDIOM = re.compile(r"\+[^/]*-\s*1\s*\)\s*//")
_LOW_PRECISION = re.compile(r"\.to\(\s*(tl\.)?(float16|bfloat16|float8\w*|fp16|bf16)")
ARANGE = "<arange>"  # a pseudo-dependency: the value depends on tl.arange (a block of offsets)
_ACCESS_MASK_POSITION = {"load": 1, "store": 2, "atomic": 2}


class UserKernelError(SourceFileError):
    """A file could not be read as Python; the message names the line."""


def looks_like_user_kernels(text: str) -> bool:
    """Could this Python text define its own Triton kernels? (cheap: no parse)"""
    if "triton" not in text or "async_compile" in text or "triton_heuristics" in text:
        return False  # Inductor's wrappers and kernel modules are read as dumps
    return bool(_DECORATOR.search(text))


def read_user_file(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise UserKernelError(path, f"file is {size / 2**20:.1f} MiB, too large to read as kernel source")
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise UserKernelError(path, f"cannot read file: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserKernelError(path, f"not UTF-8 text (byte {exc.start})") from None


def parse_user_kernels(path: str, text: str | None = None) -> UserKernelFile:
    """Every ``@triton.jit`` function of a Python file, and what stands around it."""
    if text is None:
        text = read_user_file(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise UserKernelError(path, f"Python syntax error: {exc.msg}", (exc.lineno or 1) - 1) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise UserKernelError(path, f"not parseable Python ({type(exc).__name__})") from None
    try:
        return _FileReader(path, text, tree).read()
    except RecursionError:
        raise UserKernelError(path, "source nests too deeply to read") from None
    except UserKernelError:
        raise
    except Exception as exc:  # noqa: BLE001 - the promise: only UserKernelError escapes
        raise UserKernelError(path, f"unexpected content ({type(exc).__name__}: {exc})") from None


# --- names ----------------------------------------------------------------------------------------


@dataclass
class Aliases:
    """How the file spells triton, triton.language and their decorators."""

    triton: set[str] = field(default_factory=lambda: {"triton"})
    language: set[str] = field(default_factory=lambda: {"tl", "triton.language"})
    bare: dict[str, str] = field(default_factory=dict)  # jit -> triton.jit, Config -> triton.Config, ...

    @classmethod
    def of(cls, tree: ast.Module) -> Aliases:
        aliases = cls()
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "triton":
                        aliases.triton.add(alias.asname or "triton")
                    elif alias.name == "triton.language":
                        aliases.language.add(alias.asname or "triton.language")
            elif isinstance(node, ast.ImportFrom) and node.module in ("triton", "triton.language") and not node.level:
                for alias in node.names:
                    local = alias.asname or alias.name
                    if node.module == "triton" and alias.name == "language":
                        aliases.language.add(local)
                    elif node.module == "triton":
                        aliases.bare[local] = f"triton.{alias.name}"
                    else:
                        aliases.bare[local] = f"tl.{alias.name}"
        return aliases

    def canonical(self, node: ast.AST) -> str | None:
        """``triton.jit`` / ``tl.load`` / ... whatever the file's spelling, else the dotted text."""
        name = dotted_name(node)
        if name is None:
            return None
        if name in self.bare:
            return self.bare[name]
        for prefix in sorted(self.language, key=len, reverse=True):
            if name.startswith(prefix + "."):
                return "tl." + name[len(prefix) + 1:]
        head, _, rest = name.partition(".")
        if head in self.triton and rest:
            if rest.startswith("language."):
                return "tl." + rest[len("language."):]
            return "triton." + rest
        return name


def _is_constexpr(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = dotted_name(annotation) or (annotation.value if isinstance(annotation, ast.Constant) else "")
    return isinstance(text, str) and text.split(".")[-1] == "constexpr"


def literal(node: ast.AST | None) -> Any:
    """A literal's value; otherwise the expression's text."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return ast.unparse(node)


def _is_literal(node: ast.AST | None) -> bool:
    if node is None:
        return True
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return False


# --- the file -------------------------------------------------------------------------------------


class _FileReader:
    def __init__(self, path: str, text: str, tree: ast.Module):
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.tree = tree
        self.aliases = Aliases.of(tree)
        self.module_values: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.module_values[node.targets[0].id] = node.value

    def read(self) -> UserKernelFile:
        out = UserKernelFile(path=self.path, text_hash=source_hash(self.text))
        functions = [n for n in self.tree.body if isinstance(n, ast.FunctionDef)]
        jitted = [f for f in functions if self._is_jit_function(f)]
        names = {f.name for f in jitted}
        kernels = [self._kernel(f, names) for f in jitted]
        launches = self._launch_sites(names)
        called = {helper for k in kernels for helper in k.helpers}
        for kernel in kernels:
            kernel.launches = launches.get(kernel.name, [])
            kernel.is_helper = kernel.name in called and not kernel.launches
            (out.helpers if kernel.is_helper else out.kernels).append(kernel)
        out.harness_functions = [f.name for f in functions if f.name not in names and _takes_no_arguments(f)]
        kernel_names = {k.name for k in out.kernels}
        uses = _NameUses(_module_definitions(self.tree))
        for function in functions:
            if function.name in out.harness_functions:
                out.harness_kernels[function.name] = sorted(uses.reached(function.name) & kernel_names)
                if _returns_pair(function):
                    out.pair_functions.append(function.name)
        self._harness_comments(out)
        return out

    def _is_jit_function(self, func: ast.FunctionDef) -> bool:
        return any(self._decorator_name(d) == "triton.jit" for d in func.decorator_list)

    def _decorator_name(self, node: ast.expr) -> str | None:
        return self.aliases.canonical(node.func if isinstance(node, ast.Call) else node)

    # --- one kernel ---------------------------------------------------------------------------

    def _kernel(self, func: ast.FunctionDef, jit_names: set[str]) -> UserKernel:
        first = min([d.lineno for d in func.decorator_list] + [func.lineno]) - 1
        last = (func.end_lineno or func.lineno) - 1
        def_text = self.lines[func.lineno - 1]
        match = re.search(rf"\bdef\s+({re.escape(func.name)})\b", def_text)
        col = match.start(1) if match else func.col_offset
        params = [a.arg for a in func.args.args]
        constexprs = [a.arg for a in func.args.args if _is_constexpr(a.annotation)]
        defaults = func.args.defaults
        default_of = dict(zip(params[len(params) - len(defaults):], defaults, strict=True)) if defaults else {}
        kernel = UserKernel(
            name=func.name, path=self.path,
            name_range=SourceRange(func.lineno - 1, col, func.lineno - 1, col + len(func.name)),
            statement_range=SourceRange(first, 0, last, len(self.lines[last]) if last < len(self.lines) else 0),
            def_line=func.lineno - 1, params=params, constexprs=constexprs,
            constexpr_defaults={p: literal(v) for p, v in default_of.items() if p in constexprs},
            decorators=[ast.unparse(d) for d in func.decorator_list],
            source="\n".join(self.lines[first:last + 1]) + "\n",
        )
        for deco in func.decorator_list:
            name = self._decorator_name(deco)
            if name == "triton.jit" and isinstance(deco, ast.Call):
                kernel.jit_options = {kw.arg: literal(kw.value) for kw in deco.keywords if kw.arg}
            elif name == "triton.autotune" and isinstance(deco, ast.Call):
                kernel.autotune = self._autotune(deco)
            elif name == "triton.heuristics" and isinstance(deco, ast.Call):
                values = deco.args[0] if deco.args else next((kw.value for kw in deco.keywords
                                                               if kw.arg == "values"), None)
                if isinstance(values, ast.Dict):
                    kernel.heuristics = [str(literal(k)) for k in values.keys if k is not None]
        _BodyReader(self, func, kernel, jit_names).read()
        kernel.accesses.sort(key=lambda a: (a.range.start_line, a.range.start_col))
        kernel.dots.sort(key=lambda d: (d.range.start_line, d.range.start_col))
        return kernel

    def _autotune(self, deco: ast.Call) -> AutotuneSpec:
        kwargs = {kw.arg: kw.value for kw in deco.keywords if kw.arg}
        configs = kwargs.get("configs", deco.args[0] if deco.args else None)
        key = kwargs.get("key", deco.args[1] if len(deco.args) > 1 else None)
        spec = AutotuneSpec(line=deco.lineno - 1, configs_source=ast.unparse(configs) if configs is not None else "",
                            options=sorted(k for k in kwargs if k not in ("configs", "key")))
        if key is not None:
            value = literal(key)
            spec.key = [str(v) for v in value] if isinstance(value, (list, tuple)) else None
            if spec.key is None:
                spec.options.append("key (not a literal list)")
        resolved = configs
        if isinstance(configs, ast.Name) and configs.id in self.module_values:
            resolved = self.module_values[configs.id]
        if isinstance(resolved, (ast.List, ast.Tuple)):
            for element in resolved.elts:
                config = self._config(element)
                if config is None:
                    spec.configs_literal = False
                else:
                    spec.configs.append(config)
                    spec.configs_literal &= config.literal
        else:
            spec.configs_literal = False
        return spec

    def _config(self, node: ast.expr) -> ConfigSpec | None:
        if not (isinstance(node, ast.Call) and self.aliases.canonical(node.func) == "triton.Config"):
            return None
        kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        meta = node.args[0] if node.args else kwargs.get("kwargs")
        positional = {name: node.args[i] for i, name in enumerate(("kwargs", "num_warps", "num_stages", "num_ctas"))
                      if i < len(node.args)}
        config = ConfigSpec(kwargs={}, line=node.lineno - 1)
        if isinstance(meta, ast.Dict):
            for k, v in zip(meta.keys, meta.values, strict=True):
                if k is None:
                    config.literal = False
                    continue
                config.kwargs[str(literal(k))] = literal(v)
                config.literal &= _is_literal(v)
        elif meta is not None:
            config.literal = False
        for option in ("num_warps", "num_stages", "num_ctas"):
            value_node = kwargs.get(option, positional.get(option))
            if value_node is None:
                continue
            value = literal(value_node)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(config, option, value)
            else:
                config.literal = False
        return config

    # --- launch sites ----------------------------------------------------------------------------

    def _launch_sites(self, jit_names: set[str]) -> dict[str, list[LaunchSite]]:
        found: dict[str, list[LaunchSite]] = {}

        def visit(body: list[ast.stmt], function: str | None, scope: dict[str, ast.expr]) -> None:
            for stmt in body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if stmt.name not in jit_names:
                        visit(stmt.body, stmt.name, {})
                    continue
                if isinstance(stmt, ast.ClassDef):
                    visit(stmt.body, None, {})
                    continue
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                            and isinstance(node.func.value, ast.Name) and node.func.value.id in jit_names:
                        found.setdefault(node.func.value.id, []).append(self._launch(node, function, scope))
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    scope[stmt.targets[0].id] = stmt.value

        visit(self.tree.body, None, {})
        return found

    def _launch(self, call: ast.Call, function: str | None, scope: dict[str, ast.expr]) -> LaunchSite:
        subscript = call.func
        assert isinstance(subscript, ast.Subscript) and isinstance(subscript.value, ast.Name)
        grid_node: ast.expr = subscript.slice
        if isinstance(grid_node, ast.Name) and grid_node.id in scope:
            grid_node = scope[grid_node.id]
        elif isinstance(grid_node, ast.Name) and grid_node.id in self.module_values:
            grid_node = self.module_values[grid_node.id]
        grid = ast.unparse(grid_node)
        name = subscript.value
        return LaunchSite(
            range=SourceRange(name.lineno - 1, name.col_offset, name.lineno - 1, name.col_offset + len(name.id)),
            function=function, grid=grid,
            grid_uses_cdiv="cdiv" in grid or bool(_CDIV_IDIOM.search(grid)),
            args=[ast.unparse(a) for a in call.args],
            kwargs={kw.arg: ast.unparse(kw.value) for kw in call.keywords if kw.arg},
        )

    # --- harness comments -------------------------------------------------------------------------

    def _harness_comments(self, out: UserKernelFile) -> None:
        for index, line in enumerate(self.lines):
            match = _HARNESS.search(line)
            if match is None or not line.lstrip().startswith("#"):
                continue
            harness, named = match.group(1), match.group(2)
            target = out.kernel(named) if named else self._kernel_below(out, index)
            if named and target is None:
                out.warnings.append(f"line {index + 1}: `# kernelopt: harness=` names kernel {named}, which this "
                                    "file does not define")
                continue
            if target is not None:
                target.harness = harness
            elif out.default_harness is None:
                out.default_harness = harness

    def _kernel_below(self, out: UserKernelFile, comment_line: int) -> UserKernel | None:
        """The kernel whose decorators start right under this comment (comment lines may stack)."""
        index = comment_line + 1
        while index < len(self.lines) and self.lines[index].lstrip().startswith("#"):
            index += 1
        return next((k for k in out.kernels if k.statement_range.start_line == index), None)


def _module_definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names and what they stand for: functions, classes, assigned values."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node.value
    return found


class _NameUses:
    """Which names each module-level definition uses (each read once), and their closure."""

    def __init__(self, definitions: dict[str, ast.AST]):
        self.definitions = definitions
        self._uses: dict[str, set[str]] = {}

    def uses(self, name: str) -> set[str]:
        if name not in self._uses:
            node = self.definitions.get(name)
            self._uses[name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()
        return self._uses[name]

    def reached(self, start: str) -> set[str]:
        """Every name the code of ``start`` uses, followed through the file's functions, classes (all their
        methods) and assigned values: what calling it can reach in this file."""
        seen: set[str] = set()
        todo = [start]
        while todo:
            for name in self.uses(todo.pop()) - seen:
                seen.add(name)
                if name in self.definitions:
                    todo.append(name)
        return seen


def _returns_pair(func: ast.FunctionDef) -> bool:
    """Does the function return a two-element tuple, as a harness's ``(callable, inputs)``?"""
    return any(isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2
               for node in ast.walk(func))


def _takes_no_arguments(func: ast.FunctionDef) -> bool:
    args = func.args
    required = len(args.args) - len(args.defaults)
    return required == 0 and not args.posonlyargs and not any(d is None for d in args.kw_defaults)


# --- one kernel body -------------------------------------------------------------------------------


class _BodyReader:
    """Loads, stores, dots and helper calls of one jit function, with a rough data flow: which
    parameters (and whether a ``tl.arange`` block) each local name depends on."""

    def __init__(self, reader: _FileReader, func: ast.FunctionDef, kernel: UserKernel, jit_names: set[str]):
        self.reader = reader
        self.func = func
        self.kernel = kernel
        self.jit_names = jit_names
        self.params = set(kernel.params)
        self.deps: dict[str, set[str]] = {p: {p} for p in kernel.params}
        self.block_pointers: set[str] = set()
        self.low_precision: set[str] = set()

    def read(self) -> None:
        self._data_flow()
        for node in ast.walk(self.func):
            if not isinstance(node, ast.Call):
                continue
            name = self.reader.aliases.canonical(node.func) or ""
            if name in ("tl.load", "tl.store") or name.startswith("tl.atomic_"):
                self._access(node, "load" if name == "tl.load" else "store" if name == "tl.store" else "atomic")
            elif name == "tl.dot":
                self._dot(node)
            elif isinstance(node.func, ast.Name) and node.func.id in self.jit_names and node.func.id != self.func.name:
                if node.func.id not in self.kernel.helpers:
                    self.kernel.helpers.append(node.func.id)

    def _data_flow(self) -> None:
        assigns: list[tuple[list[str], ast.expr]] = []
        for node in ast.walk(self.func):
            if isinstance(node, ast.Assign):
                targets = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                assigns.append((targets, node.value))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None \
                    and isinstance(node.target, ast.Name):
                assigns.append(([node.target.id], node.value))
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                assigns.append(([node.target.id], node.iter))
        for _ in range(4):  # a few passes reach a fixed point for straight-line kernels
            changed = False
            for targets, value in assigns:
                deps = self.expression_deps(value)
                canonical = self.reader.aliases.canonical(value.func) if isinstance(value, ast.Call) else None
                for target in targets:
                    before = self.deps.get(target, set())
                    after = before | deps
                    if after != before:
                        self.deps[target] = after
                        changed = True
                    if canonical in ("tl.make_block_ptr", "tl.advance") or (
                            isinstance(value, ast.Name) and value.id in self.block_pointers):
                        self.block_pointers.add(target)
                    if _LOW_PRECISION.search(ast.unparse(value)):
                        self.low_precision.add(target)
            if not changed:
                break

    def expression_deps(self, node: ast.AST) -> set[str]:
        deps: set[str] = set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                deps |= self.deps.get(inner.id, set())
            elif isinstance(inner, ast.Call) and self.reader.aliases.canonical(inner.func) == "tl.arange":
                deps.add(ARANGE)
        return deps

    def _range(self, node: ast.expr | ast.stmt) -> SourceRange:
        return SourceRange(node.lineno - 1, node.col_offset, (node.end_lineno or node.lineno) - 1,
                           node.end_col_offset or 0)

    def _access(self, call: ast.Call, kind: AccessKind) -> None:
        if not call.args:
            return
        pointer = call.args[0]
        kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        position = _ACCESS_MASK_POSITION["atomic" if kind == "atomic" else kind]
        mask = kwargs.get("mask", call.args[position] if len(call.args) > position else None)
        other = kwargs.get("other", call.args[2] if kind == "load" and len(call.args) > 2 else None)
        block = isinstance(pointer, ast.Name) and pointer.id in self.block_pointers or (
            isinstance(pointer, ast.Call) and self.reader.aliases.canonical(pointer.func) in (
                "tl.make_block_ptr", "tl.advance"))
        if block:
            masked = "boundary_check" in kwargs or (kind == "load" and len(call.args) > 2)
        else:
            masked = mask is not None and not (isinstance(mask, ast.Constant) and mask.value is None)
        deps = self.expression_deps(pointer)
        self.kernel.accesses.append(AccessSite(
            kind=kind, range=self._range(call), pointer=ast.unparse(pointer),
            params=sorted(d for d in deps if d in self.params), masked=masked,
            mask=ast.unparse(mask) if mask is not None else None,
            other=ast.unparse(other) if other is not None else None, block_pointer=block,
            function=self.func.name, block=ARANGE in deps or block,
        ))

    def _dot(self, call: ast.Call) -> None:
        kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        precision = kwargs.get("input_precision", kwargs.get("allow_tf32", call.args[3] if len(call.args) > 3 else None))
        operands = call.args[:2]
        low = bool(operands) and all(
            bool(_LOW_PRECISION.search(ast.unparse(o))) or (isinstance(o, ast.Name) and o.id in self.low_precision)
            for o in operands)
        self.kernel.dots.append(DotSite(range=self._range(call), operands=[ast.unparse(o) for o in operands],
                                        precision=ast.unparse(precision) if precision is not None else None,
                                        low_precision_operands=low))
