"""The ncu profile's cost on the CPU: its command line and environment, the runner's steps, the sections.

No ncu here: a stand-in ncu logs its command line and the environment it gives the program, runs the real
runner (``kernelopt_core.measure.run_graph``) on the CPU backend when asked, and prints a shared CSV.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelopt_core.analyst import analyze_kernel
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.measure.ncu import ANALYST_SECTIONS, DEFAULT_SECTIONS, KernelMetrics, build_ncu_command
from kernelopt_core.measure.ncu_profile import RUNNER_ENV, profile_graph, runner_env
from kernelopt_core.measure.peaks import DevicePeaks
from kernelopt_core.measure.run_graph import _watch_tuning, program_steps, tuned_kernels

RMSNORM_KERNEL = "triton_red_fused_add_mean_mul_pow_rsqrt_0"

STAND_IN_NCU = r'''#!{python}
import json, os, re, subprocess, sys
args = sys.argv[1:]
with open(os.environ["STAND_IN_NCU_LOG"], "a") as handle:
    handle.write(json.dumps({{"args": args, "compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")}})
                 + "\n")
with_value = {{"--clock-control", "--target-processes", "--profile-from-start", "--section", "-k",
              "--launch-skip", "--launch-count", "--print-units", "--metrics"}}
i, program = 0, []
while i < len(args):
    if args[i] in with_value:
        i += 2
    elif args[i] == "--csv":
        i += 1
    else:
        program = args[i:]
        break
if os.environ.get("STAND_IN_NCU_RUN") == "1":
    done = subprocess.run(program)
    if done.returncode != 0:
        sys.exit(done.returncode)
name = re.match(r"regex:\^\((.*?)[|)]", args[args.index("-k") + 1]).group(1).replace("\\", "")
sys.stdout.write(open(os.environ["STAND_IN_NCU_CSV"]).read().replace("{kernel}", name))
'''


@pytest.fixture()
def stand_in_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, h200_dumps: Path) -> Path:
    script = tmp_path / "ncu"
    script.write_text(STAND_IN_NCU.format(python=sys.executable, kernel=RMSNORM_KERNEL))
    script.chmod(0o755)
    log = tmp_path / "ncu_calls.jsonl"
    monkeypatch.setenv("KERNELOPT_NCU", str(script))
    monkeypatch.setenv("STAND_IN_NCU_LOG", str(log))
    monkeypatch.setenv("STAND_IN_NCU_CSV", str(h200_dumps / "ncu" / "rmsnorm_sections.csv"))
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")  # the user's own setting: not the runner's
    return log


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_target_processes_on_the_command_line() -> None:
    command = build_ncu_command(["python", "-m", "runner"], ncu="ncu")
    assert command[command.index("--target-processes") + 1] == "all"  # a user's harness may launch from a child
    only = build_ncu_command(["python", "-m", "runner"], ncu="ncu", target_processes="application-only")
    assert only[only.index("--target-processes") + 1] == "application-only"
    assert only[-3:] == ["python", "-m", "runner"]
    with pytest.raises(ValueError, match="application-only"):
        build_ncu_command(["p"], target_processes="everything")


def test_the_runner_alone_is_profiled_and_compiles_in_its_own_process(stand_in_ncu: Path, h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    profile_graph(graph, gpu="NVIDIA H200", sections=ANALYST_SECTIONS)
    (call,) = _calls(stand_in_ncu)
    args = call["args"]
    assert args[args.index("--target-processes") + 1] == "application-only"
    assert call["compile_threads"] == "1"  # no pool of compile workers started under ncu
    sections = [args[i + 1] for i, a in enumerate(args) if a == "--section"]
    assert sections == list(ANALYST_SECTIONS)
    assert args[args.index("-m") + 1] == "kernelopt_core.measure.run_graph"


def test_runner_env_keeps_the_package_and_the_caller_may_override() -> None:
    env = runner_env()
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == RUNNER_ENV["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert str(Path(__file__).resolve().parents[1]) in env["PYTHONPATH"].split(":")
    assert runner_env({"TORCHINDUCTOR_COMPILE_THREADS": "4"})["TORCHINDUCTOR_COMPILE_THREADS"] == "4"


def test_runner_steps_under_the_stand_in_on_the_cpu_backend(stand_in_ncu: Path, cpu_example_dump: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The real runner prints its steps; the profile reads where ncu's wall time went from them."""
    monkeypatch.setenv("STAND_IN_NCU_RUN", "1")
    graph = parse_output_code(str(cpu_example_dump))
    profiled = profile_graph(graph, device="cpu", warmup=1, iters=1, gpu="cpu-test")
    steps = profiled.steps_s
    assert list(steps) == ["start_the_profiler_and_python", "import_torch_and_start_cuda", "load_the_graph",
                           "make_inputs", "warm_up", "profiled_calls", "exit_and_report"]
    assert all(seconds >= 0 for seconds in steps.values())
    assert sum(steps.values()) <= profiled.wall_s + 0.5  # parts of ncu's wall time (clocks to the millisecond)
    assert profiled.tuned is not None  # the runner said which kernels tuned (the interpreter tunes none)
    assert profiled.to_json()["steps_s"] == steps


def test_program_steps_and_tuned_kernels_from_text() -> None:
    text = ("RUN-GRAPH-CLOCK started 100.500\nnoise\nRUN-GRAPH-STEP import_torch_and_start_cuda 4.250\n"
            "RUN-GRAPH-STEP load_the_graph 9.000\nRUN-GRAPH-TUNED k_a k_b\nRUN-GRAPH-STEP warm_up 1.000\n"
            "RUN-GRAPH-CLOCK done 115.000\n")
    assert program_steps(text, started=100.0, ended=117.0) == {
        "start_the_profiler_and_python": 0.5, "import_torch_and_start_cuda": 4.25, "load_the_graph": 9.0,
        "warm_up": 1.0, "exit_and_report": 2.0}
    assert program_steps(text) == {"import_torch_and_start_cuda": 4.25, "load_the_graph": 9.0, "warm_up": 1.0}
    assert program_steps("nothing printed") == {}
    assert tuned_kernels(text) == ["k_a", "k_b"]
    assert tuned_kernels("RUN-GRAPH-TUNED\n") == []
    assert tuned_kernels("no line") is None


class _Autotuner:
    """Inductor's CachingAutotuner as far as the runner's watch sees it."""

    def __init__(self) -> None:
        self.launchers: list[Any] = []

    def autotune_to_one_config(self) -> str:
        return "tuned"

    def coordinate_descent_tuning(self) -> str:
        return "descended"

    def run(self, tune: bool) -> None:
        if tune:
            self.autotune_to_one_config()
            self.coordinate_descent_tuning()


def test_the_runner_names_the_kernels_that_tuned() -> None:
    module = SimpleNamespace(k_tunes=_Autotuner(), k_cached=_Autotuner(), not_a_kernel=42, helper=len)
    tuned = _watch_tuning(module)
    module.k_cached.run(tune=False)
    module.k_tunes.run(tune=True)
    assert tuned == ["k_tunes"]
    assert module.k_tunes.autotune_to_one_config() == "tuned"  # the watched methods still do their work


PEAKS = DevicePeaks(gpu="NVIDIA H100 80GB HBM3", copy_bytes_per_s=3.0e12, matmul_flops_per_s=776e12,
                    measured_at="2026-12-06")


def _metrics(memory: float, compute: float, **extra: Any) -> KernelMetrics:
    fields: dict[str, Any] = dict(name="k", duration_ns=2_000_000.0, memory_pct=memory, dram_pct=memory,
                                  compute_pct=compute, achieved_occupancy_pct=70.0, registers=32, block_size=256,
                                  grid_size=1024, waves_per_sm=0.6, l2_hit_pct=12.0, dram_bytes_per_s=1.5e12,
                                  theoretical_occupancy_pct=100.0, sm_count=132)
    fields.update(extra)
    return KernelMetrics(**fields)


# The figures of the three sections the offline search no longer asks for (ComputeWorkloadAnalysis,
# SchedulerStats, WarpStateStats), at values that would move any rule that read them.
DROPPED = {"sm_busy_pct": 99.0, "issue_slots_busy_pct": 99.0, "no_eligible_pct": 97.0,
           "warp_cycles_per_issued": 400.0}


@pytest.mark.parametrize("memory, compute, extra", [
    (62.0, 20.0, {}), (20.0, 85.0, {}), (15.0, 10.0, {"achieved_occupancy_pct": 12.0}),
    (40.0, 30.0, {"registers": 255, "theoretical_occupancy_pct": 25.0}), (88.0, 20.0, {"waves_per_sm": 8.0}),
])
def test_the_analyst_reads_nothing_of_the_dropped_sections(memory: float, compute: float,
                                                          extra: dict[str, Any]) -> None:
    without = analyze_kernel(_metrics(memory, compute, **extra), None, PEAKS, None)
    with_them = analyze_kernel(_metrics(memory, compute, **extra, **DROPPED), None, PEAKS, None)
    assert with_them.tier == without.tier and with_them.paper_tier == without.paper_tier
    assert [d.to_json() for d in with_them.directions] == [d.to_json() for d in without.directions]
    assert [c.to_json() for c in with_them.causes] == [c.to_json() for c in without.causes]
    assert with_them.evidence == without.evidence


def test_the_offline_profiler_asks_for_the_analysts_sections() -> None:
    from kernelopt_core.search.agents.context import KernelBrief
    from kernelopt_core.search.agents.profiler import Profiler, default_request

    request = Profiler(None, None).choose(KernelBrief(name="k", kind="red", device="cuda", original_source=""))
    assert request.sections == ANALYST_SECTIONS and request.sections[0] == "SpeedOfLight"
    assert set(ANALYST_SECTIONS) < set(DEFAULT_SECTIONS)
    assert default_request().sections == DEFAULT_SECTIONS  # a model's planner reads every figure
