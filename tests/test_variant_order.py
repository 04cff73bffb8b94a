"""The best variants first: the H200's recorded measurements order a family's variants on a GPU, and the
run's own timings re-order what remains (issue 25, item 6)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from kernelopt_core.search.agents.executor import OfflineSession
from kernelopt_core.search.kernel_search import VariantTiming
from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module
from kernelopt_core.search.rewrites.measured import MEASURED, Measured
from kernelopt_core.search.variant_order import rank_variants, variant_order

ROOT = Path(__file__).resolve().parent.parent
# The held-out softmax of issue 25 (4096 rows of 393216), as Inductor wrote it on the H200.
SOFTMAX = ROOT / "benchmarks/results/h200/families/sources/triton_red_fused__softmax_exp_prepare_softmax_online_sub_0.original.py.txt"


def _recorded(m: Measured) -> tuple[float, dict]:
    """The speedup (and, where the record has them, the family parameters) the record holds for ``m``."""
    path, _, entry = m.source.partition("#")
    text = (ROOT / path).read_text()
    if path.endswith("explore_reductions.json"):
        pattern, variant = entry.split("/")
        found = next(p for p in json.loads(text)["patterns"] if p["pattern"] == pattern)
        row = next(v for v in found["variants"] if v["name"] == variant)
        assert row["ok"], m.source
        return row["speedup"], {}
    if "families_check" in path:
        problem, fragment = entry.split("/")
        kernels = json.loads(text)[problem]["kernels"]
        for kernel in kernels:
            for candidate in kernel["candidates"]:
                if fragment in candidate["title"]:
                    assert kernel["numels"] == m.shape_dict, m.source
                    params = candidate["params"]
                    flat = {"chunk": params.get("chunk"), "num_warps": params["num_warps"],
                            "blocks.XBLOCK": (params.get("blocks") or {}).get("XBLOCK")}
                    return candidate["speedup"], {k: v for k, v in flat.items() if v is not None}
        raise AssertionError(f"{m.source}: not in the record")
    if path.endswith("explore_windows.json"):
        case, label = entry.split("/")
        variant, *config = label.split()
        wanted = {k: int(v) for k, v in (item.split("=") for item in config)}
        found = next(c for c in json.loads(text)["cases"] if c["name"] == case)
        row = next(r for r in found["rows"] if r["variant"] == variant and r["config"] == wanted)
        return round(row["speedup_vs_inductor"], 3), {}
    # docs/optimizer.md: the spot check's milliseconds are in the text, the speedup is their ratio
    assert path == "docs/optimizer.md"
    times = re.findall(r"(\d+\.\d+) ms", entry)
    assert times and all(f"{t} ms" in text for t in times), m.source
    return m.speedup, {}


@pytest.mark.parametrize("measured", MEASURED, ids=lambda m: m.source.rsplit("/", 1)[-1][:60])
def test_every_measurement_is_what_the_record_says(measured: Measured) -> None:
    speedup, params = _recorded(measured)
    assert measured.speedup == pytest.approx(speedup, abs=5e-4)
    for key, value in params.items():
        if key in measured.params_dict:
            assert measured.params_dict[key] == value, (measured.source, key)
    name = measured.source.rsplit("/", 1)[-1]
    if name.startswith("coop_g"):  # G programs of a row: chunk = the row over G, up to a power of two
        group, warps = map(int, re.match(r"coop_g(\d+)_w(\d+)", name).groups())  # type: ignore[union-attr]
        row = measured.shape_dict["r0_numel"]
        assert measured.params_dict["num_warps"] == warps
        assert measured.params_dict["chunk"] == 2 ** math.ceil(math.log2(-(-row // group)))


def softmax_context(device: str = "cuda") -> RewriteContext:
    module = parse_kernel_module(SOFTMAX.read_text())
    ctx = RewriteContext(module=module, original=module, device=device)
    ctx.evidence.update(causes=["re-reads"], traffic_ratio=1.5, sm_count=132)
    return ctx


def shapes(variants) -> list[tuple[int, int]]:
    return [(v.params["chunk"], v.params["num_warps"]) for v in variants]


def test_the_held_out_softmax_tries_the_prototypes_configuration_first() -> None:
    ctx = softmax_context()
    variants = FAMILIES["cooperative_rows"].variants(ctx)
    # the family's own order put chunk 8192 first: it ran at 0.29x on the H200
    assert shapes(variants)[0] == (8192, 8) and (4096, 4) in shapes(variants)
    ranked = rank_variants(variants, ctx, "cuda", [])
    assert shapes(ranked)[0] == (4096, 4)  # the prototype's 1.26x configuration (coop_g96_w4)
    assert shapes(ranked)[-1] == (8192, 8)  # measured behind it by the prototype and by the family itself
    assert sorted(shapes(ranked)) == sorted(shapes(variants))  # ordered, nothing dropped


def test_the_runs_own_timings_reorder_what_remains() -> None:
    ctx = softmax_context()
    variants = FAMILIES["cooperative_rows"].variants(ctx)
    first = next(v for v in variants if shapes([v]) == [(4096, 4)])
    rest = [v for v in variants if v is not first]
    slow = rank_variants(rest, ctx, "cuda", [VariantTiming("cooperative_rows", dict(first.params), 0.6)])
    fast = rank_variants(rest, ctx, "cuda", [VariantTiming("cooperative_rows", dict(first.params), 1.3)])
    assert shapes(fast)[0] == (2048, 4)  # the neighbour of a configuration that won in this run
    assert shapes(slow)[0] != (2048, 4)  # ... goes back when it lost
    assert shapes(slow)[0] == (16384, 16)


def test_on_the_cpu_only_the_runs_timings_reorder() -> None:
    ctx = softmax_context("cpu")
    variants = FAMILIES["cooperative_rows"].variants(softmax_context())  # GPU variants, ranked as on a CPU
    assert rank_variants(variants, ctx, "cpu", []) == variants  # the H200's measurements are not the CPU's
    (won,) = [v for v in variants if shapes([v]) == [(4096, 4)]]
    timed = [VariantTiming("cooperative_rows", dict(won.params), 1.5)]
    rest = [v for v in variants if v is not won]
    assert shapes(rest)[0] == (8192, 8) and shapes(rank_variants(rest, ctx, "cpu", timed))[0] == (2048, 4)


def test_the_offline_executor_proposes_in_the_order_as_the_run_learns() -> None:
    ctx = softmax_context()
    variants = FAMILIES["cooperative_rows"].variants(ctx)
    timings: list[VariantTiming] = []
    session = OfflineSession(list(variants), set(), order=variant_order("cuda", ctx, timings))
    first = session.propose()
    assert first is not None and (first.params["chunk"], first.params["num_warps"]) == (4096, 4)
    timings.append(VariantTiming("cooperative_rows", dict(first.params), 1.3))  # the run timed it: a win
    second = session.propose("rejected by gate 2")
    assert second is not None and (second.params["chunk"], second.params["num_warps"]) == (2048, 4)
