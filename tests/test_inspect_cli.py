"""`kernelopt inspect`: the --json shape other tools rely on, and the readable table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import H200_DUMPS, H200_GRAPHS

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
