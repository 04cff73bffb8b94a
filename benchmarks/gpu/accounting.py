"""Whole-callable accounting (issue 9): where torch.compile's time goes beyond its kernels.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT accounting:250
    python -m benchmarks.gpu.accounting OUT_DIR --device cpu --scale tiny --cases relu_6p4GB   # CPU backend

``kernelopt account`` of each case of ``benchmarks/problems/accounting`` (relu over 6.4 GB and
``sum(dim=1)``, the measurement notes' two cases, then softmax, layernorm, rmsnorm, transpose-copy,
gelu-mlp and a launch-bound chain compiled without CUDA graphs): the callable timed through eager,
max-autotune (full callable, CUDA graphs), max-autotune-no-cudagraphs and the compiled module's
``call()``; its time split into kernels, CUDA-graph input copy, launch gaps and guard + wrapper; the
deterministic recommendation. The relu case runs with ``--verify``: the recommendation's options
through gate 3 (seeds 0/42/123) and gate 4 through the full callable. Each case is its own CLI
process; timings are CUDA events, synchronous per call, L2 flushed, medians with IQR.
Writes ``accounting.{json,md}`` after every case.
Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 250), ``KERNELOPT_ACCOUNTING_CASES=a,b``.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.gpu.devicescript import (
    ROOT,
    Budget,
    cell,
    env_list,
    environment,
    kernelopt,
    table,
    use_device,
    write_record,
)

CASES_DIR = os.path.join(ROOT, "benchmarks", "problems", "accounting")
CASES = ("relu_6p4GB", "sum_dim1", "softmax", "layernorm", "rmsnorm", "transpose_copy", "tiny_chain_no_graphs",
         "gelu_mlp")
MODES = {"tiny_chain_no_graphs": "max-autotune-no-cudagraphs"}  # the others: max-autotune
VERIFY_CASE = "relu_6p4GB"  # first, so that the flagship case never runs out of time


def run(out_dir: str, device: str = "auto", scale: str = "h200", cases: list[str] | None = None) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    budget = Budget.from_env(250.0)
    os.environ["KERNELOPT_PROBLEM_SCALE"] = scale
    device = use_device(device)
    names = [n for n in CASES if n in (cases or env_list("KERNELOPT_ACCOUNTING_CASES") or CASES)]
    results: dict[str, Any] = {"environment": environment(device), "scale": scale, "cases": {}, "failures": {}}
    for name in names:
        if budget.elapsed() > 0.8 * budget.total_s:
            results["failures"][name] = f"skipped: {budget.elapsed():.0f} s of the {budget.total_s:.0f} s budget used"
            continue
        args = ["account", os.path.join(CASES_DIR, f"{name}.py"), "--mode", MODES.get(name, "max-autotune"),
                "--device", device, *(["--verify"] if name == VERIFY_CASE else [])]
        done = kernelopt(args, timeout_s=max(30.0, min(300.0, budget.left() - 10)), cwd=out_dir,
                         log_path=os.path.join(out_dir, "logs", f"{name}.log"))
        if done.ok:
            results["cases"][name] = {**done.data, "wall_s": done.wall_s}
        else:
            results["failures"][name] = done.why()
        print(f"[accounting] {name}: {'done' if done.ok else done.why()} in {done.wall_s:.0f} s", flush=True)
        write_record(out_dir, "accounting", results, "Whole-callable accounting", _markdown(results))
    relu = results["cases"].get(VERIFY_CASE) or {}
    verdict = relu.get("verification")
    return {"cases": len(results["cases"]), "failures": results["failures"], "wall_s": round(budget.elapsed(), 1),
            "overhead_share": {n: c["overhead_share"] for n, c in results["cases"].items()},
            "recommendations": {n: (c.get("recommendation") or {}).get("change") for n, c in results["cases"].items()},
            "verified": verdict and {"accepted": verdict.get("accepted"), "speedup": verdict.get("speedup")}}


def _part(item: Any) -> str:
    if item is None:
        return "-"
    from kernelopt_core.measure.accounting import format_bytes

    text = f"{item.time_ms:.3f} ({item.share:.0%})"
    return text + (f", {format_bytes(item.bytes_per_call)}" if item.bytes_per_call else "")


def _markdown(results: dict[str, Any]) -> list[str]:
    from kernelopt_core.measure.accounting import COPY_ITEM, GAPS_ITEM, GUARD_ITEM, CallableAccounting
    from kernelopt_core.recommend import ConfigRecommendation

    def ms(acct: CallableAccounting, label: str) -> str:
        timing = acct.timing(label)
        return cell(timing.stats.median_ms if timing else None, ".3f")

    rows, details = [], []
    for name, data in results["cases"].items():
        acct = CallableAccounting.from_json(data)
        rec = ConfigRecommendation.from_json(data["recommendation"]) if data.get("recommendation") else None
        rows.append((name, acct.mode, ms(acct, "eager"), ms(acct, "max-autotune (full callable)"),
                     ms(acct, "max-autotune-no-cudagraphs (full callable)"), cell(acct.module_call_ms, ".3f"),
                     cell(acct.kernel_ms, ".3f"), _part(acct.overhead(COPY_ITEM)), _part(acct.overhead(GAPS_ITEM)),
                     _part(acct.overhead(GUARD_ITEM)),
                     f"{acct.overhead_share:.0%}{' (dominates)' if acct.overhead_dominates else ''}",
                     cell(rec.change if rec else None)))
        details.append(acct.to_markdown())
        if rec is not None:
            details += [f"Recommendation: **{rec.title}**. {rec.reason}", ""]
        if data.get("verification"):
            verdict = data["verification"]
            details += [f"Verified `{verdict.get('change')}`: {'accepted' if verdict.get('accepted') else 'rejected'}, "
                        f"{cell(verdict.get('speedup'), '.3f')}x {verdict.get('ci')}: {verdict.get('reason')}", ""]
    lines = ["Medians in ms (CUDA events, synchronous per call, L2 flushed). The split is of the user's callable "
             "(mode column): kernels + CUDA-graph input copy + launch gaps + guard/wrapper.", "",
             *table(("case", "mode", "eager", "max-autotune (callable)", "no-cudagraphs (callable)", "module call()",
                     "kernels", "input copy", "gaps", "guard+wrapper", "overhead", "recommendation"), rows), "",
             *details]
    lines += [f"- {name} FAILED: {why}" for name, why in results["failures"].items()]
    return lines


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200", choices=("h200", "tiny"))
    parser.add_argument("--cases", nargs="*", default=None)
    options = parser.parse_args()
    print(json.dumps(run(options.out, options.device, options.scale, options.cases), indent=1, default=str))
