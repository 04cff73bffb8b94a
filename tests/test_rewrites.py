"""The offline rewrite families: source-level checks on the H200 dumps, and real runs on the CPU backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import H200_DUMPS, compile_example

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.static import check_source
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, applicable_families, parse_kernel_module
from kernelopt_core.search.rewrites.kernel_source import (
    KernelSourceError,
    LaunchConfig,
    source_digest,
    with_launch_config,
)
from kernelopt_core.search.rewrites.launch_config import candidate_configs, program_count
from kernelopt_core.search.rewrites.persistent import unroll_row_loops

ROW_NORMS = Path(__file__).resolve().parent / "optimize_problems" / "row_norms.py"


def kernel_of(graph: str, index: int = 0):
    g = parse_output_code(str(H200_DUMPS / graph / "output_code.py"))
    return g.kernels[index]


def context(source: str, name: str, device: str = "cuda", **kw) -> RewriteContext:
    module = parse_kernel_module(source, name)
    return RewriteContext(module=module, original=module, device=device, **kw)


ALL_KERNELS = [(p.parent.name, i) for p in sorted(H200_DUMPS.glob("*/output_code.py"))
               for i in range(len(parse_output_code(str(p)).kernels))]


@pytest.mark.parametrize("graph,index", ALL_KERNELS)
def test_every_variant_parses_and_passes_the_static_source_rules(graph: str, index: int) -> None:
    kernel = kernel_of(graph, index)
    ctx = context(kernel.source, kernel.name)
    produced = 0
    for name, family in FAMILIES.items():
        variants = family.variants(ctx)
        assert (family.not_applicable(ctx) is None) == bool(variants) or name in ("mask_removal", "split_reduction")
        for rewrite in variants:
            produced += 1
            assert rewrite.family == name
            assert rewrite.source != kernel.source
            parse_kernel_module(rewrite.source, kernel.name)
            report = check_source(kernel.source, kernel.name, rewrite.source)
            assert report.ok, f"{name} {rewrite.title}: {[f.describe() for f in report.findings]}"
    assert produced >= 1


def test_at_least_six_families_apply_across_the_fixtures() -> None:
    applied = set()
    for graph, index in ALL_KERNELS:
        kernel = kernel_of(graph, index)
        applied |= {n for n, why in applicable_families(context(kernel.source, kernel.name)).items() if why is None}
    assert len(FAMILIES) >= 6
    assert {"launch_config", "single_read", "split_reduction", "mask_removal", "eviction_hints", "vector_hints",
            "fast_math"} <= applied


def test_fixed_config_keeps_meta_and_lists_the_signature_in_order() -> None:
    kernel = kernel_of("softmax")
    module = parse_kernel_module(kernel.source, kernel.name)
    config = LaunchConfig.of({"XBLOCK": 2, "R0_BLOCK": 2048}, num_warps=8, num_stages=2)
    new = parse_kernel_module(with_launch_config(module, config), kernel.name)
    assert new.explicit_config == config
    assert new.heuristic == "reduction"  # recovered from the kernel's shape
    call = new.decorator
    assert call is not None and ast.unparse(call.func) == "triton_heuristics.fixed_config"
    meta = ast.parse(new.decorator_kwarg_source("triton_meta"), mode="eval").body
    assert isinstance(meta, ast.Dict)
    signature = next(v for k, v in zip(meta.keys, meta.values, strict=True) if ast.literal_eval(k) == "signature")
    assert [ast.literal_eval(k) for k in signature.keys] == new.params
    assert "'grid_type': 'Grid1D'" in new.decorator_kwarg_source("inductor_meta")
    with pytest.raises(KernelSourceError, match="block parameters"):
        with_launch_config(module, LaunchConfig.of({"XBLOCK": 2}, 4))


def test_launch_configs_go_wider_than_inductor_and_order_by_device() -> None:
    kernel = kernel_of("elementwise")
    inductor = [LaunchConfig.of({"XBLOCK": 1024}, 4, 1)]
    gpu = candidate_configs(context(kernel.source, kernel.name, tier="memory-bound", inductor_configs=inductor))
    assert inductor[0] not in gpu
    assert {c.num_warps for c in gpu} >= {1, 2, 4, 8, 16} and max(c.num_stages for c in gpu) >= 3
    cpu_ctx = context(kernel.source, kernel.name, device="cpu")
    cpu = candidate_configs(cpu_ctx)
    programs = [program_count(cpu_ctx.module, c) for c in cpu]
    assert programs == sorted(programs)  # the interpreter pays per program: fewest first


def test_looped_reduction_turned_persistent_reads_the_row_once() -> None:
    kernel = kernel_of("rmsnorm")
    module = parse_kernel_module(kernel.source, kernel.name)
    text = unroll_row_loops(module, 4096)
    assert "for r0_offset" not in text
    assert "R0_BLOCK: tl.constexpr = 4096" in text
    assert text.count("tl.load(in_ptr0") == 1  # the second pass reuses the loaded row
    assert "reuses the row already loaded" in text
    variants = FAMILIES["single_read"].variants(context(kernel.source, kernel.name))
    assert variants and all("R0_BLOCK" not in (v.params.get("blocks") or {}) for v in variants)
    assert all(parse_kernel_module(v.source, kernel.name).heuristic == "persistent_reduction" for v in variants)


def test_mask_removal_requires_divisibility_and_leaves_a_marker() -> None:
    kernel = kernel_of("transpose")
    ctx = context(kernel.source, kernel.name)
    (first, *_) = FAMILIES["mask_removal"].variants(ctx)
    new = parse_kernel_module(first.source, kernel.name)
    assert ("XBLOCK", "xnumel") in new.divides_markers()
    config = new.explicit_config
    assert config is not None and 2048 % config.block("XBLOCK") == 0 and 65536 % config.block("YBLOCK") == 0
    assert "xmask & ymask" not in first.source
    # Later launch-config rewrites keep the promise the marker states.
    follow = candidate_configs(RewriteContext(new, ctx.module, device="cuda"))
    assert follow and all(2048 % c.block("XBLOCK") == 0 for c in follow)
    unaligned = kernel_of("conv_bn_relu", 1)  # xnumel = 9: no power of two divides it
    assert FAMILIES["mask_removal"].not_applicable(context(unaligned.source, unaligned.name)) is not None


def test_eviction_and_vector_hints_change_only_hints() -> None:
    kernel = kernel_of("layernorm_gelu")
    ctx = context(kernel.source, kernel.name)
    variants = FAMILIES["eviction_hints"].variants(ctx)
    # Titles say what each variant changed in this kernel, not what the variant aimed at.
    no_hints = next(v for v in variants if v.params["streaming"] is None and v.params["reused"] is None)
    assert no_hints.title.startswith("evict_first removed from ") and "detail" not in no_hints.title
    # Inductor already wrote the "stream rows, keep shared data" hints: that variant would change nothing.
    assert not any(v.detail.endswith("(stream rows, keep shared data)") for v in variants)
    assert [v.title for v in variants][:2] == ["evict_first removed from 1 load; .cg on 1 load", ".cs on 1 store"]
    streaming = variants[0].source
    loads = [line.strip() for line in streaming.splitlines() if "tl.load(" in line]
    assert "in_ptr1 + (r0_1)" in loads[2] and "eviction_policy='evict_last'" in loads[2]  # a weight: every row reads it
    assert "eviction_policy='evict_last'" in loads[0]  # the row is read again by the second pass: keep it
    # ... its last read streams through L2 alone (.cg without evict_first: ptxas refuses the pair on sm_90)
    assert "cache_modifier='.cg'" in loads[1] and "eviction_policy" not in loads[1]
    for variant in variants:
        assert not any("evict_first" in line and ".cg" in line for line in variant.source.splitlines())
    assert "eviction_policy" not in no_hints.source.split("@triton.jit")[1]
    (hinted,) = FAMILIES["vector_hints"].variants(ctx)
    assert "xoffset = tl.multiple_of(xoffset, XBLOCK)" in hinted.source
    assert "r0_offset = tl.multiple_of(r0_offset, R0_BLOCK)" in hinted.source


# A layer norm's normalise pass as Inductor writes it for x of (16, 4194304): x streams, the row's mean and
# rstd (x1) and the weight and bias (x0) are re-read by every program of their row or column.
LAYER_NORM_APPLY = """
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics

@triton_heuristics.pointwise(size_hints={'x': 67108864}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32',
                               'in_ptr4': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
    inductor_meta={'kernel_name': 'triton_poi_fused_native_layer_norm_2'})
@triton.jit
def triton_poi_fused_native_layer_norm_2(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 67108864
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x2 = xindex
    x1 = xindex // 4194304
    x0 = (xindex % 4194304)
    tmp0 = tl.load(in_ptr0 + (x2), None)
    tmp1 = tl.load(in_ptr1 + (x1), None, eviction_policy='evict_last')
    tmp3 = tl.load(in_ptr2 + (x1), None, eviction_policy='evict_last')
    tmp5 = tl.load(in_ptr3 + (x0), None, eviction_policy='evict_last')
    tmp7 = tl.load(in_ptr4 + (x0), None, eviction_policy='evict_last')
    tmp2 = tmp0 - tmp1
    tmp4 = tmp2 * tmp3
    tmp6 = tmp4 * tmp5
    tmp8 = tmp6 + tmp7
    tl.store(out_ptr0 + (x2), tmp8, None)
"""


def test_eviction_hints_keep_data_a_pointwise_kernel_reads_through_part_of_its_index() -> None:
    from kernelopt_core.search.rewrites.eviction import broadcast_names, rewrite_hints

    assert broadcast_names(LAYER_NORM_APPLY) == {"x0", "x1"}
    hinted = rewrite_hints(LAYER_NORM_APPLY, "evict_first", "evict_last", None, None)
    loads = [line.strip() for line in hinted.splitlines() if "tl.load(" in line]
    assert "eviction_policy='evict_first'" in loads[0]  # x itself: each element read once
    assert all("eviction_policy='evict_last'" in line for line in loads[1:])  # the row's stats, weight, bias
    # Two parts of the index together (x0 + 4096 * x1) read every element once: streamed.
    rebuilt = LAYER_NORM_APPLY.replace("tl.load(in_ptr0 + (x2), None)", "tl.load(in_ptr0 + (x0 + 4194304 * x1), None)")
    loads = [line for line in rewrite_hints(rebuilt, "evict_first", "evict_last", None, None).splitlines()
             if "tl.load(in_ptr0" in line]
    assert "evict_first" in loads[0]
    ctx = context(LAYER_NORM_APPLY, "triton_poi_fused_native_layer_norm_2")
    (first, *_) = FAMILIES["eviction_hints"].variants(ctx)
    assert first.title == "evict_first on 1 load"  # the shared loads keep Inductor's evict_last


def test_l2_thrashing_puts_eviction_hints_after_the_algorithmic_families() -> None:
    from kernelopt_core.search.agents.context import KernelBrief
    from kernelopt_core.search.agents.planner import PlanRequest, offline_plans

    brief = KernelBrief(name="triton_poi_fused_native_layer_norm_2", kind="poi", device="cuda",
                        original_source=LAYER_NORM_APPLY)
    ctx = context(LAYER_NORM_APPLY, brief.name)
    ctx.evidence.update(causes=["re-reads", "l2-thrash"], traffic_ratio=1.88)
    plans = offline_plans(PlanRequest(brief=brief, node_source=LAYER_NORM_APPLY, context=ctx, n=2))
    # the programs sharing a block of the weight and bias run together first, then the hints keep it in L2
    assert [p.family for p in plans] == ["program_order", "eviction_hints"]
    softmax = kernel_of("softmax")
    brief = KernelBrief(name=softmax.name, kind="red", device="cuda", original_source=softmax.source)
    ctx = context(softmax.source, softmax.name)
    ctx.evidence.update(causes=["re-reads", "l2-thrash"], traffic_ratio=1.5)
    families = [p.family for p in offline_plans(PlanRequest(brief=brief, node_source=softmax.source, context=ctx, n=4))]
    assert families.index("single_read") < families.index("eviction_hints")  # reading rows once comes first


def test_int32_indexing_only_when_indices_fit() -> None:
    kernel = kernel_of("elementwise")
    wide = kernel.source.replace("xoffset = tl.program_id(0) * XBLOCK", "xoffset = tl.program_id(0).to(tl.int64) * XBLOCK")
    ctx = context(wide, kernel.name)
    (rewrite,) = FAMILIES["int32_index"].variants(ctx)
    assert ".to(tl.int64)" not in rewrite.source
    huge = wide.replace("xnumel = 16777216", "xnumel = 4294967296")
    assert "too close" in FAMILIES["int32_index"].not_applicable(context(huge, kernel.name))
    assert FAMILIES["int32_index"].not_applicable(context(kernel.source, kernel.name)) == "no 64-bit index arithmetic"


def test_malformed_sources_raise_a_clear_error() -> None:
    with pytest.raises(KernelSourceError, match="does not parse"):
        parse_kernel_module("def broken(:\n", "k")
    with pytest.raises(KernelSourceError, match="no @triton.jit"):
        parse_kernel_module("import triton\nx = 1\n", "k")


@pytest.fixture(scope="module")
def row_norms_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_example(ROW_NORMS, tmp_path_factory.mktemp("row_norms"))


def _check_on_cpu(dump: Path, tmp: Path, minimum: set[str]) -> dict[str, float]:
    from kernelopt_core.gates.restitch import write_restitched
    from kernelopt_core.measure.worker import get_worker

    graph = parse_output_code(str(dump))
    paths: dict[str, str] = {}
    kernels: dict[str, str] = {}
    for kernel in graph.kernels:
        ctx = context(kernel.source, kernel.name, device="cpu")
        for name, family in FAMILIES.items():
            for rewrite in family.variants(ctx)[:1]:
                key = f"{kernel.name}|{name}"
                paths[key], _ = write_restitched(graph, {kernel.name: rewrite.source},
                                                 str(tmp / source_digest(rewrite.source)[:12]))
                kernels[key] = kernel.name
    assert minimum <= {key.split("|")[1] for key in paths}
    diffs: dict[str, float] = {}
    for kernel_name in sorted(set(kernels.values())):
        mine = {k: p for k, p in paths.items() if kernels[k] == kernel_name}
        outcome = get_worker("cpu").call("kernelopt_core.search.kernel_tasks:compare_kernel_outputs", {
            "graph_path": str(dump), "device": "cpu", "kernel": kernel_name, "candidates": mine}, timeout_s=600)
        assert outcome.ok, outcome.failure
        for key, value in outcome.value["candidates"].items():
            assert "error" not in value, f"{key}: {value}"
            assert not value["nan"], key
            diffs[key] = value["max_abs_diff"]
    return diffs


def test_every_family_is_correct_on_the_cpu_backend(cpu_example_dump: Path, row_norms_dump: Path,
                                                     tmp_path: Path) -> None:
    diffs = _check_on_cpu(cpu_example_dump, tmp_path / "gelu", {"launch_config", "mask_removal", "eviction_hints",
                                                                 "vector_hints", "fast_math"})
    diffs.update(_check_on_cpu(row_norms_dump, tmp_path / "rows", {"single_read", "split_reduction"}))
    bad = {key: diff for key, diff in diffs.items() if diff > 1e-4}
    assert not bad, bad


def test_split_family_declines_tuple_assignments_instead_of_crashing():
    # torch 2.11 on the H200 wrote `tmpA, tmpB = triton_helpers.online_softmax_reduce(...)` in a
    # persistent softmax; reading it crashed the planner (found on the GPU run, 2026-11-30).
    dump = Path(__file__).parent / "fixtures" / "inductor-h200-torch2.11" / "attention" / "output_code.py"
    kernel = parse_output_code(str(dump)).kernels[0]
    assert kernel.kind == "per"
    source = kernel.source.replace("    tmp13 = (tmp9 / tmp12)\n",
                                   "    tmp13, tmp14 = (tmp9 / tmp12), tmp12\n")
    assert source != kernel.source
    module = parse_kernel_module(source, kernel.name)
    status = applicable_families(RewriteContext(module=module, original=module, tier="memory-bound"))
    assert "multiple assignment targets" in (status["split_reduction"] or "")
    assert FAMILIES["split_reduction"].variants(RewriteContext(module=module, original=module)) == []


def test_fast_math_writes_tanh_on_the_fast_exp_and_keeps_its_special_values() -> None:
    import numpy as np

    kernel = kernel_of("elementwise")
    assert "libdevice.tanh(tmp0)" in kernel.source
    (variant,) = FAMILIES["fast_math"].variants(context(kernel.source, kernel.name))
    assert "tanh" in variant.params["functions"] and "libdevice.tanh(" not in variant.source
    assert "(2.0 / (1.0 + tl_math.exp(-2.0 * (tmp0))) - 1.0)" in variant.source
    assert check_source(kernel.source, kernel.name, variant.source).ok
    # the formula in float32, against float64's tanh: +-inf and NaN as tanh's, about 1e-7 absolute elsewhere
    x = np.concatenate([np.linspace(-30, 30, 20001), [0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    with np.errstate(over="ignore"):
        fast = np.float32(2.0) / (np.float32(1.0) + np.exp(np.float32(-2.0) * x)) - np.float32(1.0)
    exact = np.tanh(x.astype(np.float64))
    assert np.array_equal(np.isnan(fast), np.isnan(exact))
    finite = ~np.isnan(exact)
    assert np.max(np.abs(fast[finite] - exact[finite])) < 2.5e-7
