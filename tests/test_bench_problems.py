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


KBSCALE = SUITE / "kbscale"
KBSCALE_FAMILIES = {
    "elementwise": {"relu", "gelu", "bias_scale_broadcast"}, "row reductions": {"sum_rows", "amax_rows"},
    "column reductions": {"sum_cols", "mean_cols"}, "softmax": {"softmax_long_rows", "log_softmax_rows"},
    "norms": {"layer_norm_16_rows", "instance_norm", "group_norm", "frobenius_norm", "l1_norm", "l2_norm",
              "rms_norm_channels"},
    "pooling": {"max_pool2d_dilated", "avg_pool1d"}, "scans": {"cumsum_rows"},
    "losses": {"cross_entropy", "mse_loss", "huber_loss", "kl_div"},
}


def test_kbscale_set_is_in_the_suite_and_covers_the_families():
    names = {p.name for p in H200_PROBLEMS if p.name.startswith("kbscale/")}
    assert len(names) >= 20 and {p.level for p in H200_PROBLEMS if p.name in names} == {1}
    for family, wanted in KBSCALE_FAMILIES.items():
        assert {f"kbscale/{n}" for n in wanted} <= names, family
    assert len(discover_suite(str(KBSCALE))) == len(names)  # also a suite on its own


@pytest.mark.parametrize("problem", discover_suite(str(KBSCALE)), ids=lambda p: p.name)
def test_kbscale_inputs_are_half_a_gigabyte_to_eight_at_h200_scale(problem, monkeypatch):
    """Measured on meta tensors: the sizes, never the memory."""
    torch = pytest.importorskip("torch")
    from kernelopt_core.compile import load_problem

    monkeypatch.setenv("KERNELOPT_PROBLEM_SCALE", "h200")
    module = load_problem(problem.path)
    assert module.SCALE == "h200" and set(module.SIZES) == {"h200", "tiny"}
    with torch.device("meta"):
        inputs = module.get_inputs()
    total = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    assert 0.5e9 <= total <= 8.0e9, f"{problem.name}: {total / 1e9:.2f} GB of inputs"
    if problem.name == "kbscale/softmax_long_rows":
        assert tuple(inputs[0].shape) == (4096, 393216)
    if problem.name == "kbscale/layer_norm_16_rows":
        assert inputs[0].shape[0] == 16 and inputs[0][0].numel() >= 1 << 22  # 16 very long rows


def test_problem_set_folders_are_entered_only_with_their_marker(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "a.py").write_text("x = 1\n")
    for folder in ("kbscale", "unmarked"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "b.py").write_text("LEVEL = 1\n")
        (tmp_path / folder / "c.py").write_text("x = 1\n")
    (tmp_path / "kbscale" / "PROBLEM_SET.md").write_text("a set\n")
    found = [(p.name, p.level) for p in discover_suite(str(tmp_path))]
    assert found == [("kbscale/c", 0), ("kbscale/b", 1), ("level1/a", 1)]
