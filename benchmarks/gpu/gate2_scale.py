"""Gate 2 at a real working set (issue 25 item 4, issue 26 item 5): time and memory of the screen and
of the full battery.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT gate2_scale:540     # H200
    PYTHONPATH=. python benchmarks/gpu/gate2_scale.py OUT_DIR --device cpu --scale tiny          # here, first

``run(out_dir)``:

1. compiles one kbscale problem in a subprocess (``kernelopt compile``; default
   ``softmax_long_rows``, 4096x393216 fp32: 6.4 GB in and 6.4 GB out, max-autotune on the GPU);
2. for each Triton kernel of its graph, two candidates: **correct** (the kernel as Inductor wrote it)
   and **wrong** (the same kernel reading NaN inputs as 0: it passes the screen and every seed, and
   the full battery's NaN/Inf family rejects it);
3. runs gate 2 alone through the public cascade (``run_cascade`` with ``run_gates=(2,)`` in the shared
   worker, as the search does): the correct candidate's screen twice (the first call also loads and
   captures the graph in the worker), then its full battery, then the wrong one's screen and full
   battery.

Per run it records the verdict, the wall time, how its candidate's process was got
(``candidate_process``: from the spare a screen keeps ready, or started fresh, and the seconds it
took), gate 2's seconds per step (``steps_s``: loading, capture, fills, candidate and original runs,
comparisons, draws, families...), the runs per side, each check's seconds, and the memory figures
against the working set: the tracked peak (gate 2's own buffers), the worker's allocator peak plus
the candidate process's (``device_peak_ratio``), and the device's memory in use by every process,
sampled per step. Targets (H200, ~12 GB working set): full battery <= 10 s, screen <= 3 s, device
peak <= 3x the working set. Writes ``gate2_scale.json`` and ``gate2_scale.md``.

Environment: ``KERNELOPT_GPU_BUDGET_S`` (default 540), ``KERNELOPT_GATE2_DEVICE`` (default cuda),
``KERNELOPT_PROBLEM_SCALE`` (default h200; tiny for a local try), ``KERNELOPT_GATE2_PROBLEM`` (default
softmax_long_rows). The driver never imports torch: the worker owns the device.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.gpu.devicescript import compile_in_own_process  # noqa: E402

PROBLEMS_DIR = os.path.join(ROOT, "benchmarks", "problems", "kbscale")
TARGETS = {"full_s": 10.0, "screen_s": 3.0, "device_peak_ratio": 3.0}
RESULTS = "gate2_scale"


def nan_as_zero(source: str) -> str:
    """The kernel with every value it loads from ``in_ptr0`` read with NaN as 0 (a reduction that drops
    NaN): right on every finite input, wrong where the original propagates NaN."""
    pattern = re.compile(r"^(\s*)(tmp\d+) = tl\.load\(in_ptr0\b.*$", re.MULTILINE)
    edited, count = pattern.subn(lambda m: f"{m.group(0)}\n{m.group(1)}{m.group(2)} = "
                                           f"tl.where({m.group(2)} != {m.group(2)}, 0.0, {m.group(2)})", source)
    if not count:
        raise ValueError("the kernel loads nothing from in_ptr0 the edit recognises")
    return edited


def gate2_run(graph: Any, kernel: str, source: str, battery: str, device: str, workdir: str,
              timeout_s: float) -> dict[str, Any]:
    from kernelopt_core.gates import CascadeConfig, run_cascade

    config = CascadeConfig(device=device, run_gates=(2,), gate2_battery=battery, workdir=workdir,
                           job_timeout_s=max(60.0, timeout_s), spare_candidate=battery == "screen")  # as the search
    begin = time.monotonic()
    result = run_cascade(graph, {kernel: source}, config)
    wall = time.monotonic() - begin
    verdict = result.verdict(2)
    numbers = verdict.numbers if verdict else {}
    per_kernel = (numbers.get("kernels") or {}).get(kernel) or {}
    return {"battery": battery, "passed": result.accepted, "could_not_verify": result.could_not_verify,
            "reason": result.reason[:600], "wall_s": round(wall, 3),
            "gate_s": round(verdict.seconds, 3) if verdict else None, "steps_s": numbers.get("steps_s"),
            "memory": numbers.get("memory"), "runs": per_kernel.get("runs"),
            "candidate_process": numbers.get("candidate_process"),  # from the spare or not, and its seconds
            "checks": [{"label": c.get("label"), "passed": c.get("passed"), "seconds": c.get("seconds"),
                        "compare_peak_bytes": c.get("compare_peak_bytes")}  # which check sets the peak
                       for c in per_kernel.get("checks") or []]}


def run(out_dir: str) -> dict[str, Any]:
    budget_s = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "540"))
    device = os.environ.get("KERNELOPT_GATE2_DEVICE", "cuda")
    problem = os.environ.get("KERNELOPT_GATE2_PROBLEM", "softmax_long_rows")
    scale = os.environ.setdefault("KERNELOPT_PROBLEM_SCALE", "h200")
    if not device.startswith("cuda"):
        from kernelopt_core.backends import cpu_triton

        cpu_triton.activate()  # the worker and the candidate processes inherit the CPU interpreter's setting
    begin = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)
    report: dict[str, Any] = {"problem": problem, "device": device, "scale": scale, "targets": TARGETS, "runs": []}

    def left() -> float:
        return budget_s - (time.monotonic() - begin)

    try:
        from kernelopt_core.artifacts import parse_output_code

        started = time.monotonic()
        path = compile_in_own_process(os.path.join(PROBLEMS_DIR, f"{problem}.py"),
                                      os.path.join(out_dir, "work", problem), device, max(60.0, left() - 60))
        report["compile_s"] = round(time.monotonic() - started, 1)
        graph = parse_output_code(path)
        report["graph"] = os.path.relpath(path, out_dir)
        report["kernels"] = [k.name for k in graph.kernels]
        workdir = os.path.join(out_dir, "work", "restitched")
        for kernel in graph.kernels:
            try:
                wrong = nan_as_zero(kernel.source)
            except ValueError as exc:
                wrong = None
                report.setdefault("notes", []).append(f"{kernel.name}: no wrong candidate ({exc})")
            plan = [("correct", kernel.source, "screen"), ("correct", kernel.source, "screen"),
                    ("correct", kernel.source, "full")]
            if wrong is not None:
                plan += [("wrong", wrong, "screen"), ("wrong", wrong, "full")]
            for candidate, source, battery in plan:
                if left() < 60:
                    report["runs"].append({"kernel": kernel.name, "candidate": candidate, "battery": battery,
                                           "skipped": "out of time"})
                    continue
                row: dict[str, Any] = {"kernel": kernel.name, "candidate": candidate}
                try:
                    row.update(gate2_run(graph, kernel.name, source, battery, device, workdir, left() - 30))
                    row["workers_replaced"] = _workers_replaced(device)
                except Exception as exc:  # noqa: BLE001 - one run's failure is recorded, the rest still run
                    row.update(battery=battery, error=f"{type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc()[-2000:])
                report["runs"].append(row)
                _write(out_dir, report)
    except Exception as exc:  # noqa: BLE001
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()[-3000:]
    report["wall_s"] = round(time.monotonic() - begin, 1)
    report["verdicts_as_expected"] = all(
        (r.get("passed") if r["candidate"] == "correct" or r["battery"] == "screen" else not r.get("passed"))
        for r in report["runs"] if "error" not in r and "skipped" not in r)
    _write(out_dir, report)
    return {k: report[k] for k in ("problem", "device", "scale", "wall_s", "verdicts_as_expected") if k in report}


def _workers_replaced(device: str) -> list[str]:
    """The shared worker's replacements so far (gate 2 asks for one when it left memory allocated)."""
    from kernelopt_core.measure.worker import get_worker

    return list(get_worker(device).recycled)


def _gb(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value / 1e9:.2f}" if value >= 1e8 else f"{value / 1e9:.2g}"


def _markdown(report: dict[str, Any]) -> str:
    lines = [f"# Gate 2 at scale: {report['problem']} ({report['scale']}) on {report['device']}", "",
             f"Targets: full battery <= {TARGETS['full_s']:g} s, screen <= {TARGETS['screen_s']:g} s, device peak "
             f"<= {TARGETS['device_peak_ratio']:g}x the working set. Compile {report.get('compile_s', '-')} s, "
             f"wall {report.get('wall_s', '-')} s.", "",
             "| kernel | candidate | battery | verdict | gate 2 s | checks s | runs (orig/cand) | working set GB | "
             "tracked x | device peak x (worker + candidate) | worker peak GB | in use before/peak GB | retained GB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["runs"]:
        if "skipped" in row or "error" in row:
            lines.append(f"| {row['kernel']} | {row['candidate']} | {row.get('battery')} | "
                         f"{row.get('skipped') or row.get('error')} | | | | | | | | | |")
            continue
        memory = row.get("memory") or {}
        steps = row.get("steps_s") or {}
        runs = row.get("runs") or {}
        verdict = "passed" if row["passed"] else ("could not verify" if row["could_not_verify"] else "rejected")
        lines.append(f"| {row['kernel']} | {row['candidate']} | {row['battery']} | {verdict} | {row['gate_s']} | "
                     f"{steps.get('checks_s', '-')} | {runs.get('original', '-')}/{runs.get('candidate', '-')} | "
                     f"{_gb(memory.get('working_set_bytes'))} | {memory.get('ratio_to_working_set', '-')} | "
                     f"{memory.get('device_peak_ratio', '-')} | {_gb(memory.get('device_peak_bytes'))} | "
                     f"{_gb(memory.get('device_in_use_before_bytes'))}/{_gb(memory.get('device_in_use_peak_bytes'))} | "
                     f"{_gb(memory.get('retained_after_bytes'))} |")
    lines += ["", "Seconds per step (gate 2's `steps_s`):", ""]
    for row in report["runs"]:
        if row.get("steps_s"):
            steps = ", ".join(f"{k[:-2]} {v:.3g}" for k, v in row["steps_s"].items())
            lines.append(f"- {row['kernel']}, {row['candidate']}, {row['battery']}: {steps}{_process(row)}")
    for row in report["runs"]:
        census = (row.get("memory") or {}).get("retained_census")
        if census:  # what the worker still held after the run, by pool and by where it was allocated
            lines.append(f"- retained after {row['candidate']} {row['battery']}: {json.dumps(census)[:1500]}")
    replaced = next((r["workers_replaced"] for r in reversed(report["runs"]) if r.get("workers_replaced")), [])
    lines += [f"- worker replaced: {reason}" for reason in replaced]
    if report.get("error"):
        lines += ["", f"Error: {report['error']}"]
    return "\n".join(lines) + "\n"


def _process(row: dict[str, Any]) -> str:
    """How the candidate's process was got: the screens' spare (started ahead) or a fresh start."""
    how = row.get("candidate_process") or {}
    if not how:
        return ""
    where = "from the spare" if how.get("from_spare") else "started fresh"
    return f" (its process {where} in {how.get('seconds', '-')} s)"


def _write(out_dir: str, report: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, f"{RESULTS}.json"), "w") as handle:
        json.dump(report, handle, indent=1, default=str)
    with open(os.path.join(out_dir, f"{RESULTS}.md"), "w") as handle:
        handle.write(_markdown(report))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--device", default=None, help="cuda (default) or cpu")
    parser.add_argument("--scale", default=None, help="h200 (default) or tiny")
    parser.add_argument("--problem", default=None, help="a kbscale problem (default softmax_long_rows)")
    args = parser.parse_args(argv)
    for name, value in (("KERNELOPT_GATE2_DEVICE", args.device), ("KERNELOPT_PROBLEM_SCALE", args.scale),
                        ("KERNELOPT_GATE2_PROBLEM", args.problem)):
        if value:
            os.environ[name] = value
    summary = run(args.out_dir)
    print(json.dumps(summary, indent=1))
    return 0 if summary.get("verdicts_as_expected") else 1


if __name__ == "__main__":
    sys.exit(main())
