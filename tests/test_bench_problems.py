"""The benchmark suite itself: enough problems per level, sizes estimated, all runnable at tiny scale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelopt_core.bench.suite import discover_suite

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "benchmarks" / "problems"
TINY = SUITE / "tiny"
ESTIMATE = re.compile(r"^# est\. eager H200: ~([0-9.]+) ms \((.+)\)$", re.MULTILINE)
H200_PROBLEMS = discover_suite(str(SUITE))


def test_suite_has_at_least_40_problems_over_three_levels():
    levels = {p.level for p in H200_PROBLEMS}
    assert levels == {1, 2, 3}
    assert len(H200_PROBLEMS) >= 40
    counts = {level: sum(1 for p in H200_PROBLEMS if p.level == level) for level in levels}
    assert counts[1] >= 20 and counts[2] >= 10 and counts[3] >= 6, counts
    # the CI folder is a separate suite: not a level folder, so not part of the H200 campaign
    assert not any("tiny" in p.name for p in H200_PROBLEMS)


@pytest.mark.parametrize("problem", H200_PROBLEMS, ids=lambda p: p.name)
def test_each_problem_states_an_eager_estimate_within_target(problem):
    text = Path(problem.path).read_text()
    match = ESTIMATE.search(text)
    assert match, f"{problem.name}: no '# est. eager H200: ~X ms (reason)' line"
    assert 1.0 <= float(match.group(1)) <= 15.0, f"{problem.name}: estimate {match.group(1)} ms outside 1-15 ms"
    assert "SCALE" in text and "KERNELOPT_PROBLEM_SCALE" in text, f"{problem.name}: no tiny-scale knob"


def test_every_problem_runs_eagerly_at_tiny_scale(monkeypatch):
    torch = pytest.importorskip("torch")
    from kernelopt_core.compile import build_problem, load_problem

    monkeypatch.setenv("KERNELOPT_PROBLEM_SCALE", "tiny")
    problems = H200_PROBLEMS + discover_suite(str(TINY))
    for problem in problems:
        module = load_problem(problem.path)
        assert problem.path.startswith(str(TINY)) or module.SCALE == "tiny"
        model, inputs = build_problem(module, "cpu")
        assert sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)) <= 20_000, problem.name
        with torch.no_grad():
            out = model(*inputs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        for tensor in outs:
            assert torch.isfinite(tensor.float()).all(), f"{problem.name}: non-finite output"


def test_scale_knob_can_be_set_on_the_module(monkeypatch):
    from kernelopt_core.compile import load_problem

    monkeypatch.delenv("KERNELOPT_PROBLEM_SCALE", raising=False)
    module = load_problem(str(SUITE / "level1" / "softmax_rows.py"))
    assert module.SCALE == "h200" and module.SIZES["h200"] == (32768, 16384)
    module.SCALE = "tiny"  # read at call time, so a harness may switch after import
    assert tuple(module.get_inputs()[0].shape) == module.SIZES["tiny"]


def test_tiny_suite_declares_levels():
    tiny = discover_suite(str(TINY))
    assert {p.level for p in tiny} == {1, 2}
    assert [p.name for p in discover_suite(str(TINY), {2})] == ["linear_gelu"]


def test_bf16_view_casts_the_model_and_floating_inputs(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KERNELOPT_PROBLEM_SCALE", "tiny")
    from kernelopt_core.bench.dtype_adapter import write_bf16_problem
    from kernelopt_core.compile import build_problem, load_problem

    path = write_bf16_problem(str(SUITE / "level1" / "cross_entropy.py"), str(tmp_path))
    module = load_problem(path)
    model, inputs = build_problem(module, "cpu")
    assert inputs[0].dtype == torch.bfloat16 and inputs[1].dtype == torch.int64  # targets stay integers
    linear = load_problem(write_bf16_problem(str(TINY / "linear_gelu.py"), str(tmp_path)))
    model, inputs = build_problem(linear, "cpu")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model(*inputs).dtype == torch.bfloat16
