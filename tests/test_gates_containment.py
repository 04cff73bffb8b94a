"""The gates with a hostile candidate and a failing check (issues 17 and 20), on CPU-backend graphs.

A candidate that patches the checker's comparison functions in its own process changes nothing:
the comparison runs elsewhere. A file it writes is refused and it is quarantined. When the check
itself runs out of memory the verdict is "could not verify", retried once with a smaller check,
never a rejection, and the campaign files it in its own category.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from adversarial.dumps import compiled_corpus_graphs

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.bench.outcome import classify_decision
from kernelopt_core.gates import CascadeConfig, run_cascade
from kernelopt_core.sandbox.policy import landlock_abi


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_corpus_graphs(tmp_path_factory)


PATCH_THE_CHECKER = '''
import kernelopt_core.gates.kernel as _kernel
import kernelopt_core.gates.model as _model
from kernelopt_core.gates.kernel import RunCheck as _RunCheck
_kernel.compare_runs = lambda label, *a, **k: _RunCheck(label)
_model.check_seed = lambda seed, *a, **k: None
'''


def _wrong(source: str) -> str:
    """Adds 0.5 to what the elementwise kernel stores."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "tl.store(" in line:
            head, _, rest = line.partition("tl.store(")
            pointer, _, tail = rest.partition(", ")
            value, _, mask = tail.partition(", ")
            lines[i] = f"{head}tl.store({pointer}, {value} + 0.5, {mask}"
            return "".join(lines)
    raise AssertionError("no store")


def test_a_candidate_that_patches_the_checker_is_still_rejected(graphs: dict[str, str], tmp_path: Path) -> None:
    graph = parse_output_code(graphs["elementwise"])
    kernel = graph.kernels[0]
    hostile = PATCH_THE_CHECKER + _wrong(kernel.source)
    result = run_cascade(graph, {kernel.name: hostile}, CascadeConfig(run_gates=(2, 3), workdir=str(tmp_path)))
    assert result.failed_gate == 2 and not result.could_not_verify, result.reason
    assert "differ beyond" in result.reason
    assert result.containment is not None and result.containment["pid"] > 0


@pytest.mark.skipif(landlock_abi() == 0, reason="this kernel has no Landlock")
def test_a_candidate_that_writes_a_file_is_refused_and_quarantined(graphs: dict[str, str], tmp_path: Path) -> None:
    graph = parse_output_code(graphs["elementwise"])
    kernel = graph.kernels[0]
    target = Path(tempfile.gettempdir()) / f"kernelopt-planted-{uuid.uuid4().hex}"
    planting = f"open({str(target)!r}, 'w').write('x')\n" + kernel.source
    result = run_cascade(graph, {kernel.name: planting}, CascadeConfig(run_gates=(2,), workdir=str(tmp_path)))
    assert result.failed_gate == 2 and result.quarantined, result.reason
    assert "Permission denied" in result.reason
    assert not target.exists()


def test_out_of_memory_in_the_check_is_could_not_verify_and_retried_smaller(
        graphs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelopt_core.gates.tasks import graph as tasks

    graph = parse_output_code(graphs["elementwise"])
    kernel = graph.kernels[0]
    seen: list[bool] = []

    def starved(request: Any) -> Any:
        seen.append(request.common.low_memory)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB (fake, from the test)")

    monkeypatch.setattr(tasks, "_kernel_gate", starved)
    result = run_cascade(graph, {kernel.name: kernel.source},
                         CascadeConfig(run_gates=(2,), workdir=str(tmp_path)), worker="in-process")
    assert seen == [False, True]  # the second try is the smaller check
    assert result.could_not_verify and not result.accepted and result.decision == "could-not-verify"
    verdict = result.gates[-1]
    assert verdict.could_not_verify and verdict.status == "could not verify"
    assert "ran out of memory" in result.reason and "rejected" not in result.reason
    outcome, category = classify_decision("fallback", result.reason, result.to_json(), "optimizable")
    assert (outcome, category) == ("fallback", "could-not-verify")


_SMALLER_CHECK_DECIDES = """
import json, sys
import torch
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates import CascadeConfig, run_cascade
from kernelopt_core.gates.tasks import graph as tasks

graph = parse_output_code(sys.argv[1])
kernel = graph.kernels[0]
real = tasks._kernel_gate

def first_too_big(request):
    if not request.common.low_memory:
        raise torch.OutOfMemoryError("out of memory (fake)")
    return real(request)

tasks._kernel_gate = first_too_big
result = run_cascade(graph, {kernel.name: kernel.source}, CascadeConfig(run_gates=(2,), workdir=sys.argv[2]),
                     worker="in-process")
print(json.dumps({"accepted": result.accepted, "reason": result.reason,
                  "retried": result.gates[-1].numbers.get("retried_low_memory_after", "")}))
"""


def test_a_gate_that_succeeds_on_the_smaller_check_decides(graphs: dict[str, str], tmp_path: Path) -> None:
    # In a fresh process: the in-process worker must not inherit another test's Triton state.
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _SMALLER_CHECK_DECIDES, graphs["elementwise"], str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=root,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "server")])})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["accepted"], result["reason"]
    assert "out of memory" in result["retried"]
