"""The configuration check's task on one working set per callable: its output comparisons go one chunk at a
time (a whole output cast to float64 is twice its size again), give the same figures as a whole-tensor
comparison, and take either side from the host; the task that releases the search's working sets runs with
nothing held and says what it closed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_chunked_comparisons_match_whole_tensor_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.measure import accounting_verify

    monkeypatch.setattr(accounting_verify, "COMPARE_CHUNK", 7)  # 5 x 11 elements: 8 chunks, the last one short
    base = torch.randn(5, 11)
    cand = base.clone()
    cand[4, 10] += 0.5  # the only difference, in the last, short chunk
    assert accounting_verify._max_diff([base], [cand]) == pytest.approx(0.5)
    assert accounting_verify._max_abs([base]) == pytest.approx(float(base.double().abs().max()))
    result = accounting_verify.compare_outputs(base, cand, None, tol=1e-4)
    whole = float((base.double() - cand.double()).abs().max()) / float(base.double().abs().max())
    assert not result["passed"] and result["rel_err"] == pytest.approx(whole)
    same = accounting_verify.compare_outputs(base, base.clone(), None, tol=1e-4)
    assert same["passed"] and same["rel_err"] == 0.0


def test_host_copies_compare_like_device_ones() -> None:
    from kernelopt_core.measure.accounting_verify import _clone, _max_diff

    out = torch.arange(12.0).reshape(3, 4)
    kept = _clone(out, to_host=True)
    assert kept.device.type == "cpu" and kept.data_ptr() != out.data_ptr()  # a copy, not a view
    assert _max_diff([kept], [out + 1.0]) == pytest.approx(1.0)


def test_releasing_the_search_working_sets_with_nothing_held() -> None:
    from kernelopt_core.gates.working_sets import release_working_sets

    released = release_working_sets({"device": "cpu"})
    assert released["closed"] == ["candidate", "spare", "baseline"]
    assert released["before"] is None and released["after"] is None  # no device allocator on the CPU
