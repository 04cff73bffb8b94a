"""Parse an Inductor ``output_code.py`` (or a cache-dir wrapper) without executing it.

The wrapper is read with :mod:`ast`; each embedded kernel source is parsed again on its own.
Every failure becomes a :class:`DumpError` naming the file and the problem: callers never see
another exception from here.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass, replace
from typing import Any

from .model import (
    BufferAlloc,
    CompiledGraph,
    DumpError,
    ExternCall,
    InputSpec,
    KernelKind,
    Launch,
    LaunchStyle,
    SourceRange,
    TritonKernel,
    source_hash,
)

MAX_DUMP_BYTES = 32 * 1024 * 1024  # real wrappers are a few MB at most; larger is not a dump
_KIND_BY_PREFIX: dict[str, KernelKind] = {
    "triton_poi_": "poi", "triton_red_": "red", "triton_per_": "per", "triton_tem_": "tem",
}
_KIND_BY_HEURISTIC: dict[str, KernelKind] = {
    "pointwise": "poi", "reduction": "red", "persistent_reduction": "per", "template": "tem",
}
_ALLOC_FUNCS = re.compile(r"^empty_strided(_\w+)?$")


def read_dump_text(path: str) -> str:
    """Read a dump file as text, refusing what cannot be one."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise DumpError(path, f"cannot read file: {exc.strerror or exc}") from None
    if size == 0:
        raise DumpError(path, "file is empty")
    if size > MAX_DUMP_BYTES:
        raise DumpError(
            path, f"file is {size / 2**20:.1f} MiB, over the {MAX_DUMP_BYTES / 2**20:.0f} MiB limit for a dump"
        )
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise DumpError(path, f"cannot read file: {exc.strerror or exc}") from None
    if b"\x00" in raw[:65536]:
        raise DumpError(path, "binary file (NUL bytes), not Python source")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DumpError(path, f"not UTF-8 text (byte {exc.start})") from None


def parse_output_code(path: str, text: str | None = None, name: str | None = None) -> CompiledGraph:
    """Parse one wrapper file into a :class:`CompiledGraph`."""
    if text is None:
        text = read_dump_text(path)
    try:
        return _Parser(path, text, name).parse()
    except DumpError:
        raise
    except RecursionError:
        raise DumpError(path, "source nests too deeply to parse") from None
    except Exception as exc:  # noqa: BLE001 - the parser's promise: only DumpError escapes
        raise DumpError(path, f"unexpected content ({type(exc).__name__}: {exc})") from None


def looks_like_wrapper(text: str) -> bool:
    return "async_compile" in text and ("def call(" in text or "def partition_" in text)


def looks_like_kernel_file(text: str) -> bool:
    return "@triton.jit" in text and "triton_heuristics" in text and "async_compile" not in text


@dataclass
class _Context:
    function: str


class _Parser:
    def __init__(self, path: str, text: str, name: str | None):
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.name = name or _default_graph_name(path)
        self.order = 0

    def parse(self) -> CompiledGraph:
        try:
            tree = _quiet_parse(self.text, self.path)
        except SyntaxError as exc:
            line = (exc.lineno or 1) - 1
            unclosed = any(word in (exc.msg or "") for word in ("unterminated", "was never closed", "unexpected EOF"))
            hint = " (the file looks truncated)" if unclosed or line >= len(self.lines) - 2 else ""
            raise DumpError(self.path, f"Python syntax error: {exc.msg}{hint}", line) from None
        if not looks_like_wrapper(self.text):
            raise DumpError(
                self.path,
                "not an Inductor wrapper: no async_compile kernels and no call()/partition_N() function",
            )
        graph = CompiledGraph(
            path=self.path, name=self.name, text_hash=source_hash(self.text),
            wrapper_style="unknown", device=None,
        )
        functions: dict[str, ast.FunctionDef] = {}
        runner_call: ast.FunctionDef | None = None
        for node in tree.body:
            if isinstance(node, ast.Assign):
                kernel = self._kernel_from_assign(node, graph)
                if kernel is not None:
                    graph.kernels.append(kernel)
            elif isinstance(node, ast.FunctionDef):
                functions[node.name] = node
            elif isinstance(node, ast.ClassDef) and node.name == "Runner":
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "call":
                        runner_call = item
        kernel_names = {k.name for k in graph.kernels}
        if runner_call is not None:
            graph.wrapper_style = "partitioned"
            self._walk_function(runner_call, "call", graph, kernel_names, functions)
        elif "call" in functions:
            graph.wrapper_style = "call"
            self._walk_function(functions["call"], "call", graph, kernel_names, functions)
        else:
            graph.warnings.append("no call() entry point found; launches not listed")
        for fname in ("get_args", "benchmark_compiled_module"):
            if fname in functions and not graph.inputs:
                graph.inputs = _input_specs(functions[fname])
        graph.device = _guess_device(graph)
        return graph

    # --- kernels ---------------------------------------------------------------------------

    def _kernel_from_assign(self, node: ast.Assign, graph: CompiledGraph) -> TritonKernel | None:
        call = node.value
        if not (isinstance(call, ast.Call) and dotted_name(call.func) == "async_compile.triton"):
            return None
        if not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            return None
        target = node.targets[0]
        name = target.id
        src_node = call.args[1] if len(call.args) > 1 else None
        if not (isinstance(src_node, ast.Constant) and isinstance(src_node.value, str)):
            graph.warnings.append(f"kernel {name}: source is not a string literal; skipped")
            return None
        source = src_node.value
        source_start = src_node.lineno - 1  # the line holding the opening quotes
        comments = self._comment_block_above(node.lineno - 1)
        device_str = None
        for kw in call.keywords:
            if kw.arg == "device_str" and isinstance(kw.value, ast.Constant):
                device_str = str(kw.value.value)
        kernel = TritonKernel(
            name=name, kind=_kind_from_name(name), source=source,
            name_range=SourceRange(target.lineno - 1, target.col_offset,
                                   target.lineno - 1, target.col_offset + len(name)),
            statement_range=SourceRange(node.lineno - 1, node.col_offset,
                                        (node.end_lineno or node.lineno) - 1, node.end_col_offset or 0),
            source_start_line=source_start, def_line=None, heuristic="unknown", signature=[],
            aten_ops=_bracket_list(comments, "Original ATen:"),
            source_nodes=_bracket_list(comments, "Topologically Sorted Source Nodes:"),
            kernel_path=_comment_value(comments, "kernel path:"), device_str=device_str,
        )
        _read_kernel_source(kernel, graph)
        return kernel

    def _comment_block_above(self, line: int) -> list[str]:
        block: list[str] = []
        index = line - 1
        while index >= 0 and self.lines[index].lstrip().startswith("#"):
            block.append(self.lines[index].lstrip()[1:].strip())
            index -= 1
        block.reverse()
        return block

    # --- wrapper functions -----------------------------------------------------------------

    def _walk_function(
        self, func: ast.FunctionDef, label: str, graph: CompiledGraph,
        kernel_names: set[str], functions: dict[str, ast.FunctionDef], depth: int = 0,
    ) -> None:
        ctx = _Context(label)
        for stmt in func.body:
            self._walk_statement(stmt, ctx, graph, kernel_names, functions, depth)

    def _walk_statement(
        self, stmt: ast.stmt, ctx: _Context, graph: CompiledGraph,
        kernel_names: set[str], functions: dict[str, ast.FunctionDef], depth: int,
    ) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            return
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            alloc = _buffer_alloc(stmt, ctx.function)
            if alloc is not None:
                graph.buffers.append(alloc)
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):
            reused = _buffer_reuse(stmt, graph.buffers)  # `buf4 = buf3; del buf3  # reuse`
            if reused is not None:
                graph.buffers.append(reused)
        for node in _calls_in_order(stmt):
            self._visit_call(node, ctx, graph, kernel_names, functions, depth)
        for child in _child_blocks(stmt):
            for inner in child:
                self._walk_statement(inner, ctx, graph, kernel_names, functions, depth)

    def _visit_call(
        self, node: ast.Call, ctx: _Context, graph: CompiledGraph,
        kernel_names: set[str], functions: dict[str, ast.FunctionDef], depth: int,
    ) -> None:
        func = node.func
        # kernel.run(...)
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
            if func.value.id in kernel_names:
                self._add_launch(graph, func.value, node, "run", None, ctx)
                return
        # kernel[grid(...)](...)
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
            if func.value.id in kernel_names:
                self._add_launch(graph, func.value, node, "grid", ast.unparse(func.slice), ctx)
                return
        # self.partitions[i](args) -> inline partition_i
        if isinstance(func, ast.Subscript) and dotted_name(func.value) == "self.partitions":
            index = func.slice.value if isinstance(func.slice, ast.Constant) and isinstance(func.slice.value, int) \
                else None
            target = functions.get(f"partition_{index}")
            if target is not None and depth < 4:
                self._walk_function(target, target.name, graph, kernel_names, functions, depth + 1)
            return
        dotted = dotted_name(func)
        if dotted is None:
            return
        if dotted.startswith("extern_kernels."):
            library = "extern_kernels"
        elif dotted.startswith(("aten.", "torch.ops.aten.")):
            library = "aten"
            dotted = dotted.removeprefix("torch.ops.")
        else:
            return
        graph.extern_calls.append(ExternCall(
            order=self._next_order(), op=dotted, library=library,
            args=[_unparse(a) for a in node.args],
            kwargs={kw.arg: _unparse(kw.value) for kw in node.keywords if kw.arg},
            line=node.lineno - 1, function=ctx.function,
        ))

    def _add_launch(
        self, graph: CompiledGraph, name_node: ast.Name, call: ast.Call, style: LaunchStyle,
        grid: str | None, ctx: _Context,
    ) -> None:
        args = [_unparse(a) for a in call.args]
        int_args: list[int] = []
        for arg in reversed(call.args):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
                int_args.insert(0, arg.value)
            else:
                break
        kwargs = {kw.arg: _unparse(kw.value) for kw in call.keywords if kw.arg}
        graph.launches.append(Launch(
            order=self._next_order(), kernel=name_node.id, style=style,
            args=args, kwargs=kwargs, int_args=int_args, grid=grid if grid is not None else kwargs.get("grid"),
            stream=kwargs.get("stream"),
            line=call.lineno - 1, function=ctx.function,
            name_range=SourceRange(name_node.lineno - 1, name_node.col_offset,
                                   name_node.lineno - 1, name_node.col_offset + len(name_node.id)),
        ))

    def _next_order(self) -> int:
        self.order += 1
        return self.order - 1


# --- kernel source --------------------------------------------------------------------------


_DEF_LINE = re.compile(r"^def \w+\(", re.MULTILINE)


def _kernel_header(source: str) -> str | None:
    """The source up to the end of the kernel's ``def`` line(s), with a ``pass`` body.

    Everything we read (decorator, signature) is above the body; parsing the body too would
    double the parser's cost on large graphs (see benchmarks/parse_speed.py).
    """
    match = _DEF_LINE.search(source)
    if match is None:
        return None
    index = match.start()
    while True:
        end = source.find("\n", index)
        line = source[index:] if end < 0 else source[index:end]
        if line.split("#", 1)[0].rstrip().endswith(":"):
            return source[:index + len(line)] + "\n    pass\n"
        if end < 0:
            return None
        index = end + 1


def _read_kernel_source(kernel: TritonKernel, graph: CompiledGraph) -> None:
    header = _kernel_header(kernel.source)
    try:
        tree = _quiet_parse(header, kernel.name) if header is not None else None
    except SyntaxError:
        tree = None
    try:
        if tree is None:  # the fast path did not apply: parse it all, and report what is wrong
            tree = _quiet_parse(kernel.source, kernel.name)
    except SyntaxError as exc:
        graph.warnings.append(f"kernel {kernel.name}: its source does not parse ({exc.msg})")
        return
    func = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel.name),
        next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None),
    )
    if func is None:
        graph.warnings.append(f"kernel {kernel.name}: no function in its source")
        return
    kernel.def_line = kernel.source_start_line + func.lineno - 1
    kernel.signature = [a.arg for a in func.args.args]
    for deco in func.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        dotted = dotted_name(deco.func) or ""
        # torch >= 2.2 writes @triton_heuristics.pointwise(...); older wrappers import the
        # heuristic and write @pointwise(...), with ``meta=`` for triton_meta.
        if dotted.startswith("triton_heuristics."):
            kernel.heuristic = dotted.split(".", 1)[1]
        elif dotted in _BARE_HEURISTICS:
            kernel.heuristic = dotted
        else:
            continue
        for kw in deco.keywords:
            if kw.arg is None:
                continue
            value = _literal(kw.value)
            if kw.arg == "size_hints" and isinstance(value, (list, tuple)):
                kernel.size_hints = _size_hints_from_list(list(value), kernel.heuristic)
            elif kw.arg == "size_hints" and isinstance(value, dict):
                kernel.size_hints = value
            elif kw.arg in ("triton_meta", "meta") and isinstance(value, dict):
                kernel.triton_meta = value
            elif kw.arg == "inductor_meta" and isinstance(value, dict):
                kernel.inductor_meta = value
            elif kw.arg != "filename":
                kernel.decorator_kwargs[kw.arg] = value
    if kernel.kind == "other" and kernel.heuristic in _KIND_BY_HEURISTIC:
        kernel.kind = _KIND_BY_HEURISTIC[kernel.heuristic]


_BARE_HEURISTICS = {"pointwise", "reduction", "persistent_reduction", "template", "foreach", "user_autotune",
                    "cooperative_reduction", "split_scan"}


def _size_hints_from_list(hints: list[Any], heuristic: str) -> dict[str, Any]:
    """Older Inductor wrote size_hints as a list in range-tree order (z, y, x, then r)."""
    reduces = heuristic in ("reduction", "persistent_reduction", "cooperative_reduction", "split_scan")
    n_pointwise = len(hints) - 1 if reduces and hints else len(hints)
    keys = list("zyx"[3 - n_pointwise:]) if 0 <= n_pointwise <= 3 else [f"d{i}" for i in range(n_pointwise)]
    if reduces and hints:
        keys.append("r")
    return dict(zip(keys, hints, strict=False))


def _quiet_parse(text: str, filename: str) -> ast.Module:
    """ast.parse without SyntaxWarnings (e.g. invalid escapes in a damaged file): problems are reported
    as DumpErrors or graph warnings, never as stray interpreter warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=filename)


def _kind_from_name(name: str) -> KernelKind:
    for prefix, kind in _KIND_BY_PREFIX.items():
        if name.startswith(prefix):
            return kind
    return "other"


def _literal(node: ast.AST) -> Any:
    """Evaluate the literal parts of decorator arguments; name what is not literal."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {
            _hashable(_literal(k)) if k is not None else "**": _literal(v)
            for k, v in zip(node.keys, node.values, strict=False)
        }
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Set):
        return {_hashable(_literal(e)) for e in node.elts}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return -value if isinstance(value, (int, float)) else f"-{value}"
    if isinstance(node, ast.Call):
        dotted = dotted_name(node.func)
        if dotted == "set" and not node.args:
            return set()
        if dotted == "DeviceProperties":
            return {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg}
    return ast.unparse(node)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


# --- wrapper helpers -----------------------------------------------------------------------


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def node_span(source: str, node: ast.expr | ast.stmt) -> tuple[int, int]:
    """The character offsets in ``source`` where ``node`` starts and ends (ast columns count UTF-8 bytes)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(line: int, col: int) -> int:
        text = lines[line - 1].encode("utf-8")[:col].decode("utf-8", errors="ignore")
        return offsets[line - 1] + len(text)

    assert node.end_lineno is not None and node.end_col_offset is not None  # ast.parse sets both
    start = at(node.lineno, node.col_offset)
    end = at(node.end_lineno, node.end_col_offset)
    return start, end


def _unparse(node: ast.AST) -> str:
    return ast.unparse(node)


def _calls_in_order(stmt: ast.stmt) -> list[ast.Call]:
    """Calls in a simple statement (not in nested blocks), outermost first, in source order."""
    if isinstance(stmt, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
        roots: list[ast.AST] = []
        if isinstance(stmt, ast.With):
            roots = [item.context_expr for item in stmt.items]
        elif isinstance(stmt, (ast.If, ast.While)):
            roots = [stmt.test]
        elif isinstance(stmt, ast.For):
            roots = [stmt.iter]
    else:
        roots = [stmt]
    calls: list[ast.Call] = []
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                calls.append(node)
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    return calls


def _child_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks: list[list[ast.stmt]] = []
    for attr in ("body", "orelse", "finalbody"):
        block = getattr(stmt, attr, None)
        if isinstance(block, list) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            blocks.append(block)
    for handler in getattr(stmt, "handlers", []) or []:
        blocks.append(handler.body)
    return blocks


def _buffer_reuse(stmt: ast.Assign, known: list[BufferAlloc]) -> BufferAlloc | None:
    """A new name for an allocation the wrapper reuses: the same memory, so the same metadata."""
    if not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)):
        return None
    source = next((b for b in reversed(known) if b.name == stmt.value.id), None)
    if source is None:
        return None
    return replace(source, name=stmt.targets[0].id, line=stmt.lineno - 1,
                               reuses=source.reuses or source.name)


def _buffer_alloc(stmt: ast.Assign, function: str) -> BufferAlloc | None:
    call = stmt.value
    assert isinstance(call, ast.Call)
    dotted = dotted_name(call.func) or ""
    if not _ALLOC_FUNCS.match(dotted.rsplit(".", 1)[-1]) or len(call.args) < 2:
        return None
    if not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    shape, stride = _literal(call.args[0]), _literal(call.args[1])
    kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    # empty_strided_cuda(shape, stride, dtype) or, in older wrappers, empty_strided(shape, stride,
    # device='cuda', dtype=torch.float32)
    dtype_node = call.args[2] if len(call.args) > 2 else kwargs.get("dtype")
    dtype = _unparse(dtype_node) if dtype_node is not None else ""
    device_node = kwargs.get("device")
    if dotted.startswith("empty_strided_"):
        device = dotted.rsplit("_", 1)[-1]
    elif isinstance(device_node, ast.Constant):
        device = str(device_node.value).split(":")[0]
    else:
        device = "unknown"
    return BufferAlloc(
        name=stmt.targets[0].id, shape=list(shape) if isinstance(shape, tuple) else [shape],
        stride=list(stride) if isinstance(stride, tuple) else [stride], dtype=dtype,
        device=device, line=stmt.lineno - 1, function=function,
    )


def _input_specs(func: ast.FunctionDef) -> list[InputSpec]:
    specs: list[InputSpec] = []
    for stmt in ast.walk(func):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        name = stmt.targets[0].id
        value = stmt.value
        if isinstance(value, ast.Call) and (dotted_name(value.func) or "").endswith("rand_strided"):
            shape = _literal(value.args[0]) if value.args else ()
            stride = _literal(value.args[1]) if len(value.args) > 1 else ()
            kwargs = {kw.arg: kw.value for kw in value.keywords if kw.arg}
            device = _literal(kwargs["device"]) if "device" in kwargs else None
            dtype = _unparse(kwargs["dtype"]) if "dtype" in kwargs else None
            specs.append(InputSpec(
                name=name, kind="tensor",
                shape=list(shape) if isinstance(shape, (tuple, list)) else [shape],
                stride=list(stride) if isinstance(stride, (tuple, list)) else [stride],
                dtype=dtype, device=str(device) if device is not None else None,
            ))
        elif isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
            specs.append(InputSpec(name=name, kind="int" if isinstance(value.value, int) else "float",
                                   value=value.value))
    return specs


def _guess_device(graph: CompiledGraph) -> str | None:
    for spec in graph.inputs:
        if spec.device:
            return spec.device.split(":")[0]
    for kernel in graph.kernels:
        if kernel.device_str:
            return kernel.device_str
    for buf in graph.buffers:
        if buf.device != "unknown":
            return buf.device
    return None


def _bracket_list(comments: list[str], label: str) -> list[str]:
    """Items of ``label [a, b, c]`` in the comment block (several labels may share one line)."""
    for comment in comments:
        at = comment.find(label)
        if at < 0:
            continue
        rest = comment[at + len(label):].strip()
        if rest.startswith("[") and "]" in rest:
            inner = rest[1:rest.index("]")]
            return [item.strip() for item in inner.split(",") if item.strip()]
    return []


def _comment_value(comments: list[str], label: str) -> str | None:
    for comment in comments:
        if comment.startswith(label):
            return comment[len(label):].strip() or None
    return None


def _default_graph_name(path: str) -> str:
    base = os.path.basename(path)
    parent = os.path.basename(os.path.dirname(path))
    return parent if base == "output_code.py" and parent else os.path.splitext(base)[0]
