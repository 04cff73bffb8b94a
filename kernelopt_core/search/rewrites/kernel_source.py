"""A Triton kernel module as Inductor writes it, read with ``ast`` so rewrites can edit it in place.

The text is the one inside ``async_compile.triton('name', '''...''')``: imports, a
``@triton_heuristics.<kind>(...)`` decorator and the ``@triton.jit`` function. Nothing here
imports torch or triton; edits splice the original text so everything they do not touch stays
byte-identical.

A candidate that fixes its launch configuration swaps the heuristics decorator for
``@triton_heuristics.fixed_config(config={...}, ...)`` (Inductor's launcher for a config decided
at compile time), keeping ``triton_meta`` and ``inductor_meta``; see docs/optimizer.md.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

BLOCK_NAMES = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK")
# A marker a rewrite leaves in the source when it relies on a block size dividing a numel.
DIVIDES_MARKER = "# kernelopt: {block} divides {numel}"


def source_digest(text: str) -> str:
    """The identity of a candidate's source (same as the artifact model's source hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class KernelSourceError(ValueError):
    """The text is not a kernel module this package can edit."""


@dataclass(frozen=True)
class LaunchConfig:
    """One ``triton.Config``: block sizes, warps and pipeline stages."""

    blocks: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int = 1

    @staticmethod
    def of(blocks: dict[str, int], num_warps: int, num_stages: int = 1) -> LaunchConfig:
        ordered = tuple(sorted(blocks.items(), key=lambda kv: BLOCK_NAMES.index(kv[0])
                               if kv[0] in BLOCK_NAMES else 99))
        return LaunchConfig(ordered, num_warps, num_stages)

    def block(self, name: str, default: int | None = None) -> int | None:
        return dict(self.blocks).get(name, default)

    def to_source(self) -> str:
        kwargs = ", ".join(f"'{name}': {value}" for name, value in self.blocks)
        return f"triton.Config({{{kwargs}}}, num_warps={self.num_warps}, num_stages={self.num_stages})"

    def label(self) -> str:
        parts = [f"{name}={value}" for name, value in self.blocks]
        return ", ".join([*parts, f"num_warps={self.num_warps}", f"num_stages={self.num_stages}"])

    def to_json(self) -> dict[str, Any]:
        return {"blocks": dict(self.blocks), "num_warps": self.num_warps, "num_stages": self.num_stages}


@dataclass
class KernelModule:
    """A parsed kernel module and the facts rewrites need."""

    text: str
    name: str
    heuristic: str  # pointwise, reduction, persistent_reduction, template, ... (cached_autotune resolved)
    params: list[str]
    constexpr_params: list[str]
    numels: dict[str, int] = field(default_factory=dict)  # xnumel/ynumel/r0_numel fixed in the body
    fixed_blocks: dict[str, int] = field(default_factory=dict)  # e.g. R0_BLOCK: tl.constexpr = 256
    size_hints: dict[str, int] = field(default_factory=dict)
    explicit_config: LaunchConfig | None = None  # when the decorator already fixes one config
    tree: ast.Module | None = None
    func: ast.FunctionDef | None = None
    decorator: ast.Call | None = None

    @property
    def is_pointwise(self) -> bool:
        return self.heuristic == "pointwise"

    @property
    def is_persistent(self) -> bool:
        return self.heuristic == "persistent_reduction"

    @property
    def is_looped_reduction(self) -> bool:
        return self.heuristic == "reduction" and "for r0_offset in" in self.text

    @property
    def block_params(self) -> list[str]:
        return [p for p in self.constexpr_params if p in BLOCK_NAMES]

    def divides_markers(self) -> set[tuple[str, str]]:
        return set(re.findall(r"# kernelopt: (\w+) divides (\w+)", self.text))

    def decorator_kwarg_source(self, name: str) -> str | None:
        if self.decorator is None:
            return None
        for kw in self.decorator.keywords:
            if kw.arg == name:
                return ast.get_source_segment(self.text, kw.value)
        return None

    def jit_source(self) -> str:
        """The ``@triton.jit`` function's text (for prompts and diffs)."""
        assert self.func is not None
        start = self.func.decorator_list[-1].lineno - 2 if self.func.decorator_list else self.func.lineno - 1
        lines = self.text.splitlines()
        return "\n".join(lines[max(start, 0):self.func.end_lineno])


def parse_kernel_module(text: str, name: str | None = None) -> KernelModule:
    """Parse a kernel module; raise :class:`KernelSourceError` with a precise reason."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise KernelSourceError(f"kernel source does not parse: line {exc.lineno}: {exc.msg}") from exc
    funcs = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    jitted = [f for f in funcs if any(_is_jit(d) for d in f.decorator_list)]
    if name is not None:
        jitted = [f for f in jitted if f.name == name] or jitted
    if not jitted:
        raise KernelSourceError("no @triton.jit function in the kernel source")
    func = jitted[0]
    decorator = next((d for d in func.decorator_list if _heuristic_name(d) is not None), None)
    heuristic = "other"
    explicit: LaunchConfig | None = None
    if isinstance(decorator, ast.Call):
        heuristic = _heuristic_name(decorator) or "other"
        if heuristic == "fixed_config":
            # Our own launcher: the kernel's shape says what Inductor's heuristic was.
            heuristic = _shape_heuristic(func)
            explicit = _fixed_config(decorator)
    params = [a.arg for a in func.args.args]
    constexpr = [a.arg for a in func.args.args if _is_constexpr_annotation(a.annotation)]
    numels, fixed = _body_constants(func)
    module = KernelModule(
        text=text, name=func.name, heuristic=heuristic, params=params, constexpr_params=constexpr,
        numels=numels, fixed_blocks=fixed, explicit_config=explicit, tree=tree, func=func,
        decorator=decorator if isinstance(decorator, ast.Call) else None,
    )
    hints = module.decorator_kwarg_source("size_hints")
    if hints:
        try:
            value = ast.literal_eval(hints)
            if isinstance(value, dict):
                module.size_hints = {str(k): int(v) for k, v in value.items()}
        except (ValueError, SyntaxError, TypeError):
            pass
    return module


def _is_jit(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "jit"


def _heuristic_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if isinstance(owner, ast.Name) and owner.id == "triton_heuristics":
            return node.func.attr
    return None


def _shape_heuristic(func: ast.FunctionDef) -> str:
    names = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)}
    loops = any(isinstance(n, ast.For) and getattr(n.target, "id", "") == "r0_offset" for n in ast.walk(func))
    if loops:
        return "reduction"
    if "r0_numel" in names or "rnumel" in names:
        return "persistent_reduction"
    return "pointwise"


def _fixed_config(call: ast.Call) -> LaunchConfig | None:
    node = next((kw.value for kw in call.keywords if kw.arg == "config"), call.args[0] if call.args else None)
    try:
        value = ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, dict):
        return None
    warps = int(value.pop("num_warps", 4))
    stages = int(value.pop("num_stages", 1))
    blocks = {str(k): int(v) for k, v in value.items() if str(k) in BLOCK_NAMES}
    return LaunchConfig.of(blocks, warps, stages)


def _is_constexpr_annotation(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "constexpr"


def _body_constants(func: ast.FunctionDef) -> tuple[dict[str, int], dict[str, int]]:
    numels: dict[str, int] = {}
    fixed: dict[str, int] = {}
    for stmt in func.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, int)
                and stmt.targets[0].id.endswith("numel")):
            numels[stmt.targets[0].id] = stmt.value.value
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and stmt.target.id in BLOCK_NAMES and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, int)):
            fixed[stmt.target.id] = stmt.value.value
    return numels, fixed


# --- text editing ----------------------------------------------------------------------------


def line_offsets(text: str) -> list[int]:
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def node_span(text: str, node: ast.expr | ast.stmt) -> tuple[int, int]:
    """Character offsets of a node (ast columns are UTF-8 byte offsets; kernels are ASCII)."""
    offsets = line_offsets(text)
    assert node.end_lineno is not None and node.end_col_offset is not None  # ast.parse sets both
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    return start, end


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping (start, end, replacement) edits."""
    out = text
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + replacement + out[end:]
    return out


def with_launch_config(module: KernelModule, config: LaunchConfig) -> str:
    """The module with its decorator replaced by ``triton_heuristics.fixed_config`` and one config.

    ``fixed_config`` is Inductor's own launcher for a configuration decided at compile time: no
    autotuning and no coordinate-descent tuning at load time, so the config that runs is the one
    proposed and measured. ``triton_meta['signature']`` is rebuilt to list exactly the function's
    parameters (gate 1 checks it), and ``inductor_meta`` (grid type, mutated args) is kept.
    """
    if module.decorator is None:
        raise KernelSourceError("the kernel has no @triton_heuristics decorator to replace")
    if module.heuristic not in ("pointwise", "reduction", "persistent_reduction"):
        raise KernelSourceError(f"cannot fix the launch configuration of a {module.heuristic!r} kernel")
    missing = [b for b in module.block_params if config.block(b) is None]
    extra = [b for b, _ in config.blocks if b not in module.block_params]
    if missing or extra:
        raise KernelSourceError(f"config {config.label()} does not match the kernel's block parameters "
                                f"{module.block_params}")
    text = module.text
    kwargs = {kw.arg: kw.value for kw in module.decorator.keywords if kw.arg}
    if "triton_meta" not in kwargs or "inductor_meta" not in kwargs:
        raise KernelSourceError("the decorator has no triton_meta/inductor_meta to keep")
    entries = ", ".join([f"'{name}': {value}" for name, value in config.blocks]
                        + [f"'num_warps': {config.num_warps}", f"'num_stages': {config.num_stages}"])
    parts = [
        "config={" + entries + "}",
        "filename=__file__",
        "triton_meta=" + _with_signature(text, kwargs["triton_meta"], module),
        "inductor_meta=" + (ast.get_source_segment(text, kwargs["inductor_meta"]) or "{}"),
    ]
    decorator_text = "triton_heuristics.fixed_config(\n    " + ",\n    ".join(parts) + "\n)"
    start, end = node_span(text, module.decorator)
    return splice(text, [(start, end, decorator_text)])


def _with_signature(text: str, node: ast.expr, module: KernelModule) -> str:
    """``triton_meta`` with its signature listing exactly the kernel's parameters, in order."""
    source = ast.get_source_segment(text, node) or "{}"
    tree = ast.parse(source, mode="eval")
    body = tree.body
    if not isinstance(body, ast.Dict):
        raise KernelSourceError("triton_meta is not a dict literal")
    for i, key in enumerate(body.keys):
        if isinstance(key, ast.Constant) and key.value == "signature" and isinstance(body.values[i], ast.Dict):
            old = body.values[i]
            assert isinstance(old, ast.Dict)
            types = {k.value: v for k, v in zip(old.keys, old.values, strict=True) if isinstance(k, ast.Constant)}
            new = ast.Dict(keys=[], values=[])
            for name in module.params:
                new.keys.append(ast.Constant(name))
                value = ast.Constant("constexpr") if name in module.constexpr_params else types.get(name)
                if value is None:
                    raise KernelSourceError(f"triton_meta['signature'] has no type for {name}")
                new.values.append(value)
            body.values[i] = new
            return ast.unparse(body)
    raise KernelSourceError("triton_meta has no signature")


def numel_of(module: KernelModule, block: str) -> int | None:
    """The fixed numel a block tiles: XBLOCK->xnumel, R0_BLOCK->r0_numel (or size hints)."""
    numel_name = {"XBLOCK": "xnumel", "YBLOCK": "ynumel", "ZBLOCK": "znumel", "R0_BLOCK": "r0_numel",
                  "R1_BLOCK": "r1_numel"}[block]
    if numel_name in module.numels:
        return module.numels[numel_name]
    hint_key = {"xnumel": "x", "ynumel": "y", "znumel": "z", "r0_numel": "r0_", "r1_numel": "r1_"}[numel_name]
    return module.size_hints.get(hint_key)


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p
