"""The windowed and strided_access families on tiny CPU-backend problems, through the real gates.

Each candidate is a launcher (docs/launchers.md) run by gates 2 and 3 (and gate 1 once its launcher
dialect is in this tree): kernel correctness on the captured launch and seeds with outputs and scratch
poisoned, then the whole graph. The problems hit padding on every edge, ragged tiles, ceil_mode with
count_include_pad=False (a divisor per window), dilation, a mean's epilogue and a batched transpose.
A launcher whose window is off by one column, exact elsewhere, is rejected by gate 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from window_dumps import compiled_window_graphs, context_for, gate_one_takes_launchers  # noqa: E402

from kernelopt_core.gates import CascadeConfig, run_cascade  # noqa: E402
from kernelopt_core.search.rewrites import FAMILIES  # noqa: E402
from kernelopt_core.search.rewrites.describe import describe_change  # noqa: E402
from kernelopt_core.search.rewrites.launcher_source import runtime_params  # noqa: E402
from kernelopt_core.search.rewrites.window_model import recognise_window  # noqa: E402
from kernelopt_core.search.rewrites.windowed import WindowPlan, generate_launcher  # noqa: E402


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_window_graphs(tmp_path_factory)


def _gates(kernel: Any, candidate: str) -> tuple[int, ...]:
    return (1, 2, 3) if gate_one_takes_launchers(kernel.source, kernel.name, candidate) else (2, 3)


# (problem, family, method or shape of the variant to run)
# `make test` runs one case of each method; the other windows are slow (20-30 s each in the interpreter).
CASES = [
    ("avg_pool1d", "windowed", "blockscan"),  # stride 1 along the row: block scans, padding 4 on both ends
    pytest.param("max_pool2d_k4s1p1", "windowed", "shifted", marks=pytest.mark.slow),  # 4x4, padding 1, ring of 3
    ("avg_pool2d_k3s2p1_ceil", "windowed", "shifted"),  # per-window divisor, windows past the edge
    pytest.param("max_pool2d_dilated", "windowed", "shifted", marks=pytest.mark.slow),  # dilation 3, stride 2
    ("transpose_batched", "strided_access", "transpose"),
    ("mean_cols", "strided_access", "columns"),
]


@pytest.mark.parametrize("problem, family, kind", CASES)
def test_the_family_passes_the_gates(graphs: dict[str, str], tmp_path: Path, problem: str, family: str,
                                     kind: str) -> None:
    graph, kernel, ctx = context_for(problem, graphs[problem])
    assert FAMILIES[family].not_applicable(ctx) is None
    variants = FAMILIES[family].variants(ctx)
    chosen = next(v for v in variants if kind in (v.params.get("method"), v.params.get("shape")))
    assert chosen.params["launcher"] and chosen.params["ideal_bytes"]
    # the launcher names itself in its first line, and reports name it so (not "pointwise -> other; 116 lines")
    label = describe_change(kernel.source, chosen.source, kernel.name)
    assert label.startswith(f"{family.replace('_', ' ')}, {chosen.title}") and " -> other" not in label
    gates = _gates(kernel, chosen.source)
    result = run_cascade(graph, {kernel.name: chosen.source}, CascadeConfig(run_gates=gates, workdir=str(tmp_path)))
    assert result.accepted, f"{chosen.title}: {result.reason}"
    assert [g.gate for g in result.gates] == list(gates)


def test_the_other_family_declines(graphs: dict[str, str]) -> None:
    _, _, pooling = context_for("max_pool2d_k4s1p1", graphs["max_pool2d_k4s1p1"])
    assert "not a copy" in FAMILIES["strided_access"].not_applicable(pooling)
    _, _, transpose = context_for("transpose_batched", graphs["transpose_batched"])
    assert "no pooling window" in FAMILIES["windowed"].not_applicable(transpose)


def test_a_window_off_by_one_column_is_rejected_by_gate_2(graphs: dict[str, str], tmp_path: Path) -> None:
    graph, kernel, ctx = context_for("max_pool2d_k4s1p1", graphs["max_pool2d_k4s1p1"])
    window = recognise_window(ctx.module, ctx.evidence["launch_args"])
    shifted = replace(window, padding=(window.padding[0], window.padding[1] - 1))  # the window one column right
    source = generate_launcher(shifted, WindowPlan("shifted", 16, window.out_h, 4), kernel.name,
                               runtime_params(ctx.module))
    result = run_cascade(graph, {kernel.name: source}, CascadeConfig(run_gates=(2,), workdir=str(tmp_path)))
    assert result.failed_gate == 2 and "differ" in result.reason, result.reason


_NONFINITE_SCRIPT = """
import torch, torch.nn.functional as F
from kernelopt_core.launchers import load_launcher
from kernelopt_core.search.rewrites.window_model import PoolWindow
from kernelopt_core.search.rewrites.windowed import WindowPlan, generate_launcher
torch.manual_seed(0)
def check(op, x, k, s, p, plan, folder):
    one_d = x.dim() == 3
    ref = F.avg_pool1d(x, k, s, p) if op == "avg" else F.max_pool2d(x, k, s, p)
    planes, h, w = x.shape[0] * x.shape[1], (1 if one_d else x.shape[2]), x.shape[-1]
    oh, ow = (1, ref.shape[-1]) if one_d else tuple(ref.shape[-2:])
    kernel, stride, pad = ((1, k), (1, s), (0, p)) if one_d else ((k, k), (s, s), (p, p))
    window = PoolWindow(op, planes, h, w, oh, ow, kernel, stride, pad, (1, 1), "in_ptr0", "out_ptr0", "tl.float32",
                        "tl.float32", "include_pad" if op == "avg" else None)
    launcher = load_launcher("k", generate_launcher(window, plan, "k", ["in_ptr0", "out_ptr0", "xnumel"]), "cpu",
                             directory=folder)
    out = torch.full_like(ref, 7.0)
    launcher.run(x, out, ref.numel())
    same_nan = torch.equal(torch.isnan(out), torch.isnan(ref))
    close = torch.allclose(out.nan_to_num(0.0), ref.nan_to_num(0.0), atol=1e-5, rtol=1e-5)
    print("@", op, plan.method, same_nan and close and bool(torch.isnan(ref).any()) and bool(torch.isinf(ref).any()))
import sys
x = torch.randn(2, 3, 37); x[0, 0, 5] = float("nan"); x[1, 2, 20] = float("inf"); x[0, 1, 30] = float("-inf")
check("avg", x, 8, 1, 4, WindowPlan("blockscan", 8, 1, 4), sys.argv[1])
y = torch.randn(1, 2, 9, 11); y[0, 0, 4, 4] = float("nan"); y[0, 1, 0, 10] = float("inf")
check("max", y, 3, 1, 1, WindowPlan("blockscan", 4, 9, 4), sys.argv[1])
check("max", y, 3, 1, 1, WindowPlan("shifted", 16, 9, 4), sys.argv[1])
"""


def test_inf_and_nan_reach_exactly_the_windows_that_contain_them(tmp_path: Path) -> None:
    """Window sums from block scans never subtract, so an inf or NaN stays in its own windows (a prefix-sum
    difference would turn its neighbours into NaN); max propagates NaN like torch. Run in the interpreter."""
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", _NONFINITE_SCRIPT, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).resolve().parent.parent)
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("@ ")]
    assert len(lines) == 3, done.stderr[-3000:]
    assert all(line[3] == "True" for line in lines), lines
