"""Gate 3: the float64 rule, the per-seed check, and the fx_graph_runnable reference."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from adversarial.dumps import compiled_corpus_graphs

from kernelopt_core.gates.float64_reference import ReferenceUnavailable, load_reference
from kernelopt_core.gates.model import check_seed, float64_decision, inf_norm_diff


def test_float64_rule_with_a_measurable_reference_error() -> None:
    ok = float64_decision(d_ref=1e-6, d_opt=9e-6, r32_inf_norm=3.0)
    assert ok.passed and ok.rho == pytest.approx(9.0)
    bad = float64_decision(d_ref=1e-6, d_opt=1.1e-5, r32_inf_norm=3.0)
    assert not bad.passed and bad.rho == pytest.approx(11.0) and "> 10" in bad.rule
    assert float64_decision(d_ref=1e-8, d_opt=1e-7, r32_inf_norm=1.0).passed  # the boundary uses rho


def test_float64_rule_when_the_baseline_is_exact() -> None:
    ok = float64_decision(d_ref=0.0, d_opt=2e-4, r32_inf_norm=4.0)  # 5e-5 relative
    assert ok.passed and ok.rho is None
    bad = float64_decision(d_ref=5e-9, d_opt=2e-3, r32_inf_norm=4.0)  # 5e-4 relative
    assert not bad.passed and "d_ref < 1e-08" in bad.rule
    # an all-zero output: ||r32|| is floored at 1e-12
    assert float64_decision(d_ref=0.0, d_opt=1e-17, r32_inf_norm=0.0).passed
    assert not float64_decision(d_ref=0.0, d_opt=1e-13, r32_inf_norm=0.0).passed
    assert not float64_decision(d_ref=1e-6, d_opt=math.inf, r32_inf_norm=1.0).passed
    assert not float64_decision(d_ref=1e-6, d_opt=math.nan, r32_inf_norm=1.0).passed


def test_inf_norm_diff_treats_matching_nans_as_equal() -> None:
    a = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert inf_norm_diff(a, a.clone()) == 0.0
    b = torch.tensor([1.0, 0.0, float("inf"), 2.5])
    assert inf_norm_diff(a, b) == math.inf
    assert inf_norm_diff(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0])) == 0.5


def _reference(value: torch.Tensor):
    return lambda inputs: [value]


def test_check_seed_passes_on_allclose_without_the_reference() -> None:
    base = torch.randn(4, 4)
    calls = []
    check = check_seed(0, (base,), (base + 1e-6,), 1e-4, lambda i: calls.append(i) or [base], [], None)
    assert check.passed and check.allclose and not calls


def test_check_seed_falls_back_to_float64() -> None:
    r64 = torch.randn(64, dtype=torch.float64)
    r32 = r64.float()
    d_ref = float((r32.double() - r64).abs().max())
    near = (r64 + 3 * d_ref * torch.sign(torch.randn(64, dtype=torch.float64))).float() + 2e-4  # off by 2e-4
    check = check_seed(0, (r32,), (near,), 1e-4, _reference(r64), [], None)
    assert not check.allclose and check.fallback is not None
    assert not check.passed and check.fallback.rho > 10  # 2e-4 against a float32 rounding error: wrong
    slightly = (r64 + 2 * d_ref).float()
    check = check_seed(0, (r32,), (slightly,), 1e-9, _reference(r64), [], None)  # tight atol forces the fallback
    assert check.fallback is not None and check.passed and check.fallback.rho <= 10


def test_check_seed_without_a_reference_fails_with_the_reason() -> None:
    check = check_seed(3, (torch.zeros(3),), (torch.ones(3),), 1e-4, None, [], "no fx_graph_runnable.py")
    assert not check.passed and "no fx_graph_runnable.py" in check.problem


def test_check_seed_output_count_and_shape() -> None:
    assert "returns 2 tensors" in check_seed(0, (torch.ones(2),), (torch.ones(2), torch.ones(2)), 1e-4, None,
                                             [], None).problem
    assert "output 0 is" in check_seed(0, (torch.ones(2),), (torch.ones(3),), 1e-4, None, [], None).problem


def test_reference_from_fx_graph_runnable(tmp_path_factory: pytest.TempPathFactory) -> None:
    graphs = compiled_corpus_graphs(tmp_path_factory)
    path = Path(graphs["softmax"]).with_name("fx_graph_runnable.py")
    environment = dict(os.environ)
    default = torch.get_default_dtype()
    reference = load_reference(str(path), "cpu")
    x = torch.randn(10, 37)
    (out,) = reference([x])
    assert out.dtype == torch.float64
    assert torch.allclose(out, torch.softmax(x.double(), dim=-1), atol=1e-12, rtol=0)
    # the script's env and config lines never ran (it sets TRITON_INTERPRET and its own cache dir)
    assert os.environ.get("TRITON_INTERPRET") == environment.get("TRITON_INTERPRET")
    assert "gate-corpus-dumps" not in os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    assert torch.get_default_dtype() == default


def test_reference_upcasts_dtypes_the_graph_asks_for(tmp_path: Path) -> None:
    script = tmp_path / "fx_graph_runnable.py"
    script.write_text(
        "import os\nos.environ['KERNELOPT_SHOULD_NOT_BE_SET'] = '1'\nimport torch\n"
        "class Repro(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        y = torch.ops.prims.convert_element_type.default(x, torch.float16)\n"
        "        return (torch.ops.aten.mul.Tensor(y, torch.full([1], 1.0 / 3.0, dtype=torch.float32)),)\n"
        "raise SystemExit('the script body must not run')\n", encoding="utf-8")
    reference = load_reference(str(script), "cpu")
    (out,) = reference([torch.tensor([1.0])])
    assert out.dtype == torch.float64 and out.item() == pytest.approx(1 / 3, abs=1e-15)
    assert "KERNELOPT_SHOULD_NOT_BE_SET" not in os.environ


def test_reference_refuses_constants_and_missing_repro(tmp_path: Path) -> None:
    with_state = tmp_path / "a.py"
    with_state.write_text("import torch\nclass Repro(torch.nn.Module):\n    def __init__(self):\n"
                          "        super().__init__()\n        self.register_buffer('w', torch.ones(2))\n", encoding="utf-8")
    with pytest.raises(ReferenceUnavailable, match="constant"):
        load_reference(str(with_state), "cpu")
    no_repro = tmp_path / "b.py"
    no_repro.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ReferenceUnavailable, match="no Repro"):
        load_reference(str(no_repro), "cpu")
