"""The speed-of-light survey script (benchmarks/gpu/sol_survey.py): its analysis of one graph and
its report, run without anthropic, pygls or watchdog (the GPU machine has none of them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import importlib.util, json, sys
for name in ("anthropic", "pygls", "watchdog", "lsprotocol"):
    sys.modules[name] = None  # any import of them fails
spec = importlib.util.spec_from_file_location("sol_survey", sys.argv[1] + "/benchmarks/gpu/sol_survey.py")
survey = importlib.util.module_from_spec(spec)
sys.modules["sol_survey"] = survey  # dataclasses look their module up there
spec.loader.exec_module(survey)

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.measure.launch_timing import LaunchTiming
from kernelopt_core.measure.ncu import parse_ncu_csv, summarize_launches
from kernelopt_core.measure.peaks import DevicePeaks
from kernelopt_core.measure.traffic import IdealBytes, static_graph_traffic

root = sys.argv[1]
graph = parse_output_code(root + "/tests/fixtures/inductor-h200-torch2.11/softmax/output_code.py")
(launch,) = static_graph_traffic(graph)
metrics = {m.name: m for m in summarize_launches(parse_ncu_csv(open(
    root + "/tests/fixtures/ncu/constructed_sol_metrics.csv").read()))}
timing = LaunchTiming(graph="softmax", launch_times_ms={launch.order: 0.1}, total_ms=0.125, overheads=[],
                      path="module-call", device="cuda:0", iters=20, launch_traffic={launch.order: launch},
                      graph_ideal=IdealBytes(134217728, 134217728, "graph inputs and outputs"))
peaks = DevicePeaks(gpu="NVIDIA H200", copy_bytes_per_s=4.243e12, matmul_flops_per_s=7.9e14, measured_at="x",
                    sm_count=132, l2_bytes=62914560)
entry = {"problem": "softmax", **survey._analyse(graph, timing, metrics, peaks, cpu=False)}
results = {"environment": {"date": "d", "gpu": "NVIDIA H200"}, "scale": "h200", "sections": list(survey.SECTIONS),
           "peaks": peaks.to_json(), "problems": {"softmax": entry, "broken": {"problem": "broken", "error": "boom"}},
           "skipped": ["relu: out of time"]}
blocked = sorted(n for n in ("anthropic", "pygls", "watchdog") if sys.modules.get(n) is not None)
print(json.dumps({"entry": entry, "summary": survey.summary(results), "markdown": survey.markdown(results),
                  "names": survey.problem_names(), "blocked": blocked}, default=str))
'''


def test_survey_analysis_and_report_without_the_editor_packages() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    entry = data["entry"]
    # the case: ncu's SOL memory says near-optimal, the kernel runs at 65% of speed of light
    assert entry["main_kernel"] == "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"
    assert round(entry["baseline_sol_pct"], 2) == 65.0 and entry["traffic_ratio"] == 1.5
    assert entry["paper_tier"] == "near-optimal" and entry["tier"] == "memory-bound"
    assert entry["causes"][0] == "re-reads" and entry["headroom_hidden"] is True
    assert entry["sol_source"] == "ncu"
    # the graph: input and output once over the kernel's ncu time, and over the timed graph
    assert entry["graph_sol_kernels_pct"] == entry["baseline_sol_pct"]
    assert round(entry["graph_sol_module_call_pct"], 1) == round(100 * 268435456 / (0.125e-3 * 4.243e12), 1)
    (kernel,) = entry["kernels"]
    assert kernel["timed_sol_pct"] == 100 * 268435456 / (0.1e-3 * 4.243e12)
    summary = data["summary"]
    assert summary["paper_near_optimal_with_over_25_pct_headroom"] == ["softmax"]
    assert summary["errors"] == ["broken"] and summary["copy_GBps"] == 4243.0
    text = data["markdown"]
    assert "| `softmax` ⚑ |" in text and "| 65% |" in text and "| near-optimal | memory-bound | re-reads" in text
    assert "Not reached: relu: out of time" in text
    names = data["names"]
    assert len(names) >= 20 and names[0] == "softmax_long_rows" and data["blocked"] == []
