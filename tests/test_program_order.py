"""The program_order family: layer norm's apply pass with the programs of one weight block back to back."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_reduction_families import _on_the_interpreter
from test_rewrites import LAYER_NORM_APPLY, context, kernel_of

from kernelopt_core.gates.static import check_source
from kernelopt_core.search.rewrites import FAMILIES, LaunchConfig, parse_kernel_module
from kernelopt_core.search.rewrites.describe import describe_change
from kernelopt_core.search.rewrites.launch_config import block_choices, candidate_configs

NAME = "triton_poi_fused_native_layer_norm_2"
FAMILY = FAMILIES["program_order"]


def apply_kernel(rows: int, columns: int, int64: bool = False) -> str:
    """LAYER_NORM_APPLY over ``rows`` rows of ``columns`` (its original: 16 of 4194304)."""
    text = LAYER_NORM_APPLY.replace("67108864", str(rows * columns)).replace("4194304", str(columns))
    if int64:
        text = text.replace("tl.program_id(0) * XBLOCK", "tl.program_id(0).to(tl.int64) * XBLOCK")
    return text


def measured(text: str, ratio: float | None = 1.88, **kw) -> object:
    ctx = context(text, NAME, **kw)
    ctx.evidence.update(traffic_ratio=ratio)
    return ctx


def test_layer_norm_apply_runs_the_programs_of_one_weight_block_back_to_back() -> None:
    ctx = measured(LAYER_NORM_APPLY)
    assert FAMILY.not_applicable(ctx) is None
    remap, hinted = FAMILY.variants(ctx)
    assert remap.title == "programs of one shared block back to back (16 rows per block of 4194304)"
    assert remap.params == {"rows": 16, "columns": 4194304}
    assert hinted.title == remap.title + "; evict_first on 1 load"  # x streams; weight and bias stay
    body = remap.source.split("@triton.jit")[1]
    assert "    xpid = tl.program_id(0)\n" in body
    assert "    tl.static_assert(4194304 % XBLOCK == 0)  # kernelopt: XBLOCK divides 4194304\n" in body
    assert "    xoffset = (xpid % 16) * 4194304 + (xpid // 16) * XBLOCK\n" in body
    assert "tl.program_id(0) * XBLOCK" not in body
    # everything else is Inductor's text, byte for byte
    kept = [line for line in remap.source.splitlines() if "xpid" not in line and "kernelopt" not in line]
    assert kept == [line for line in LAYER_NORM_APPLY.splitlines() if not line.strip().startswith("xoffset =")]
    assert ("XBLOCK", "4194304") in parse_kernel_module(remap.source, NAME).divides_markers()
    for variant in (remap, hinted):
        report = check_source(LAYER_NORM_APPLY, NAME, variant.source)
        assert report.ok, [f.describe() for f in report.findings]
    assert describe_change(LAYER_NORM_APPLY, remap.source, NAME) == remap.title  # the remap is named, not "4 lines"
    # once remapped there is no `xoffset = tl.program_id(0) * XBLOCK` left to remap
    assert "already remapped" in FAMILY.not_applicable(measured(remap.source))


def test_the_int64_program_id_keeps_its_cast() -> None:
    (remap, _) = FAMILY.variants(measured(apply_kernel(16, 4194304, int64=True)))
    assert "    xpid = tl.program_id(0).to(tl.int64)\n" in remap.source
    assert check_source(LAYER_NORM_APPLY, NAME, remap.source).ok


def test_the_shared_data_must_be_big_enough_to_be_evicted_or_measured_re_read() -> None:
    # 16 rows of 4194304: 32 MiB of weight and bias (fp32) against 50 MiB of L2 when nothing is measured
    assert FAMILY.not_applicable(measured(LAYER_NORM_APPLY, ratio=None)) is None
    big_l2 = measured(LAYER_NORM_APPLY, ratio=None)
    big_l2.evidence.update(l2_bytes=512 * 2**20)
    assert "stay in an L2" in FAMILY.not_applicable(big_l2)
    assert "not re-read" in FAMILY.not_applicable(measured(LAYER_NORM_APPLY, ratio=1.0))
    assert FAMILY.not_applicable(measured(LAYER_NORM_APPLY, ratio=1.15)) is None
    half = LAYER_NORM_APPLY.replace("'in_ptr3': '*fp32'", "'in_ptr3': '*bf16'").replace("'in_ptr4': '*fp32'",
                                                                                        "'in_ptr4': '*bf16'")
    tight = measured(half, ratio=None)
    tight.evidence.update(l2_bytes=8 * 16 * 2**20 + 8)  # 16 MiB of bf16 weight and bias: just under l2/8
    assert "stay in an L2" in FAMILY.not_applicable(tight)


def test_not_applicable_on_the_interpreter_or_when_a_launch_config_breaks_the_bijection() -> None:
    assert "L2" in FAMILY.not_applicable(measured(LAYER_NORM_APPLY, device="cpu"))
    odd = apply_kernel(16, 768)  # rows of 3 x 256
    assert "does not divide 768" in FAMILY.not_applicable(
        measured(odd, inductor_configs=[LaunchConfig.of({"XBLOCK": 256}, 4), LaunchConfig.of({"XBLOCK": 1024}, 4)]))
    assert FAMILY.not_applicable(measured(odd, inductor_configs=[LaunchConfig.of({"XBLOCK": 256}, 4)])) is None
    assert "not a multiple of XBLOCK=8192" in FAMILY.not_applicable(measured(odd))  # no config known
    fixed = odd.replace("@triton_heuristics.pointwise(size_hints={'x': 12288}, ",
                        "@triton_heuristics.fixed_config(config={'XBLOCK': 512, 'num_warps': 4, 'num_stages': 1}, ")
    assert parse_kernel_module(fixed, NAME).explicit_config is not None
    assert "(512) does not divide 768" in FAMILY.not_applicable(
        measured(fixed, inductor_configs=[LaunchConfig.of({"XBLOCK": 256}, 4)]))  # the explicit config wins


def test_not_applicable_without_shared_loads_or_to_malformed_kernels() -> None:
    softmax = kernel_of("softmax")
    assert "not a pointwise kernel" in FAMILY.not_applicable(context(softmax.source, softmax.name,
                                                                     evidence={"traffic_ratio": 1.88}))
    elementwise = kernel_of("elementwise")
    ctx = context(elementwise.source, elementwise.name)
    ctx.evidence.update(traffic_ratio=1.88)
    assert FAMILY.not_applicable(ctx) is not None and FAMILY.variants(ctx) == []
    # the row's mean and rstd (xindex // C) alone are per-row scalars, not shared data
    stats_only = LAYER_NORM_APPLY.replace("(x0)", "(x1)")
    assert "no load of shared data" in FAMILY.not_applicable(measured(stats_only))
    malformed = {
        "not a whole number of rows": LAYER_NORM_APPLY.replace("xnumel = 67108864", "xnumel = 67108865"),
        "outside 2..4096": apply_kernel(1, 4194304),
        "not exactly one": LAYER_NORM_APPLY.replace("    xoffset = tl.program_id(0) * XBLOCK\n",
                                                    "    xoffset = tl.program_id(0) * XBLOCK\n" * 2),
        "no static `xnumel": LAYER_NORM_APPLY.replace("    xnumel = 67108864\n", ""),
        "two-dimensional": LAYER_NORM_APPLY.replace("x2 = xindex", "x2 = xindex + yindex"),
        "no literal triton_meta": re.sub(r"triton_meta=\{.*?\}\},", "triton_meta=meta(),", LAYER_NORM_APPLY,
                                         flags=re.DOTALL),
        "arange": LAYER_NORM_APPLY.replace("xoffset + tl.arange(0, XBLOCK)[:]", "xoffset + tl.arange(0, 64)[:]"),
        "rows of 0": LAYER_NORM_APPLY.replace("(xindex % 4194304)", "(xindex % 0)"),
    }
    for reason, text in malformed.items():
        why = FAMILY.not_applicable(measured(text))
        assert why is not None and reason in why, (reason, why)
        assert FAMILY.variants(measured(text)) == []


def test_block_choices_keep_to_divisors_of_a_numeric_marker() -> None:
    text = apply_kernel(16, 1536)  # rows of 3 x 512
    plain = parse_kernel_module(text, NAME)
    assert 1024 in block_choices(plain, "XBLOCK", on_cpu=False)
    (remap, *_) = FAMILY.variants(measured(text, inductor_configs=[LaunchConfig.of({"XBLOCK": 512}, 4)]))
    module = parse_kernel_module(remap.source, NAME)
    assert block_choices(module, "XBLOCK", on_cpu=False) == [16, 32, 64, 128, 256, 512]
    assert block_choices(module, "XBLOCK", on_cpu=True) == [8, 16, 32, 64, 128, 256, 512]
    later = candidate_configs(context(remap.source, NAME), module)
    assert later and all(1536 % c.block("XBLOCK") == 0 for c in later)
    for config_rewrite in FAMILIES["launch_config"].variants(context(remap.source, NAME)):
        assert 1536 % config_rewrite.params["blocks"]["XBLOCK"] == 0


def _offsets(source: str, programs: int, xblock: int) -> list[int]:
    """Each program's xoffset, from the remapped line itself, evaluated once over every program id as a
    numpy array (numpy's % and // agree with Python's on ids >= 0; up to 2 million programs)."""
    import numpy as np

    expression = re.search(r"^\s*xoffset = (.*)$", source.split("@triton.jit")[1], re.MULTILINE)
    assert expression is not None
    ids = np.arange(programs, dtype=np.int64)
    offsets = np.broadcast_to(eval(expression.group(1), {"xpid": ids, "XBLOCK": xblock}), ids.shape)
    return [int(o) for o in offsets]


def test_every_row_and_block_is_visited_exactly_once() -> None:
    for rows, columns, xblock in ((3, 2048, 256), (16, 4194304, 1024), (7, 8192, 8192), (4096, 8192, 16)):
        configs = [LaunchConfig.of({"XBLOCK": xblock}, 4)]
        (remap, *_) = FAMILY.variants(measured(apply_kernel(rows, columns), inductor_configs=configs))
        programs = rows * columns // xblock  # the grid Inductor launches: cdiv(xnumel, XBLOCK)
        offsets = _offsets(remap.source, programs, xblock)
        assert sorted(offsets) == list(range(0, rows * columns, xblock)), (rows, columns, xblock)
        # the R programs of one column block are consecutive
        assert [o % columns for o in offsets[:rows]] == [0] * rows
        assert [o // columns for o in offsets[:rows]] == list(range(rows))


_RUN = r"""
import importlib.util, json, sys
import torch

folder = sys.argv[2]
cases = json.load(open(folder + "/cases.json"))

def load(path, tag):
    spec = importlib.util.spec_from_file_location(tag, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, cases["name"])

results = {}
for case in cases["cases"]:
    rows, columns, xblock = case["rows"], case["columns"], case["xblock"]
    torch.manual_seed(rows)
    x = torch.randn(rows * columns)
    mean, rstd = torch.randn(rows), torch.rand(rows) + 0.5
    weight, bias = torch.randn(columns), torch.randn(columns)
    outs = {}
    for key in ("original", "remap", "hinted"):
        kernel = load(case[key], f"{key}_{case['label']}")
        out = torch.full((rows * columns,), float("nan"))
        kernel[(rows * columns // xblock,)](x, mean, rstd, weight, bias, out, rows * columns, XBLOCK=xblock)
        outs[key] = out
    try:  # an XBLOCK that does not divide the row: the static_assert refuses it
        kernel = load(case["remap"], f"bad_{case['label']}")
        kernel[(1,)](x, mean, rstd, weight, bias, torch.empty_like(x), rows * columns, XBLOCK=2 * columns)
        refused = False
    except Exception:
        refused = True
    reference = ((x.view(rows, columns) - mean[:, None]) * rstd[:, None] * weight + bias).reshape(-1)
    results[case["label"]] = {
        "all_written": not any(bool(o.isnan().any()) for o in outs.values()),
        "bitwise": all(torch.equal(outs["original"], o) for o in outs.values()),
        "error": (outs["original"] - reference).abs().max().item(),
        "refused": refused,
    }
print(json.dumps(results))
"""


def _plain(source: str) -> str:
    """The module as a plain ``@triton.jit`` function (no Inductor launcher), for the interpreter."""
    return "import triton\nimport triton.language as tl\n\n\n" + source[source.index("@triton.jit"):]


def test_the_remapped_kernel_matches_inductors_bit_for_bit_on_the_interpreter(tmp_path: Path) -> None:
    cases = []
    for rows, columns, xblock, int64 in ((4, 2048, 256, False), (3, 2048, 256, False), (5, 1024, 128, True)):
        label = f"{rows}x{columns}/{xblock}" + (" int64" if int64 else "")
        text = apply_kernel(rows, columns, int64)
        remap, hinted = FAMILY.variants(measured(text, inductor_configs=[LaunchConfig.of({"XBLOCK": xblock}, 4)]))
        paths = {}
        for key, source in (("original", text), ("remap", remap.source), ("hinted", hinted.source)):
            path = tmp_path / f"{key}_{rows}_{columns}_{int(int64)}.py"
            path.write_text(_plain(source))
            paths[key] = str(path)
        cases.append({"label": label, "rows": rows, "columns": columns, "xblock": xblock, **paths})
    (tmp_path / "cases.json").write_text(json.dumps({"name": NAME, "cases": cases}))
    results = _on_the_interpreter(_RUN, tmp_path)
    assert set(results) == {c["label"] for c in cases}
    for label, result in results.items():
        assert result["all_written"], label  # every element written (the output started as NaN)
        assert result["bitwise"], label  # same program per element, same math: the same bits
        assert result["error"] < 1e-5, (label, result)
        assert result["refused"], label


def test_the_remap_compiles_for_sm90_and_its_assert_refuses_a_block_that_breaks_the_bijection() -> None:
    from kernelopt_core.gates.ptx_compile import shared_compiler
    from kernelopt_core.search.rewrites.kernel_source import with_launch_config

    # Inductor's triton_meta names the device (not a literal: the signature alone is read)
    device = ("'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, "
              "regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, "
              "warp_size=32), 'constants': {}, 'configs': [{(0,): [['tt.divisibility', 16]]}]},")
    text = apply_kernel(16, 1536).replace("'XBLOCK': 'constexpr'}},", "'XBLOCK': 'constexpr'}, " + device)
    text = text.replace("triton_heuristics\n",
                        "triton_heuristics\nfrom torch._inductor.runtime.hints import DeviceProperties\n", 1)
    assert "DeviceProperties(type=" in text and "import DeviceProperties" in text
    configs = [LaunchConfig.of({"XBLOCK": 512}, 4)]
    (remap, *_) = FAMILY.variants(measured(text, inductor_configs=configs))
    module = parse_kernel_module(remap.source, NAME)
    good = shared_compiler().compile(NAME, with_launch_config(module, LaunchConfig.of({"XBLOCK": 512}, 4)))
    assert good["ok"], good.get("error")
    bad = shared_compiler().compile(NAME, with_launch_config(module, LaunchConfig.of({"XBLOCK": 1024}, 4)))
    # 1024 does not divide 1536: programs would overlap and leave elements unwritten
    assert not bad["ok"] and "static_assert" in str(bad.get("error")), bad.get("error")


def test_without_measurements_the_remap_is_planned_first() -> None:
    """Without ncu (a budget too short for a profile) the source alone shows 134 MB of shared data re-read per
    row: the remap comes before the launch configs, which took the layer norm's budget on the H100."""
    from kernelopt_core.search.agents.context import KernelBrief
    from kernelopt_core.search.agents.planner import PlanRequest, offline_plans

    brief = KernelBrief(name="triton_poi_fused_native_layer_norm_2", kind="poi", device="cuda",
                        original_source=LAYER_NORM_APPLY)
    ctx = context(LAYER_NORM_APPLY, brief.name)
    plans = offline_plans(PlanRequest(brief=brief, node_source=LAYER_NORM_APPLY, context=ctx, n=2))
    assert plans[0].family == "program_order"


def test_a_row_not_a_multiple_of_the_largest_block_pins_inductors_config() -> None:
    """Under Inductor's heuristic, max-autotune's coordinate descent may step to any power of two up to 8192;
    a row of 768 would fail the static_assert at 1024, so the variant fixes Inductor's first config."""
    odd = apply_kernel(16, 768)
    configs = [LaunchConfig.of({"XBLOCK": 256}, 4)]
    (remap, *_) = FAMILY.variants(measured(odd, inductor_configs=configs))
    module = parse_kernel_module(remap.source, NAME)
    assert module.explicit_config == configs[0] and "fixed config XBLOCK=256" in remap.title
    assert check_source(odd, NAME, remap.source).ok
    assert all(768 % v == 0 for v in block_choices(module, "XBLOCK", on_cpu=False))
    (whole, *_) = FAMILY.variants(measured(LAYER_NORM_APPLY, inductor_configs=configs))
    assert parse_kernel_module(whole.source, NAME).explicit_config is None  # 4194304: every block divides it
