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

from .corpus import CASES, CONTAINMENT, PROBLEMS, REFUSED, Case, EditNotApplicable

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


def run_probe_module(module: str, spec: dict[str, Any], marker: str, what: str, timeout_s: float) -> Any:
    """``python -m module SPEC`` in a fresh process on the CPU backend, from the repository root; the JSON
    after ``marker`` on its output (a RuntimeError with its stderr's tail when it fails or prints none)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-m", module, json.dumps(spec)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout_s)
    line = next((x for x in done.stdout.splitlines() if x.startswith(marker + " ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{what} failed (status {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(line.split(" ", 1)[1])


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
    # the cascade's verdict was "not verified": a decision the candidate adds was never seen both ways (neither
    # accepted nor rejected as wrong)
    not_verified: bool = False
    expect_not_verified: bool = False  # a correct case whose added decision no input reaches

    @property
    def accepted(self) -> bool:
        return self.error is None and self.skipped is None and self.failed_gate is None and not self.not_verified

    @property
    def as_expected(self) -> bool:
        if self.error is not None or self.skipped is not None:
            return False
        if self.expected_gate in (CONTAINMENT, REFUSED):  # any gate may end it, as long as it is not accepted
            return self.failed_gate is not None or self.not_verified
        if self.expected_gate is None:
            return self.failed_gate is None and self.not_verified == self.expect_not_verified
        return self.failed_gate == self.expected_gate

    @property
    def verdict(self) -> str:
        """accepted, rejected at gate N, not verified, skipped or error: what a reader of the report wants."""
        if self.skipped is not None:
            return "skipped"
        if self.error is not None:
            return "error"
        if self.failed_gate is not None:
            return f"rejected at gate {self.failed_gate}"
        return "not verified" if self.not_verified else "accepted"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "as_expected": self.as_expected}


def is_not_verified(outcome: Any) -> bool:
    """Whether a cascade's (or a finalist evaluation's) verdict is "not verified": the candidate adds a path no
    input reached. Read from the result's flag or decision, whichever the gates give."""
    if getattr(outcome, "not_verified", False):
        return True
    decision = getattr(outcome, "decision", None)
    if isinstance(decision, str) and decision.replace("_", "-").replace(" ", "-") == "not-verified":
        return True
    # a gate that could not give a verdict because an added path was never taken says so in its reason
    return bool(getattr(outcome, "could_not_verify", False)) and "not verified" in str(getattr(outcome, "reason", ""))


def _result(case: Case, failed_gate: int | None = None, reason: str = "", seconds: float = 0.0) -> CaseResult:
    return CaseResult(case.id, case.problem, case.klass, case.expected_gate, failed_gate, reason, seconds,
                      expect_not_verified=case.expect_not_verified)


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
            result = _result(case)
            result.skipped = f"needs {', '.join(missing)}"
            results.append(result)
            continue
        if len(graph.kernels) != 1:
            result = _result(case)
            result.error = f"{case.problem} compiled to {len(graph.kernels)} kernels, expected one"
            results.append(result)
            continue
        kernel = graph.kernels[0]
        begin = time.monotonic()
        try:
            candidate = case.candidate(kernel.source, kernel.name)
            outcome = run_cascade(graph, {kernel.name: candidate}, config, worker=worker)
        except EditNotApplicable as exc:
            result = _result(case, seconds=time.monotonic() - begin)
            result.error = f"edit not applicable: {exc}"
            results.append(result)
            continue
        except CascadeSetupError as exc:
            result = _result(case, seconds=time.monotonic() - begin)
            result.error = f"could not run: {exc}"
            results.append(result)
            continue
        result = _result(case, outcome.failed_gate, outcome.reason, time.monotonic() - begin)
        result.not_verified = is_not_verified(outcome)
        if result.not_verified:  # no verdict on the candidate: neither accepted nor rejected
            result.failed_gate = None
        elif outcome.could_not_verify:
            result.error = f"could not verify: {outcome.reason}"
        results.append(result)
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
        result = _result(case)
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
                result.not_verified = is_not_verified(screen)
                if result.not_verified:
                    result.failed_gate = None
            else:
                _close_candidate(evaluator, worker)  # the search times it, then closes its process
                final = evaluator.finalize({kernel.name: candidate}, final_gates)
                result.failed_gate, result.reason = final.failed_gate, final.reason
                result.not_verified = is_not_verified(final)
                if result.not_verified:
                    result.failed_gate = None
                elif final.failed_gate is not None:
                    result.stage = "full battery" if final.failed_gate == 2 else "final gates"
                if final.could_not_verify and not result.not_verified:
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
