"""Gate 2's magnitude sweep with small Triton kernels in the CPU interpreter: precision dropped only at
large magnitudes is rejected (12 mantissa bits kept where |x| > 16384; a variance whose squares keep
bfloat16's 8 bits where a row reaches past 16384), which the other input sets pass; a correct reordering
of a row sum passes the sweep.

The original and the candidate are Triton kernels launched by gate 2's stand-in sides
(tests/gate2_stand_ins.py), so :func:`check_kernel` runs its real battery on them. Triton picks the
interpreter when it is imported, so the checks run in one subprocess started with TRITON_INTERPRET=1;
each is still its own test item."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROWS, COLUMNS, BLOCK_ROWS = 64, 128, 16


def _kernels() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, DROP: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
        cols = tl.arange(0, BLOCK_C)[None, :]
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptr + rows * n_cols + cols, mask=mask, other=0.0)
        if DROP:  # 12 of the 23 mantissa bits kept, only where |x| > 16384
            truncated = (x.to(tl.int32, bitcast=True) & -2048).to(tl.float32, bitcast=True)
            x = tl.where(tl.abs(x) > 16384.0, truncated, x)
        tl.store(out_ptr + rows * n_cols + cols, x * 3.0 + 1.0, mask=mask)

    @triton.jit
    def variance(x_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, LOW: tl.constexpr):
        row_index = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        rows = row_index[:, None]
        cols = tl.arange(0, BLOCK_C)[None, :]
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptr + rows * n_cols + cols, mask=mask, other=0.0)
        mean = tl.sum(x, 1) / n_cols
        d = tl.where(mask, x - mean[:, None], 0.0)
        squares = d * d
        if LOW:  # the squares in bfloat16 (8 mantissa bits), only for rows that reach past 16384
            narrow = (squares.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)
            large = tl.max(tl.abs(x), 1) > 16384.0
            squares = tl.where(large[:, None], narrow, squares)
        tl.store(out_ptr + row_index, tl.sum(squares, 1) / n_cols, mask=row_index < n_rows)

    @triton.jit
    def row_sum(x_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        row_index = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        rows = row_index[:, None]
        total = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
        for start in range(0, n_cols, BLOCK_C):
            cols = start + tl.arange(0, BLOCK_C)[None, :]
            total += tl.load(x_ptr + rows * n_cols + cols, mask=(rows < n_rows) & (cols < n_cols), other=0.0)
        tl.store(out_ptr + row_index, tl.sum(total, 1), mask=row_index < n_rows)

    return scale, variance, row_sum


def _launcher(kernel: Any, **constants: Any) -> Any:
    def behaviour(x: Any, out: Any, _call: int) -> None:
        kernel[(ROWS // BLOCK_ROWS,)](x, out, ROWS, COLUMNS, BLOCK_R=BLOCK_ROWS, **constants)
    return behaviour


def _gate2(original: Any, candidate: Any, reduction: bool, sweep: bool) -> dict[str, Any]:
    import torch
    from gate2_stand_ins import InProcessCandidate, TorchKernel

    from kernelopt_core.gates.kernel import all_input_sets
    from kernelopt_core.gates.kernel_gate import check_kernel
    from kernelopt_core.gates.structured_input_sets import STRUCTURED_INPUT_SETS
    from kernelopt_core.sandbox.exchange import ExchangeArena

    out = torch.empty(ROWS) if reduction else torch.empty(ROWS, COLUMNS)
    values = [torch.randn(ROWS, COLUMNS), out, ROWS, COLUMNS]
    names, roles = ["x_ptr", "out_ptr", "n_rows", "n_cols"], ["input", "output", "scalar", "scalar"]
    row_length = COLUMNS if reduction else None
    input_sets = [STRUCTURED_INPUT_SETS["magnitude-sweep"]] if sweep else None
    arena = ExchangeArena("cpu")
    try:
        outcome = check_kernel(TorchKernel(original), InProcessCandidate(candidate), arena, "k", [values], [{}],
                               names, roles, (0, 42, 1337), "cpu", extra_sets=all_input_sets(
                                   torch.float32, reduction, row_length, input_sets=input_sets),
                               row_length=row_length)
    finally:
        arena.close()
    failed = outcome.failed
    return {"passed": failed is None, "label": failed.label if failed else None,
            "problem": failed.problems[0] if failed else None, "runs": [c.label for c in outcome.checks]}


def run_checks(out_path: str) -> None:
    """In the subprocess: each case through gate 2, without and with the sweep."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    scale, variance, row_sum = _kernels()
    cases = {
        "drop-precision-above-16384": (_launcher(scale, BLOCK_C=COLUMNS, DROP=False),
                                       _launcher(scale, BLOCK_C=COLUMNS, DROP=True), False),
        "bf16-variance-at-large-x": (_launcher(variance, BLOCK_C=COLUMNS, LOW=False),
                                     _launcher(variance, BLOCK_C=COLUMNS, LOW=True), True),
        "reordered-row-sum": (_launcher(row_sum, BLOCK_C=64), _launcher(row_sum, BLOCK_C=16), True),
    }
    results: dict[str, Any] = {}
    for name, (original, candidate, reduction) in cases.items():
        for sweep in (False, True):
            key = f"{name}/{'sweep' if sweep else 'other-input-sets'}"
            try:
                results[key] = _gate2(original, candidate, reduction, sweep)
            except Exception as exc:  # noqa: BLE001 - reported by the test item
                import traceback

                results[key] = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"}
    Path(out_path).write_text(json.dumps(results))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("magnitude_sweep") / "verdicts.json"
    code = (f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nimport importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('sweep_checks', {__file__!r})\n"
            "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
            f"module.run_checks({str(out)!r})\n")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def _verdict(verdicts: dict[str, Any], key: str) -> dict[str, Any]:
    verdict = verdicts[key]
    assert "error" not in verdict, verdict.get("error")
    return verdict


@pytest.mark.parametrize("case", ["drop-precision-above-16384", "bf16-variance-at-large-x"])
def test_precision_dropped_only_at_large_magnitudes_is_rejected_by_the_sweep(verdicts: dict[str, Any],
                                                                             case: str) -> None:
    # every other input set, the seeds and the large-magnitude set pass it: none reaches 16384 with precision
    # left to lose (near-max magnitudes overflow the squares in both kernels alike)
    assert _verdict(verdicts, f"{case}/other-input-sets")["passed"]
    swept = _verdict(verdicts, f"{case}/sweep")
    assert not swept["passed"] and "magnitude" in swept["label"]
    assert "its own rounding at their magnitude" in swept["problem"], swept["problem"]


def test_a_correct_reordering_passes_the_sweep(verdicts: dict[str, Any]) -> None:
    swept = _verdict(verdicts, "reordered-row-sum/sweep")
    assert swept["passed"], swept["problem"]
    assert any("magnitude" in label for label in swept["runs"])
    assert _verdict(verdicts, "reordered-row-sum/other-input-sets")["passed"]
