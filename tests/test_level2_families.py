"""The level-2 rewrite family (shifted_moments) on KernelBench level-2 graphs compiled for the CPU backend.

KernelBench's problems 21 (conv, add, scale, sigmoid, group norm) and 92 (conv, group norm, tanh,
hardswish, residual, logsumexp), benchmarks/problems/level2, at their tiny scale with
TORCHINDUCTOR_PERSISTENT_REDUCTIONS=0: each group holds 2 x 23 x 23 = 1058 values, above the 1024 up
to which Inductor's CPU device uses a two-step variance, so its statistics kernel is the looped
Welford reduction it writes on a GPU (in fp32 on CUDA, Welford at every length).

* the family is offered for the statistics kernel of both graphs, and only for it: every other kernel
  is declined with the reason; the offline planner proposes it for the statistics kernel;
* its candidates pass gate 1 and, on the interpreter, gates 2 and 3;
* a deliberately wrong variant (masked lanes counted into the sums) is rejected by gate 2;
* a per-lane count is kept only where the loop's mask is more than the row's end;
* on the H200 dump's Welford layer norm (a GPU kernel), the fixed-config variants compile for sm_90.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compile_cpu_problems

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.search.agents.context import KernelBrief
from kernelopt_core.search.agents.planner import PlanRequest, offline_plans
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, applicable_families, parse_kernel_module
from kernelopt_core.search.rewrites.shifted_moments import NotShiftable, find_sites, shifted_source

ROOT = Path(__file__).resolve().parent.parent
LEVEL2 = ROOT / "benchmarks" / "problems" / "level2"
PROBLEMS = {"21": LEVEL2 / "conv2d_add_scale_sigmoid_groupnorm.py",
            "92": LEVEL2 / "conv2d_groupnorm_tanh_hardswish_residual_logsumexp.py"}
# Light gate settings (the captured launch, one seed, one shuffled re-run; gate 3 on one seed): enough to
# tell a wrong statistic from a right one on the interpreter within the test's time.
LIGHT = {"seeds_kernel": (0,), "seeds_model": (0,), "determinism_reruns": 1, "input_sets": False}


@pytest.fixture(scope="module")
def level2_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Problem id -> its parsed CPU graph (both compiled in one subprocess)."""
    found = compile_cpu_problems(PROBLEMS, tmp_path_factory.mktemp("level2"), TORCHINDUCTOR_PERSISTENT_REDUCTIONS="0")
    return {name: parse_output_code(path) for name, path in found.items()}


def _context(kernel, device: str = "cpu") -> RewriteContext:
    module = parse_kernel_module(kernel.source, kernel.name)
    return RewriteContext(module=module, original=module, device=device)


def _statistics_kernel(graph):
    (kernel,) = [k for k in graph.kernels if "welford_reduce" in k.source]
    return kernel


def test_offered_for_the_statistics_kernel_of_each_level2_graph_and_only_there(level2_graphs) -> None:
    for name, graph in level2_graphs.items():
        statistics = _statistics_kernel(graph)
        assert "group_norm" in statistics.name, (name, statistics.name)
        for kernel in graph.kernels:
            why = applicable_families(_context(kernel))["shifted_moments"]
            if kernel is statistics:
                assert why is None, (name, why)
            else:
                assert why, (name, kernel.name)
                assert "not a looped reduction" in why or "no looped Welford" in why, why
        # The planner puts it among the first plans for the statistics kernel, on either device, with the
        # directions a memory-bound or a compute-bound tier gives.
        for device, directions in (("cuda", ["vectorize-loads", "fuse-rereads", "eviction-hints"]),
                                   ("cuda", ["cheaper-math", "tile-tuning"]), ("cpu", [])):
            brief = KernelBrief(name=statistics.name, kind="red", device=device, original_source=statistics.source,
                                directions=[{"name": d} for d in directions])
            plans = offline_plans(PlanRequest(brief=brief, node_source=statistics.source,
                                              context=_context(statistics, device), n=4))
            assert "shifted_moments" in [p.family for p in plans], (name, device, [p.family for p in plans])


def test_the_rewrite_replaces_welfords_division_and_keeps_the_rest_of_the_kernel(level2_graphs) -> None:
    kernel = _statistics_kernel(level2_graphs["21"])
    module = parse_kernel_module(kernel.source, kernel.name)
    (site,) = find_sites(module)
    source = shifted_source(module)
    assert "welford_reduce" not in source and "triton_helpers.welford(" not in source
    # the loads, the stores and the signature are Inductor's
    for line in kernel.source.splitlines():
        if "tl.load(" in line or "tl.store(" in line or line.startswith("def "):
            assert line in source.splitlines(), line
    rewritten = parse_kernel_module(source, kernel.name)
    assert rewritten.params == module.params and rewritten.heuristic == "reduction"
    with pytest.raises(NotShiftable, match="no looped Welford"):
        find_sites(rewritten)  # a rewrite is not rewritten again
    assert site.mask is not None and "r0_mask" in site.mask


def test_every_variant_passes_gate_one(level2_graphs) -> None:
    from kernelopt_core.gates.static import check_source

    for name, graph in level2_graphs.items():
        kernel = _statistics_kernel(graph)
        for device in ("cpu", "cuda"):
            variants = FAMILIES["shifted_moments"].variants(_context(kernel, device))
            assert variants, (name, device)
            for rewrite in variants:
                report = check_source(kernel.source, kernel.name, rewrite.source)
                assert report.ok, (name, rewrite.title, [f.describe() for f in report.findings])
        # on a GPU the fixed launch configurations come besides Inductor's own decorator
        titles = [r.title for r in FAMILIES["shifted_moments"].variants(_context(kernel, "cuda"))]
        assert titles[0] == "shifted sums, Inductor's launch configurations", titles


def test_the_candidate_passes_gates_two_and_three_on_the_cpu_backend(level2_graphs, tmp_path: Path) -> None:
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = level2_graphs["21"]
    kernel = _statistics_kernel(graph)
    (rewrite, *_) = FAMILIES["shifted_moments"].variants(_context(kernel))
    result = run_cascade(graph, {kernel.name: rewrite.source},
                         CascadeConfig(run_gates=(2, 3), device="cpu", workdir=str(tmp_path), **LIGHT))
    assert result.accepted, result.reason
    kernel_gate, model_gate = result.gates
    assert kernel_gate.passed and model_gate.passed


def test_a_wrong_variant_is_rejected_by_gate_two(level2_graphs, tmp_path: Path) -> None:
    """Masked lanes (beyond the row's end in its last block) counted into the sums: a plausible slip."""
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = level2_graphs["21"]
    kernel = _statistics_kernel(graph)
    (rewrite, *_) = FAMILIES["shifted_moments"].variants(_context(kernel))
    right = "_delta = tl.where(_ko_tmp2_live, _ko_tmp2_value - _ko_tmp2_shift, 0.0)"
    assert right in rewrite.source
    wrong = rewrite.source.replace(right, "_delta = _ko_tmp2_value - _ko_tmp2_shift")
    result = run_cascade(graph, {kernel.name: wrong},
                         CascadeConfig(run_gates=(2,), device="cpu", workdir=str(tmp_path), **LIGHT))
    assert not result.accepted and result.failed_gate == 2, result.reason
    assert "could not verify" not in result.reason, result.reason


def test_a_row_count_is_kept_per_lane_only_where_the_mask_is_more_than_the_rows_end(level2_graphs) -> None:
    kernel = _statistics_kernel(level2_graphs["21"])
    source = shifted_source(parse_kernel_module(kernel.source, kernel.name))
    assert "_ko_tmp2_count" not in source and "+ r0_numel" in source  # the loop masks only the row's end: n = r0_numel
    (mask,) = {line.split("tl.where(")[1].split(",")[0] for line in kernel.source.splitlines()
               if "tmp2_mean = tl.where(" in line}
    narrower = kernel.source.replace(f"tl.where({mask}, tmp2_", f"tl.where({mask} & (tmp1 > 0), tmp2_")
    assert narrower.count("& (tmp1 > 0)") == 3
    counted = shifted_source(parse_kernel_module(narrower, kernel.name))
    assert "_ko_tmp2_count = _ko_tmp2_count + tl.where(_ko_tmp2_live, 1.0, 0.0)" in counted
    assert "_ko_tmp2_n = tl.sum(_ko_tmp2_count, 1)" in counted


def test_on_the_h200_layer_norm_kernel_every_variant_compiles_for_sm90_without_spills() -> None:
    """The H200 dump's Welford layer norm (torch 2.11, max-autotune): a real GPU kernel of the shape the
    family rewrites, its shifted variants compiled by gate 1's sm_90 compiler."""
    from conftest import H200_DUMPS

    from kernelopt_core.gates.ptx_compile import shared_compiler

    kernel = parse_output_code(str(H200_DUMPS / "layernorm_gelu" / "output_code.py")).kernels[0]
    variants = FAMILIES["shifted_moments"].variants(_context(kernel, "cuda"))
    assert len(variants) == 4, [v.title for v in variants]
    for rewrite in variants[1:]:  # the fixed configurations: one compile each
        result = shared_compiler().compile(kernel.name, rewrite.source)
        assert result["ok"], (rewrite.title, result.get("error"))
        (config,) = result["configs"]
        assert 0 < config["n_regs"] <= 255 and config["n_spills"] == 0, (rewrite.title, config)
