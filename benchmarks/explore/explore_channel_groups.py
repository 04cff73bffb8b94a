"""Why is channel_groups' statistics kernel slower than Inductor's on the H100? (issue 40)

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT explore/explore_channel_groups:300

Session 22 measured the family's shifted form at 0.59 ms against Inductor's 0.23 ms on problem 92's
statistics kernel, and 1.6-2.3 ms against 0.50 ms on problem 21's, where session 19's hand-written kernel
of the same tile and grid took 0.19 ms on problem 92. This script times, on the H100 dumps kept as test
fixtures (tests/fixtures/level2_h100), the family's launcher as generated and with one thing changed at
a time: no eviction hints, no first-trip shift, software pipelining, 4 warps, the loop-invariant loads
hoisted (``KERNELOPT_EXPLORE_CG=chunks``: the chunk's length and the grid's order instead); each through
``do_bench`` (host and device) and through a CUDA-graph replay (device alone), beside Inductor's own kernel
and (problem 92) the hand-written kernel. Each variant's statistics are checked
against float64. Writes ``explore_channel_groups.{json,md}``.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "level2_h100"
PROBLEMS = {  # fixture, statistics kernel's name prefix, (samples, channels, pixels), extra per-channel inputs
    "p92": ("p92_output_code.txt", "triton_red_fused_convolution_native_group_norm", (128, 64, 15876), 1),
    "p21": ("p21_output_code.txt", "triton_red_fused_add_convolution", (128, 32, 64516), 3),
}


def generated(problem: str, shape_index: int) -> tuple[str, str, Any]:
    """The family's launcher module for the problem's statistics kernel (shifted form), its launcher's name
    and the shape."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.search.rewrites import parse_kernel_module
    from kernelopt_core.search.rewrites.channel_groups import find_grouping, group_shapes, launcher_source
    from kernelopt_core.search.rewrites.reduction_passes import decompose

    fixture, prefix, _, _ = PROBLEMS[problem]
    graph = parse_output_code(str(FIXTURES / fixture))
    kernel = next(k for k in graph.kernels if k.name.startswith(prefix))
    reduction = decompose(parse_kernel_module(kernel.source, kernel.name))
    grouping = find_grouping(reduction)
    shape = group_shapes(grouping, 132)[shape_index]
    return launcher_source(reduction, grouping, shape, shifted=True), kernel.name, (grouping, shape, kernel)


def _no_eviction_hints(source: str) -> str:
    return re.sub(r", eviction_policy='evict_\w+'", "", source)


def _no_first_trip_shift(source: str) -> str:
    return re.sub(r"\n(\s*)if r0_offset == 0:\n\s*_ko_w0_shift = [^\n]*", r"\n\1pass", source)


def variants(source: str) -> dict[str, str]:
    """One change at a time to the generated module's text."""
    noevict = _no_eviction_hints(source)
    noshift = _no_first_trip_shift(source)
    stages3 = source.replace("num_stages=1)", "num_stages=3)", 1)
    warps4 = re.sub(r"num_warps=8, num_stages=1\)", "num_warps=4, num_stages=1)", source, count=1)
    # loads whose address reads no pixel index: hoisted out of the loop (per-channel parameters)
    lines = source.split("\n")
    hoisted, moved = [], []
    loop_at = next(i for i, line in enumerate(lines) if line.strip().startswith("for _ko_p in"))
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i > loop_at and "tl.load(in_ptr" in stripped and "r0_3" not in stripped and "_ko_part" not in stripped:
            indent = line[: len(line) - len(line.lstrip())]
            moved.append(stripped.replace("r0_mask & xmask", "xmask").replace("r0_2", "(_ko_c % CG)"))
            hoisted.append(indent + "pass")
        else:
            hoisted.append(line)
    if moved:
        cg = re.search(r"r0_index = _ko_pix \* (\d+) \+", source)
        indent = lines[loop_at][: len(lines[loop_at]) - len(lines[loop_at].lstrip())]
        hoisted[loop_at:loop_at] = [indent + m.replace("CG", cg.group(1) if cg else "1") for m in moved]
    return {"generated": source, "no eviction hints": noevict, "no first-trip shift": noshift,
            "num_stages=3": stages3, "4 warps": warps4, "per-channel loads hoisted": "\n".join(hoisted),
            "hoisted + no eviction + no shift": _no_first_trip_shift(_no_eviction_hints("\n".join(hoisted)))}


def chunk_variants(source: str) -> dict[str, str]:
    """The chunk's length and the grid's order changed, nothing else: is it where the programs read, not
    what they run, that makes the launcher slow? The family splits evenly since session 22 (problem 92: 993
    pixels); before, it rounded up to a multiple of its step (1024)."""
    chunk = int(re.search(r"CHUNK=(\d+),", source).group(1))  # type: ignore[union-attr]
    step = int(re.search(r"XBLOCK=(\d+), R0_BLOCK=\d+, CHUNK=", source).group(1))  # type: ignore[union-attr]
    rounded = -(-chunk // step) * step
    out = {"generated": source}
    for length, why in ((rounded, "rounded up to the step, before session 22"), (rounded + step, "a step more"),
                        (chunk + 7, "7 pixels more")):
        if length != chunk:
            out[f"CHUNK={length} ({why})"] = source.replace(f"CHUNK={chunk},", f"CHUNK={length},")
    grid = re.search(r"_pass0\[\((\d+), (\d+)\)\]", source)
    if grid:
        swapped = source.replace("_ko_n = tl.program_id(0)\n    _ko_s = tl.program_id(1)",
                                 "_ko_n = tl.program_id(1)\n    _ko_s = tl.program_id(0)")
        swapped = swapped.replace(grid.group(0), f"_pass0[({grid.group(2)}, {grid.group(1)})]")
        out["grid (chunk, sample)"] = swapped
        out[f"grid (chunk, sample), CHUNK={rounded}"] = swapped.replace(f"CHUNK={chunk},", f"CHUNK={rounded},")
    return out


def load_module(text: str, name: str, work: Path) -> Any:
    import importlib.util

    path = work / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def timings(fn: Any) -> dict[str, float]:
    """do_bench (host and device) and a CUDA graph's replay (device alone), in ms."""
    import torch
    from triton.testing import do_bench

    out = {"do_bench_ms": float(do_bench(fn, warmup=25, rep=200))}
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(30):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        out["graph_replay_ms"] = times[len(times) // 2]
    except Exception as exc:  # noqa: BLE001 - the do_bench figure stands alone
        out["graph_replay_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def run_problem(problem: str, work: Path, deadline: float) -> dict[str, Any]:
    import torch

    _, _, (n, c, hw), extra = PROBLEMS[problem]
    torch.manual_seed(0)
    x = torch.randn(n * hw * c, device="cuda") * 2.0 + 0.5
    params = [torch.randn(c, device="cuda") * 0.3 for _ in range(extra)]
    row: dict[str, Any] = {"problem": problem, "bytes": x.numel() * 4, "variants": []}
    for shape_index in (0, 1):
        source, name, (grouping, shape, kernel) = generated(problem, shape_index)
        rows = grouping.groups * n
        want_mean = want_m2 = None
        chosen = chunk_variants(source) if os.environ.get("KERNELOPT_EXPLORE_CG") == "chunks" else variants(source)
        for label, text in chosen.items():
            if shape_index and label != "generated":
                continue  # the second shape: as generated only
            if time.monotonic() > deadline:
                row["variants"].append({"variant": label, "skipped": "out of time"})
                continue
            entry: dict[str, Any] = {"variant": label, "shape": shape.label(grouping)}
            try:
                module = load_module(text.replace("triton_helpers.set_driver_to_gpu()", ""),
                                     f"{problem}_{shape_index}_{len(row['variants'])}", work)
                launcher = getattr(module, name)
                mean = torch.empty(rows, device="cuda")
                m2 = torch.empty(rows, device="cuda")
                args = [x, *params, mean, m2, rows, grouping.per_group * hw]
                launcher(*args)
                torch.cuda.synchronize()
                if want_mean is None:
                    want_mean, want_m2 = reference(problem, x, params, n, c, hw, grouping.groups)
                entry["mean_err"] = float((mean.double() - want_mean).abs().max())
                entry["m2_rel_err"] = float(((m2.double() - want_m2) / want_m2).abs().max())
                entry.update(timings(lambda launcher=launcher, args=args: launcher(*args)))
                entry["gb_per_s"] = row["bytes"] / entry.get("graph_replay_ms", entry["do_bench_ms"]) / 1e6
            except Exception as exc:  # noqa: BLE001 - one variant's failure is a result
                entry["error"] = f"{type(exc).__name__}: {exc}"[:600]
            row["variants"].append(entry)
            print(problem, entry, flush=True)
    return row


def reference(problem: str, x: Any, params: list[Any], n: int, c: int, hw: int, groups: int) -> tuple[Any, Any]:
    """Float64 mean and M2 per (sample, group) of the statistics kernel's input, x channels-last."""
    import torch

    v = x.double().view(n, hw, c)
    if problem == "p92":
        v = v + params[0].double()
    else:  # sigmoid((x + b1 + b2) * scale)
        v = torch.sigmoid((v + params[0].double() + params[1].double()) * params[2].double())
    v = v.view(n, hw, groups, c // groups).permute(0, 2, 1, 3).reshape(n * groups, -1)
    mean = v.mean(dim=1)
    m2 = ((v - mean[:, None]) ** 2).sum(dim=1)
    return mean, m2


def hand_written_p92(work: Path, chunk: int = 0) -> dict[str, Any]:
    import torch

    from benchmarks.explore.explore_groupnorm_tail import stats_partial

    n, c, hw = PROBLEMS["p92"][2]
    x = torch.randn(n * hw * c, device="cuda")
    bias = torch.randn(c, device="cuda")
    part = torch.empty(n * 16 * 2 * c, device="cuda")
    chunk = chunk or -(-hw // 16)

    def launch() -> None:
        stats_partial[(n, 16)](x, bias, bias, part, hw, chunk, C=c, SPLIT=16, S_BLOCK=32, TAIL="lse", num_warps=4)

    launch()
    return {"variant": f"hand-written stats_partial split=16 CHUNK={chunk} S_BLOCK=32 warps=4 (no combine)",
            **timings(launch)}


def inductor_kernel(problem: str, work: Path) -> dict[str, Any]:
    """Inductor's own statistics kernel, autotuned on its first launch as in the graph, through its ``run``."""
    import shutil

    import torch

    from kernelopt_core.graph_module import load_graph_module

    fixture, prefix, (n, c, hw), extra = PROBLEMS[problem]
    path = work / f"{problem}_output_code.py"  # the importer wants a .py name
    shutil.copyfile(FIXTURES / fixture, path)
    module = load_graph_module(str(path), device="cuda")
    name = next(k for k in dir(module) if k.startswith(prefix))
    kernel = getattr(module, name)
    groups = {"p92": 16, "p21": 8}[problem]
    x = torch.randn(n * hw * c, device="cuda")
    params = [torch.randn(c, device="cuda") for _ in range(extra)]
    mean, m2 = torch.empty(n * groups, device="cuda"), torch.empty(n * groups, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def launch() -> None:
        kernel.run(x, *params, mean, m2, n * groups, (c // groups) * hw, stream=stream)

    launch()
    return {"variant": f"Inductor's {name}", **timings(launch)}


def run(out_dir: str) -> dict[str, Any]:
    budget = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "300"))
    started = time.monotonic()
    deadline = started + budget - 30
    work = Path("/tmp/kernelopt-gpu-work/explore_channel_groups")
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"problems": []}
    for problem in PROBLEMS:
        references = []
        for extra in (lambda problem=problem: inductor_kernel(problem, work),) + (
                lambda: hand_written_p92(work), lambda: hand_written_p92(work, 1024)) * (problem == "p92"):
            try:
                references.append(extra())
            except Exception as exc:  # noqa: BLE001
                references.append({"variant": "reference kernel", "error": f"{type(exc).__name__}: {exc}"[:600]})
            print(problem, references[-1], flush=True)
        row = run_problem(problem, work, deadline)
        row["variants"][:0] = references
        result["problems"].append(row)
        Path(out_dir, "explore_channel_groups.json").write_text(json.dumps(result, indent=1, default=str))
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    Path(out_dir, "explore_channel_groups.json").write_text(json.dumps(result, indent=1, default=str))
    Path(out_dir, "explore_channel_groups.md").write_text(markdown(result))
    return {"elapsed_s": result["elapsed_s"]}


def markdown(result: dict[str, Any]) -> str:
    lines = ["# channel_groups' statistics kernel, one change at a time", "",
             "| problem | variant | shape | do_bench ms | graph replay ms | GB/s | mean err | M2 rel err | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in result["problems"]:
        for v in row["variants"]:
            def cell(key: str, fmt: str = ".4f", v: dict[str, Any] = v) -> str:
                value = v.get(key)
                return format(value, fmt) if isinstance(value, float) else "-"
            lines.append(f"| {row['problem']} | {v['variant']} | {v.get('shape', '-')} | {cell('do_bench_ms')} | "
                         f"{cell('graph_replay_ms')} | {cell('gb_per_s', '.0f')} | {cell('mean_err', '.1e')} | "
                         f"{cell('m2_rel_err', '.1e')} | {v.get('error', v.get('skipped', ''))[:120]} |")
    return "\n".join(lines) + "\n"
