"""ncu: CSV parsing with units, the command line, errors, and graph profiling with its cache.

No GPU here: a fake ``ncu`` script stands in for Nsight Compute. It records its arguments,
optionally runs the program it was given (the real runner), and prints the shared H200 CSV with
the kernel name it was asked for.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kernelopt_core.analyst import classify
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.measure.ncu import (
    DEFAULT_SECTIONS,
    NcuError,
    NcuNotFound,
    NcuParseError,
    NcuPermissionDenied,
    build_ncu_command,
    find_ncu,
    kernel_regex,
    parse_ncu_csv,
    parse_number,
    run_ncu,
    summarize_launches,
    to_base_unit,
)
from kernelopt_core.measure.ncu_profile import profile_graph

RMSNORM_KERNEL = "triton_red_fused_add_mean_mul_pow_rsqrt_0"


@pytest.fixture(scope="module")
def rmsnorm_csv(h200_dumps: Path) -> str:
    return (h200_dumps / "ncu" / "rmsnorm_sections.csv").read_text()


def test_shared_csv_parses_to_exact_values(rmsnorm_csv: str) -> None:
    launches = parse_ncu_csv(rmsnorm_csv)
    assert [m.launch_id for m in launches] == [0, 1, 2, 3, 4, 5]
    first = launches[0]
    assert first.name == RMSNORM_KERNEL
    assert first.duration_ns == 62_080
    assert first.memory_pct == 81.25
    assert first.achieved_occupancy_pct == 90.14
    assert first.registers == 28
    assert first.dram_pct == 81.25
    assert first.compute_pct == 21.96
    assert first.block_size == 512 and first.grid_size == 8192
    assert first.dram_bytes_per_s == pytest.approx(3_907_513_402_061.86)
    assert first.sm_count == 132
    assert classify(first.memory_pct, first.compute_pct) == "near-optimal"
    assert first.raw["GPU Speed Of Light Throughput: SM Frequency"] == {"value": 1_967_517_719.07, "unit": "hz"}


def test_rule_rows_with_estimated_speedups(rmsnorm_csv: str) -> None:
    launches = parse_ncu_csv(rmsnorm_csv)
    rules = {r.name: r for r in launches[1].rules}
    assert set(rules) == {"SOLBottleneck", "AchievedOccupancy"}
    occupancy = rules["AchievedOccupancy"]
    assert occupancy.type == "OPT" and occupancy.est_speedup_pct == 11.94 and occupancy.speedup_type == "local"
    assert occupancy.section == "Occupancy"
    assert "88.1%" in occupancy.description
    assert rules["SOLBottleneck"].est_speedup_pct is None
    assert [r.name for r in launches[1].top_rules(3)] == ["AchievedOccupancy", "SOLBottleneck"]


def test_summary_picks_the_median_launch(rmsnorm_csv: str) -> None:
    (summary,) = summarize_launches(parse_ncu_csv(rmsnorm_csv))
    assert summary.launches == 6
    assert summary.duration_ns_range == (61_056, 62_208)
    # durations sorted: 61056, 61120, 62048, 62080 (ID 0), 62080 (ID 5), 62208 -> index 3 is ID 0
    assert summary.launch_id == 0 and summary.duration_ns == 62_080 and summary.achieved_occupancy_pct == 90.14


@pytest.mark.parametrize(("value", "unit", "expected"), [
    (62.08, "us", (62_080.0, "ns")),
    (62.08, "usecond", (62_080.0, "ns")),
    (1.5, "msecond", (1_500_000.0, "ns")),
    (900.0, "nsecond", (900.0, "ns")),
    (3.9, "Tbyte/s", (3.9e12, "byte/s")),
    (3.9, "Gbyte/second", (3.9e9, "byte/s")),
    (16.0, "Kbyte", (16_000.0, "byte")),
    (1.96, "cycle/nsecond", (1.96e9, "hz")),
    (1.5, "Ghz", (1.5e9, "hz")),
    (81.25, "%", (81.25, "%")),
    (28.0, "register/thread", (28.0, "register/thread")),
])
def test_units(value: float, unit: str, expected: tuple[float, str]) -> None:
    converted, base = to_base_unit(value, unit)
    assert base == expected[1]
    assert converted == pytest.approx(expected[0])


def test_numbers_with_thousands_separators_and_no_data() -> None:
    assert parse_number("3,197,594,501.72") == pytest.approx(3_197_594_501.72)
    assert parse_number("8,192") == 8192
    assert parse_number("no data") is None and parse_number("n/a") is None and parse_number("") is None
    assert parse_number("PolicySpread") is None


OLD_STYLE = """==PROF== Connected to process 7 (/usr/bin/python3)
some program output, "quoted", with commas
==PROF== Disconnected from process 7
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","7","python3","h","triton_poi_fused_0","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","12.5"
"0","7","python3","h","triton_poi_fused_0","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Memory [%]","%","45.5"
"0","7","python3","h","triton_poi_fused_0","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) [%]","%","12.25"
"0","7","python3","h","triton_poi_fused_0","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Memory Workload Analysis","Memory Throughput","Gbyte/second","1,234.5"
==WARNING== trailing warning
"""


def test_older_ncu_names_and_units_and_header_columns() -> None:
    (m,) = parse_ncu_csv(OLD_STYLE)
    assert m.duration_ns == 12_500
    assert m.memory_pct == 45.5 and m.compute_pct == 12.25
    assert m.dram_bytes_per_s == pytest.approx(1.2345e12)
    assert m.block_size == 128 and m.grid_size == 1024  # from the header columns when no metric rows
    assert m.registers is None and m.rules == []


def test_csv_errors_are_clear() -> None:
    with pytest.raises(NcuParseError, match="no ncu CSV header"):
        parse_ncu_csv("==PROF== nothing profiled\n", source="x.csv")
    with pytest.raises(NcuParseError, match="x.csv.*ERROR.*No kernels were profiled"):
        parse_ncu_csv("==ERROR== No kernels were profiled.\n", source="x.csv")
    with pytest.raises(NcuParseError, match="no 'Metric Name' column"):
        parse_ncu_csv('"ID","Kernel Name","Metric Value"\n"0","k","1"\n')
    with pytest.raises(NcuPermissionDenied, match="ERR_NVGPUCTRPERM"):
        parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                      "Performance Counters on the target device 0.\n")


def test_command_line() -> None:
    command = build_ncu_command(["python", "-m", "runner"], ncu="/x/ncu", kernels=["k_0", "k.1"],
                                launch_skip=3, launch_count=2)
    assert command[:7] == ["/x/ncu", "--csv", "--print-units", "base", "--clock-control", "none",
                           "--target-processes"]
    assert command[-3:] == ["python", "-m", "runner"]
    text = " ".join(command)
    for section in DEFAULT_SECTIONS:
        assert f"--section {section}" in text
    assert len(DEFAULT_SECTIONS) == 7
    # the raw metrics the speed-of-light figures need, in one --metrics list beside the sections
    assert command[command.index("--metrics") + 1] == ("dram__bytes_read.sum,dram__bytes_write.sum,"
                                                       "lts__t_sector_hit_rate.pct,"
                                                       "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
    assert "--metrics" not in build_ncu_command(["p"], metrics=())
    assert "-k regex:^(k_0|k\\.1)$" in text
    assert "--launch-skip 3" in text and "--launch-count 2" in text
    assert "--profile-from-start off" in text
    assert "--profile-from-start" not in " ".join(build_ncu_command(["p"], from_start=True))
    assert kernel_regex(["a"]) == "regex:^(a)$"


def test_missing_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if any(os.path.exists(p) for p in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")):
        pytest.skip("this machine has ncu installed in a standard place")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KERNELOPT_NCU", raising=False)
    with pytest.raises(NcuNotFound, match="KERNELOPT_NCU"):
        find_ncu()


# --- a fake ncu --------------------------------------------------------------------------------

FAKE_NCU = r'''#!{python}
"""Fake ncu: log argv, maybe run the program, print the shared CSV renamed to the -k kernel."""
import json, os, re, subprocess, sys
args = sys.argv[1:]
log = os.environ["FAKE_NCU_LOG"]
with open(log, "a") as handle:
    handle.write(json.dumps(args) + "\n")
if os.environ.get("FAKE_NCU_MODE") == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
missing = os.environ.get("FAKE_NCU_UNKNOWN_METRIC")
if missing and "--metrics" in args and missing in args[args.index("--metrics") + 1].split(","):
    print("==ERROR== Failed to find metric " + missing)
    sys.exit(1)
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
print("==PROF== Connected to process 1 (fake)")
if os.environ.get("FAKE_NCU_RUN") == "1":
    done = subprocess.run(program)
    if done.returncode != 0:
        print("==ERROR== The application returned an error code (%d)." % done.returncode)
        sys.exit(done.returncode)
name = re.match(r"regex:\^\((.*?)[|)]", args[args.index("-k") + 1]).group(1).replace("\\", "")
text = open(os.environ["FAKE_NCU_CSV"]).read().replace("{kernel}", name)
sys.stdout.write(text)
'''


@pytest.fixture()
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, h200_dumps: Path) -> Path:
    script = tmp_path / "ncu"
    script.write_text(FAKE_NCU.format(python=sys.executable, kernel=RMSNORM_KERNEL))
    script.chmod(0o755)
    log = tmp_path / "ncu_calls.jsonl"
    monkeypatch.setenv("KERNELOPT_NCU", str(script))
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(h200_dumps / "ncu" / "rmsnorm_sections.csv"))
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path / "cache"))
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_profile_graph_runs_ncu_once_then_uses_the_cache(fake_ncu: Path, h200_dumps: Path) -> None:
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    first = profile_graph(graph, gpu="NVIDIA H200")
    assert len(_calls(fake_ncu)) == 1
    (args,) = _calls(fake_ncu)
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("-k") + 1] == f"regex:^({RMSNORM_KERNEL})$"
    assert args[args.index("--launch-count") + 1] == "1"  # one launch per call, one profiled call
    assert "kernelopt_core.measure.run_graph" in args and graph.path in args
    assert first.from_cache == [] and first.wall_s > 0
    (kernel,) = first.kernels
    assert kernel.duration_ns == 62_080 and kernel.launches == 6
    again = profile_graph(graph, gpu="NVIDIA H200")
    assert len(_calls(fake_ncu)) == 1  # served from the cache
    assert again.from_cache == [RMSNORM_KERNEL] and again.wall_s == 0
    assert again.kernels[0].to_json() == kernel.to_json()
    other_gpu = profile_graph(graph, gpu="NVIDIA B200")
    assert len(_calls(fake_ncu)) == 2 and other_gpu.from_cache == []  # the GPU is part of the key
    graph.kernels[0].source = graph.kernels[0].source + "\n# edited\n"
    profile_graph(graph, gpu="NVIDIA H200")
    assert len(_calls(fake_ncu)) == 3  # so is the kernel's source
    profile_graph(graph, gpu="NVIDIA H200", use_cache=False)
    assert len(_calls(fake_ncu)) == 4


def test_profile_graph_errors(fake_ncu: Path, h200_dumps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    with pytest.raises(ValueError, match="no Triton kernel named nope"):
        profile_graph(graph, kernels=["nope"], gpu="g")
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    with pytest.raises(NcuPermissionDenied):
        profile_graph(graph, gpu="g")


def test_a_metric_ncu_does_not_know_is_dropped_with_a_note(fake_ncu: Path, h200_dumps: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.measure.ncu import SECTOR_EFFICIENCY_METRIC

    monkeypatch.setenv("FAKE_NCU_UNKNOWN_METRIC", SECTOR_EFFICIENCY_METRIC)
    graph = parse_output_code(str(h200_dumps / "rmsnorm" / "output_code.py"))
    profiled = profile_graph(graph, gpu="NVIDIA H200")
    first, second = _calls(fake_ncu)
    assert SECTOR_EFFICIENCY_METRIC in first[first.index("--metrics") + 1]
    assert SECTOR_EFFICIENCY_METRIC not in second[second.index("--metrics") + 1]
    assert "dram__bytes_read.sum" in second[second.index("--metrics") + 1]
    assert profiled.kernels[0].duration_ns == 62_080
    assert profiled.notes == [f"ncu could not collect {SECTOR_EFFICIENCY_METRIC} here; profiled without it"]


def test_run_ncu_reports_a_failed_program(fake_ncu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_RUN", "1")
    command = build_ncu_command([sys.executable, "-c", "import sys; sys.exit(3)"], ncu=find_ncu(), kernels=["k"])
    with pytest.raises(NcuError, match="status 3"):
        run_ncu(command, timeout_s=60)


def test_runner_under_fake_ncu_on_the_cpu_backend(fake_ncu: Path, cpu_example_dump: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The real runner program runs under (fake) ncu; its output does not confuse the parser."""
    monkeypatch.setenv("FAKE_NCU_RUN", "1")
    graph = parse_output_code(str(cpu_example_dump))
    kernel = graph.kernels[0].name
    profiled = profile_graph(graph, device="cpu", warmup=0, iters=1, gpu="cpu-test")
    assert [k.name for k in profiled.kernels] == [kernel]
    assert profiled.kernels[0].duration_ns == 62_080
    (args,) = _calls(fake_ncu)  # the fake ran the runner and it exited 0, or NcuError was raised
    assert args[args.index("--device") + 1] == "cpu" and args[args.index("--warmup") + 1] == "0"
