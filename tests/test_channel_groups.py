"""The channel_groups family: a channels-last tensor's group statistics read a whole pixel at a time.

On a graph compiled for the CPU backend (tests/optimize_problems/conv_group_norms.py: a conv kept
channels-last, a group norm over groups of 4 channels, an instance norm split by Inductor into chunks):
which kernels it recognises and with which grouping, what it declines and why, and its launchers through
gates 2 and 3 (the interpreter, shuffled program orders compared bitwise, the float64 model reference).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compile_example

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.launchers import is_launcher_source
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module
from kernelopt_core.search.rewrites.channel_groups import (
    Grouping,
    GroupShape,
    find_grouping,
    group_shapes,
    launcher_source,
)
from kernelopt_core.search.rewrites.reduction_passes import NotTransformable, decompose

PROBLEM = Path(__file__).resolve().parent / "optimize_problems" / "conv_group_norms.py"


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory):
    # looped statistics, as at level 2's sizes
    dump = compile_example(PROBLEM, tmp_path_factory.mktemp("conv_group_norms"), TORCHINDUCTOR_PERSISTENT_REDUCTIONS="0")
    return parse_output_code(str(dump))


def context(source: str, name: str, device: str = "cuda") -> RewriteContext:
    module = parse_kernel_module(source, name)
    ctx = RewriteContext(module=module, original=module, device=device)
    ctx.evidence.update(sm_count=132)
    return ctx


def _stats(graph, fragment: str):
    return [k for k in graph.kernels if k.kind == "red" and fragment in k.name and "logsumexp" not in k.name]


def test_the_group_statistics_read_whole_pixels_of_a_sample(graph) -> None:
    (group,) = _stats(graph, "native_group_norm")
    kernel = decompose(parse_kernel_module(group.source, group.name))
    # rows (sample, group) of 4 channels over 400 pixels of 16 channels: 2 samples x 4 groups
    assert find_grouping(kernel) == Grouping(groups=4, per_group=4, pixels=400, samples=2)
    for shape in group_shapes(find_grouping(kernel), 132):
        assert shape.chunks * shape.chunk >= 400 > (shape.chunks - 1) * shape.chunk
        # every lane of every program gets an element: a power-of-two count of chunks, a last chunk of a step
        assert shape.chunks >= 2 and shape.chunks & (shape.chunks - 1) == 0
        assert 400 - (shape.chunks - 1) * shape.chunk >= shape.pixels
    at_92 = group_shapes(Grouping(groups=16, per_group=4, pixels=15876, samples=128), 132)
    assert at_92 and all(s.chunks * s.chunk >= 15876 > (s.chunks - 1) * s.chunk + s.pixels - 1 for s in at_92)
    # the even split, as session 19's hand-written kernel (0.17 ms on the H100): not rounded up to a multiple
    # of the step, which made problem 92's 993 pixels a power of two, 1024
    assert [(s.chunks, s.chunk) for s in at_92] == [(16, 993), (8, 1985), (32, 497)]


def test_the_split_instance_statistics_are_recognised_with_groups_of_one_channel(graph) -> None:
    first_stages = [k for k in _stats(graph, "batch_norm") if k.source.count("6400*(x0 // 16)")]
    assert first_stages, "Inductor split the instance norm's statistics differently"
    kernel = decompose(parse_kernel_module(first_stages[0].source, first_stages[0].name))
    grouping = find_grouping(kernel)
    assert (grouping.groups, grouping.per_group) == (16, 1)  # a pixel's 16 channels, one row each
    # 100 pixels per row here: too few for two chunks, so the family leaves it (at real sizes it splits)
    assert "too few for two chunks" in FAMILIES["channel_groups"].not_applicable(
        context(first_stages[0].source, first_stages[0].name))


def test_what_the_family_declines(graph) -> None:
    family = FAMILIES["channel_groups"]
    (group,) = _stats(graph, "native_group_norm")
    assert family.not_applicable(context(group.source, group.name, device="cpu")) == family.cpu_reason
    assert family.not_applicable(context(group.source, group.name)) is None
    # the same statistics over a contiguous (NCHW) tensor: nothing to gain
    contiguous = group.source.replace("r0_2 + 4*x0 + 16*r0_3 + 6400*x1", "r0_index + 1600*xindex")
    assert "no load reads the pixels of adjacent rows" in family.not_applicable(context(contiguous, group.name))
    # the logsumexp over channels (max, then the sum of exponentials): two passes
    (lse,) = [k for k in graph.kernels if "logsumexp" in k.name]
    assert family.not_applicable(context(lse.source, lse.name)) == "2 passes: rewrites a one-pass statistic"
    with pytest.raises(NotTransformable):
        find_grouping(decompose(parse_kernel_module(contiguous, group.name)))


def test_the_shifted_form_accumulates_sums_and_leaves_welford_to_the_fold(graph) -> None:
    (group,) = _stats(graph, "native_group_norm")
    kernel = decompose(parse_kernel_module(group.source, group.name))
    shape = GroupShape(pixels=32, chunks=4, chunk=128, num_warps=4)
    source = launcher_source(kernel, find_grouping(kernel), shape, shifted=True)
    loop = source.split("for _ko_p in")[1].split("_ko_rows =")[0]
    assert "welford_reduce" not in loop and "/" not in loop.split("if r0_offset == 0:")[1].split("\n", 2)[2]
    assert "tl.reshape(_ko_w0_mean, [4, 4])" in source  # a sample's 16 channels folded into its 4 groups
    assert "_ko_w0_count" not in source  # every pixel of a chunk counts: no per-lane count is kept
    variants = FAMILIES["channel_groups"].variants(context(group.source, group.name))
    assert variants and all(v.params["shifted"] for v in variants)  # a Welford statistic only as shifted sums
    # a pass without a Welford statistic has nothing to shift
    summed = group.source.replace("triton_helpers.welford_reduce(", "triton_helpers.welford_reduce_other(")
    with pytest.raises(NotTransformable):
        launcher_source(decompose(parse_kernel_module(summed, group.name)), find_grouping(kernel), shape,
                        shifted=True)


def test_the_launchers_pass_gates_2_and_3_on_the_cpu_backend(graph, tmp_path: Path) -> None:
    from kernelopt_core.gates import CascadeConfig, run_cascade
    from kernelopt_core.gates.static import check_source

    recognised = [k for k in graph.kernels if k.kind == "red"
                  and FAMILIES["channel_groups"].not_applicable(context(k.source, k.name)) is None]
    assert [k.name for k in recognised] == [k.name for k in _stats(graph, "native_group_norm")]
    for kernel in recognised:
        variants = FAMILIES["channel_groups"].variants(context(kernel.source, kernel.name))
        assert variants and all(is_launcher_source(v.source, kernel.name) for v in variants)
    (group,) = _stats(graph, "native_group_norm")
    kernel = decompose(parse_kernel_module(group.source, group.name))
    # 4 chunks of 128 pixels, 32 a trip: several trips per program (Welford's first-trip flag) and a short last
    # chunk (400 pixels), what the variants' shapes reach only at real sizes
    for shifted in (False, True):
        source = launcher_source(kernel, find_grouping(kernel), GroupShape(pixels=32, chunks=4, chunk=128, num_warps=4),
                                 shifted)
        report = check_source(group.source, group.name, source)
        assert report.ok, [f.describe() for f in report.findings]
        light = {"seeds_kernel": (0,), "seeds_model": (0,), "determinism_reruns": 1, "input_sets": False}
        result = run_cascade(graph, {group.name: source},
                             CascadeConfig(run_gates=(2, 3), device="cpu", workdir=str(tmp_path / str(shifted)), **light))
        assert result.accepted, (shifted, result.reason)
        kernel_gate, model_gate = result.gates
        assert kernel_gate.passed and model_gate.passed
        assert "re-runs" in kernel_gate.reason  # shuffled program orders, compared bitwise


def test_nothing_calls_for_the_family_and_its_variants_add_no_decision() -> None:
    from kernelopt_core.search.agents.context import KernelBrief
    from kernelopt_core.search.agents.planner import PlanRequest, offline_plans

    fixture = Path(__file__).resolve().parent / "fixtures" / "level2_h100" / "p92_output_code.txt"
    (stats,) = [k for k in parse_output_code(str(fixture)).kernels if k.kind == "red" and "group_norm" in k.name]
    strided = context(stats.source, stats.name)
    strided.evidence.update(causes=["strided-access"])
    brief = KernelBrief(name=stats.name, kind="red", device="cuda", original_source=stats.source)
    # measured on the H100 in session 22, slower than Inductor's kernel in every form: even measured strided
    # access does not call for it; it comes after every other applicable family, past a node's 4 plans
    for ctx in (strided, context(stats.source, stats.name)):
        families = [p.family for p in offline_plans(PlanRequest(brief=brief, node_source=stats.source, context=ctx,
                                                                n=20))]
        first = families.index("channel_groups")
        assert first >= 4 and set(families[:first]) == set(families) - {"channel_groups"}
    from kernelopt_core.gates.decisions import added_decisions
    from kernelopt_core.gates.static import check_source

    # on problem 21's too, whose loop computes a sigmoid of the loads: a copy of the loop's first step before
    # the loop (to set the shifts there) made gate 2's analysis count that sigmoid's saturation as added
    fixture_21 = fixture.parent / "p21_output_code.txt"
    (stats_21,) = [k for k in parse_output_code(str(fixture_21)).kernels if k.kind == "red" and "group_norm" in k.name]
    for kernel in (stats, stats_21):
        variants = FAMILIES["channel_groups"].variants(context(kernel.source, kernel.name))
        assert len(variants) == 3
        for variant in variants:
            assert check_source(kernel.source, kernel.name, variant.source).ok  # gate 1
            assert added_decisions(kernel.source, variant.source).required == []  # no data-dependent path added
