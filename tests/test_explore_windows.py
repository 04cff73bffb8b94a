"""The windowed-op and strided-access prototypes of benchmarks/explore/explore_windows.py, in the Triton
interpreter on tiny ragged shapes against torch (the GPU script's kernels, variants and harness).

The checks run in one child pytest process started with TRITON_INTERPRET=1 (Triton reads it when
``@triton.jit`` runs and when it imports its own modules, and the dry run switches Inductor to the CPU
Triton backend): nothing leaks into the rest of a test session. In this process only
``test_interpreted_checks_in_a_fresh_process`` runs; it fails with the child's report.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "explore" / "explore_windows.py"
CHILD = os.environ.get("KO_EXPLORE_WINDOWS_CHILD") == "1"
child_only = pytest.mark.skipif(not CHILD, reason="runs in the interpreted child process")


@pytest.mark.slow  # every exploration kernel in the interpreter: ~35 s
def test_interpreted_checks_in_a_fresh_process() -> None:
    if CHILD:
        pytest.skip("this is the child")
    env = {**os.environ, "TRITON_INTERPRET": "1", "KO_EXPLORE_WINDOWS_CHILD": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__))],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


@pytest.fixture(scope="module")
def ew() -> ModuleType:
    # Loaded as run_all.py loads it: from its path, not registered in sys.modules.
    spec = importlib.util.spec_from_file_location("explore_windows_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _poisoned(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.full(shape, float("nan"))


def _torch_pool2d(x: torch.Tensor, k: int, s: int, p: int, op: str, d: int = 1) -> torch.Tensor:
    return F.max_pool2d(x, k, s, p, d) if op == "max" else F.avg_pool2d(x, k, s, p)


def _assert_matches(out: torch.Tensor, ref: torch.Tensor, exact: bool) -> None:
    assert out.shape == ref.shape
    assert not torch.isnan(out).any(), "an output element was never written"
    if exact:
        assert torch.equal(out, ref)
    else:
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


# (kernel, stride, padding): the campaign's three max poolings and its avg one, then the other quad phases
POOL_CONFIGS = [(4, 1, 1), (3, 2, 1), (2, 2, 0), (3, 1, 1), (4, 2, 2), (2, 1, 0), (4, 4, 0), (3, 4, 1)]
POOL_CASES = [(*c, "max") for c in POOL_CONFIGS] + [(4, 1, 1, "avg"), (3, 1, 1, "avg"), (3, 2, 1, "avg")]


@child_only
@pytest.mark.parametrize("kernel,stride,padding,op", POOL_CASES)
def test_pool2d_variants_match_torch(ew: ModuleType, kernel: int, stride: int, padding: int, op: str) -> None:
    torch.manual_seed(kernel * 100 + stride * 10 + padding)
    x = torch.randn(1, 2, 11, 21)  # ragged against every block below: 2 x 2 or 2 x 3 tiles per plane
    ref = _torch_pool2d(x, kernel, stride, padding, op)
    calls = [(ew.pool2d_tile, {"BH": 8, "BW": 16}), (ew.pool2d_rolling, {"BW": 16, "ROWS": 4})]
    if stride in (1, 2, 4):
        calls.append((ew.pool2d_rolling_quad, {"BQ": 4, "ROWS": 4}))
    for fn, cfg in calls:
        out = _poisoned(tuple(ref.shape))
        fn(x, out, kernel=kernel, stride=stride, padding=padding, op=op, **cfg)
        _assert_matches(out, ref, exact=op == "max")


@child_only
def test_max_pool_propagates_nan_and_handles_minus_inf(ew: ModuleType) -> None:
    x = torch.randn(1, 2, 7, 14)
    x[0, 0, 4, 5] = float("nan")
    x[0, 1] = float("-inf")
    ref = F.max_pool2d(x, 3, 1, 1)
    for fn, cfg in [(ew.pool2d_rolling_quad, {"BQ": 4, "ROWS": 8}), (ew.pool2d_rolling, {"BW": 16, "ROWS": 8}),
                    (ew.pool2d_tile, {"BH": 8, "BW": 16})]:
        out = torch.zeros_like(ref)
        fn(x, out, kernel=3, stride=1, padding=1, op="max", **cfg)
        assert torch.equal(torch.isnan(out), torch.isnan(ref)), fn.__name__
        assert torch.equal(torch.nan_to_num(out), torch.nan_to_num(ref)), fn.__name__


@child_only
def test_tile_pool_with_dilation(ew: ModuleType) -> None:
    x = torch.randn(1, 2, 12, 15)
    ref = F.max_pool2d(x, 3, 2, 1, dilation=2)
    out = _poisoned(tuple(ref.shape))
    ew.pool2d_tile(x, out, kernel=3, stride=2, padding=1, dilation=2, op="max", BH=4, BW=4)
    _assert_matches(out, ref, exact=True)


@child_only
@pytest.mark.parametrize("kernel,padding", [(8, 4), (4, 1), (8, 0), (2, 1)])
def test_avgpool1d_variants_match_torch(ew: ModuleType, kernel: int, padding: int) -> None:
    torch.manual_seed(kernel + padding)
    x = torch.randn(1, 2, 53)
    ref = F.avg_pool1d(x, kernel, 1, padding)
    for fn, cfg in [(ew.avgpool1d_blockscan, {"BQ": 2}), (ew.avgpool1d_tilescan, {"BW": 16}),
                    (ew.avgpool1d_shifted, {"BW": 16})]:
        out = _poisoned(tuple(ref.shape))
        fn(x, out, kernel=kernel, stride=1, padding=padding, **cfg)
        _assert_matches(out, ref, exact=False)


@child_only
def test_avgpool1d_shifted_with_stride(ew: ModuleType) -> None:
    x = torch.randn(2, 2, 40)
    ref = F.avg_pool1d(x, 8, 4, 2)
    out = _poisoned(tuple(ref.shape))
    ew.avgpool1d_shifted(x, out, kernel=8, stride=4, padding=2, BW=4)
    _assert_matches(out, ref, exact=False)


@child_only
@pytest.mark.parametrize("use_trans,group_m", [(True, 1), (False, 1), (True, 3)])
def test_transposes_match_torch(ew: ModuleType, use_trans: bool, group_m: int) -> None:
    x = torch.randn(37, 50)
    out = _poisoned((50, 37))
    ew.transpose_2d(x, out, BM=16, BN=8, GROUP_M=group_m, use_trans=use_trans)
    _assert_matches(out, x.t().contiguous(), exact=True)
    y = torch.randn(2, 5, 3, 7)
    out = _poisoned((2, 3, 7, 5))
    ew.nchw_to_nhwc(y, out, BM=4, BN=8, GROUP_M=group_m, use_trans=use_trans)
    _assert_matches(out, y.permute(0, 2, 3, 1).contiguous(), exact=True)


@child_only
def test_cumsum_variants_match_torch(ew: ModuleType) -> None:
    x = torch.randn(3, 300)
    ref = torch.cumsum(x, dim=1)
    for fn, cfg in [(ew.cumsum_rowloop, {"BLOCK": 64}), (ew.cumsum_twolevel, {"CHUNK": 32}),
                    (ew.cumsum_twolevel, {"CHUNK": 512})]:
        out = _poisoned(tuple(ref.shape))
        fn(x, out, **cfg)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@child_only
def test_quad_geometry_covers_every_output_once(ew: ModuleType) -> None:
    for kernel, stride, padding in POOL_CONFIGS:
        if stride not in (1, 2, 4):
            continue
        out_width = ew.pool_out_size(21, kernel, stride, padding)
        geo = ew.quad_geometry(kernel, stride, padding, out_width)
        produced = [g * geo.per_quad + geo.first_output + k
                    for g in range(geo.g_min, geo.g_min + geo.n_quads) for k in range(geo.per_quad)]
        inside = [o for o in produced if 0 <= o < out_width]
        assert inside == list(range(out_width)), (kernel, stride, padding)
        for g in range(geo.g_min, geo.g_min + geo.n_quads):  # each window starts where its output says
            for k in range(geo.per_quad):
                assert 4 * g + geo.phase + k * stride == (g * geo.per_quad + geo.first_output + k) * stride - padding


@child_only
def test_variants_refuse_what_they_do_not_support(ew: ModuleType) -> None:
    x = torch.randn(1, 1, 16, 16)
    with pytest.raises(ValueError, match="kernel <= 4"):
        ew.pool2d_rolling(x, torch.empty(1, 1, 12, 12), kernel=5, stride=1, padding=0)
    with pytest.raises(ValueError, match="stride of 1, 2 or 4"):
        ew.pool2d_rolling_quad(x, torch.empty(1, 1, 5, 5), kernel=3, stride=3, padding=0)
    with pytest.raises(ValueError, match="shape"):
        ew.pool2d_tile(x, torch.empty(1, 1, 15, 15), kernel=3, stride=1, padding=1)
    with pytest.raises(ValueError, match="power of two"):
        ew.avgpool1d_blockscan(torch.randn(1, 1, 32), torch.empty(1, 1, 31), kernel=6, stride=1, padding=2)
    with pytest.raises(ValueError, match="contiguous"):
        ew.transpose_2d(torch.randn(8, 8).t(), torch.empty(8, 8))


@child_only
def test_every_campaign_config_records_its_launches(ew: ModuleType) -> None:
    """What the background compile process warms: every config of every case, on meta tensors."""
    cases = ew.build_cases()
    launches = ew.collect_launches(list(ew.CASE_ORDER))
    n_configs = sum(len(v.configs) for c in cases.values() for v in c.variants)
    assert len(launches) >= n_configs
    assert all(0 < launch.grid[0] < 2**31 for launch in launches)
    assert all(hasattr(getattr(ew, launch.kernel_name), "warmup") for launch in launches)  # globals restored
    quads = [launch for launch in launches if launch.kernel_name == "_pool2d_quad_kernel"]
    assert quads and all(q.kwargs["BQ"] >= 32 * q.kwargs["num_warps"] for q in quads)  # whole quads per thread


@child_only
def test_parse_inductor_code_reads_the_h200_dump(ew: ModuleType) -> None:
    code = (ROOT / "tests/fixtures/inductor-h200-torch2.11/transpose/output_code.py").read_text()
    kernels = ew.parse_inductor_code([code])
    assert kernels and all(k["name"].startswith("triton_") for k in kernels)
    assert all(k["num_load"] >= 1 and k["launch"] and k["launch"].startswith(k["name"]) for k in kernels)


@child_only
def test_dry_run_of_the_campaign_on_the_cpu(ew: ModuleType, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU script's own run() on the CPU Triton backend: Inductor compiles, checks, timings, report."""
    from kernelopt_core.backends import cpu_triton

    cpu_triton.activate()
    monkeypatch.setenv("KERNELOPT_WINDOWS_CASES", "maxpool2d_k4s1p1,nonexistent")
    monkeypatch.setenv("KERNELOPT_GPU_BUDGET_S", "600")
    monkeypatch.setattr(ew, "NSETS", 1)
    monkeypatch.setattr(ew, "MODE", "default")  # the same code path; autotuning interpreted kernels is slow
    build_cases = ew.build_cases

    def one_config_each(tiny: bool = False) -> dict:
        cases = build_cases(tiny)
        for case in cases.values():
            for variant in case.variants:
                variant.configs = variant.configs[:1]
        return cases

    monkeypatch.setattr(ew, "build_cases", one_config_each)
    summary = ew.run(str(tmp_path), device="cpu", tiny=True)
    case = summary["cases"]["maxpool2d_k4s1p1"]
    assert case["status"] == "done" and case["inductor_ms"] and case["best"], summary
    assert any("nonexistent" in s for s in summary["skipped"])
    report = (tmp_path / "explore_windows.json").read_text()
    assert '"status": "wrong"' not in report and '"status": "error"' not in report, report[-3000:]
    assert "triton_poi_fused_max_pool2d" in report  # Inductor's kernel was recorded
    md = (tmp_path / "explore_windows.md").read_text()
    assert "## Verdict" in md and "rolling_quad" in md
    assert (tmp_path / "inductor_maxpool2d_k4s1p1.txt").read_text().count("tl.load(") == 16
