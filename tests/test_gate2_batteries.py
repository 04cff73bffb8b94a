"""Gate 2 in two stages (issue 25): the screen (the captured launch and one seed) and the full battery,
on stand-ins for the two sides (tests/gate2_stand_ins.py), so each check runs in milliseconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from gate2_stand_ins import InProcessCandidate, TorchKernel, softmax_launch, softmax_rows

from kernelopt_core.gates.error_structure import error_structure
from kernelopt_core.gates.kernel import all_input_sets
from kernelopt_core.gates.kernel_gate import KernelChecks, check_kernel
from kernelopt_core.gates.launch_capture import layout_only
from kernelopt_core.sandbox.exchange import ExchangeArena
from kernelopt_core.sandbox.guarded_buffers import bits, poison_bits

ROWS, COLUMNS = 6, 40
SEEDS = (0, 42, 1337)


@pytest.fixture
def arena() -> Iterator[ExchangeArena]:
    arena = ExchangeArena("cpu")
    yield arena
    arena.close()


def _check(arena: ExchangeArena, candidate: Any, battery: str, rows: int = ROWS, columns: int = COLUMNS,
           output_layout_only: bool = False) -> KernelChecks:
    values, names, roles = softmax_launch(rows, columns)
    if output_layout_only:
        values[1] = layout_only(values[1])
    return check_kernel(TorchKernel(), candidate, arena, "k", [values], [{}], names, roles, SEEDS, "cpu",
                        extra_sets=all_input_sets(torch.float32, True, columns), row_length=columns, battery=battery)


def _labels(outcome: KernelChecks) -> list[str]:
    return [check.label for check in outcome.checks]


def test_the_screen_runs_the_captured_launch_and_one_seed(arena: ExchangeArena) -> None:
    candidate = InProcessCandidate()
    outcome = _check(arena, candidate, "screen")
    assert outcome.failed is None, outcome.failed
    assert _labels(outcome) == ["captured launch 0", "seed 0, randn"]
    # the candidate's warm-up launch, then one launch per check; the original's timed run is the captured one's
    assert (outcome.candidate_runs, outcome.original_runs) == (3, 2)
    assert outcome.battery == "screen" and all("seconds" in check.to_json() for check in outcome.checks)


def test_the_full_battery_runs_every_check_and_shares_the_original_s_runs(arena: ExchangeArena) -> None:
    outcome = _check(arena, InProcessCandidate(), "full")
    assert outcome.failed is None, outcome.failed
    input_sets = [extra.label for extra in all_input_sets(torch.float32, True, COLUMNS)]
    assert _labels(outcome) == [
        "captured launch 0", "seed 0, randn", "re-run 1 (program order shuffled)",
        "re-run 2 (program order shuffled)", "seed 42, uniform in [-3, 5)",
        "seed 1337, small integers in [-8, 8] as floats, previous outputs left in the buffers",
        "seed 1337, small integers in [-8, 8] as floats",
        "seed 1338, large magnitude (randn x 1000, x 100 for fp16/bf16)", *input_sets]
    # the original: once for the captured launch (its timed run), once per seed (the stale-output run and its
    # seed's run share one), once per input set; the candidate: its warm-up, every check, the re-runs
    assert outcome.original_runs == 1 + 4 + len(input_sets)
    assert outcome.candidate_runs == 1 + len(outcome.checks)


def _stale(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    """Skips the rows whose output buffer already holds a finite value (a cache keyed on the buffer)."""
    fresh = torch.softmax(x, dim=-1)
    keep = torch.isfinite(out).all(dim=-1, keepdim=True)
    out.copy_(torch.where(keep, out, fresh))


def _nondeterministic(x: torch.Tensor, out: torch.Tensor, call: int) -> None:
    softmax_rows(x, out, call)
    if call >= 3:  # its re-runs differ from its first run in the last bit
        out.view(torch.int32).bitwise_xor_(1)


def _drops_nan(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    out.copy_(torch.softmax(torch.nan_to_num(x, nan=0.0), dim=-1))


@pytest.mark.parametrize(("behaviour", "words"), [(_stale, "stale result"), (_nondeterministic, "nondeterministic"),
                                                  (_drops_nan, "NaN")])
def test_a_wrong_candidate_the_screen_passes_fails_the_full_battery(arena: ExchangeArena, behaviour: Any,
                                                                    words: str) -> None:
    assert _check(arena, InProcessCandidate(behaviour), "screen").failed is None
    failed = _check(arena, InProcessCandidate(behaviour), "full").failed
    assert failed is not None and words in " ".join(failed.problems), failed


def test_what_the_screen_rejects_the_full_battery_rejects_at_the_same_check(arena: ExchangeArena) -> None:
    def half(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
        out[: ROWS // 2].copy_(torch.softmax(x[: ROWS // 2], dim=-1))

    screen = _check(arena, InProcessCandidate(half), "screen").failed
    full = _check(arena, InProcessCandidate(half), "full").failed
    assert screen is not None and full is not None
    assert (screen.label, screen.problems) == (full.label, full.problems)
    assert "unwritten" in screen.problems[0]


def test_the_captured_launch_runs_on_the_captured_values(arena: ExchangeArena) -> None:
    seen: list[torch.Tensor] = []

    def recording(x: torch.Tensor, out: torch.Tensor, call: int) -> None:
        seen.append(x.clone())
        softmax_rows(x, out, call)

    values, names, roles = softmax_launch(ROWS, COLUMNS)
    captured = values[0].clone()
    check_kernel(TorchKernel(recording), InProcessCandidate(), arena, "k", [values], [{}], names, roles, SEEDS,
                 "cpu", battery="screen")
    assert torch.equal(seen[0], captured) and not torch.equal(seen[-1], captured)  # then seed 0's inputs


def test_an_unknown_battery_is_refused(arena: ExchangeArena) -> None:
    with pytest.raises(ValueError, match="screen, full"):
        _check(arena, InProcessCandidate(), "quick")


def test_memory_stays_within_the_bound_and_outputs_need_only_their_layout(arena: ExchangeArena) -> None:
    """Issue 26, item 5: at most 3x the working set. The output's captured value is never read (it is
    poisoned before every run), so a layout is enough; captured copies are released once the original's
    guarded buffers hold the inputs."""
    outcome = _check(arena, InProcessCandidate(), "full", rows=32, columns=4096, output_layout_only=True)
    assert outcome.failed is None, outcome.failed
    working = 2 * 32 * 4096 * 4
    assert outcome.working_set_bytes == working
    assert outcome.peak_bytes <= 3 * working, outcome.peak_bytes / working
    # the original's and the candidate's guarded buffers (guards of 1/8 of each tensor) and nothing else
    assert outcome.peak_bytes <= 2.6 * working, outcome.peak_bytes / working


def test_an_output_left_as_poison_is_caught_with_layout_only_outputs(arena: ExchangeArena) -> None:
    def lazy(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
        out[:, :-1].copy_(torch.softmax(x, dim=-1)[:, :-1])

    failed = _check(arena, InProcessCandidate(lazy), "screen", output_layout_only=True).failed
    assert failed is not None and "left 6 of 240 elements of out_ptr0 unwritten" in failed.problems[0]
    assert poison_bits(torch.float32) is not None and bits(torch.zeros(1)).dtype == torch.int32


@pytest.mark.parametrize(("shape", "rows", "chunk"), [((64, 1000), 1000, 4096), ((5, 37), 37, 7), ((300,), None, 64),
                                                      ((4, 3, 50), 50, 33)])
def test_gate_2_s_error_structure_matches_the_general_path(shape: tuple[int, ...], rows: int | None,
                                                           chunk: int) -> None:
    """Gate 2's error structure (no float64 reference) takes a path of fewer passes over memory; its figures
    are the general path's with the original as the reference."""
    generator = torch.Generator().manual_seed(3)
    original = torch.randn(*shape, generator=generator)
    candidate = original + 1e-6 * torch.randn(*shape, generator=generator) + 3e-7
    candidate.view(-1)[5] = float("nan")
    original.view(-1)[7] = candidate.view(-1)[7] = float("inf")
    fast = error_structure(candidate, original, row_length=rows, input_scale=2.0, chunk=chunk)
    general = error_structure(candidate, original, original, row_length=rows, input_scale=2.0, chunk=chunk)
    for key in ("passed", "count", "rows", "bias", "bias_z", "bias_scale", "bias_ratio", "worst_error",
                "element_floor", "worst_ratio"):
        assert getattr(fast, key) == pytest.approx(getattr(general, key), rel=1e-9, abs=1e-300), key
    assert fast.reference == "original"


def test_the_search_screens_with_the_screen_and_finalises_with_the_full_battery(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """GateEvaluator.screen runs gate 1 and gate 2's screen; finalize runs gate 2's full battery before the
    gates the pipeline asks for, whatever they are, and a full-battery rejection stops it there."""
    from types import SimpleNamespace

    import kernelopt_core.gates.cascade as cascade
    from kernelopt_core.gates.verdict import CascadeConfig, CascadeResult, GateVerdict
    from kernelopt_core.search.evaluation import GateEvaluator
    from kernelopt_core.search.target import DumpTarget

    asked: list[CascadeConfig] = []

    def fake_cascade(graph: Any, candidates: dict[str, str], config: CascadeConfig, sink: Any = None,
                     worker: Any = None) -> CascadeResult:
        asked.append(config)
        gate2 = GateVerdict(2, "kernel", False, "full battery: k, seed 1337, ...: returned a stale result")
        return CascadeResult(False, 2, f"gate 2 (kernel) rejected the candidate: {gate2.reason}", gates=[gate2])

    monkeypatch.setattr(cascade, "run_cascade", fake_cascade)
    evaluator = GateEvaluator(DumpTarget(SimpleNamespace(device="cpu", name="g", path=str(tmp_path / "g.py"))), "cpu",
                              str(tmp_path))
    evaluator.screen("k", "source")
    for gates in ((3, 4), (3,), (2, 3), ()):
        result = evaluator.finalize({"k": "source"}, gates)
        assert result.failed_gate == 2 and "full battery" in result.reason
    assert [(c.run_gates, c.gate2_battery) for c in asked] == [
        ((1, 2), "screen"), ((2, 3, 4), "full"), ((2, 3), "full"), ((2, 3), "full"), ((2,), "full")]


def test_a_cascade_past_gate_2_always_runs_the_full_battery() -> None:
    from kernelopt_core.gates.cascade import gate2_battery
    from kernelopt_core.gates.verdict import CascadeConfig

    screen = CascadeConfig(gate2_battery="screen")
    assert gate2_battery(screen, (1, 2)) == "screen"
    assert gate2_battery(screen, (2,)) == "screen"
    assert gate2_battery(screen, (1, 2, 3)) == "full" and gate2_battery(screen, (2, 4)) == "full"
    assert gate2_battery(CascadeConfig(), (1, 2)) == "full"  # the default, for verify and user kernels
    assert CascadeConfig().to_json()["gate2_battery"] == "full"


def test_a_real_gate_2_reports_its_battery_steps_runs_and_memory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The task itself, in the shared worker, on the corpus' elementwise graph (its output captured as a layout)."""
    from adversarial.dumps import compiled_corpus_graphs

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates import CascadeConfig, run_cascade

    graph = parse_output_code(compiled_corpus_graphs(tmp_path_factory, problems=("elementwise",))["elementwise"])
    kernel = graph.kernels[0]
    config = CascadeConfig(run_gates=(2,), gate2_battery="screen", workdir=str(tmp_path_factory.mktemp("screen")))
    result = run_cascade(graph, {kernel.name: kernel.source}, config)
    verdict = result.verdict(2)
    assert result.accepted and verdict is not None and verdict.reason.startswith("screen (captured launch, one seed)")
    numbers = verdict.numbers
    assert numbers["battery"] == "screen"
    assert {"load_baseline_s", "capture_s", "load_candidate_s", "original_s", "candidate_s", "compare_s",
            "checks_s"} <= set(numbers["steps_s"])
    assert numbers["kernels"][kernel.name]["runs"] == {"original": 2, "candidate": 3}
    memory = numbers["memory"]
    assert memory["working_set_bytes"] > 0 and memory["tracked_peak_bytes"] > memory["working_set_bytes"]
    assert memory["ratio_to_working_set"] == round(memory["tracked_peak_bytes"] / memory["working_set_bytes"], 2)
    assert memory["device_peak_bytes"] is None and memory["device_peak_ratio"] is None  # no allocator stats on a CPU
