"""``kernelopt profile``: from an ncu CSV, through (fake) ncu, and timed on the CPU backend."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.cli.main import main
from kernelopt_core.dispatch import analyze
from kernelopt_core.events import EVENT_PREFIX, parse_event_line
from kernelopt_core.measure.launch_timing import time_launches

RMSNORM_KERNEL = "triton_red_fused_add_mean_mul_pow_rsqrt_0"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_ncu_csv_json(capsys: pytest.CaptureFixture[str], h200_dumps: Path) -> None:
    csv_path = str(h200_dumps / "ncu" / "rmsnorm_sections.csv")
    code, data = _json(capsys, ["profile", "--ncu-csv", csv_path, "--json"])
    assert code == 0
    assert data["source"] == "ncu-csv"
    (row,) = data["kernels"]
    assert row["name"] == RMSNORM_KERNEL
    assert row["duration_ns"] == 62_080
    assert row["time_share"] == 1.0
    # no dump and no peaks: the ideal bytes and the speed of light are unknown, so SOL memory 81% alone
    # is no longer near-optimal; the paper's reading stays beside it
    assert row["tier"] == "memory-bound" and row["paper_tier"] == "near-optimal"
    assert row["sol_pct"] is None and row["ideal_bytes"] is None and row["traffic_ratio"] is None
    assert row["sol_unknown_reason"].startswith("unknown: no launch arguments")
    assert row["dram_pct"] == 81.25 and row["sm_pct"] == 21.96 and row["occupancy_pct"] == 90.14
    assert row["registers"] == 28
    assert [r["name"] for r in row["rules"]] == ["SOLBottleneck"]
    assert row["launches"] == 6 and row["graph"] is None
    assert row["evidence"] and [d["name"] for d in row["directions"]] == ["vectorize-loads", "eviction-hints"]


PEAKS_JSON = {"gpu": "NVIDIA H200", "copy_bytes_per_s": 4.243e12, "matmul_flops_per_s": 7.9e14,
              "measured_at": "2026-11-30", "sm_count": 132, "l2_bytes": 62_914_560}


def test_ncu_csv_with_dump_and_peaks_gives_exact_speed_of_light(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                               h200_dumps: Path) -> None:
    """The constructed fixture (tests/fixtures/ncu/README.md): ncu's SOL memory says near-optimal,
    the kernel moves 1.5x its ideal bytes at 65% of speed of light."""
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps(PEAKS_JSON))
    csv_path = Path(__file__).parent / "fixtures" / "ncu" / "constructed_sol_metrics.csv"
    code, data = _json(capsys, ["profile", str(h200_dumps / "softmax"), "--ncu-csv", str(csv_path),
                                "--peaks", str(peaks), "--json"])
    assert code == 0 and data["peaks"]["copy_bytes_per_s"] == 4.243e12
    softmax, elementwise = data["kernels"]
    assert softmax["ideal_bytes"] == 2 * 4096 * 8192 * 4  # input read once, output written once
    assert softmax["dram_read_bytes"] == 268_435_456 and softmax["dram_write_bytes"] == 134_217_728
    assert softmax["traffic_ratio"] == 1.5
    assert softmax["sol_pct"] == 100 * 268_435_456 / (97_330e-9 * 4.243e12)
    assert round(softmax["sol_pct"], 2) == 65.0 and softmax["sol_time_source"] == "ncu"
    assert softmax["tier"] == "memory-bound" and softmax["paper_tier"] == "near-optimal"
    assert softmax["causes"][0] == "re-reads" and softmax["passes"] == 2
    assert softmax["sol_text"] == "65% of speed of light · reads 1.5× the minimum"
    assert softmax["l2_hit_pct"] == 33.4 and softmax["sector_efficiency_pct"] == 100.0
    # the elementwise kernel belongs to another dump: its DRAM bytes are parsed, its ideal bytes unknown
    assert elementwise["dram_bytes"] == 201_326_592 and elementwise["ideal_bytes"] is None
    assert elementwise["traffic_ratio"] is None and elementwise["sol_pct"] is None
    assert main(["profile", "--ncu-csv", str(csv_path), "--peaks", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read" in capsys.readouterr().err.replace("\n", "")


def test_ncu_csv_with_the_dump_adds_kind_and_graph(capsys: pytest.CaptureFixture[str], h200_dumps: Path) -> None:
    code, data = _json(capsys, ["profile", str(h200_dumps / "rmsnorm"), "--ncu-csv",
                                str(h200_dumps / "ncu" / "rmsnorm_sections.csv"), "--json"])
    assert code == 0
    row = data["kernels"][0]
    assert row["kind"] == "red" and row["graph"].endswith("rmsnorm/output_code.py")


def test_ncu_csv_table(capsys: pytest.CaptureFixture[str], h200_dumps: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setenv("COLUMNS", "200")  # read when printing (setting console.width would outlive the test)
    assert main(["profile", "--ncu-csv", str(h200_dumps / "ncu" / "rmsnorm_sections.csv")]) == 0
    out = capsys.readouterr().out
    assert "memory-bound" in out and "62.1 us" in out and "81.2%" in out and "SOLBottleneck" in out
    assert "paper's SOL-memory tier: near-optimal" in out


def test_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, h200_dumps: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("not an ncu report\n")
    assert main(["profile", "--ncu-csv", str(bad)]) == 2
    assert "bad.csv" in capsys.readouterr().err
    assert main(["profile", "--ncu-csv", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv: cannot read" in capsys.readouterr().err.replace("\n", "")
    assert main(["profile", "--ncu-csv", str(h200_dumps / "ncu" / "rmsnorm_sections.csv"), "--kernel", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["profile", str(tmp_path / "nowhere")]) == 2
    assert main(["profile"]) == 2


def test_events_mode_writes_only_event_lines(capsys: pytest.CaptureFixture[str], h200_dumps: Path) -> None:
    assert main(["profile", "--ncu-csv", str(h200_dumps / "ncu" / "rmsnorm_sections.csv"), "--events", "--json"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines and all(line.startswith(EVENT_PREFIX) for line in lines)
    events = [parse_event_line(line) for line in lines]
    assert events[-1]["event"] == "result"
    assert events[-1]["result"]["kernels"][0]["paper_tier"] == "near-optimal"
    assert any(e["event"] == "progress" for e in events[:-1])


def test_profile_through_fake_ncu(capsys: pytest.CaptureFixture[str], tmp_path: Path, h200_dumps: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    csv_text = (h200_dumps / "ncu" / "rmsnorm_sections.csv").read_text()
    (tmp_path / "report.csv").write_text(csv_text)
    fake = tmp_path / "ncu"
    fake.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(tmp_path / 'report.csv')!r}).read())\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KERNELOPT_NCU", str(fake))
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path / "cache"))
    code, data = _json(capsys, ["profile", str(h200_dumps / "rmsnorm"), "--json"])
    assert code == 0
    assert data["source"] == "ncu" and data["ncu_available"] is True
    row = data["kernels"][0]
    assert row["name"] == RMSNORM_KERNEL and row["source"] == "ncu" and row["paper_tier"] == "near-optimal"
    # no GPU here: the launch arguments come from the wrapper's allocations, the peaks are missing
    assert row["ideal_bytes"] == 2 * 8192 * 4096 * 4 + 4096 * 4
    assert row["ideal_source"] == "the wrapper's allocations (static, not run)"
    assert row["sol_pct"] is None and "copy bandwidth" in row["sol_unknown_reason"]
    assert data["graph_sol"][0]["sol_pct"] is None
    assert list((tmp_path / "cache" / "ncu").glob("*.json"))  # cached for next time


def test_cpu_graph_is_timed_without_ncu(capsys: pytest.CaptureFixture[str], cpu_example_dump: Path) -> None:
    code, data = _json(capsys, ["profile", str(cpu_example_dump), "--json"])
    assert code == 0
    assert data["source"] == "timing" and data["ncu_available"] is False
    assert any("ncu not available" in note for note in data["notes"])
    (row,) = data["kernels"]
    assert row["tier"] == "unknown" and row["source"] == "timing"
    assert row["duration_ns"] > 0
    assert 0.0 < row["time_share"] <= 1.0 and row["time_share_of"] == "graph"
    assert row["timing_path"] == "module-call" and row["device"] == "cpu"
    assert row["directions"][0]["name"] == "profile-on-gpu"
    # CPU backend: the ideal bytes still come from the recorded launch arguments; SOL is unknown, and why
    assert row["ideal_bytes"] > 0 and row["ideal_source"] == "captured launch arguments"
    assert row["sol_pct"] is None and "CPU backend" in row["sol_unknown_reason"]
    (graph,) = data["graph_sol"]
    assert graph["ideal_bytes"] > 0 and graph["sol_pct"] is None and "CPU backend" in graph["unknown_reason"]


def test_device_for_graph() -> None:
    from kernelopt_core.measure.devices import DeviceMismatch, device_for_graph

    assert device_for_graph("auto", "cpu") == "cpu"
    assert device_for_graph("auto", "cuda") == "cuda:0"
    assert device_for_graph("cuda", "cuda") == "cuda:0"
    assert device_for_graph("cuda:1", "cuda") == "cuda:1"
    with pytest.raises(DeviceMismatch, match="compiled for cpu and cannot run on cuda:0"):
        device_for_graph("cuda", "cpu", "g")
    with pytest.raises(DeviceMismatch, match="unknown device"):
        device_for_graph("tpu", "cuda")


def time_launches_inside_task(payload: dict) -> dict:
    """Runs inside a cpu worker: time_launches must not start a nested worker there."""
    from kernelopt_core.measure import worker as worker_module

    graph = parse_output_code(payload["dump"])
    timing = time_launches(graph, device="auto", iters=2)
    return {"timing": timing.to_json(), "nested_workers": len(worker_module._WORKERS)}


def test_time_launches_inside_a_worker_feeds_dispatch(cpu_example_dump: Path) -> None:
    from kernelopt_core.measure.launch_timing import launch_timing_from_json
    from kernelopt_core.measure.worker import get_worker

    outcome = get_worker("cpu").call("tests.test_profile_cli:time_launches_inside_task",
                                     {"dump": str(cpu_example_dump)}, timeout_s=300)
    assert outcome.ok, outcome.failure
    assert outcome.value["nested_workers"] == 0  # ran in the worker's own process
    timing = launch_timing_from_json(outcome.value["timing"])
    graph = parse_output_code(str(cpu_example_dump))
    assert timing.device == "cpu" and timing.path == "module-call" and timing.iters == 2
    assert set(timing.launch_times_ms) == {item.order for item in graph.timeline()}
    assert all(ms > 0 for ms in timing.launch_times_ms.values())
    assert timing.total_ms >= sum(timing.launch_times_ms.values())
    report = analyze(graph, timing.launch_times_ms, timing.overheads, timing.path)
    assert report.timed and report.timing_path == "module-call"
    assert report.triton_share + report.vendor_share + sum(o.share for o in report.overheads) == pytest.approx(1.0)
