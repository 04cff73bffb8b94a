"""The artifact model: what Inductor wrote, as plain data.

Line and column numbers are 0-based throughout (as in LSP); ``SourceRange.end_*`` is exclusive.
Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

KernelKind = Literal["poi", "red", "per", "tem", "other"]
KERNEL_KINDS: tuple[KernelKind, ...] = ("poi", "red", "per", "tem", "other")
LaunchStyle = Literal["run", "grid"]


def source_hash(text: str) -> str:
    """The identity of a kernel's source, used by caches, memory and the accepted-kernel store."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SourceRange:
    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        if line < self.start_line or line > self.end_line:
            return False
        if line == self.start_line and col < self.start_col:
            return False
        return not (line == self.end_line and col >= self.end_col)


@dataclass
class TritonKernel:
    """One ``async_compile.triton('name', '''source''')`` in a wrapper."""

    name: str
    kind: KernelKind
    source: str
    # Where the name is assigned (``name = async_compile.triton(``), the whole statement, and the
    # kernel's ``def`` line inside the embedded source, all in dump-file coordinates.
    name_range: SourceRange
    statement_range: SourceRange
    source_start_line: int  # dump line of the embedded source's first line
    def_line: int | None
    heuristic: str  # pointwise, reduction, persistent_reduction, template, ...
    signature: list[str]
    size_hints: dict[str, Any] = field(default_factory=dict)
    triton_meta: dict[str, Any] = field(default_factory=dict)
    inductor_meta: dict[str, Any] = field(default_factory=dict)
    decorator_kwargs: dict[str, Any] = field(default_factory=dict)
    aten_ops: list[str] = field(default_factory=list)
    source_nodes: list[str] = field(default_factory=list)
    kernel_path: str | None = None  # the "# kernel path:" comment (the cache-dir kernel file)
    kernel_file: str | None = None  # that file, where discovery found it on disk
    device_str: str | None = None

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)

    @property
    def line_range(self) -> tuple[int, int]:
        """0-based first and last line of the statement in the dump file."""
        return (self.statement_range.start_line, self.statement_range.end_line)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "heuristic": self.heuristic,
            "source": self.source,
            "source_hash": self.source_hash,
            "aten_ops": self.aten_ops,
            "source_nodes": self.source_nodes,
            "line_range": list(self.line_range),
            "def_line": self.def_line,
            "signature": self.signature,
            "size_hints": _jsonable(self.size_hints),
            "triton_meta": _jsonable(self.triton_meta),
            "inductor_meta": _jsonable(self.inductor_meta),
            "kernel_path": self.kernel_path,
            "kernel_file": self.kernel_file,
        }


@dataclass
class Launch:
    """A Triton kernel launch in the wrapper, in call order."""

    order: int  # position among all launches and extern calls of the graph
    kernel: str
    style: LaunchStyle
    args: list[str]
    kwargs: dict[str, str]
    int_args: list[int]  # trailing integer literals: numels, or the grid of a template
    grid: str | None  # the grid expression of ``kernel[grid](...)`` launches
    stream: str | None
    line: int
    function: str  # the wrapper function it stands in (call, partition_0, ...)
    name_range: SourceRange | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["type"] = "triton"
        data.pop("name_range")
        return data


@dataclass
class ExternCall:
    """A vendor-library or ATen fallback call kept by Inductor (cuBLAS, cuDNN, ...)."""

    order: int
    op: str  # e.g. "extern_kernels.mm", "aten.convolution.default"
    library: str  # "extern_kernels" or "aten"
    args: list[str]
    kwargs: dict[str, str]
    line: int
    function: str

    @property
    def short_op(self) -> str:
        parts = self.op.split(".")
        if parts[0] == "extern_kernels":
            return parts[1] if len(parts) > 1 else self.op
        # aten.convolution.default -> convolution
        return parts[1] if len(parts) > 1 else self.op

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["type"] = "extern"
        data["short_op"] = self.short_op
        return data


@dataclass
class BufferAlloc:
    name: str
    shape: list[Any]
    stride: list[Any]
    dtype: str
    device: str
    line: int
    function: str
    reuses: str | None = None  # the allocation this name reuses (`buf4 = buf3; del buf3  # reuse`)


@dataclass
class InputSpec:
    """One argument of the compiled graph, from ``get_args``/``benchmark_compiled_module``."""

    name: str
    kind: Literal["tensor", "int", "float", "other"]
    shape: list[Any] = field(default_factory=list)
    stride: list[Any] = field(default_factory=list)
    dtype: str | None = None
    device: str | None = None
    value: Any = None  # for symbolic ints and scalars

    @property
    def numel(self) -> int | None:
        total = 1
        for dim in self.shape:
            if not isinstance(dim, int):
                return None
            total *= dim
        return total

    @property
    def nbytes(self) -> int | None:
        numel = self.numel
        size = DTYPE_BYTES.get(self.dtype or "")
        return None if numel is None or size is None else numel * size


DTYPE_BYTES = {
    "torch.float32": 4, "torch.float": 4, "torch.float16": 2, "torch.half": 2, "torch.bfloat16": 2,
    "torch.float64": 8, "torch.double": 8, "torch.int64": 8, "torch.long": 8, "torch.int32": 4,
    "torch.int": 4, "torch.int16": 2, "torch.int8": 1, "torch.uint8": 1, "torch.bool": 1,
    "torch.float8_e4m3fn": 1, "torch.float8_e5m2": 1,
}


@dataclass
class CompiledGraph:
    """One compiled graph: a wrapper module Inductor wrote, and what stands beside it."""

    path: str
    name: str
    text_hash: str
    wrapper_style: Literal["partitioned", "call", "unknown"]
    device: str | None
    kernels: list[TritonKernel] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    extern_calls: list[ExternCall] = field(default_factory=list)
    buffers: list[BufferAlloc] = field(default_factory=list)
    inputs: list[InputSpec] = field(default_factory=list)
    fx_graph_runnable: str | None = None
    ir_post_fusion: str | None = None
    warnings: list[str] = field(default_factory=list)

    def kernel(self, name: str) -> TritonKernel | None:
        return next((k for k in self.kernels if k.name == name), None)

    def kernel_sources(self, names: Iterable[str]) -> dict[str, str]:
        """Each named kernel's source; :class:`MissingKernel` for a name the graph has no kernel of."""
        sources = {}
        for name in names:
            kernel = self.kernel(name)
            if kernel is None:
                raise MissingKernel(name)
            sources[name] = kernel.source
        return sources

    def timeline(self) -> list[Launch | ExternCall]:
        """Triton launches and extern calls together, in call order."""
        return sorted([*self.launches, *self.extern_calls], key=lambda item: item.order)

    def launches_of(self, kernel_name: str) -> list[Launch]:
        return [launch for launch in self.launches if launch.kernel == kernel_name]

    def kernel_at(self, line: int, col: int) -> TritonKernel | None:
        """The kernel whose name, statement or launch covers a position (for hovers and actions)."""
        for kernel in self.kernels:
            if kernel.statement_range.contains(line, col) or kernel.name_range.contains(line, col):
                return kernel
        for launch in self.launches:
            if launch.name_range is not None and launch.name_range.contains(line, col):
                return self.kernel(launch.kernel)
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "wrapper_style": self.wrapper_style,
            "device": self.device,
            "kernels": [k.to_json() for k in self.kernels],
            "extern_calls": [c.to_json() for c in self.extern_calls],
            "launches": [item.to_json() for item in self.timeline()],
            "buffers": [asdict(b) for b in self.buffers],
            "inputs": [asdict(i) for i in self.inputs],
            "fx_graph_runnable": self.fx_graph_runnable,
            "ir_post_fusion": self.ir_post_fusion,
            "warnings": self.warnings,
        }


class SourceFileError(Exception):
    """A source file that could not be read: its path, the problem and the 0-based line, when known."""

    def __init__(self, path: str, problem: str, line: int | None = None):
        self.path = path
        self.problem = problem
        self.line = line
        where = f"{path}:{line + 1}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class MissingKernel(LookupError):
    """A graph has no kernel of this name."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"no kernel {name}")


class DumpError(SourceFileError):
    """A dump file could not be read. The only exception the parser raises."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, set):
        return sorted((_jsonable(v) for v in value), key=str)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
