"""The nine real H200 dumps (torch 2.11, partitioned wrapper) parse into exactly what they hold.

Expected names, kinds, vendor calls, launch order and input specs were read off the fixture files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import H200_DUMPS, H200_GRAPHS

from kernelopt_core.artifacts import CompiledGraph, discover, parse_output_code


@dataclass(frozen=True)
class Expected:
    kernels: list[tuple[str, str]]  # (name, kind) in file order
    timeline: list[tuple[str, list[int] | None]]  # (kernel or vendor op, trailing int args) in call order
    inputs: list[tuple[list[int], list[int]]]  # (shape, stride) per argument, all float32 on cuda:0


EXPECTED: dict[str, Expected] = {
    "attention": Expected(
        kernels=[("triton_per_fused__softmax_amax_div_mul_sub_view_0", "per"),
                 ("triton_tem_fused__softmax_bmm_div_mul_sub_view_1", "tem")],
        timeline=[("extern_kernels.bmm", None),
                  ("triton_per_fused__softmax_amax_div_mul_sub_view_0", [262144, 1024]),
                  ("triton_tem_fused__softmax_bmm_div_mul_sub_view_1", [16, 256, 1])],
        inputs=[([16, 16, 1024, 64], [1048576, 65536, 64, 1])] * 3,
    ),
    "conv_bn_relu": Expected(
        kernels=[("triton_poi_fused_convolution_0", "poi"), ("triton_poi_fused_convolution_1", "poi"),
                 ("triton_poi_fused__native_batch_norm_legit_no_training_convolution_relu_2", "poi")],
        timeline=[("triton_poi_fused_convolution_0", [2048, 3136]),
                  ("triton_poi_fused_convolution_1", [8192, 9]),
                  ("extern_kernels.convolution", None),
                  ("triton_poi_fused__native_batch_norm_legit_no_training_convolution_relu_2", [4096, 3136])],
        inputs=[([128, 64, 3, 3], [576, 9, 3, 1]), ([128], [1]), ([32, 64, 56, 56], [200704, 3136, 56, 1]),
                ([128], [1]), ([128], [1]), ([128], [1]), ([128], [1])],
    ),
    "elementwise": Expected(
        kernels=[("triton_poi_fused_add_mul_sigmoid_sub_tanh_0", "poi")],
        timeline=[("triton_poi_fused_add_mul_sigmoid_sub_tanh_0", [16777216])],
        inputs=[([16, 1048576], [1048576, 1])] * 2,
    ),
    "layernorm_gelu": Expected(
        kernels=[("triton_red_fused_gelu_native_layer_norm_0", "red")],
        timeline=[("triton_red_fused_gelu_native_layer_norm_0", [8192, 4096])],
        inputs=[([4096], [1]), ([4096], [1]), ([8192, 4096], [4096, 1])],
    ),
    "matmul_bias_relu": Expected(
        kernels=[("triton_poi_fused_add_addmm_mul_relu_0", "poi")],
        timeline=[("extern_kernels.mm", None), ("triton_poi_fused_add_addmm_mul_relu_0", [16777216])],
        inputs=[([4096, 1024], [1024, 1]), ([4096], [1]), ([4096, 1024], [1024, 1])],
    ),
    "rmsnorm": Expected(
        kernels=[("triton_red_fused_add_mean_mul_pow_rsqrt_0", "red")],
        timeline=[("triton_red_fused_add_mean_mul_pow_rsqrt_0", [8192, 4096])],
        inputs=[([8192, 4096], [4096, 1]), ([4096], [1])],
    ),
    "softmax": Expected(
        kernels=[("triton_red_fused__softmax_exp_prepare_softmax_online_sub_0", "red")],
        timeline=[("triton_red_fused__softmax_exp_prepare_softmax_online_sub_0", [4096, 8192])],
        inputs=[([4096, 8192], [8192, 1])],
    ),
    "sum_reduce": Expected(
        kernels=[("triton_red_fused_sum_0", "red"), ("triton_red_fused_sum_1", "red")],
        timeline=[("triton_red_fused_sum_0", [131072, 256]), ("triton_red_fused_sum_1", [512, 256])],
        inputs=[([128, 65536, 4], [262144, 4, 1])],
    ),
    "transpose": Expected(
        kernels=[("triton_poi_fused_clone_mul_permute_0", "poi")],
        timeline=[("triton_poi_fused_clone_mul_permute_0", [65536, 2048])],
        inputs=[([64, 2048, 1024], [2097152, 1024, 1])],
    ),
}


def _parse(name: str) -> CompiledGraph:
    return parse_output_code(str(H200_DUMPS / name / "output_code.py"))


def test_every_fixture_graph_has_an_expectation() -> None:
    assert sorted(EXPECTED) == H200_GRAPHS


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kernels_names_and_kinds(name: str) -> None:
    graph = _parse(name)
    assert [(k.name, k.kind) for k in graph.kernels] == EXPECTED[name].kernels
    assert graph.wrapper_style == "partitioned"
    assert graph.device == "cuda"
    assert graph.warnings == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_launch_order_and_vendor_calls(name: str) -> None:
    graph = _parse(name)
    got = []
    for item in graph.timeline():
        if hasattr(item, "kernel"):
            got.append((item.kernel, item.int_args))
        else:
            got.append((item.op, None))
    assert got == EXPECTED[name].timeline
    assert [item.order for item in graph.timeline()] == list(range(len(got)))
    # Every launch is inside the partition and on the graph's stream.
    for launch in graph.launches:
        assert launch.function == "partition_0"
        assert launch.style == "run"
        assert launch.stream == "stream0"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_input_specs(name: str) -> None:
    graph = _parse(name)
    got = [(spec.shape, spec.stride) for spec in graph.inputs]
    assert got == EXPECTED[name].inputs
    assert [spec.name for spec in graph.inputs] == [f"arg{i}_1" for i in range(len(got))]
    assert {(spec.kind, spec.dtype, spec.device) for spec in graph.inputs} == {("tensor", "torch.float32", "cuda:0")}


def test_attention_details() -> None:
    graph = _parse("attention")
    assert [k.kind for k in graph.kernels].count("tem") == 1
    assert [k.kind for k in graph.kernels].count("per") == 1
    assert [c.short_op for c in graph.extern_calls] == ["bmm"]
    per = graph.kernel("triton_per_fused__softmax_amax_div_mul_sub_view_0")
    assert per is not None
    assert per.heuristic == "persistent_reduction"
    assert per.aten_ops == ["aten.view", "aten.mul", "aten.amax", "aten.sub", "aten.div", "aten._softmax"]
    assert per.signature == ["in_out_ptr0", "xnumel", "r0_numel", "XBLOCK"]
    assert per.size_hints == {"x": 262144, "r0_": 1024}
    tem = graph.kernel("triton_tem_fused__softmax_bmm_div_mul_sub_view_1")
    assert tem is not None and tem.heuristic == "template"
    assert "aten.bmm" in tem.aten_ops


def test_conv_bn_relu_details() -> None:
    graph = _parse("conv_bn_relu")
    assert [k.kind for k in graph.kernels] == ["poi", "poi", "poi"]
    assert [c.short_op for c in graph.extern_calls] == ["convolution"]
    conv = graph.extern_calls[0]
    assert conv.library == "extern_kernels"
    assert conv.args == ["buf0", "buf1"]
    assert conv.kwargs["stride"] == "(1, 1)" and conv.kwargs["groups"] == "1"
    fused = graph.kernels[2]
    assert fused.aten_ops == ["aten.convolution", "aten._native_batch_norm_legit_no_training", "aten.relu"]


def test_matmul_bias_relu_details() -> None:
    graph = _parse("matmul_bias_relu")
    (kernel,) = graph.kernels
    assert kernel.kind == "poi" and "aten.addmm" in kernel.aten_ops
    assert [c.short_op for c in graph.extern_calls] == ["mm"]
    assert graph.extern_calls[0].kwargs == {"out": "buf0"}
    (launch,) = graph.launches
    assert launch.args == ["buf1", "arg1_1", "16777216"]


def test_kernel_source_and_ranges_point_into_the_file() -> None:
    path = H200_DUMPS / "rmsnorm" / "output_code.py"
    lines = path.read_text().splitlines()
    graph = parse_output_code(str(path))
    (kernel,) = graph.kernels
    # The name range covers the kernel's name on its assignment line (0-based).
    r = kernel.name_range
    assert lines[r.start_line][r.start_col:r.end_col] == kernel.name
    assert lines[kernel.def_line].startswith(f"def {kernel.name}(")
    assert kernel.source in path.read_text()
    assert "@triton.jit" in kernel.source
    assert kernel.triton_meta["signature"]["in_ptr0"] == "*fp32"
    assert kernel.inductor_meta["kernel_name"] == kernel.name
    assert graph.kernel_at(r.start_line, r.start_col) is kernel
    (launch,) = graph.launches
    assert launch.name_range is not None
    assert graph.kernel_at(launch.name_range.start_line, launch.name_range.start_col + 1) is kernel
    assert graph.kernel_at(0, 0) is None


def test_discovery_finds_all_nine_with_debug_files(h200_dumps: Path) -> None:
    graphs, problems = discover(str(h200_dumps))
    assert problems == []
    assert sorted(g.name for g in graphs) == H200_GRAPHS
    for graph in graphs:
        assert graph.fx_graph_runnable and graph.fx_graph_runnable.endswith("fx_graph_runnable.py")
        assert graph.ir_post_fusion and graph.ir_post_fusion.endswith("ir_post_fusion.txt")


def test_to_json_round_trips_through_json() -> None:
    import json

    data = json.loads(json.dumps(_parse("attention").to_json()))
    assert [k["name"] for k in data["kernels"]] == [n for n, _ in EXPECTED["attention"].kernels]
    assert [item["type"] for item in data["launches"]] == ["extern", "triton", "triton"]
