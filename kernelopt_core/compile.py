"""Compile a KernelBench-format problem with torch.compile and keep Inductor's dumps.

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``.
The dumps land in ``OUT/torch_compile_debug/run_*/torchinductor/<graph>/output_code.py`` with
the Inductor cache in ``OUT/inductor_cache``. Imports torch: run it in the CLI or a worker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any


@dataclass
class CompileResult:
    problem: str
    out_dir: str
    device: str
    mode: str
    compile_s: float
    max_abs_err: float
    max_rel_err: float
    graphs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ProblemError(Exception):
    """A problem file that cannot be imported, built or run."""


def load_problem(path: str) -> ModuleType:
    name = "kernelopt_problem_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - user code: report, don't crash
        raise ProblemError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise ProblemError(f"{path}: not in KernelBench format (no {attr})")
    return module


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def build_problem(module: ModuleType, device: str, dtype: Any = None, seed: int = 0) -> tuple[Any, list[Any]]:
    """The problem's model (eval mode) and inputs on ``device``."""
    import torch

    torch.manual_seed(seed)
    try:
        # Build on the device: GPU-sized inputs (GBs) made on the CPU and copied over are slow.
        with torch.device(device):
            model = module.Model(*module.get_init_inputs()).eval().to(device)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(f"building the model failed: {type(exc).__name__}: {exc}") from exc
    if dtype is not None:
        model = model.to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return model, inputs


def compile_problem(problem: str, out_dir: str, mode: str = "max-autotune", device: str = "auto") -> CompileResult:
    """Compile ``problem`` and write its dumps into ``out_dir``."""
    return compile_problem_keeping_callable(problem, out_dir, mode, device)[0]


def compile_problem_keeping_callable(problem: str, out_dir: str, mode: str = "max-autotune",
                                     device: str = "auto") -> tuple[CompileResult, Any]:
    """:func:`compile_problem`, also returning the compiled callable whose compile wrote the dumps,
    so a caller can time exactly that code without compiling (and autotuning) a second time."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    cache_dir = os.path.join(out_dir, "inductor_cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    device = resolve_device(device)
    notes: list[str] = []
    if device == "cpu":
        from .backends import cpu_triton

        cpu_triton.activate()
        if mode != "default":
            notes.append(f"mode {mode!r} autotunes by timing kernels; on the CPU interpreter it uses 'default'")
            mode = "default"
    import torch
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    module = load_problem(problem)
    model, inputs = build_problem(module, device)
    inductor_config.trace.enabled = True
    inductor_config.fx_graph_cache = False  # a cache hit would skip writing the dumps
    dynamo_config.debug_dir_root = os.path.join(out_dir, "torch_compile_debug")
    torch._dynamo.reset()
    started = time.perf_counter()
    try:
        compiled = torch.compile(model, mode=None if mode == "default" else mode)
        with torch.no_grad():
            out = compiled(*inputs)
            ref = model(*inputs)
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(f"torch.compile failed: {type(exc).__name__}: {exc}") from exc
    compile_s = time.perf_counter() - started
    abs_err, rel_err = _errors(out, ref)
    from .artifacts import discover

    graphs, _ = discover(out_dir)
    result = CompileResult(
        problem=os.path.abspath(problem), out_dir=out_dir, device=device, mode=mode,
        compile_s=round(compile_s, 3), max_abs_err=abs_err, max_rel_err=rel_err,
        graphs=[g.path for g in graphs], notes=notes,
    )
    with open(os.path.join(out_dir, "compile_report.json"), "w") as handle:
        json.dump(result.to_json(), handle, indent=1)
    return result, compiled


def _errors(out: Any, ref: Any) -> tuple[float, float]:
    import torch

    outs = out if isinstance(out, (tuple, list)) else [out]
    refs = ref if isinstance(ref, (tuple, list)) else [ref]
    abs_err = rel_err = 0.0
    for o, r in zip(outs, refs, strict=False):
        if isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor):
            diff = (o.double() - r.double()).abs().max().item() if o.numel() else 0.0
            scale = max(r.double().abs().max().item(), 1e-12) if r.numel() else 1.0
            abs_err = max(abs_err, diff)
            rel_err = max(rel_err, diff / scale)
    return abs_err, rel_err


if __name__ == "__main__":  # pragma: no cover - used by workers: python -m kernelopt_core.compile
    result = compile_problem(sys.argv[1], sys.argv[2], *(sys.argv[3:5]))
    print(json.dumps(result.to_json()))
