"""Every candidate a kbscale problem accepted on a GPU, verified again through today's gates (issue 39).

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT reverify_accepted:420
    python -m benchmarks.gpu.reverify_accepted OUT_DIR --device cpu      # here: the diffs' matching only

The accepted candidates are the ``*_final.diff`` files recorded under ``benchmarks/results/`` (each a
bench run's final diff of one ``output_code.py``). Per problem it compiles the kbscale problem once
(``kernelopt compile``, max-autotune, ``KERNELOPT_PROBLEM_SCALE`` default h200), applies each diff's hunks
to the fresh graph by their text (line numbers may have moved), takes the kernel the diff changed, and
runs ``kernelopt verify --gates 1,2,3`` on it (gate 4's speed is not the question: a false rejection is).
Records per diff: applied or why not, the kernel, the verdict, the deciding gate's reason, each gate's
seconds. Target: 0 rejected. Knobs: ``KERNELOPT_GPU_BUDGET_S`` (default 420),
``KERNELOPT_REVERIFY_DEVICE`` (default cuda), ``KERNELOPT_REVERIFY_PROBLEMS=a,b`` (default: all).
"""

from __future__ import annotations

import glob
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.gpu.devicescript import (  # noqa: E402
    compile_in_own_process,
    env_list,
    environment,
    kernelopt,
    out_dir_main,
    table,
    write_record,
)

RESULTS_DIR = os.path.join(ROOT, "benchmarks", "results")
PROBLEMS_DIR = os.path.join(ROOT, "benchmarks", "problems", "kbscale")
STEM = "reverify_accepted"


@dataclass
class Hunk:
    before: list[str]  # context and removed lines
    after: list[str]  # context and added lines


def accepted_diffs() -> list[tuple[str, str]]:
    """(problem, diff path) for every recorded final diff whose name holds a kbscale problem's name."""
    problems = sorted((os.path.basename(p)[:-3] for p in glob.glob(os.path.join(PROBLEMS_DIR, "*.py"))),
                      key=len, reverse=True)  # the longest name first: layer_norm_16_rows before any shorter one
    found = []
    for path in sorted(glob.glob(os.path.join(RESULTS_DIR, "**", "*final.diff"), recursive=True)):
        name = os.path.basename(path)
        problem = next((p for p in problems if p in name), None)
        if problem is not None:
            found.append((problem, path))
    return found


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of a one-file unified diff, as before/after line lists."""
    hunks: list[Hunk] = []
    current: Hunk | None = None
    for line in diff.splitlines():
        if line.startswith("@@"):
            current = Hunk([], [])
            hunks.append(current)
        elif current is None or line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            current.before.append(line[1:])
        elif line.startswith("+"):
            current.after.append(line[1:])
        elif line.startswith(" ") or line == "":
            current.before.append(line[1:])
            current.after.append(line[1:])
    return hunks


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    """``text`` with each hunk's lines replaced where they occur exactly once; ValueError otherwise."""
    lines = text.splitlines()
    for number, hunk in enumerate(hunks, 1):
        width = len(hunk.before)
        places = [i for i in range(len(lines) - width + 1) if lines[i:i + width] == hunk.before]
        if len(places) != 1:
            raise ValueError(f"hunk {number}'s lines occur {len(places)} times in the fresh graph")
        at = places[0]
        lines[at:at + width] = hunk.after
    return "\n".join(lines) + "\n"


def changed_kernel(original_path: str, patched_path: str) -> tuple[str, str]:
    """(name, patched source) of the one kernel whose source the patch changed."""
    from kernelopt_core.artifacts import parse_output_code

    before = {k.name: k.source for k in parse_output_code(original_path).kernels}
    after = {k.name: k.source for k in parse_output_code(patched_path).kernels}
    changed = [name for name, source in after.items() if before.get(name) != source]
    if len(changed) != 1:
        raise ValueError(f"the diff changes {len(changed)} kernels, not one: {', '.join(changed) or 'none'}")
    return changed[0], after[changed[0]]


def reverify(problem: str, diffs: list[str], out_dir: str, device: str, left: Any) -> list[dict[str, Any]]:
    """One problem's diffs, each applied to one fresh compile and verified through gates 1-3."""
    work = os.path.join(out_dir, "work", problem)
    rows: list[dict[str, Any]] = []
    try:
        graph_path = compile_in_own_process(os.path.join(PROBLEMS_DIR, f"{problem}.py"), work, device,
                                            max(60.0, left() - 30))
    except Exception as exc:  # noqa: BLE001 - recorded against each of its diffs
        return [{"problem": problem, "diff": rel(d), "error": f"compile: {exc}"[:1500]} for d in diffs]
    with open(graph_path, encoding="utf-8") as handle:
        fresh = handle.read()
    for number, diff_path in enumerate(diffs):
        row: dict[str, Any] = {"problem": problem, "diff": rel(diff_path)}
        rows.append(row)
        if left() < 60:
            row["skipped"] = "out of time"
            continue
        try:
            with open(diff_path, encoding="utf-8") as handle:
                patched = apply_hunks(fresh, parse_hunks(handle.read()))
            patched_path = os.path.join(work, f"patched_{number}.py")
            with open(patched_path, "w", encoding="utf-8") as handle:
                handle.write(patched)
            kernel, source = changed_kernel(graph_path, patched_path)
        except ValueError as exc:
            row["applied"] = False
            row["error"] = f"the diff does not apply to today's compile: {exc}"
            continue
        row.update(applied=True, kernel=kernel)
        candidate = os.path.join(work, f"candidate_{number}.py")
        with open(candidate, "w", encoding="utf-8") as handle:
            handle.write(source)
        if not device.startswith("cuda"):
            row["verdict"] = "not run (no GPU: the diff's matching only)"
            continue
        done = kernelopt(["verify", graph_path, "--kernel", kernel, "--candidate", candidate, "--gates", "1,2,3",
                          "--device", device], timeout_s=max(30.0, left() - 20), cwd=work,
                         log_path=os.path.join(work, f"verify_{number}.log"))
        data = done.data or {}
        row.update(wall_s=done.wall_s, exit=done.returncode, accepted=data.get("accepted"),
                   could_not_verify=data.get("could_not_verify"), reason=str(data.get("reason", ""))[:800],
                   gate_s={str(v.get("gate")): v.get("seconds") for v in data.get("gates") or []
                           if isinstance(v, dict)})
        gate2 = next((v for v in data.get("gates") or [] if isinstance(v, dict) and v.get("gate") == 2), {})
        coverage = ((gate2.get("kernels") or {}).get(kernel) or {}).get("decisions")
        if coverage:  # an added decision's evidence: which sides were seen, what was forced or not credited
            row["decisions"] = coverage
        row["verdict"] = ("accepted" if row["accepted"] else "could not verify" if row["could_not_verify"]
                          else "rejected" if data else f"no result (exit {done.returncode}): {done.log[-600:]}")
    return rows


def rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def run(out_dir: str) -> dict[str, Any]:
    budget_s = float(os.environ.get("KERNELOPT_GPU_BUDGET_S", "420"))
    device = os.environ.get("KERNELOPT_REVERIFY_DEVICE", "cuda")
    os.environ.setdefault("KERNELOPT_PROBLEM_SCALE", "h200")
    wanted = set(env_list("KERNELOPT_REVERIFY_PROBLEMS"))
    begin = time.monotonic()
    by_problem: dict[str, list[str]] = {}
    for problem, path in accepted_diffs():
        if not wanted or problem in wanted:
            by_problem.setdefault(problem, []).append(path)
    report: dict[str, Any] = {"environment": environment(device), "device": device,
                              "scale": os.environ["KERNELOPT_PROBLEM_SCALE"], "rows": []}

    def left() -> float:
        return budget_s - (time.monotonic() - begin)

    for problem, diffs in sorted(by_problem.items()):
        report["rows"].extend(reverify(problem, diffs, out_dir, device, left))
        _write(out_dir, report)
    verified = [r for r in report["rows"] if "accepted" in r]
    report["summary"] = {"diffs": len(report["rows"]), "verified": len(verified),
                         "accepted": sum(1 for r in verified if r["accepted"]),
                         "rejected": sum(1 for r in verified if not r["accepted"] and not r.get("could_not_verify")),
                         "wall_s": round(time.monotonic() - begin, 1)}
    _write(out_dir, report)
    return report["summary"]


def _write(out_dir: str, report: dict[str, Any]) -> None:
    rows = [(r["problem"], r["diff"], r.get("kernel", "-"), r.get("verdict") or r.get("error") or r.get("skipped"),
             (r.get("reason") or "")[:160], r.get("gate_s") or "-", r.get("wall_s", "-")) for r in report["rows"]]
    body = ["Accepted kbscale candidates (recorded final diffs) through gates 1-3 of today's tree. Target: 0 rejected.",
            "", *table(["problem", "diff", "kernel", "verdict", "reason", "gate s", "wall s"], rows)]
    write_record(out_dir, STEM, report, "Re-verification of accepted candidates", body)


def main(argv: list[str] | None = None) -> int:
    return out_dir_main(argv, __doc__.splitlines()[0], "KERNELOPT_REVERIFY_DEVICE", run)


if __name__ == "__main__":
    raise SystemExit(main())
