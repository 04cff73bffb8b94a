"""The reduction prototypes of benchmarks/explore/explore_reductions.py, run in Triton's CPU interpreter.

Every variant the GPU script times is checked here at tiny sizes against torch, with its output
poisoned first; the launchers are also driven with small blocks so that loops, chunk tails, splits
and persistent row loops all run. The cooperative kernels need co-resident programs, which the
interpreter (programs one after another) does not have: they run here with one program per row,
and with two, where the bounded wait must end the kernel and raise its error flag instead of hanging.

Triton picks the interpreter when *it* is imported (its own ``tl.sum`` is a jit function), so the
kernel checks run in one subprocess started with TRITON_INTERPRET=1, whatever this process imported
before; each check is still its own test item. The host-side code is tested here directly.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "explore" / "explore_reductions.py"
SOFTMAX_DUMP = ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11" / "softmax" / "output_code.py"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = _load("explore_reductions_under_test")  # interpreted only inside the checks' subprocess
TINY_FACTS = EX.DeviceFacts(sms=4, l2_bytes=4096)
REGISTERED = [(p.name, v.name, v.gpu_only) for p in EX.PATTERNS for v in p.variants(p.shapes["tiny"], TINY_FACTS)]
GPU_ONLY = ("cooperative: needs all its programs co-resident; the interpreter runs programs one after another "
            "(checked with one program per row, and with two, where the bounded wait must end the kernel)")

# ----------------------------------------------------------------------------------------------
# Kernel checks: run in the interpreter subprocess (run_checks), reported per item below.

CHECKS: dict[str, Callable[[ModuleType], None]] = {}


def _check(out: torch.Tensor, ref: torch.Tensor, tol: float = 2e-5) -> None:
    assert not torch.isnan(out).any(), "an output element was never written (still NaN)"
    err = (out.double() - ref.double()).norm() / ref.double().norm()
    assert err <= tol, f"relative error {err:.3g}"


def _poisoned(ref: torch.Tensor) -> torch.Tensor:
    return torch.full_like(ref, float("nan"))


def _registered(pattern_name: str, variant_name: str) -> Callable[[ModuleType], None]:
    def check(ex: ModuleType) -> None:
        pattern = ex.pattern_by_name(pattern_name)
        params = pattern.shapes["tiny"]
        variant = next(v for v in pattern.variants(params, TINY_FACTS) if v.name == variant_name)
        inputs = pattern.make_inputs(params, "cpu", 3)
        ref = pattern.reference(*inputs)
        out = _poisoned(ref)
        variant.fn(*inputs, out)
        _check(out, ref)

    return check


for _pattern, _variant, _gpu_only in REGISTERED:
    if not _gpu_only:
        CHECKS[f"registered/{_pattern}/{_variant}"] = _registered(_pattern, _variant)

OPS = {"softmax": (0, lambda x: torch.softmax(x, 1)), "log_softmax": (1, lambda x: torch.log_softmax(x, 1)),
       "l1": (2, lambda x: x / x.abs().sum(1, keepdim=True)), "l2": (3, lambda x: x / x.norm(dim=1, keepdim=True)),
       "moments": (4, lambda x: F.layer_norm(x, x.shape[1:], eps=1e-5))}


def _row_launchers(name: str) -> Callable[[ModuleType], None]:
    """Loops of several tiles, uneven chunk tails, several rows per persistent program."""
    def check(ex: ModuleType) -> None:
        op, torch_fn = OPS[name]
        x = torch.randn(5, 100) * 3 + 0.5
        ref = torch_fn(x)
        eps = 1e-5 if op == ex.MOMENTS else 0.0
        even = x[:, :64].contiguous()  # a power-of-two row: the single-read kernel's no-mask path
        runs = {
            "split": lambda out: ex.rows_split(x, out, op, splits=3, block=16, num_warps=1, eps=eps),
            "twopass": lambda out: ex.rows_twopass(x, out, op, programs=2, block=16, num_warps=1, eps=eps),
            "single": lambda out: ex.rows_single(x, out, op, num_warps=1, eps=eps),
            "coop_g1": lambda out: ex.rows_coop(x, out, op, group=1, num_warps=1, eps=eps, max_programs=2),
            "single_even": lambda out: ex.rows_single(even, out, op, num_warps=1, eps=eps),
            "coop_g1_even": lambda out: ex.rows_coop(even, out, op, group=1, num_warps=1, eps=eps, max_programs=2),
        }
        for label, launch in runs.items():
            want = torch_fn(even) if label.endswith("_even") else ref
            out = _poisoned(want)
            launch(out)
            try:
                _check(out, want)
            except AssertionError as exc:
                raise AssertionError(f"{label}: {exc}") from None

    return check


for _op in OPS:
    CHECKS[f"rows/{_op}"] = _row_launchers(_op)


def check_variance_far_from_zero(ex: ModuleType) -> None:
    """Shifted sums: a mean of 1e3 and unit spread must not cancel the variance away."""
    x = torch.randn(3, 300) + 1000.0
    ref = F.layer_norm(x, (300,), eps=1e-5)
    out = _poisoned(ref)
    ex.rows_split(x, out, ex.MOMENTS, splits=4, block=32, num_warps=1, eps=1e-5)
    _check(out, ref, tol=1e-3)


def check_affine_norms(ex: ModuleType) -> None:
    x = torch.randn(3, 4, 5, 7)
    w, b = torch.randn(4, 5, 7), torch.randn(4, 5, 7)
    ref = F.layer_norm(x, (4, 5, 7), w, b, 1e-5)
    out = _poisoned(ref)
    ex.layer_norm_split(x, w, b, out, splits=5, block=16, num_warps=1)
    _check(out, ref)
    out = _poisoned(ref)
    ex.layer_norm_coop(x, w, b, out, group=1, num_warps=1, max_programs=2)
    _check(out, ref)

    xg = torch.randn(2, 16, 3, 5)
    wg, bg = torch.randn(16), torch.randn(16)
    ref = F.group_norm(xg, 8, wg, bg, 1e-5)
    out = _poisoned(ref)
    ex.group_norm_split(xg, wg, bg, out, groups=8, splits=2, block=8, num_warps=1)
    _check(out, ref)
    out = _poisoned(ref)
    ex.group_norm_coop(xg, wg, bg, out, groups=8, group=1, num_warps=1, max_programs=3)
    _check(out, ref)


def check_instance_norm_launchers(ex: ModuleType) -> None:
    x = torch.randn(2, 3, 6, 7)
    ref = F.instance_norm(x, eps=1e-5)
    for launch in (lambda out: ex.instance_norm_split(x, out, splits=3, block=16, num_warps=1),
                   lambda out: ex.instance_norm_twopass(x, out, programs=4, block=16, num_warps=1),
                   lambda out: ex.instance_norm_coop(x, out, group=1, num_warps=1, max_programs=4)):
        out = _poisoned(ref)
        launch(out)
        _check(out, ref)


def check_coop_without_co_residency_ends_and_flags_it(ex: ModuleType) -> None:
    """Two programs per row, run one after another: the first cannot see its partner, waits MAX_SPIN, and
    the launcher's error flag says so: a wrong answer that is reported, never a hang."""
    x = torch.randn(2, 64)
    out = torch.full_like(x, float("nan"))
    ex.rows_coop(x, out, ex.SOFTMAX, group=2, num_warps=1, max_programs=4, max_spin=20)
    assert ex.coop_spin_limit_hit()
    ex.rows_coop(x, out, ex.SOFTMAX, group=1, num_warps=1, max_programs=4)
    assert not ex.coop_spin_limit_hit()


def check_coop_refuses_a_group_larger_than_the_grid(ex: ModuleType) -> None:
    x = torch.randn(2, 64)
    try:
        ex.rows_coop(x, torch.empty_like(x), ex.SOFTMAX, group=8, num_warps=1, max_programs=4)
    except ex.VariantUnfit:
        return
    raise AssertionError("a group of 8 programs was launched on a grid of 4")


def check_cross_entropy_with_a_partial_last_program(ex: ModuleType) -> None:
    logits, targets = torch.randn(7, 33) * 2, torch.randint(0, 33, (7,))
    ref = F.cross_entropy(logits, targets)
    for rows in (1, 4):
        out = torch.full((), float("nan"))
        ex.cross_entropy_rows(logits, targets, out, rows_per_program=rows, num_warps=1)
        assert math.isclose(float(out), float(ref), rel_tol=1e-5), (rows, float(out), float(ref))


def check_column_reductions_with_row_splits_and_tails(ex: ModuleType) -> None:
    x = torch.randn(37, 20)
    for splits in (1, 3):
        out = torch.full((20,), float("nan"))
        ex.col_sum_tiled(x, out, splits=splits, block_r=4, block_c=8, num_warps=1)
        _check(out, x.sum(0))
        ref = torch.log_softmax(x, 0)
        out = _poisoned(ref)
        ex.col_log_softmax_tiled(x, out, splits=splits, block_r=4, block_c=8, num_warps=1)
        _check(out, ref)


for _fn in (check_variance_far_from_zero, check_affine_norms, check_instance_norm_launchers,
            check_coop_without_co_residency_ends_and_flags_it, check_coop_refuses_a_group_larger_than_the_grid,
            check_cross_entropy_with_a_partial_last_program, check_column_reductions_with_row_splits_and_tails):
    CHECKS[_fn.__name__.removeprefix("check_")] = _fn


def run_checks(out_path: str) -> None:
    """In the subprocess: every check against the interpreted kernels; name -> None or the failure."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    results: dict[str, str | None] = {}
    for name, check in CHECKS.items():
        try:
            check(EX)
            results[name] = None
        except Exception as exc:  # noqa: BLE001 - reported by the test item of that name
            results[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
    Path(out_path).write_text(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    out = tmp_path_factory.mktemp("explore_reductions") / "checks.json"
    code = (f"import importlib.util\nspec = importlib.util.spec_from_file_location('explore_checks', {__file__!r})\n"
            "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
            f"module.run_checks({str(out)!r})\n")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


KERNEL_ITEMS = [*CHECKS, *(f"registered/{p}/{v}" for p, v, gpu_only in REGISTERED if gpu_only)]


@pytest.mark.parametrize("name", KERNEL_ITEMS)
def test_kernels_in_the_interpreter(interpreted: dict[str, str | None], name: str) -> None:
    if name not in CHECKS:
        pytest.skip(GPU_ONLY)
    assert name in interpreted, "the check did not run"
    assert interpreted[name] is None, interpreted[name]


def test_every_pattern_has_variants_and_gpu_only_ones_are_the_cooperative_ones() -> None:
    assert len(EX.PATTERNS) == 12 and len({name for name, _, _ in REGISTERED}) == 12
    assert len(REGISTERED) >= 35 and sum(g for _, _, g in REGISTERED) >= 8
    families = {v.family for p in EX.PATTERNS for v in p.variants(p.shapes["tiny"], TINY_FACTS) if v.gpu_only}
    assert families == {"coop"}


# ----------------------------------------------------------------------------------------------
# Host-side code


def test_inductor_source_analysis_finds_the_second_read() -> None:
    src = SOFTMAX_DUMP.read_text()
    kernel = src[src.index("@triton.jit"):src.index("''', device_str")]
    looped = EX.analyse_inductor_source(kernel, {"xnumel": 4096, "r0_numel": 8192}, {"XBLOCK": 1, "R0_BLOCK": 2048})
    assert looped == {"reduction_loops": 2, "inputs_loaded_in_several_loops": ["in_ptr0"], "loop_iterations": 4,
                      "reads_rows_twice": True}
    whole_row = EX.analyse_inductor_source(kernel, {"r0_numel": 8192}, {"R0_BLOCK": 8192})
    assert whole_row["loop_iterations"] == 1 and not whole_row["reads_rows_twice"]
    persistent = EX.analyse_inductor_source("tmp0 = tl.load(in_ptr0 + r0_1)\n", {"r0_numel": 64}, {"XBLOCK": 8})
    assert persistent == {"reduction_loops": 0, "inputs_loaded_in_several_loops": [], "loop_iterations": None,
                          "reads_rows_twice": False}

    launcher = SimpleNamespace(config=SimpleNamespace(kwargs={"XBLOCK": 2, "R0_BLOCK": 2048}, num_warps=16,
                                                      num_stages=1), n_regs=40)
    tuner = SimpleNamespace(fn=SimpleNamespace(__name__="triton_red_fused_softmax_0", src=kernel),
                            triton_meta={"signature": {"in_ptr0": "*fp32", "out_ptr2": "*fp32", "xnumel": "i32",
                                                       "r0_numel": "i32"}},
                            inductor_meta={"grid_type": "Grid1D"}, launchers=[launcher])
    info, source = EX.describe_inductor_launch(tuner, (object(), object(), 4096, 8192))
    assert source == kernel
    assert info["kind"] == "looped reduction" and info["programs"] == 2048 and info["num_warps"] == 16
    assert info["numels"] == {"xnumel": 4096, "r0_numel": 8192} and info["n_regs"] == 40
    assert info["reads_rows_twice"]


def test_summary_picks_the_fastest_correct_variant_and_reports_families() -> None:
    results = {"copy_bandwidth": {"tb_per_s": 4.2}, "skipped": ["x: out of time"], "errors": [], "patterns": [
        {"pattern": "p1", "inductor": {"median_ms": 2.0, "sol_pct": 40.0}, "variants": [
            {"name": "a", "family": "split", "speedup": 1.5, "median_ms": 1.333, "sol_pct": 60.0, "ok": True},
            {"name": "b", "family": "coop", "rel_l2_err": 0.5, "ok": False},
            {"name": "c", "family": "coop", "speedup": 1.05, "median_ms": 1.9, "sol_pct": 42.0, "ok": True}]},
        {"pattern": "p2", "inductor": {"median_ms": 1.0, "sol_pct": 90.0}, "variants": [
            {"name": "d", "family": "split", "speedup": 0.9, "median_ms": 1.1, "sol_pct": 80.0, "ok": True}]},
        {"pattern": "p3", "error": "RuntimeError: boom"}]}
    summary = EX.summarise(results)
    rows = {r["pattern"]: r for r in summary["per_pattern"]}
    assert rows["p1"]["best"] == "a" and rows["p1"]["verdict"] == "WIN"
    assert rows["p2"]["verdict"] == "no gain" and rows["p3"]["verdict"] == "no correct variant"
    families = {f["family"]: f for f in summary["families"]}
    assert families["split"]["wins"] == 1 and families["split"]["won_on"] == ["p1"]
    assert families["split"]["geomean_best"] == pytest.approx(math.sqrt(1.5 * 0.9), abs=1e-3)
    assert families["coop"]["best"] == 1.05 and families["coop"]["wins"] == 0
    text = EX.markdown(results)
    assert "| p1 | 2 | 40 | a | 1.333 | 1.5 | 60 | WIN |" in text and "WRONG" in text and "boom" in text
    short = EX.short_summary(results)
    assert len(short) < 1500 and "p1: 2 (40) -> a" in short


def test_plan_counts_each_input_and_output_once() -> None:
    rows = {r["pattern"]: r for r in EX.plan(names=["groupnorm_16x64x512x512_g8", "cross_entropy_32768x4096"])}
    group_norm = rows["groupnorm_16x64x512x512_g8"]
    x = 16 * 64 * 512 * 512 * 4
    assert group_norm["ideal_bytes"] == 2 * x + 2 * 64 * 4  # x, weight, bias read once; out written once
    assert group_norm["floor_us"] == pytest.approx(group_norm["ideal_bytes"] / 4.2e12 * 1e6, abs=0.1)
    split = next(v for v in group_norm["variants"] if v["family"] == "split")
    assert split["traffic_model_bytes"] == group_norm["ideal_bytes"] + x  # x read twice
    coop = next(v for v in group_norm["variants"] if v["family"] == "coop")
    assert coop["traffic_model_bytes"] == group_norm["ideal_bytes"] and coop["gpu_only"]
    assert rows["cross_entropy_32768x4096"]["ideal_bytes"] == 32768 * 4096 * 4 + 32768 * 8 + 4


def test_run_without_a_gpu_says_so(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = EX.run(str(tmp_path), budget_s=30)
    assert "CUDA is not available" in result["error"]
    assert (tmp_path / "explore_reductions.json").is_file() and (tmp_path / "explore_reductions.md").is_file()
