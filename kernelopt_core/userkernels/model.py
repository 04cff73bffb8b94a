"""A project's own Triton kernels, as plain data: what ``@triton.jit`` functions a ``.py`` file
defines, how they are decorated, what they load and store, and where the file launches them.

Line and column numbers are 0-based (as in LSP; columns are Python's, UTF-8 bytes); ranges'
ends are exclusive. Nothing here imports torch or triton.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..artifacts.model import SourceRange, source_hash

AccessKind = Literal["load", "store", "atomic"]


@dataclass
class ConfigSpec:
    """One ``triton.Config(...)`` of an ``@triton.autotune``, read without running it."""

    kwargs: dict[str, Any]  # meta-parameter values (literal where the source is literal, else its text)
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    line: int = 0
    literal: bool = True  # every part was a literal

    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in self.kwargs.items()]
        for key in ("num_warps", "num_stages", "num_ctas"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value}")
        return ", ".join(parts) or "(defaults)"

    def all_kwargs(self) -> dict[str, Any]:
        out = dict(self.kwargs)
        for key in ("num_warps", "num_stages", "num_ctas"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AutotuneSpec:
    configs: list[ConfigSpec] = field(default_factory=list)
    key: list[str] | None = None  # None: no key given
    configs_source: str = ""  # the configs expression as written (a literal list, a name, a call)
    configs_literal: bool = True  # the configs are a literal list of triton.Config(...) (possibly via a name)
    line: int = 0
    options: list[str] = field(default_factory=list)  # other keywords (prune_configs_by, reset_to_zero, ...)

    def to_json(self) -> dict[str, Any]:
        return {"configs": [c.to_json() for c in self.configs], "key": self.key,
                "configs_source": self.configs_source, "configs_literal": self.configs_literal, "line": self.line,
                "options": self.options}


@dataclass
class AccessSite:
    """A ``tl.load``/``tl.store``/``tl.atomic_*`` in a kernel body."""

    kind: AccessKind
    range: SourceRange
    pointer: str  # the pointer expression as written
    params: list[str]  # kernel parameters the pointer expression uses
    masked: bool  # mask= given (or boundary_check= on a block pointer)
    mask: str | None = None
    other: str | None = None
    block_pointer: bool = False
    function: str = ""  # the jit function it stands in (the kernel or a helper)
    block: bool = False  # addresses a block of elements (offsets from tl.arange, or a block pointer)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # the range too: asdict converts nested dataclasses


@dataclass
class DotSite:
    range: SourceRange
    operands: list[str]
    precision: str | None  # the input_precision=/allow_tf32= keyword as written, None when absent
    low_precision_operands: bool  # both operands visibly cast to fp16/bf16/fp8 (no TF32 question)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # the range too: asdict converts nested dataclasses


@dataclass
class LaunchSite:
    """``kernel[grid](args..., META=..., num_warps=...)`` somewhere in the file."""

    range: SourceRange  # the kernel's name at the launch
    function: str | None  # the Python function it stands in (None: module level)
    grid: str  # the grid expression as written (a name stands for the value assigned to it)
    grid_uses_cdiv: bool  # the grid divides rounding up (triton.cdiv or the (n + B - 1) // B idiom)
    args: list[str]
    kwargs: dict[str, str]

    @property
    def passed_names(self) -> list[str]:
        return list(self.kwargs)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed_names"] = self.passed_names
        return data


@dataclass
class UserKernel:
    """One ``@triton.jit`` function a project wrote (not Inductor's)."""

    name: str
    path: str
    name_range: SourceRange  # the name in its ``def`` line
    statement_range: SourceRange  # from the first decorator's line to the end of the function (whole lines)
    def_line: int
    params: list[str]
    constexprs: list[str]
    constexpr_defaults: dict[str, Any] = field(default_factory=dict)
    decorators: list[str] = field(default_factory=list)  # as written, outermost first
    jit_options: dict[str, Any] = field(default_factory=dict)  # @triton.jit(...) keywords
    autotune: AutotuneSpec | None = None
    heuristics: list[str] = field(default_factory=list)  # meta-parameters @triton.heuristics computes
    accesses: list[AccessSite] = field(default_factory=list)
    dots: list[DotSite] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)  # other @triton.jit functions of the file it calls
    launches: list[LaunchSite] = field(default_factory=list)
    source: str = ""  # the function's text, decorators included
    harness: str | None = None  # a `# kernelopt: harness=...` naming this kernel (or the file's default)
    is_helper: bool = False  # only called from other kernels, never launched

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)

    @property
    def runtime_params(self) -> list[str]:
        return [p for p in self.params if p not in self.constexprs]

    @property
    def loads(self) -> list[AccessSite]:
        return [a for a in self.accesses if a.kind == "load"]

    @property
    def stores(self) -> list[AccessSite]:
        return [a for a in self.accesses if a.kind != "load"]

    def stored_params(self) -> set[str]:
        return {p for a in self.accesses if a.kind != "load" for p in a.params}

    def loaded_params(self) -> set[str]:
        return {p for a in self.accesses if a.kind in ("load", "atomic") for p in a.params}

    def caller_passed(self) -> list[str]:
        """Meta-parameters and launch options every launch site in the file passes by keyword."""
        if not self.launches:
            return []
        common = set(self.launches[0].kwargs)
        for launch in self.launches[1:]:
            common &= set(launch.kwargs)
        return [k for k in self.launches[0].kwargs if k in common and k not in self.runtime_params]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "path": self.path, "def_line": self.def_line,
            "line_range": [self.statement_range.start_line, self.statement_range.end_line],
            "params": self.params, "constexprs": self.constexprs, "constexpr_defaults": self.constexpr_defaults,
            "decorators": self.decorators, "jit_options": self.jit_options,
            "autotune": self.autotune.to_json() if self.autotune else None, "heuristics": self.heuristics,
            "accesses": [a.to_json() for a in self.accesses], "dots": [d.to_json() for d in self.dots],
            "helpers": self.helpers, "launches": [launch.to_json() for launch in self.launches],
            "source_hash": self.source_hash, "harness": self.harness, "is_helper": self.is_helper,
        }


@dataclass
class UserKernelFile:
    """Every ``@triton.jit`` function of one ``.py`` file."""

    path: str
    text_hash: str
    kernels: list[UserKernel] = field(default_factory=list)  # launchable kernels (helpers excluded)
    helpers: list[UserKernel] = field(default_factory=list)  # jit functions only other kernels call
    default_harness: str | None = None  # a `# kernelopt: harness=NAME` that names no kernel
    harness_functions: list[str] = field(default_factory=list)  # module-level zero-argument functions
    # per zero-argument function, the kernels of this file its code reaches (read, never run)
    harness_kernels: dict[str, list[str]] = field(default_factory=dict)
    pair_functions: list[str] = field(default_factory=list)  # zero-argument functions returning a 2-tuple
    warnings: list[str] = field(default_factory=list)

    def kernel(self, name: str) -> UserKernel | None:
        return next((k for k in self.kernels if k.name == name), None)

    def function(self, name: str) -> UserKernel | None:
        return next((k for k in [*self.kernels, *self.helpers] if k.name == name), None)

    def kernel_at(self, line: int) -> UserKernel | None:
        """The kernel whose decorators or body hold this line, or whose launch is on it."""
        for kernel in self.kernels:
            if kernel.statement_range.start_line <= line <= kernel.statement_range.end_line:
                return kernel
        for kernel in self.kernels:
            if any(site.range.start_line == line for site in kernel.launches):
                return kernel
        return None

    def harness_for(self, kernel: str) -> str | None:
        """The harness a comment names for ``kernel``: the one above it, else the file's default
        unless that one never launches the kernel (a harness for another kernel of the file)."""
        found = self.kernel(kernel)
        if found is not None and found.harness:
            return found.harness
        if self.default_harness and self.launches(self.default_harness, kernel) is False:
            return None
        return self.default_harness

    def launches(self, harness: str, kernel: str) -> bool | None:
        """Does the harness function ``harness`` of this file reach a launch of ``kernel``? None when
        the source cannot tell: not a zero-argument function here, or a kernel launched elsewhere."""
        found = self.kernel(kernel)
        if harness not in self.harness_kernels or found is None or not found.launches:
            return None
        return kernel in self.harness_kernels[harness]

    def harness_choices(self, kernel: str) -> list[str]:
        """Zero-argument functions of the file that return a pair and reach a launch of ``kernel``."""
        return [name for name in self.pair_functions if kernel in self.harness_kernels.get(name, [])]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kernels": [k.to_json() for k in self.kernels],
                "helpers": [k.to_json() for k in self.helpers], "default_harness": self.default_harness,
                "harness_functions": self.harness_functions, "harness_kernels": self.harness_kernels,
                "pair_functions": self.pair_functions, "warnings": self.warnings}
