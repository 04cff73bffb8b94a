"""Evidence for the decisions a candidate adds (docs/gates.md, "Evidence for the decisions a candidate
adds") on the device: the instrumented copy compiles and runs on the GPU, records outcomes, and gate 2
decides "not verified" / accepted as on the CPU interpreter.

    PYTHONPATH=.:server python benchmarks/gpu/decisions_check.py OUT_DIR   (or through run_all.py)

The corpus' elementwise and clamp problems are compiled on the device (max-autotune on a GPU, the CPU
backend otherwise); gates 1-2 run on:

* ``unreached``: the elementwise kernel with ``tl.where(tmp0 * tmp0 < 0.0, ...)``, a path no input
  reaches: expected "could not verify" with "not verified: the candidate adds a path that no test
  reached" (the decision never true);
* ``reached``: tanh split at 0 (``tl.where(tmp0 >= 0.0, tanh(tmp0), -tanh(-tmp0))``), correct, both sides
  reached: expected to pass gate 2 with coverage complete;
* ``C-min-max-swapped``: the corpus' correct clamp rewrite (two added min/max decisions): expected to pass;
* ``E-xblock64``: a launch-config change that adds no decision: expected to pass with no ``decisions``
  numbers (no instrumented copy, no extra run).

Records each verdict, gate 2's seconds, the coverage (sides seen, sets credited, search count and
seconds). Writes ``decisions_check.json`` and ``.md`` into OUT_DIR; respects KERNELOPT_GPU_BUDGET_S;
changes no GPU setting.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for path in (ROOT, os.path.join(ROOT, "tests")):
    if path not in sys.path:
        sys.path.insert(0, path)

EXPECTED = {"unreached": "not verified", "reached": "passed", "C-min-max-swapped": "passed", "E-xblock64": "passed"}


def _candidates(kernels: dict[str, Any]) -> list[tuple[str, Any, str]]:
    from adversarial.corpus import CASES

    cases = {c.id: c for c in CASES}
    element = kernels["elementwise"]
    out = [
        ("unreached", element, element.source.replace(
            "tmp9 = tmp7 - tmp8", "tmp9 = tl.where(tmp0 * tmp0 < 0.0, tmp7 * 3.0, tmp7 - tmp8)")),
        ("reached", element, element.source.replace(
            "tmp1 = libdevice.tanh(tmp0)",
            "tmp1 = tl.where(tmp0 >= 0.0, libdevice.tanh(tmp0), -libdevice.tanh(-tmp0))")),
    ]
    for case_id in ("C-min-max-swapped", "E-xblock64"):
        case = cases[case_id]
        kernel = kernels[case.problem]
        out.append((case_id, kernel, case.candidate(kernel.source, kernel.name)))
    return out


def run(out_dir: str) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(out_dir, "work")
    os.makedirs(work, exist_ok=True)
    total = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "600"))
    start = time.monotonic()
    summary: dict[str, Any] = {"runs": []}
    try:
        import torch
        import triton

        device = "cuda" if torch.cuda.is_available() else "cpu"
        summary["environment"] = {"torch": torch.__version__, "triton": triton.__version__, "device": device,
                                  "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None}
        from adversarial.runner import compile_problems

        from kernelopt_core.artifacts import parse_output_code
        from kernelopt_core.gates import CascadeConfig, run_cascade

        graphs = compile_problems(os.path.join(work, "dumps"), problems=("elementwise", "clamp"), device=device,
                                  mode="max-autotune" if device == "cuda" else "default")
        parsed = {name: parse_output_code(path) for name, path in graphs.items()}
        kernels = {name: graph.kernels[0] for name, graph in parsed.items()}
        for label, kernel, candidate in _candidates(kernels):
            left = total - (time.monotonic() - start)
            if left < 60:
                summary["runs"].append({"run": label, "skipped": "out of budget"})
                continue
            graph = next(g for g in parsed.values() if g.kernels[0].name == kernel.name)
            record: dict[str, Any] = {"run": label, "edited": candidate != kernel.source}
            config = CascadeConfig(device=device, run_gates=(1, 2), workdir=os.path.join(work, label),
                                   job_timeout_s=max(60.0, min(600.0, left - 30)), decision_search_s=10.0)
            begin = time.monotonic()
            try:
                result = run_cascade(graph, {kernel.name: candidate}, config)
                second = result.verdict(2)
                numbers = (second.numbers.get("kernels") or {}).get(kernel.name, {}) if second else {}
                record.update(accepted=result.accepted, failed_gate=result.failed_gate,
                              could_not_verify=result.could_not_verify, reason=result.reason[:600],
                              gate2_s=round(second.seconds, 2) if second else None,
                              decisions=numbers.get("decisions"))
                outcome = "passed" if result.accepted else (
                    "not verified" if "not verified" in result.reason else f"gate {result.failed_gate}")
                record["outcome"] = outcome
                record["as_expected"] = outcome == EXPECTED[label] and (
                    label != "E-xblock64" or numbers.get("decisions") is None)
            except Exception as exc:  # noqa: BLE001 - recorded, the other runs go on
                record.update(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-2000:])
            record["wall_s"] = round(time.monotonic() - begin, 2)
            summary["runs"].append(record)
            _write(out_dir, summary)
    except Exception as exc:  # noqa: BLE001
        summary["error"] = f"{type(exc).__name__}: {exc}"
        summary["traceback"] = traceback.format_exc()[-3000:]
    _write(out_dir, summary)
    return {"device": summary.get("environment", {}).get("device"),
            "as_expected": {r["run"]: r.get("as_expected") for r in summary["runs"]},
            "errors": [r["error"] for r in summary["runs"] if "error" in r] + (
                [summary["error"]] if "error" in summary else [])}


def _write(out_dir: str, summary: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, "decisions_check.json"), "w") as handle:
        json.dump(summary, handle, indent=1, default=str)
    env = summary.get("environment", {})
    lines = ["# Evidence for added decisions on the device", "",
             f"Device: {env.get('gpu') or env.get('device')}; torch {env.get('torch')}, triton {env.get('triton')}.", "",
             "| run | outcome | expected | gate 2 s | sides seen | credited sets | searched (s) | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in summary["runs"]:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['run']} | {r.get('error') or r.get('skipped')} | {EXPECTED.get(r['run'])} | | | | | |")
            continue
        coverage = r.get("decisions") or {}
        sides = "; ".join(f"line {d['line']}: {'T' if d['true_seen'] else '-'}{'F' if d['false_seen'] else '-'}"
                          for d in coverage.get("decisions", [])) or "no decisions added"
        lines.append(f"| {r['run']} | {r['outcome']} | {EXPECTED[r['run']]} | {r['gate2_s']} | {sides} | "
                     f"{len(coverage.get('credited', []))} | {coverage.get('searched', '-')} "
                     f"({coverage.get('seconds', '-')}) | {r['wall_s']} |")
    if "error" in summary:
        lines += ["", f"error: {summary['error']}"]
    with open(os.path.join(out_dir, "decisions_check.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp/decisions-check"), indent=1))
