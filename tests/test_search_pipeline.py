"""The search pipeline with a stand-in evaluator (no device): beam limits, early stop, meltdown,
ablations, decisions, vendor-dominated graphs, AVOID, journal replay on resume, bad input.

The stand-in replaces only the measurements: the offline planner, executor, rewrite families,
memory, beam and journal are the real ones, on real Inductor kernels from the H200 dumps.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import H200_DUMPS

from kernelopt_core.events import EventSink
from kernelopt_core.gates.verdict import CascadeResult, GateVerdict
from kernelopt_core.search.evaluation import KernelTime, Screen
from kernelopt_core.search.memory import ExperienceStore
from kernelopt_core.search.pipeline import OptimizeConfig, OptimizeError, optimize
from kernelopt_core.search.rewrites import parse_kernel_module

ELEMENTWISE = str(H200_DUMPS / "elementwise" / "output_code.py")
RMSNORM = str(H200_DUMPS / "rmsnorm" / "output_code.py")
MATMUL = str(H200_DUMPS / "matmul_bias_relu" / "output_code.py")


def shape_latency(source: str) -> float:
    """A made-up but deterministic cost model: best at XBLOCK=2048 (1 for a reduction), 8 warps, 1 stage,
    persistent reductions; hints help a little."""
    module = parse_kernel_module(source)
    config = module.explicit_config
    cost = 1.0
    best_x = 1 if "r0_numel" in source else 2048
    if config is not None:
        x = config.block("XBLOCK") or 1024
        cost += 0.08 * abs(math.log2(x / best_x)) + 0.04 * abs(math.log2(config.num_warps / 8))
        cost += 0.02 * (config.num_stages - 1)
        r = config.block("R0_BLOCK")
        if r:
            cost += 0.05 * abs(math.log2(r / 2048))
    else:
        cost += 0.08  # Inductor's XBLOCK=1024, 4 warps
    if "for r0_offset" not in source and "r0_numel" in source:
        cost *= 0.7  # persistent: the row is read once
    if "evict_first" in source and "evict_last" not in source:
        cost *= 0.99
    return cost


class StandInEvaluator:
    """Stand-in measurements: correct unless ``reject`` says why; times from ``latency``."""

    def __init__(self, device: str = "cuda:0", latency: Callable[[str], float] = shape_latency,
                 reject: Callable[[str], str | None] = lambda source: None, launch_timing: dict[str, Any] | None = None,
                 stop_after_screens: int | None = None):
        self.device = device
        self.latency = latency
        self.reject = reject
        self._launch_timing = launch_timing
        self.stop_after_screens = stop_after_screens
        self.calls: Counter[str] = Counter()
        self.screened: list[str] = []
        self.finalized: list[tuple[int, ...]] = []
        self.baselines: dict[str, str] = {}
        self.screens_before_warm_up: list[int] = []

    def warm_up(self) -> None:
        self.calls["warm_up"] += 1
        self.screens_before_warm_up.append(self.calls["screen"])

    def facts(self, kernels: list[str]) -> dict[str, Any]:
        self.calls["facts"] += 1
        return {"kernels": {k: {"configs": [{"blocks": {"XBLOCK": 1024}, "num_warps": 4, "num_stages": 1}]}
                            for k in kernels}}

    def launch_timing(self) -> dict[str, Any] | None:
        self.calls["launch_timing"] += 1
        return self._launch_timing

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        self.calls["profile"] += 1
        return None

    def screen(self, kernel: str, source: str) -> Screen:
        self.calls["screen"] += 1
        if self.stop_after_screens is not None and self.calls["screen"] > self.stop_after_screens:
            raise KeyboardInterrupt("simulated kill")
        self.screened.append(source)
        why = self.reject(source)
        if why:
            return Screen(False, 2, f"gate 2 (kernel): {why}", [{"gate": 2, "passed": False, "reason": why}])
        return Screen(True, None, "passed gates 1, 2", [], f"/restitched/{len(self.screened)}")

    def _baseline(self, kernel: str) -> float:
        from kernelopt_core.artifacts import parse_output_code

        if kernel not in self.baselines:
            found = (g.kernel(kernel) for g in map(parse_output_code, (ELEMENTWISE, RMSNORM, MATMUL)))
            self.baselines[kernel] = next(k for k in found if k is not None).source
        return self.latency(self.baselines[kernel])

    def time(self, kernel: str, source: str, screen: Screen) -> KernelTime:
        self.calls["time"] += 1
        base = self._baseline(kernel)
        ms = self.latency(source)
        return KernelTime(base / ms, (base / ms * 0.99, base / ms * 1.01), base, ms)

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        self.calls["finalize"] += 1
        self.finalized.append(gates)
        speedup = min(self._baseline(k) / self.latency(s) for k, s in candidates.items())
        sanitized = {"sanitizer": [{"kernel": k, "tool": tool, "ran": True, "errors": 0, "seconds": 1.5}
                                   for k in candidates for tool in ("memcheck", "racecheck")],
                     "sanitizer_note": "compute-sanitizer: memcheck 0 errors (1.5 s), racecheck 0 hazards (1.5 s)"}
        verdicts = [GateVerdict(3, "model", True, "matches", sanitized)]
        accepted = True
        if 4 in gates:
            passed = speedup >= 1.03
            verdicts.append(GateVerdict(4, "perf", passed, f"speedup {speedup:.3f}x"))
            accepted = passed
        return CascadeResult(accepted, None if accepted else 4, "ok" if accepted else "gate 4 rejected", verdicts,
                             speedup=speedup, ci=(speedup * 0.99, speedup * 1.01), timing_path="module-call",
                             diff="--- a\n+++ b\n")


def run(tmp_path: Path, path: str = ELEMENTWISE, evaluator: StandInEvaluator | None = None,
        events: list[Any] | None = None, **overrides: Any):
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"), **overrides)
    sink = EventSink(events.append) if events is not None else None
    evaluator = evaluator or StandInEvaluator()
    result = optimize(path, config=config, sink=sink, evaluator=evaluator)
    journal = [json.loads(line) for line in Path(result.run_dir, "journal.jsonl").read_text().splitlines()]
    return result, journal, evaluator


def kinds(journal: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in journal if e["kind"] == kind]


def test_the_defaults_are_the_reference_search() -> None:
    config = OptimizeConfig()
    assert (config.beam_width, config.iterations, config.plans, config.retries) == (4, 5, 4, 4)
    assert config.ucb_c == 1.4 and config.patience == 2 and config.min_speedup == 1.03
    assert (config.meltdown_window, config.meltdown_unique) == (6, 2)
    assert config.provider == "offline" and config.run_root == ".kernelopt/runs"


def test_default_search_stays_within_B_T_N_K_and_optimizes(tmp_path: Path) -> None:
    events: list[Any] = []
    result, journal, evaluator = run(tmp_path, events=events)
    assert result.decision == "optimized"
    assert result.speedup and result.speedup >= 1.03
    iterations = kinds(journal, "iteration_done")
    assert 1 <= len(iterations) <= 5
    for done in iterations:
        assert len(done["beam"]) <= 4
        plans = [p for p in kinds(journal, "plan") if p["iteration"] == done["iteration"]]
        assert len(plans) <= 4 * 4  # beam width x plans per node
        per_node = Counter(p["node"] for p in plans)
        assert max(per_node.values()) <= 4
    attempts = Counter((c["parent"], c["iteration"], c["proposal"]["family"]) for c in kinds(journal, "candidate"))
    assert max(attempts.values()) <= 4
    best = result.kernels[0]
    assert best["kernel_speedup"] > 1.05 and best["decision"] == "optimized"
    assert evaluator.finalized and all(g == (3, 4) for g in evaluator.finalized)
    stages = {e.stage for e in events}
    assert {"start", "dispatch", "iteration", "candidate", "gate", "done"} <= stages
    assert any(e.best_speedup and e.best_speedup > 1.0 for e in events)
    files = {p.name for p in Path(result.run_dir).iterdir()}
    assert {"journal.jsonl", "candidates", "ncu", "report.md", "final.diff", "result.json", "original_kernel.py",
            "optimized_kernel.py"} <= files
    data = json.loads(Path(result.run_dir, "result.json").read_text())
    assert {"run_id", "run_dir", "decision", "reason", "speedup", "ci", "kernels"} <= set(data)
    assert Path(result.run_dir, "final.diff").read_text().startswith("---")
    assert len(list(Path(result.run_dir, "candidates").iterdir())) == len(kinds(journal, "candidate"))


def test_every_finalist_records_its_sanitizer_runs_and_times(tmp_path: Path) -> None:
    """Issue 28: memcheck and racecheck ran on a campaign's finalists without a trace; the journal keeps them."""
    _, journal, _ = run(tmp_path)
    finalists = kinds(journal, "finalist")
    assert finalists
    for entry in finalists:
        assert [r["tool"] for r in entry["sanitizer"]] == ["memcheck", "racecheck"]
        assert all(r["seconds"] == 1.5 for r in entry["sanitizer"]) and "racecheck 0 hazards" in entry["sanitizer_note"]


def test_early_stop_after_two_iterations_without_improvement(tmp_path: Path) -> None:
    # Every candidate is the same speed as Inductor: nothing ever improves. Without a budget (--budget 0) early
    # stop ends the search; under a budget, the budget does (its time goes to the search).
    flat = StandInEvaluator(latency=lambda source: 1.0)
    result, journal, _ = run(tmp_path, evaluator=flat, budget_s=0)
    assert len(kinds(journal, "iteration_done")) == 2
    assert kinds(journal, "early_stop")
    budgeted = StandInEvaluator(latency=lambda source: 1.0)
    _, under_budget, _ = run(tmp_path / "budget", evaluator=budgeted, iterations=3)
    assert not kinds(under_budget, "early_stop") and kinds(under_budget, "early_stop_skipped")
    assert len(kinds(under_budget, "iteration_done")) == 3
    assert result.decision == "matched" and "none faster" in result.reason
    no_stop = StandInEvaluator(latency=lambda source: 1.0)
    _, journal, _ = run(tmp_path, evaluator=no_stop, early_stop=False, iterations=3, beam_width=1, plans=1)
    assert len(kinds(journal, "iteration_done")) == 3


def test_meltdown_forces_other_directions(tmp_path: Path) -> None:
    _, journal, _ = run(tmp_path, beam_width=2, plans=2, iterations=3, early_stop=False)
    plans = kinds(journal, "plan")
    melted_at = next(i for i, p in enumerate(plans) if p["melted"])
    window = {p["plan"]["family"] for p in plans[melted_at - 5: melted_at + 1]}
    assert len(window) <= 2
    after = plans[melted_at + 1]["plan"]["family"]
    assert after not in window  # the next plan takes a direction outside the collapsed set


def test_ablation_switches(tmp_path: Path) -> None:
    _, journal, evaluator = run(tmp_path / "a", use_beam=False, iterations=2, early_stop=False, plans=2)
    assert all(len(e["beam"]) == 1 for e in kinds(journal, "iteration_done"))
    _, journal, _ = run(tmp_path / "b", multi_iteration=False)
    assert len(kinds(journal, "iteration_done")) == 1
    fixed_is_faster = StandInEvaluator(latency=lambda source: 0.5 if "fixed_config" in source else 1.0)
    result, journal, evaluator = run(tmp_path / "c", evaluator=fixed_is_faster, use_perf_gate=False, iterations=1,
                                     plans=1)
    assert evaluator.finalized == [(3,)] and "gate 4 switched off" in result.reason
    _, journal, evaluator = run(tmp_path / "d", use_ncu=False, iterations=1, plans=1)
    assert evaluator.calls["profile"] == 0 and not kinds(journal, "ncu_request")
    _, journal, evaluator = run(tmp_path / "e", iterations=1, plans=1)
    assert evaluator.calls["profile"] == 1 and kinds(journal, "ncu_request")  # on by default on a GPU graph
    _, journal, _ = run(tmp_path / "f", use_memory=False, iterations=1, plans=2)
    assert all(not e["kept"] for e in kinds(journal, "experience"))
    assert kinds(journal, "memory_snapshot")[0]["value"] == []


def test_vendor_dominated_graph_is_reported_not_searched_unless_forced(tmp_path: Path) -> None:
    from kernelopt_core.artifacts import parse_output_code

    graph = parse_output_code(MATMUL)
    orders = {item.order: (9.0 if not hasattr(item, "kernel") else 1.0) for item in graph.timeline()}
    timing = {"launch_times_ms": {str(k): v for k, v in orders.items()}, "overheads": [], "path": "module-call"}
    result, journal, evaluator = run(tmp_path, MATMUL, StandInEvaluator(launch_timing=timing))
    assert result.decision == "fallback" and result.reason.startswith("vendor-dominated")
    assert "--force" in result.reason and evaluator.calls["screen"] == 0 and not result.kernels
    assert evaluator.calls["warm_up"] == 0  # nothing to screen: no compile processes are started for it
    assert "## Fallback" in Path(result.run_dir, "report.md").read_text()
    forced, _, evaluator = run(tmp_path, MATMUL, StandInEvaluator(launch_timing=timing), force=True, iterations=1,
                               plans=1)
    assert evaluator.calls["screen"] >= 1 and forced.kernels
    assert evaluator.screens_before_warm_up == [0]  # warmed up once, before the first screen


def test_a_launch_timing_the_caller_measured_is_used_not_measured_again(tmp_path: Path) -> None:
    from kernelopt_core.artifacts import parse_output_code

    graph = parse_output_code(MATMUL)
    orders = {item.order: (9.0 if not hasattr(item, "kernel") else 1.0) for item in graph.timeline()}
    timing = {"launch_times_ms": {str(k): v for k, v in orders.items()}, "overheads": [], "path": "module-call"}
    evaluator = StandInEvaluator()  # its own timing would be None: counts only
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"))
    result = optimize(MATMUL, config=config, evaluator=evaluator, launch_timing=timing)
    assert evaluator.calls["launch_timing"] == 0
    assert result.decision == "fallback" and result.reason.startswith("vendor-dominated")


def test_all_candidates_rejected_is_a_fallback_with_gate_counts(tmp_path: Path) -> None:
    evaluator = StandInEvaluator(reject=lambda source: "output mismatch at [0, 3]")
    result, journal, _ = run(tmp_path, evaluator=evaluator, iterations=1, plans=2, retries=2)
    assert result.decision == "fallback" and "gate 2: 4" in result.reason
    assert not evaluator.finalized
    experiences = kinds(journal, "experience")
    assert experiences and all(e["item"]["not_applicable_when"].startswith("gate 2") for e in experiences)


def test_avoid_strategies_from_past_runs_go_last(tmp_path: Path) -> None:
    store = ExperienceStore(tmp_path / "memory.sqlite")
    for n in range(3):
        store.record_attempt("old-run", f"c{n}", "launch_config", False, device="cuda")
    store.close()
    _, journal, _ = run(tmp_path, iterations=1, plans=2)
    assert kinds(journal, "memory_snapshot")[0]["value"] == ["launch_config"]
    assert [p["plan"]["family"] for p in kinds(journal, "plan")][0] != "launch_config"


def test_a_killed_run_resumes_without_redoing_recorded_work(tmp_path: Path) -> None:
    settings = dict(beam_width=2, plans=2, iterations=3, early_stop=False)
    reference, reference_journal, _ = run(tmp_path / "reference", **settings)
    killed = StandInEvaluator(stop_after_screens=5)
    config = OptimizeConfig(run_root=str(tmp_path / "runs"), memory_path=str(tmp_path / "memory.sqlite"), **settings)
    with pytest.raises(KeyboardInterrupt):
        optimize(ELEMENTWISE, config=config, evaluator=killed)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    journal_path = run_dir / "journal.jsonl"
    before = journal_path.read_text().splitlines()
    with open(journal_path, "a") as handle:
        handle.write('{"seq": 999, "kind": "scr')  # torn by the kill
    fresh = StandInEvaluator()
    result = optimize("", config=OptimizeConfig(run_root=str(tmp_path / "runs")), resume=run_dir.name, evaluator=fresh)
    after = journal_path.read_text().splitlines()
    assert after[: len(before)] == before  # nothing recorded was lost or rewritten
    entries = [json.loads(line) for line in after]
    assert [e["seq"] for e in entries] == list(range(len(entries)))
    keys = Counter((e["kind"], e["key"]) for e in entries if "key" in e)
    assert max(keys.values()) == 1  # every recorded result was reused, none measured twice
    total = len(kinds(entries, "candidate"))
    assert fresh.calls["screen"] == total - 5  # the 5 screens recorded before the kill were replayed
    assert fresh.screened and all(s not in killed.screened for s in fresh.screened)
    assert any(e["kind"] == "resumed" and e["dropped_torn_line"] for e in entries)
    assert result.decision == reference.decision
    assert result.kernels[0]["kernel_speedup"] == pytest.approx(reference.kernels[0]["kernel_speedup"])
    assert len(kinds(entries, "candidate")) == len(kinds(reference_journal, "candidate"))
    assert json.loads((run_dir / "result.json").read_text())["decision"] == result.decision


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    config = OptimizeConfig(run_root=str(tmp_path / "runs"))
    with pytest.raises(OptimizeError, match="no such file"):
        optimize(str(tmp_path / "missing.py"), config=config, evaluator=StandInEvaluator())
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptimizeError, match="no readable Inductor dump"):
        optimize(str(tmp_path / "empty"), config=config, evaluator=StandInEvaluator())
    with pytest.raises(OptimizeError, match="no Triton kernel named nope.*triton_poi_fused_add_mul_sigmoid_sub_tanh_0"):
        optimize(ELEMENTWISE, kernel="nope", config=config, evaluator=StandInEvaluator())
    with pytest.raises(OptimizeError, match="no run to resume"):
        optimize("", config=config, resume="no-such-run", evaluator=StandInEvaluator())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_resume_refuses_a_changed_dump(tmp_path: Path) -> None:
    dump = tmp_path / "dump" / "output_code.py"
    dump.parent.mkdir()
    dump.write_text(Path(ELEMENTWISE).read_text())
    result, _, _ = run(tmp_path, str(dump), iterations=1, plans=1)
    dump.write_text(dump.read_text() + "\n# edited\n")
    with pytest.raises(OptimizeError, match="changed since run"):
        optimize("", config=OptimizeConfig(run_root=str(tmp_path / "runs")), resume=result.run_id,
                 evaluator=StandInEvaluator())


def test_looped_reduction_search_finds_the_single_read_rewrite(tmp_path: Path) -> None:
    result, journal, _ = run(tmp_path, RMSNORM, iterations=2, plans=3, beam_width=2)
    families = {c["proposal"]["family"] for c in kinds(journal, "candidate")}
    assert "single_read" in families
    assert result.decision == "optimized"
    assert result.kernels[0]["best_family"] in ("single_read", "launch_config", "mask_removal")


class ProfiledEvaluator(StandInEvaluator):
    """Serves the shared H200 ncu CSV of the rmsnorm kernel, with Speed-of-Light figures set per test."""

    def __init__(self, memory_pct: float, compute_pct: float):
        super().__init__()
        from kernelopt_core.measure.ncu import parse_ncu_csv

        text = (H200_DUMPS / "ncu" / "rmsnorm_sections.csv").read_text()
        self.metrics = parse_ncu_csv(text)[0].to_json()
        self.metrics.update(memory_pct=memory_pct, compute_pct=compute_pct)

    def profile(self, kernel: str, sections: tuple[str, ...],
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        self.calls["profile"] += 1
        return {"metrics": self.metrics}


@pytest.mark.parametrize("memory,compute,tier,first", [
    # the two r0 passes over x in the source are a re-reads cause: its family goes first
    (60.0, 20.0, "memory-bound", ["single_read", "launch_config", "vector_hints", "eviction_hints"]),
    (20.0, 60.0, "compute-bound", ["fast_math", "launch_config"]),
])
def test_the_analysts_tier_guides_the_offline_plans(tmp_path: Path, memory: float, compute: float, tier: str,
                                                      first: list[str]) -> None:
    result, journal, _ = run(tmp_path, RMSNORM, ProfiledEvaluator(memory, compute), iterations=1,
                             plans=len(first), early_stop=False)
    (brief,) = kinds(journal, "brief")
    assert brief["value"]["tier"] == tier
    assert any("SOL memory" in e for e in brief["value"]["evidence"])
    assert brief["value"]["paper_tier"] == ("memory-bound" if memory > compute else "compute-bound")
    assert [p["plan"]["family"] for p in kinds(journal, "plan")] == first
    assert "SpeedOfLight" in kinds(journal, "ncu_request")[0]["request"]["sections"]
    saved = json.loads(Path(result.run_dir, "ncu", f"{brief['kernel']}.json").read_text())
    assert saved["metrics"]["memory_pct"] == memory


class MeasuredEvaluator(ProfiledEvaluator):
    """The rmsnorm ncu CSV with DRAM byte counters, and the device's peaks."""

    def __init__(self, dram_read: float, duration_ns: float):
        super().__init__(85.0, 20.0)
        self.metrics.update(dram_read_bytes=dram_read, dram_write_bytes=8192 * 4096 * 4.0, duration_ns=duration_ns)

    def peaks(self) -> Any:
        from kernelopt_core.measure.peaks import DevicePeaks

        self.calls["peaks"] += 1
        return DevicePeaks(gpu="NVIDIA H200", copy_bytes_per_s=4.243e12, matmul_flops_per_s=790e12,
                           measured_at="2026-11-30", sm_count=132, l2_bytes=60 * 2**20)


def test_the_speed_of_light_evidence_reaches_the_brief_and_the_rewrite_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.analyst import EVIDENCE_KEYS
    from kernelopt_core.search.agents import planner as planner_module

    seen: list[dict[str, Any]] = []
    real = planner_module.offline_plans

    def spy(request: Any) -> Any:
        seen.append(dict(request.context.evidence))
        return real(request)

    monkeypatch.setattr(planner_module, "offline_plans", spy)
    ideal = 2 * 8192 * 4096 * 4 + 4096 * 4  # x and the weight read once, the output written once
    evaluator = MeasuredEvaluator(dram_read=2 * 8192 * 4096 * 4.0, duration_ns=120_000.0)
    result, journal, _ = run(tmp_path, RMSNORM, evaluator, iterations=1, plans=2, early_stop=False)
    assert evaluator.calls["peaks"] == 1 and len(kinds(journal, "peaks")) == 1  # measured once, journaled
    (brief,) = kinds(journal, "brief")
    sol = brief["value"]["speed_of_light"]
    assert list(sol) == list(EVIDENCE_KEYS)
    assert sol["ideal_bytes"] == ideal and sol["sol_pct"] == pytest.approx(100 * ideal / (120e-6 * 4.243e12))
    assert sol["traffic_ratio"] == pytest.approx(3 * 8192 * 4096 * 4 / ideal) and sol["causes"][0] == "re-reads"
    assert brief["value"]["tier"] == "memory-bound" and brief["value"]["paper_tier"] == "near-optimal"
    assert brief["value"]["evidence"][0].startswith("speed of light 52.7%")
    assert seen and all(list(e) == list(EVIDENCE_KEYS) for e in seen)
    assert seen[0]["sol_pct"] == sol["sol_pct"] and seen[0]["launch_args"][0]["name"] == "in_ptr0"
    assert [p["plan"]["family"] for p in kinds(journal, "plan")][0] == "single_read"  # the re-reads cause first
    kernel = result.kernels[0]
    assert kernel["sol_pct"] == sol["sol_pct"] and kernel["traffic_ratio"] == sol["traffic_ratio"]
    assert result.decision == "optimized" and kernel["decision"] == "optimized"
    assert kernel["sol_after_pct"] == pytest.approx(sol["sol_pct"] * kernel["kernel_speedup"])
    report = Path(result.run_dir, "report.md").read_text()
    assert "| 53% | 1.50x | re-reads" in report


def test_a_kernel_at_the_speed_of_light_is_not_searched_unless_forced(tmp_path: Path) -> None:
    # x read once and the output written once (traffic 1.00x) in 60 us: 105% of the copy bandwidth
    at_limit = MeasuredEvaluator(dram_read=8192 * 4096 * 4.0, duration_ns=60_000.0)
    result, journal, _ = run(tmp_path, RMSNORM, at_limit, iterations=1, plans=2)
    assert at_limit.calls["screen"] == 0
    (entry,) = kinds(journal, "not_searched")
    assert entry["reason"].startswith("already at 105% of the speed of light with DRAM traffic 1.00x")
    assert result.decision == "matched" and entry["reason"] in result.reason
    assert result.reason.endswith("the compiler's code is kept")
    (kernel,) = result.kernels
    assert kernel["decision"] == "matched" and kernel["not_searched"] == entry["reason"] and kernel["candidates"] == 0
    forced_evaluator = MeasuredEvaluator(dram_read=8192 * 4096 * 4.0, duration_ns=60_000.0)
    forced, journal, _ = run(tmp_path, RMSNORM, forced_evaluator, force=True, iterations=1, plans=1)
    assert forced_evaluator.calls["screen"] >= 1 and not kinds(journal, "not_searched")
    slower = MeasuredEvaluator(dram_read=8192 * 4096 * 4.0, duration_ns=70_000.0)  # 95%: it is searched
    run(tmp_path, RMSNORM, slower, iterations=1, plans=1)
    assert slower.calls["screen"] >= 1


class UnverifiableEvaluator(StandInEvaluator):
    """Every screen's own check fails (out of memory) except those ``quarantine`` marks as hostile."""

    def __init__(self, quarantine: Callable[[str], bool] = lambda source: False):
        super().__init__()
        self.quarantine = quarantine

    def screen(self, kernel: str, source: str) -> Screen:
        self.calls["screen"] += 1
        self.screened.append(source)
        if self.quarantine(source):
            return Screen(False, 2, "gate 2 (kernel): loading it: PermissionError: [Errno 13] Permission denied",
                          [{"gate": 2, "passed": False}], quarantined=True,
                          containment={"pid": 4242, "contained": True})
        return Screen(False, 2, "gate 2 (kernel) could not verify the candidate: the check ran out of memory",
                      [{"gate": 2, "passed": False, "could_not_verify": True}], could_not_verify=True)


def test_could_not_verify_is_neither_a_rejection_nor_experience(tmp_path: Path) -> None:
    result, journal, evaluator = run(tmp_path, evaluator=UnverifiableEvaluator(), iterations=1, beam_width=1,
                                     plans=2)
    assert evaluator.calls["screen"] >= 1 and evaluator.calls["time"] == 0
    assert result.decision == "fallback" and "could be verified" in result.reason
    assert result.kernels[0]["could_not_verify"] == evaluator.calls["screen"]
    assert result.kernels[0]["rejections"] == {}
    assert not kinds(journal, "experience")  # nothing learnt from the check's own failure
    assert len(kinds(journal, "could_not_verify")) == evaluator.calls["screen"]
    report = Path(result.run_dir, "report.md").read_text()
    assert "## Could not verify" in report and "## Rejected candidates" not in report


def test_a_quarantined_candidate_is_named_in_the_journal_and_report(tmp_path: Path) -> None:
    hostile = UnverifiableEvaluator(quarantine=lambda source: True)
    result, journal, _ = run(tmp_path, evaluator=hostile, iterations=1, beam_width=1, plans=1)
    entries = kinds(journal, "quarantine")
    assert entries and entries[0]["containment"]["pid"] == 4242 and entries[0]["source_hash"]
    assert result.kernels[0]["quarantined"][0]["candidate"] == entries[0]["candidate"]
    report = Path(result.run_dir, "report.md").read_text()
    assert "## Quarantined candidates" in report and "process 4242" in report


class FullBatteryRejects(StandInEvaluator):
    """Every candidate passes the screen; gate 2's full battery, which finalize runs first, rejects it."""

    def finalize(self, candidates: dict[str, str], gates: tuple[int, ...]) -> CascadeResult:
        self.calls["finalize"] += 1
        self.finalized.append(gates)
        reason = "full battery: k, seed 1337, previous outputs left in the buffers: returned a stale result"
        return CascadeResult(False, 2, f"gate 2 (kernel) rejected the candidate: {reason}",
                             [GateVerdict(2, "kernel", False, reason)])


def test_finalists_the_full_battery_rejects_are_never_accepted(tmp_path: Path) -> None:
    # launch-config candidates 1.11x faster: within reach of the end-to-end gate, so they are finalists
    faster = FullBatteryRejects(latency=lambda source: 0.9 if "fixed_config" in source else 1.0)
    result, journal, evaluator = run(tmp_path, evaluator=faster, iterations=1, plans=2)
    assert evaluator.finalized and result.decision == "fallback"
    assert "gate 2's full battery" in result.reason and "stale result" in result.reason
    assert all(not f["accepted"] and f["failed_gate"] == 2 for f in kinds(journal, "finalist"))

