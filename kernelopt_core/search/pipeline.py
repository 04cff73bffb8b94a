"""``optimize``: the whole search for one compiled graph, from dispatch to decision.

1. Dispatch: classify the graph (optimizable / vendor-dominated / no-triton) with measured time
   shares; vendor-dominated graphs are reported and not searched unless forced.
2. Per target kernel (largest share first): profile (ncu on a GPU, chosen by the profiler agent),
   analyse (tier, directions), then beam search: B beam nodes x N plans per iteration, each plan
   executed with up to K attempts; every candidate goes through gates 1-2 and is timed alone.
3. Finalists (the fastest verified candidates) go through gates 3-4 on the whole graph; the
   first accepted per kernel wins, and several accepted kernels are verified together.
4. Decision: ``optimized`` (all four gates passed), ``matched`` (correct candidates, none
   measurably faster: the compiler's code is kept), or ``fallback`` with its reason.

Everything is journaled in the run folder (see :mod:`kernelopt_core.runs`) and a killed run
resumes with ``resume=RUN``. Nothing here imports torch; the measurements run in the worker.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..artifacts import CompiledGraph, TritonKernel, discover
from ..artifacts.model import source_hash
from ..dispatch import DispatchReport, OverheadItem, analyze
from ..events import EventSink
from ..gates.restitch import restitch, unified_diff
from ..gates.verdict import CascadeResult
from ..runs import RunFolder, render_report
from .agents import Executor, KernelBrief, Outcome, Plan, Planner, PlanRequest, Profiler, Proposal, Summarizer
from .beam import BeamNode, EarlyStop, MeltdownDetector, record_visit, select_beam
from .evaluation import EvaluationError, Evaluator, GateEvaluator, KernelTime, RecordedEvaluator, Screen
from .llm import ProviderConfigError, ProviderError, RetryPolicy, UsageLedger, make_provider
from .llm.recording import RecordingProvider
from .memory import ExperienceStore, RunMemory, search_memory
from .prompts import PromptError, load_prompt, load_text
from .rewrites import RewriteContext
from .rewrites.describe import describe_change
from .rewrites.kernel_source import KernelSourceError, LaunchConfig, parse_kernel_module, source_digest

Decision = Literal["optimized", "matched", "fallback"]
# The CPU interpreter runs a small graph in ~0.1-1 s: fewer A/B rounds than a GPU's budget keep a
# run to minutes; the confidence interval still decides gate 4.
CPU_AB_ROUNDS = 6
CPU_KERNEL_ROUNDS = 4


class OptimizeError(RuntimeError):
    """The optimization cannot start: unreadable dump, unknown kernel, bad resume, bad provider setup."""


@dataclass
class OptimizeConfig:
    provider: str = "offline"
    model: str = "claude-sonnet-4-6"
    beam_width: int = 4  # B
    iterations: int = 5  # T
    plans: int = 4  # N, per beam node and iteration
    retries: int = 4  # K, executor attempts per plan
    device: str = "auto"
    force: bool = False  # search vendor-dominated graphs too
    allow_config_changes: bool = False  # verify a recommended torch.compile configuration change too
    # account for the whole torch.compile callable when the problem is known (compile_report.json):
    # "auto" (on a GPU), "on" or "off" (see config_findings.accounting_wanted)
    account_callable: str = "auto"
    run_root: str = ".kernelopt/runs"
    # Ablation switches: every component can be turned off.
    use_beam: bool = True  # off: greedy, width 1
    use_ncu: bool = True  # off: no profiling, tier unknown
    use_memory: bool = True  # off: no run FIFO, no cross-run store, no AVOID list
    use_perf_gate: bool = True  # off: finalists pass on gates 1-3 plus the kernel-alone timing
    multi_iteration: bool = True  # off: one iteration
    diversity: bool = True  # beam diversity (best per chain first)
    meltdown: bool = True
    early_stop: bool = True
    ucb_c: float = 1.4
    patience: int = 2
    meltdown_window: int = 6
    meltdown_unique: int = 2
    max_kernels: int = 3  # kernels searched per graph, by time share
    min_share: float = 0.02  # kernels below this share of the graph are not worth a search
    finalists: int = 2  # gate 3-4 attempts per kernel (targeted retries on a perf rejection)
    min_speedup: float = 1.03
    ab_rounds: int | None = None  # gate 4 rounds; None: the device's timing budget
    kernel_rounds: int | None = None  # kernel-alone A/B rounds for ranking candidates
    memory_path: str | None = None  # the cross-run SQLite store; None: the user cache folder
    api_max_retries: int = 4
    api_timeout_s: float = 300.0
    api_base_delay_s: float = 1.0
    base_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OptimizeConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


_TRANSPORT_FIELDS = ("run_root", "base_url", "api_max_retries", "api_timeout_s", "api_base_delay_s")


@dataclass
class OptimizeResult:
    run_id: str
    run_dir: str
    decision: Decision
    reason: str
    speedup: float | None
    ci: tuple[float, float] | None
    timing_path: str | None
    kernels: list[dict[str, Any]] = field(default_factory=list)
    accepted_sources: dict[str, str] = field(default_factory=dict)
    cascade: CascadeResult | None = None
    graph_path: str = ""
    device: str = ""
    llm_usage: dict[str, Any] = field(default_factory=dict)
    suggestions: list[str] = field(default_factory=list)
    config_change: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)  # torch/triton versions, GPU name
    # the whole-callable accounting (CallableAccounting JSON, no per-launch times) when the problem is known
    accounting: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        cascade = self.cascade.to_json() if self.cascade else None
        if cascade is not None:
            cascade.pop("diff", None)  # it is in final.diff
        return {
            "run_id": self.run_id, "run_dir": self.run_dir, "decision": self.decision, "reason": self.reason,
            "speedup": self.speedup, "ci": list(self.ci) if self.ci else None, "timing_path": self.timing_path,
            "kernels": self.kernels, "accepted_kernels": sorted(self.accepted_sources), "graph_path": self.graph_path,
            "device": self.device, "cascade": cascade, "llm_usage": self.llm_usage, "suggestions": self.suggestions,
            "config_change": self.config_change, "accepted_sources": dict(self.accepted_sources),
            "environment": self.environment, "accounting": self.accounting,
            "report": os.path.join(self.run_dir, "report.md"), "diff": os.path.join(self.run_dir, "final.diff"),
        }


@dataclass
class KernelSearch:
    brief: KernelBrief
    nodes: list[BeamNode] = field(default_factory=list)
    candidates: int = 0
    screened_ok: int = 0
    rejections: dict[int, int] = field(default_factory=dict)
    accepted: BeamNode | None = None
    cascade: CascadeResult | None = None
    correct: bool = False  # some candidate passed gates 1-3
    perf_rejected: int = 0
    titles: dict[str, str] = field(default_factory=dict)  # node id -> rewrite title
    unverified: int = 0  # candidates whose check could not run (e.g. out of memory): not rejections
    quarantined: list[dict[str, Any]] = field(default_factory=list)  # candidates that broke containment

    def best(self) -> BeamNode | None:
        found = [n for n in self.nodes if n.id != "root"]
        return min(found, key=lambda n: (n.latency_ms, n.id)) if found else None


def optimize(path: str, *, kernel: str | None = None, config: OptimizeConfig, sink: EventSink | None = None,
             resume: str | None = None, evaluator: Evaluator | None = None,
             launch_timing: dict[str, Any] | None = None, problem: str | None = None,
             accounting: dict[str, Any] | None = None, target: Any = None) -> OptimizeResult:
    """Optimize the graph at ``path`` (an output_code.py or a dump folder). ``evaluator`` replaces
    the gates and measurements (tests use a stand-in); by default they run on the graph's device.
    ``launch_timing`` is a per-launch timing of this graph the caller already measured
    (``LaunchTiming.to_json()``): dispatch uses it instead of timing the launches again.
    ``problem`` is the problem file the dump was compiled from (default: the one
    ``compile_report.json`` above the dump names); ``accounting`` is its whole-callable accounting
    the caller already measured (``CallableAccounting.to_json()``), used instead of measuring it.
    ``target`` is a project's own kernel (:class:`kernelopt_core.userkernels.target.UserKernelTarget`)
    in place of a dump: its graph view, evaluator, contract and file edit stand in for the dump's."""
    search = _Search(path, kernel, config, sink or EventSink(), resume, evaluator, launch_timing,
                     _CallableSource(problem, accounting), target)
    try:
        return search.run()
    except EvaluationError as exc:  # the device or the graph, not a candidate: stop with the reason
        search.journal.record("error", message=str(exc))
        raise OptimizeError(f"{exc} (what was recorded is kept: --resume {search.run_folder.id})") from None


def _pick_graph(path: str, kernel: str | None) -> CompiledGraph:
    if not os.path.exists(path):
        raise OptimizeError(f"{path}: no such file or folder")
    graphs, problems = discover(path)
    if not graphs:
        detail = "; ".join(str(p) for p in problems[:3])
        raise OptimizeError(f"{path}: no readable Inductor dump (output_code.py)" + (f": {detail}" if detail else ""))
    if kernel is not None:
        holding = [g for g in graphs if g.kernel(kernel) is not None]
        if not holding:
            names = sorted({k.name for g in graphs for k in g.kernels})
            raise OptimizeError(f"{path}: no Triton kernel named {kernel} (kernels: {', '.join(names) or 'none'})")
        return holding[0]
    return max(graphs, key=lambda g: (len(g.launches), g.path))


@dataclass
class _CallableSource:
    """Where the whole-callable accounting comes from: the problem file and what the caller measured."""

    problem: str | None = None
    accounting: dict[str, Any] | None = None
    mode: str | None = None  # the mode the dump was compiled with


class _Search:
    def __init__(self, path: str, kernel: str | None, config: OptimizeConfig, sink: EventSink, resume: str | None,
                 evaluator: Evaluator | None, launch_timing: dict[str, Any] | None = None,
                 callable_source: _CallableSource | None = None, target: Any = None):
        self.config = config
        self.target = target
        self.given_launch_timing = launch_timing
        self.callable_source = callable_source or _CallableSource()
        self.sink = sink
        self.kernel_name = kernel
        if resume:
            try:
                self.run_folder = RunFolder.open(resume, config.run_root)
            except ValueError as exc:
                raise OptimizeError(str(exc)) from None
            started = self.run_folder.journal.lookup("run_started", "run")
            if started is None:
                raise OptimizeError(f"{self.run_folder.path}: the journal has no run_started entry; cannot resume")
            path = started["graph_path"]
            self.kernel_name = started.get("kernel")
            if started.get("user_kernel") and self.target is None:
                self.target = _user_target(started["user_kernel"])
            if started.get("problem") and not self.callable_source.problem:
                self.callable_source.problem = started["problem"]
            # The search parameters are the run's own; how to reach the provider is this invocation's.
            transport = {k: getattr(config, k) for k in _TRANSPORT_FIELDS}
            self.config = config = OptimizeConfig.from_json({**started["config"], **transport})
            self.graph = self.target.graph() if self.target is not None else _pick_graph(path, self.kernel_name)
            if source_hash(Path(self.graph.path).read_text(encoding="utf-8")) != started.get("text_hash"):
                raise OptimizeError(f"{self.graph.path} changed since run {self.run_folder.id} started; "
                                    "start a new run instead of resuming")
        else:
            self.graph = self.target.graph() if self.target is not None else _pick_graph(path, kernel)
        self.device_kind = "cpu" if self.graph.device == "cpu" else "cuda"
        # Before a new run folder exists: a missing key or a broken prompt file leaves nothing behind.
        provider = self._provider()
        self.prompts = self._prompts() if provider is not None else {}
        if not resume:
            self.run_folder = RunFolder.create(config.run_root, self.graph.name)
        workdir = str(self.run_folder.path / "work")
        if evaluator is None and self.target is not None:
            evaluator = self.target.evaluator(workdir, ab_rounds=self._ab_rounds(), kernel_rounds=self._kernel_rounds(),
                                              sink=sink)
        # Register budgets come from the candidate compiled for sm_90 (rewrites.budget), on real GPU runs.
        self._probe_enabled = (evaluator is None and self.device_kind == "cuda"
                               and os.environ.get("KERNELOPT_COMPILE_PROBE", "1") != "0")
        if evaluator is None:
            try:
                evaluator = GateEvaluator(self.graph, config.device, workdir, ab_rounds=self._ab_rounds(),
                                          kernel_rounds=self._kernel_rounds(), sink=sink)
            except EvaluationError as exc:
                raise OptimizeError(str(exc)) from None
        self._resolve_problem()
        if not resume:
            self.run_folder.journal.append(
                "run_started", "run", graph_path=os.path.abspath(self.graph.path), graph=self.graph.name,
                text_hash=source_hash(Path(self.graph.path).read_text(encoding="utf-8")), kernel=kernel,
                config=config.to_json(), provider=config.provider, model=config.model, device=evaluator.device,
                problem=self.callable_source.problem,
                user_kernel=self.target.to_json() if self.target is not None else None)
        else:
            self.run_folder.journal.append("resumed", dropped_torn_line=self.run_folder.journal.dropped_tail)
        self.journal = self.run_folder.journal
        self.ledger = UsageLedger()
        self.provider = RecordingProvider(provider, self.journal, self.ledger) if provider is not None else None
        self.evaluator = RecordedEvaluator(evaluator, self.journal)
        self.run_memory = RunMemory() if config.use_memory else None
        self.store: ExperienceStore | None = None
        if config.use_memory:
            try:
                self.store = ExperienceStore(config.memory_path)
            except Exception as exc:  # noqa: BLE001 - sqlite3/OS errors: the search runs without it
                self.journal.record("note", message=f"cross-run memory unavailable: {exc}")
        self.planner = Planner(self.provider, self.prompts.get("planner"), self._memory_lookup)
        contract = self.prompts.get("launcher_contract", "")
        self.executor = Executor(self.provider, self.prompts.get("executor"), contract, config.retries)
        self.summarizer = Summarizer(self.provider, self.prompts.get("summarizer"))
        self.profiler = Profiler(self.provider, self.prompts.get("profiler"))
        self.history: list[str] = []
        self._brief: KernelBrief | None = None
        self._accounting_summary: dict[str, Any] | None = None
        self._timing: dict[str, Any] | None = None  # the dispatch timing: launch times and arguments

    # --- setup --------------------------------------------------------------------------------

    def _provider(self) -> Any:
        config = self.config
        retry = RetryPolicy(max_retries=config.api_max_retries, base_delay_s=config.api_base_delay_s,
                            timeout_s=config.api_timeout_s)
        try:
            return make_provider(config.provider, config.model, retry=retry, ledger=UsageLedger(),
                                 base_url=config.base_url)
        except ProviderConfigError as exc:
            raise OptimizeError(str(exc)) from None

    def _ab_rounds(self) -> int | None:
        if self.config.ab_rounds is not None:
            return self.config.ab_rounds
        return CPU_AB_ROUNDS if self.device_kind == "cpu" else None

    def _kernel_rounds(self) -> int | None:
        if self.config.kernel_rounds is not None:
            return self.config.kernel_rounds
        return CPU_KERNEL_ROUNDS if self.device_kind == "cpu" else None

    def _prompts(self) -> dict[str, Any]:
        try:
            prompts: dict[str, Any] = {agent: load_prompt(agent)
                                       for agent in ("planner", "executor", "summarizer", "profiler")}
            contract = self.target.contract_prompt if self.target is not None else "launcher_contract.md"
            prompts["launcher_contract"] = load_text(contract)
            return prompts
        except PromptError as exc:
            raise OptimizeError(str(exc)) from None

    def _memory_lookup(self, query: str) -> str:
        brief = self._brief
        return search_memory(query, self.run_memory, self.store, kernel_kind=brief.kind if brief else None,
                             device=self.device_kind)

    def progress(self, message: str, **fields: Any) -> None:
        self.sink.progress(message, **fields)

    # --- the run ------------------------------------------------------------------------------

    def run(self) -> OptimizeResult:
        self.progress(f"run {self.run_folder.id}: {self.graph.name}", stage="start", percentage=0,
                      run_id=self.run_folder.id, run_dir=str(self.run_folder.path))
        report = self._dispatch()
        targets = self._targets(report)
        if isinstance(targets, str):
            return self._finish([], None, "fallback", targets, report)
        facts = self.evaluator.facts([k.name for k, _ in targets]).get("kernels", {})
        avoid = self._avoid_snapshot()
        searches: list[KernelSearch] = []
        for index, (kernel, share) in enumerate(targets):
            self.sink.check_cancelled()
            brief = self._make_brief(kernel, share, facts.get(kernel.name, {}))
            self._brief = brief
            search = self._search_kernel(brief, avoid, index, len(targets))
            self._finalists(search)
            searches.append(search)
            self.journal.record("kernel_done", kernel=kernel.name, accepted=search.accepted is not None,
                                candidates=search.candidates, screened_ok=search.screened_ok)
        final = self._combine(searches)
        decision, reason = self._decide(searches, final)
        if self.target is not None:  # a project's own kernel: what is kept is the user's, not the compiler's
            reason = reason.replace("the compiler's code", "the original kernel").replace(
                "Inductor's kernel", "the original kernel")
        return self._finish(searches, final, decision, reason, report)

    def _dispatch(self) -> DispatchReport:
        timing = self.given_launch_timing
        if timing is not None and "error" not in timing:
            self.journal.record("note", message="dispatch uses the launch timing the caller measured")
        else:
            self.progress("timing the graph's launches (the first measurement also starts the worker)",
                          stage="timing", percentage=1)
            timing = self.evaluator.launch_timing()
        if timing and "error" not in timing:
            self._timing = timing
            times = {int(k): float(v) for k, v in timing["launch_times_ms"].items()}
            overheads = [OverheadItem(name=o["name"], time_ms=o["time_ms"], share=o.get("share", 0.0),
                                      detail=o.get("detail", ""), suggestion=o.get("suggestion", ""),
                                      bytes_per_call=o.get("bytes_per_call"))
                         for o in timing.get("overheads", [])]
            report = analyze(self.graph, times, overheads, timing.get("path"))
        else:
            report = analyze(self.graph)
        self.journal.record("dispatch", classification=report.classification, evidence=report.evidence,
                            timed=report.timed)
        self.progress(f"{report.classification}: {report.evidence}", stage="dispatch", percentage=2)
        return report

    def _targets(self, report: DispatchReport) -> list[tuple[TritonKernel, float]] | str:
        if report.classification == "no-triton":
            return f"no Triton kernels to rewrite ({report.evidence})"
        if report.classification == "vendor-dominated" and not self.config.force:
            return (f"vendor-dominated: {report.evidence}; vendor libraries already run near peak, so the graph "
                    "was not searched (use --force to search its Triton kernels anyway)")
        if self.kernel_name:
            kernel = self.graph.kernel(self.kernel_name)
            assert kernel is not None
            return [(kernel, report.share_of(kernel.name))]
        ranked = sorted(self.graph.kernels, key=lambda k: (-report.share_of(k.name), k.name))
        chosen = [(k, report.share_of(k.name)) for k in ranked if report.share_of(k.name) >= self.config.min_share]
        chosen = chosen[: max(1, self.config.max_kernels)]
        return chosen or f"no Triton kernel takes at least {self.config.min_share:.0%} of the graph"

    def _avoid_snapshot(self) -> set[str]:
        """The AVOID list as it was when the run started (a resumed run must plan the same way)."""
        entry = self.journal.lookup("memory_snapshot", "avoid")
        if entry is not None:
            return set(entry["value"])
        avoid = sorted(self.store.avoid_list(device=self.device_kind)) if self.store is not None else []
        self.journal.append("memory_snapshot", "avoid", value=avoid)
        return set(avoid)

    def _make_brief(self, kernel: TritonKernel, share: float, facts: dict[str, Any]) -> KernelBrief:
        brief = KernelBrief(name=kernel.name, kind=kernel.kind, device=self.device_kind, original_source=kernel.source,
                            share=share, baseline_ms=facts.get("ms"), inductor_configs=facts.get("configs", []),
                            aten_ops=list(kernel.aten_ops))
        metrics = None
        if self.config.use_ncu and self.device_kind == "cuda":
            request = self.profiler.choose(brief)
            self.journal.record("ncu_request", kernel=kernel.name, request=request.to_json())
            profile = self.evaluator.profile(kernel.name, request.sections) or {}
            metrics = profile.get("metrics")
            if profile.get("error"):
                brief.evidence.append(f"ncu unavailable: {profile['error']}")
            else:
                self.run_folder.write_json(f"ncu/{kernel.name}.json", profile)
        analysis = self._analyse(kernel, metrics)
        brief.tier = analysis.get("tier", "unknown")
        brief.evidence += analysis.get("evidence", [])
        brief.directions = analysis.get("directions", [])
        brief.top_rules = analysis.get("top_rules", [])
        brief.metrics = metrics
        brief.speed_of_light = analysis.get("rewrite_evidence") or {}
        brief.paper_tier = analysis.get("paper_tier", "unknown")
        if brief.baseline_ms is not None:
            brief.evidence.append(f"kernel alone: {brief.baseline_ms:.4f} ms on its captured arguments")
        self.journal.record("brief", kernel=kernel.name, value=brief.to_json())
        return brief

    def _peaks(self) -> Any:
        """The device's measured peaks (cached per GPU, measured once) from the evaluator, journaled
        for a resumed run. None on the CPU backend, or when the evaluator cannot measure them."""
        if self.device_kind != "cuda":
            return None
        from ..measure.peaks import DevicePeaks

        entry = self.journal.lookup("peaks", "device")
        if entry is None:
            measure = getattr(getattr(self.evaluator, "inner", self.evaluator), "peaks", None)
            try:
                found = measure() if measure is not None else None
                value = found.to_json() if found is not None else {"error": "the evaluator measured no peaks"}
            except Exception as exc:  # noqa: BLE001 - no peaks means SOL unknown, never a failed run
                value = {"error": f"{type(exc).__name__}: {exc}"}
            entry = self.journal.append("peaks", "device", value=value)
        value = entry["value"]
        return DevicePeaks.from_json(value) if isinstance(value, dict) and "error" not in value else None

    def _launch(self, kernel: TritonKernel) -> tuple[Any, float | None, str | None]:
        """The launch standing for the kernel (recorded in the dispatch timing, else read from the
        wrapper), its timed duration and that time's source."""
        from ..measure.traffic import LaunchTraffic, kernel_launch, static_graph_traffic

        timing = self._timing or {}
        recorded = [LaunchTraffic.from_json(item) for item in timing.get("launch_traffic") or []]
        launch = kernel_launch(recorded, kernel.name) or kernel_launch(static_graph_traffic(self.graph), kernel.name)
        times = timing.get("launch_times_ms") or {}
        ms = times.get(str(launch.order)) if launch is not None else None
        source = f"timed launch, {timing.get('path', 'module-call')} path (no ncu)" if ms is not None else None
        return launch, (float(ms) if ms is not None else None), source

    def _analyse(self, kernel: TritonKernel, metrics: dict[str, Any] | None) -> dict[str, Any]:
        try:
            from ..analyst import analyze_kernel, rewrite_evidence
            from ..measure.ncu import KernelMetrics

            parsed = KernelMetrics.from_json(metrics) if metrics else None
            launch, launch_ms, source = self._launch(kernel)
            analysis = analyze_kernel(parsed, None, self._peaks(), kernel, launch_args=launch, duration_ms=launch_ms,
                                      duration_source=source, cpu=self.device_kind == "cpu")
            return {**analysis.to_json(), "rewrite_evidence": rewrite_evidence(analysis, launch)}
        except Exception as exc:  # noqa: BLE001 - no analysis means tier unknown, never a failed run
            return {"tier": "unknown", "evidence": [f"analyst unavailable: {exc}"]}

    # --- beam search over one kernel -----------------------------------------------------------

    def _context(self, brief: KernelBrief, source: str) -> RewriteContext:
        module = parse_kernel_module(source, brief.name)
        original = parse_kernel_module(brief.original_source, brief.name)
        configs = []
        for item in brief.inductor_configs:
            blocks = {k: v for k, v in (item.get("blocks") or {}).items() if k in module.block_params}
            if blocks:
                configs.append(LaunchConfig.of(blocks, int(item.get("num_warps", 4)), int(item.get("num_stages", 1))))
        from ..analyst import EVIDENCE_KEYS

        evidence = {key: brief.speed_of_light.get(key) for key in EVIDENCE_KEYS}
        sms = evidence.get("sm_count")
        return RewriteContext(module=module, original=original, device=self.device_kind, tier=brief.tier,
                              inductor_configs=configs, evidence=evidence,
                              compile_probe=self._compile_probe if self._probe_enabled else None,
                              **({"multiprocessors": int(sms)} if isinstance(sms, int) and sms > 0 else {}))

    def _compile_probe(self, source: str) -> dict[str, Any] | None:
        """Registers, spill bytes and shared memory of a plain kernel module compiled for sm_90 (its
        first launch config), or None when it does not compile. Journaled, so a resumed run proposes
        the same variants without compiling again."""
        key = source_digest(source)
        entry = self.journal.lookup("compile_probe", key)
        if entry is not None:
            return entry.get("value")
        from ..gates.ptx_compile import shared_compiler

        value: dict[str, Any] | None = None
        try:
            name = parse_kernel_module(source).name
            result = shared_compiler().compile(name, source)
            first = (result.get("configs") or [None])[0] if result.get("ok") else None
            if isinstance(first, dict):
                value = {"regs": first.get("n_regs"), "spills": first.get("n_spills"),
                         "shared_bytes": first.get("shared_bytes")}
        except (KernelSourceError, OSError, RuntimeError) as exc:
            self.journal.record("note", message=f"compile probe unavailable: {exc}")
        self.journal.append("compile_probe", key, value=value)
        return value

    def _search_kernel(self, brief: KernelBrief, avoid: set[str], index: int, count: int) -> KernelSearch:
        config = self.config
        search = KernelSearch(brief)
        baseline = brief.baseline_ms if brief.baseline_ms and brief.baseline_ms > 0 else 1.0
        root = BeamNode("root", brief.original_source, source_digest(brief.original_source), baseline, 1.0, "root")
        search.nodes.append(root)
        try:
            self._context(brief, brief.original_source)
        except KernelSourceError as exc:
            self.journal.record("note", message=f"{brief.name}: cannot be rewritten ({exc})")
            return search
        width = config.beam_width if config.use_beam else 1
        iterations = config.iterations if config.multi_iteration else 1
        beam = [root]
        tried = {root.source_hash}
        meltdown = MeltdownDetector(config.meltdown_window, config.meltdown_unique)
        stopper = EarlyStop(config.patience, best_latency=root.latency_ms)  # improvement over Inductor counts
        counter = 0
        for iteration in range(1, iterations + 1):
            self.sink.check_cancelled()
            best = min(n.latency_ms for n in search.nodes)
            self.progress(f"{brief.name}: iteration {iteration}/{iterations}, beam of {len(beam)}", stage="iteration",
                          iteration=iteration, iterations=iterations, kernel=brief.name,
                          best_speedup=round(baseline / best, 4),
                          percentage=int(5 + 85 * (index + (iteration - 1) / iterations) / count))
            children: list[BeamNode] = []
            for node in beam:
                context = self._context(brief, node.source)
                request = PlanRequest(
                    brief=brief, node_source=node.source, context=context, n=config.plans, recent=list(meltdown.recent),
                    banned=meltdown.banned() if config.meltdown else set(),
                    avoid=avoid if config.use_memory else set(), boosted=self._boosts(), history=self.history)
                try:
                    plans = self.planner.plan(request)
                except ProviderError as exc:
                    self.journal.record("llm_error", agent="planner", message=str(exc))
                    plans = []
                best_child: BeamNode | None = None
                for plan in plans:
                    meltdown.observe(plan.family or plan.direction)
                    self.journal.record("plan", kernel=brief.name, iteration=iteration, node=node.id,
                                        plan=plan.to_json(), melted=meltdown.melted)
                    counter += 1
                    child = self._execute(search, brief, plan, node, context, tried, iteration, f"i{iteration}c{counter}")
                    if child is not None:
                        children.append(child)
                        if best_child is None or child.latency_ms < best_child.latency_ms:
                            best_child = child
                record_visit(search.nodes, node.id, best_child.speedup if best_child else 0.0)
            search.nodes.extend(children)
            pool = search.nodes
            if config.use_beam:
                beam = select_beam(pool, width, c=config.ucb_c, diversity=config.diversity)
            else:
                beam = sorted(pool, key=lambda n: (n.latency_ms, n.id))[:1]
            iteration_best = min((c.latency_ms for c in children), default=None)
            self.journal.record("iteration_done", kernel=brief.name, iteration=iteration,
                                beam=[n.id for n in beam], children=[c.id for c in children],
                                best_latency_ms=min(n.latency_ms for n in search.nodes))
            best_now = min(n.latency_ms for n in search.nodes)
            self.progress(f"{brief.name}: iteration {iteration} done, best kernel speedup {baseline / best_now:.2f}x",
                          stage="iteration", iteration=iteration, iterations=iterations, kernel=brief.name,
                          best_speedup=round(baseline / best_now, 4))
            if stopper.update(iteration_best) and config.early_stop and iteration < iterations:
                self.journal.record("early_stop", kernel=brief.name, iteration=iteration,
                                    reason=f"{config.patience} iterations without a faster candidate")
                break
        return search

    def _boosts(self) -> dict[str, float]:
        """Families that already won in this run (from the run memory) rank higher."""
        if self.run_memory is None:
            return {}
        out: dict[str, float] = {}
        for item in self.run_memory.items:
            if item.speedup >= 1.05:
                out[item.rewrite_type] = max(out.get(item.rewrite_type, 0.0), item.speedup)
        return out

    def _execute(self, search: KernelSearch, brief: KernelBrief, plan: Plan, node: BeamNode,
                 context: RewriteContext, tried: set[str], iteration: int, label: str) -> BeamNode | None:
        try:
            session = self.executor.start(plan, brief, node.source, context, tried)
        except ProviderError as exc:
            self.journal.record("llm_error", agent="executor", message=str(exc))
            return None
        feedback: str | None = None
        for attempt in range(1, self.config.retries + 1):
            self.sink.check_cancelled()
            try:
                proposal = session.propose(feedback)
            except ProviderError as exc:
                self.journal.record("llm_error", agent="executor", message=str(exc))
                return None
            if proposal is None:
                self.journal.record("attempt_failed", kernel=brief.name, plan=plan.direction, attempt=attempt,
                                    reason=session.error)
                if session.exhausted:
                    return None
                feedback = session.error
                continue
            digest = source_digest(proposal.source)
            if digest in tried:
                feedback = "this kernel was already tried; change something else"
                self.journal.record("attempt_failed", kernel=brief.name, plan=plan.direction, attempt=attempt,
                                    reason="duplicate of an earlier candidate")
                continue
            tried.add(digest)
            search.candidates += 1
            path = self.run_folder.write_candidate(brief.name, digest, proposal.source)
            self.journal.record("candidate", kernel=brief.name, id=label, parent=node.id, iteration=iteration,
                                attempt=attempt, source_hash=digest, file=str(path.relative_to(self.run_folder.path)),
                                proposal=proposal.to_json())
            self.progress(f"{brief.name}: candidate {label} ({proposal.title})", stage="candidate", kernel=brief.name,
                          candidate=label, family=proposal.family, attempt=attempt)
            screen = self.evaluator.screen(brief.name, proposal.source)
            if screen.quarantined:
                entry = {"candidate": label, "title": proposal.title, "family": proposal.family,
                         "source_hash": digest, "reason": screen.reason, "containment": screen.containment}
                search.quarantined.append(entry)
                self.journal.record("quarantine", kernel=brief.name, **entry)
            if screen.could_not_verify:
                # The check failed, not the candidate: no rejection counted, nothing learnt from it.
                search.unverified += 1
                self.journal.record("could_not_verify", kernel=brief.name, candidate=label, reason=screen.reason)
                self.history.append(f"{proposal.title}: could not be verified ({screen.reason[:200]})")
                return None
            if not screen.passed:
                gate = screen.failed_gate or 0
                search.rejections[gate] = search.rejections.get(gate, 0) + 1
                feedback = screen.reason
                self.history.append(f"{proposal.title}: rejected by gate {gate}: {screen.reason[:200]}")
                self._learn(brief, plan, proposal, None, f"gate {gate}: {screen.reason[:300]}", label)
                continue
            search.screened_ok += 1
            self.progress(f"{brief.name}: {label} passed gates 1-2; timing it against the original kernel",
                          stage="timing", kernel=brief.name, candidate=label)
            timing = self.evaluator.time(brief.name, proposal.source, screen)
            child = self._node(search, brief, proposal, node, timing, digest, iteration, label, plan)
            self.history.append(f"{proposal.title}: passed gates 1-2, kernel speedup {child.speedup:.3f}x"
                                if child else f"{proposal.title}: passed gates 1-2, timing failed")
            self._learn(brief, plan, proposal, child.speedup if child else None, None, label)
            return child
        return None

    def _node(self, search: KernelSearch, brief: KernelBrief, proposal: Proposal, parent: BeamNode, timing: KernelTime,
              digest: str, iteration: int, label: str, plan: Plan) -> BeamNode | None:
        if timing.speedup is None or timing.ms is None or not math.isfinite(timing.speedup) or timing.speedup <= 0:
            self.journal.record("note", message=f"{label}: kernel timing failed: {timing.error}")
            return None
        if brief.baseline_ms is None and timing.baseline_ms:
            brief.baseline_ms = timing.baseline_ms  # for reports and the planner's context
        root = search.nodes[0]
        # Latency on the root's scale: the A/B ratio against the baseline kernel, taken in one job.
        latency = root.latency_ms / timing.speedup
        node = BeamNode(label, proposal.source, digest, latency, timing.speedup,
                        chain=label if parent.id == "root" else parent.chain, parent=parent.id, iteration=iteration,
                        family=proposal.family, direction=plan.direction)
        search.titles[label] = proposal.title
        self.journal.record("node", kernel=brief.name, node=node.to_json(), title=proposal.title)
        return node

    def _learn(self, brief: KernelBrief, plan: Plan, proposal: Proposal, speedup: float | None, rejected: str | None,
               label: str) -> None:
        outcome = Outcome(plan, proposal, speedup, rejected)
        try:
            item, update = self.summarizer.summarize(brief, outcome, self.run_memory)
        except ProviderError as exc:
            self.journal.record("llm_error", agent="summarizer", message=str(exc))
            return
        changed = self.run_memory.apply(item, update) if self.run_memory is not None else False
        self.journal.record("experience", kernel=brief.name, candidate=label, item=item.to_json(),
                            update=update.action, kept=changed)
        if self.store is not None:
            success = speedup is not None and speedup >= self.config.min_speedup
            try:
                self.store.record_attempt(self.run_folder.id, label, proposal.family, success, speedup=speedup,
                                          kernel_kind=brief.kind, device=self.device_kind)
                if changed:
                    self.store.add_experience(self.run_folder.id, label, item)
            except Exception as exc:  # noqa: BLE001 - a locked or damaged store costs memory, not the run
                self.journal.record("note", message=f"cross-run memory not updated: {exc}")

    # --- finalists, decision, outputs ------------------------------------------------------------

    def _gates(self) -> tuple[int, ...]:
        return (3, 4) if self.config.use_perf_gate else (3,)

    def _finalists(self, search: KernelSearch) -> None:
        """Gates 3-4 on the fastest verified candidates; the first accepted wins (targeted retries)."""
        ranked = sorted((n for n in search.nodes if n.id != "root" and n.speedup > 1.0),
                        key=lambda n: (n.latency_ms, n.id))
        for position, node in enumerate(ranked[: max(1, self.config.finalists)]):
            self.sink.check_cancelled()
            self.progress(f"{search.brief.name}: finalist {position + 1} ({search.titles.get(node.id, node.id)}) "
                          "through gates 3-4", stage="gate", kernel=search.brief.name, candidate=node.id)
            cascade = self.evaluator.finalize({search.brief.name: node.source}, self._gates())
            model = cascade.verdict(3)  # compute-sanitizer's runs and times, for every finalist (issue 28)
            self.journal.record("finalist", kernel=search.brief.name, node=node.id, accepted=cascade.accepted,
                                failed_gate=cascade.failed_gate, reason=cascade.reason, speedup=cascade.speedup,
                                could_not_verify=cascade.could_not_verify,
                                sanitizer=model.numbers.get("sanitizer") if model is not None else None,
                                sanitizer_note=model.numbers.get("sanitizer_note") if model is not None else None)
            if cascade.could_not_verify:
                search.unverified += 1
                continue
            if cascade.verdict(3) is not None and cascade.verdict(3).passed:  # type: ignore[union-attr]
                search.correct = True
            accepted = cascade.accepted
            if accepted and not self.config.use_perf_gate:
                accepted = node.speedup >= self.config.min_speedup  # ablation: kernel timing decides
            search.cascade = cascade
            if accepted:
                search.accepted = node
                return
            if cascade.failed_gate == 4:
                search.perf_rejected += 1

    def _combine(self, searches: list[KernelSearch]) -> CascadeResult | None:
        accepted = [s for s in searches if s.accepted is not None]
        if len(accepted) >= 2:
            candidates = {s.brief.name: s.accepted.source for s in accepted if s.accepted is not None}
            self.progress(f"{len(candidates)} accepted kernels verified together", stage="gate")
            combined = self.evaluator.finalize(candidates, self._gates())
            self.journal.record("combined", kernels=sorted(candidates), accepted=combined.accepted,
                                reason=combined.reason, speedup=combined.speedup)
            if combined.accepted:
                return combined
            best = max(accepted, key=lambda s: (s.cascade.speedup or 0.0) if s.cascade else 0.0)
            for other in accepted:
                if other is not best:
                    other.accepted = None  # only the best one stands on its own
            return best.cascade
        if accepted:
            return accepted[0].cascade
        tried = [s.cascade for s in searches if s.cascade is not None]
        return tried[-1] if tried else None

    def _decide(self, searches: list[KernelSearch], final: CascadeResult | None) -> tuple[Decision, str]:
        accepted = [s for s in searches if s.accepted is not None]
        if accepted and final is not None and final.accepted:
            names = ", ".join(s.brief.name for s in accepted)
            ci = f" (95% CI {final.ci[0]:.3f}-{final.ci[1]:.3f})" if final.ci else ""
            if not self.config.use_perf_gate:
                return "optimized", f"{names} rewritten; gate 4 switched off (ablation): kernel timing decided"
            return "optimized", f"{names} rewritten: {final.speedup:.3f}x end to end{ci}, all four gates passed"
        total = sum(s.candidates for s in searches)
        ok = sum(s.screened_ok for s in searches)
        unverified = sum(s.unverified for s in searches)
        rejections: dict[int, int] = {}
        for s in searches:
            for gate, n in s.rejections.items():
                rejections[gate] = rejections.get(gate, 0) + n
        perf = sum(s.perf_rejected for s in searches)
        if total == 0:
            return "fallback", "no rewrite applied to the searched kernel(s); the compiler's code is kept"
        if ok == 0 and unverified and not rejections:
            return "fallback", (f"none of the {total} candidate(s) could be verified (the check itself failed, "
                                "e.g. out of memory); the compiler's code is kept")
        if ok == 0:
            detail = ", ".join(f"gate {g}: {n}" for g, n in sorted(rejections.items()))
            return "fallback", f"all {total} candidate(s) were rejected ({detail}); the compiler's code is kept"
        best = max((n.speedup for s in searches for n in s.nodes if n.id != "root"), default=None)
        if perf:
            reason = (f"{ok} correct candidate(s), but none cleared the {self.config.min_speedup:.2f}x end-to-end gate "
                      f"({perf} rejected by gate 4: {final.reason if final else ''})")
            return "matched", reason + "; the compiler's code is kept"
        correct_model = any(s.correct for s in searches)
        if final is not None and not final.accepted and final.failed_gate == 3 and not correct_model:
            return "fallback", f"the fastest candidates failed the model-level check: {final.reason}"
        return "matched", (f"{ok} correct candidate(s), none faster than Inductor's kernel "
                           f"(best kernel speedup {best:.3f}x); the compiler's code is kept" if best is not None else
                           f"{ok} correct candidate(s), none measurably faster; the compiler's code is kept")

    def _finish(self, searches: list[KernelSearch], final: CascadeResult | None, decision: Decision, reason: str,
                report: DispatchReport) -> OptimizeResult:
        accepted = {s.brief.name: s.accepted.source for s in searches if s.accepted is not None}
        if decision != "optimized":
            accepted = {}
        kernels = []
        for s in searches:
            best = s.accepted or s.best()
            kernels.append({
                "name": s.brief.name, "kind": s.brief.kind, "share": s.brief.share, "tier": s.brief.tier,
                "decision": "optimized" if s.brief.name in accepted else ("matched" if s.screened_ok else "fallback"),
                "candidates": s.candidates, "screened_ok": s.screened_ok,
                "rejections": {str(k): v for k, v in sorted(s.rejections.items())},
                "kernel_speedup": best.speedup if best else None,
                "best_family": best.family if best else None,
                # what the best source changes against Inductor's, its ancestors' steps included
                "best_title": describe_change(s.brief.original_source, best.source, s.brief.name) if best else None,
                "baseline_kernel_ms": s.brief.baseline_ms,
                "could_not_verify": s.unverified,
                "quarantined": s.quarantined,
                **_sol_entry(s.brief, best.speedup if best and s.brief.name in accepted else None),
            })
        result = OptimizeResult(
            run_id=self.run_folder.id, run_dir=str(self.run_folder.path), decision=decision, reason=reason,
            speedup=final.speedup if final is not None and decision == "optimized" else None,
            ci=final.ci if final is not None and decision == "optimized" else None,
            timing_path=final.timing_path if final is not None else None,
            kernels=kernels, accepted_sources=accepted, cascade=final, graph_path=os.path.abspath(self.graph.path),
            device=self.evaluator.device, llm_usage=self.ledger.totals() if self.provider is not None else {},
        )
        findings = self._config_findings(report)
        result.suggestions, result.config_change = findings.suggestions(), findings.config_change()
        result.accounting = self._accounting_summary
        result.environment = _environment(result.device)
        self._write_outputs(result, searches, findings)
        self.journal.record("result", decision=decision, reason=reason, speedup=result.speedup)
        self.progress(f"{decision}: {reason}", stage="done", percentage=100, best_speedup=result.speedup)
        return result

    # --- the callable beyond its kernels ------------------------------------------------------

    def _resolve_problem(self) -> None:
        """The problem file behind the dump and the mode it was compiled with (compile_report.json)."""
        source = self.callable_source
        report = _compile_report_of(self.graph.path) or {}
        if source.problem is None:
            problem = report.get("problem")
            source.problem = problem if isinstance(problem, str) and os.path.isfile(problem) else None
        if source.mode is None:
            mode = report.get("mode")
            source.mode = mode if isinstance(mode, str) else ("default" if self.device_kind == "cpu" else "max-autotune")

    def _callable_accounting(self) -> dict[str, Any] | None:
        """The whole-callable accounting (given, journaled, or measured in the worker), else None."""
        source = self.callable_source
        entry = self.journal.lookup("accounting", "callable")
        if entry is not None:
            value = entry["value"]
        elif source.accounting is not None:
            value = source.accounting
            self.journal.append("accounting", "callable", value=value, given=True)
        elif source.problem is None or not self._accounting_wanted():
            return None
        else:
            self.progress(f"accounting for the whole callable of {os.path.basename(source.problem)}", stage="account")
            try:
                from ..measure.accounting_run import account_problem

                # the other mode informs a recommendation (GPU only); with verification coming, gate 4 times it
                gpu = self.evaluator.device.startswith("cuda")
                measured = account_problem(source.problem, source.mode or "max-autotune", self.evaluator.device,
                                           alternatives=gpu and not self.config.allow_config_changes)
                value = measured.to_json()
            except Exception as exc:  # noqa: BLE001 - the accounting adds information; the run stands without it
                value = {"error": f"{type(exc).__name__}: {exc}"}
            self.journal.append("accounting", "callable", value=value)
        if not isinstance(value, dict) or "error" in value:
            reason = value.get("error") if isinstance(value, dict) else "not an object"
            self.journal.record("note", message=f"whole-callable accounting unavailable: {reason}")
            return None
        return value

    def _accounting_wanted(self) -> bool:
        from ..config_findings import accounting_wanted

        try:
            return accounting_wanted(self.config.account_callable, self.evaluator.device)
        except ValueError as exc:
            self.journal.record("note", message=f"whole-callable accounting skipped: {exc}")
            return False

    def _config_findings(self, report: DispatchReport) -> Any:
        """Overheads, suggestions and the configuration change: from the whole callable when the
        problem is known, else from the dump's own timing."""
        from ..config_findings import accounting_summary, find_config_changes
        from ..measure.accounting import CallableAccounting

        source: Any = report
        data = self._callable_accounting()
        if data is not None:
            try:
                source = CallableAccounting.from_json(data)
                self._accounting_summary = accounting_summary(source)
            except (KeyError, TypeError, ValueError) as exc:
                self.journal.record("note", message=f"the whole-callable accounting could not be read: {exc}")
                source = report
        return find_config_changes(source, allowed=self.config.allow_config_changes, verify=self._verify_option)

    def _verify_option(self, recommendation: Any, option: Any) -> Any:
        """Verify one configuration option like a candidate (needs the problem the dump came from)."""
        from ..recommend import ConfigVerdict, ConfigVerificationError, verify_option

        problem = self.callable_source.problem
        if problem is None:
            raise ConfigVerificationError("the problem file behind this dump is unknown (no compile_report.json)")
        key = f"verify:{option.name}"
        entry = self.journal.lookup("config_change", key)
        if entry is not None:
            if entry["value"].get("error"):
                raise ConfigVerificationError(entry["value"]["error"])
            return ConfigVerdict.from_json(entry["value"])
        self.progress(f"verifying the configuration change {option.change} through gates 3-4", stage="gate")
        try:
            verdict = verify_option(problem, option, recommendation.baseline_mode or self.callable_source.mode
                                    or "max-autotune", device=self.evaluator.device)
        except Exception as exc:
            self.journal.append("config_change", key, value={"error": f"{type(exc).__name__}: {exc}"})
            raise
        self.journal.append("config_change", key, value=verdict.to_json())
        return verdict

    def _write_outputs(self, result: OptimizeResult, searches: list[KernelSearch], findings: Any = None) -> None:
        folder = self.run_folder
        original_text = Path(self.graph.path).read_text(encoding="utf-8")
        diff = ""
        if result.accepted_sources and self.target is not None:  # the user's own file, the kernel function edited
            new_text = self.target.rewrite(original_text, result.accepted_sources)
            diff = unified_diff(original_text, new_text, self.graph.path)
            folder.write_text(os.path.basename(self.graph.path), new_text)
        elif result.accepted_sources:
            new_text = restitch(self.graph, result.accepted_sources, original_text)
            diff = unified_diff(original_text, new_text, self.graph.path)
            folder.write_text("optimized_output_code.py", new_text)
        folder.write_text("final.diff", diff)
        best = max(searches, key=lambda s: (s.accepted is not None, s.brief.share or 0.0), default=None)
        if best is not None:
            folder.write_text("original_kernel.py", best.brief.original_source)
            if best.brief.name in result.accepted_sources:
                folder.write_text("optimized_kernel.py", result.accepted_sources[best.brief.name])
        data = result.to_json()
        folder.write_json("result.json", data)
        report = render_report(data, self.journal)
        if findings is not None and (findings.overheads or findings.recommendation is not None):
            report = report.rstrip("\n") + "\n\n" + findings.to_markdown()
        folder.write_text("report.md", report)


def _user_target(data: dict[str, Any]) -> Any:
    """The user kernel a resumed run was started on."""
    from ..userkernels.target import TargetError, UserKernelTarget

    try:
        return UserKernelTarget.from_json(data)
    except (TargetError, KeyError) as exc:
        raise OptimizeError(f"the run's kernel cannot be found again: {exc}") from None


def _sol_entry(brief: KernelBrief, accepted_speedup: float | None) -> dict[str, Any]:
    """A kernel's speed of light in result.json: before, and after an accepted rewrite (the baseline
    figure times the kernel-alone A/B speedup: the same ideal bytes in less time)."""
    sol = brief.speed_of_light or {}
    before = sol.get("sol_pct")
    after = before * accepted_speedup if before is not None and accepted_speedup else None
    return {"ideal_bytes": sol.get("ideal_bytes"), "dram_bytes": sol.get("dram_bytes"),
            "traffic_ratio": sol.get("traffic_ratio"), "sol_pct": before, "sol_after_pct": after,
            "sol_after_source": "baseline SOL x kernel-alone A/B speedup" if after is not None else None,
            "causes": list(sol.get("causes") or []), "paper_tier": brief.paper_tier}


def _environment(device: str) -> dict[str, Any]:
    """Versions and GPU behind the measurements, without importing torch (the caller may be an editor)."""
    from importlib.metadata import PackageNotFoundError, version

    info: dict[str, Any] = {"device": device}
    for package in ("torch", "triton"):
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            info[package] = None
    if device.startswith("cuda"):
        from ..measure.devices import cuda_index, gpu_name

        info["gpu"] = gpu_name(cuda_index(device))
    else:
        info["gpu"] = "cpu (Triton interpreter)"
    return info


def _compile_report_of(dump_path: str) -> dict[str, Any] | None:
    """The ``compile_report.json`` that ``kernelopt compile`` wrote above this dump, if any."""
    import json

    current = Path(dump_path).resolve().parent
    for _ in range(8):
        report = current / "compile_report.json"
        if report.is_file():
            try:
                data = json.loads(report.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            return data if isinstance(data, dict) else None
        if current.parent == current:
            break
        current = current.parent
    return None


__all__ = ["OptimizeConfig", "OptimizeError", "OptimizeResult", "Screen", "optimize"]
