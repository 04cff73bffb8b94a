"""Setting up an optimize run: the graph, the run folder and its journal, the evaluator, the agents.

:func:`open_run` starts a run, or resumes one from its journal, and returns the
:class:`RunContext` every stage of the search reads: what is searched, where it is recorded,
how it is measured, and the budget it plans against. A missing API key or a broken prompt file
fails here, before a run folder exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import CompiledGraph, discover
from ..artifacts.model import source_hash
from ..events import EventSink
from ..runs import Journal, RunFolder
from .agents import Executor, Planner, Profiler, Summarizer
from .deadline import Budget, BudgetStop, Schedule
from .evaluation import EvaluationError, Evaluator, GateEvaluator, RecordedEvaluator
from .experience import Experience
from .llm import ProviderConfigError, RetryPolicy, UsageLedger, make_provider
from .llm.recording import RecordingProvider
from .options import CPU_AB_ROUNDS, CPU_KERNEL_ROUNDS, TRANSPORT_FIELDS, OptimizeConfig, OptimizeError
from .prompts import PromptError, load_prompt, load_text
from .target import DumpTarget, Target
from .time_split import TimeSplit


@dataclass
class CallableSource:
    """Where the whole-callable accounting comes from: the problem file and what the caller measured."""

    problem: str | None = None
    accounting: dict[str, Any] | None = None
    mode: str | None = None  # the mode the dump was compiled with


@dataclass
class RunContext:
    """What every stage of one run reads: the graph, the journal, the evaluator, the agents, the budget."""

    config: OptimizeConfig
    target: Target  # what is optimized: a dump's graph, or a project's own kernel
    graph: CompiledGraph
    kernel_name: str | None
    run_folder: RunFolder
    evaluator: RecordedEvaluator
    sink: EventSink
    budget: Budget
    times: TimeSplit
    schedule: Schedule
    experience: Experience
    planner: Planner
    executor: Executor
    summarizer: Summarizer
    profiler: Profiler
    ledger: UsageLedger
    provider: Any = None
    callable_source: CallableSource = field(default_factory=CallableSource)
    given_launch_timing: dict[str, Any] | None = None
    probe_enabled: bool = False  # families may compile candidates for sm_90 to read their registers
    history: list[str] = field(default_factory=list)  # lines describing the search so far, for the agents

    @property
    def journal(self) -> Journal:
        return self.run_folder.journal

    @property
    def device_kind(self) -> str:
        return "cpu" if self.graph.device == "cpu" else "cuda"

    def progress(self, message: str, **fields: Any) -> None:
        self.sink.progress(message, **fields)


def open_run(path: str, kernel: str | None, config: OptimizeConfig, sink: EventSink, resume: str | None,
             evaluator: Evaluator | None, budget: Budget, launch_timing: dict[str, Any] | None = None,
             callable_source: CallableSource | None = None, target: Target | None = None) -> RunContext:
    """A new run on ``path`` or on ``target`` (or the run ``resume`` names, continued from its journal)."""
    callable_source = callable_source or CallableSource()
    times = TimeSplit(budget.clock)
    begin = times.clock()
    run_folder: RunFolder | None = None
    started: dict[str, Any] | None = None
    if resume:
        try:
            run_folder = RunFolder.open(resume, config.run_root)
        except ValueError as exc:
            raise OptimizeError(str(exc)) from None
        started = run_folder.journal.lookup("run_started", "run")
        if started is None:
            raise OptimizeError(f"{run_folder.path}: the journal has no run_started entry; cannot resume")
        path = started["graph_path"]
        kernel = started.get("kernel")
        if started.get("problem") and not callable_source.problem:
            callable_source.problem = started["problem"]
        # The search parameters are the run's own; how to reach the provider is this invocation's.
        transport = {k: getattr(config, k) for k in TRANSPORT_FIELDS}
        config = OptimizeConfig.from_json({**started["config"], **transport})
    target = target or resolve_target(path, kernel, started)
    graph = target.graph()
    if started is not None and source_hash(Path(graph.path).read_text(encoding="utf-8")) != started.get("text_hash"):
        assert run_folder is not None
        raise OptimizeError(f"{graph.path} changed since run {run_folder.id} started; "
                            "start a new run instead of resuming")
    device_kind = "cpu" if graph.device == "cpu" else "cuda"
    # Before a new run folder exists: a missing key or a broken prompt file leaves nothing behind.
    provider = _provider(config)
    prompts = _prompts(target.contract_prompt) if provider is not None else {}
    if run_folder is None:
        run_folder = RunFolder.create(config.run_root, graph.name)
    workdir = str(run_folder.path / "work")
    ab_rounds, kernel_rounds = _rounds(config, device_kind)
    # Register budgets come from the candidate compiled for sm_90 (rewrites.cost_model), on real GPU runs.
    probe_enabled = (evaluator is None and device_kind == "cuda" and target.compile_probes
                     and os.environ.get("KERNELOPT_COMPILE_PROBE", "1") != "0")
    if evaluator is None:
        try:
            evaluator = GateEvaluator(target, config.device, workdir, ab_rounds=ab_rounds, kernel_rounds=kernel_rounds,
                                      sink=sink)
        except EvaluationError as exc:
            raise OptimizeError(str(exc)) from None
    resolve_problem(callable_source, graph.path, device_kind)
    journal = run_folder.journal
    if not resume:
        journal.append(
            "run_started", "run", graph_path=os.path.abspath(graph.path), graph=graph.name,
            text_hash=source_hash(Path(graph.path).read_text(encoding="utf-8")), kernel=kernel,
            config=config.to_json(), provider=config.provider, model=config.model, device=evaluator.device,
            problem=callable_source.problem, user_kernel=target.resume_record())
    else:
        journal.append("resumed", dropped_torn_line=journal.dropped_tail, budget_s=budget.seconds)
    ledger = UsageLedger()
    recording = RecordingProvider(provider, journal, ledger) if provider is not None else None
    experience = Experience.open(config, journal, run_folder.id, device_kind)
    config_check = bool(config.allow_config_changes and callable_source.problem)
    schedule = Schedule(budget, times, device_kind, config_check=config_check)

    def budget_stop(stop: BudgetStop) -> None:
        journal.record("budget_stop", **stop.to_json())
        sink.progress(f"budget: {stop.detail}", stage="budget")

    schedule.on_stop = budget_stop
    times.add("setup", times.clock() - begin)
    return RunContext(
        config=config, target=target, graph=graph, kernel_name=kernel, run_folder=run_folder,
        evaluator=RecordedEvaluator(evaluator, journal), sink=sink, budget=budget, times=times, schedule=schedule,
        experience=experience,
        planner=Planner(recording, prompts.get("planner"), experience.lookup),
        executor=Executor(recording, prompts.get("executor"), prompts.get("launcher_contract", ""), config.retries),
        summarizer=Summarizer(recording, prompts.get("summarizer")),
        profiler=Profiler(recording, prompts.get("profiler")),
        ledger=ledger, provider=recording, callable_source=callable_source,
        given_launch_timing=launch_timing, probe_enabled=probe_enabled)


def resolve_target(path: str, kernel: str | None, started: dict[str, Any] | None) -> Target:
    """The project's own kernel a resumed run was started on, else the dump's graph at ``path``."""
    recorded = (started or {}).get("user_kernel")
    return _user_target(recorded) if recorded else DumpTarget(pick_graph(path, kernel))


def pick_graph(path: str, kernel: str | None) -> CompiledGraph:
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


def resolve_problem(source: CallableSource, graph_path: str, device_kind: str) -> None:
    """The problem file behind the dump and the mode it was compiled with (compile_report.json)."""
    report = compile_report_of(graph_path) or {}
    if source.problem is None:
        problem = report.get("problem")
        source.problem = problem if isinstance(problem, str) and os.path.isfile(problem) else None
    if source.mode is None:
        mode = report.get("mode")
        source.mode = mode if isinstance(mode, str) else ("default" if device_kind == "cpu" else "max-autotune")


def compile_report_of(dump_path: str) -> dict[str, Any] | None:
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


def _provider(config: OptimizeConfig) -> Any:
    retry = RetryPolicy(max_retries=config.api_max_retries, base_delay_s=config.api_base_delay_s,
                        timeout_s=config.api_timeout_s)
    try:
        return make_provider(config.provider, config.model, retry=retry, ledger=UsageLedger(), base_url=config.base_url)
    except ProviderConfigError as exc:
        raise OptimizeError(str(exc)) from None


def _rounds(config: OptimizeConfig, device_kind: str) -> tuple[int | None, int | None]:
    """Gate 4's A/B rounds and the kernel-alone rounds: the config's, else fewer on the CPU interpreter."""
    cpu = device_kind == "cpu"
    ab = config.ab_rounds if config.ab_rounds is not None else (CPU_AB_ROUNDS if cpu else None)
    kernel = config.kernel_rounds if config.kernel_rounds is not None else (CPU_KERNEL_ROUNDS if cpu else None)
    return ab, kernel


def _prompts(contract: str) -> dict[str, Any]:
    try:
        prompts: dict[str, Any] = {agent: load_prompt(agent) for agent in ("planner", "executor", "summarizer", "profiler")}
        prompts["launcher_contract"] = load_text(contract)
        return prompts
    except PromptError as exc:
        raise OptimizeError(str(exc)) from None


def _user_target(data: dict[str, Any]) -> Target:
    """The user kernel a resumed run was started on."""
    from ..userkernels.target import TargetError, UserKernelTarget

    try:
        return UserKernelTarget.from_json(data)
    except (TargetError, KeyError) as exc:
        raise OptimizeError(f"the run's kernel cannot be found again: {exc}") from None
