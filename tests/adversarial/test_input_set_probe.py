"""The input sets and the error-structure rule on the corpus, before the gates use them.

Each issue-20 case passes the gates' old check (the graph's own inputs, atol = rtol = 1e-4) and is
exposed by the input sets it names; every correct variant whose arithmetic differs from the
original's passes every input set, and on a problem of several floating inputs every input set in each
input alone (issue 28); the one-input case escapes the all-input sets. The graphs run in one fresh process on the CPU backend
(input_set_probe.py); the candidates never run in the test process.
"""

from __future__ import annotations

import pytest

from .corpus import CASES, Case
from .dumps import compiled_corpus_graphs
from .input_set_probe import PLAIN, ProbeOutcome, probe_in_subprocess
from .redteam import REDTEAM_IDS

WRONG = [c for c in CASES if c.wrong and c.input_sets is not None and c.probe]
# Launch-config-only variants of pointwise and persistent kernels compute each element the same way.
SAME_ARITHMETIC = {"E-xblock64", "E-xblock512", "E-autotune", "E-grid-ceil", "S-xblock2"}
# The red-team's correct cases meet the input sets through the gates (the corpus test) and show their unusual path
# on their witnesses (test_redteam.py); probing them here too would double the cost of this file.
CORRECT = [c for c in CASES if not c.wrong and c.id not in SAME_ARITHMETIC and c.id not in REDTEAM_IDS]
ALL_INPUT_SETS = ("nan-inf", "zeros", "zero-blocks", "constant-rows", "low-variance-rows", "offset-rows",
                "all-negative", "all-positive", "near-max", "denormals", "tail-extreme")
# Gate 2's one-input variants (kernel.ONE_INPUT_SET_NAMES) for the problems of two or more floating inputs
# (elementwise: x, y, bias), each input set in each input alone.
FLOATING_INPUTS = {"elementwise": 3}
ONE_INPUT = ("zeros", "constant-rows", "nan-inf")
ESCAPES_ALL_INPUT = {"E-skip-zero-y-blocks": ("zeros", "zero-blocks")}  # issue 28: what the old input sets missed


def _one_input(problem: str) -> tuple[str, ...]:
    return tuple(f"{name}@{i}" for name in ONE_INPUT for i in range(FLOATING_INPUTS.get(problem, 0)))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, ProbeOutcome]]:
    graphs = compiled_corpus_graphs(tmp_path_factory)
    plan = {c.id: (PLAIN, *(c.input_sets or ()), *ESCAPES_ALL_INPUT.get(c.id, ())) for c in WRONG}
    plan.update({c.id: (PLAIN, *ALL_INPUT_SETS, *_one_input(c.problem)) for c in CORRECT})
    found = probe_in_subprocess(graphs, plan, str(tmp_path_factory.mktemp("input-set-probe")))
    return {case_id: {o.input_set: o for o in results} for case_id, results in found.items()}


def test_every_input_set_is_probed() -> None:
    from kernelopt_core.gates.input_sets import INPUT_SETS
    from kernelopt_core.gates.kernel import ONE_INPUT_SET_NAMES

    assert set(ALL_INPUT_SETS) == set(INPUT_SETS)
    assert ONE_INPUT == ONE_INPUT_SET_NAMES


@pytest.mark.parametrize("case_id", sorted(ESCAPES_ALL_INPUT))
def test_a_fast_path_keyed_on_one_input_escapes_the_all_input_sets(
        case_id: str, outcomes: dict[str, dict[str, ProbeOutcome]]) -> None:
    found = outcomes[case_id]
    for name in ESCAPES_ALL_INPUT[case_id]:
        assert found[name].ok, f"{name} already exposes {case_id}: {found[name].reason}"
    caught = [name for name in found if "@" in name and not found[name].ok]
    assert caught, f"no one-input set exposed {case_id}: {[o.reason for o in found.values()]}"


@pytest.mark.parametrize("case", WRONG, ids=[c.id for c in WRONG])
def test_each_issue_20_case_hides_from_the_old_check_and_shows_on_its_input_sets(
        case: Case, outcomes: dict[str, dict[str, ProbeOutcome]]) -> None:
    found = outcomes[case.id]
    assert "error" not in found, found["error"].reason
    assert found[PLAIN].tolerance_ok, f"visible without the input sets: {found[PLAIN].reason}"
    if not case.input_sets:  # shows only through the error structure, on the graph's own inputs
        assert not found[PLAIN].structure_ok, found[PLAIN].reason
        return
    caught = [o for name, o in found.items() if name != PLAIN and not o.ok]
    assert caught, f"no input set exposed {case.id}: {[o.reason for o in found.values()]}"


@pytest.mark.parametrize("case", CORRECT, ids=[c.id for c in CORRECT])
def test_correct_variants_pass_every_input_set(case: Case, outcomes: dict[str, dict[str, ProbeOutcome]]) -> None:
    failed = [f"{o.input_set or 'plain'}: {o.reason}" for o in outcomes[case.id].values() if not o.ok]
    assert not failed, failed
