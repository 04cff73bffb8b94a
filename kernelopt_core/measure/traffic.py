"""Ideal bytes: the traffic a kernel launch or a graph cannot avoid, and what it says against the
bytes and time measured. Pure arithmetic: no torch (workers, the CLI and the editor use it alike).

* **Per launch:** every distinct tensor the launch reads, once, plus every tensor it writes, once. A
  tensor's bytes are its stride-aware storage extent, ``(1 + sum((size - 1) * |stride|)) * itemsize``,
  so a broadcast bias (stride 0) counts its real size and a transposed view its whole storage. Read or
  written comes from the kernel source (:func:`kernelopt_core.artifacts.kernel_arguments.argument_roles`);
  aliasing arguments count once per direction (the byte ranges of one storage are merged).
* **Per graph:** its inputs (parameters included) and its outputs, each once; intermediates the graph
  could keep on chip do not count.
* **Traffic ratio** = measured DRAM bytes (ncu ``dram__bytes_read.sum + dram__bytes_write.sum``) /
  ideal bytes. **Speed of light %** = ideal bytes / (kernel time x the copy bandwidth measured on
  the device), 100% being the time the unavoidable traffic takes at the device's copy peak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.model import DTYPE_BYTES
from ..json_records import JsonRecord, known_fields

CAPTURED = "captured launch arguments"
STATIC = "the wrapper's allocations (static, not run)"
READ_ROLES = ("input", "inout")
WRITE_ROLES = ("output", "inout")


def storage_extent_bytes(shape: Iterable[int], stride: Iterable[int], itemsize: int) -> int:
    """Bytes between a view's first and last element, inclusive: what its storage spans."""
    sizes, strides = list(shape), list(stride)
    if any(size == 0 for size in sizes):
        return 0
    span = 1 + sum((size - 1) * abs(step) for size, step in zip(sizes, strides, strict=False))
    return span * itemsize


@dataclass
class LaunchArg(JsonRecord):
    """One argument of a kernel launch as the worker saw it (tensors: metadata only, never data)."""

    name: str  # the kernel's parameter name (in_ptr0, out_ptr1, xnumel, ...), or argN past them
    position: int
    role: str = "input"  # input | output | inout (tensors), scalar (everything else)
    shape: list[int] | None = None
    stride: list[int] | None = None
    dtype: str | None = None  # "torch.float32"
    storage_bytes: int | None = None  # the stride-aware extent of this view
    storage: str | None = None  # identifies the underlying allocation: equal for aliasing views
    offset_bytes: int = 0  # where this view starts inside that allocation
    value: Any = None  # scalars: the value passed (ints and floats; other objects as text)

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def evidence_json(self) -> dict[str, Any]:
        """The keys rewrite families read (``RewriteContext.evidence["launch_args"]``)."""
        return {"name": self.name, "role": self.role, "shape": self.shape, "stride": self.stride,
                "dtype": self.dtype, "storage_bytes": self.storage_bytes}


@dataclass
class IdealBytes:
    read_bytes: int
    write_bytes: int
    source: str = ""  # where the sizes came from: captured launch arguments, the wrapper's allocations

    @property
    def total(self) -> int:
        return self.read_bytes + self.write_bytes

    def to_json(self) -> dict[str, Any]:
        return {"read_bytes": self.read_bytes, "write_bytes": self.write_bytes, "total": self.total,
                "source": self.source}


def _merged_bytes(args: Iterable[LaunchArg]) -> int:
    """Bytes covered by the views, each allocation's byte ranges merged (aliases count once)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for arg in args:
        extent = arg.storage_bytes or 0
        if extent <= 0:
            continue
        key = arg.storage or f"arg:{arg.position}:{arg.name}"
        ranges.setdefault(key, []).append((arg.offset_bytes, arg.offset_bytes + extent))
    total = 0
    for spans in ranges.values():
        spans.sort()
        start, end = spans[0]
        for low, high in spans[1:]:
            if low > end:
                total += end - start
                start, end = low, high
            else:
                end = max(end, high)
        total += end - start
    return total


def launch_ideal_bytes(args: Iterable[LaunchArg], source: str = CAPTURED) -> IdealBytes:
    """Every distinct tensor read once plus every tensor written once (see the module docstring)."""
    tensors = [a for a in args if a.is_tensor]
    return IdealBytes(read_bytes=_merged_bytes(a for a in tensors if a.role in READ_ROLES),
                      write_bytes=_merged_bytes(a for a in tensors if a.role in WRITE_ROLES), source=source)


def graph_ideal_bytes(inputs: Iterable[LaunchArg], outputs: Iterable[LaunchArg],
                      source: str = "graph inputs and outputs") -> IdealBytes:
    """A graph's inputs (parameters included) read once and its outputs written once.

    An output that is one of the inputs (the graph returns an input or a view of it) needs no write.
    """
    inputs = [a for a in inputs if a.is_tensor]
    input_storages = {a.storage for a in inputs if a.storage}
    outputs = [a for a in outputs if a.is_tensor and not (a.storage and a.storage in input_storages)]
    return IdealBytes(read_bytes=_merged_bytes(inputs), write_bytes=_merged_bytes(outputs), source=source)


def name_and_role(args: list[LaunchArg], kernel_source: str, kernel_name: str,
                  mutated: list[str] | None = None) -> list[LaunchArg]:
    """Names the positional arguments after the kernel's runtime parameters and gives each its role
    (shared with gate 2: :func:`kernelopt_core.artifacts.kernel_arguments.argument_roles`)."""
    from ..artifacts.kernel_arguments import argument_roles, runtime_parameters

    params = runtime_parameters(kernel_source, kernel_name)
    roles = argument_roles(kernel_source, kernel_name, list(mutated or []))
    for arg in args:
        if arg.position < len(params):
            arg.name = params[arg.position]
        arg.role = roles.get(arg.name, "input") if arg.is_tensor else "scalar"
    return args


def numel_args(args: Iterable[LaunchArg]) -> dict[str, int]:
    """The integer scalars the launch passed by name (xnumel, r0_numel, ks0, ...)."""
    return {a.name: int(a.value) for a in args
            if not a.is_tensor and isinstance(a.value, int) and not isinstance(a.value, bool)}


# --- what the bytes say against the measurements ---------------------------------------------


@dataclass
class SpeedOfLight(JsonRecord):
    """One kernel's (or graph's) ideal bytes against its measured bytes and time."""

    ideal_bytes: int | None = None
    ideal_read_bytes: int | None = None
    ideal_write_bytes: int | None = None
    ideal_source: str | None = None
    dram_bytes: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    traffic_ratio: float | None = None
    sol_pct: float | None = None
    duration_ms: float | None = None
    duration_source: str | None = None  # "ncu", or which timer
    copy_bytes_per_s: float | None = None
    unknown_reason: str | None = None  # why sol_pct is None
    traffic_unknown_reason: str | None = None  # why traffic_ratio is None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SpeedOfLight:
        return cls(**known_fields(cls, data or {}))

    def phrase(self) -> str:
        """e.g. ``65% of speed of light · reads 1.5× the minimum``; "" when nothing is known."""
        return sol_phrase(self.sol_pct, self.traffic_ratio, self.dram_read_bytes, self.dram_write_bytes,
                          self.ideal_read_bytes, self.ideal_write_bytes)


def speed_of_light_pct(ideal_bytes: float, duration_ms: float, copy_bytes_per_s: float) -> float:
    """Ideal bytes / (time x copy bandwidth), in percent."""
    return 100.0 * ideal_bytes / (duration_ms / 1000.0 * copy_bytes_per_s)


def speed_of_light(ideal: IdealBytes | None, *, duration_ms: float | None, duration_source: str | None,
                   copy_bytes_per_s: float | None, dram_read_bytes: float | None = None,
                   dram_write_bytes: float | None = None, cpu: bool = False,
                   ideal_unknown_reason: str | None = None) -> SpeedOfLight:
    """The figures, each None with its reason when an input is missing."""
    sol = SpeedOfLight(duration_ms=duration_ms, duration_source=duration_source,
                       copy_bytes_per_s=copy_bytes_per_s, dram_read_bytes=dram_read_bytes,
                       dram_write_bytes=dram_write_bytes)
    if ideal is not None:
        sol.ideal_bytes, sol.ideal_read_bytes = ideal.total, ideal.read_bytes
        sol.ideal_write_bytes, sol.ideal_source = ideal.write_bytes, ideal.source
    if dram_read_bytes is not None and dram_write_bytes is not None:
        sol.dram_bytes = dram_read_bytes + dram_write_bytes
    if cpu:
        sol.unknown_reason = ("unknown: the CPU backend has no hardware counters and no measured copy "
                              "bandwidth (times are Triton-interpreter wall clock)")
        sol.traffic_unknown_reason = "unknown: no DRAM counters on the CPU backend"
        return sol
    if sol.dram_bytes is None:
        sol.traffic_unknown_reason = "unknown: no ncu DRAM byte counters for this kernel"
    elif not sol.ideal_bytes:
        sol.traffic_unknown_reason = ideal_unknown_reason or "unknown: ideal bytes not known"
    else:
        sol.traffic_ratio = sol.dram_bytes / sol.ideal_bytes
    if not sol.ideal_bytes:
        sol.unknown_reason = ideal_unknown_reason or ("unknown: no launch arguments were captured, so the "
                                                      "ideal bytes are not known")
    elif not duration_ms or duration_ms <= 0:
        sol.unknown_reason = "unknown: no kernel time (neither ncu nor a timed run)"
    elif not copy_bytes_per_s or copy_bytes_per_s <= 0:
        sol.unknown_reason = "unknown: no measured copy bandwidth for this device"
    else:
        sol.sol_pct = speed_of_light_pct(sol.ideal_bytes, duration_ms, copy_bytes_per_s)
    return sol


def sol_phrase(sol_pct: float | None, traffic_ratio: float | None, dram_read: float | None = None,
               dram_write: float | None = None, ideal_read: float | None = None,
               ideal_write: float | None = None) -> str:
    """``65% of speed of light · reads 1.5× the minimum`` (either half alone when the other is unknown)."""
    parts = []
    if sol_pct is not None:
        parts.append(f"{sol_pct:.0f}% of speed of light")
    if traffic_ratio is not None:
        verb = "moves"
        if dram_read is not None and dram_write is not None and ideal_read is not None and ideal_write is not None:
            extra_read = float(dram_read) - float(ideal_read)
            extra_write = float(dram_write) - float(ideal_write)
            verb = "reads" if extra_read >= extra_write else "writes"
        parts.append(f"{verb} {traffic_ratio:.1f}× the minimum")
    return " · ".join(parts)


def bytes_text(value: float | None) -> str:
    """1,234,567,890 -> '1.23 GB' (decimal units, as bandwidths are quoted)."""
    if value is None:
        return "n/a"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


@dataclass
class LaunchTraffic:
    """A launch's arguments and ideal bytes, as the launch-timing task returns them per launch order."""

    order: int
    kernel: str
    args: list[LaunchArg] = field(default_factory=list)
    source: str = CAPTURED

    @property
    def ideal(self) -> IdealBytes:
        return launch_ideal_bytes(self.args, self.source)

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order, "kernel": self.kernel, "args": [a.to_json() for a in self.args],
                "ideal": self.ideal.to_json(), "source": self.source}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchTraffic:
        return cls(order=int(data["order"]), kernel=str(data["kernel"]),
                   args=[LaunchArg.from_json(a) for a in data.get("args") or []],
                   source=str(data.get("source") or CAPTURED))


def kernel_launch(launches: Iterable[LaunchTraffic], kernel: str) -> LaunchTraffic | None:
    """The kernel's launch with the median ideal bytes (launches of one kernel usually share their
    shapes; where they differ, the median one stands for the kernel, as ncu's median launch does)."""
    found = sorted((item for item in launches if item.kernel == kernel), key=lambda item: item.ideal.total)
    return found[len(found) // 2] if found else None


# --- sizes known from the wrapper alone (no run) -----------------------------------------------


def static_launch_args(graph: Any, launch: Any) -> list[LaunchArg] | None:
    """The launch's arguments from the wrapper text alone: graph inputs and ``empty_strided``
    allocations by name, integer literals as scalars. None when an argument cannot be resolved
    (a view made in the wrapper, a symbolic size): the figure would be a guess."""
    kernel = graph.kernel(launch.kernel)
    if kernel is None:
        return None
    known: dict[str, tuple[list[Any], list[Any], str | None]] = {}
    storage_of: dict[str, str] = {}  # a reused buffer is its first name's allocation
    for item in graph.inputs:
        if item.kind == "tensor":
            known[item.name] = (list(item.shape), list(item.stride), item.dtype)
    for buffer in graph.buffers:
        known[buffer.name] = (list(buffer.shape), list(buffer.stride), buffer.dtype)
        storage_of[buffer.name] = buffer.reuses or buffer.name
    args: list[LaunchArg] = []
    for position, text in enumerate(launch.args):
        text = text.strip()
        if text in known:
            shape, stride, dtype = known[text]
            size = DTYPE_BYTES.get(dtype or "")
            if size is None or not all(isinstance(v, int) for v in [*shape, *stride]):
                return None
            args.append(LaunchArg(name=f"arg{position}", position=position, shape=shape, stride=stride, dtype=dtype,
                                  storage_bytes=storage_extent_bytes(shape, stride, size),
                                  storage=storage_of.get(text, text)))
            continue
        try:
            value: Any = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
        args.append(LaunchArg(name=f"arg{position}", position=position, role="scalar", value=value))
    mutated = list(kernel.inductor_meta.get("mutated_arg_names") or [])
    return name_and_role(args, kernel.source, kernel.name, mutated)


def static_graph_traffic(graph: Any) -> list[LaunchTraffic]:
    """:func:`static_launch_args` for every launch that resolves."""
    out = []
    for launch in graph.launches:
        args = static_launch_args(graph, launch)
        if args is not None:
            out.append(LaunchTraffic(order=launch.order, kernel=launch.kernel, args=args, source=STATIC))
    return out
