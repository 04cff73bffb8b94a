"""Gate 2's full battery (seeds, re-runs, stale outputs, the input sets in every input and, issue 28, in
each floating input alone) rejects none of the offline families' candidates of the tiny suite and of the
corpus' pointwise kernel of three floating inputs (where the one-input sets apply: every tiny-suite
kernel has one floating input). Slow (~15 min on 2 cores): every candidate runs some 20-35 times on the
interpreter."""

from __future__ import annotations

import pytest
from adversarial.dumps import compiled_corpus_graphs

# each test runs gate 2's full battery on every candidate of a suite: about 11 min on 2 cores
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _candidates(path: str) -> list[tuple[str, str, str, str]]:
    """(kernel, family, title, source) of every distinct offline-family candidate of the graph's kernels."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    out = []
    for kernel in parse_output_code(path).kernels:
        module = parse_kernel_module(kernel.source, kernel.name)
        seen: set[str] = set()
        for device in ("cpu", "cuda"):  # what a GPU search would propose runs on the interpreter as well
            for facts in ({}, {"causes": ["low-parallelism"]}, {"causes": ["re-reads"]}):
                ctx = RewriteContext(module=module, original=module, device=device)
                ctx.evidence.update(facts, sm_count=132)
                for name, family in FAMILIES.items():
                    for rewrite in family.variants(ctx):
                        if rewrite.source not in seen:
                            seen.add(rewrite.source)
                            out.append((kernel.name, name, rewrite.title, rewrite.source))
    return out


def _gate_2(path: str, tmp: str) -> tuple[list[str], int, int]:
    """(false rejections, candidates run, one-input runs among their checks)."""
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = parse_output_code(path)
    rejected, runs, one_input = [], 0, 0
    for kernel, family, title, source in _candidates(path):
        result = run_cascade(graph, {kernel: source}, CascadeConfig(device="cpu", run_gates=(2,), workdir=tmp))
        runs += 1
        if not result.accepted:
            rejected.append(f"{kernel} {family} {title}: {result.reason}")
        checks = [c for k in (result.gates[0].numbers.get("kernels") or {}).values() for c in k.get("checks", [])]
        one_input += sum(1 for c in checks if " alone, the others randn" in c["label"])
    return rejected, runs, one_input


def test_no_offline_candidate_of_the_tiny_suite_is_rejected_by_the_full_gate_2(
        tiny_graphs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> None:
    rejected, runs = [], 0
    for problem, path in sorted(tiny_graphs.items()):
        found, count, _ = _gate_2(path, str(tmp_path_factory.mktemp(problem)))
        rejected += found
        runs += count
    assert not rejected, rejected
    assert runs >= 100  # 115 on 2026-12-02


def test_the_one_input_sets_reject_no_offline_candidate_of_a_three_input_kernel(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    path = compiled_corpus_graphs(tmp_path_factory, problems=("elementwise",))["elementwise"]
    rejected, runs, one_input = _gate_2(path, str(tmp_path_factory.mktemp("elementwise")))
    assert not rejected, rejected
    assert runs >= 20, runs
    assert one_input == 9 * runs  # three families in each of x, y and bias
