"""The GPU benchmark script's planning helpers and its report of a recorded H200 scaling run.

The script itself runs on the device (benchmarks/gpu/bench.py); these parts run anywhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDED_SCALING = ROOT / "benchmarks" / "results" / "h200" / "scaling" / "scaling.json"


def _load(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    """Import bench.py afresh (it reads its settings from the environment at import)."""
    for name in ("KERNELOPT_BENCH_GPUS", "KERNELOPT_BENCH_SCALING", "KERNELOPT_BENCH_RESUME_FROM",
                 "KERNELOPT_BENCH_CONFIG_CHANGES", "KERNELOPT_BENCH_ACCOUNTING"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("gpu_bench_under_test", ROOT / "benchmarks" / "gpu" / "bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_campaign_slots_follow_the_setting_and_the_visible_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _load(monkeypatch)._campaign_slots("cuda", 2) == 1
    assert _load(monkeypatch, KERNELOPT_BENCH_GPUS="2")._campaign_slots("cuda", 2) == 2
    assert _load(monkeypatch, KERNELOPT_BENCH_GPUS="4")._campaign_slots("cuda", 2) == 2
    assert _load(monkeypatch, KERNELOPT_BENCH_GPUS="all")._campaign_slots("cuda", 8) == 8
    assert _load(monkeypatch, KERNELOPT_BENCH_GPUS="2")._campaign_slots("cpu", 0) == 0


def test_scaling_estimate_uses_the_resumed_walls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    (problems / "a.json").write_text(json.dumps({"name": "level1/a", "wall_s": 40.0}))
    (problems / "broken.json").write_text("{not json")
    bench = _load(monkeypatch, KERNELOPT_BENCH_RESUME_FROM=str(tmp_path),
                  KERNELOPT_BENCH_SCALING="level1/a, level1/unseen")
    assert bench.SCALING_PROBLEMS == ["level1/a", "level1/unseen"]
    # 40 s seen, 60 s assumed for the unseen one; once on 1 GPU and about half again on 2
    assert bench._scaling_estimate(bench.SCALING_PROBLEMS) == pytest.approx((40.0 + 60.0) * 1.7 + 30.0)


def test_environment_block_restores_what_was_there(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load(monkeypatch)
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", "/before")
    with bench._environment(KERNELOPT_CACHE_DIR="/fresh", KERNELOPT_UNSET_BEFORE="x"):
        assert os.environ["KERNELOPT_CACHE_DIR"] == "/fresh"
        assert os.environ["KERNELOPT_UNSET_BEFORE"] == "x"
    assert os.environ["KERNELOPT_CACHE_DIR"] == "/before"
    assert "KERNELOPT_UNSET_BEFORE" not in os.environ


def test_recorded_scaling_run_is_consistent_and_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load(monkeypatch)
    summary = json.loads(RECORDED_SCALING.read_text())
    scaling = summary["scaling"]
    one, two = scaling["one_gpu"], scaling["two_gpus"]
    # the ratio is the recorded walls' ratio, and both runs ran the same problems to the end
    assert scaling["wall_time_speedup"] == pytest.approx(one["wall_s"] / two["wall_s"], abs=1e-3)
    assert sorted(p["name"] for p in one["problems"]) == sorted(scaling["problems"])
    assert sorted(p["name"] for p in two["problems"]) == sorted(scaling["problems"])
    assert not one["not_reached"] and not two["not_reached"]
    assert {p["gpu"].split()[0] for p in two["problems"]} == {"0", "1"}
    text = bench._markdown(summary)
    assert f"**{scaling['wall_time_speedup']:.2f}x**" in text
    assert "## Scaling: the same problems on 1 GPU, then on 2" in text


def test_config_changes_switch_gives_both_geomeans(monkeypatch: pytest.MonkeyPatch) -> None:
    """KERNELOPT_BENCH_CONFIG_CHANGES=1: the campaign verifies configuration changes and the summary
    has the geomean with them beside the kernel-only one; unset, the campaign runs as before."""
    import test_config_changes as recorded

    from kernelopt_core.bench.campaign import CampaignResult
    from kernelopt_core.bench.report import CampaignInfo
    from kernelopt_core.bench.summary import summarize_campaign

    plain = _load(monkeypatch)._campaign_config("cuda", 1, 100.0, 150.0, None)
    assert (plain.allow_config_changes, plain.account) == (False, "off")
    bench = _load(monkeypatch, KERNELOPT_BENCH_CONFIG_CHANGES="1")
    config = bench._campaign_config("cuda", 1, 100.0, 150.0, None)
    assert (config.allow_config_changes, config.account) == (True, "on")
    assert _load(monkeypatch, KERNELOPT_BENCH_ACCOUNTING="1")._campaign_config("cuda", 1, 100.0, 150.0, None).account == "on"

    results = [recorded._problem("level1/relu", "fallback", 1.0, recorded._config_change()),
               recorded._problem("level1/gelu", "matched", 1.0)]
    campaign = CampaignResult("/out", CampaignInfo(suite="s", device="cuda"), results, summarize_campaign(results))
    data = bench._campaign_json(campaign)
    assert data["geomean_vs_max_autotune_all"] == pytest.approx(1.0)
    speedup = recorded.RELU_VERIFIED["speedup"]
    assert data["geomean_with_config_changes_all"] == pytest.approx(speedup ** 0.5)
    assert data["config_changes_accepted"] == 1
    relu = next(p for p in data["problems"] if p["name"] == "level1/relu")
    assert relu["config_change"]["path"] == "compiled-callable-cudagraphs -> compiled-callable"
    assert relu["overhead_share"] == pytest.approx(0.5643, abs=1e-3)
    text = "\n".join(bench._campaign_markdown("Campaign", data))
    assert "with configuration changes" in text and "2.120 [2.112, 2.125]" in text
