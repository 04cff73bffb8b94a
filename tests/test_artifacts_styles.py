"""Wrapper styles other than torch 2.11's partitioned one.

``fixtures/synthetic/call_grid_style.py`` is modelled on torch 2.1-era output: one ``def call(args)``,
bare ``@pointwise``/``@reduction`` decorators with ``meta=`` and list ``size_hints``, kernels named
``triton_`` inside their source, ``kernel.run(..., grid=grid(n))`` and ``kernel[grid(n)](...)``
launches, ``empty_strided(..., device=, dtype=)`` and ATen fallbacks. The inline wrapper below is
modelled on torch 2.5-era output (``triton_heuristics.*``, ``empty_strided_cuda``, a symbolic size).
"""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from kernelopt_core.artifacts import ExternCall, Launch, parse_output_code
from kernelopt_core.dispatch import analyze

OLD_STYLE = FIXTURES / "synthetic" / "call_grid_style.py"

TORCH25_STYLE = '''
import torch
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
aten = torch.ops.aten
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_u/ab/cabxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyz.py
# Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
# Source node to ATen node mapping:
#   gelu => add, erf, mul
triton_poi_fused_gelu_0 = async_compile.triton('triton_poi_fused_gelu_0', \'\'\'
import triton
import triton.language as tl
from triton.compiler.compiler import AttrsDescriptor

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.pointwise(
    size_hints=[4096],
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32'}, 'device': DeviceProperties(type='cuda', index=0, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, multi_processor_count=132, warp_size=32), 'constants': {}},
    inductor_meta={'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_gelu_0', 'mutated_arg_names': [], 'no_x_dim': False, 'num_load': 1, 'num_reduction': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = 0.5
    tmp2 = tmp0 * tmp1
    tl.store(out_ptr0 + (x0), tmp2, xmask)
\'\'\', device_str='cuda')


async_compile.wait(globals())
del async_compile

def call(args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    s0 = arg0_1
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((s0, 64), (64, 1), torch.float32)
        extern_kernels.addmm(arg2_1, arg1_1, arg1_1, alpha=1, beta=1, out=buf0)
        buf1 = empty_strided_cuda((s0, 64), (64, 1), torch.float32)
        # Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
        triton_poi_fused_gelu_0_xnumel = 64*s0
        stream0 = get_raw_stream(0)
        triton_poi_fused_gelu_0.run(buf0, buf1, triton_poi_fused_gelu_0_xnumel, grid=grid(triton_poi_fused_gelu_0_xnumel), stream=stream0)
    return (buf1, )


def benchmark_compiled_module(times=10, repeat=10):
    from torch._dynamo.testing import rand_strided
    from torch._inductor.utils import print_performance
    arg0_1 = 64
    arg1_1 = rand_strided((64, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg2_1 = rand_strided((64, ), (1, ), device='cuda:0', dtype=torch.float16)
    fn = lambda: call([arg0_1, arg1_1, arg2_1])
    return print_performance(fn, times=times, repeat=repeat)
'''


def test_old_call_wrapper_kernels() -> None:
    graph = parse_output_code(str(OLD_STYLE))
    assert graph.wrapper_style == "call"
    assert graph.warnings == []
    assert [(k.name, k.kind, k.heuristic) for k in graph.kernels] == [
        ("triton_poi_fused_add_relu_0", "poi", "pointwise"),
        ("triton_red_fused_sum_1", "red", "reduction"),
    ]
    poi, red = graph.kernels
    # The function inside the source is called triton_: the signature still comes from it.
    assert poi.signature == ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel", "XBLOCK"]
    assert red.signature == ["in_ptr0", "out_ptr0", "xnumel", "rnumel", "XBLOCK", "RBLOCK"]
    assert poi.size_hints == {"x": 1024}
    assert red.size_hints == {"x": 32, "r": 32}
    assert poi.triton_meta["kernel_name"] == "triton_poi_fused_add_relu_0"  # read from meta=
    assert red.decorator_kwargs["reduction_hint"] == "ReductionHint.INNER"
    assert poi.aten_ops == ["aten.add", "aten.relu"]
    assert poi.kernel_path is not None and poi.kernel_path.endswith("ckqxg3wfwrmu5nd4hh2kh7jv6ql2lpn3d7wkmvhvzxqfhbw3cbry.py")
    lines = OLD_STYLE.read_text().splitlines()
    assert poi.def_line is not None and lines[poi.def_line].startswith("def triton_(")


def test_old_call_wrapper_timeline_has_both_launch_styles_and_aten_fallbacks() -> None:
    graph = parse_output_code(str(OLD_STYLE))
    timeline = graph.timeline()
    summary = [(type(item).__name__, getattr(item, "kernel", None) or getattr(item, "op", None)) for item in timeline]
    assert summary == [
        ("ExternCall", "extern_kernels.mm"),
        ("Launch", "triton_poi_fused_add_relu_0"),
        ("ExternCall", "aten.sort.default"),
        ("Launch", "triton_red_fused_sum_1"),
        ("ExternCall", "aten.cumsum.default"),  # written torch.ops.aten.cumsum.default
    ]
    run_launch, grid_launch = graph.launches
    assert isinstance(run_launch, Launch) and run_launch.style == "run"
    assert run_launch.grid == "grid(1024)" and run_launch.int_args == [1024]
    assert grid_launch.style == "grid" and grid_launch.grid == "grid(32)"
    assert grid_launch.args == ["buf3", "buf4", "32", "32"] and grid_launch.int_args == [32, 32]
    assert {launch.function for launch in graph.launches} == {"call"}
    sort = graph.extern_calls[1]
    assert isinstance(sort, ExternCall) and sort.library == "aten" and sort.short_op == "sort"
    assert [b.name for b in graph.buffers] == ["buf0", "buf1", "buf4"]
    assert {(b.dtype, b.device) for b in graph.buffers} == {("torch.float32", "cuda")}
    assert [(i.name, i.shape) for i in graph.inputs] == [("arg0_1", [32, 32]), ("arg1_1", [32, 32]), ("arg2_1", [32, 32])]
    assert graph.device == "cuda"


def test_old_wrapper_dispatch_counts_aten_fallbacks_as_vendor() -> None:
    report = analyze(parse_output_code(str(OLD_STYLE)))
    assert report.classification == "optimizable"
    assert abs(report.vendor_share - 3 / 5) < 1e-9
    assert abs(report.triton_share - 2 / 5) < 1e-9


def test_torch25_call_wrapper_with_symbolic_size(tmp_path: Path) -> None:
    path = tmp_path / "output_code.py"
    path.write_text(TORCH25_STYLE)
    graph = parse_output_code(str(path))
    assert graph.wrapper_style == "call" and graph.name == tmp_path.name
    (kernel,) = graph.kernels
    assert kernel.kind == "poi" and kernel.heuristic == "pointwise"
    assert kernel.size_hints == {"x": 4096}
    assert kernel.triton_meta["device"]["cc"] == 90
    assert kernel.inductor_meta["kernel_name"] == "triton_poi_fused_gelu_0"
    assert kernel.decorator_kwargs == {"min_elem_per_thread": 0}
    assert kernel.device_str == "cuda"
    assert kernel.aten_ops == ["aten.gelu"] and kernel.source_nodes == ["gelu"]
    (addmm,) = graph.extern_calls
    assert addmm.short_op == "addmm" and addmm.kwargs["out"] == "buf0"
    (launch,) = graph.launches
    # The numel is a symbol here: no trailing integer literals.
    assert launch.int_args == [] and launch.grid == "grid(triton_poi_fused_gelu_0_xnumel)"
    assert [b.shape for b in graph.buffers] == [["s0", 64], ["s0", 64]]
    specs = {spec.name: spec for spec in graph.inputs}
    assert specs["arg0_1"].kind == "int" and specs["arg0_1"].value == 64
    assert specs["arg2_1"].dtype == "torch.float16"
    assert specs["arg1_1"].numel == 4096 and specs["arg1_1"].nbytes == 4096 * 4
