"""Gate 2's fused comparison and error-structure passes on the device: the same figures as the eager paths,
and how long each takes.

    PYTHONPATH=.:server python benchmarks/gpu/fused_tally_check.py OUT_DIR   (or through run_all.py)

Two float32 outputs of 1.6e9 elements each (12.9 GB together, softmax_long_rows' working set), the
candidate's a copy of the original's with special values, poison and a few elements off written in;
then the smaller cases of tests/test_fused_tally.py's kinds. For each: the eager figures
(``kernel._float_figures(..., fused=False)``) and the fused ones, which must be equal, and each path's
time (3 runs after a warm-up, the median and the spread; CUDA synchronised around each). Writes
``fused_tally_check.json`` and ``.md``; changes no GPU setting.

The error-structure sums (gates/fused_structure.py against error_structure._eager_sums) on the same kinds of
pair: the 12.9 GB pair in softmax_long_rows' rows of 393216 (long rows), 16M elements in rows of 37 (short
rows) and without rows; equal to float64 rounding (relative 1e-9; the centred square sums 1e-7).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ELEMENTS = 1_610_612_736  # 6.44 GB of float32 per output


def _timed(call: Any, runs: int = 3) -> tuple[Any, list[float]]:
    import torch

    result = call()  # warm-up (the fused kernel compiles here)
    seconds = []
    for _ in range(runs):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        result = call()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - begin)
    return result, seconds


def _pair(n: int, seed: int) -> tuple[Any, Any]:
    import torch

    from kernelopt_core.sandbox.guarded_buffers import poison_bits

    generator = torch.Generator(device="cuda").manual_seed(seed)
    orig = torch.randn(n, device="cuda", generator=generator)
    cand = orig.clone()
    cand[: n // 3] += 1e-5 * torch.randn(n // 3, device="cuda", generator=generator)
    poison = torch.tensor([poison_bits(torch.float32)], dtype=torch.int32).view(torch.float32).item()
    cand[100:140] = poison
    cand[10], cand[11], cand[12] = math.nan, math.inf, -math.inf
    orig[13], cand[13] = math.nan, 1.0
    orig[14], cand[14] = math.nan, math.nan
    cand[n - 5] += 1.0
    cand[n // 2] -= 0.25
    return cand, orig


def _case(label: str, n: int, atol: float, poison: int | None, seed: int) -> dict[str, Any]:
    from kernelopt_core.gates import kernel

    cand, orig = _pair(n, seed)
    eager, eager_s = _timed(lambda: kernel._float_figures(cand, orig, poison, atol, atol, fused=False))
    fused, fused_s = _timed(lambda: kernel._float_figures(cand, orig, poison, atol, atol))
    return {"case": label, "elements": n, "equal": eager == fused, "eager": eager, "fused": fused,
            "eager_s": eager_s, "fused_s": fused_s,
            "eager_median_s": statistics.median(eager_s), "fused_median_s": statistics.median(fused_s)}


def _sums_close(eager: dict[str, Any], fused: dict[str, Any]) -> bool:
    exact = eager["count"] == fused["count"] and eager["present_rows"] == fused["present_rows"]
    near = all(math.isclose(eager[k], fused[k], rel_tol=1e-9, abs_tol=1e-300)
               for k in ("mean", "worst", "max_abs_ref", "sum_abs_ref", "worst_orig"))
    squares = all(math.isclose(eager[k], fused[k], rel_tol=1e-7, abs_tol=1e-30)
                  for k in ("m2", "row_spread_squares", "sum_orig_err", "sum_cand_err", "sum_abs_orig_err"))
    return exact and near and squares


def _structure_case(label: str, n: int, row_length: int | None, seed: int, reference: bool = False) -> dict[str, Any]:
    import dataclasses

    import torch

    from kernelopt_core.gates import error_structure as es
    from kernelopt_core.gates.fused_structure import fused_structure_sums
    from kernelopt_core.gates.kernel import device_chunk

    cand, orig = _pair(n, seed)
    r64 = orig.double() + 1e-9 * torch.randn(n, device="cuda", dtype=torch.float64) if reference else None
    _, numel, use_rows, group, _ = es._output_layout(orig, row_length, row_length)
    rows = group if use_rows else None
    chunk = device_chunk(cand)
    if r64 is None:
        eager, eager_s = _timed(lambda: es._eager_sums(cand, orig, use_rows, group, numel, chunk))
    else:
        eager, eager_s = _timed(lambda: es._eager_reference_sums(cand, orig, r64, use_rows, group, numel, chunk))
    fused, fused_s = _timed(lambda: fused_structure_sums(cand, orig, rows, r64))
    eager_d, fused_d = dataclasses.asdict(eager), dataclasses.asdict(fused) if fused is not None else None
    return {"case": label, "elements": n, "row_length": row_length, "equal": fused_d is not None and
            _sums_close(eager_d, fused_d), "eager": eager_d, "fused": fused_d, "eager_s": eager_s, "fused_s": fused_s,
            "eager_median_s": statistics.median(eager_s), "fused_median_s": statistics.median(fused_s)}


def run(out_dir: str) -> dict[str, Any]:
    from benchmarks.gpu.devicescript import environment, write_record

    os.makedirs(out_dir, exist_ok=True)
    import torch

    from kernelopt_core.sandbox.guarded_buffers import poison_bits

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    poison = poison_bits(torch.float32)
    rows: list[dict[str, Any]] = []
    for label, n, atol in (("12.9 GB pair", ELEMENTS, 1e-3), ("16M pair", 1 << 24, 1e-3),
                           ("exact (atol = rtol = 0)", 1 << 20, 0.0), ("one block and a bit", 4096 + 7, 1e-3)):
        rows.append(_case(label, n, atol, poison, seed=len(rows)))
        torch.cuda.empty_cache()
    structure: list[dict[str, Any]] = []
    for label, n, row_length, reference in (
            ("12.9 GB pair, rows of 393216", ELEMENTS, 393216, False),
            ("12.9 GB pair and a float64 reference (gate 3), rows of 393216", ELEMENTS, 393216, True),
            ("16M pair, rows of 37", 37 * (1 << 19), 37, False), ("16M pair, no rows", 1 << 24, None, False),
            ("16M pair and a float64 reference, rows of 37", 37 * (1 << 19), 37, True)):
        structure.append(_structure_case(label, n, row_length, seed=10 + len(structure), reference=reference))
        torch.cuda.empty_cache()
    data = {"environment": environment("cuda"), "rows": rows, "structure": structure,
            "all_equal": all(r["equal"] for r in rows + structure)}
    body = ["| case | elements | figures equal | eager s (median, min-max) | fused s (median, min-max) | bad | "
            "unwritten | nonfinite | lost |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        body.append(f"| {r['case']} | {r['elements']} | {'yes' if r['equal'] else '**no**'} "
                    f"| {r['eager_median_s']:.4f} ({min(r['eager_s']):.4f}-{max(r['eager_s']):.4f}) "
                    f"| {r['fused_median_s']:.4f} ({min(r['fused_s']):.4f}-{max(r['fused_s']):.4f}) "
                    f"| {r['eager']['bad']:.0f} | {r['eager']['unwritten']:.0f} | {r['eager']['nonfinite']:.0f} "
                    f"| {r['eager']['lost']:.0f} |")
    body += ["", "Error-structure sums:", "",
             "| case | elements | sums equal | eager s (median, min-max) | fused s (median, min-max) |",
             "|---|---|---|---|---|"]
    for r in structure:
        body.append(f"| {r['case']} | {r['elements']} | {'yes' if r['equal'] else '**no**'} "
                    f"| {r['eager_median_s']:.4f} ({min(r['eager_s']):.4f}-{max(r['eager_s']):.4f}) "
                    f"| {r['fused_median_s']:.4f} ({min(r['fused_s']):.4f}-{max(r['fused_s']):.4f}) |")
    write_record(out_dir, "fused_tally_check", data, "Gate 2's fused passes against the eager ones", body)
    return {"all_equal": data["all_equal"], "rows": [{k: r[k] for k in ("case", "equal", "eager_median_s",
                                                                         "fused_median_s")} for r in rows + structure]}


if __name__ == "__main__":
    import json

    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fused_tally_check"), indent=1, default=str))
