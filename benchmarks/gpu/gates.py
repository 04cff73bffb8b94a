"""Gates on the GPU (issue 4): the A/A check, cascade wall time per fixture graph, the adversarial corpus on CUDA.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT gates:240
    KERNELOPT_GATES_DEVICE=cpu python -m benchmarks.gpu.gates OUT_DIR    # the corpus part on the CPU backend

A driver over the gates' public Python API (``kernelopt_core.gates.run_cascade``, what ``kernelopt
verify`` runs): one worker serves every candidate, where the CLI would start one per call (about 4 s
each on the H200, 20 times for the A/A check).

Three parts, each guarded so a failure is recorded and the rest still runs, in this order:

1. **A/A**: the unchanged kernel of one fixture graph, submitted as a candidate 20 times, must be
   rejected by gate 4 in 20 of 20 tries (speedup and interval recorded per try).
2. **Cascade wall time**: one correct candidate per fixture graph (its first kernel pinned to its
   first launch config through the launcher contract), through all four gates; target <= 15 s.
3. **Corpus on CUDA**: the corpus problems (tests/adversarial/problems) compiled with max-autotune
   on the GPU, every corpus edit applied to the CUDA kernels, gates 1-3; an edit whose text the
   CUDA codegen does not contain is recorded as not applicable.

Writes ``gates.{json,md}`` into OUT_DIR after every part and returns a summary; no GPU clock or setting
is changed. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 280), ``KERNELOPT_GATES_SKIP_AA=1`` (the A/A
check was recorded in an earlier call), ``KERNELOPT_GATES_DEVICE`` (default cuda; ``cpu`` runs the
corpus part on the CPU backend, a local check of this script: the fixture parts need the GPU).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import (
    FIXTURE_DUMPS,
    ROOT,
    Budget,
    env_flag,
    env_text,
    environment,
    failure,
    write_json,
    write_record,
)

AA_GRAPH = "softmax"
AA_TRIES = 20
CASCADE_TARGET_S = 15.0
DEVICE = env_text("KERNELOPT_GATES_DEVICE", "cuda")
if os.path.join(ROOT, "tests") not in sys.path:  # the adversarial corpus and its runner live with the tests
    sys.path.insert(0, os.path.join(ROOT, "tests"))


def _fixture_graphs() -> list[str]:
    return sorted(os.path.join(FIXTURE_DUMPS, name, "output_code.py") for name in os.listdir(FIXTURE_DUMPS)
                  if os.path.isfile(os.path.join(FIXTURE_DUMPS, name, "output_code.py")))


def aa_check(budget: Budget, work: str) -> dict[str, Any]:
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = parse_output_code(os.path.join(FIXTURE_DUMPS, AA_GRAPH, "output_code.py"))
    kernel = graph.kernels[0]
    tries: list[dict[str, Any]] = []
    for attempt in range(AA_TRIES):
        if budget.left() < 60:
            break
        begin = time.monotonic()
        try:
            result = run_cascade(graph, {kernel.name: kernel.source},
                                 CascadeConfig(device="cuda", run_gates=(4,), workdir=work))
            tries.append({"try": attempt, "rejected": not result.accepted, "speedup": result.speedup,
                          "ci": result.ci, "reason": result.reason, "kernel_speedups": result.kernel_speedups,
                          "seconds": round(time.monotonic() - begin, 2)})
        except Exception as exc:  # noqa: BLE001
            tries.append({"try": attempt, "error": f"{type(exc).__name__}: {exc}"})
            if len(tries) >= 2 and all("error" in t for t in tries[-2:]):
                break  # the setup is broken (no GPU, no worker): more tries only repeat it
    rejected = sum(1 for t in tries if t.get("rejected"))
    return {"graph": AA_GRAPH, "kernel": kernel.name, "tries": tries, "rejected": rejected,
            "attempted": len(tries), "passed": rejected == AA_TRIES}


def _variant(config: dict[str, Any]) -> dict[str, Any]:
    """Another valid launch config of the same kernel (other warps), for the warm measurement."""
    warps = int(config.get("num_warps", 4))
    return {**config, "num_warps": warps * 2 if warps < 16 else warps // 2}


def _cascade_row(graph: Any, kernel: Any, candidate: str, work: str) -> dict[str, Any]:
    from kernelopt_core.gates import CascadeConfig, run_cascade

    begin = time.monotonic()
    result = run_cascade(graph, {kernel.name: candidate}, CascadeConfig(device="cuda", workdir=work))
    wall = time.monotonic() - begin
    gate2 = result.verdict(2)
    return {"wall_s": round(wall, 2), "within_target": wall <= CASCADE_TARGET_S, "accepted": result.accepted,
            "failed_gate": result.failed_gate, "reason": result.reason,
            "gate_seconds": {v.gate: round(v.seconds, 2) for v in result.gates},
            "gate2_steps_s": gate2.numbers.get("steps_s") if gate2 else None,
            "speedup": result.speedup, "ci": result.ci,
            "model": {k: (result.verdict(3).numbers.get(k) if result.verdict(3) else None)
                      for k in ("d_ref", "d_opt", "rho", "max_abs_diff")}}


def cascade_times(budget: Budget, work: str) -> dict[str, Any]:
    """Per fixture graph: a first candidate (cold: the graph's kernels are compiled and loaded in the
    worker for the first time) and a second one (warm: what each further candidate of a search
    costs). The worker is started before the first graph and its start is reported on its own."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.launcher import set_launch_configs
    from kernelopt_core.gates.ptx_compile import shared_compiler
    from kernelopt_core.measure.worker import get_worker

    begin = time.monotonic()
    # the worker run_cascade uses ("cuda" resolves to "cuda:0" for these graphs)
    started = get_worker("cuda:0").call("kernelopt_core.measure.task_context:ready_task", {}, timeout_s=300)
    worker_start_s = round(time.monotonic() - begin, 2)
    rows: list[dict[str, Any]] = []
    for path in _fixture_graphs():
        name = os.path.basename(os.path.dirname(path))
        if budget.left() < 90:
            rows.append({"graph": name, "skipped": "budget"})
            continue
        try:
            graph = parse_output_code(path)
            kernel = graph.kernels[0]
            configs = shared_compiler().compile(kernel.name, kernel.source).get("configs") or []
            first = configs[0] if configs else None
            candidates = [(kernel.source, "unchanged (its launch configs could not be read)")]
            if first is not None and kernel.heuristic != "template":
                config = {**first["kwargs"], "num_warps": first["num_warps"], "num_stages": first["num_stages"]}
                candidates = [(set_launch_configs(kernel.source, kernel.name, [c]), f"pinned to one launch config {c}")
                              for c in (config, _variant(config))]
            row: dict[str, Any] = {"graph": name, "kernel": kernel.name, "candidate": candidates[0][1]}
            row.update(_cascade_row(graph, kernel, candidates[0][0], work))
            if len(candidates) > 1:
                row["warm"] = {"candidate": candidates[1][1], **_cascade_row(graph, kernel, candidates[1][0], work)}
            rows.append(row)
        except Exception as exc:  # noqa: BLE001
            rows.append({"graph": name, **failure(exc)})
    return {"rows": rows, "target_s": CASCADE_TARGET_S, "worker_start_s": worker_start_s,
            "worker_ready": started.ok, "worker_failure": started.failure.to_json() if started.failure else None}


def corpus_on_cuda(budget: Budget, work: str) -> dict[str, Any]:
    from adversarial.corpus import CASES
    from adversarial.runner import case_table, compile_problems, evaluate, markdown_table

    begin = time.monotonic()
    graphs = compile_problems(os.path.join(work, "corpus-dumps"), device=DEVICE,
                              mode="max-autotune" if DEVICE == "cuda" else "default",
                              timeout_s=max(60.0, budget.left() - 90))
    compile_s = time.monotonic() - begin
    # keep the CUDA codegen of each corpus problem beside the results (the edits must match its text)
    for problem, path in graphs.items():
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as source, \
                    open(os.path.join(work, f"corpus_{problem}_output_code.txt"), "w", encoding="utf-8") as copy:
                copy.write(source.read())
    results = []
    for case in CASES:
        if budget.left() < 20:
            break
        results.extend(evaluate([case], graphs, gates=(1, 2, 3), workdir=work, device=DEVICE))
    return {"compile_s": round(compile_s, 1), "graphs": graphs, "cases": [r.to_json() for r in results],
            "evaluated": len(results), "total_cases": len(CASES),
            "table": markdown_table(results, f"Corpus on {DEVICE} ({'max-autotune' if DEVICE == 'cuda' else 'CPU backend'}), gates 1-3"),
            "case_table": case_table(results)}


def _markdown(summary: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    aa = summary.get("aa", {})
    if "error" in aa:
        lines += ["## A/A", "", f"error: {aa['error']}", ""]
    elif aa:
        lines += ["## A/A: the unchanged kernel submitted as a candidate", "",
                  f"{aa['graph']} / `{aa['kernel']}`: rejected by gate 4 in **{aa['rejected']}/{AA_TRIES}** tries "
                  f"({aa['attempted']} attempted).", "", "| try | speedup | CI | rejected |", "|---|---|---|---|"]
        for t in aa["tries"]:
            ci = t.get("ci") or ["-", "-"]
            speed = f"{t['speedup']:.4f}" if t.get("speedup") is not None else "-"
            ci_text = f"{ci[0]:.4f}-{ci[1]:.4f}" if isinstance(ci[0], float) else "-"
            lines.append(f"| {t['try']} | {speed} | {ci_text} | {t.get('rejected', t.get('error'))} |")
        lines.append("")
    times = summary.get("cascade", {})
    if "rows" in times:
        lines += ["## Full cascade wall time, one candidate per fixture graph", "",
                  f"Worker start (torch import, CUDA set-up; once per worker, before the first graph): "
                  f"{times.get('worker_start_s', '-')} s. *First* is the graph's first candidate (its kernels "
                  "compiled and loaded in the worker); *next* is a second candidate on the same graph, what each "
                  "further candidate of a search costs.", "",
                  "| graph | kernel | first: wall s | <= 15 s | next: wall s | decision | gate seconds (first) | "
                  "gate 2 steps (first) |", "|---|---|---|---|---|---|---|---|"]
        for row in times["rows"]:
            if "wall_s" in row:
                decision = "accepted" if row["accepted"] else f"fallback (gate {row['failed_gate']})"
                warm = row.get("warm", {}).get("wall_s", "-")
                lines.append(f"| {row['graph']} | `{row['kernel']}` | {row['wall_s']} | {row['within_target']} | "
                             f"{warm} | {decision} | {row['gate_seconds']} | {row.get('gate2_steps_s')} |")
            else:
                lines.append(f"| {row['graph']} | | | | | {row.get('error') or row.get('skipped')} | | |")
        lines.append("")
    elif "error" in times:
        lines += ["## Full cascade wall time", "", f"error: {times['error']}", ""]
    corpus = summary.get("corpus", {})
    if "table" in corpus:
        lines += ["## " + corpus["table"].splitlines()[0], "", *corpus["table"].splitlines()[1:], "",
                  f"Compile: {corpus['compile_s']} s; cases evaluated {corpus['evaluated']}/{corpus['total_cases']}.",
                  "", corpus["case_table"], ""]
    elif "error" in corpus:
        lines += ["## Corpus on CUDA", "", f"error: {corpus['error']}", ""]
    return lines


def run(out_dir: str) -> dict[str, Any]:
    work = os.path.join(os.path.abspath(out_dir), "work")
    os.makedirs(work, exist_ok=True)
    budget = Budget.from_env(280.0)
    summary: dict[str, Any] = {"environment": environment(DEVICE)}
    parts = [("aa", aa_check), ("cascade", cascade_times), ("corpus", corpus_on_cuda)]
    if env_flag("KERNELOPT_GATES_SKIP_AA"):  # A/A already recorded (20/20) in an earlier call
        parts = parts[1:]
    for key, part in parts:
        begin = time.monotonic()
        try:
            summary[key] = part(budget, work)
        except Exception as exc:  # noqa: BLE001 - record and go on
            summary[key] = failure(exc)
        summary[key]["section_s"] = round(time.monotonic() - begin, 1)
        write_json(os.path.join(out_dir, "gates.json"), summary)
    write_record(out_dir, "gates", summary, f"Gates on {DEVICE}", _markdown(summary))
    corpus = summary.get("corpus", {})
    cases = corpus.get("cases", [])
    return {
        "aa_rejected": summary.get("aa", {}).get("rejected"), "aa_tries": AA_TRIES,
        "cascade_wall_s": {r["graph"]: r.get("wall_s") for r in summary.get("cascade", {}).get("rows", [])},
        "corpus_as_expected": sum(1 for c in cases if c.get("as_expected")), "corpus_evaluated": len(cases),
        "errors": [k for k in ("aa", "cascade", "corpus") if "error" in summary.get(k, {})],
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gates-gpu"), indent=1, default=str))
