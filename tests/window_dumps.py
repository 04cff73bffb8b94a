"""Tiny pooling, transpose and column-reduction problems compiled for the CPU Triton backend, once per
test session (one subprocess for all), and the RewriteContext a family sees for each.

The problems are tests/window_problems/*.py and three of the KernelBench-scale set at
``KERNELOPT_PROBLEM_SCALE=tiny``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = {
    "avg_pool1d": ROOT / "benchmarks/problems/kbscale/avg_pool1d.py",
    "max_pool2d_dilated": ROOT / "benchmarks/problems/kbscale/max_pool2d_dilated.py",
    "mean_cols": ROOT / "benchmarks/problems/kbscale/mean_cols.py",
    "max_pool2d_k4s1p1": ROOT / "tests/window_problems/max_pool2d_k4s1p1.py",
    "avg_pool2d_k3s2p1_ceil": ROOT / "tests/window_problems/avg_pool2d_k3s2p1_ceil.py",
    "transpose_batched": ROOT / "tests/window_problems/transpose_batched.py",
}
# mean_cols's wrapper reuses a buffer (`buf1 = buf0`), which the static reading of launch arguments
# does not follow; these are the tensors the launch passes (what the worker would capture).
KNOWN_ARGS = {
    "mean_cols": [
        {"name": "in_out_ptr0", "role": "output", "shape": [8], "stride": [1], "dtype": "torch.float32",
         "storage_bytes": 32},
        {"name": "in_ptr0", "role": "input", "shape": [64, 8], "stride": [8, 1], "dtype": "torch.float32",
         "storage_bytes": 2048},
    ],
}

_COMPILED: dict[str, dict[str, str]] = {}


def compiled_window_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Problem name -> its output_code.py (compiled once per session)."""
    base = str(tmp_path_factory.getbasetemp())
    if base not in _COMPILED:
        from conftest import compile_cpu_problems

        _COMPILED[base] = compile_cpu_problems(PROBLEMS, Path(base) / "window-dumps")
    return _COMPILED[base]


def context_for(name: str, path: str, device: str = "cpu", **evidence: Any) -> tuple[Any, Any, Any]:
    """(graph, kernel, RewriteContext) of the problem's one kernel, with the launch's tensors as evidence."""
    from kernelopt_core.analyst import EVIDENCE_KEYS
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.measure.traffic import static_graph_traffic
    from kernelopt_core.search.rewrites import RewriteContext, parse_kernel_module

    graph = parse_output_code(path)
    (kernel,) = graph.kernels
    args = KNOWN_ARGS.get(name)
    if args is None:
        (launch,) = [t for t in static_graph_traffic(graph) if t.kernel == kernel.name]
        args = [a.evidence_json() for a in launch.args if a.is_tensor]
    values = dict.fromkeys(EVIDENCE_KEYS)
    values.update(launch_args=args, **evidence)
    module = parse_kernel_module(kernel.source, kernel.name)
    return graph, kernel, RewriteContext(module=module, original=module, device=device, evidence=values)


def gate_one_takes_launchers(original: str, name: str, launcher: str) -> bool:
    """True once gate 1's launcher dialect is in this tree (kernelopt_core.gates.static)."""
    from kernelopt_core.gates.static import check_source

    return check_source(original, name, launcher).ok


def fixture_cases() -> dict[str, Any]:
    """The H200 CUDA kernels recorded for the recognition tests."""
    return json.loads((ROOT / "tests/fixtures/window_kernels_h200.json").read_text())["cases"]


__all__ = ["PROBLEMS", "compiled_window_graphs", "context_for", "fixture_cases", "gate_one_takes_launchers"]
