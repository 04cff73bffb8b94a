"""Configuration changes, from the recorded H200 accounting of relu on 6.4 GB to a campaign report:
both options for the CUDA-graph input copy with what each assumes, the choice among verified
options, the report's column and geomean kept apart from kernel speedups, the refusal of a
cross-path product, and the ``--allow-config-changes`` flag. No device needed.

The CPU backend has no CUDA graphs, so the copy case comes from the H200 recording
(benchmarks/results/h200/accounting.json: the accounting and the verification of that run).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.bench.config import CampaignConfig
from kernelopt_core.bench.config_change import (
    ConfigChangeFigure,
    chain_speedups,
    config_figure,
    with_config_figure,
)
from kernelopt_core.bench.report import CampaignInfo, write_reports
from kernelopt_core.bench.results import ProblemResult, Speedup
from kernelopt_core.bench.summary import regression_check, summarize_campaign
from kernelopt_core.config_findings import SOURCE_CALLABLE, SOURCE_DUMP, find_config_changes
from kernelopt_core.dispatch import analyze
from kernelopt_core.measure.accounting import COPY_ITEM, CallableAccounting
from kernelopt_core.measure.paths import CrossPathComparison
from kernelopt_core.recommend import (
    OPTION_MODE,
    OPTION_STATIC_INPUTS,
    ConfigVerdict,
    ConfigVerificationError,
    recommend_config,
)

ROOT = Path(__file__).resolve().parents[1]
RECORDED = json.loads((ROOT / "benchmarks" / "results" / "h200" / "accounting.json").read_text())
RELU = RECORDED["accountings"]["relu_6p4GB"]  # CallableAccounting JSON, as the H200 measured it
RELU_VERIFIED = RECORDED["verification"]  # verify_recommendation of its recommendation, on the H200


def recorded_verdict(option: Any) -> ConfigVerdict:
    """The H200's verdict of the mode change, as the verifier returns it."""
    verdict = ConfigVerdict.from_json(RELU_VERIFIED)
    verdict.option, verdict.assumes, verdict.snippet = option.name, option.assumes, option.snippet
    return verdict


def rejected_verdict(option: Any, speedup: float = 1.01) -> ConfigVerdict:
    return ConfigVerdict(accepted=False, reason=f"{speedup:.2f}x; needs >= 1.03x", change=dict(option.change),
                         baseline_mode="max-autotune", gates=[{"gate": 3, "passed": True}, {"gate": 4, "passed": False}],
                         speedup=speedup, ci=(speedup - 0.01, speedup + 0.01),
                         baseline_path="compiled-callable-cudagraphs", candidate_path="compiled-callable-cudagraphs",
                         option=option.name, assumes=option.assumes, snippet=option.snippet)


# --- the recommendation and its options -----------------------------------------------------------


def test_the_copy_case_offers_both_options_and_says_what_each_assumes() -> None:
    rec = recommend_config(CallableAccounting.from_json(RELU))
    assert rec is not None and rec.dominant == COPY_ITEM
    assert [o.name for o in rec.options] == [OPTION_MODE, OPTION_STATIC_INPUTS]
    mode, static = rec.options
    assert mode.change == {"mode": "max-autotune-no-cudagraphs"} == rec.change
    assert mode.snippet == 'compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")'
    assert mode.assumes.startswith("nothing about the caller")
    # static inputs keep CUDA graphs; they assume the caller reuses its input tensors
    assert static.change == {"mode": "max-autotune", "static_inputs": True}
    assert "torch._dynamo.mark_static_address(x)" in static.snippet
    assert static.snippet.endswith('compiled = torch.compile(model, mode="max-autotune")')
    assert "same input tensors" in static.assumes and "re-record" in static.assumes
    # the options survive JSON (result.json, the language server)
    assert type(rec).from_json(json.loads(json.dumps(rec.to_json()))).options == rec.options


def test_a_launch_bound_graph_has_one_option_that_names_the_cuda_graph_assumptions() -> None:
    data = json.loads(json.dumps(RECORDED["accountings"]["tiny_chain_no_graphs"]))
    rec = recommend_config(CallableAccounting.from_json(data))
    if rec is None:  # the recording may have measured the other mode as not faster: then nothing to offer
        pytest.skip("the recorded launch-bound case has no recommendation")
    assert [o.name for o in rec.options] == [OPTION_MODE]
    assert "outputs" in rec.options[0].assumes and "static shapes" in rec.options[0].assumes


# --- findings: what goes into result.json -------------------------------------------------------------


def test_without_permission_the_change_is_suggested_not_verified() -> None:
    calls: list[str] = []
    findings = find_config_changes(RELU, allowed=False, verify=lambda rec, option: calls.append(option.name))
    assert calls == []
    assert findings.source == SOURCE_CALLABLE and findings.path == "compiled-callable-cudagraphs"
    lines = findings.suggestions()
    assert lines[0].startswith("compile with mode='max-autotune-no-cudagraphs'")
    assert "not verified" in lines[1] and "--allow-config-changes" in lines[1]
    assert any(line.startswith(f"{COPY_ITEM}: inputs are copied") for line in lines)
    change = findings.config_change()
    assert change is not None and change["chosen"] is None and change["verified"] is None
    assert change["snippet"] == 'compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")'
    assert "Not verified" in findings.to_markdown()


def test_verified_options_are_reported_each_and_the_best_accepted_is_chosen() -> None:
    def verify(rec: Any, option: Any) -> ConfigVerdict:
        return recorded_verdict(option) if option.name == OPTION_MODE else rejected_verdict(option)

    findings = find_config_changes(RELU, allowed=True, verify=verify)
    change = findings.config_change()
    assert change is not None
    assert [v["option"] for v in change["verifications"]] == [OPTION_MODE, OPTION_STATIC_INPUTS]
    assert change["chosen"] == OPTION_MODE
    verified = change["verified"]
    assert verified["accepted"] and verified["speedup"] == pytest.approx(2.1201, abs=1e-3)
    assert (verified["baseline_path"], verified["candidate_path"]) == ("compiled-callable-cudagraphs",
                                                                        "compiled-callable")
    assert verified["assumes"].startswith("nothing about the caller")
    assert change["snippet"].endswith('mode="max-autotune-no-cudagraphs")')
    assert findings.suggestions()[1].startswith("verified: mode='max-autotune-no-cudagraphs': 2.12x")
    text = findings.to_markdown()
    assert "| keep mode='max-autotune' and mark the inputs static |" in text and "| rejected |" in text
    assert "Verified and chosen: **compile with mode='max-autotune-no-cudagraphs'**" in text
    assert "never multiplied into the kernel speedup" in text

    # when both are accepted, the faster one is chosen, and what it assumes goes with it
    def both(rec: Any, option: Any) -> ConfigVerdict:
        verdict = recorded_verdict(option)
        if option.name == OPTION_STATIC_INPUTS:
            verdict.speedup, verdict.change = 2.4, dict(option.change)
        return verdict

    faster = find_config_changes(RELU, allowed=True, verify=both).config_change()
    assert faster is not None and faster["chosen"] == OPTION_STATIC_INPUTS
    assert "same input tensors" in faster["verified"]["assumes"]
    assert "mark_static_address" in faster["snippet"]


def test_a_verification_that_cannot_run_is_recorded_not_raised() -> None:
    def broken(rec: Any, option: Any) -> ConfigVerdict:
        raise ConfigVerificationError("the problem file behind this dump is unknown (no compile_report.json)")

    findings = find_config_changes(RELU, allowed=True, verify=broken)
    change = findings.config_change()
    assert change is not None and change["chosen"] is None
    assert all(v["ok"] is False and "compile_report.json" in v["reason"] for v in change["verifications"])
    assert "no configuration change was accepted" in findings.suggestions()[1]


def test_without_the_problem_the_dump_alone_speaks(h200_dumps: Path) -> None:
    from kernelopt_core.artifacts import parse_output_code

    graph = parse_output_code(str(h200_dumps / "elementwise" / "output_code.py"))
    findings = find_config_changes(analyze(graph), allowed=True, verify=lambda rec, option: None)  # type: ignore
    assert findings.source == SOURCE_DUMP and findings.recommendation is None and findings.config_change() is None


# --- kept apart: the campaign report --------------------------------------------------------------------


def _config_change(verified: bool = True) -> dict[str, Any]:
    def verify(rec: Any, option: Any) -> ConfigVerdict:
        return recorded_verdict(option) if option.name == OPTION_MODE else rejected_verdict(option)

    findings = find_config_changes(RELU, allowed=verified, verify=verify)
    change = findings.config_change()
    assert change is not None
    return change


def _problem(name: str, outcome: str, kernel: float, config_change: dict[str, Any] | None = None) -> ProblemResult:
    figure = Speedup(kernel, kernel * 0.98, kernel * 1.02, "module-call", "test")
    return ProblemResult(name=name, level=1, path=f"/suite/{name}.py", outcome=outcome, reason=f"{outcome} (test)",
                         vs_max_autotune=figure, confirm={"speedup": kernel} if outcome == "optimized" else None,
                         accounting=RELU if config_change else None, config_change=config_change,
                         suggestions=["from the test"] if config_change else [])


def test_a_cross_path_product_of_speedups_is_refused() -> None:
    relu = _problem("relu", "fallback", 1.0, _config_change())
    config = config_figure(relu)
    assert config is not None and config.path == "compiled-callable-cudagraphs -> compiled-callable"
    kernel = Speedup(1.5, 1.4, 1.6, "module-call", "confirmation A/B")
    with pytest.raises(CrossPathComparison, match="module-call"):
        chain_speedups(config, kernel)
    with pytest.raises(CrossPathComparison):
        chain_speedups(config, Speedup(1.5, 1.4, 1.6, "gate 4 A/B, somewhere", "free text is no path"))
    # a kernel A/B timed from where the change left off (the same full callable) would chain
    same = Speedup(1.5, 1.4, 1.6, "compiled-callable", "hypothetical A/B on the changed callable")
    assert chain_speedups(config, same) == pytest.approx(config.value * 1.5)
    # the per-problem figure with configuration changes takes the better one, never the product
    both = _problem("both", "optimized", 1.5, _config_change())
    figure = with_config_figure(both)
    assert figure is not None and figure.source == "configuration"
    assert figure.value == pytest.approx(config.value) and figure.value != pytest.approx(config.value * 1.5)
    small = ConfigChangeFigure(1.1, 1.05, 1.15, "compiled-callable-cudagraphs", "compiled-callable")
    assert chain_speedups(small, same) == pytest.approx(1.65)


def test_the_campaign_report_keeps_configuration_changes_apart(tmp_path: Path) -> None:
    results = [_problem("relu", "fallback", 1.0, _config_change()),
               _problem("gelu", "optimized", 1.5),
               _problem("sum", "matched", 1.0, _config_change(verified=False))]
    summary = summarize_campaign(results)
    overall = summary.overall
    # kernel-only: the config change counts nowhere; the relu problem stays a fallback at 1.0
    assert overall.geomean_vs_max_autotune == pytest.approx(1.5 ** (1 / 3))
    assert summary.counts == {"optimized": 1, "matched": 1, "fallback": 1, "error": 0}
    assert regression_check(results).checked == 1
    # with configuration changes: the relu problem's verified 2.12x, the others as they were
    relu_speedup = RELU_VERIFIED["speedup"]
    assert overall.geomean_with_config_changes == pytest.approx((relu_speedup * 1.5) ** (1 / 3))
    assert overall.config_changes_accepted == 1  # the unverified recommendation does not count
    info = CampaignInfo(suite="suite", device="cuda", config=CampaignConfig(allow_config_changes=True).to_json())
    write_reports(str(tmp_path), info, results, plot=False)
    report = (tmp_path / "report.md").read_text()
    assert "with configuration changes [95% CI] (accepted)" in report
    assert f"{(relu_speedup * 1.5) ** (1 / 3):.3f}×" in report
    row = next(line for line in report.splitlines() if line.startswith("| `relu` | 1 | fallback"))
    assert "2.12× [2.11, 2.13] mode='max-autotune-no-cudagraphs' (`compiled-callable-cudagraphs -> compiled-callable`)" in row
    sum_row = next(line for line in report.splitlines() if line.startswith("| `sum` | 1 | matched"))
    assert "recommended, not verified" in sum_row
    assert "## Outside the kernels (the whole torch.compile callable)" in report
    outside = next(line for line in report.splitlines() if line.startswith("| `relu` | 6.91"))
    assert "56% (dominates)" in outside and "CUDA-graph input copy 50%" in outside and "mode: accepted 2.12×" in outside
    assert "nothing about the caller" in outside
    data = json.loads((tmp_path / "results.json").read_text())
    relu = next(p for p in data["problems"] if p["name"] == "relu")
    assert relu["outcome"] == "fallback" and relu["vs_max_autotune"]["value"] == 1.0
    assert relu["config_change"]["chosen"] == OPTION_MODE and relu["suggestions"] == ["from the test"]
    assert data["summary"]["overall"]["config_changes_accepted"] == 1
    assert math.isclose(data["summary"]["overall"]["geomean_with_config_changes"], (relu_speedup * 1.5) ** (1 / 3))


# --- the flag ------------------------------------------------------------------------------------------------


def test_bench_allow_config_changes_is_a_real_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from kernelopt_core.bench import campaign
    from kernelopt_core.bench.summary import summarize_campaign as summarize
    from kernelopt_core.cli.main import main

    seen: list[CampaignConfig] = []

    def fake_run(problems: Any, config: CampaignConfig, out_dir: str, sink: Any = None, suite: str = "") -> Any:
        seen.append(config)
        info = CampaignInfo(suite=suite, device="cpu", config=config.to_json())
        return campaign.CampaignResult(out_dir, info, [], summarize([]))

    monkeypatch.setattr(campaign, "run_campaign", fake_run)
    (tmp_path / "p.py").write_text("import torch\n")
    assert main(["bench", str(tmp_path / "p.py"), "--out", str(tmp_path / "out"), "--allow-config-changes",
                 "--json"]) == 0
    assert main(["bench", str(tmp_path / "p.py"), "--out", str(tmp_path / "out"), "--accounting", "off",
                 "--optimizer-option", "allow_config_changes=true", "--json"]) == 0
    assert main(["bench", str(tmp_path / "p.py"), "--out", str(tmp_path / "out"), "--json"]) == 0
    capsys.readouterr()
    flagged, optioned, plain = seen
    assert flagged.allow_config_changes and flagged.account == "auto" and flagged.config_changes_allowed
    assert flagged.optimizer_overrides()["allow_config_changes"] is True  # the optimizer verifies it
    assert not optioned.allow_config_changes and optioned.config_changes_allowed and optioned.account == "off"
    assert not plain.config_changes_allowed and "allow_config_changes" not in plain.optimizer_overrides()
    assert CampaignConfig.from_json(flagged.to_json()).allow_config_changes  # reaches the problem processes
    with pytest.raises(ValueError, match="auto, on or off"):
        CampaignConfig(account="sometimes")


def test_accounting_runs_on_a_gpu_by_default_and_on_the_cpu_when_asked() -> None:
    from kernelopt_core.config_findings import accounting_wanted

    assert accounting_wanted("auto", "cuda:0") and not accounting_wanted("auto", "cpu")
    assert accounting_wanted("on", "cpu") and not accounting_wanted("off", "cuda:0")
    assert accounting_wanted(True, "cpu") and accounting_wanted(None, "cuda:1")
    with pytest.raises(ValueError, match="auto, on, off"):
        accounting_wanted("maybe", "cpu")


def test_no_optimize_campaign_problem_keeps_the_findings(tmp_path: Path) -> None:
    """--no-optimize: the problem process turns its accounting into findings without the optimizer."""
    from kernelopt_core.bench.problem_main import ProblemState, _config_findings
    from kernelopt_core.bench.suite import ProblemSpec
    from kernelopt_core.events import EventSink

    result = ProblemResult(name="relu", level=1, path="/suite/relu.py", outcome="fallback", reason="test")
    state = ProblemState(spec=ProblemSpec("relu", "/suite/relu.py", 1), config=CampaignConfig(optimize=False),
                         device="cuda:0", work_dir=str(tmp_path), result=result, sink=EventSink(),
                         accounting=json.loads(json.dumps(RELU)))
    _config_findings(state)
    assert result.accounting is not None and result.accounting["path"] == "compiled-callable-cudagraphs"
    assert "graphs" not in result.accounting  # per-launch times stay out of campaign results
    assert result.suggestions[0].startswith("compile with mode='max-autotune-no-cudagraphs'")
    assert result.config_change is not None and result.config_change["allowed"] is False
