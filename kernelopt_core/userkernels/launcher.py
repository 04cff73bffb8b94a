"""Generated modules that launch a user kernel the way its wrapper did (pure text).

The gates never import a candidate into the checker and never run the user's wrapper around a
candidate to check it: gate 2 loads a *launcher module* in the candidate's contained process
(through the launcher-candidate loader of :mod:`kernelopt_core.launchers`). The module is the kernel
module plus a generated ``kernelopt_launch(a0, a1, ...)`` that repeats one captured launch, either
*wrapper style* (``kernel[grid](a0, ..., BLOCK_SIZE=128, num_warps=4)`` as the wrapper passed them,
the kernel's own decorators choosing the rest, the wrapper's grid as a :class:`~.runtime.TableGrid`)
or *pinned* (the JIT function itself with exactly the keywords and grid it received: the original,
as it ran). Runtime values (tensors, sizes) are the launcher's parameters, passed by the checker as
exchange buffers and scalars; every other value is a literal. The *compile module* is the kernel
module plus a compile target for gate 1's sm_90 compile (:mod:`kernelopt_core.gates.ptx_compile`).
"""

from __future__ import annotations

import json
from typing import Any

LAUNCHER_NAME = "kernelopt_launch"
COMPILE_TARGET = "kernelopt_compile_target"
_TYPES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float64": "fp64",
          "torch.int64": "i64", "torch.int32": "i32", "torch.int16": "i16", "torch.int8": "i8", "torch.uint8": "u8",
          "torch.bool": "i1", "torch.float8_e4m3fn": "fp8e4nv", "torch.float8_e5m2": "fp8e5"}


def _argument(item: dict[str, Any]) -> str:
    return f"a{item['arg']}" if "arg" in item else str(item["literal"])


def launcher_source(kernel_module: str, kernel: str, plan: dict[str, Any], *, pinned: bool = False) -> str:
    """The kernel module with a ``kernelopt_launch`` function that repeats the planned launch."""
    count = len(plan["arguments"])
    params = ", ".join(f"a{i}" for i in range(count))
    lines = ["", "", "# --- KernelOPT: the captured launch, generated (not part of the kernel) ---",
             "from kernelopt_core.userkernels.runtime import TableGrid as _KoTableGrid",
             "from kernelopt_core.userkernels.runtime import base_function as _ko_base",
             "from kernelopt_core.userkernels.runtime import prepare_kernel as _ko_prepare", "",
             f"_ko_prepare({kernel})"]
    if pinned:
        grid = plan["pinned"].get("grid")
        if grid is None:
            raise ValueError("the captured launch has no resolved grid to pin")
        arguments = [_argument(p) for p in plan["positional"]]
        arguments += [f"{k}={_argument(v)}" for k, v in plan["pinned"]["keywords"].items()]
        call = f"_ko_base({kernel})[{tuple(int(g) for g in grid)!r}]({', '.join(arguments)})"
    else:
        spec = plan["grid"]
        if "tuple" in spec:
            lines.append(f"_KO_GRID = {tuple(int(g) for g in spec['tuple'])!r}")
        else:
            lines.append(f"_KO_GRID = _KoTableGrid({json.dumps(spec['keys'])}, {json.dumps(spec['table'])})")
        arguments = [_argument(p) for p in plan["positional"]]
        arguments += [f"{k}={_argument(v)}" for k, v in plan["keywords"].items()]
        call = f"{kernel}[_KO_GRID]({', '.join(arguments)})"
    lines += ["", "", f"def {LAUNCHER_NAME}({params}):", f"    {call}", ""]
    return kernel_module.rstrip("\n") + "\n" + "\n".join(lines)


def signature_types(plan: dict[str, Any], params: list[str], constexprs: list[str]) -> tuple[dict[str, str],
                                                                                               dict[str, Any]]:
    """Triton's compile signature ({param: '*fp32' | 'i32' | 'fp32' | 'constexpr'}) and the
    constexpr values of the captured (pinned) launch, by parameter name."""
    from ast import literal_eval

    signature: dict[str, str] = {}
    constants: dict[str, Any] = {}
    by_name: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(plan["positional"]):
        if index < len(params):
            by_name[params[index]] = item
    for name, item in {**plan["keywords"], **plan["pinned"]["keywords"]}.items():
        if name in params:
            by_name[name] = item
    for name in params:
        item = by_name.get(name)
        if name in constexprs:
            signature[name] = "constexpr"
            if item is not None and "literal" in item:
                try:
                    constants[name] = literal_eval(item["literal"])
                except (ValueError, SyntaxError):
                    constants[name] = None
            continue
        if item is None:
            signature[name] = "constexpr"
            constants[name] = None
        elif "arg" in item:
            argument = plan["arguments"][item["arg"]]
            if argument["kind"] == "tensor":
                signature[name] = "*" + _TYPES.get(argument["dtype"], "fp32")
            else:
                value = argument.get("value")
                if isinstance(value, bool):
                    signature[name] = "i1"
                elif isinstance(value, int):
                    signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
                else:
                    signature[name] = "fp32"
        else:
            signature[name] = "constexpr"
            try:
                constants[name] = literal_eval(item["literal"])
            except (ValueError, SyntaxError):
                constants[name] = None
    return signature, constants


def compile_source(kernel_module: str, kernel: str, signature: dict[str, str], constants: dict[str, Any],
                   configs: list[dict[str, Any]]) -> str:
    """The kernel module with a compile target :func:`kernelopt_core.gates.sm90_compile.compile_source` takes."""
    lines = ["", "", "# --- KernelOPT: compile target, generated (not part of the kernel) ---",
             "from kernelopt_core.userkernels.runtime import CompileTarget as _KoCompileTarget", "",
             f"{COMPILE_TARGET} = _KoCompileTarget({kernel}, {json.dumps(signature)}, {constants!r}, "
             f"{json.dumps(configs)})", ""]
    return kernel_module.rstrip("\n") + "\n" + "\n".join(lines)


__all__ = ["COMPILE_TARGET", "LAUNCHER_NAME", "compile_source", "launcher_source", "signature_types"]
