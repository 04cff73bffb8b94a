"""Gate 1's compile pool on the device machine's cores: before, serial and pooled, cold and cached.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT compile_pool:300
    python -m benchmarks.gpu.compile_pool OUT_DIR [--graphs softmax,rmsnorm] [--dump path/to/output_code.py ...]
        [--workers N] [--reps 2]

The compile targets sm_90 on the CPU (no GPU is touched), so this runs anywhere; on the H200
machine (16 cores) it measures what issue 25's item 5 buys. For each reduction kernel of the H200
fixture graphs (and of each ``--dump``), cold (no disk cache; Triton's own cache is an empty
folder, so the GPU runs' cache does not answer):

1. **gate 1** (``run_static_gate``): ``before`` = one contained process compiling every config in
   turn (the path before the pool), ``serial`` = the pool with 1 worker, ``pool`` = N workers;
   the verdicts and per-config registers/spills must be equal;
2. **compile probes** of the rewrite families (single_read, cooperative_rows, split_programs, with
   re-read and low-parallelism evidence so that they propose): one by one on 1 worker (as before)
   vs batched on the pool; the variants must be equal;
3. **cached**: gate 1 again with the disk cache, from a fresh compiler (another run): 0 compiles.

Wall seconds per repetition (median, min, max). Writes ``compile_pool.{json,md}``. About 4 minutes
for the softmax kernel at 2 reps on 16 cores. A driver over gate 1's compile pool
(``kernelopt_core.gates.ptx_compile``), the pieces it times. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (a
kernel is not started once less than a third of it is left; unset: no limit),
``KERNELOPT_COMPILE_POOL_GRAPHS`` (default softmax), ``KERNELOPT_COMPILE_POOL_REPS`` (default 2).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks.gpu.devicescript import (
    FIXTURE_DUMPS,
    Budget,
    env_int,
    env_list,
    environment,
    table,
    write_record,
)

GRAPHS = ("softmax",)  # six launch configs; rmsnorm and layernorm_gelu have six each too
FAMILIES_PROBED = ("single_read", "cooperative_rows", "split_programs")
EVIDENCE = {"causes": ["re-reads", "low-parallelism"]}


def _timed(work: Callable[[], Any], reps: int) -> tuple[Any, dict[str, float]]:
    seconds, result = [], None
    for _ in range(reps):
        begin = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - begin)
    return result, {"median_s": round(statistics.median(seconds), 2), "min_s": round(min(seconds), 2),
                    "max_s": round(max(seconds), 2)}


def _configs(compiled: dict[str, Any]) -> list[tuple[Any, ...]]:
    keys = ("kwargs", "num_warps", "ok", "stage", "n_regs", "n_spills", "shared_bytes")
    return [tuple(str(c.get(k)) for k in keys) for c in compiled.get("configs") or []]


def _before(zygote: Any, kernel: Any) -> dict[str, Any]:
    """The path before the pool: one contained process compiles the module's configs one by one."""
    from kernelopt_core.sandbox.process import SandboxProcess

    process = SandboxProcess.start("compile", "cpu", zygote=zygote)
    try:
        reply = process.call("call", timeout_s=600, callable="kernelopt_core.gates.sm90_compile:compile_source",
                             kwargs={"kernel_name": kernel.name, "source": kernel.source,
                                     "workdir": os.path.join(process.scratch, "tmp")})
    finally:
        process.close()
    return reply.get("result") or {"ok": False, "error": reply.get("error"), "configs": []}


def _gate1(graph: Any, kernel: Any, workers: int, reps: int, zygote: Any) -> dict[str, Any]:
    from kernelopt_core.gates.ptx_compile import PtxCompiler
    from kernelopt_core.gates.static import run_static_gate

    before, before_s = _timed(lambda: _before(zygote, kernel), reps)
    out: dict[str, Any] = {"kernel": kernel.name, "configs": len(before.get("configs") or []), "before": before_s}
    verdicts = {}
    for label, count in (("serial", 1), ("pool", workers)):
        compiler = PtxCompiler(workers=count, cache=False)
        try:
            verdict, out[label] = _timed(lambda c=compiler: run_static_gate(graph, kernel.name, kernel.source,
                                                                            compiler=c), reps)
        finally:
            compiler.close()
        verdicts[label] = verdict
    serial, pooled = verdicts["serial"], verdicts["pool"]
    out["same_verdicts_and_registers"] = (serial.passed == pooled.passed and _configs(before) == _configs(
        serial.numbers.get("compile", {})) == _configs(pooled.numbers.get("compile", {})))
    out["passed"] = pooled.passed
    out["registers"] = [c.get("n_regs") for c in pooled.numbers.get("compile", {}).get("configs") or []]
    out["pool_speedup_vs_before"] = round(out["before"]["median_s"] / max(out["pool"]["median_s"], 1e-9), 2)
    return out


def _probes(kernel: Any, workers: int, reps: int) -> list[dict[str, Any]]:
    from kernelopt_core.search.rewrites import parse_kernel_module

    module = parse_kernel_module(kernel.source, kernel.name)
    return [{"kernel": kernel.name, **_probe_family(module, family, workers, reps)} for family in FAMILIES_PROBED]


def _probe_family(module: Any, family: str, workers: int, reps: int) -> dict[str, Any]:
    """One family's variants with its probes one by one on 1 worker (as before) vs batched on the pool."""
    from kernelopt_core.gates.ptx_compile import PtxCompiler
    from kernelopt_core.search.compile_probes import _resources
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    serial, pool = PtxCompiler(workers=1, cache=False), PtxCompiler(workers=workers, cache=False)
    asked: list[str] = []

    def one(source: str) -> Any:
        asked.append(source)
        return _resources(serial.compile(parse_kernel_module(source).name, source, max_configs=1))

    def batch(sources: list[str]) -> list[Any]:
        futures = [pool.submit(parse_kernel_module(s).name, s, max_configs=1) for s in sources]
        return [_resources(f.result()) for f in futures]

    def variants(**probe: Any) -> list[Any]:
        ctx = RewriteContext(module=module, original=module, device="cuda", **probe)
        ctx.evidence.update(EVIDENCE)
        return [(v.title, v.params) for v in FAMILIES[family].variants(ctx)]

    try:
        one_by_one, one_s = _timed(lambda: variants(compile_probe=one), reps)
        together, batch_s = _timed(lambda: variants(compile_probes=batch), reps)
    finally:
        serial.close()
        pool.close()
    return {"family": family, "probes": len(asked) // reps, "variants": len(together), "one_by_one": one_s,
            "batched": batch_s, "same_variants": one_by_one == together,
            "speedup": round(one_s["median_s"] / max(batch_s["median_s"], 1e-9), 2)}


def _cached(graph: Any, kernel: Any, workers: int) -> dict[str, Any]:
    from kernelopt_core.gates.ptx_compile import PtxCompiler
    from kernelopt_core.gates.static import run_static_gate

    first, later = PtxCompiler(workers=workers), PtxCompiler(workers=workers)
    try:
        run_static_gate(graph, kernel.name, kernel.source, compiler=first)
        verdict, seconds = _timed(lambda: run_static_gate(graph, kernel.name, kernel.source, compiler=later), 1)
    finally:
        first.close()
        later.close()
    return {"kernel": kernel.name, "wall": seconds, "compiled_units": later.stats.compiled,
            "cache_hits": later.stats.cache_hits, "passed": verdict.passed}


def run(out_dir: str, graphs: list[str] | None = None, dumps: list[str] | tuple[str, ...] = (),
        workers: int | None = None, reps: int | None = None) -> dict[str, Any]:
    graphs = graphs or env_list("KERNELOPT_COMPILE_POOL_GRAPHS") or list(GRAPHS)
    reps = reps or env_int("KERNELOPT_COMPILE_POOL_REPS", 2)
    budget = Budget.from_env(0.0)  # 0: no limit
    scratch = tempfile.mkdtemp(prefix="kernelopt-compile-pool-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")  # Triton's cache answers nothing
    os.environ["KERNELOPT_CACHE_DIR"] = os.path.join(scratch, "kernelopt")  # nor does ours, until part 3
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.ptx_compile import COMPILE_PRELOAD, compile_workers
    from kernelopt_core.sandbox.zygote import shared_zygote

    workers = workers or compile_workers()
    zygote = shared_zygote("compile", preload=COMPILE_PRELOAD)
    begin = time.perf_counter()
    paths = [os.path.join(FIXTURE_DUMPS, g, "output_code.py") for g in graphs] + list(dumps)
    summary: dict[str, Any] = {"environment": environment("cpu"), "workers": workers, "cores": os.cpu_count(),
                               "reps": reps, "gate1": [], "probes": [], "cached": []}
    from kernelopt_core.sandbox.process import SandboxProcess

    SandboxProcess.start("compile", "cpu", zygote=zygote).close()  # starts the zygote, outside every timing
    summary["zygote_start_s"] = round(time.perf_counter() - begin, 1)
    for path in paths:
        graph = parse_output_code(path)
        for kernel in graph.kernels:
            if budget.total_s and budget.elapsed() > budget.total_s * 2 / 3:
                summary.setdefault("skipped", []).append(f"{kernel.name}: out of time")
                continue
            summary["gate1"].append(_gate1(graph, kernel, workers, reps, zygote))
            if kernel.kind in ("red", "per"):  # the families rewrite reductions
                summary["probes"] += _probes(kernel, workers, reps)
            summary["cached"].append(_cached(graph, kernel, workers))
            _write(out_dir, summary)
    _write(out_dir, summary)
    shutil.rmtree(scratch, ignore_errors=True)
    return summary


def _write(out_dir: str, summary: dict[str, Any]) -> None:
    span = "{median_s} [{min_s}, {max_s}]"
    lines = [f"{summary['workers']} workers on {summary['cores']} cores, {summary['reps']} reps (median [min, max] s).",
             "", *table(("kernel", "configs", "before", "serial", "pool", "pool vs before", "same"),
                        [(r["kernel"], r["configs"], span.format(**r["before"]), span.format(**r["serial"]),
                          span.format(**r["pool"]), f"{r['pool_speedup_vs_before']}x", r["same_verdicts_and_registers"])
                         for r in summary["gate1"]]),
             "", *table(("kernel", "family", "probes", "variants", "one by one", "batched", "speedup", "same"),
                        [(r["kernel"], r["family"], r["probes"], r["variants"], span.format(**r["one_by_one"]),
                          span.format(**r["batched"]), f"{r['speedup']}x", r["same_variants"])
                         for r in summary["probes"]]),
             "", *table(("kernel", "cached gate 1 (s)", "units compiled", "cache hits"),
                        [(r["kernel"], r["wall"]["median_s"], r["compiled_units"], r["cache_hits"])
                         for r in summary["cached"]])]
    write_record(out_dir, "compile_pool", summary, "Gate 1's compile pool", lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--graphs", default=None, help=f"H200 fixture graphs, comma-separated (default {GRAPHS[0]})")
    parser.add_argument("--dump", action="append", default=[], help="another output_code.py (repeatable)")
    parser.add_argument("--workers", type=int, default=None, help="pool size (default: the cores)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions of each timing (default 2)")
    args = parser.parse_args(argv)
    graphs = [g for g in args.graphs.split(",") if g] if args.graphs else None
    summary = run(args.out_dir, graphs, args.dump, args.workers, args.reps)
    print(open(os.path.join(args.out_dir, "compile_pool.md"), encoding="utf-8").read())
    ok = all(r["same_verdicts_and_registers"] for r in summary["gate1"]) and all(
        r["same_variants"] for r in summary["probes"]) and all(r["compiled_units"] == 0 for r in summary["cached"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
