"""Gate 1's data rule: a load of what the same program stored without a barrier (static_reloads.py); and a
value window, once a gate-1 rule, now a pair of added decisions gate 2 must see both ways (decisions.py). Pure Python; the false-rejection sweep over the offline families' candidates on the
tiny suite compiles its three problems once."""

from __future__ import annotations

import ast

import pytest
from conftest import ROOT

from kernelopt_core.gates.decisions import Decision, added_decisions
from kernelopt_core.gates.static import check_source
from kernelopt_core.gates.static_dataflow import module_flow, source_flow
from kernelopt_core.gates.static_reloads import check_reloads

HEAD = "import triton\nimport triton.language as tl\n\n\n"
NEW_RULES = ("literal-window", "unsynchronised-reload")  # the first no longer exists: never reported


def kernel(body: str, params: str = "x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr", extra: str = "") -> str:
    lines = "\n".join(f"    {line}" for line in body.strip("\n").splitlines())
    return f"{HEAD}{extra}@triton.jit\ndef k({params}):\n    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n" \
           f"    mask = offs < n\n{lines}\n"


LOADS = "x = tl.load(x_ptr + offs, mask=mask, other=0.0)\ny = tl.load(y_ptr + offs, mask=mask, other=0.0)\n"
PLAIN = kernel(LOADS + "tl.store(out_ptr + offs, x * y, mask=mask)")


def window_decisions(candidate: str, original: str = PLAIN) -> list[Decision]:
    return added_decisions(original, candidate).required


# --- value windows: decisions gate 2 must see both ways, not a gate-1 rule ---------------------------------


def test_a_value_window_is_two_added_decisions_with_their_constants_and_no_gate_1_finding() -> None:
    backdoor = kernel(LOADS + "z = tl.where((x > 0.3) & (x < 0.30001), x, x * y)\ntl.store(out_ptr + offs, z, mask=mask)")
    found = window_decisions(backdoor)
    # its two comparisons, and the window as a whole (a conjunction of comparisons is a decision of its own)
    assert [(d.kind, d.line) for d in found] == [("select", 11), ("comparison", 11), ("comparison", 11)]
    assert {0.3, 0.30001} <= set(added_decisions(PLAIN, backdoor).constants)
    assert not [f for f in check_source(PLAIN, "k", backdoor).findings if f.rule in NEW_RULES]


@pytest.mark.parametrize("threshold", ["50.0", "tl.full([1], 50.0, tl.float32)", "25.0 * 2.0", "half_hundred"])
def test_the_constant_is_followed_through_names_full_and_arithmetic(threshold: str) -> None:
    body = LOADS + f"half_hundred = 50.0\nz = tl.where(x + y > {threshold}, x, y)\ntl.store(out_ptr + offs, z)"
    source = kernel(body)
    assert len(window_decisions(source)) == 1, source
    assert 50.0 in added_decisions(PLAIN, source).constants


def test_what_the_original_compares_needs_no_new_evidence() -> None:
    same = kernel(LOADS + "tl.store(out_ptr + offs, tl.where(x > 0.5, x, y), mask=mask)")
    assert window_decisions(same, original=same) == []
    other_kind = same.replace("x > 0.5", "x == 0.5")
    assert len(window_decisions(other_kind, original=same)) == 1  # the same literal, compared another way


# --- unsynchronised reloads -----------------------------------------------------------------------------


def reloads(candidate: str, original: str = PLAIN) -> list[tuple[str, int]]:
    return check_reloads(original, module_flow(ast.parse(candidate)))


RACE = kernel(LOADS + "tl.store(out_ptr + offs, x * y, mask=mask)\n"
                      "z = tl.load(out_ptr + (offs + 1) % n, mask=mask)\ntl.store(out_ptr + offs, x * y + z, mask=mask)")


def test_a_load_of_what_the_program_stored_without_a_barrier_is_rejected() -> None:
    [(message, line)] = reloads(RACE)
    assert line == 12 and "after line 11 stored to `out_ptr + offs`" in message
    assert "no tl.debug_barrier() between" in message and "intra-program race" in message
    fenced = RACE.replace("    z = tl.load", "    tl.debug_barrier()\n    z = tl.load")
    assert reloads(fenced) == []
    assert reloads(RACE, original=RACE) == []  # the original reloads it the same way


def test_in_place_updates_own_elements_and_other_buffers_are_not_races() -> None:
    in_place = kernel("a = tl.load(out_ptr + offs, mask=mask)\ntl.store(out_ptr + offs, a * 2.0, mask=mask)\n"
                      "b = tl.load(out_ptr + offs, mask=mask)\ntl.store(y_ptr + offs, b, mask=mask)")
    assert reloads(in_place) == []  # the load before the store; the reload at the same address
    strided = kernel("p = x_ptr + tl.program_id(0) * n + offs\nq = y_ptr + tl.program_id(0) * n + offs\n"
                     "tl.store(q, tl.load(p, mask=mask), mask=mask)\nr = tl.load(p + 1, mask=mask)\n"
                     "tl.store(out_ptr + offs, r, mask=mask)")
    assert reloads(strided) == []  # a shared stride does not make y's store a store to x


def test_pointers_are_followed_through_names_and_block_pointers() -> None:
    named = kernel(LOADS + "dst = out_ptr + offs\ntl.store(dst, x, mask=mask)\nback = dst + 1\n"
                           "z = tl.load(back, mask=mask)\ntl.store(dst, z, mask=mask)")
    assert len(reloads(named)) == 1
    block = kernel("b = tl.make_block_ptr(base=out_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), "
                   "order=(0,))\ntl.store(b, tl.load(x_ptr + offs))\nz = tl.load(tl.advance(b, (1,)))\n"
                   "tl.store(y_ptr + offs, z)")
    assert len(reloads(block)) == 1


def test_gate_1_reports_the_reload_rule_for_a_user_kernel() -> None:
    from kernelopt_core.userkernels.dialect import check_user_source

    report = check_user_source(PLAIN, "k", RACE)
    # the reload also reads what no store of this program wrote first (another program's part of the output, or
    # an earlier call's): a read of a buffer the original only writes
    assert sorted(f.rule for f in report.findings) == ["unsynchronised-reload", "write-only-read"]
    assert [f.line for f in report.findings if f.rule == "unsynchronised-reload"] == [12]
    window = PLAIN.replace("x * y, mask=mask)", "tl.where(y > 2.5, x, x * y), mask=mask)")
    assert check_user_source(PLAIN, "k", window).ok  # a value window is gate 2's to see both ways
    assert check_user_source(PLAIN, "k", PLAIN).ok


# --- no false rejection: the corpus' correct variants and every offline family's candidates -----------------


def _new_rule_findings(original: str, name: str, candidate: str) -> list[str]:
    return [f.describe() for f in check_source(original, name, candidate).findings if f.rule in NEW_RULES]


def test_every_offline_family_candidate_on_the_tiny_suite_passes_the_data_rules(tiny_graphs: dict[str, str]) -> None:
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module

    evidence = ({}, {"causes": ["low-parallelism"]}, {"causes": ["re-reads"]}, {"causes": ["re-reads", "low-parallelism"]})
    checked: dict[str, int] = {}
    flagged = []
    for problem, path in sorted(tiny_graphs.items()):
        for original in parse_output_code(path).kernels:
            module = parse_kernel_module(original.source, original.name)
            seen: set[str] = set()
            for device in ("cpu", "cuda"):
                for facts in evidence:
                    ctx = RewriteContext(module=module, original=module, device=device)
                    ctx.evidence.update(facts, sm_count=132)
                    for family_name, family in FAMILIES.items():
                        for rewrite in family.variants(ctx):
                            if rewrite.source in seen:
                                continue
                            seen.add(rewrite.source)
                            checked[family_name] = checked.get(family_name, 0) + 1
                            found = _new_rule_findings(original.source, original.name, rewrite.source)
                            if found:
                                flagged.append((problem, family_name, rewrite.title, found))
    assert not flagged, flagged
    assert sum(checked.values()) >= 40 and len(checked) >= 5, checked


def test_the_corpus_correct_variants_pass_the_data_rules(tmp_path_factory: pytest.TempPathFactory) -> None:
    from adversarial.corpus import CASES
    from adversarial.dumps import compiled_corpus_graphs

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import CAPABILITIES

    graphs = {name: parse_output_code(path).kernels[0] for name, path in compiled_corpus_graphs(tmp_path_factory).items()}
    # a correct case that waits for a capability is judged once the gates have it
    correct = [c for c in CASES if not c.wrong and not c.missing(CAPABILITIES)]
    flagged = {c.id: _new_rule_findings(graphs[c.problem].source, graphs[c.problem].name,
                                        c.candidate(graphs[c.problem].source, graphs[c.problem].name)) for c in correct}
    assert not {k: v for k, v in flagged.items() if v}
    assert len(correct) >= 20


def test_the_user_kernel_families_pass_the_data_rules() -> None:
    from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, parse_kernel_module
    from kernelopt_core.userkernels.extract import extract_kernel_module
    from kernelopt_core.userkernels.parse import parse_user_kernels

    produced = 0
    for path in [*sorted((ROOT / "examples" / "user_kernels").glob("*.py")),
                 *sorted((ROOT / "tests" / "fixtures" / "user_kernels").glob("*.py"))]:
        text = path.read_text()
        for found in parse_user_kernels(str(path), text).kernels:
            try:
                module = extract_kernel_module(text, found.name, str(path)).source
            except Exception:  # noqa: BLE001 - a kernel the extractor declines is not a candidate source
                continue
            parsed = parse_kernel_module(module, found.name)
            for device in ("cpu", "cuda"):
                ctx = RewriteContext(module=parsed, original=parsed, device=device)
                for name in ("user_autotune", "user_fast_math"):
                    for rewrite in FAMILIES[name].variants(ctx):
                        produced += 1
                        assert not _new_rule_findings(module, found.name, rewrite.source), (path.name, rewrite.title)
    assert produced >= 4


def test_the_data_rules_cost_little() -> None:
    import gc
    import time

    from kernelopt_core.artifacts import parse_output_code

    kernels = [k for p in sorted((ROOT / "tests/fixtures/inductor-h200-torch2.11").glob("*/output_code.py"))
               for k in parse_output_code(str(p)).kernels]
    worst = 0.0
    for k in kernels:
        source_flow(k.source)  # the original's facts are cached: candidates of one kernel share them
        # A full collection of the test process's heap is not the rules' cost: in a full-suite run one
        # landed inside the timed region (167 ms and 374 ms of CPU time, never when the file ran alone).
        gc.collect()
        gc.disable()
        try:
            begin = time.thread_time()  # this thread's CPU time: a loaded machine does not count
            flow = module_flow(ast.parse(k.source))
            check_reloads(k.source, flow)
            worst = max(worst, time.thread_time() - begin)
        finally:
            gc.enable()
    assert kernels and worst < 0.03, f"{worst * 1000:.1f} ms of CPU time"
