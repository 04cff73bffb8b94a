"""Issue 28, item 3 on the H200: an intra-program race and a correct candidate through the gates, with
compute-sanitizer's racecheck and memcheck verdicts and times.

    PYTHONPATH=.:server python benchmarks/gpu/race_check.py OUT_DIR      (or through run_all.py race_check:300)

The corpus' softmax problem (tests/adversarial/problems/softmax.py) is compiled on the device
(max-autotune on a GPU, the CPU backend otherwise) and two candidates of its kernel go through:

* ``S-reload-race``: stores exp(x - max) to the output, then sums the row by loading it back rotated by
  32 columns with no ``tl.debug_barrier()``: threads read elements other threads write;
* ``S-exp2``: a correct rewrite (exp as exp2).

Runs, per candidate:

1. gates 1-3, as a campaign's finalist goes: the race must stop at gate 1 (the unsynchronised-reload
   rule); the correct one must pass, and on a GPU its gate 3 verdict carries memcheck and racecheck,
   each with its time;
2. gates 2-3 with gate 1 skipped: what the dynamic checks make of the race on their own (gate 2's
   re-runs compared bit for bit, gate 3's memcheck and racecheck). racecheck watches shared memory,
   and this race goes through global memory, so a clean racecheck here is the expected, honest
   record of why the rule sits in gate 1;
3. on a GPU only, gate 2 alone with 50 re-runs (``STRESS_RERUNS``): whether the hardware shows the
   race as nondeterminism at all.

On the CPU (a local smoke test, tiny sizes) every gate-3 verdict says the races were not checked.
Writes ``race_check.json`` and ``race_check.md`` into OUT_DIR and returns a summary. Respects
KERNELOPT_GPU_BUDGET_S; changes no GPU setting.
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

RACE = "S-reload-race"
CORRECT = "S-exp2"
STRESS_RERUNS = 50


class Budget:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.total = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "300"))

    def left(self) -> float:
        return self.total - (time.monotonic() - self.start)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _record(label: str, case_id: str, gates: tuple[int, ...], result: Any, seconds: float) -> dict[str, Any]:
    """What one cascade says about races: the deciding gate, the rule, the sanitizer runs and re-runs."""
    record: dict[str, Any] = {"run": label, "case": case_id, "gates": list(gates), "accepted": result.accepted,
                              "failed_gate": result.failed_gate, "reason": result.reason,
                              "wall_s": round(seconds, 2), "gate_seconds": {v.gate: round(v.seconds, 2)
                                                                            for v in result.gates}}
    first = result.verdict(1)
    if first is not None:
        record["gate1_rules"] = sorted({f.get("rule") for f in first.numbers.get("findings") or []})
    second = result.verdict(2)
    if second is not None:
        checks = [c for k in (second.numbers.get("kernels") or {}).values() for c in k.get("checks", [])]
        reruns = [c for c in checks if str(c.get("label", "")).startswith("re-run")]
        record["reruns"] = {"count": len(reruns), "failed": [c["label"] for c in reruns if not c.get("passed")],
                            "problems": [p for c in reruns for p in c.get("problems", [])][:3]}
    third = result.verdict(3)
    if third is not None:
        runs = third.numbers.get("sanitizer") or []
        record["sanitizer"] = [{k: r.get(k) for k in ("kernel", "tool", "ran", "errors", "seconds", "summary", "steps",
                                                       "shared_memory")} for r in runs]
        record["sanitizer_note"] = third.numbers.get("sanitizer_note")
        record["sanitizer_seconds"] = round(sum(float(r.get("seconds") or 0.0) for r in runs), 2)
        record["races_checked"] = any(r.get("tool") == "racecheck" and r.get("ran") for r in runs)
    return record


def run(out_dir: str) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(out_dir, "work")
    os.makedirs(work, exist_ok=True)
    budget = Budget()
    summary: dict[str, Any] = {"runs": []}
    try:
        import torch
        import triton

        device = _device()
        summary["environment"] = {"torch": torch.__version__, "triton": triton.__version__, "device": device,
                                  "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None}
        from adversarial.corpus import CASES
        from adversarial.runner import compile_problems

        from kernelopt_core.artifacts import parse_output_code
        from kernelopt_core.gates import CascadeConfig, run_cascade
        from kernelopt_core.gates.sanitize import find_sanitizer

        summary["compute_sanitizer"] = find_sanitizer()
        begin = time.monotonic()
        graphs = compile_problems(os.path.join(work, "dumps"), problems=("softmax",), device=device,
                                  mode="max-autotune" if device == "cuda" else "default",
                                  timeout_s=max(60.0, budget.left() - 120))
        summary["compile_s"] = round(time.monotonic() - begin, 1)
        graph = parse_output_code(graphs["softmax"])
        kernel = graph.kernels[0]
        cases = {c.id: c for c in CASES}
        plan: list[tuple[str, str, tuple[int, ...], int]] = [
            ("finalist", RACE, (1, 2, 3), 2), ("finalist", CORRECT, (1, 2, 3), 2),
            ("without gate 1", RACE, (2, 3), 2),
        ]
        if device == "cuda":
            plan.append((f"gate 2, {STRESS_RERUNS} re-runs", RACE, (2,), STRESS_RERUNS))
        for label, case_id, gates, reruns in plan:
            if budget.left() < 45:
                summary["runs"].append({"run": label, "case": case_id, "skipped": "out of budget"})
                continue
            candidate = cases[case_id].candidate(kernel.source, kernel.name)
            config = CascadeConfig(device=device, run_gates=gates, determinism_reruns=reruns,
                                   workdir=os.path.join(work, f"{case_id}-{len(summary['runs'])}"),
                                   job_timeout_s=max(60.0, min(600.0, budget.left() - 30)))
            begin = time.monotonic()
            try:
                result = run_cascade(graph, {kernel.name: candidate}, config)
                summary["runs"].append(_record(label, case_id, gates, result, time.monotonic() - begin))
            except Exception as exc:  # noqa: BLE001 - recorded, the other runs go on
                summary["runs"].append({"run": label, "case": case_id, "error": f"{type(exc).__name__}: {exc}",
                                        "traceback": traceback.format_exc()[-2000:]})
            _write(out_dir, summary)
    except Exception as exc:  # noqa: BLE001
        summary["error"] = f"{type(exc).__name__}: {exc}"
        summary["traceback"] = traceback.format_exc()[-3000:]
    _write(out_dir, summary)
    return _summary(summary)


def _summary(summary: dict[str, Any]) -> dict[str, Any]:
    runs = [r for r in summary["runs"] if "error" not in r and "skipped" not in r]
    race = next((r for r in runs if r["case"] == RACE and r["run"] == "finalist"), {})
    correct = next((r for r in runs if r["case"] == CORRECT and r["run"] == "finalist"), {})
    alone = next((r for r in runs if r["case"] == RACE and r["run"] == "without gate 1"), {})
    stress = next((r for r in runs if r["case"] == RACE and "re-runs" in r["run"]), {})
    return {
        "device": summary.get("environment", {}).get("device"),
        "race_rejected_by_gate": race.get("failed_gate"), "race_rule": "unsynchronised-reload" in race.get(
            "gate1_rules", []),
        "correct_accepted": correct.get("accepted"),
        "correct_sanitizer": correct.get("sanitizer"), "correct_sanitizer_note": correct.get("sanitizer_note"),
        "race_without_gate1_failed_gate": alone.get("failed_gate") if alone else None,
        "race_without_gate1_sanitizer_note": alone.get("sanitizer_note"),
        "stress_reruns_failed": stress.get("reruns", {}).get("failed") if stress else None,
        "errors": [f"{r['run']} {r['case']}: {r['error']}" for r in summary["runs"] if "error" in r]
        + ([summary["error"]] if "error" in summary else []),
    }


def _write(out_dir: str, summary: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, "race_check.json"), "w") as handle:
        json.dump(summary, handle, indent=1, default=str)
    with open(os.path.join(out_dir, "race_check.md"), "w") as handle:
        handle.write(_markdown(summary))


def _markdown(summary: dict[str, Any]) -> str:
    env = summary.get("environment", {})
    lines = ["# An intra-program race through the gates (issue 28, item 3)", "",
             f"Device: {env.get('gpu') or env.get('device')}; torch {env.get('torch')}, triton {env.get('triton')}; "
             f"compute-sanitizer: {summary.get('compute_sanitizer') or 'not found'}; compile {summary.get('compile_s')} s.",
             "", "| run | case | gates | decision | deciding reason | gate 1 rules | re-runs failed | sanitizer "
             "(tool: errors, s) | wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["runs"]:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['run']} | {r['case']} | | {r.get('error') or r.get('skipped')} | | | | | |")
            continue
        decision = "passed" if r["accepted"] else f"gate {r['failed_gate']}"
        sanitizer = ", ".join(f"{s['tool']}: {s['errors'] if s['ran'] else 'not run'}, {s['seconds']:.1f}"
                              for s in r.get("sanitizer") or []) or r.get("sanitizer_note") or "-"
        failed = ", ".join(r.get("reruns", {}).get("failed") or []) or "none"
        reason = r["reason"].replace("|", "/")[:160]
        lines.append(f"| {r['run']} | {r['case']} | {','.join(map(str, r['gates']))} | {decision} | {reason} | "
                     f"{', '.join(r.get('gate1_rules') or []) or '-'} | {failed} | {sanitizer} | {r['wall_s']} |")
    if "error" in summary:
        lines += ["", f"error: {summary['error']}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/race-check"
    print(json.dumps(run(out), indent=1, default=str))
