"""One meaning per word (docs/architecture.md, "Words with one meaning"), held over the code.

* "family" is a rewrite family. Gate 2's named inputs are *input sets*: "input family" must not come
  back in kernelopt_core/, server/ or docs/, nor an identifier naming families outside the search
  (which speaks of rewrite families) and the sandbox's socket address families.
* On the gate side (gates/, userkernels/) a family, if named at all, is a rewrite family.
* A worker runs *tasks*; a *job* is what the editor's job runner runs: no ``*_job`` worker entry point
  and no module named for jobs outside the job runner and the language server's job features.
* The search's budget is the only ``Budget`` class.

Pure text and :mod:`tokenize`; nothing is imported.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_ROOTS = (ROOT / "kernelopt_core", ROOT / "server")
# The search speaks of rewrite families throughout (its rewrites, planner, memory, beam, executor).
FAMILY_IDENTIFIERS_ALLOWED = ("kernelopt_core/search/",)
# Socket address families (AF_INET, AF_UNIX): the multiprocessing and seccomp terms.
ADDRESS_FAMILY_FILES = {"kernelopt_core/sandbox/policy.py", "kernelopt_core/sandbox/process.py",
                        "kernelopt_core/sandbox/zygote.py"}
GATE_SIDE = ("kernelopt_core/gates/", "kernelopt_core/userkernels/")
# The editor's jobs: the runner, the server's job features and their modules.
JOB_MODULES_ALLOWED = {"kernelopt_core/job_runner.py", "server/kernelopt_lsp/features/jobs.py",
                       "server/kernelopt_lsp/job_requests.py", "server/kernelopt_lsp/job_results.py",
                       "server/kernelopt_lsp/job_target.py"}

INPUT_FAMILY = re.compile(r"input[\s_-]+famil", re.IGNORECASE)
FAMILY_WORD = re.compile(r"(\w+\s+)?famil(y|ies)\b", re.IGNORECASE)


def code_files() -> list[Path]:
    return sorted(p for root in CODE_ROOTS for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def names_in(path: Path) -> list[tuple[int, str]]:
    """Every identifier of the file (NAME tokens), with its line."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.NAME]


def test_the_rules_see_what_they_are_for() -> None:
    """The patterns catch what they must and leave alone what they must, on made-up lines."""
    assert INPUT_FAMILY.search("gate 2 runs the input families") and INPUT_FAMILY.search("INPUT_FAMILIES")
    assert INPUT_FAMILY.search("an input-family check") and not INPUT_FAMILY.search("the input sets")
    assert [m.group(1) for m in FAMILY_WORD.finditer("a rewrite family; the families")] == ["rewrite ", "the "]


def test_no_input_family_in_the_code_or_the_docs() -> None:
    found = []
    for path in [*code_files(), *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if INPUT_FAMILY.search(line):
                found.append(f"{relative(path)}:{number}: {line.strip()}")
    assert not found, "gate 2's inputs are input sets, not input families:\n" + "\n".join(found)


def test_identifiers_name_families_only_where_families_are_rewrite_families() -> None:
    found = []
    for path in code_files():
        name = relative(path)
        if name.startswith(FAMILY_IDENTIFIERS_ALLOWED) or name in ADDRESS_FAMILY_FILES:
            continue
        found += [f"{name}:{line}: {ident}" for line, ident in names_in(path) if "famil" in ident.lower()]
    assert not found, ("an identifier names families outside the search; gate 2's are input sets "
                       "(input_sets, INPUT_SETS, InputSet):\n" + "\n".join(found))


def test_the_gate_side_names_a_family_only_as_a_rewrite_family() -> None:
    found = []
    for path in code_files():
        name = relative(path)
        if not name.startswith(GATE_SIDE):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in FAMILY_WORD.finditer(line):
                if (match.group(1) or "").strip().lower() != "rewrite":
                    found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "on the gate side a family is a rewrite family (else: an input set):\n" + "\n".join(found)


def test_a_worker_runs_tasks_and_only_the_editor_runs_jobs() -> None:
    modules = [relative(p) for p in code_files() if "job" in p.name and relative(p) not in JOB_MODULES_ALLOWED]
    assert not modules, f"modules named for jobs outside the editor's job runner: {modules}"
    entry_points = []
    for path in code_files():
        if relative(path) in JOB_MODULES_ALLOWED:
            continue
        entry_points += [f"{relative(path)}: {m.group(1)}"
                         for m in re.finditer(r"^def (\w+_job)\(", path.read_text(), re.MULTILINE)]
    assert not entry_points, f"worker entry points are *_task, not *_job: {entry_points}"
    classes = [f"{relative(p)}: {m.group(1)}" for p in code_files() if relative(p) not in JOB_MODULES_ALLOWED
               for m in re.finditer(r"^class (\w*Job\w*)\b", p.read_text(), re.MULTILINE)]
    assert not classes, f"what a worker returns is a task's (TaskOutcome), not a job's: {classes}"


def test_the_search_budget_is_the_only_budget_class() -> None:
    classes = [f"{relative(p)}: {m.group(0)}" for p in code_files()
               for m in re.finditer(r"^class \w*Budget\w*\b", p.read_text(), re.MULTILINE)]
    assert sorted(classes) == ["kernelopt_core/search/deadline.py: class Budget",
                               "kernelopt_core/search/deadline.py: class BudgetStop"], classes
