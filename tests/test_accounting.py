"""Whole-callable accounting: the split into named overheads, like-for-like comparisons, and a
real accounting of a small graph on the CPU Triton backend (in a worker)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.dispatch import OverheadItem, analyze
from kernelopt_core.measure.accounting import (
    COPY_ITEM,
    GAPS_ITEM,
    GUARD_ITEM,
    OVERHEAD_DOMINATES_SHARE,
    CallableAccounting,
    MeasuredParts,
    PathTiming,
    callable_path,
    describe_overhead,
    overhead_dominates,
    overheads_from_json,
    speedup_between,
    split_overheads,
)
from kernelopt_core.measure.accounting_intervals import (
    CallTrace,
    Interval,
    TimelineItem,
    map_launch_times,
    median_launch_times,
    summarize_trace,
    union_ms,
)
from kernelopt_core.measure.accounting_run import AccountingError, account_problem, dump_uses_cudagraphs
from kernelopt_core.measure.paths import CrossPathComparison, TimingPath
from kernelopt_core.measure.statistics import summarize

# --- traces ------------------------------------------------------------------------------------


def test_union_counts_overlaps_once() -> None:
    ivs = [Interval(0, 2, "a"), Interval(1, 3, "b"), Interval(5, 6, "c")]
    assert union_ms(ivs) == pytest.approx(4.0)
    assert union_ms([]) == 0.0


def test_trace_split_separates_leading_copies_gaps_and_edges() -> None:
    # copy 0-3, kernel 3.5-5, kernel 6-7, a later copy 7-7.5 is the graph's own work
    trace = CallTrace(outer_ms=9.0, intervals=[
        Interval(3.5, 5.0, "triton_a"), Interval(0.0, 3.0, "Memcpy DtoD", "copy"),
        Interval(6.0, 7.0, "triton_b"), Interval(7.0, 7.5, "copy_kernel", "copy"),
    ])
    s = summarize_trace(trace)
    assert s.copy_ms == pytest.approx(3.0)
    assert s.kernel_ms == pytest.approx(3.0)  # 1.5 + 1.0 + 0.5
    assert s.gaps_ms == pytest.approx(1.5)  # 3.0-3.5 and 5.0-6.0
    assert s.edge_ms == pytest.approx(1.5)  # 9.0 - span 7.5
    assert s.launches == 3
    assert s.copy_ms + s.kernel_ms + s.gaps_ms + s.edge_ms == pytest.approx(trace.outer_ms)


def test_empty_trace_is_all_edge() -> None:
    s = summarize_trace(CallTrace(outer_ms=2.0))
    assert (s.kernel_ms, s.copy_ms, s.gaps_ms, s.edge_ms, s.launches) == (0.0, 0.0, 0.0, 2.0, 0)


def test_launch_times_match_triton_by_name_and_externs_by_segment() -> None:
    timeline = [TimelineItem(0, "extern_kernels.addmm", False), TimelineItem(1, "triton_a", True),
                TimelineItem(2, "aten.mm.default", False), TimelineItem(3, "aten.bmm.default", False),
                TimelineItem(4, "triton_b", True)]
    # GPU-style names: the vendor kernels are not named after the op
    recorded = [("sm90_gemm", 2.0), ("triton_a", 1.0), ("cutlass_1", 0.5), ("cutlass_2", 0.7), ("triton_b", 0.3)]
    assert map_launch_times(timeline, recorded) == {0: 2.0, 1: 1.0, 2: 0.5, 3: 0.7, 4: 0.3}
    # three kernels for two extern calls: the segment's total is split evenly
    uneven = [("triton_a", 1.0), ("k1", 0.3), ("k2", 0.3), ("k3", 0.6), ("triton_b", 0.3)]
    assert map_launch_times(timeline[1:], uneven)[2] == pytest.approx(0.6)
    assert map_launch_times(timeline, [("triton_a", 1.0)]) == {}  # the addmm left no record
    assert map_launch_times(timeline, [("x", 1.0), ("triton_a", 1.0)]) == {}  # triton_b missing
    per_call = [{0: 1.0, 1: 2.0}, {}, {0: 3.0, 1: 4.0}, {0: 2.0, 1: 9.0}]
    assert median_launch_times(per_call) == {0: 2.0, 1: 4.0}


# --- the split ---------------------------------------------------------------------------------

# Inputs taken from docs/measurement notes: relu on 6.4 GB, max-autotune 6.62 ms, the kernel 3.01 ms.
RELU_PARTS = MeasuredParts(callable_ms=6.62, kernel_ms=3.01, gaps_ms=0.005, copy_ms=3.55,
                           copy_bytes=4096 * 393216 * 4, launches=1, cudagraphs=True)


def test_split_names_every_overhead_and_adds_up() -> None:
    items, notes = split_overheads(RELU_PARTS)
    assert [i.name for i in items] == [COPY_ITEM, GAPS_ITEM, GUARD_ITEM]
    copy = items[0]
    assert copy.bytes_per_call == 6_442_450_944
    assert copy.share == pytest.approx(3.55 / 6.62)
    assert "mark_static_address" in copy.suggestion and "max-autotune-no-cudagraphs" in copy.suggestion
    guard = items[2]
    assert guard.time_ms == pytest.approx(6.62 - 3.01 - 0.005 - 3.55)
    assert sum(i.time_ms for i in items) + RELU_PARTS.kernel_ms == pytest.approx(RELU_PARTS.callable_ms)
    assert describe_overhead(copy) == "CUDA-graph input copy: 54% of graph time (3.550 ms, 6.4 GB per call)"
    assert not notes


def test_split_without_cudagraphs_has_no_copy_item_and_suggests_graphs_when_launch_bound() -> None:
    parts = MeasuredParts(callable_ms=0.1, kernel_ms=0.02, gaps_ms=0.05, launches=12)
    items, _ = split_overheads(parts)
    assert [i.name for i in items] == [GAPS_ITEM, GUARD_ITEM]
    assert "CUDA graphs" in items[0].suggestion
    assert overhead_dominates(items)


def test_negative_residual_is_noise_clamped_with_a_note() -> None:
    items, notes = split_overheads(MeasuredParts(callable_ms=1.0, kernel_ms=1.05, gaps_ms=0.0))
    assert items[-1].name == GUARD_ITEM and items[-1].time_ms == 0.0
    assert notes and "noise" in notes[0]


@pytest.mark.parametrize("bad", [
    MeasuredParts(callable_ms=0.0, kernel_ms=0.0, gaps_ms=0.0),
    MeasuredParts(callable_ms=1.0, kernel_ms=-0.1, gaps_ms=0.0),
    MeasuredParts(callable_ms=1.0, kernel_ms=0.1, gaps_ms=math.nan),
])
def test_split_rejects_impossible_measurements(bad: MeasuredParts) -> None:
    with pytest.raises(ValueError):
        split_overheads(bad)


def test_overhead_dominates_boundary() -> None:
    def items(share: float) -> list[OverheadItem]:
        return [OverheadItem(GAPS_ITEM, share, share / 2), OverheadItem(GUARD_ITEM, share, share / 2)]

    assert overhead_dominates(items(OVERHEAD_DOMINATES_SHARE))
    assert not overhead_dominates(items(OVERHEAD_DOMINATES_SHARE - 1e-6))


def test_paths_of_callables() -> None:
    assert callable_path("max-autotune", "cuda:0") is TimingPath.COMPILED_CALLABLE_CUDAGRAPHS
    assert callable_path("max-autotune-no-cudagraphs", "cuda:0") is TimingPath.COMPILED_CALLABLE
    assert callable_path("max-autotune", "cpu") is TimingPath.COMPILED_CALLABLE  # no CUDA graphs on the CPU
    assert callable_path("eager", "cuda") is TimingPath.EAGER


# --- like for like -----------------------------------------------------------------------------


def _stats(samples: list[float], path: TimingPath) -> object:
    return summarize(samples, path.value)


def test_speedup_between_same_path() -> None:
    a = _stats([2.0, 2.1, 1.9, 2.0, 2.05], TimingPath.MODULE_CALL)
    b = _stats([1.0, 1.05, 0.95, 1.0, 1.02], TimingPath.MODULE_CALL)
    cmp = speedup_between(a, b)
    assert cmp.speedup == pytest.approx(2.0)
    assert cmp.ci_low <= cmp.speedup <= cmp.ci_high
    assert cmp.baseline_path == cmp.candidate_path == "module-call"
    assert "through module-call" in cmp.describe()


def test_cross_path_comparison_is_refused() -> None:
    call = _stats([3.0, 3.1, 2.9], TimingPath.MODULE_CALL)
    graphed = _stats([6.6, 6.7, 6.5], TimingPath.COMPILED_CALLABLE_CUDAGRAPHS)
    eager = _stats([3.0, 3.05, 3.1], TimingPath.EAGER)
    with pytest.raises(CrossPathComparison):
        speedup_between(graphed, call)  # the fake 2x win of the measurement notes
    with pytest.raises(CrossPathComparison):
        speedup_between(graphed, eager)
    # a module call() stays refused even when comparing configurations
    with pytest.raises(CrossPathComparison, match="module-call"):
        speedup_between(graphed, call, across_configurations=True)
    cmp = speedup_between(graphed, eager, across_configurations=True)
    assert cmp.across_configurations and cmp.baseline_path != cmp.candidate_path


def test_ab_compare_refuses_different_paths() -> None:
    from kernelopt_core.measure.timing import ab_compare

    ran = []
    with pytest.raises(CrossPathComparison):
        ab_compare(lambda: ran.append("a"), lambda: ran.append("b"), device="cpu",
                   path_a=TimingPath.MODULE_CALL.value, path_b=TimingPath.COMPILED_CALLABLE_CUDAGRAPHS.value)
    assert ran == []  # refused before anything was timed


# --- accounting data and dispatch --------------------------------------------------------------


def _relu_accounting() -> CallableAccounting:
    items, _ = split_overheads(RELU_PARTS)
    return CallableAccounting(
        name="relu", device="cuda:0", mode="max-autotune", cudagraphs=True,
        callable=PathTiming("max-autotune (full callable)", "max-autotune",
                            summarize([6.62, 6.60, 6.65], TimingPath.COMPILED_CALLABLE_CUDAGRAPHS.value)),
        kernel_ms=3.01, overheads=items, copy_bytes=RELU_PARTS.copy_bytes,
        alternatives=[PathTiming("eager", None, summarize([3.04, 3.05, 3.03], "eager")),
                      PathTiming("max-autotune-no-cudagraphs (full callable)", "max-autotune-no-cudagraphs",
                                 summarize([3.01, 3.02, 3.0], "compiled-callable"))],
    )


def test_accounting_json_round_trip_and_report() -> None:
    acct = _relu_accounting()
    data = acct.to_json()
    assert data["overhead_dominates"] is True and data["path"] == "compiled-callable-cudagraphs"
    back = CallableAccounting.from_json(data)
    assert back.to_json() == data
    rows = {baseline: cmp for baseline, _, cmp in acct.speedups()}
    assert rows["eager"].speedup == pytest.approx(3.04 / 6.62)  # named against eager, separately
    assert rows["max-autotune-no-cudagraphs (full callable)"].baseline_path == "compiled-callable"
    text = acct.to_markdown()
    assert "CUDA-graph input copy: 54%" in text and "overhead dominates" in text
    assert overheads_from_json([{"name": "x", "time_ms": "bad"}, "junk", {"no": "name"}]) == []


def test_dispatch_shows_overheads_as_first_class_items(h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "elementwise" / "output_code.py"))
    acct = _relu_accounting()
    launch_times = {item.order: acct.kernel_ms for item in graph.timeline()}
    report = analyze(graph, launch_times, acct.overheads, acct.path)
    names = [item.name for item in report.overheads]
    assert names == [COPY_ITEM, GAPS_ITEM, GUARD_ITEM]
    total = sum(s.time_ms or 0.0 for s in report.launches) + sum(i.time_ms for i in report.overheads)
    assert total == pytest.approx(acct.callable_ms)
    assert report.overheads[0].share == pytest.approx(3.55 / 6.62)
    assert report.to_json()["overheads"][0]["bytes_per_call"] == 6_442_450_944
    assert report.timing_path == "compiled-callable-cudagraphs"


def test_dump_config_tells_cuda_graphs(h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    graph.fx_graph_runnable = str(h200_dumps / "rmsnorm" / "fx_graph_runnable.py")
    assert dump_uses_cudagraphs(graph)
    graph.fx_graph_runnable = None
    assert not dump_uses_cudagraphs(graph)


# --- real accounting on the CPU backend --------------------------------------------------------

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 16))

        def forward(self, x):
            h = torch.relu(x @ self.w)
            return torch.softmax(h, dim=-1) + h.sum(dim=0, keepdim=True)

    def get_inputs():
        return [torch.randn(8, 16)]

    def get_init_inputs():
        return []
''')


@pytest.fixture(scope="module")
def cpu_worker():
    from kernelopt_core.measure.worker import get_worker

    return get_worker("cpu")  # the process-wide CPU worker, which the CLI uses too


@pytest.fixture(scope="module")
def small_problem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acct") / "small_problem.py"
    path.write_text(PROBLEM)
    return path


def test_cpu_accounting_of_a_small_graph(cpu_worker, small_problem: Path) -> None:
    acct = account_problem(str(small_problem), mode="max-autotune", worker=cpu_worker, timeout_s=300)
    assert acct.device == "cpu" and not acct.cudagraphs
    assert acct.path == TimingPath.COMPILED_CALLABLE.value
    assert [item.name for item in acct.overheads] == [GAPS_ITEM, GUARD_ITEM]  # no CUDA-graph copy on a CPU
    assert all(item.time_ms >= 0 for item in acct.overheads)
    assert acct.overhead(GUARD_ITEM).time_ms > 0  # dynamo guards and wrappers take measurable host time
    assert acct.kernel_ms > 0
    # on the CPU the split is that of the median call: kernels + overheads give the callable's median
    assert acct.kernel_ms + acct.overhead_ms == pytest.approx(acct.callable_ms, rel=1e-6)
    assert acct.callable.stats.n % 2 == 1
    # beside it: the compiled module's call() and eager, each through its own path
    assert len(acct.graphs) == 1
    graph_acct = acct.graphs[0]
    assert graph_acct.call.path == TimingPath.MODULE_CALL.value
    assert acct.timing("eager").path == TimingPath.EAGER.value
    graph = parse_output_code(graph_acct.path)
    assert len(graph.launches) >= 1 and len(graph.extern_calls) >= 1
    assert set(graph_acct.launch_times_ms) == {item.order for item in graph.timeline()}
    report = analyze(graph, graph_acct.launch_times_ms, acct.overheads, acct.path)
    assert report.timed and [i.name for i in report.overheads] == [GAPS_ITEM, GUARD_ITEM]
    assert sum(s.share for s in report.launches) + sum(i.share for i in report.overheads) == pytest.approx(1.0)
    with pytest.raises(CrossPathComparison):
        speedup_between(acct.callable.stats, graph_acct.call.stats)


def test_overheads_for_a_dump_through_its_call(cpu_worker, cpu_example_dump: Path) -> None:
    outcome = cpu_worker.call("kernelopt_core.measure.accounting_run:overheads_for_graph_task",
                              {"path": str(cpu_example_dump)}, timeout_s=300)
    assert outcome.ok, outcome.failure
    items = overheads_from_json(outcome.value)
    assert [i.name for i in items] == [GAPS_ITEM, GUARD_ITEM]
    assert all("module-call" in i.detail for i in items)
    assert all(0 <= i.share <= 1 for i in items)


def test_missing_problem_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AccountingError, match="no such problem file"):
        account_problem(str(tmp_path / "absent.py"), worker=object())


def test_broken_problem_reports_the_failure(cpu_worker, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(AccountingError, match="bad.py"):
        account_problem(str(bad), worker=cpu_worker, timeout_s=120)


def test_account_command_json(cpu_worker, small_problem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kernelopt_core.cli.main import main

    assert main(["account", str(small_problem), "--device", "cpu", "--json", "--no-alternatives"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == "compiled-callable" and data["alternatives"] == []
    assert [item["name"] for item in data["overheads"]] == [GAPS_ITEM, GUARD_ITEM]
    assert data["recommendation"] is None  # no CUDA graphs to toggle on the CPU backend
    assert main(["account", str(small_problem.parent / "absent.py"), "--device", "cpu"]) == 2
