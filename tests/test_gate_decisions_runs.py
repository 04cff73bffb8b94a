"""The decisions a candidate adds, at run time: the instrumented copy on Triton's CPU interpreter records
both outcomes, one outcome, and nothing for masked lanes; gate 2 end to end on the corpus' elementwise
problem says "not verified" for an added path no input reaches, and accepts a correct candidate whose
added path is reached or that adds none (without the extra runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from adversarial.dumps import compiled_corpus_graphs

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates import CascadeConfig, run_cascade

ROOT = Path(__file__).resolve().parent.parent

_INTERPRETER = r'''
import json, sys
from kernelopt_core.graph_module import prepare_backend
prepare_backend("cpu")
import torch
from kernelopt_core.gates.decisions import added_decisions
from kernelopt_core.gates.decision_probe import probe_source
from kernelopt_core.launchers import load_launcher

ORIGINAL = """
import torch
import triton
import triton.language as tl

@triton.jit
def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)

def launch(x_ptr, out_ptr, n):
    double[(triton.cdiv(n, 64),)](x_ptr, out_ptr, n, BLOCK=64)
"""
CANDIDATE = ORIGINAL.replace("tl.store(out_ptr + offs, x * 2.0, mask=mask)",
                             "tl.store(out_ptr + offs, tl.where(x > 0.0, x + x, x * 2.0), mask=mask)")
added = added_decisions(ORIGINAL, CANDIDATE).required
probed = probe_source(CANDIDATE, "launch", added)
kernel = load_launcher("launch", probed.source, "cpu", directory=sys.argv[1])
results = {"decisions": [d.text for d in probed.decisions], "skipped": [why for _, why in probed.skipped]}
for label, values in (("mixed", torch.randn(100)), ("positive", torch.rand(100) + 0.5),
                      ("negative", -torch.rand(100) - 0.5)):
    out = torch.full((100,), float("nan"))
    counters = torch.zeros(probed.slots, dtype=torch.int32)
    kernel.run(values, out, 100, counters)  # 100 = 64 + 36: the second program has 28 masked lanes
    results[label] = {"counters": counters.tolist(), "error": float((out - values * 2).abs().max())}
print(json.dumps(results))
'''


def test_the_instrumented_copy_records_outcomes_in_the_interpreter(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", _INTERPRETER, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["decisions"] == ["x > 0.0"] and results["skipped"] == []
    assert results["mixed"]["counters"][0] > 0 and results["mixed"]["counters"][1] > 0  # both outcomes
    # all positive: the masked lanes' other=0.0 would be "false", but they do not count
    assert results["positive"]["counters"][0] > 0 and results["positive"]["counters"][1] == 0
    assert results["negative"]["counters"][0] == 0 and results["negative"]["counters"][1] > 0
    assert all(results[k]["error"] == 0.0 for k in ("mixed", "positive", "negative"))  # outputs unchanged


_FORCED = _INTERPRETER.split("CANDIDATE = ")[0] + r'''
CANDIDATE = ORIGINAL.replace("def double(x_ptr, out_ptr, n, BLOCK", "def double(x_ptr, out_ptr, n, flags_ptr, BLOCK").replace(
    "tl.store(out_ptr + offs, x * 2.0, mask=mask)",
    "f = tl.atomic_add(flags_ptr, 0)\n    tl.store(out_ptr + offs, tl.where(f != 0, x + x, x * 2.0), mask=mask)").replace(
    "    double[(triton.cdiv(n, 64),)](x_ptr, out_ptr, n, BLOCK=64)",
    "    flags = torch.zeros((1,), dtype=torch.int32, device=x_ptr.device)\n"
    "    double[(triton.cdiv(n, 64),)](x_ptr, out_ptr, n, flags, BLOCK=64)")
added = added_decisions(ORIGINAL, CANDIDATE).required
probed = probe_source(CANDIDATE, "launch", added)
kernel = load_launcher("launch", probed.source, "cpu", directory=sys.argv[1])
results = {"decisions": [[d.text, d.sync, d.loop] for d in added]}
x = torch.randn(100)
for label, code, budget in (("natural", 0, 0), ("forced", 1, 1 << 30), ("budget 1", 1, 1)):
    out = torch.full((100,), float("nan"))
    counters = torch.zeros(probed.slots, dtype=torch.int32)
    counters[2], counters[3] = code, budget
    kernel.run(x, out, 100, counters)
    results[label] = {"counters": counters.tolist()[:2], "error": float((out - x * 2).abs().max())}
print(json.dumps(results))
'''


def test_a_withheld_flag_takes_its_other_side_in_the_interpreter(tmp_path: Path) -> None:
    """A flag in the launcher's own zeroed scratch (a synchronisation decision) is never set naturally; the
    withholding run forces it, for a bounded number of evaluations where asked."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", _FORCED, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["decisions"] == [["f != 0", True, False]]
    assert results["natural"]["counters"] == [0, 2]  # two programs, the flag never set
    assert results["forced"]["counters"] == [2, 0]
    assert results["budget 1"]["counters"] == [1, 1]  # the first evaluation forced, the next natural
    assert all(results[k]["error"] == 0.0 for k in ("natural", "forced", "budget 1"))


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory: pytest.TempPathFactory):
    graph = parse_output_code(compiled_corpus_graphs(tmp_path_factory)["elementwise"])
    return graph, graph.kernels[0]


def _gate2(graph, name: str, candidate: str, tmp_path: Path):
    config = CascadeConfig(run_gates=(1, 2), workdir=str(tmp_path), decision_search_s=3.0)
    result = run_cascade(graph, {name: candidate}, config)
    return result, result.gates[-1].numbers.get("kernels", {}).get(name, {})


def test_an_added_path_no_input_reaches_is_not_verified(elementwise, tmp_path: Path) -> None:
    graph, kernel = elementwise
    # x * x < 0 is never true: the candidate's first branch is a path no test can reach
    candidate = kernel.source.replace("tmp9 = tmp7 - tmp8", "tmp9 = tl.where(tmp0 * tmp0 < 0.0, tmp7 * 3.0, tmp7 - tmp8)")
    assert candidate != kernel.source
    result, numbers = _gate2(graph, kernel.name, candidate, tmp_path)
    assert not result.accepted and result.failed_gate == 2 and result.could_not_verify, result.reason
    assert "not verified: the candidate adds a path that no test reached" in result.reason
    assert "tmp0 * tmp0 < 0.0" in result.reason and "never true" in result.reason
    assert "rejected" not in result.reason  # not shown wrong
    coverage = numbers["decisions"]
    assert coverage["decisions"][0]["false_seen"] and not coverage["decisions"][0]["true_seen"]
    assert coverage["searched"] > 0  # the search drew further inputs before giving up


def test_a_correct_candidate_whose_added_path_is_reached_is_accepted(elementwise, tmp_path: Path) -> None:
    graph, kernel = elementwise
    candidate = kernel.source.replace(
        "tmp1 = libdevice.tanh(tmp0)", "tmp1 = tl.where(tmp0 >= 0.0, libdevice.tanh(tmp0), -libdevice.tanh(-tmp0))")
    assert candidate != kernel.source
    result, numbers = _gate2(graph, kernel.name, candidate, tmp_path)
    assert result.accepted, result.reason
    coverage = numbers["decisions"]
    assert coverage["complete"] and coverage["decisions"][0]["true_seen"] and coverage["decisions"][0]["false_seen"]


def test_a_candidate_that_adds_no_decision_pays_nothing_extra(elementwise, tmp_path: Path) -> None:
    graph, kernel = elementwise
    candidate = kernel.source.replace("tmp9 = tmp7 - tmp8", "tmp9 = tmp7 + (-tmp8)")
    assert candidate != kernel.source
    result, numbers = _gate2(graph, kernel.name, candidate, tmp_path)
    assert result.accepted, result.reason
    assert "decisions" not in numbers  # no instrumented copy, no coverage runs


@pytest.fixture(scope="module")
def layer_norm(tmp_path_factory: pytest.TempPathFactory):
    graph = parse_output_code(compiled_corpus_graphs(tmp_path_factory)["layer_norm"])
    return graph, graph.kernels[0]


_NORM_LOAD = "    tmp0 = tl.load(in_ptr0 + (r0_1 + 1000*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)\n"


def _take_previous_row_when(condition: str) -> str:
    """Layer norm lines: the row is normalised as the previous row where ``condition`` holds (d: the largest
    |x - previous|, top: the largest |x| of the row)."""
    return _NORM_LOAD + """    prev = tl.load(in_ptr0 + (r0_1 + 1000*x0 - 1000), r0_mask & xmask & (x0 > 0), other=0.0)
    d = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0 - prev), 0.0), 1)[:, None]
    top = tl.max(tl.where(r0_mask & xmask, tl.abs(tmp0), 0.0), 1)[:, None]
    tmp0 = tl.where((CONDITION) & (x0 > 0), prev, tmp0)
""".replace("CONDITION", condition)


def test_a_path_right_only_on_repeated_rows_is_rejected_beside_them(layer_norm, tmp_path: Path) -> None:
    """Rows within 1e-5 of their largest |x| of the previous row are taken as it: right on the repeated-row set,
    which shows that side first, wrong beside it. The walk from that set towards a random draw, at an offset,
    crosses the boundary and compares there."""
    graph, kernel = layer_norm
    candidate = kernel.source.replace(_NORM_LOAD, _take_previous_row_when("d < 1e-05 * top"))
    assert candidate != kernel.source
    result, numbers = _gate2(graph, kernel.name, candidate, tmp_path)
    assert not result.accepted and result.failed_gate == 2 and not result.could_not_verify, result.reason
    assert "of the way to a random draw" in result.reason
    assert numbers["decisions"]["boundaries"]


def test_an_exact_shortcut_on_repeated_rows_survives_the_walk(layer_norm, tmp_path: Path) -> None:
    graph, kernel = layer_norm
    candidate = kernel.source.replace(_NORM_LOAD, _take_previous_row_when("d == 0.0"))
    assert candidate != kernel.source
    result, numbers = _gate2(graph, kernel.name, candidate, tmp_path)
    assert result.accepted, result.reason
    assert numbers["decisions"]["boundaries"] and numbers["decisions"]["complete"]


@pytest.mark.slow
def test_a_users_kernel_gets_the_same_evidence(tmp_path: Path) -> None:
    """The same property for a user's @triton.autotune/@triton.jit kernel (its generated launcher passes the
    counter buffer on): an unreached added path is not verified, a reached one passes gate 2."""
    import shutil

    from kernelopt_core.userkernels.cascade import run_user_cascade
    from kernelopt_core.userkernels.target import user_target

    shutil.copy(ROOT / "tests" / "fixtures" / "user_kernels" / "scale_kernels.py", tmp_path / "scale_kernels.py")
    target = user_target(str(tmp_path / "scale_kernels.py"), "scale_kernel", "bench_scale", "cpu")
    source = target.module.source
    unreached = source.replace("x * alpha, mask=mask", "tl.where(x * x < 0.0, x, x * alpha), mask=mask")
    reached = source.replace("x * alpha, mask=mask", "tl.where(x >= 0.0, x * alpha, -((-x) * alpha)), mask=mask")
    assert unreached != source and reached != source
    for candidate, accepted in ((unreached, False), (reached, True)):
        config = CascadeConfig(device="cpu", run_gates=(1, 2), workdir=str(tmp_path / str(accepted)),
                               decision_search_s=3.0)
        result = run_user_cascade(target, candidate, config)
        assert result.accepted is accepted, result.reason
        coverage = result.gates[-1].numbers["kernels"]["scale_kernel"]["decisions"]
        assert coverage["complete"] is accepted
        if not accepted:
            assert result.could_not_verify and "not verified" in result.reason and "x * x < 0.0" in result.reason


def test_degenerate_inputs_credit_no_outcome_and_the_search_draws_at_the_constants() -> None:
    import torch

    from kernelopt_core.gates.decision_coverage import degenerate_reason, search_sets

    roles = ["input", "input", "output"]
    x, out = torch.randn(16, 37), torch.empty(16, 37)
    assert degenerate_reason([x, torch.randn(16, 37), out], roles) is None
    assert "at most two distinct" in degenerate_reason([x, torch.zeros(16, 37), out], roles)
    assert "at most two distinct" in degenerate_reason([x, torch.randint(0, 2, (16, 37)).float(), out], roles)
    rows = torch.randn(16, 1).expand(16, 37).contiguous()
    assert "rows are each constant" in degenerate_reason([x, rows, out], roles)
    assert degenerate_reason([x, torch.zeros(16, 37), out], ["input", "output", "output"]) is None  # outputs aside

    values = [x.clone(), torch.randn(16, 37), out]
    sets = search_sets(values, roles, ["in_ptr0", "in_ptr1", "out_ptr0"], [1234.5])
    first = next(sets)
    first.fill(values, roles)
    assert "constants" in first.label
    hits = (values[0] == 1234.5).sum() + (values[0] == -1234.5).sum()
    beside = (values[0] == torch.tensor(1234.5).nextafter(torch.tensor(2e3))).sum()
    assert hits > 0 and beside > 0
    labels = [next(sets).label for _ in range(30)]
    assert any("sorted" in label for label in labels) and any("alone" in label for label in labels)


_EFFECTS = _INTERPRETER.split("CANDIDATE = ")[0] + r'''
CANDIDATE = ORIGINAL.replace("tl.store(out_ptr + offs, x * 2.0, mask=mask)",
                             "y = tl.where(x > 0.0, x + x, x * 2.0)\n"
                             "    z = tl.where(x > 1.0, x * 3.0, y)\n"
                             "    tl.store(out_ptr + offs, z + 0.0 * tl.exp(-(x * x)), mask=mask)")
added = added_decisions(ORIGINAL, CANDIDATE).added
probed = probe_source(CANDIDATE, "launch", added)
kernel = load_launcher("launch", probed.source, "cpu", directory=sys.argv[1])
results = {"decisions": [[d.kind, d.text, d.advisory] for d in probed.decisions],
           "skipped": [why for _, why in probed.skipped]}
for label, values in (("small", torch.rand(100) * 2.0 - 1.0), ("mixed", torch.randn(100) * 20.0)):
    out = torch.full((100,), float("nan"))
    counters = torch.zeros(probed.slots, dtype=torch.int32)
    kernel.run(values, out, 100, counters)
    results[label] = [counters.tolist()[4 * i: 4 * i + 2] for i in range(len(probed.decisions))]
print(json.dumps(results))
'''


def test_select_effects_count_where_arms_differ_and_saturation_is_an_outcome(tmp_path: Path) -> None:
    """A select whose arms agree everywhere (x + x is x * 2.0) records no effect, though its comparison takes both
    sides; one whose arms differ records both. exp(-x^2) is in range for |x| < 9 and saturates (0) beyond."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", _EFFECTS, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    kinds = {text: (kind, advisory) for kind, text, advisory in results["decisions"]}
    assert results["skipped"] == []
    assert kinds["x > 0.0"] == ("comparison", False) and kinds["x > 1.0"] == ("comparison", False)
    assert kinds["tl.exp(-(x * x))"] == ("saturation", False)
    order = [text for _, text, _ in results["decisions"]]
    seen = {label: dict(zip(order, results[label], strict=True)) for label in ("small", "mixed")}
    same_arms = next(t for t in order if t.startswith("tl.where(x > 0.0"))
    other_arms = next(t for t in order if t.startswith("tl.where(x > 1.0"))
    assert seen["small"]["x > 0.0"][0] > 0 and seen["small"]["x > 0.0"][1] > 0
    assert seen["small"][same_arms] == [0, 0] and seen["mixed"][same_arms] == [0, 0]  # arms never differ
    assert seen["mixed"][other_arms][0] > 0 and seen["mixed"][other_arms][1] > 0
    assert seen["small"]["tl.exp(-(x * x))"] == [0, 2] and seen["mixed"]["tl.exp(-(x * x))"][0] > 0


def test_the_search_draws_every_element_above_or_below_each_constant_per_input() -> None:
    import torch

    from kernelopt_core.gates.decision_coverage import search_sets

    roles = ["input", "input", "output"]
    values = [torch.randn(16, 37), torch.randn(16, 37), torch.empty(16, 37)]
    sides = [s for s in (next(it) for it in [iter(search_sets(values, roles, ["x", "y", "out"], [-1.0]))] * 40)
             if s.label.startswith("every element beside")]
    labels = [s.label for s in sides]
    assert "every element beside -1: x below, y above" in labels and "every element beside -1: x above, y below" in labels
    assert len(labels) == len(set(labels)) == 4  # all above, all below, each input alone on either side
    chosen = sides[labels.index("every element beside -1: x below, y above")]
    chosen.fill(values, roles)
    assert bool((values[0] < -1.0).all()) and bool((values[1] > -1.0).all())
    assert float(values[0].min()) > -30.0  # a few units of the constant's size, not a far saturating value
