"""Window and strided-access recognition on real Inductor kernels (the H200's CUDA kernels, recorded in
tests/fixtures/window_kernels_h200.json), the families' choice by evidence, the planner's order, and the
generated ring of row results surviving Triton's front end (compiled for sm_90, no GPU needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from window_dumps import ROOT, fixture_cases  # noqa: E402

from kernelopt_core.analyst import EVIDENCE_KEYS  # noqa: E402
from kernelopt_core.search.agents.context import KernelBrief  # noqa: E402
from kernelopt_core.search.agents.planner import PlanRequest, offline_plans  # noqa: E402
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module  # noqa: E402
from kernelopt_core.search.rewrites.strided_model import StridedMismatch, recognise_permute  # noqa: E402
from kernelopt_core.search.rewrites.window_model import WindowMismatch, recognise_window  # noqa: E402
from kernelopt_core.search.rewrites.windowed import WindowPlan, generate_launcher, ring_size  # noqa: E402

CASES = fixture_cases()


def _module(case: str, source: str | None = None) -> Any:
    data = CASES[case]
    return parse_kernel_module(source or data["source"], data["kernel"])


def _context(case: str, **evidence: Any) -> RewriteContext:
    module = _module(case)
    values = dict.fromkeys(EVIDENCE_KEYS)
    values.update(launch_args=CASES[case]["launch_args"], **evidence)
    return RewriteContext(module=module, original=module, device="cuda", evidence=values)


@pytest.mark.parametrize("case, op, kernel, stride, padding, dilation, divisor, constant", [
    ("avg_pool1d_k8s1p4", "avg", (1, 8), (1, 1), (0, 4), (1, 1), "include_pad", 8.0),
    ("max_pool1d_k5s1p2", "max", (1, 5), (1, 1), (0, 2), (1, 1), None, None),
    ("max_pool2d_k4s1p1", "max", (4, 4), (1, 1), (1, 1), (1, 1), None, None),
    ("max_pool2d_k2s2p1d3", "max", (2, 2), (2, 2), (1, 1), (3, 3), None, None),
    ("avg_pool2d_k3s1p1", "avg", (3, 3), (1, 1), (1, 1), (1, 1), "include_pad", 9.0),
    ("avg_pool2d_k3s2p1_ceil_nopad", "avg", (3, 3), (2, 2), (1, 1), (1, 1), "exclude_pad", None),
])
def test_the_window_of_real_cuda_kernels(case: str, op: str, kernel: tuple, stride: tuple, padding: tuple,
                                         dilation: tuple, divisor: str | None, constant: float | None) -> None:
    window = recognise_window(_module(case), CASES[case]["launch_args"])
    assert (window.op, window.kernel, window.stride, window.padding, window.dilation) == \
        (op, kernel, stride, padding, dilation)
    assert window.divisor == divisor and window.divisor_constant() == constant


def test_the_planes_come_from_the_launch() -> None:
    window = recognise_window(_module("max_pool2d_k4s1p1"), CASES["max_pool2d_k4s1p1"]["launch_args"])
    assert (window.planes, window.in_h, window.in_w, window.out_h, window.out_w) == (2048, 512, 512, 511, 511)
    one_d = recognise_window(_module("avg_pool1d_k8s1p4"), CASES["avg_pool1d_k8s1p4"]["launch_args"])
    assert (one_d.planes, one_d.in_h, one_d.in_w, one_d.out_w) == (8192, 1, 65536, 65537)


@pytest.mark.parametrize("old, new, why", [
    ("tl.load(in_ptr0 + ((-3) + x0 + 65536*x1), tmp16, other=0.0)",
     "tl.load(in_ptr0 + ((-3) + x0 + 65536*x1), tmp16, other=1.0)", "masked lanes read 1.0"),
    ("tmp12 = (-3) + x0\n", "tmp12 = (-2) + x0\n", "not one tap of a padded window"),
    ("tmp62 = (tmp60 / tmp61)", "tmp62 = (tmp60 / (tmp61 + 1))", "divisor matches neither"),
    ("tmp18 = tmp11 + tmp17", "tmp18 = tmp11 + tmp17 * 2.0", "not a chain of maxima or a sum"),
])
def test_a_tampered_window_is_refused_with_its_reason(old: str, new: str, why: str) -> None:
    source = CASES["avg_pool1d_k8s1p4"]["source"]
    assert old in source
    with pytest.raises(WindowMismatch, match=why):
        recognise_window(_module("avg_pool1d_k8s1p4", source.replace(old, new)),
                         CASES["avg_pool1d_k8s1p4"]["launch_args"])


def test_shapes_are_needed_and_transposes_are_not_windows() -> None:
    with pytest.raises(WindowMismatch, match="no launch arguments"):
        recognise_window(_module("max_pool2d_k4s1p1"), None)
    with pytest.raises(WindowMismatch, match="one-dimensional"):
        recognise_window(_module("nchw_to_nhwc"), CASES["nchw_to_nhwc"]["launch_args"])


def test_the_permutation_of_a_real_cuda_transpose() -> None:
    copy = recognise_permute(_module("nchw_to_nhwc"), CASES["nchw_to_nhwc"]["launch_args"])
    assert copy.shape == (64, 16384, 256) and copy.in_strides == (4194304, 1, 16384) and copy.inner == 1
    with pytest.raises(StridedMismatch, match="not a copy"):
        recognise_permute(_module("max_pool2d_k4s1p1"), CASES["max_pool2d_k4s1p1"]["launch_args"])


def test_the_evidence_chooses_the_windowed_family() -> None:
    family = FAMILIES["windowed"]
    below = _context("max_pool2d_k4s1p1", sol_pct=24.0, causes=["strided-access"], ideal_bytes=4287000000)
    assert family.not_applicable(below) is None
    variants = family.variants(below)
    # 2D windows: shifted rows first (faster than row block scans on the H200), a block-scan variant last
    assert variants and variants[0].params["method"] == "shifted" and variants[-1].params["method"] == "blockscan"
    assert all(v.params["ideal_bytes"] == 4287000000 and v.params["launcher"] for v in variants)
    assert "4.29 GB" in variants[0].detail and "24% of the speed of light" in variants[0].detail
    near = _context("max_pool2d_k2s2p1d3", sol_pct=103.0, causes=[])
    assert "already at 103%" in family.not_applicable(near)
    other_cause = _context("max_pool2d_k4s1p1", sol_pct=40.0, causes=["re-reads"])
    assert "do not include strided-access" in family.not_applicable(other_cause)
    # Without measurements (the CPU backend) the family applies to what it recognises.
    assert family.not_applicable(_context("avg_pool1d_k8s1p4")) is None
    one_d = family.variants(_context("avg_pool1d_k8s1p4"))
    assert one_d[0].params["method"] == "blockscan" and one_d[0].params["block"] * 8 == 1024
    assert "no pooling window" in family.not_applicable(_context("nchw_to_nhwc"))


def test_the_planner_puts_the_families_the_causes_call_for_first() -> None:
    ctx = _context("avg_pool1d_k8s1p4", sol_pct=62.0, causes=["strided-access"])
    brief = KernelBrief(name=ctx.module.name, kind="poi", device="cuda", original_source=ctx.module.text,
                        tier="memory-bound", directions=[{"name": "coalesce-access"}])
    plans = offline_plans(PlanRequest(brief=brief, node_source=ctx.module.text, context=ctx, n=2))
    assert plans[0].family == "windowed"
    assert any("target: the ideal" in e for e in plans[0].evidence)
    quiet = _context("avg_pool1d_k8s1p4")
    plans = offline_plans(PlanRequest(brief=replace(brief, directions=[]), node_source=quiet.module.text,
                                      context=quiet, n=1))
    assert plans[0].family != "windowed"  # no cause measured or read: the default order decides


_RING_SCRIPT = """
import re, sys, importlib.util
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    return module


def carried(fn, signature, constants):
    constexprs = {(fn.arg_names.index(k),): v for k, v in constants.items()}
    signature = {**signature, **{k: "constexpr" for k in constants}}
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", 90, 32))
    loops = re.findall(r"scf.for .*? iter_args\\((.*?)\\) ->", compiled.asm["ttir"])
    return max((part.count("=") for part in loops), default=0)


ours = load("launcher", sys.argv[1])._pool_window
print("@ours", carried(ours, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BQ": 32, "ROWS": 8}))
explore = load("explore", sys.argv[2])._pool2d_rolling_kernel
ints = {n: "i32" for n in ("H", "W", "OH", "OW", "n_tw", "n_tr")}
print("@explore", carried(explore, {"x_ptr": "*fp32", "y_ptr": "*fp32", **ints},
                          {"K": 3, "SH": 1, "SW": 1, "PH": 1, "PW": 1, "IS_MAX": True, "BW": 256, "ROWS": 64}))
"""


def test_the_ring_of_row_results_survives_tritons_front_end(tmp_path: Path) -> None:
    """Triton's front end keeps a variable loop-carried only when its value after the body differs from
    its value before: ring slots that enter the loop as one tensor (`p2 = p1`) look unchanged and are
    dropped. The interpreter never notices; on the H200 the prototype's 3- and 4-row windows lost rows
    (benchmarks/results/h200/explore: rolling_* wrong). The generated launcher carries every row the
    next trip needs; the prototype's ring, compiled the same way, does not."""
    window = recognise_window(_module("max_pool2d_k4s1p1"), CASES["max_pool2d_k4s1p1"]["launch_args"])
    source = generate_launcher(window, WindowPlan("blockscan", 32, 8, 4), "kern", ["in_ptr0", "out_ptr0", "xnumel"])
    path = tmp_path / "launcher.py"
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _RING_SCRIPT, str(path),
                           str(ROOT / "benchmarks/explore/explore_windows.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    found = {x.split()[0]: int(x.split()[1]) for x in done.stdout.splitlines() if x.startswith("@")}
    assert set(found) == {"@ours", "@explore"}, done.stderr[-3000:]
    # Rows t, t-1, t-2 go into the next trip (slot 3 is written before it is read).
    assert found["@ours"] == ring_size(window) - 1 == 3
    assert found["@explore"] < 2  # a 3-row window needs 2 earlier rows; the shared start lost one


def test_the_evidence_chooses_the_strided_access_family() -> None:
    family = FAMILIES["strided_access"]
    assert "already at 100%" in family.not_applicable(_context("nchw_to_nhwc", sol_pct=99.8, causes=[]))
    assert "do not include strided-access or low-parallelism" in family.not_applicable(
        _context("nchw_to_nhwc", sol_pct=60.0, causes=["re-reads"]))
    slow = _context("nchw_to_nhwc", sol_pct=45.0, causes=["strided-access"])
    variants = family.variants(slow)
    assert variants and all(v.params["shape"] == "transpose" and v.params["ideal_bytes"] for v in variants)
    assert "loaded along the input's contiguous dimension" in variants[0].detail
