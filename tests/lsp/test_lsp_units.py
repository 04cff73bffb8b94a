"""The language server's features apart from the protocol: settings, words, diagnostics, hovers,
lenses, actions, the kernel edit, results, documents and the watcher."""

from __future__ import annotations

import ast
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from kernelopt_lsp.actions import kernel_actions
from kernelopt_lsp.diagnostics import (
    DiagnosticBoard,
    dump_diagnostics,
    gate_diagnostics,
    problem_diagnostics,
    profile_diagnostics,
)
from kernelopt_lsp.documents import DumpDocuments, SharedIndex, state_from_text
from kernelopt_lsp.hover import hover_markdown, kernel_named_at, word_at
from kernelopt_lsp.job_requests import JobLink, job_env, job_status, optimize_args, progress_text
from kernelopt_lsp.kernel_edit import (
    KernelEditError,
    apply_replacements,
    inverse,
    kernel_source_replacement,
    source_literal,
    workspace_edit,
)
from kernelopt_lsp.kernel_facts import kernel_view, profile_line
from kernelopt_lsp.lenses import kernel_lenses
from kernelopt_lsp.results import (
    GateRecord,
    ProfileRecord,
    ResultStore,
    find_run_dir,
    gate_record_from_cascade,
    gate_record_from_run,
    load_run,
    profile_records,
    run_record_from_result,
)
from kernelopt_lsp.settings import BeamSettings, Settings, parse_settings
from kernelopt_lsp.watch import DumpWatcher
from lsprotocol import types

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.artifacts.model import source_hash
from kernelopt_core.dispatch import analyze
from kernelopt_core.job_runner import Job, JobRequest

from .conftest import H200

SOFTMAX = H200 / "softmax" / "output_code.py"
SOFTMAX_KERNEL = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"
CONV = H200 / "conv_bn_relu" / "output_code.py"
MATMUL = H200 / "matmul_bias_relu" / "output_code.py"

PROFILE = {"name": SOFTMAX_KERNEL, "duration_ns": 12345.0, "time_share": 0.31, "time_share_of": "graph",
           "tier": "memory-bound", "dram_pct": 62.4, "sm_pct": 21.0, "occupancy_pct": 48.2, "registers": 32,
           "rules": [{"name": "SmallGrid", "est_speedup_pct": 5.0},
                     {"name": "UncoalescedGlobalAccess", "description": "loads are\nuncoalesced",
                      "est_speedup_pct": 25.0}]}


def _graph(path: Path = SOFTMAX, text: str | None = None):
    return parse_output_code(str(path), text)


# --- settings ---------------------------------------------------------------------------------------


def test_settings_defaults_nested_dotted_and_wrapped(tmp_path: Path):
    assert parse_settings(None) == (Settings(), [])
    (tmp_path / "dumps").mkdir()
    settings, problems = parse_settings({"kernelopt": {
        "dumpFolders": ["dumps"], "provider": "anthropic", "model": "claude-x", "apiKeyEnv": "MY_KEY",
        "beam": {"width": 2, "iterations": 1}, "beam.retries": 1, "device": "cuda:1", "ncuPath": "/opt/ncu",
        "trace": {"server": "verbose"}}}, root=str(tmp_path))
    assert problems == []
    assert settings.dump_folders == (str(tmp_path / "dumps"),)
    assert settings.provider == "anthropic" and settings.model == "claude-x" and settings.api_key_env == "MY_KEY"
    assert settings.beam == BeamSettings(width=2, iterations=1, plans=4, retries=1)
    assert settings.device == "cuda:1" and settings.ncu_path == "/opt/ncu"


def test_bad_settings_keep_the_previous_value_and_say_which_key(tmp_path: Path):
    base = Settings(provider="anthropic", device="cpu")
    settings, problems = parse_settings({
        "provider": "openai", "device": "tpu", "beam": {"width": 0, "plans": "4"}, "apiKeyEnv": "A=B",
        "interpreter": str(tmp_path / "nope"), "dumpFolders": "missing", "colour": "blue"}, base, str(tmp_path))
    assert settings.provider == "anthropic" and settings.device == "cpu" and settings.beam == BeamSettings()
    assert settings.interpreter == "" and settings.dump_folders == ()
    text = "\n".join(problems)
    for key in ("kernelopt.provider", "kernelopt.device", "kernelopt.beam.width", "kernelopt.beam.plans",
                "kernelopt.apiKeyEnv", "kernelopt.interpreter", "kernelopt.dumpFolders", "colour"):
        assert key in text
    assert parse_settings([1, 2])[1] == ["kernelopt settings must be an object, got list"]


def test_job_arguments_and_environment(monkeypatch: pytest.MonkeyPatch):
    settings = Settings(provider="offline", beam=BeamSettings(1, 2, 3, 1), device="cpu", api_key_env="TEAM_KEY",
                        ncu_path="/opt/ncu/ncu")
    assert optimize_args("/d/output_code.py", "k", settings) == [
        "optimize", "/d/output_code.py", "--kernel", "k", "--provider", "offline", "--model", "claude-sonnet-4-6",
        "--beam-width", "1", "--iterations", "2", "--plans", "3", "--retries", "1", "--device", "cpu",
        "--budget", "600"]
    assert optimize_args("/d/output_code.py", "k", Settings(budget=0.0))[-2:] == ["--budget", "0"]  # no limit
    monkeypatch.setenv("TEAM_KEY", "sk-test")
    assert job_env(settings) == {"ANTHROPIC_API_KEY": "sk-test", "KERNELOPT_NCU": "/opt/ncu/ncu"}
    assert job_env(Settings()) == {}


def test_progress_text_and_job_status():
    assert progress_text({"message": "candidate 2/4 · gate 3", "iteration": 2, "iterations": 5,
                          "best_speedup": 1.234}) == ("iteration 2/5 · candidate 2/4 · gate 3 · best 1.23×", 20)
    assert progress_text({"message": "gate 2", "percentage": 140}) == ("gate 2", 100)
    assert progress_text({"message": "triton_poi_x_0: candidate i1c1 (launch config)", "stage": "candidate"},
                         "triton_poi_x_0") == ("candidate i1c1 (launch config)", None)
    job = Job(id="j3", request=JobRequest(kind="optimize", args=[]), argv=[], state="running", message="m",
              last_event={"iteration": 3, "iterations": 5, "best_speedup": 1.2})
    link = JobLink(job_id="j3", kind="optimize", uri="file:///d.py", kernel="k", graph_path="/d.py",
                   kernel_hash="h", cwd="/")
    assert job_status(job, link, runId="r1") == {
        "jobId": "j3", "kind": "optimize", "state": "running", "kernel": "k", "uri": "file:///d.py", "message": "m",
        "iteration": 3, "iterations": 5, "bestSpeedup": 1.2, "runId": "r1"}


# --- words, diagnostics, hovers, lenses, actions ---------------------------------------------------------


def test_static_diagnostic_and_profile_replacing_it():
    graph = _graph()
    store = ResultStore()
    views = [kernel_view(graph, k, analyze(graph), store) for k in graph.kernels]
    diags = dump_diagnostics(graph, analyze(graph), views, 20)
    assert [d.code for d in diags] == ["kernel"]
    assert diags[0].message == ("reduction · fuses prims.prepare_softmax_online, sub, exp, _softmax · "
                                "1 of 1 launches (100.0%); not profiled")
    kernel = graph.kernel(SOFTMAX_KERNEL)
    store.set_profile(ProfileRecord(graph.path, SOFTMAX_KERNEL, kernel.source_hash, dict(PROFILE)))
    views = [kernel_view(graph, k, analyze(graph), store) for k in graph.kernels]
    assert dump_diagnostics(graph, analyze(graph), views, 20) == []
    profile = profile_diagnostics(views)
    assert profile[0].message == ("memory-bound · DRAM 62% of peak · occupancy 48% · 31.0% of graph time · "
                                  "top rule: UncoalescedGlobalAccess")
    assert profile[0].range.start == types.Position(kernel.name_range.start_line, kernel.name_range.start_col)


def test_profile_line_variants():
    alone = ProfileRecord("g", "k", "h", {**PROFILE, "time_share": 1.0, "time_share_of": "profiled kernels",
                                          "profiled_kernels": 1})
    assert profile_line(alone) == "memory-bound · DRAM 62% of peak · occupancy 48%"  # 100% of itself says nothing
    several = ProfileRecord("g", "k", "h", {**PROFILE, "time_share": 0.25, "time_share_of": "profiled kernels",
                                            "profiled_kernels": 3})
    assert profile_line(several).endswith("25.0% of profiled kernels time")
    compute = ProfileRecord("g", "k", "h", {**PROFILE, "tier": "compute-bound"})
    assert "SM 21%" in profile_line(compute)
    timed = ProfileRecord("g", "k", "h", {"name": "k", "duration_ns": 2500.0, "time_share": 0.4, "tier": "unknown",
                                          "time_share_of": "graph", "source": "timing"})
    assert profile_line(timed) == "timed, no ncu metrics · 2.5 µs per call · 40.0% of graph time"


def test_vendor_dominated_graph_warns_on_line_one():
    text = MATMUL.read_text()
    mm = next(line for line in text.splitlines() if "extern_kernels.mm(" in line)
    heavy = text.replace(mm, "\n".join([mm] * 4))  # four GEMMs and one Triton kernel
    graph = _graph(MATMUL, heavy)
    report = analyze(graph)
    assert report.classification == "vendor-dominated"
    diags = dump_diagnostics(graph, report, [], len(heavy.splitlines()[0]))
    warning = next(d for d in diags if d.code == "vendor-dominated")
    assert warning.severity == types.DiagnosticSeverity.Warning
    assert warning.range.start == types.Position(0, 0) and warning.range.end.line == 0
    assert "80% of launches in vendor calls" in warning.message


def test_unreadable_dump_diagnostic():
    from kernelopt_core.artifacts import DumpProblem

    diag = problem_diagnostics(DumpProblem("/x/output_code.py", "Python syntax error: '(' was never closed", 88), 17)
    assert diag[0].range == types.Range(types.Position(0, 0), types.Position(0, 17))
    assert diag[0].message == ("KernelOPT could not read this dump: Python syntax error: '(' was never closed "
                               "(at line 89)")
    assert diag[0].severity == types.DiagnosticSeverity.Error


def _gate(kind: str, **fields) -> GateRecord:
    base = dict(graph_path=str(SOFTMAX), kernel=SOFTMAX_KERNEL, kind=kind, source_hash="old", accepted=False,
                failed_gate=None, reason="")
    base.update(fields)
    return GateRecord(**base)


def test_gate_diagnostics_severity_and_staleness():
    graph = _graph()
    kernel = graph.kernel(SOFTMAX_KERNEL)
    current = kernel.source_hash
    store = ResultStore()
    store.set_gates(_gate("verify", source_hash=current, failed_gate=2, reason="max abs error 0.3",
                          gates=[{"gate": 2, "name": "kernel", "passed": False}]))
    store.set_gates(_gate("optimize", source_hash=current, failed_gate=4, reason="1.01x < 1.03x", decision="fallback",
                          run_id="r1"))
    view = kernel_view(graph, kernel, analyze(graph), store)
    diags = gate_diagnostics([view])
    by_kind = {d.message.split(":")[0]: d for d in diags}
    assert by_kind["verify"].severity == types.DiagnosticSeverity.Error
    assert by_kind["verify"].message == "verify: rejected at gate 2 (kernel): max abs error 0.3"
    assert by_kind["optimize run r1"].severity == types.DiagnosticSeverity.Warning
    assert by_kind["optimize run r1"].message == "optimize run r1: fallback, rejected at gate 4 (perf): 1.01x < 1.03x"
    # The same records against a changed kernel: stale, hinted, tagged.
    store = ResultStore()
    store.set_gates(_gate("verify", source_hash="older", accepted=True, speedup=1.1, ci=(1.0, 1.2)))
    stale = gate_diagnostics([kernel_view(graph, kernel, analyze(graph), store)])[0]
    assert stale.message == "verify: all gates passed · 1.10× (95% CI 1.00–1.20×) (stale: kernel changed since this run)"
    assert stale.severity == types.DiagnosticSeverity.Hint and stale.tags == [types.DiagnosticTag.Unnecessary]
    # An applied optimization is neither stale nor a warning.
    store = ResultStore()
    store.set_gates(_gate("optimize", source_hash="original", accepted=True, decision="optimized", run_id="r2",
                          speedup=1.2, optimized_hash=current))
    applied = gate_diagnostics([kernel_view(graph, kernel, analyze(graph), store)])[0]
    assert applied.message == "optimize run r2: optimized kernel applied (1.20×)" and applied.tags is None


def test_board_publishes_every_source_together():
    board = DiagnosticBoard()
    one = types.Diagnostic(range=types.Range(types.Position(0, 0), types.Position(0, 1)), message="a")
    two = types.Diagnostic(range=types.Range(types.Position(1, 0), types.Position(1, 1)), message="b")
    board.set("u", "kernelopt.gates", [two])
    board.set("u", "kernelopt.dump", [one])
    assert board.combined("u") == [one, two]
    board.set("u", "kernelopt.gates", [])
    assert board.combined("u") == [one] and board.clear("u") and board.combined("u") == []


def test_word_and_kernel_under_the_cursor():
    line = f"        {SOFTMAX_KERNEL}.run(arg0_1, buf2, 4096, stream=stream0)"
    assert word_at(line, 8) == (8, 8 + len(SOFTMAX_KERNEL))
    assert word_at(line, 8 + len(SOFTMAX_KERNEL)) == (8, 8 + len(SOFTMAX_KERNEL))  # right after the name
    assert word_at("  ", 1) is None
    graph = _graph()
    found = kernel_named_at(graph, line, 20)
    assert found is not None and found[0].name == SOFTMAX_KERNEL
    assert kernel_named_at(graph, line, len(line) - 3) is None  # on "stream0"


def test_hover_markdown_has_ops_share_metrics_rules_and_last_runs():
    graph = _graph()
    kernel = graph.kernel(SOFTMAX_KERNEL)
    store = ResultStore()
    store.set_profile(ProfileRecord(graph.path, SOFTMAX_KERNEL, kernel.source_hash, dict(PROFILE)))
    run = run_record_from_result({"run_id": "r9", "run_dir": "/tmp/r9", "decision": "optimized", "reason": "fast",
                                  "speedup": 1.4, "ci": [1.3, 1.5], "accepted_sources": {SOFTMAX_KERNEL: "x"}},
                                 graph_path=graph.path, kernel=SOFTMAX_KERNEL, original_hash=kernel.source_hash,
                                 cwd="/")
    store.add_run(run)
    store.set_gates(gate_record_from_run(run))
    store.set_gates(_gate("verify", source_hash="older", failed_gate=3, reason="rho 120 > 10"))
    text = hover_markdown(kernel_view(graph, kernel, analyze(graph), store))
    assert text.startswith(f"### `{SOFTMAX_KERNEL}`")
    assert "**reduction** (`reduction`) · fuses `prims.prepare_softmax_online`" in text
    assert "**31.0% of graph time** (profiled) · 1 of 1 launches" in text
    assert "| duration | 12.3 µs |" in text and "| DRAM throughput | 62% of peak |" in text
    assert "| registers / thread | 32 |" in text
    rules = [line for line in text.splitlines() if line[:2] in ("1.", "2.")]
    assert rules == ["1. **UncoalescedGlobalAccess**: loads are uncoalesced (est. speedup 25%)",
                     "2. **SmallGrid** (est. speedup 5%)"]
    assert "**Last optimization** (run `r9`): optimized, 1.40× (95% CI 1.30–1.50×)" in text
    assert ("**Last verify**: verify: rejected at gate 3 (model): rho 120 > 10 "
            "(stale: kernel changed since this run)") in text


SOL_PROFILE = {**PROFILE, "tier": "memory-bound", "paper_tier": "near-optimal", "sol_pct": 65.0,
               "traffic_ratio": 1.5, "ideal_bytes": 268435456, "ideal_read_bytes": 134217728,
               "ideal_write_bytes": 134217728, "dram_bytes": 402653184.0, "dram_read_bytes": 268435456.0,
               "dram_write_bytes": 134217728.0, "sol_time_source": "ncu", "causes": ["re-reads"],
               "cause_details": [{"id": "re-reads", "text": "DRAM traffic 1.50x the minimum; 2 passes over in_ptr0",
                                  "source": "measured"}]}


def test_lens_diagnostic_and_hover_show_the_speed_of_light():
    graph = _graph()
    kernel = graph.kernel(SOFTMAX_KERNEL)
    store = ResultStore()
    store.set_profile(ProfileRecord(graph.path, SOFTMAX_KERNEL, kernel.source_hash, dict(SOL_PROFILE)))
    view = kernel_view(graph, kernel, analyze(graph), store)
    (summary, *_) = kernel_lenses("file:///s.py", [view], [])
    assert summary.command.title == "31.0% of graph · memory-bound · 65% of speed of light · reads 1.5× the minimum"
    assert profile_line(view.profile).startswith("memory-bound · 65% of speed of light · reads 1.5× the minimum · ")
    text = hover_markdown(view)
    assert "**Profile**: 65% of speed of light · reads 1.5× the minimum" in text
    assert "| speed of light | 65% (time: ncu) |" in text
    assert "| DRAM traffic | 1.50× the minimum (402.65 MB moved) |" in text
    assert "| minimum bytes | 268.44 MB (each tensor read or written once) |" in text
    assert "| causes | re-reads |" in text and "| paper's SOL-memory tier | near-optimal |" in text
    assert "- **re-reads**: DRAM traffic 1.50x the minimum; 2 passes over in_ptr0" in text
    # a timed CPU profile: the reason the speed of light is unknown, no invented figure
    cpu = {"name": SOFTMAX_KERNEL, "duration_ns": 2500.0, "tier": "unknown", "source": "timing",
           "ideal_bytes": 4096, "sol_pct": None, "sol_unknown_reason": "unknown: the CPU backend has no counters"}
    store.set_profile(ProfileRecord(graph.path, SOFTMAX_KERNEL, kernel.source_hash, cpu))
    view = kernel_view(graph, kernel, analyze(graph), store)
    assert "speed of light" not in kernel_lenses("file:///s.py", [view], [])[0].command.title
    text = hover_markdown(view)
    assert "| speed of light | unknown: the CPU backend has no counters |" in text
    assert "| minimum bytes | 4.10 kB (each tensor read or written once) |" in text


def _job(kind: str, uri: str, kernel: str, state: str = "running") -> Job:
    return Job(id="j7", request=JobRequest(kind=kind, args=[], meta={"uri": uri, "kernel": kernel}), argv=[],
               state=state)  # type: ignore[arg-type]


def test_lenses_and_actions():
    graph = _graph(CONV)
    store = ResultStore()
    views = [kernel_view(graph, k, analyze(graph), store) for k in graph.kernels]
    lenses = kernel_lenses("file:///c.py", views, [])
    assert len(lenses) == 3 * len(graph.kernels)
    first = graph.kernels[0]
    assert lenses[0].command.title == "1/4 launches · pointwise · not profiled"  # 3 kernels + 1 convolution
    assert lenses[0].command.command == "" and lenses[0].range.start.line == first.name_range.start_line
    assert [lens.command.title for lens in lenses[1:3]] == ["Optimize", "Profile"]
    running = kernel_lenses("file:///c.py", views, [_job("optimize", "file:///c.py", first.name)])
    assert running[1].command.title == "Cancel optimize (running)"
    assert running[1].command.arguments == [{"jobId": "j7"}]

    view = views[0]
    plain = kernel_actions("file:///c.py", view, edited=False, active_jobs=[])
    assert [a.command.command for a in plain] == ["kernelopt.server.optimize", "kernelopt.server.profile"]
    assert all(a.kind == "refactor.kernelopt" for a in plain)
    run = run_record_from_result({"run_id": "r1", "decision": "optimized", "accepted_sources": {first.name: "s"}},
                                 graph_path=graph.path, kernel=first.name, original_hash="h", cwd="/w")
    store.add_run(run)
    view = kernel_view(graph, first, analyze(graph), store)
    full = kernel_actions("file:///c.py", view, edited=True, active_jobs=[_job("profile", "file:///c.py", first.name)])
    assert [(a.command.command, a.command.arguments[0].get("mode")) for a in full] == [
        ("kernelopt.server.optimize", None), ("kernelopt.server.profile", None), ("kernelopt.server.verify", None),
        ("kernelopt.server.showDiff", None), ("kernelopt.server.apply", "store"), ("kernelopt.server.apply", "edit"),
        ("kernelopt.server.cancel", None)]
    assert full[2].is_preferred
    assert kernel_actions("file:///c.py", view, edited=True, active_jobs=[], only=["quickfix"]) == []
    assert len(kernel_actions("file:///c.py", view, edited=False, active_jobs=[], only=["refactor"])) == 5


# --- the kernel edit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [
    "\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n",
    "\ns = 'a\\\\nb'  # a backslash\nt = '''nested'''\n",
    "ends with a quote '",
])
def test_source_literal_round_trips(source: str):
    literal = source_literal(source)
    assert ast.literal_eval(literal) == source
    if "\\" not in source and "'''" not in source and not source.endswith("'"):
        assert literal == f"'''{source}'''"  # Inductor's own spelling when nothing needs escaping


def test_kernel_replacement_is_exact_and_undoable():
    text = CONV.read_text()
    graph = _graph(CONV, text)
    target = graph.kernels[1]
    new_source = target.source.replace("tl.load(", "tl.load(  ", 1) + "# tuned\n"
    replacement = kernel_source_replacement(text, target, new_source)
    assert replacement.old_text.startswith("'''") and replacement.old_text.endswith("'''")
    edited = apply_replacements(text, [replacement])
    after = _graph(CONV, edited)
    assert after.kernel(target.name).source == new_source
    for before_kernel, after_kernel in zip(graph.kernels, after.kernels, strict=True):
        if before_kernel.name != target.name:
            assert after_kernel.source == before_kernel.source
    assert apply_replacements(edited, [inverse(replacement)]) == text
    edit = workspace_edit("file:///c.py", 4, replacement, document_changes=True)
    assert edit.document_changes[0].text_document.version == 4
    assert edit.document_changes[0].edits[0].new_text == replacement.new_text
    assert workspace_edit("file:///c.py", None, replacement, document_changes=False).changes["file:///c.py"][0].range \
        == replacement.range
    with pytest.raises(KernelEditError, match="no async_compile.triton source string"):
        kernel_source_replacement(text.replace(f"'{target.name}', '''", f"'{target.name}', SRC + '''", 1),
                                  target, new_source)


# --- results -------------------------------------------------------------------------------------------


def test_reading_job_results(tmp_path: Path):
    records = profile_records({"kernels": [dict(PROFILE), {"name": "unknown_kernel"}, "junk"]}, "/g.py",
                              {SOFTMAX_KERNEL: "h1"})
    assert [(r.kernel, r.source_hash) for r in records] == [(SOFTMAX_KERNEL, "h1")]
    assert [r["name"] for r in records[0].rules] == ["UncoalescedGlobalAccess", "SmallGrid"]
    with pytest.raises(ValueError, match="no 'kernels' list"):
        profile_records({"error": "x"}, "/g.py", {})
    verdict = gate_record_from_cascade({"accepted": False, "failed_gate": 4, "reason": "slow", "speedup": 1.01,
                                        "ci": [0.99, 1.03], "gates": [{"gate": 4}]},
                                       graph_path="/g.py", kernel="k", kind="verify", kernel_hash="c")
    assert (verdict.failed_gate, verdict.speedup, verdict.ci) == (4, 1.01, (0.99, 1.03))

    run_dir = tmp_path / ".kernelopt" / "runs" / "20261201-abc"
    run_dir.mkdir(parents=True)
    (run_dir / "original_kernel.py").write_text("orig")
    result = {"run_id": "20261201-abc", "run_dir": ".kernelopt/runs/20261201-abc", "decision": "optimized",
              "speedup": 1.3, "ci": [1.2, 1.4], "accepted_sources": {"k": "new"}, "graph_path": "/g.py",
              "kernels": [{"name": "k"}]}
    run = run_record_from_result(result, graph_path="/g.py", kernel="k", original_hash=source_hash("orig"),
                                 cwd=str(tmp_path))
    assert run.run_dir == str(run_dir) and run.diff_path == str(run_dir / "final.diff")
    assert run.optimized_source == "new"
    (run_dir / "result.json").write_text(json.dumps(result))
    assert find_run_dir("20261201-abc", [str(tmp_path / "nowhere"), str(tmp_path)]) == str(run_dir)
    assert find_run_dir("../etc", [str(tmp_path)]) is None
    loaded = load_run(str(run_dir))
    assert (loaded.kernel, loaded.graph_path, loaded.original_hash, loaded.speedup) == \
        ("k", "/g.py", source_hash("orig"), 1.3)
    (run_dir / "result.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        load_run(str(run_dir))


# --- documents and watching --------------------------------------------------------------------------------


def test_documents_reuse_disk_graph_and_follow_edits(tmp_path: Path):
    dump = tmp_path / "g" / "output_code.py"
    dump.parent.mkdir()
    shutil.copy(SOFTMAX, dump)
    index = SharedIndex()
    assert index.scan(str(tmp_path)) == {str(dump)}
    text = dump.read_text()
    same = state_from_text(str(dump), text, 1, index)
    assert same.graph is index.graph_at(str(dump))  # the buffer equals the file: no second parse
    edited = state_from_text(str(dump), text.replace("tmp0 = tl.load(", "tmp0 = tl.load( ", 1), 2, index)
    assert edited.graph is not same.graph and edited.graph.kernel(SOFTMAX_KERNEL).source != \
        same.graph.kernel(SOFTMAX_KERNEL).source
    broken = state_from_text(str(dump), text[: len(text) // 2], 3, index)
    assert broken.graph is None and "syntax error" in broken.problem.problem
    assert state_from_text(str(tmp_path / "notes.py"), "print('hi')\n", 1, index) is None  # not a dump

    documents = DumpDocuments(index)
    documents.store_buffer(str(dump), 2, documents.entry_key(str(dump)), edited)
    assert documents.cached_buffer(str(dump), 2) == (True, edited)
    assert documents.cached_buffer(str(dump), 3) == (False, None)
    os.utime(dump, (time.time() + 5, time.time() + 5))  # the file changed under the buffer
    assert index.update(str(dump)) == {str(dump)}
    assert documents.cached_buffer(str(dump), 2) == (False, None)
    assert documents.disk_state(str(dump)).graph is index.graph_at(str(dump))
    shutil.rmtree(dump.parent)
    assert index.update(str(dump.parent)) == {str(dump)}  # a deleted folder drops what was under it
    assert documents.disk_state(str(dump)) is None


def test_watcher_debounces_and_skips_private_folders(tmp_path: Path):
    batches: list[set[str]] = []
    arrived = threading.Event()

    def on_paths(paths: set[str]) -> None:
        batches.append(paths)
        arrived.set()

    watcher = DumpWatcher(on_paths, debounce_s=0.15)
    try:
        assert watcher.watch([str(tmp_path), str(tmp_path / "sub"), str(tmp_path / "missing")]) == []
        assert watcher.roots == [str(tmp_path)]
        (tmp_path / ".kernelopt" / "runs").mkdir(parents=True)
        (tmp_path / ".kernelopt" / "runs" / "output_code.py").write_text("x")
        (tmp_path / "notes.txt").write_text("x")
        target = tmp_path / "a" / "output_code.py"
        target.parent.mkdir()
        for i in range(5):  # a burst of writes
            target.write_text("x" * i)
            time.sleep(0.02)
        assert arrived.wait(5)
        time.sleep(0.3)
        assert len(batches) == 1
        assert batches[0] == {str(tmp_path / "a"), str(target)}
    finally:
        watcher.stop()


def test_real_profile_output_reads_as_diagnostic_and_hover():
    """`kernelopt profile --ncu-csv` on the H200 rmsnorm fixture: the real --json shape, end to end
    through the server's reading of it (nothing runs: the ncu CSV was recorded on the H200)."""
    import subprocess
    import sys

    dump = H200 / "rmsnorm" / "output_code.py"
    out = subprocess.run([sys.executable, "-m", "kernelopt_core.cli.main", "profile", str(dump), "--ncu-csv",
                          str(H200 / "ncu" / "rmsnorm_sections.csv"), "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    graph = _graph(dump)
    records = profile_records(json.loads(out.stdout), graph.path, {k.name: k.source_hash for k in graph.kernels})
    assert len(records) == 1
    store = ResultStore()
    store.set_profile(records[0])
    kernel = graph.kernels[0]
    view = kernel_view(graph, kernel, analyze(graph), store)
    # ncu timed only this kernel: its 100% "of the profiled kernels" is not shown as a graph share.
    # Without peaks the speed of light is unknown: SOL memory 81% alone is not near-optimal any more
    assert profile_diagnostics([view])[0].message == \
        "memory-bound · DRAM 81% of peak · occupancy 90% · top rule: SOLBottleneck"
    text = hover_markdown(view)
    assert "| tier | memory-bound |" in text and "| duration | 62.1 µs |" in text
    assert "| paper's SOL-memory tier | near-optimal |" in text
    assert "| minimum bytes | 268.45 MB (each tensor read or written once) |" in text  # from the wrapper
    assert "| speed of light | unknown: no measured copy bandwidth for this device |" in text
    assert "| registers / thread | 28 |" in text and "| block size | 512 |" in text
    assert "1. **SOLBottleneck**: This workload is utilizing greater than 80.0%" in text


def test_timed_profile_row_without_ncu():
    # A row as `kernelopt profile --device cpu` writes it (captured from the CPU example graph).
    row = {"name": SOFTMAX_KERNEL, "graph": str(SOFTMAX), "kind": "red", "duration_ns": 2862961290.0,
           "time_share": 0.9957932997160784, "time_share_of": "graph", "tier": "unknown", "dram_pct": None,
           "sm_pct": None, "memory_pct": None, "occupancy_pct": None, "registers": None, "block_size": None,
           "grid_size": None, "launches": 1, "rules": [], "top_rule": None, "evidence": [], "directions": [],
           "achieved": {}, "source": "timing", "timing_path": "module-call", "device": "cpu"}
    record = profile_records({"source": "timing", "kernels": [row]}, str(SOFTMAX), {SOFTMAX_KERNEL: "h"})[0]
    assert profile_line(record) == "timed, no ncu metrics · 2.86 s per call · 99.6% of graph time"


def test_accepted_replacement_lens_offers_removal(tmp_path: Path):
    from kernelopt_core.accepted import AcceptedStore, entry_from_cascade

    graph = _graph(CONV)
    first = graph.kernels[0]
    cascade = {"accepted": True, "failed_gate": None, "reason": "accepted", "gates": [], "speedup": 1.25,
               "ci": [1.1, 1.4]}
    entry = entry_from_cascade(graph, first.name, first.source.replace("xmask", "xmask "), cascade, run_id="r1")
    store = AcceptedStore(str(tmp_path / "accepted"))
    entry_id = store.add(entry)
    found = {first.name: store.find_by_source_hash(first.source_hash)}
    views = [kernel_view(graph, k, analyze(graph), ResultStore()) for k in graph.kernels]
    lenses = kernel_lenses("file:///c.py", views, [], found)
    removal = [lens for lens in lenses if lens.command.command == "kernelopt.server.removeAccepted"]
    assert len(removal) == 1
    assert removal[0].range.start.line == first.name_range.start_line
    assert removal[0].command.title.startswith(f"accepted replacement {entry_id}")
    assert "1.25×" in removal[0].command.title
    assert removal[0].command.arguments == [{"entryId": entry_id, "uri": "file:///c.py"}]


def test_graph_overheads_from_a_timed_profile_become_a_first_line_diagnostic():
    from kernelopt_lsp.diagnostics import overhead_diagnostics
    from kernelopt_lsp.results import overhead_items

    result = {"kernels": [], "overheads": [
        {"graph": "/w/a/output_code.py", "name": "CUDA-graph input copy", "time_ms": 3.47, "share": 0.5,
         "description": "CUDA-graph input copy: 50% of graph time (3.470 ms, 6.4 GB per call)",
         "suggestion": "compile with mode='max-autotune-no-cudagraphs'"},
        {"graph": "/w/a/output_code.py", "name": "launch gaps", "time_ms": 0.15, "share": 0.02,
         "description": "launch gaps: 2% of graph time (0.150 ms)", "suggestion": ""},
        {"graph": "/w/other/output_code.py", "name": "guard + wrapper", "time_ms": 1.0, "share": 0.9},
    ]}
    items = overhead_items(result, "/w/a/output_code.py")
    assert [item["name"] for item in items] == ["CUDA-graph input copy", "launch gaps"]
    (diagnostic,) = overhead_diagnostics(items, first_line_length=20)
    assert diagnostic.range.start.line == 0 and diagnostic.code == "graph-overhead"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning  # 52% >= the 30% rule
    assert diagnostic.message.startswith("overhead dominates: 52% of graph time")
    assert "6.4 GB per call" in diagnostic.message and "max-autotune-no-cudagraphs" in diagnostic.message
    small = overhead_diagnostics(items[1:], first_line_length=20)
    assert small[0].severity == types.DiagnosticSeverity.Information
    assert overhead_diagnostics([], first_line_length=20) == []
    assert overhead_items({"kernels": []}, "/w/a/output_code.py") == []
