"""Welford statistics cut into chunks: no empty lane, so squares past float32's range give +inf as Inductor's.

An empty Welford partial (weight 0) combined with a full one gives NaN once the squared differences overflow
(0 x inf in ``welford_combine``), where Inductor's kernel, whose lanes all hold elements at real sizes, gives
+inf; gate 2's near-max inputs then reject a correct candidate. On the group statistics of
tests/optimize_problems/conv_group_norms.py (2 samples x 4 groups of 1,600 elements, channels-last), in
Triton's CPU interpreter: split_programs' chunks, channel_groups' shifted sums and shifted_moments' (one
program a row, no chunks: there ``S2 - S1 * S1 / n`` in float32 gave inf - inf = NaN), against float64 on
ordinary inputs and against +inf where the squares overflow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import compile_example

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.search.rewrites import parse_kernel_module
from kernelopt_core.search.rewrites.reduction_passes import decompose
from kernelopt_core.search.rewrites.split_programs import split_shapes

PROBLEM = Path(__file__).resolve().parent / "optimize_problems" / "conv_group_norms.py"

SCRIPT = """
import json, sys
from kernelopt_core.graph_module import prepare_backend
prepare_backend("cpu")
import torch
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.launchers import load_launcher
from kernelopt_core.search.rewrites import parse_kernel_module
from kernelopt_core.search.rewrites import channel_groups, shifted_moments, split_programs
from torch._inductor.async_compile import AsyncCompile
from kernelopt_core.search.rewrites.reduction_passes import decompose

(kernel,) = [k for k in parse_output_code(sys.argv[1]).kernels
             if k.kind == "red" and "native_group_norm" in k.name and "logsumexp" not in k.name]
reduction = decompose(parse_kernel_module(kernel.source, kernel.name))
sources = {
    "channel_groups": channel_groups.launcher_source(reduction, channel_groups.find_grouping(reduction),
                                                     channel_groups.GroupShape(32, 4, 128, 4), shifted=True),
    "split_programs": split_programs.launcher_source(reduction, split_programs.split_shapes(reduction, 132)[0]),
    "shifted_moments": shifted_moments.shifted_source(parse_kernel_module(kernel.source, kernel.name)),
}
out = {}
for family, source in sources.items():
    if family == "shifted_moments":  # Inductor's kernel with its Welford step replaced: compiled as Inductor's
        compiled = AsyncCompile().triton(kernel.name, source, "cpu")
        compiled = compiled.result() if hasattr(compiled, "result") else compiled
        launcher = type("Run", (), {"run": staticmethod(lambda *a: compiled.run(*a, stream=0))})
    else:
        launcher = load_launcher(kernel.name, source, "cpu", directory=sys.argv[2])
    for label, scale in (("normal", 3.0), ("overflowing", 1e30)):
        torch.manual_seed(0)
        x = torch.randn(2, 400, 16) * scale + scale / 3  # channels-last: sample, pixel, channel
        mean, m2 = torch.empty(8), torch.empty(8)
        launcher.run(x, mean, m2, 8, 1600)
        rows = x.double().reshape(2, 400, 4, 4).permute(0, 2, 1, 3).reshape(8, 1600)
        ref_m2 = ((rows - rows.mean(1, keepdim=True)) ** 2).sum(1)
        out[f"{family}|{label}"] = {
            "mean_error": ((mean.double() - rows.mean(1)).abs() / rows.abs().max()).max().item(),
            "m2_error": ((m2.double() - ref_m2).abs() / ref_m2).max().item(),
            "m2": [str(v) for v in m2.tolist()]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_example(PROBLEM, tmp_path_factory.mktemp("conv_group_norms"), TORCHINDUCTOR_PERSISTENT_REDUCTIONS="0")


def test_a_welford_statistic_is_split_into_a_power_of_two_of_chunks_with_no_empty_lane(dump: Path) -> None:
    (kernel,) = [k for k in parse_output_code(str(dump)).kernels
                 if k.kind == "red" and "native_group_norm" in k.name and "logsumexp" not in k.name]
    reduction = decompose(parse_kernel_module(kernel.source, kernel.name))
    shapes = split_shapes(reduction, 132)
    assert shapes
    for shape in shapes:
        assert shape.chunks & (shape.chunks - 1) == 0  # the finish kernel's vector of partials is full
        assert 1600 - (shape.chunks - 1) * shape.chunk >= shape.block  # so is every lane of the last chunk


def test_the_chunked_statistics_match_float64_and_overflow_to_inf_like_welford(dump: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(dump), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for family in ("channel_groups", "split_programs", "shifted_moments"):
        normal = result[f"{family}|normal"]
        assert normal["mean_error"] < 1e-6 and normal["m2_error"] < 1e-5, (family, normal)
        # squares past float32's range: Welford's M2 with every lane full is +inf, not NaN
        assert result[f"{family}|overflowing"]["m2"] == ["inf"] * 8, family
