"""The red-team cases (redteam.py): enough of each kind, and each one's witness.

Every wrong case must be wrong by gate 3's own rule (atol = rtol = 1e-4, then the float64 ratio) on its witness
input, so a case that is not actually wrong fails here instead of inflating the count of attacks the gates stop.
Every correct case must match the original on an input that takes its unusual path. The witnesses run in one
fresh process on the CPU backend (witness_probe.py). `make test` runs the first wrong case of each kind and two
correct ones (~20 s); `make test-slow` runs the rest. Whether the gates stop each case is the corpus test's
(test_adversarial_corpus.py) and the report's (redteam_report.py) to say.
"""

from __future__ import annotations

from typing import Any

import pytest

from .dumps import compiled_corpus_graphs
from .edits import REFUSED, Case
from .redteam import KIND, KIND_CORRECT, NEEDS, REDTEAM_CASES
from .witness_probe import WitnessOutcome, run_in_subprocess

BY_ID = {c.id: c for c in REDTEAM_CASES}
WITH_WITNESS = [c for c in REDTEAM_CASES if c.witness is not None]
_FIRST_OF_KIND = {next(c.id for c in REDTEAM_CASES if KIND[c.id] == kind and c.wrong)
                  for kind in set(KIND.values()) if kind != KIND_CORRECT}
IN_MAKE_TEST = _FIRST_OF_KIND | {"R-kahan-guarded", "P-alias-safe-skip"}


def _param(case: Case) -> Any:
    return case.id if case.id in IN_MAKE_TEST else pytest.param(case.id, marks=pytest.mark.slow)


def test_at_least_five_wrong_cases_of_each_kind_and_six_correct() -> None:
    kinds = {kind: [c for c in REDTEAM_CASES if KIND[c.id] == kind] for kind in set(KIND.values())}
    assert len(kinds) == 6
    for kind, cases in kinds.items():
        if kind == KIND_CORRECT:
            assert len(cases) >= 6 and not any(c.wrong for c in cases)
        else:
            assert len(cases) >= 5 and all(c.wrong for c in cases), kind
    ids = [c.id for c in REDTEAM_CASES]
    assert len(ids) == len(set(ids))


def test_every_wrong_case_has_a_witness_and_waits_only_for_named_capabilities() -> None:
    for case in REDTEAM_CASES:
        assert set(case.needs) <= set(NEEDS), case.id
        if case.wrong:
            assert case.witness is not None, case.id
            assert case.expected_gate in (1, REFUSED), case.id
        else:
            # an input that reaches the unusual path, unless no input does (then "not verified" is right)
            assert (case.witness is not None) != case.expect_not_verified, case.id


def test_every_edit_applies_and_parses(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each case's edit finds its text in its problem's kernel (CPU backend) and gives a module that parses."""
    import ast

    from kernelopt_core.artifacts import parse_output_code

    graphs = compiled_corpus_graphs(tmp_path_factory)
    for case in REDTEAM_CASES:
        kernel = parse_output_code(graphs[case.problem]).kernels[0]
        candidate = case.candidate(kernel.source, kernel.name)
        assert candidate != kernel.source, case.id
        ast.parse(candidate)


def test_the_interval_proof_drops_no_decision_of_any_case(tmp_path_factory: pytest.TempPathFactory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A min/max that interval bounds order is no decision (gates/value_ranges.py). On every corpus and red-team
    case the decisions gate 2 wants evidence for are the same with and without that proof: no attack written so
    far leans on it (176 cases on 2026-12-07), and one that does must keep its decision (test_value_ranges.py)."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import decisions

    from .corpus import CASES

    graphs = compiled_corpus_graphs(tmp_path_factory)
    kernels = {problem: parse_output_code(path).kernels[0] for problem, path in graphs.items()}

    def added(original: str, candidate: str) -> list[str]:
        decisions.source_decisions.cache_clear()
        return [d.key for d in decisions.added_decisions(original, candidate).added]

    checked = 0
    for case in CASES:
        kernel = kernels.get(case.problem)
        if kernel is None:
            continue
        candidate = case.candidate(kernel.source, kernel.name)
        with_proof = added(kernel.source, candidate)
        with monkeypatch.context() as patch:
            patch.setattr(decisions, "_never_decides", lambda fn, node: False)
            without = added(kernel.source, candidate)
        assert with_proof == without, case.id
        checked += 1
    assert checked >= len(REDTEAM_CASES)
    decisions.source_decisions.cache_clear()


@pytest.fixture(scope="module")
def witnesses(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, WitnessOutcome]:
    chosen = {item.callspec.params["case_id"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_witness" and item.module is request.module}
    ids = [c.id for c in WITH_WITNESS if c.id in chosen] if chosen else sorted(IN_MAKE_TEST)
    graphs = compiled_corpus_graphs(tmp_path_factory)
    return run_in_subprocess(graphs, ids, str(tmp_path_factory.mktemp("witnesses")))


@pytest.mark.parametrize("case_id", [_param(c) for c in WITH_WITNESS])
def test_witness(witnesses: dict[str, WitnessOutcome], case_id: str) -> None:
    case = BY_ID[case_id]
    outcome = witnesses[case_id]
    assert outcome.error is None, outcome.error
    if case.wrong:
        assert not outcome.matches, (f"{case_id} matches the original on its witness ({case.witness.note}): not "
                                     f"shown wrong, max |diff| {outcome.max_abs_diff:.3g}")
    else:
        assert outcome.matches, f"{case_id} differs on an input that takes its path: {outcome.reason}"
