"""The adversarial corpus on the CPU backend, through the search's two stages (the screen: gate 1 and
gate 2 on the captured launch and one seed; then the finalists' gates: gate 2's full battery and gate 3):
each wrong candidate is rejected by the gate it is labelled with (so every earlier gate passed it), or by
containment, and what the screen passes the full battery rejects before acceptance; each correct
variant passes both stages; no candidate manages to write a file. Cases that need a capability the
gates do not have yet (kernelopt_core.gates.CAPABILITIES) are skipped with the reason."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.gates import CAPABILITIES

from .corpus import CASES, CONTAINMENT, PROBLEMS, REFUSED, sentinel_path
from .dumps import compiled_corpus_graphs
from .redteam import NEEDS as REDTEAM_NEEDS
from .runner import CaseResult, evaluate, markdown_table

CASES_BY_ID = {c.id: c for c in CASES}
# `make test` runs the first wrong candidate of every class, every one whose rejection reason is
# checked below (MECHANISMS) and every containment case, and of the correct variants (5-10 s each
# through gates 1-3) one per problem and the launcher; `make test-slow` runs the rest.
CORE_CORRECT = {"E-xblock64", "R-rblock512", "S-exp2", "N-xblock8", "C-xblock128", "L-split"}
MECHANISMS = {
    "E-mask-short": "unwritten",
    "E-mask-long": "wrote outside",
    "E-keep-previous": "a buffer the original only writes",
    "R-split2-atomic": "nondeterministic",
    "S-no-max": "NaN/Inf",
    "R-fp16-load": "rounding floor",
    "E-ptr-dict": "global mutable state",
    "E-try-in-kernel": "try/except",
    "E-torch-tanh": "torch",
    "E-os-via-heuristics": "triton_heuristics.os",
    "S-heuristics-alias": "triton_heuristics.os",
    "R-driver-via-helpers": "triton_helpers.triton",
    "E-patch-checker": "kernelopt_core.gates.model",
    "S-grid-code": "Inductor executes these strings",
    "R-undecorated-code": "undecorated",
    "L-torch-op": ".copy_()",
    "L-write-outside": "wrote outside",
    "L-endless": "the original launch took",
    "E-skip-zero-y-blocks": "in in_ptr1 alone, the others randn",
    "E-literal-window": "values at and one ulp beside the candidate's constants",
    "S-reload-race": "with no tl.debug_barrier() between",
}
_FIRST_OF_CLASS = {next(c.id for c in CASES if c.klass == klass and c.wrong) for klass in {c.klass for c in CASES if c.wrong}}


def _in_make_test(case: Any) -> bool:
    if not case.wrong:
        return case.id in CORE_CORRECT
    return case.id in _FIRST_OF_CLASS or case.id in MECHANISMS or case.expected_gate == CONTAINMENT


def _case_param(case: Any) -> Any:
    # the slow cases' module fixture runs them all at once: more than pytest-timeout's 600 s on 2 cores
    return case.id if _in_make_test(case) else pytest.param(case.id, marks=[pytest.mark.slow,
                                                                          pytest.mark.timeout(2400)])


def _selected_cases(request: pytest.FixtureRequest) -> list[Any]:
    """The cases whose test_case items this session runs (all of make test's when none is selected)."""
    chosen = {item.callspec.params["case_id"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_case" and item.module is request.module}
    return [c for c in CASES if c.id in chosen] if chosen else [c for c in CASES if _in_make_test(c)]


@pytest.fixture(scope="module")
def corpus_results(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, CaseResult]:
    cases = _selected_cases(request)
    for case in cases:  # a file left by an earlier run must not hide a new write
        _remove(sentinel_path(case.id))
    graphs = compiled_corpus_graphs(tmp_path_factory)
    results = evaluate(cases, graphs, gates=(1, 2, 3), workdir=str(tmp_path_factory.mktemp("corpus-work")),
                       two_stage=True)
    print("\n" + markdown_table(results))
    return {r.id: r for r in results}


def _remove(path: str) -> None:
    if os.path.isdir(path):
        os.rmdir(path)
    elif os.path.exists(path):
        os.remove(path)


def test_corpus_size_and_classes() -> None:
    wrong = [c for c in CASES if c.wrong]
    correct = [c for c in CASES if not c.wrong]
    assert len(wrong) >= 60
    assert len({c.klass for c in wrong}) >= 30
    assert len(correct) >= 18
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.problem for c in CASES} == set(PROBLEMS)
    # every gate that can reject something is exercised, and containment (gate 3 on its own below: since
    # gate 2 judges the error's structure, it catches the corpus' gate-3 cases first)
    # REFUSED: the red-team cases (redteam.py) that must not be accepted, rejected or "not verified"
    assert {c.expected_gate for c in wrong} == {1, 2, CONTAINMENT, REFUSED}
    known = {"gate1-resolution", "launcher-dialect", "launcher-candidates", "input-sets", "error-structure",
             "guard-range", "scratch-guards", "containment", "one-input-sets",
             "race-rule", *REDTEAM_NEEDS}
    assert {need for c in CASES for need in c.needs} <= known
    # issue 20's classes are all here
    for klass in ("norm eps changed or dropped", "mean divided by N-1", "one-pass variance",
                  "softmax max over padded lanes", "reduction that drops NaN", "kernel that skips blocks of zeros",
                  "value-range backdoor", "clamp bound moved by 8e-5", "softmax flushing p < 1e-5 to 0",
                  "store far past the end", "import through an allowlisted module", "monkey-patching the checker",
                  "writing a file", "code in decorator arguments", "undecorated module-level code"):
        assert any(c.klass == klass for c in wrong), klass


@pytest.mark.parametrize("case_id", [_case_param(c) for c in CASES])
def test_case(corpus_results: dict[str, CaseResult], case_id: str) -> None:
    result = corpus_results[case_id]
    if result.skipped:
        pytest.skip(f"{case_id} {result.skipped}, which kernelopt_core.gates.CAPABILITIES does not list yet")
    assert result.error is None, result.error
    if result.expected_gate is None:
        assert result.failed_gate is None, f"false rejection: {result.reason}"
        if CASES_BY_ID[case_id].expect_not_verified:
            assert result.not_verified, f"its added decision is never reached, yet it was accepted: {result.reason}"
        else:
            assert not result.not_verified, f"not verified (a lost win): {result.reason}"
    elif result.expected_gate == REFUSED:
        assert result.failed_gate is not None or result.not_verified, f"false accept: {result.reason}"
    elif result.expected_gate == CONTAINMENT:
        assert result.failed_gate is not None, f"not contained: {result.reason}"
    else:
        assert result.failed_gate == result.expected_gate, (
            f"expected gate {result.expected_gate} to reject it, got {result.failed_gate}: {result.reason}")


def test_no_candidate_wrote_a_file(corpus_results: dict[str, CaseResult]) -> None:
    written = [case_id for case_id in corpus_results if os.path.exists(sentinel_path(case_id))]
    assert not written, f"candidates wrote outside their scratch folder: {written}"


def test_skips_follow_the_capabilities(corpus_results: dict[str, CaseResult]) -> None:
    for case in (CASES_BY_ID[case_id] for case_id in corpus_results):
        skipped = corpus_results[case.id].skipped is not None
        assert skipped == bool(case.missing(CAPABILITIES)), case.id


def test_rejections_name_the_mechanism(corpus_results: dict[str, CaseResult]) -> None:
    """Spot checks that the right mechanism fired, not merely some mismatch."""
    expect = MECHANISMS
    for case_id, words in expect.items():
        if case_id not in corpus_results:  # only with -m slow, which runs the other cases
            continue
        result = corpus_results[case_id]
        if result.skipped:
            continue
        assert words in result.reason, (case_id, result.reason)


def test_every_class_is_fully_rejected(corpus_results: dict[str, CaseResult]) -> None:
    missed = Counter(r.klass for r in corpus_results.values()
                     if r.expected_gate and not r.skipped and r.failed_gate is None and not r.not_verified)
    assert not missed, f"accepted wrong candidates by class: {dict(missed)}"


# Classes whose first wrong candidate gets past the screen: only a check of the full battery sees them.
# (The keep-previous cases read a buffer the original only writes: gate 1 rejects them since 2026-12-06; the
# stale-outputs check itself is tested in test_gate2_batteries.py and test_gates_kernel.py.)
NEEDS_THE_FULL_BATTERY = {"R-split2-atomic": "re-runs", "N-eps-dropped": "input sets"}


def test_what_the_screen_passes_the_full_battery_rejects_before_acceptance(
        corpus_results: dict[str, CaseResult]) -> None:
    """Issue 25: the search ranks candidates on gate 2's screen, and every finalist runs gate 2's full battery
    before gate 3. For every corpus class, each wrong candidate the screen passed is rejected by the
    finalists' gates (by the full battery wherever gate 2 is the labelled gate): none is accepted."""
    by_class: dict[str, list[CaseResult]] = {}
    for result in corpus_results.values():
        if result.expected_gate is not None and result.skipped is None:
            by_class.setdefault(result.klass, []).append(result)
    assert by_class
    for klass, results in by_class.items():
        for result in results:
            if result.not_verified:  # neither stage rejected it: its added path was never reached, so not accepted
                continue
            assert result.failed_gate is not None and result.stage is not None, (
                f"{klass}: {result.id} passed the screen and the final gates ({result.reason})")
            if result.stage != "screen" and result.expected_gate == 2:
                assert result.stage == "full battery" and "full battery" in result.reason, (klass, result.reason)
    for case_id, check in NEEDS_THE_FULL_BATTERY.items():
        if case_id in corpus_results and not corpus_results[case_id].skipped:
            result = corpus_results[case_id]
            assert result.stage == "full battery", (f"{case_id} should pass the screen and fail the full "
                                                     f"battery's {check}: {result.stage}, {result.reason}")


DOWNCASTS = ("R-fp16-load", "E-fp16-sigmoid")


def test_gate_3_alone_rejects_the_downcasts(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Gate 3 is the backstop behind gate 2: with gate 2 skipped, the model-level check against the
    float64 reference still rejects the silent fp16 downcasts (by the error ratio rho)."""
    cases = [CASES_BY_ID[i] for i in DOWNCASTS]
    graphs = compiled_corpus_graphs(tmp_path_factory, problems=tuple(sorted({c.problem for c in cases})))
    results = evaluate(cases, graphs, gates=(1, 3), workdir=str(tmp_path_factory.mktemp("gate3-alone")))
    for result in results:
        assert result.error is None, result.error
        assert result.failed_gate == 3, (result.id, result.reason)
        assert "rho" in result.reason, (result.id, result.reason)


def test_the_race_hides_from_the_dynamic_gates_on_the_cpu_which_say_so(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 28: an intra-program race runs correctly on the interpreter (a program's block is one step), so
    with gate 1's rule skipped gates 2-3 pass it on the CPU, and gate 3's verdict says races were not checked.
    On a GPU the same run carries memcheck and racecheck (benchmarks/gpu/race_check.py records both)."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = parse_output_code(compiled_corpus_graphs(tmp_path_factory, problems=("softmax",))["softmax"])
    kernel = graph.kernels[0]
    candidate = CASES_BY_ID["S-reload-race"].candidate(kernel.source, kernel.name)
    config = CascadeConfig(device="cpu", run_gates=(2, 3), determinism_reruns=1,
                           workdir=str(tmp_path_factory.mktemp("race-cpu")))
    result = run_cascade(graph, {kernel.name: candidate}, config)
    assert result.accepted, result.reason
    third = result.verdict(3)
    assert third is not None and "races and stray accesses not checked" in third.reason
    assert third.numbers["sanitizer"] == [] and any("not checked" in note for note in result.notes)


CUDA_CODEGEN = Path(__file__).parent / "cuda_codegen"


@pytest.mark.parametrize("case_id", [case.id for case in CASES])
def test_every_edit_applies_to_the_cuda_codegen_too(case_id: str) -> None:
    """The H200 run evaluates the same corpus on max-autotune CUDA dumps (torch 2.11): every edit must
    find its text there as well as in the CPU backend's code (saved by benchmarks/gpu/gates.py)."""
    from kernelopt_core.artifacts import parse_output_code

    case = CASES_BY_ID[case_id]
    path = CUDA_CODEGEN / f"{case.problem}.output_code.txt"
    if not path.is_file():
        pytest.skip(f"no CUDA codegen of {case.problem} saved yet (benchmarks/gpu/gates.py saves it on the next "
                    "H200 run)")
    kernel = parse_output_code(str(path), path.read_text()).kernels[0]
    candidate = case.candidate(kernel.source, kernel.name)
    assert candidate != kernel.source
