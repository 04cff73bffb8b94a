"""Run the red-team cases (redteam.py) through gates 1-3 and print who got through.

    .venv/bin/python -m tests.adversarial.redteam_report [--dumps GRAPHS.json] [--json OUT] [--only ID,...]

Each case goes through the cascade as ``kernelopt verify --gates 1,2,3 --device cpu`` does (``run_cascade``:
gate 1, gate 2's full battery, gate 3), whatever capabilities the gates declare: the point is to count, on the
checked-out gates, the wrong candidates accepted and the correct ones rejected. The table: case, kind,
expected, got (accepted / rejected at gate N / not verified), false accept?, false reject?. "Not verified" is
never a false accept nor a false reject; for a correct case expected accepted it is a lost win, listed apart.
Compiles the corpus problems for the CPU backend unless ``--dumps`` names a JSON map problem -> output_code.py.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from .edits import CONTAINMENT, REFUSED
from .redteam import KIND, NEEDS, REDTEAM_CASES
from .runner import CaseResult, compile_problems, evaluate


def expected_text(result: CaseResult) -> str:
    if result.expected_gate == REFUSED:
        return "refused"
    if result.expected_gate == CONTAINMENT:
        return "contained"
    if result.expected_gate is None:
        return "not verified" if result.expect_not_verified else "accepted"
    return f"rejected at gate {result.expected_gate}"


def false_accept(result: CaseResult) -> bool:
    return result.expected_gate is not None and result.accepted


def false_reject(result: CaseResult) -> bool:
    return result.expected_gate is None and result.failed_gate is not None and result.error is None


def table(results: list[CaseResult]) -> str:
    lines = ["| case | kind | expected | got | false accept? | false reject? |", "|---|---|---|---|---|---|"]
    for r in results:
        got = r.verdict + (f" ({r.error})" if r.error else "")
        lines.append(f"| {r.id} | {KIND.get(r.id, r.klass)} | {expected_text(r)} | {got} | "
                     f"{'YES' if false_accept(r) else ''} | {'YES' if false_reject(r) else ''} |")
    return "\n".join(lines)


def summary(results: list[CaseResult]) -> str:
    wrong = [r for r in results if r.expected_gate is not None and r.error is None]
    correct = [r for r in results if r.expected_gate is None and r.error is None]
    accepted = [r.id for r in wrong if false_accept(r)]
    rejected = [r.id for r in correct if false_reject(r)]
    lost = [r.id for r in correct if r.not_verified and not r.expect_not_verified]
    unflagged = [r.id for r in correct if r.accepted and r.expect_not_verified]
    kinds = sorted({KIND[r.id] for r in wrong})
    by_kind = "; ".join(f"{kind}: {sum(1 for r in wrong if KIND[r.id] == kind and false_accept(r))} of "
                        f"{sum(1 for r in wrong if KIND[r.id] == kind)}" for kind in kinds)
    lines = [f"False accepts: {len(accepted)} of {len(wrong)} wrong ({by_kind})"
             + (f": {', '.join(accepted)}" if accepted else ""),
             f"False rejects: {len(rejected)} of {len(correct)} correct" + (f": {', '.join(rejected)}" if rejected else ""),
             f"Not verified among the wrong: {sum(1 for r in wrong if r.not_verified)}; correct ones not verified "
             f"though expected accepted (lost wins): {', '.join(lost) or 'none'}; correct ones expected 'not "
             f"verified' but accepted: {', '.join(unflagged) or 'none'}"]
    errors = [f"{r.id} ({r.error})" for r in results if r.error]
    if errors:
        lines.append("Could not run: " + "; ".join(errors))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dumps", help="JSON file: problem -> output_code.py (skips compiling)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--only", help="comma-separated case ids")
    args = parser.parse_args(argv)
    from kernelopt_core.gates import CAPABILITIES

    cases = REDTEAM_CASES
    if args.only:
        chosen = set(args.only.split(","))
        unknown = chosen - {c.id for c in cases}
        if unknown:
            print(f"unknown case ids: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.id in chosen]
    everything = frozenset(CAPABILITIES) | frozenset(NEEDS) | {n for c in cases for n in c.needs}
    started = time.monotonic()
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="kernelopt-redteam-") as tmp:
        graphs = (json.loads(Path(args.dumps).read_text()) if args.dumps
                  else compile_problems(f"{tmp}/dumps", problems=tuple(sorted({c.problem for c in cases}))))
        for case in cases:  # one at a time, so that a long run reports progress
            results += evaluate([case], graphs, gates=(1, 2, 3), workdir=f"{tmp}/work", device="cpu",
                                capabilities=everything)
            r = results[-1]
            print(f"[{time.monotonic() - started:6.0f} s] {r.id}: {r.verdict} {r.reason[:160]}", file=sys.stderr,
                  flush=True)
            if args.json:  # kept as it grows: a long run that stops early still leaves what it found
                _write_json(args.json, results)
    declared = ", ".join(sorted(CAPABILITIES))
    print(f"Red-team cases through gates 1-3 on the CPU Triton backend (run_cascade, as `kernelopt verify --gates "
          f"1,2,3 --device cpu`), torch {_version('torch')}, triton {_version('triton')}, Python "
          f"{platform.python_version()}, {len(results)} cases in {time.monotonic() - started:.0f} s. The gates "
          f"declare: {declared}.\n")
    print(table(results))
    print()
    print(summary(results))
    return 0


def _write_json(path: str, results: list[CaseResult]) -> None:
    Path(path).write_text(json.dumps([{**r.to_json(), "kind": KIND.get(r.id), "verdict": r.verdict,
                                       "false_accept": false_accept(r), "false_reject": false_reject(r)}
                                      for r in results], indent=1))


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:  # the results matter more than the label
        return "(version unknown)"


if __name__ == "__main__":
    sys.exit(main())
