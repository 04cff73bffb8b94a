"""Compile the corpus problems and run every corpus case through the cascade; tabulate the outcome.

Used by the corpus test, by ``report.py`` (which writes the table in docs/gates.md) and by the
GPU benchmark. Nothing here imports torch: compiling happens in one subprocess, the gates run in
the worker (or in-process when asked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates import CAPABILITIES, CascadeConfig, CascadeSetupError, run_cascade

from .corpus import CASES, CONTAINMENT, PROBLEMS, Case, EditNotApplicable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

_COMPILE_SCRIPT = """
import json, sys, glob, os
from kernelopt_core.compile import compile_problem
spec = json.loads(sys.argv[1])
found = {}
for name in spec["problems"]:
    out = os.path.join(spec["out"], name)
    compile_problem(os.path.join(spec["dir"], name + ".py"), out, spec["mode"], spec["device"])
    paths = sorted(glob.glob(os.path.join(out, "torch_compile_debug", "run_*", "torchinductor", "*", "output_code.py")))
    found[name] = paths[-1] if paths else None
print("@corpus-graphs " + json.dumps(found))
"""


def compile_problems(out_dir: str | Path, problems: tuple[str, ...] = PROBLEMS, device: str = "cpu",
                     mode: str = "default", timeout_s: float = 900.0) -> dict[str, str]:
    """Compile the corpus problems in one subprocess; problem -> its output_code.py."""
    spec = {"problems": list(problems), "out": str(out_dir), "dir": str(HERE / "problems"), "device": device,
            "mode": mode}
    env = {**os.environ, "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, json.dumps(spec)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
    line = next((x for x in done.stdout.splitlines() if x.startswith("@corpus-graphs ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"compiling the corpus problems failed (status {done.returncode}):\n{done.stderr[-4000:]}")
    found = json.loads(line.split(" ", 1)[1])
    missing = [name for name, path in found.items() if not path]
    if missing:
        raise RuntimeError(f"no dump written for {', '.join(missing)}")
    return found


@dataclass
class CaseResult:
    id: str
    problem: str
    klass: str
    expected_gate: int | str | None
    failed_gate: int | None  # None: passed every gate that ran
    reason: str
    seconds: float
    error: str | None = None  # the edit did not apply, or the check could not run
    skipped: str | None = None  # not run: the capabilities it needs are not in kernelopt_core.gates.CAPABILITIES
    # two-stage runs: which stage rejected it ("screen": gate 1 or gate 2's screen; "full battery": gate 2's
    # full battery before the final gates; "final gates": gate 3 or 4), None when nothing did
    stage: str | None = None

    @property
    def as_expected(self) -> bool:
        if self.error is not None or self.skipped is not None:
            return False
        if self.expected_gate == CONTAINMENT:  # any gate may end it, as long as it is stopped
            return self.failed_gate is not None
        return self.failed_gate == self.expected_gate

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "as_expected": self.as_expected}


def evaluate(cases: list[Case], graphs: dict[str, str], *, gates: tuple[int, ...] = (1, 2, 3),
             workdir: str | None = None, worker: Any = None, device: str = "auto",
             capabilities: frozenset[str] = CAPABILITIES, two_stage: bool = False) -> list[CaseResult]:
    """Run each case's candidate through ``gates``; a case whose problem has no graph is left out, one
    that needs a capability the gates lack is recorded as skipped (it would not be rejected yet).

    ``two_stage`` takes the search's path instead (:class:`GateEvaluator`): the screen (gate 1 and gate 2's
    screen battery), then for what it passes the finalists' gates (gate 2's full battery, then ``gates``
    past 2), in a fresh candidate process as in the search.
    """
    if two_stage:
        if workdir is None:
            raise ValueError("a two-stage evaluation needs a workdir (the search's run folder)")
        return _evaluate_two_stage(cases, graphs, gates, workdir, worker, device, capabilities)
    parsed = {name: parse_output_code(path) for name, path in graphs.items() if path}
    config = CascadeConfig(device=device, run_gates=gates, workdir=workdir)
    results: list[CaseResult] = []
    for case in cases:
        graph = parsed.get(case.problem)
        if graph is None:
            continue
        missing = case.missing(capabilities)
        if missing:
            results.append(CaseResult(case.id, case.problem, case.klass, case.expected_gate, None, "", 0.0,
                                      skipped=f"needs {', '.join(missing)}"))
            continue
        if len(graph.kernels) != 1:
            results.append(CaseResult(case.id, case.problem, case.klass, case.expected_gate, None, "", 0.0,
                                      error=f"{case.problem} compiled to {len(graph.kernels)} kernels, expected one"))
            continue
        kernel = graph.kernels[0]
        begin = time.monotonic()
        try:
            candidate = case.candidate(kernel.source, kernel.name)
            outcome = run_cascade(graph, {kernel.name: candidate}, config, worker=worker)
        except EditNotApplicable as exc:
            results.append(CaseResult(case.id, case.problem, case.klass, case.expected_gate, None, "",
                                      time.monotonic() - begin, error=f"edit not applicable: {exc}"))
            continue
        except CascadeSetupError as exc:
            results.append(CaseResult(case.id, case.problem, case.klass, case.expected_gate, None, "",
                                      time.monotonic() - begin, error=f"could not run: {exc}"))
            continue
        results.append(CaseResult(case.id, case.problem, case.klass, case.expected_gate, outcome.failed_gate,
                                  outcome.reason, time.monotonic() - begin))
    return results


def _evaluate_two_stage(cases: list[Case], graphs: dict[str, str], gates: tuple[int, ...], workdir: str,
                        worker: Any, device: str, capabilities: frozenset[str]) -> list[CaseResult]:
    from kernelopt_core.search.evaluation import EvaluationError, GateEvaluator

    parsed = {name: parse_output_code(path) for name, path in graphs.items() if path}
    final_gates = tuple(g for g in gates if g > 2)
    results: list[CaseResult] = []
    for case in cases:
        graph = parsed.get(case.problem)
        if graph is None:
            continue
        result = CaseResult(case.id, case.problem, case.klass, case.expected_gate, None, "", 0.0)
        missing = case.missing(capabilities)
        if missing or len(graph.kernels) != 1:
            if missing:
                result.skipped = f"needs {', '.join(missing)}"
            else:
                result.error = f"{case.problem} compiled to {len(graph.kernels)} kernels, expected one"
            results.append(result)
            continue
        kernel = graph.kernels[0]
        begin = time.monotonic()
        try:
            candidate = case.candidate(kernel.source, kernel.name)
            evaluator = GateEvaluator(graph, device, workdir, worker=worker)
            screen = evaluator.screen(kernel.name, candidate)
            if not screen.passed:
                result.failed_gate, result.reason, result.stage = screen.failed_gate, screen.reason, "screen"
            else:
                _close_candidate(evaluator, worker)  # the search times it, then closes its process
                final = evaluator.finalize({kernel.name: candidate}, final_gates)
                result.failed_gate, result.reason = final.failed_gate, final.reason
                if final.failed_gate is not None:
                    result.stage = "full battery" if final.failed_gate == 2 else "final gates"
                if final.could_not_verify:
                    result.error = f"could not verify: {final.reason}"
        except EditNotApplicable as exc:
            result.error = f"edit not applicable: {exc}"
        except (CascadeSetupError, EvaluationError) as exc:
            result.error = f"could not run: {exc}"
        result.seconds = time.monotonic() - begin
        results.append(result)
    return results


def _close_candidate(evaluator: Any, worker: Any) -> None:
    if worker == "in-process":
        from kernelopt_core.gates.tasks import skeleton

        skeleton.close_candidate({})
    else:
        evaluator.worker.call("kernelopt_core.gates.tasks.skeleton:close_candidate", {})


def summary_rows(results: list[CaseResult]) -> list[dict[str, Any]]:
    """Per class: rejected n/N and rejected by the labelled gate n/N (correct variants: false rejections);
    skipped cases are counted apart."""
    groups: OrderedDict[str, list[CaseResult]] = OrderedDict()
    for result in results:
        groups.setdefault(result.klass, []).append(result)
    rows = []
    for klass, items in groups.items():
        ran = [r for r in items if r.skipped is None]
        gates = sorted({str(r.expected_gate) for r in items if r.expected_gate is not None})
        rows.append({
            "class": klass, "n": len(ran), "skipped": len(items) - len(ran),
            "labelled_gate": "/".join(gates) if gates else "none (must pass 1-3)",
            "rejected": sum(1 for r in ran if r.failed_gate is not None and r.error is None),
            "by_labelled_gate": sum(1 for r in ran if r.as_expected and r.expected_gate is not None),
            "errors": sum(1 for r in ran if r.error is not None),
            "by_screen": sum(1 for r in ran if r.stage == "screen"),
            "by_full_battery": sum(1 for r in ran if r.stage == "full battery"),
            "needs": sorted({r.skipped for r in items if r.skipped}),
        })
    return rows


def markdown_table(results: list[CaseResult], title: str = "") -> str:
    rows = summary_rows(results)
    ran = [r for r in results if r.skipped is None]
    wrong = [r for r in ran if r.expected_gate is not None]
    correct = [r for r in ran if r.expected_gate is None]
    staged = any(r.stage is not None for r in results)
    lines = [title] if title else []
    if staged:
        lines += ["| class | labelled gate | rejected | by the labelled gate | by the screen | by the full battery |",
                  "|---|---|---|---|---|---|"]
    else:
        lines += ["| class | labelled gate | rejected | by the labelled gate |", "|---|---|---|---|"]
    for row in rows:
        if row["class"] == "correct" or not row["n"]:
            continue
        line = (f"| {row['class']} | {row['labelled_gate']} | {row['rejected']}/{row['n']} | "
                f"{row['by_labelled_gate']}/{row['n']} |")
        lines.append(line + (f" {row['by_screen']} | {row['by_full_battery']} |" if staged else ""))
    rejected = sum(1 for r in wrong if r.failed_gate is not None and r.error is None)
    labelled = sum(1 for r in wrong if r.as_expected)
    total = (f"| **all wrong candidates** ({len({r.klass for r in wrong})} classes) | | "
             f"**{rejected}/{len(wrong)}** | **{labelled}/{len(wrong)}** |")
    if staged:
        total += (f" {sum(1 for r in wrong if r.stage == 'screen')} |"
                  f" {sum(1 for r in wrong if r.stage == 'full battery')} |")
    lines.append(total)
    false_rejections = sum(1 for r in correct if r.failed_gate is not None or r.error is not None)
    false_accepts = sum(1 for r in wrong if r.failed_gate is None and r.error is None)
    lines.append("")
    lines.append(f"False accepts: **{false_accepts}/{len(wrong)}**. Correct variants (other block sizes, num_warps, "
                 f"grids, loop orders, algebraically equal math, launchers): **false rejections "
                 f"{false_rejections}/{len(correct)}** (gates 1-3).")
    if staged:
        missed = [r for r in wrong if r.stage not in (None, "screen")]
        lines.append("")
        lines.append(f"The screen (gate 1, gate 2 on the captured launch and one seed) passed {len(missed)} wrong "
                     f"candidate(s); the finalists' gates rejected all {sum(1 for r in missed if r.failed_gate)} "
                     "before acceptance: "
                     + ("; ".join(f"{r.id} ({r.klass})" for r in missed) if missed else "none") + ".")
    skipped = [r for r in results if r.skipped is not None]
    if skipped:
        lines.append("")
        lines.append(f"Not run yet, {len(skipped)} case(s) waiting for a capability of the gates: "
                     + "; ".join(f"{row['class']} ({row['skipped']}: {', '.join(row['needs'])})"
                                 for row in rows if row["skipped"]) + ".")
    errors = [r for r in ran if r.error is not None]
    if errors:
        lines.append("")
        lines.append("Cases that could not run: " + "; ".join(f"{r.id} ({r.error})" for r in errors))
    return "\n".join(lines)


def case_table(results: list[CaseResult]) -> str:
    lines = ["| case | problem | class | labelled | rejected by | ok |", "|---|---|---|---|---|---|"]
    for r in results:
        if r.skipped:
            got, ok = f"skipped ({r.skipped})", "-"
        else:
            got = "error" if r.error else (str(r.failed_gate) if r.failed_gate else "passed 1-3")
            got += f" ({r.stage})" if r.stage else ""
            ok = "yes" if r.as_expected else "NO"
        labelled = str(r.expected_gate) if r.expected_gate else "pass"
        lines.append(f"| {r.id} | {r.problem} | {r.klass} | {labelled} | {got} | {ok} |")
    return "\n".join(lines)


def all_cases() -> list[Case]:
    return list(CASES)
