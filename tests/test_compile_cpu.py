"""A small model compiled with the CPU Triton backend parses, runs via graph_module, and matches eager."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLE_ROWS, ROOT

from kernelopt_core.artifacts import discover, parse_output_code
from kernelopt_core.dispatch import analyze

# Runs in a fresh process: the CPU backend patches Inductor and Triton process-wide.
RUN_AND_COMPARE = r'''
import json, sys
import torch
import torch.nn.functional as F
from kernelopt_core.graph_module import call_graph, load_graph_module, make_inputs
from kernelopt_core.compile import load_problem

module = load_graph_module(sys.argv[1], "cpu")
problem = load_problem(sys.argv[2])
results = []
for seed in (0, 1):
    inputs = make_inputs(module, seed)
    (out,) = call_graph(module, inputs)
    w, b, x, ln_w, ln_b = inputs   # the graph's argument order: lifted parameters around the input
    model = problem.Model(256).eval().double()
    with torch.no_grad():
        model.linear.weight.copy_(w); model.linear.bias.copy_(b)
        model.norm.weight.copy_(ln_w); model.norm.bias.copy_(ln_b)
        ref = model(x.double())
    results.append({"seed": seed, "shape": list(out.shape), "max_abs": (out.double() - ref).abs().max().item(),
                    "inputs_left": len(inputs)})
print("RESULT " + json.dumps(results))
'''


def test_cpu_dump_parses(cpu_example_dump: Path) -> None:
    graph = parse_output_code(str(cpu_example_dump))
    assert graph.device == "cpu"
    assert graph.warnings == []
    assert [c.short_op for c in graph.extern_calls] == ["addmm"]
    (kernel,) = graph.kernels
    assert kernel.kind == "per" and kernel.heuristic == "persistent_reduction"
    assert kernel.device_str == "cpu"
    assert {"aten.native_layer_norm", "aten.gelu", "aten._softmax", "aten.tanh"} <= set(kernel.aten_ops)
    assert kernel.size_hints == {"x": EXAMPLE_ROWS, "r0_": 256}
    assert [type(item).__name__ for item in graph.timeline()] == ["ExternCall", "Launch"]
    assert graph.launches[0].int_args == [EXAMPLE_ROWS, 256]
    assert [spec.shape for spec in graph.inputs] == [[256, 256], [256], [EXAMPLE_ROWS, 256], [256], [256]]
    assert analyze(graph).classification == "optimizable"
    # The dump folder and its cache twin are one graph.
    root = cpu_example_dump.parents[4]
    graphs, problems = discover(str(root))
    assert problems == []
    assert [g.path for g in graphs] == [str(cpu_example_dump)]
    assert graphs[0].fx_graph_runnable is not None
    assert graphs[0].kernels[0].kernel_file is not None  # linked to its cache-dir kernel file


def test_cpu_dump_runs_and_matches_eager(cpu_example_dump: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_COMPARE, str(cpu_example_dump), str(ROOT / "examples" / "gelu_mlp.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    results = json.loads(line.removeprefix("RESULT "))
    assert len(results) == 2
    # The reference is float64 eager. A float32 eager reference failed this bound in full-suite runs (5.1e-5,
    # here and in CI's test_deploy_runtime): in about 1 of 20-50 processes (two at a time on 2 cores), the first
    # float32 eager call after a CPU-Triton compile returned rows 32-63 (the second half of 64) with an
    # odd, smooth tanh-like error of up to 5.2e-5, while the compiled output, a float64 reference and a second
    # float32 call in the same process were within 1e-7 (2026-12-05, torch 2.11 CPU wheel).
    for result in results:
        assert result["shape"] == [EXAMPLE_ROWS, 256]
        assert result["max_abs"] <= 1e-5, results
        assert result["inputs_left"] == 5  # call_graph passes a copy: the caller's list is intact
