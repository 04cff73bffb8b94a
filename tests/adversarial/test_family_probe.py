"""The input families and the error-structure rule on the corpus, before the gates use them.

Each issue-20 case passes the gates' old check (the graph's own inputs, atol = rtol = 1e-4) and is
exposed by the families it names; every correct variant whose arithmetic differs from the
original's passes every family. Runs the graphs in this process on the CPU backend (see
family_probe.py).
"""

from __future__ import annotations

import pytest

from .corpus import CASES, Case
from .dumps import compiled_corpus_graphs
from .family_probe import PLAIN, probe

torch = pytest.importorskip("torch")

WRONG = [c for c in CASES if c.wrong and c.families is not None and c.probe]
# Launch-config-only variants of pointwise and persistent kernels compute each element the same way.
SAME_ARITHMETIC = {"E-xblock64", "E-xblock512", "E-autotune", "E-grid-ceil", "S-xblock2"}
CORRECT = [c for c in CASES if not c.wrong and c.id not in SAME_ARITHMETIC]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is faster on a shared machine
    yield compiled_corpus_graphs(tmp_path_factory)
    torch.set_num_threads(threads)


def _families_for(case: Case) -> tuple[str, ...]:
    from kernelopt_core.gates.input_families import families_for

    return tuple(f.name for f in families_for(torch.float32, reduction=True))


@pytest.mark.parametrize("case", WRONG, ids=[c.id for c in WRONG])
def test_each_issue_20_case_hides_from_the_old_check_and_shows_on_its_families(
        case: Case, graphs: dict[str, str], tmp_path) -> None:
    outcomes = {o.family: o for o in probe(case, graphs[case.problem], str(tmp_path), (PLAIN, *case.families))}
    assert outcomes[PLAIN].tolerance_ok, f"visible without the families: {outcomes[PLAIN].reason}"
    if not case.families:  # shows only through the error structure, on the graph's own inputs
        assert not outcomes[PLAIN].structure_ok, outcomes[PLAIN].reason
        return
    caught = [o for name, o in outcomes.items() if name != PLAIN and not o.ok]
    assert caught, f"no family exposed {case.id}: {[o.reason for o in outcomes.values()]}"


@pytest.mark.parametrize("case", CORRECT, ids=[c.id for c in CORRECT])
def test_correct_variants_pass_every_family(case: Case, graphs: dict[str, str], tmp_path) -> None:
    outcomes = probe(case, graphs[case.problem], str(tmp_path), (PLAIN, *_families_for(case)))
    failed = [f"{o.family or 'plain'}: {o.reason}" for o in outcomes if not o.ok]
    assert not failed, failed
