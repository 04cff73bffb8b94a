"""Whole-callable accounting on the H200: where torch.compile's time goes beyond its kernels.

``run(out_dir)`` accounts the two cases of the measurement notes (``relu`` on fp32
4096x393216, 6.4 GB; ``sum(dim=1)`` on fp32 128x4096x4095) and six more problems (softmax,
layernorm, rmsnorm, transpose-copy, gelu-mlp, and a small launch-bound chain). Each is timed
through eager, ``max-autotune`` (full callable, CUDA graphs), ``max-autotune-no-cudagraphs``
(full callable) and the compiled module's ``call()``; the callable's time is split into kernels,
CUDA-graph input copy, launch gaps and guard + wrapper, and the deterministic recommendation is
shown. The relu recommendation is then verified like a candidate (gate 3 on seeds 0/42/123, gate 4
interleaved through the full callable).

Timings are CUDA events, synchronous per call, L2 flushed, medians with IQR (see
kernelopt_core/measure/accounting_run.py). Every case runs as a job in one worker subprocess, so
an OOM or crash costs that case only. Writes ``accounting.json`` and ``accounting.md``.

Smoke test on the CPU backend: ``python benchmarks/gpu/accounting.py OUT --device cpu --scale 0.0001``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

HEADER = '''import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
'''

# name -> (mode the user compiles with, body of the problem file with {dims} to scale)
CASES: dict[str, tuple[str, str]] = {
    "relu_6p4GB": ("max-autotune", '''
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn({a}, {b}, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "sum_dim1": ("max-autotune", '''
class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)

def get_inputs():
    return [torch.randn({c}, 4096, {d}, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "softmax": ("max-autotune", '''
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn({e}, 8192, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "layernorm": ("max-autotune", '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4096)

    def forward(self, x):
        return self.norm(x)

def get_inputs():
    return [torch.randn({f}, 4096, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "rmsnorm": ("max-autotune", '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4096))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

def get_inputs():
    return [torch.randn({f}, 4096, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "transpose_copy": ("max-autotune", '''
class Model(nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 1).contiguous() * 2.0

def get_inputs():
    return [torch.randn({g}, 2048, 1024, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    # launch-bound: alternating reductions that cannot fuse, on a tiny tensor; the user did not use CUDA graphs
    "tiny_chain_no_graphs": ("max-autotune-no-cudagraphs", '''
class Model(nn.Module):
    def forward(self, x):
        for _ in range(4):
            x = x - x.mean(dim=-1, keepdim=True)
            x = x / (x.abs().amax(dim=0, keepdim=True) + 1.0)
        return x

def get_inputs():
    return [torch.randn({t}, {t}, device=DEVICE)]

def get_init_inputs():
    return []
'''),
    "gelu_mlp": ("max-autotune", '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1024, 4096)

    def forward(self, x):
        return F.gelu(self.linear(x))

def get_inputs():
    return [torch.randn({h}, 1024, device=DEVICE)]

def get_init_inputs():
    return []
'''),
}

FULL_DIMS = {"a": 4096, "b": 393216, "c": 128, "d": 4095, "e": 4096, "f": 8192, "g": 64, "h": 4096, "t": 256}
VERIFY_CASE = "relu_6p4GB"


def _dims(scale: float) -> dict[str, int]:
    if scale >= 1.0:
        return dict(FULL_DIMS)
    return {k: max(4, int(v * scale)) if k in ("b", "d") else max(2, int(v * scale ** 0.5))
            for k, v in FULL_DIMS.items()}


def write_problems(folder: str, scale: float) -> dict[str, str]:
    os.makedirs(folder, exist_ok=True)
    dims = _dims(scale)
    paths = {}
    for name, (_, body) in CASES.items():
        path = os.path.join(folder, f"{name}.py")
        with open(path, "w") as handle:
            handle.write(HEADER + body.format(**dims))
        paths[name] = path
    return paths


def _row(name: str, acct: Any, rec: Any) -> dict[str, Any]:
    from kernelopt_core.measure.accounting import COPY_ITEM, GAPS_ITEM, GUARD_ITEM

    def ms(label: str) -> float | None:
        timing = acct.timing(label)
        return round(timing.stats.median_ms, 4) if timing else None

    def item(name: str) -> dict[str, Any] | None:
        found = acct.overhead(name)
        return None if found is None else {"ms": round(found.time_ms, 4), "share": round(found.share, 4),
                                           "bytes": found.bytes_per_call}

    return {
        "case": name, "mode": acct.mode, "path": acct.path, "cudagraphs": acct.cudagraphs,
        "eager_ms": ms("eager"), "max_autotune_ms": ms("max-autotune (full callable)"),
        "no_cudagraphs_ms": ms("max-autotune-no-cudagraphs (full callable)"),
        "module_call_ms": round(acct.module_call_ms, 4), "kernel_ms": round(acct.kernel_ms, 4),
        "copy": item(COPY_ITEM), "gaps": item(GAPS_ITEM), "guard": item(GUARD_ITEM),
        "overhead_share": round(acct.overhead_share, 4), "overhead_dominates": acct.overhead_dominates,
        "recommendation": rec.to_json() if rec else None,
    }


def _markdown(rows: list[dict[str, Any]], accounts: dict[str, Any], verdict: dict[str, Any] | None,
              failures: dict[str, str], env: dict[str, Any]) -> str:
    from kernelopt_core.measure.accounting import format_bytes

    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    def part(item: dict[str, Any] | None) -> str:
        return "-" if item is None else f"{item['ms']:.3f} ({item['share']:.0%})"

    lines = ["# Whole-callable accounting", "", f"Environment: {json.dumps(env)}", "",
             "Medians in ms (CUDA events, synchronous per call, L2 flushed). The split is of the user's callable "
             "(mode column): kernels + CUDA-graph input copy + launch gaps + guard/wrapper.", "",
             "| case | mode | eager | max-autotune (callable) | no-cudagraphs (callable) | module call() | kernels | "
             "input copy | gaps | guard+wrapper | overhead | recommendation |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        copy = r["copy"]
        copy_text = part(copy) + (f", {format_bytes(copy['bytes'])}" if copy and copy.get("bytes") else "")
        rec = r["recommendation"]
        lines.append(
            f"| {r['case']} | {r['mode']} | {cell(r['eager_ms'])} | {cell(r['max_autotune_ms'])} | "
            f"{cell(r['no_cudagraphs_ms'])} | {cell(r['module_call_ms'])} | {cell(r['kernel_ms'])} | {copy_text} | "
            f"{part(r['gaps'])} | {part(r['guard'])} | {r['overhead_share']:.0%}"
            f"{' (dominates)' if r['overhead_dominates'] else ''} | {rec['change'] if rec else '-'} |")
    lines.append("")
    for name, acct in accounts.items():
        lines.append(acct.to_markdown())
        rec = next((r["recommendation"] for r in rows if r["case"] == name), None)
        if rec:
            lines += [f"Recommendation: **{rec['title']}**. {rec['reason']}", ""]
    if verdict is not None:
        lines += ["## Verification of the relu recommendation", "", "```", json.dumps(verdict, indent=1), "```", ""]
    for name, why in failures.items():
        lines.append(f"- {name} FAILED: {why}")
    return "\n".join(lines) + "\n"


def _environment() -> dict[str, Any]:
    try:
        import torch
        import triton

        return {"torch": torch.__version__, "triton": triton.__version__,
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    except Exception as exc:  # noqa: BLE001
        return {"error": repr(exc)}


def run(out_dir: str, device: str = "cuda:0", scale: float = 1.0, budget_s: float | None = None,
        cases: list[str] | None = None) -> dict[str, Any]:
    from kernelopt_core.measure.accounting_run import AccountingError, account_problem
    from kernelopt_core.measure.worker import Worker
    from kernelopt_core.recommend import recommend_config

    started = time.perf_counter()
    budget = budget_s if budget_s is not None else float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "240")) - 25
    os.makedirs(out_dir, exist_ok=True)
    problems = write_problems(os.path.join(out_dir, "problems"), scale)
    rows: list[dict[str, Any]] = []
    accounts: dict[str, Any] = {}
    failures: dict[str, str] = {}
    verdict: dict[str, Any] | None = None
    env = _environment()
    env.update(scale=scale, device=device)
    with Worker(device) as worker:
        for name in cases or list(CASES):
            elapsed = time.perf_counter() - started
            if elapsed > budget * 0.8:
                failures[name] = f"skipped: {elapsed:.0f} s of the {budget:.0f} s budget used"
                continue
            mode = CASES[name][0]
            t0 = time.perf_counter()
            try:
                acct = account_problem(problems[name], mode=mode, worker=worker,
                                       timeout_s=max(30.0, min(150.0, budget - elapsed)))
            except AccountingError as exc:
                failures[name] = str(exc)
                print(f"[accounting] {name}: FAILED {exc}", flush=True)
                continue
            except Exception as exc:  # noqa: BLE001 - record and go on
                failures[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
                continue
            rec = recommend_config(acct)
            accounts[name] = acct
            rows.append(_row(name, acct, rec))
            print(f"[accounting] {name}: {time.perf_counter() - t0:.1f} s, callable {acct.callable_ms:.3f} ms, "
                  f"overhead {acct.overhead_share:.0%}, recommendation {rec.change if rec else None}", flush=True)
            if name == VERIFY_CASE and rec is not None:  # right away: the flagship case must not run out of time
                verdict = _verify(problems[name], rec, worker, budget - (time.perf_counter() - started), failures)
            _write(out_dir, rows, accounts, verdict, failures, env)
    _write(out_dir, rows, accounts, verdict, failures, env)
    return {
        "cases": len(rows), "failures": failures, "wall_s": round(time.perf_counter() - started, 1),
        "overhead_share": {r["case"]: r["overhead_share"] for r in rows},
        "recommendations": {r["case"]: (r["recommendation"] or {}).get("change") for r in rows},
        "verified": None if verdict is None else {"accepted": verdict["accepted"], "speedup": verdict["speedup"]},
    }


def _verify(problem: str, rec: Any, worker: Any, left_s: float, failures: dict[str, str]) -> dict[str, Any] | None:
    from kernelopt_core.recommend import ConfigVerificationError, verify_recommendation

    t0 = time.perf_counter()
    try:
        verdict = verify_recommendation(problem, rec, worker=worker, timeout_s=max(30.0, min(150.0, left_s * 0.5)))
    except (ConfigVerificationError, Exception) as exc:  # noqa: BLE001 - record and go on
        failures[f"verify {VERIFY_CASE}"] = f"{type(exc).__name__}: {exc}"
        return None
    print(f"[accounting] verify {VERIFY_CASE} {verdict.change}: {time.perf_counter() - t0:.1f} s, "
          f"accepted={verdict.accepted}, {verdict.reason}", flush=True)
    return verdict.to_json()


def _write(out_dir: str, rows: list[dict[str, Any]], accounts: dict[str, Any], verdict: dict[str, Any] | None,
           failures: dict[str, str], env: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, "accounting.json"), "w") as handle:
        json.dump({"environment": env, "rows": rows,
                   "accountings": {name: acct.to_json() for name, acct in accounts.items()},
                   "verification": verdict, "failures": failures}, handle, indent=1, default=str)
    with open(os.path.join(out_dir, "accounting.md"), "w") as handle:
        handle.write(_markdown(rows, accounts, verdict, failures, env))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--budget", type=float, default=None)
    parser.add_argument("--cases", nargs="*", default=None)
    options = parser.parse_args()
    print(json.dumps(run(options.out, options.device, options.scale, options.budget, options.cases), indent=1))
