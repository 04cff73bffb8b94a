"""Gate 1's shared rule tables, its dialects, and the small types its checkers pass one another.

The module rules (:mod:`.static_rules`), the ``@triton.jit`` body rules (:mod:`.static_jit`), the
decorator rules (:mod:`.static_decorators`) and the launcher rules (:mod:`.static_launcher`) all
read these; none of them imports another for them. Pure Python, no torch.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .static_names import Member

FORBIDDEN_NAMES = frozenset({"torch", "extern_kernels", "aten"})
# Named in messages (they are rejected like any other unknown name).
FORBIDDEN_MODULES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "threading", "multiprocessing", "shutil", "pathlib", "io",
    "builtins", "importlib", "pickle", "marshal", "signal", "inspect", "gc", "weakref", "functools", "asyncio",
    "concurrent", "urllib", "http", "requests", "tempfile", "glob", "cffi", "numpy", "random", "time", "atexit",
    "runtime", "driver", "compiler", "backends", "testing",
})
FORBIDDEN_CALLS = {
    "open": "file I/O", "eval": "eval", "exec": "exec", "compile": "compile()", "__import__": "__import__",
    "getattr": "getattr tricks", "setattr": "setattr tricks", "delattr": "delattr tricks",
    "globals": "globals()", "locals": "locals()", "vars": "vars()", "input": "input()",
    "breakpoint": "breakpoint()", "print": "print (I/O)", "exit": "exit()", "quit": "quit()",
    "memoryview": "memoryview", "id": "id() (identity caching)", "hash": "hash() (identity caching)",
    "type": "type() (builds classes)", "object": "object", "super": "super()", "dir": "dir()",
}
STREAM_ATTRIBUTES = frozenset({"Stream", "ExternalStream", "set_stream", "current_stream", "stream",
                               "get_current_stream", "set_current_stream", "Event", "synchronize"})
# Builtins Inductor's kernels and templates call inside @triton.jit bodies.
JIT_BUILTINS = frozenset({"range", "min", "max", "float", "int", "bool", "abs", "len"})
# Methods and attributes of Triton values (tensors, constexprs, dtypes) inside @triton.jit bodies.
TENSOR_METHODS = frozenset({
    "to", "reshape", "broadcast_to", "trans", "permute", "view", "expand_dims", "split", "ravel", "sum", "max",
    "min", "argmax", "argmin", "cumsum", "cumprod", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs",
    "sigmoid", "softmax", "erf", "floor", "ceil", "cos", "sin", "xor_sum", "reduce_or", "flip", "sort",
    "histogram", "logical_and", "logical_or", "cast", "reduce", "associative_scan", "is_floating", "is_int",
    "is_fp32", "is_fp16", "is_bf16", "is_fp64", "is_bool", "is_ptr", "is_int_signed", "is_int_unsigned",
})
TENSOR_ATTRIBUTES = frozenset({"dtype", "shape", "T", "type", "element_ty", "value", "numel",
                               "primitive_bitwidth", "scalar"})
JIT_KEYWORDS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})
AUTOTUNE_KEYWORDS = frozenset({"configs", "key", "reset_to_zero", "restore_value", "warmup", "rep", "cache_results"})
CONFIG_KEYWORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
GRID_TYPES = frozenset({"Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow", "BatchMatmulGrid3D",
                        "FixedGrid", "PrecomputedGrid", "CooperativeReductionGrid", "SplitScanGrid",
                        "MixOrderReductionGrid"})
SIGNATURE_TYPE = re.compile(r"^(constexpr|\*?k?(fp|bf|i|u)\d+(e\d+)?(nv|b\d+|fn|fnuz)?|B|\*?i1|nvTmaDesc)$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BUILTIN_NAMES = frozenset(dir(builtins))


class Dialect(str, Enum):
    INDUCTOR = "inductor"  # a plain candidate (Inductor's kernel-module contract)
    LAUNCHER = "launcher"  # @triton.jit kernels and one launcher function (docs/launchers.md)
    USER = "user"  # hand-written @triton.jit/@triton.autotune kernels (no contract yet)


@dataclass(frozen=True)
class DialectPolicy:
    torch_import: bool  # `import torch` (for the launcher's scratch allocations)
    inductor_decorator: bool  # @triton_heuristics.<kind>(...)
    triton_autotune: bool  # @triton.autotune(...) / @triton.heuristics({...})
    launcher: bool  # one undecorated function with the kernel's name


POLICIES: dict[Dialect, DialectPolicy] = {
    Dialect.INDUCTOR: DialectPolicy(torch_import=False, inductor_decorator=True, triton_autotune=False,
                                    launcher=False),
    Dialect.LAUNCHER: DialectPolicy(torch_import=True, inductor_decorator=False, triton_autotune=True,
                                    launcher=True),
    Dialect.USER: DialectPolicy(torch_import=False, inductor_decorator=False, triton_autotune=True,
                                launcher=False),
}


@dataclass
class StaticFinding:
    rule: str  # syntax, contract, torch, forbidden-import, forbidden-call, try-except, stream, global-state,
    # top-level, decorator, construct, undefined, launcher
    message: str
    line: int | None = None  # 1-based line in the candidate source

    def describe(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "line": self.line}


@dataclass
class Symbol:
    """A module-level name: an import (its resolved member), a constant, or a function."""

    kind: str  # "import", "constant", "jit", "launcher"
    node: ast.AST
    member: Member | None = None  # imports
    wrapped: bool = False  # jit functions under @triton.autotune/@triton.heuristics/@triton_heuristics


@dataclass
class Ref:
    """What an expression resolves to."""

    kind: str  # member, local, constant, jit, launcher, builtin, undefined
    member: Member | None = None
    name: str = ""


@dataclass
class ModuleFacts:
    """What the rules learned on the way (the contract and the compile step read it)."""

    symbols: dict[str, Symbol] = field(default_factory=dict)
    jit_functions: list[ast.FunctionDef] = field(default_factory=list)
    launcher: ast.FunctionDef | None = None
    uses_atomics: bool = False


def short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def local_names(func: ast.FunctionDef) -> set[str]:
    """Parameters and every name the function assigns (Python makes them local everywhere in it)."""
    local = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    for node in walk_function(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
    return local


def walk_function(func: ast.FunctionDef) -> Iterator[ast.AST]:
    """Every node of a function's body (not its decorators, defaults or annotations)."""
    for stmt in func.body:
        yield from ast.walk(stmt)


def allowlist_text(policy: DialectPolicy) -> str:
    text = ("triton, triton.language, math, torch._inductor.runtime.{triton_helpers, triton_heuristics, hints}, "
            "libdevice from triton_helpers or triton.language.extra(.cuda)")
    return text + (", torch (launcher scratch only)" if policy.torch_import else "")


def check_signature_types(signature: dict[str, Any]) -> list[str]:
    """Signature type strings that are not Triton type names (Triton evaluates parts of some)."""
    return [f"{name}: {value!r}" for name, value in signature.items()
            if not isinstance(value, str) or not SIGNATURE_TYPE.match(value)]
