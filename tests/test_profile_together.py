"""The first ncu profile of a run measures the kernels still to search as well (one runner start and one graph
load for all of them); the later briefs read the figures back instead of starting ncu again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import H200_DUMPS
from test_search_pipeline import StandInEvaluator, kinds, run

from kernelopt_core.artifacts import parse_output_code

SUM_REDUCE = str(H200_DUMPS / "sum_reduce" / "output_code.py")


class TogetherEvaluator(StandInEvaluator):
    """Records each profile request; measures ``kernel`` and every kernel asked for with it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, tuple[str, ...]]] = []
        self.baselines = {k.name: k.source for k in parse_output_code(SUM_REDUCE).kernels}

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        self.calls["profile"] += 1
        self.requests.append((kernel, together))
        return {"metrics": None, "profiled_together": sorted(together)}


def test_the_first_profile_measures_the_later_targets_too(tmp_path: Path) -> None:
    evaluator = TogetherEvaluator()
    _, journal, _ = run(tmp_path, SUM_REDUCE, evaluator, iterations=1, plans=1, min_share=0.0)
    searched = [e["kernel"] for e in kinds(journal, "brief")]
    assert len(searched) == 2
    first, second = evaluator.requests
    assert first == (searched[0], (searched[1],))  # asked for both at once
    assert second == (searched[1], ())  # the second reads what the first measured: nothing more to ask


def test_a_profile_that_failed_leaves_the_later_kernels_to_their_own(tmp_path: Path) -> None:
    class Fails(TogetherEvaluator):
        def profile(self, kernel: str, sections: tuple[str, ...],
                    together: tuple[str, ...] = ()) -> dict[str, Any] | None:
            super().profile(kernel, sections, together)
            return {"error": "NcuError: ncu ran past 600 s"}

    evaluator = Fails()
    _, journal, _ = run(tmp_path, SUM_REDUCE, evaluator, iterations=1, plans=1, min_share=0.0)
    searched = [e["kernel"] for e in kinds(journal, "brief")]
    assert evaluator.requests == [(searched[0], (searched[1],)), (searched[1], ())]
    assert all(any("ncu unavailable" in line for line in e["value"]["evidence"]) for e in kinds(journal, "brief"))


def test_the_dump_target_names_the_kernels_ncu_measured(monkeypatch: Any) -> None:
    from kernelopt_core.measure import ncu_profile
    from kernelopt_core.measure.ncu import KernelMetrics
    from kernelopt_core.search.target import DumpTarget

    graph = parse_output_code(SUM_REDUCE)
    first, second = (k.name for k in graph.kernels)
    asked: list[list[str]] = []

    def fake_profile_graph(graph: Any, *, kernels: list[str], **_: Any) -> Any:
        asked.append(list(kernels))
        profile = ncu_profile.GraphProfile(graph=graph.name, dump=graph.path, gpu="H100", kernels=[])
        profile.kernels = [KernelMetrics(first, *[None] * 8)]  # ncu saw no launch of the second
        return profile

    monkeypatch.setattr(ncu_profile, "profile_graph", fake_profile_graph)
    reply = DumpTarget(graph).profile(first, ("SpeedOfLight",), "cuda:0", None, together=(second, first))
    assert asked == [[first, second]]
    assert reply is not None and reply["metrics"]["name"] == first
    assert reply["profiled_together"] == []  # not measured: its own brief profiles it
