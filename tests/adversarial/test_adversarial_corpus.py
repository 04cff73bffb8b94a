"""The adversarial corpus on the CPU backend: each wrong candidate is rejected by the gate it is
labelled with (so every earlier gate passed it), each correct variant passes gates 1-3."""

from __future__ import annotations

from collections import Counter

import pytest

from .corpus import CASES, PROBLEMS
from .dumps import compiled_corpus_graphs
from .runner import CaseResult, evaluate, markdown_table


@pytest.fixture(scope="module")
def corpus_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    graphs = compiled_corpus_graphs(tmp_path_factory)
    results = evaluate(CASES, graphs, gates=(1, 2, 3), workdir=str(tmp_path_factory.mktemp("corpus-work")))
    print("\n" + markdown_table(results))
    return {r.id: r for r in results}


def test_corpus_size_and_classes() -> None:
    wrong = [c for c in CASES if c.wrong]
    correct = [c for c in CASES if not c.wrong]
    assert len(wrong) >= 30
    assert len({c.klass for c in wrong}) >= 12
    assert len(correct) >= 10
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.problem for c in CASES} == set(PROBLEMS)
    # every gate that can reject something is exercised
    assert {c.expected_gate for c in wrong} == {1, 2, 3}


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_case(corpus_results: dict[str, CaseResult], case_id: str) -> None:
    result = corpus_results[case_id]
    assert result.error is None, result.error
    if result.expected_gate is None:
        assert result.failed_gate is None, f"false rejection: {result.reason}"
    else:
        assert result.failed_gate == result.expected_gate, (
            f"expected gate {result.expected_gate} to reject it, got {result.failed_gate}: {result.reason}")


def test_rejections_name_the_mechanism(corpus_results: dict[str, CaseResult]) -> None:
    """Spot checks that the right mechanism fired, not merely some mismatch."""
    expect = {
        "E-mask-short": "unwritten",
        "E-mask-long": "wrote outside",
        "E-keep-previous": "stale result",
        "R-split2-atomic": "nondeterministic",
        "S-no-max": "NaN/Inf",
        "R-fp16-load": "rho",
        "E-ptr-dict": "global mutable state",
        "E-try-in-kernel": "try/except",
        "E-torch-tanh": "torch",
    }
    for case_id, words in expect.items():
        assert words in corpus_results[case_id].reason, (case_id, corpus_results[case_id].reason)


def test_every_class_is_fully_rejected(corpus_results: dict[str, CaseResult]) -> None:
    missed = Counter(r.klass for r in corpus_results.values() if r.expected_gate and r.failed_gate is None)
    assert not missed, f"accepted wrong candidates by class: {dict(missed)}"


CUDA_CODEGEN = __import__("pathlib").Path(__file__).parent / "cuda_codegen"


@pytest.mark.parametrize("case_id", [case.id for case in CASES])
def test_every_edit_applies_to_the_cuda_codegen_too(case_id: str) -> None:
    """The H200 run evaluates the same corpus on max-autotune CUDA dumps (torch 2.11): every edit must
    find its text there as well as in the CPU backend's code (saved by benchmarks/gpu/gates.py)."""
    from kernelopt_core.artifacts import parse_output_code

    case = next(c for c in CASES if c.id == case_id)
    path = CUDA_CODEGEN / f"{case.problem}.output_code.txt"
    kernel = parse_output_code(str(path), path.read_text()).kernels[0]
    candidate = case.candidate(kernel.source, kernel.name)
    assert candidate != kernel.source
