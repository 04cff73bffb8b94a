"""A quick GPU check of the reduction families' candidates, outside the gates (issue 16).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT families_check:400
    PYTHONPATH=$PWD:$PWD/server python3 -m benchmarks.gpu.families_check OUT_DIR [problem ...]   # GPU only

For each kbscale problem (max-autotune), every Triton reduction kernel's launch arguments are
captured on the first call; each family's candidates (rewrite context as in families.py, with the
sm_90 compile probe) is then loaded (launchers through ``load_launcher``, plain modules through
Inductor), run on copies of the captured arguments, compared with Inductor's kernel (max relative
error of every written argument; NaN counted), re-run to check the outputs are bit-identical, and
timed against Inductor's kernel (CUDA events, interleaved, median of ``REPS``). Writes
``families_check.{json,md}`` after every problem. A cheaper first look than families.py (no gates): it
answers "does it run, is it right, is it faster" in minutes. Needs the GPU (it launches Inductor's
CUDA kernels on captured arguments). Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 560),
``KERNELOPT_CHECK_REPS`` (15), ``KERNELOPT_FAMILIES_PER_FAMILY`` (3), ``KERNELOPT_FAMILIES_PROBLEMS``
(comma-separated problems; default the six below).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    KBSCALE,
    Budget,
    cell,
    compile_largest_graph,
    compile_probe,
    env_int,
    env_list,
    environment,
    failure,
    table,
    write_record,
)

DEFAULT = ("softmax_long_rows", "instance_norm", "l2_norm", "log_softmax_rows", "cross_entropy", "layer_norm_16_rows")
REPS = env_int("KERNELOPT_CHECK_REPS", 15)
PER_FAMILY = env_int("KERNELOPT_FAMILIES_PER_FAMILY", 3)


def _time(fn: Any, reps: int) -> list[float]:
    import torch

    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def check_problem(name: str, out_dir: str) -> dict[str, Any]:
    import torch

    from kernelopt_core.graph_module import load_graph_module, make_inputs
    from kernelopt_core.measure.peaks import cached_peaks

    begin = time.monotonic()
    os.environ["KERNELOPT_PROBLEM_SCALE"] = "h200"
    facts, graph = compile_largest_graph(os.path.join(KBSCALE, f"{name}.py"), os.path.join(out_dir, "work", name),
                                         "cuda:0")
    if graph is None:
        return {"problem": name, **facts}
    module = load_graph_module(graph.path, "cuda")
    captured: dict[str, tuple[Any, ...]] = {}
    for kernel in graph.kernels:
        obj = getattr(module, kernel.name, None)
        if obj is None or kernel.kind != "red":
            continue

        def wrap(original: Any, kname: str) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                if kname not in captured:
                    captured[kname] = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
                return original(*args, **kwargs)
            return run

        obj.run = wrap(obj.run, kernel.name)
    inputs = make_inputs(module, 0)
    module.call(list(inputs))
    torch.cuda.synchronize()
    del inputs
    for kname in captured:
        del getattr(module, kname).run  # the class's own run again
    peaks = cached_peaks(torch.cuda.get_device_name(0))
    entry: dict[str, Any] = {"problem": name, "compile_s": facts["compile_s"], "kernels": []}
    for kernel in graph.kernels:
        if kernel.name in captured:
            entry["kernels"].append(_check_kernel(kernel, captured.pop(kernel.name), getattr(module, kernel.name),
                                                  peaks, out_dir))
            torch.cuda.empty_cache()
    entry["wall_s"] = round(time.monotonic() - begin, 1)
    return entry


def _check_kernel(kernel: Any, args: tuple[Any, ...], original: Any, peaks: Any, out_dir: str) -> dict[str, Any]:
    import torch

    from kernelopt_core.analyst import analyze_kernel, rewrite_evidence
    from kernelopt_core.launchers import is_launcher_source, load_launcher
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    parsed = parse_kernel_module(kernel.source, kernel.name)
    evidence = rewrite_evidence(analyze_kernel(None, None, peaks, kernel, cpu=False), None)
    evidence["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    ctx = RewriteContext(module=parsed, original=parsed, device="cuda", evidence=evidence, compile_probe=compile_probe,
                         multiprocessors=evidence["sm_count"])
    written = [i for i, p in enumerate(parsed.params) if i < len(args) and isinstance(args[i], torch.Tensor)
               and p.startswith(("out_ptr", "in_out_ptr"))]
    stream = torch.cuda.current_stream().cuda_stream

    def copy() -> list[Any]:
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    ref = copy()
    original.run(*ref, stream=stream)
    torch.cuda.synchronize()
    work = copy()
    row: dict[str, Any] = {"name": kernel.name, "numels": parsed.numels, "causes": evidence.get("causes"),
                           "families": {}, "candidates": []}
    row["inductor_ms"] = statistics.median(_time(lambda: original.run(*work, stream=stream), REPS))
    sources = os.path.join(out_dir, "sources")  # .txt: run_all packs text files only
    os.makedirs(sources, exist_ok=True)
    with open(os.path.join(sources, f"{kernel.name}.original.py.txt"), "w") as handle:
        handle.write(kernel.source)
    for family in ("single_read", "cooperative_rows", "split_programs"):
        why = FAMILIES[family].not_applicable(ctx)
        row["families"][family] = why or "applies"
        if why:
            continue
        for number, rewrite in enumerate(FAMILIES[family].variants(ctx)[:PER_FAMILY]):
            item: dict[str, Any] = {"family": family, "title": rewrite.title, "params": rewrite.params}
            with open(os.path.join(sources, f"{kernel.name}.{family}{number}.py.txt"), "w") as handle:
                handle.write(rewrite.source)
            try:
                if is_launcher_source(rewrite.source, kernel.name):
                    cand = load_launcher(kernel.name, rewrite.source, "cuda", directory=os.path.join(out_dir, "launchers"))
                    launch = cand.run
                else:
                    from torch._inductor.async_compile import AsyncCompile

                    loaded = AsyncCompile().triton(kernel.name, rewrite.source, "cuda")
                    cand = loaded.result() if hasattr(loaded, "result") else loaded

                    def launch(*a: Any, c: Any = cand) -> None:
                        c.run(*a, stream=stream)
                outs = []
                for _ in range(2):
                    mine = copy()
                    for i in written:  # NaN marks what is left unwritten (integers: their smallest value)
                        mine[i].fill_(float("nan") if mine[i].is_floating_point() else torch.iinfo(mine[i].dtype).min)
                    launch(*mine)
                    torch.cuda.synchronize()
                    outs.append(mine)
                errors = [((outs[0][i].float() - ref[i].float()).norm() / ref[i].float().norm().clamp_min(1e-30)).item()
                          for i in written]
                item["rel_err"] = max(errors) if errors else None
                item["nan"] = any(bool(torch.isnan(outs[0][i]).any()) for i in written)
                item["bitwise_rerun"] = all(torch.equal(outs[0][i], outs[1][i]) for i in written)
                del outs
                t_cand: list[float] = []
                t_base: list[float] = []
                for _ in range(3):  # interleaved rounds
                    t_base += _time(lambda: original.run(*work, stream=stream), max(1, REPS // 3))
                    t_cand += _time(lambda launch=launch: launch(*work), max(1, REPS // 3))
                item.update(ms=statistics.median(t_cand), inductor_ms=statistics.median(t_base))
                item["speedup"] = round(item["inductor_ms"] / item["ms"], 3)
            except Exception as exc:  # noqa: BLE001 - recorded per candidate
                item.update(failure(exc))
            row["candidates"].append(item)
            print(json.dumps({k: item.get(k) for k in ("family", "title", "rel_err", "nan", "bitwise_rerun", "ms",
                                                       "inductor_ms", "speedup", "error")}), flush=True)
    return row


def run(out_dir: str, problems: list[str] | None = None) -> dict[str, Any]:
    """Check each problem in turn while ``KERNELOPT_GPU_BUDGET_S`` lasts (a problem takes 30-90 s)."""
    import gc

    import torch

    budget = Budget.from_env(560.0)
    results: dict[str, Any] = {"environment": environment("cuda:0"), "problems": {}}
    for name in problems or env_list("KERNELOPT_FAMILIES_PROBLEMS") or list(DEFAULT):
        if not budget.allows(90.0):
            results["problems"][name] = {"skipped": "out of time"}
            continue
        try:
            results["problems"][name] = check_problem(name, out_dir)
        except Exception as exc:  # noqa: BLE001 - recorded per problem
            results["problems"][name] = failure(exc)
        write_record(out_dir, "families_check", results, "The reduction families' candidates outside the gates",
                     _markdown(results["problems"]))
        gc.collect()
        torch.cuda.empty_cache()
    rows = _candidates(results["problems"])
    return {"problems": len(results["problems"]), "candidates": len(rows),
            "correct": sum(1 for *_, c in rows if c.get("rel_err") is not None and c["rel_err"] < 1e-4 and not c["nan"]),
            "bitwise_reruns": sum(1 for *_, c in rows if c.get("bitwise_rerun")),
            "faster": sorted(f"{c['family']}: {c['title']} {c['speedup']}x" for *_, c in rows
                             if (c.get("speedup") or 0) > 1.0)}


def _candidates(problems: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(name, kernel["name"], c) for name, entry in problems.items() for kernel in entry.get("kernels", [])
            for c in kernel.get("candidates", [])]


def _markdown(problems: dict[str, Any]) -> list[str]:
    rows = [(name, kernel, c["family"], c["title"], cell(c.get("rel_err"), ".1e"), cell(c.get("nan")),
             cell(c.get("bitwise_rerun")), cell(c.get("ms"), ".4f"), cell(c.get("inductor_ms"), ".4f"),
             cell(c.get("speedup"), ".3f", "x"), cell(str(c.get("error") or "")[:160]))
            for name, kernel, c in _candidates(problems)]
    errors = [f"- {name}: {entry.get('error') or entry.get('skipped')}" for name, entry in problems.items()
              if "error" in entry or "skipped" in entry]
    return [f"Kernel times: CUDA events, interleaved, median of {REPS}; errors relative to Inductor's output.", "",
            *table(("problem", "kernel", "family", "candidate", "rel. error", "NaN", "bitwise re-run", "ms",
                    "Inductor ms", "speedup", "error"), rows), *([""] + errors if errors else [])]


def main() -> int:
    print(json.dumps(run(sys.argv[1], sys.argv[2:] or None), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
