"""Writing launcher modules (docs/launchers.md) and the plain probe modules their kernels compile as.

A launcher module is the original kernel module's imports, ``import torch``, any number of
``@triton.jit`` kernels, and one plain ``def <kernel name>(<same parameters>)`` that allocates
scratch with ``torch.empty``/``torch.zeros`` on its first tensor's device and launches the kernels.
Sizes are the kernel's fixed numels, so every launch has constant grids and meta-parameters (gate 1
compiles them for sm_90).

A *probe module* is one of those kernels dressed as a plain candidate (Inductor's
``fixed_config`` decorator with the original ``triton_meta``/``inductor_meta`` and a signature
listing its parameters), which is what ``RewriteContext.compile_probe`` compiles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager

from .kernel_source import KernelModule, KernelSourceError
from .reduction_passes import ReductionKernel

SIGNATURE_TYPES = {"float32": "*fp32", "float64": "*fp64", "float16": "*fp16", "bfloat16": "*bf16",
                   "int64": "*i64", "int32": "*i32", "int16": "*i16", "int8": "*i8", "uint8": "*u8", "bool": "*i1"}


class Lines:
    """Indented source lines."""

    def __init__(self, depth: int = 0):
        self.lines: list[str] = []
        self.depth = depth

    def add(self, text: str) -> None:
        for line in text.splitlines():
            self.lines.append("    " * self.depth + line if line.strip() else "")

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.add(head)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def prologue(module: KernelModule) -> str:
    """The kernel module's text before its decorators (imports, driver selection), plus ``import torch``."""
    func = module.func
    assert func is not None
    first = min([d.lineno for d in func.decorator_list] + [func.lineno])
    head = "".join(module.text.splitlines(keepends=True)[:first - 1]).rstrip() + "\n"
    if "import torch\n" not in head:
        head = "import torch\n" + head.lstrip("\n")
    return head


def scratch(name: str, numel: int, torch_dtype: str, device_of: str, zeros: bool = False) -> str:
    function = "zeros" if zeros else "empty"
    return f"{name} = torch.{function}(({numel},), dtype=torch.{torch_dtype}, device={device_of}.device)"


def launch(kernel: str, grid: tuple[int, ...], args: list[str], meta: dict[str, int], num_warps: int) -> str:
    grid_text = "(" + ", ".join(str(g) for g in grid) + ("," if len(grid) == 1 else "") + ")"
    parts = [*args, *(f"{k}={v}" for k, v in meta.items()), f"num_warps={num_warps}", "num_stages=1"]
    return f"{kernel}[{grid_text}](" + ", ".join(parts) + ")"


def probe_module(kernel: ReductionKernel, jit_text: str, jit_name: str, scratch_types: dict[str, str],
                 constexprs: dict[str, int], num_warps: int) -> str:
    """``jit_text`` (a ``@triton.jit`` function named ``jit_name``) as a plain candidate of the original
    kernel: renamed to the kernel's name, under ``fixed_config`` with the given constexpr values."""
    module = kernel.module
    if module.decorator is None:
        raise KernelSourceError("the kernel has no @triton_heuristics decorator to borrow")
    keywords = {kw.arg: kw.value for kw in module.decorator.keywords if kw.arg}
    if "triton_meta" not in keywords or "inductor_meta" not in keywords:
        raise KernelSourceError("the decorator has no triton_meta/inductor_meta")
    tree = ast.parse(jit_text)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    func.name = module.name
    func.decorator_list = []
    params = [a.arg for a in func.args.args]
    meta = ast.parse(ast.get_source_segment(module.text, keywords["triton_meta"]) or "{}", mode="eval").body
    if not isinstance(meta, ast.Dict):
        raise KernelSourceError("triton_meta is not a dict literal")
    for i, key in enumerate(meta.keys):
        old = meta.values[i]
        if isinstance(key, ast.Constant) and key.value == "signature" and isinstance(old, ast.Dict):
            types = {k.value: v for k, v in zip(old.keys, old.values, strict=True) if isinstance(k, ast.Constant)}
            new = ast.Dict(keys=[], values=[])
            for name in params:
                if name in constexprs:
                    value: ast.expr = ast.Constant("constexpr")
                elif name in scratch_types:
                    value = ast.Constant(scratch_types[name])
                elif name in types:
                    value = types[name]
                else:
                    raise KernelSourceError(f"no signature type for {name}")
                new.keys.append(ast.Constant(name))
                new.values.append(value)
            meta.values[i] = new
            break
    else:
        raise KernelSourceError("triton_meta has no signature")
    config = ", ".join([f"'{k}': {v}" for k, v in constexprs.items()] + [f"'num_warps': {num_warps}",
                                                                          "'num_stages': 1"])
    decorator = (f"@triton_heuristics.fixed_config(\n    config={{{config}}},\n    filename=__file__,\n"
                 f"    triton_meta={ast.unparse(meta)},\n"
                 f"    inductor_meta={ast.get_source_segment(module.text, keywords['inductor_meta'])}\n)\n")
    body = ast.unparse(func)
    return prologue(module).replace("import torch\n", "", 1) + "\n" + decorator + "@triton.jit\n" + body + "\n"
