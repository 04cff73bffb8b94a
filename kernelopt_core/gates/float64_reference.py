"""The float64 reference of a graph, from the ``fx_graph_runnable.py`` Inductor writes beside it.
Runs inside a worker (imports torch inside the functions).

``fx_graph_runnable.py`` is a script: it sets environment variables and Inductor configs, then
defines ``class Repro(torch.nn.Module)`` whose ``forward`` takes the graph's arguments in the
order the wrapper's ``call(args)`` does, and finally runs it. Only its imports and the ``Repro``
class are executed here (never the config or environment lines, nor the run). The reference runs
with floating inputs cast to float64 under a dispatch mode that turns every floating dtype an op
asks for (``convert_element_type(x, torch.float32)``, ``full(..., dtype=torch.float16)``) into
float64, and with float64 as the default dtype.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Any


class ReferenceUnavailable(RuntimeError):
    """No float64 reference can be built for this graph (the reason says why)."""


def _is_oom(exc: BaseException) -> bool:
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


@dataclass
class Float64Reference:
    module: Any  # the Repro instance
    path: str
    device: str = "cpu"

    def __call__(self, inputs: list[Any]) -> list[Any]:
        """The float64 outputs on the graph's device; on the host when the device has no room."""
        try:
            return self._run(inputs, None)
        except Exception as exc:  # noqa: BLE001 - only running out of device memory moves it to the host
            if not _is_oom(exc):
                raise
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()
            return self._run(inputs, "cpu")

    def _run(self, inputs: list[Any], device: str | None) -> list[Any]:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class Float64Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                return func(*_upcast_dtypes(args), **_upcast_dtypes(kwargs or {}))

        target = device or None
        cast = [x.detach().to(device=target or x.device, dtype=torch.float64)
                if isinstance(x, torch.Tensor) and x.is_floating_point()
                else (x.detach().to(target or x.device) if isinstance(x, torch.Tensor) else x) for x in inputs]
        module = self.module.to(target) if target is not None else self.module
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with torch.no_grad(), Float64Mode():
                out = module(*cast)
        finally:
            torch.set_default_dtype(previous)
            if target is not None:
                self.module.to(self.device)
        return list(out) if isinstance(out, (tuple, list)) else [out]


def _upcast_dtypes(value: Any) -> Any:
    import torch

    if isinstance(value, torch.dtype):
        return torch.float64 if value.is_floating_point else value
    if isinstance(value, (list, tuple)):
        return type(value)(_upcast_dtypes(v) for v in value)
    if isinstance(value, dict):
        return {k: _upcast_dtypes(v) for k, v in value.items()}
    return value


def find_fx_graph_runnable(graph_path: str, declared: str | None = None) -> str | None:
    candidates = [declared] if declared else []
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(graph_path)), "fx_graph_runnable.py"))
    return next((p for p in candidates if p and os.path.isfile(p)), None)


def load_reference(path: str, device: str) -> Float64Reference:
    """Build the ``Repro`` module of ``path`` without running the script's other statements."""
    import torch

    try:
        text = open(path, encoding="utf-8").read()
        tree = ast.parse(text, filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise ReferenceUnavailable(f"{path}: cannot be read as Python ({exc})") from None
    kept: list[ast.stmt] = []
    repro = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept.append(node)
        elif isinstance(node, ast.ClassDef) and node.name == "Repro":
            repro = node
            kept.append(node)
    if repro is None:
        raise ReferenceUnavailable(f"{path}: defines no Repro module")
    namespace: dict[str, Any] = {"__name__": "kernelopt_fx_reference", "__file__": path}
    try:
        code = compile(ast.Module(body=kept, type_ignores=[]), path, "exec")
        exec(code, namespace)  # noqa: S102 - Inductor's own debug artifact, imports and one class
        module = namespace["Repro"]()
    except Exception as exc:  # noqa: BLE001
        raise ReferenceUnavailable(f"{path}: Repro cannot be built ({type(exc).__name__}: {exc})") from None
    state = list(module.state_dict())
    if state:
        # Constants live in the wrapper too, with values this script does not carry.
        raise ReferenceUnavailable(f"{path}: Repro holds {len(state)} constant(s) ({', '.join(state[:3])}) whose "
                                   "values the script does not carry")
    module = module.to(device=torch.device(device.split(":")[0] if device == "cpu" else device))
    return Float64Reference(module=module.eval(), path=path, device=device)
