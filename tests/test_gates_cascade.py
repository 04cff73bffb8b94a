"""The cascade end to end on CPU-backend graphs: order, stop at the first failure, the result's
shape, setup errors, a hung candidate, and gate 4's decisions (CPU-interpreter wall-clock time)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from adversarial.corpus import CASES
from adversarial.dumps import compiled_corpus_graphs

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.events import EventSink
from kernelopt_core.gates import CascadeConfig, CascadeResult, CascadeSetupError, run_cascade
from kernelopt_core.gates.perf import perf_decision

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"
BY_ID = {c.id: c for c in CASES}


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_corpus_graphs(tmp_path_factory)


def _candidate(graphs: dict[str, str], case_id: str):
    case = BY_ID[case_id]
    graph = parse_output_code(graphs[case.problem])
    kernel = graph.kernels[0]
    return graph, kernel, {kernel.name: case.candidate(kernel.source, kernel.name)}


def test_perf_decision() -> None:
    assert perf_decision(1.10, 1.05, 1.15, 1.03, "module-call").passed
    assert perf_decision(1.03, 1.03, 1.04, 1.03, "module-call").passed
    slow = perf_decision(1.02, 1.00, 1.04, 1.03, "module-call")
    assert not slow.passed and "below the 1.03x gate" in slow.reason
    noisy = perf_decision(1.08, 1.01, 1.20, 1.03, "module-call")
    assert not noisy.passed and "lower bound" in noisy.reason


def test_faster_candidate_is_accepted_through_all_four_gates(graphs: dict[str, str], tmp_path: Path) -> None:
    graph, kernel, candidates = _candidate(graphs, "S-xblock16")  # 1 program instead of 10
    before = hashlib.sha256(Path(graph.path).read_bytes()).hexdigest()
    events = []
    result = run_cascade(graph, candidates, CascadeConfig(workdir=str(tmp_path)), sink=EventSink(events.append))
    assert result.accepted, result.reason
    assert [v.gate for v in result.gates] == [1, 2, 3, 4] and all(v.passed for v in result.gates)
    assert result.failed_gate is None and result.reason == "passed all four gates"
    assert result.speedup is not None and result.speedup >= 1.03 and result.ci[0] >= 1.03
    assert result.timing_path == "module-call"
    assert set(result.kernel_speedups) == {kernel.name}
    assert Path(result.restitched_path).parent.parent == tmp_path
    assert "XBLOCK': 16" in result.diff and result.diff.startswith("--- a/")
    assert hashlib.sha256(Path(graph.path).read_bytes()).hexdigest() == before  # the dump is never modified
    data = json.loads(json.dumps(result.to_json()))
    assert data["accepted"] is True and data["failed_gate"] is None
    assert [g["gate"] for g in data["gates"]] == [1, 2, 3, 4]
    assert all({"gate", "passed", "reason", "seconds", "name"} <= set(g) for g in data["gates"])
    assert "CPU Triton interpreter" in data["gates"][3]["reason"]
    assert CascadeResult.from_json(data).to_json() == data
    assert [e.extra.get("gate") for e in events if e.extra.get("gate")] == [1, 2, 3, 4]


def test_unchanged_kernel_is_rejected_by_the_perf_gate(graphs: dict[str, str], tmp_path: Path) -> None:
    graph = parse_output_code(graphs["softmax"])
    kernel = graph.kernels[0]
    result = run_cascade(graph, {kernel.name: kernel.source}, CascadeConfig(run_gates=(4,), workdir=str(tmp_path)))
    assert not result.accepted and result.failed_gate == 4
    # A/A: there is no real difference to find. On a loaded 2-core machine (CI runs two pytest
    # workers) the median can drift far from 1 (0.73x was seen), but its interval then covers 1;
    # a harness biased towards either side would show a tight interval away from 1.
    low, high = result.ci
    assert low <= 1.0 <= high or 0.8 < result.speedup < 1.25, result.reason
    assert "not run" not in result.reason


def test_slower_candidate_is_rejected_by_the_perf_gate(graphs: dict[str, str], tmp_path: Path) -> None:
    graph, _, candidates = _candidate(graphs, "R-rblock256-x4")
    result = run_cascade(graph, candidates, CascadeConfig(run_gates=(4,), workdir=str(tmp_path)))
    assert result.failed_gate == 4 and result.speedup is not None, result.reason
    assert result.speedup < 1.0 and "below" in result.reason, result.reason


def test_cascade_stops_at_the_first_failing_gate(graphs: dict[str, str], tmp_path: Path) -> None:
    graph, _, candidates = _candidate(graphs, "E-torch-tanh")
    result = run_cascade(graph, candidates, CascadeConfig(workdir=str(tmp_path)))
    assert [v.gate for v in result.gates] == [1] and result.failed_gate == 1
    graph, _, candidates = _candidate(graphs, "E-mask-short")
    result = run_cascade(graph, candidates, CascadeConfig(workdir=str(tmp_path)))
    assert [v.gate for v in result.gates] == [1, 2] and result.failed_gate == 2
    assert result.reason.startswith("gate 2 (kernel) rejected the candidate")


def test_setup_errors(graphs: dict[str, str]) -> None:
    graph = parse_output_code(graphs["elementwise"])
    with pytest.raises(CascadeSetupError, match="no Triton kernel named triton_nope"):
        run_cascade(graph, {"triton_nope": "x = 1\n"})
    with pytest.raises(CascadeSetupError, match="no candidate"):
        run_cascade(graph, {})
    with pytest.raises(CascadeSetupError, match="subset of 1-4"):
        run_cascade(graph, {graph.kernels[0].name: graph.kernels[0].source}, CascadeConfig(run_gates=(5,)))
    with pytest.raises(CascadeSetupError, match="compiled for cpu and cannot run on cuda"):
        run_cascade(graph, {graph.kernels[0].name: graph.kernels[0].source}, CascadeConfig(device="cuda"))


def test_cuda_graph_without_a_gpu_keeps_the_gate1_verdict(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    graph = parse_output_code(str(H200 / "elementwise" / "output_code.py"))
    kernel = graph.kernels[0]
    with pytest.raises(CascadeSetupError, match="no worker for cuda:0") as caught:
        run_cascade(graph, {kernel.name: kernel.source}, CascadeConfig(workdir=str(tmp_path)))
    partial = caught.value.partial
    assert partial is not None and [v.gate for v in partial.gates] == [1] and partial.gates[0].passed


def test_a_hung_candidate_fails_gate2_and_the_worker_is_replaced(graphs: dict[str, str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from kernelopt_core.gates.registry import CommonSettings
    from kernelopt_core.measure.worker import Worker

    # The worker's task timeout is the path under test. The task's own launch limit (0.8 x the task's time) would
    # catch the spin first on a machine that sets the task up in under 1.6 s; lift it so the outcome does not
    # depend on how fast the machine is. (The corpus's endless launcher covers the in-task limit.)
    settings = CommonSettings.of
    monkeypatch.setattr(CommonSettings, "of", classmethod(lambda cls, config: replace(settings(config),
                                                                                       run_timeout_s=600.0)))
    graph = parse_output_code(graphs["elementwise"])
    kernel = graph.kernels[0]
    anchor = "    xoffset = tl.program_id(0) * XBLOCK\n"
    spin = kernel.source.replace(anchor, "    spin = 0\n    while xnumel > 0:\n        spin += 1\n" + anchor, 1)
    assert spin != kernel.source
    with Worker("cpu") as worker:
        assert worker.call("json:dumps", {"warm": True}, timeout_s=120).ok  # start-up is not the candidate's time
        result = run_cascade(graph, {kernel.name: spin},
                             CascadeConfig(run_gates=(2,), workdir=str(tmp_path), job_timeout_s=8), worker=worker)
        assert result.failed_gate == 2 and "hung" in result.reason
        again = run_cascade(graph, {kernel.name: kernel.source},
                            CascadeConfig(run_gates=(2,), workdir=str(tmp_path)), worker=worker)
        assert again.accepted and worker.restarts == 1


def test_undecodable_candidate_is_a_gate1_verdict(tmp_path: Path) -> None:
    graph = parse_output_code(str(H200 / "softmax" / "output_code.py"))
    result = run_cascade(graph, {graph.kernels[0].name: "x = 1\ud800"}, CascadeConfig(workdir=str(tmp_path)))
    assert result.failed_gate == 1 and "not parseable" in result.reason and result.restitched_path is None
