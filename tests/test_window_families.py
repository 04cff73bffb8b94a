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
from kernelopt_core.search.rewrites.launcher_source import runtime_params  # noqa: E402
from kernelopt_core.search.rewrites.window_model import recognise_window  # noqa: E402
from kernelopt_core.search.rewrites.windowed import WindowPlan, generate_launcher  # noqa: E402


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_window_graphs(tmp_path_factory)


def _gates(kernel: Any, candidate: str) -> tuple[int, ...]:
    return (1, 2, 3) if gate_one_takes_launchers(kernel.source, kernel.name, candidate) else (2, 3)


# (problem, family, method or shape of the variant to run)
CASES = [
    ("avg_pool1d", "windowed", "blockscan"),  # stride 1 along the row: block scans, padding 4 on both ends
    ("max_pool2d_k4s1p1", "windowed", "shifted"),  # 4x4, padding 1, a ring of 3 earlier rows
    ("avg_pool2d_k3s2p1_ceil", "windowed", "shifted"),  # per-window divisor, windows past the edge
    ("max_pool2d_dilated", "windowed", "shifted"),  # dilation 3, stride 2
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
