"""`kernelopt inspect`: the --json shape other tools rely on, and the readable table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLE_ROWS, H200_DUMPS, H200_GRAPHS

from kernelopt_core.cli.main import main


def _inspect_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["inspect", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_shape_for_all_fixtures(capsys: pytest.CaptureFixture[str]) -> None:
    data = _inspect_json(H200_DUMPS, capsys)
    assert set(data) == {"graphs", "problems"} and data["problems"] == []
    assert sorted(g["name"] for g in data["graphs"]) == H200_GRAPHS
    for graph in data["graphs"]:
        assert {"path", "classification", "kernels", "extern_calls", "launches", "dispatch"} <= set(graph)
        assert Path(graph["path"]).is_file()
        assert graph["classification"] in ("optimizable", "vendor-dominated", "no-triton")
        for kernel in graph["kernels"]:
            assert {"name", "kind", "source", "aten_ops", "line_range"} <= set(kernel)
            start, end = kernel["line_range"]
            assert 0 <= start < end
            assert kernel["kind"] in ("poi", "red", "per", "tem", "other")
            assert "@triton.jit" in kernel["source"]
        for call in graph["extern_calls"]:
            assert call["op"].startswith("extern_kernels.")
        orders = [item["order"] for item in graph["launches"]]
        assert orders == sorted(orders)
        assert {item["type"] for item in graph["launches"]} <= {"triton", "extern"}


def test_json_content_for_one_graph(capsys: pytest.CaptureFixture[str]) -> None:
    data = _inspect_json(H200_DUMPS / "matmul_bias_relu" / "output_code.py", capsys)
    (graph,) = data["graphs"]
    assert graph["name"] == "matmul_bias_relu"
    assert [c["op"] for c in graph["extern_calls"]] == ["extern_kernels.mm"]
    assert [(k["name"], k["kind"]) for k in graph["kernels"]] == [("triton_poi_fused_add_addmm_mul_relu_0", "poi")]
    assert graph["kernels"][0]["aten_ops"] == ["aten.addmm", "aten.relu", "aten.mul", "aten.add"]
    launches = graph["launches"]
    assert [(item["type"], item.get("kernel") or item.get("op")) for item in launches] == [
        ("extern", "extern_kernels.mm"), ("triton", "triton_poi_fused_add_addmm_mul_relu_0")]
    # untimed: no share of graph time (vendor_share means that in every command), launch counts instead
    assert graph["classification"] == "optimizable"
    assert graph["dispatch"]["timed"] is False and graph["dispatch"]["share_basis"] == "launches"
    assert graph["dispatch"]["vendor_share"] is None
    assert graph["dispatch"]["launch_counts"] == {"triton": 1, "vendor": 1, "total": 2}
    # line_range points at the kernel statement in the file
    lines = Path(graph["path"]).read_text().splitlines()
    start, _ = graph["kernels"][0]["line_range"]
    assert lines[start].startswith("triton_poi_fused_add_addmm_mul_relu_0 = async_compile.triton(")


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(H200_DUMPS / "conv_bn_relu")]) == 0
    out = capsys.readouterr().out
    assert "conv_bn_relu" in out
    assert "optimizable" in out
    for name in ("triton_poi_fused_convolution_0", "triton_poi_fused_convolution_1", "extern_kernels.convolution"):
        assert name in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("0", "triton_poi_fused_convolution_0", "poi"),
        ("1", "triton_poi_fused_convolution_1", "poi"),
        ("2", "extern_kernels.convolution", "vendor"),
        ("3", "triton_poi_fused__native_batch_norm_legit_no_training_convolution_relu_2", "poi"),
    ]
    assert [row[-1] for row in rows] == ["25.0%"] * 4  # untimed: each launch is a quarter


def test_table_without_graphs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path)]) == 2  # could not run, as in every command
    assert capsys.readouterr().err.startswith("error: no Inductor dumps found")


def test_time_adds_ideal_bytes_and_says_why_sol_is_unknown_on_the_cpu(capsys: pytest.CaptureFixture[str],
                                                                      cpu_example_dump: Path) -> None:
    assert main(["inspect", str(cpu_example_dump), "--time", "--json"]) == 0
    (graph,) = json.loads(capsys.readouterr().out)["graphs"]
    sol = graph["speed_of_light"]
    kernels = {k["name"] for k in graph["kernels"]}
    assert {item["kernel"] for item in sol["launches"]} == kernels and sol["copy_bytes_per_s"] is None
    for item in sol["launches"]:
        assert item["ideal_bytes"] > 0 and item["time_ms"] > 0 and item["sol_pct"] is None
        assert "CPU backend" in item["unknown_reason"] and "no ncu" in item["time_source"]
    # gelu_mlp: x (EXAMPLE_ROWS x 256 fp32) and the linear's weight and bias are read, one EXAMPLE_ROWS x 256
    # output written
    assert sol["graph"]["read_bytes"] == (EXAMPLE_ROWS * 256 + 256 * 256 + 256 + 2 * 256) * 4
    assert sol["graph"]["write_bytes"] == EXAMPLE_ROWS * 256 * 4


def test_table_shows_the_speed_of_light_column(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.cli import inspect_cmd
    from kernelopt_core.dispatch import analyze

    monkeypatch.setenv("COLUMNS", "220")  # read when printing (setting console.width would outlive the test)
    graph = parse_output_code(str(H200_DUMPS / "softmax" / "output_code.py"))
    (launch,) = graph.launches
    sol = {"graph": {"ideal_bytes": 268435456, "read_bytes": 134217728, "write_bytes": 134217728, "time_ms": 0.1,
                     "sol_pct": 63.3, "time_source": "timed graph, module-call path", "unknown_reason": None},
           "copy_bytes_per_s": 4.243e12, "gpu": "NVIDIA H200",
           "launches": [{"order": launch.order, "kernel": launch.kernel, "ideal_bytes": 268435456, "time_ms": 0.097,
                         "sol_pct": 65.2, "time_source": "timed launch", "unknown_reason": None}]}
    inspect_cmd._print_graph(graph, analyze(graph), sol)
    out = capsys.readouterr().out
    assert "SOL" in out and "65%" in out
    assert "graph speed of light 63%: 268,435,456 bytes of inputs and outputs in 0.100 ms" in out.replace("\n", " ")
