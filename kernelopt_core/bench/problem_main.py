"""One problem of a campaign, run inside its own subprocess. Imports torch: subprocess only.

``python -m kernelopt_core.bench.problem_main PAYLOAD.json`` runs the stages below, streams
``@kernelopt-event`` progress lines on stdout, and writes the problem's result file. Every stage
failure becomes a recorded error (or a note, for stages the result can do without); the
parent turns a crash or a timeout of this process into an error result too.

Stages: import, build, eager (time the eager module), compile (Inductor dumps via
``compile_problem``), max-autotune (time the full ``torch.compile`` callable), account (where the
full callable's time goes beyond its kernels: ``accounting_run.account_compiled_callable``),
classify (``dispatch.analyze``), optimize (the optimizer and its gates; it gets the accounting,
recommends a configuration change and, with ``allow_config_changes``, verifies it through gates
3-4 on the full callable), config (the same without the optimizer, for ``--no-optimize``),
confirm (an independent A/B of the accepted graph against Inductor's, through ``module-call``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..atomic_files import write_json_atomic
from ..events import EventSink, ProgressEvent, json_line_sink
from ..process_lifetime import die_with_owner
from .config import AFTER_OPTIMIZE_RESERVE_S, CampaignConfig
from .dtype_adapter import write_bf16_problem
from .figures import MODULE_CALL, fill_baseline_figures
from .outcome import classify_decision
from .results import ProblemResult, partial_path, write_result
from .suite import ProblemSpec
from .time_totals import compact_time_split

TRACEBACK_LINES = 30
# Stages a result can do without: their failure is a note, not an error.
SOFT_STAGES = {"max-autotune", "account", "classify", "config", "confirm"}


class StageFailed(Exception):
    def __init__(self, stage: str, message: str, exc: BaseException | None = None):
        super().__init__(message)
        self.stage = stage
        self.exc = exc


@dataclass
class ProblemState:
    """What the stages hand each other."""

    spec: ProblemSpec
    config: CampaignConfig
    device: str
    work_dir: str
    result: ProblemResult
    sink: EventSink
    problem_path: str = ""
    module: Any = None
    model: Any = None
    eager_samples: list[float] = field(default_factory=list)
    compiled_samples: list[float] = field(default_factory=list)
    compiled_path: str | None = None
    graph_paths: list[str] = field(default_factory=list)
    graph: Any = None  # the CompiledGraph the optimizer works on
    compiled_callable: Any = None  # the torch.compile callable whose compile wrote the dumps
    launch_timing: dict[str, Any] | None = None  # classify's per-launch timing, handed to the optimizer
    accounting: dict[str, Any] | None = None  # the whole callable's accounting (CallableAccounting JSON)
    optimize_result: Any = None
    launched_at: float = 0.0  # time.time() when the parent started this process: the budget counts from there

    def budget_left(self) -> float:
        """Seconds left of the problem's budget (the campaign's per-problem time)."""
        return self.config.timeout_s - (time.time() - self.launched_at)

    def save_partial(self) -> None:
        """What the problem has so far, for the parent to keep if it must kill the process at its backstop."""
        try:
            write_json_atomic(partial_path(self.work_dir), self.result.to_json())
        except OSError:
            pass  # the partial is a courtesy to the parent; the final result file is what counts


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@contextmanager
def stage(state: ProblemState, name: str) -> Iterator[None]:
    state.result.stage = name
    state.sink.progress(f"{state.spec.name}: {name}", stage=name, problem=state.spec.name)
    started = time.perf_counter()
    try:
        yield
    except StageFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure of problem code is recorded, never fatal
        raise StageFailed(name, f"{type(exc).__name__}: {exc}", exc) from exc
    finally:
        state.result.stage_seconds[name] = round(time.perf_counter() - started, 3)
        state.save_partial()


def _traceback_tail(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    return "\n".join(lines[-TRACEBACK_LINES:])


def run_problem(payload: dict[str, Any], sink: EventSink | None = None) -> ProblemResult:
    """Run every stage for one problem and return its result (also written to its file)."""
    spec = ProblemSpec.from_json(payload["problem"])
    config = CampaignConfig.from_json(payload["config"])
    device = payload.get("device") or "cpu"
    started = time.perf_counter()
    result = ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="error",
                           reason="not finished", device=device, dtype=config.dtype, started=_now(),
                           gpu=payload.get("gpu"), log_path=payload.get("log_path"), budget_s=config.timeout_s)
    state = ProblemState(spec=spec, config=config, device=device, work_dir=payload["work_dir"], result=result,
                         sink=sink or EventSink(), launched_at=float(payload.get("launched_at") or time.time()))
    try:
        _run_stages(state)
    except StageFailed as failure:
        result.outcome = "error"
        result.category = failure.stage
        result.reason = f"{failure.stage} failed: {failure}"
        result.error = {"stage": failure.stage, "type": type(failure.exc).__name__ if failure.exc else "StageFailed",
                        "message": str(failure), "traceback": _traceback_tail(failure.exc)}
    result.wall_s = round(time.perf_counter() - started, 3)
    result.finished = _now()
    if payload.get("out_dir"):
        write_result(payload["out_dir"], result)
    return result


def _run_stages(state: ProblemState) -> None:
    import torch

    config, result = state.config, state.result
    if state.device == "cpu":
        from ..backends import cpu_triton

        cpu_triton.activate()  # before anything imports triton
    elif torch.cuda.is_available():
        result.gpu = f"{result.gpu or '0'} ({torch.cuda.get_device_name(0)})"
    with stage(state, "import"):
        from ..compile import ProblemError, load_problem

        state.problem_path = state.spec.path
        if config.dtype == "bf16":
            state.problem_path = write_bf16_problem(state.spec.path, state.work_dir)
        try:
            state.module = load_problem(state.problem_path)
        except ProblemError as exc:
            raise StageFailed("import", str(exc), exc) from exc
    with stage(state, "build"):
        torch.manual_seed(0)
        with torch.device(state.device):  # large weights are made on the device, not copied there
            state.model = state.module.Model(*state.module.get_init_inputs()).eval()
        state.model = state.model.to(state.device)
        _make_inputs(state)(0)
    with stage(state, "eager"):
        from ..measure.timing import time_callable

        model = state.model

        def eager(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return model(*inputs)

        stats = time_callable(eager, device=state.device, path="eager", make_inputs=_make_inputs(state),
                              reps=config.timing_reps)
        result.eager = stats.to_json()
        state.eager_samples = list(stats.samples_ms)
    with stage(state, "compile"):
        _compile(state)
    _soft(state, "max-autotune", _time_compiled)
    if _accounting_wanted(config, state.device):
        if _accounting_fits(state):
            _soft(state, "account", _account)
        else:
            result.notes.append(f"account skipped: it compiles the problem again, and {state.budget_left():.0f} s "
                                f"of the problem's {config.timeout_s:.0f} s budget were left for it and the search")
    _release_baselines(state)
    _soft(state, "classify", _classify)
    if not config.optimize:
        result.outcome, result.category = "fallback", "not-optimized"
        result.reason = "not optimized (timing only, --no-optimize): the compiler's own code"
        if state.accounting is not None:
            _soft(state, "config", _config_findings)
        _baseline_figures(state)
        return
    with stage(state, "optimize"):
        _optimize(state)
    if result.outcome == "optimized":
        needed = _confirmation_s(state)
        if state.budget_left() >= needed + _reserve_after_optimize(state):
            _soft(state, "confirm", _confirm)
        else:
            result.notes.append(f"confirmation A/B skipped: {max(0.0, state.budget_left()):.0f} s of the problem's "
                                f"budget left, it takes about {needed:.0f} s; vs max-autotune is gate 4's A/B")
    _baseline_figures(state)


def _soft(state: ProblemState, name: str, step: Callable[[ProblemState], None]) -> None:
    try:
        with stage(state, name):
            step(state)
    except StageFailed as failure:
        state.result.notes.append(f"{name} failed (the result goes on without it): {failure}")


def _make_inputs(state: ProblemState) -> Callable[[int], list[Any]]:
    import torch

    def make(index: int) -> list[Any]:
        torch.manual_seed(1000 + index)
        with torch.device(state.device):
            values = state.module.get_inputs()
        return [v.to(state.device) if isinstance(v, torch.Tensor) else v for v in values]

    return make


def _compile(state: ProblemState) -> None:
    from ..compile import ProblemError, compile_problem_keeping_callable

    mode = "max-autotune" if state.device.startswith("cuda") else "default"
    dump_dir = os.path.join(state.work_dir, "dump")
    if state.device.startswith("cuda"):
        # The measurement worker (torch import, CUDA set-up: seconds) starts while Inductor compiles,
        # sharing its kernel cache; it is idle before anything here is timed.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.path.abspath(dump_dir), "inductor_cache")
        _prestart_worker(state.device)
    try:
        compiled, state.compiled_callable = compile_problem_keeping_callable(
            state.problem_path, dump_dir, mode, "cuda" if state.device.startswith("cuda") else "cpu")
    except ProblemError as exc:
        raise StageFailed("compile", str(exc), exc) from exc
    state.graph_paths = list(compiled.graphs)
    state.result.compile_s = compiled.compile_s
    state.result.graphs = len(compiled.graphs)
    state.result.notes.extend(compiled.notes)
    state.result.notes.append(f"compiled vs eager: max abs error {compiled.max_abs_err:.3g}, "
                              f"max relative error {compiled.max_rel_err:.3g}")


def _prestart_worker(device: str) -> None:
    """Start the device's shared worker in the background (the classify and optimize stages use it)."""
    import threading

    from ..measure.devices import device_for_graph
    from ..measure.worker import get_worker

    worker = get_worker(device_for_graph(device, "cuda"))
    threading.Thread(target=worker.call, args=("kernelopt_core.measure.task_context:ready_task", {}),
                     kwargs={"timeout_s": 300}, daemon=True, name="worker-prestart").start()


def _time_compiled(state: ProblemState) -> None:
    """The full torch.compile callable: the user's view of max-autotune (CUDA graphs on a GPU)."""
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config

    from ..measure.timing import time_callable

    cuda = state.device.startswith("cuda")
    inductor_config.trace.enabled = False  # the dumps are written; a second trace would only duplicate them
    compiled = state.compiled_callable
    if compiled is None:
        torch._dynamo.reset()
        compiled = torch.compile(state.model, mode="max-autotune" if cuda else None)
    # else: time the very callable whose compile wrote the dumps (same autotune choices, no second
    # max-autotune compile; its weights were built from the same seed as the eager model's)

    def call(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return compiled(*inputs)

    call(_make_inputs(state)(0))  # compile outside the timed region
    path = "compiled-callable-cudagraphs" if cuda else "compiled-callable"
    stats = time_callable(call, device=state.device, path=path, make_inputs=_make_inputs(state),
                          reps=state.config.timing_reps)
    state.result.max_autotune = stats.to_json()
    state.compiled_samples = list(stats.samples_ms)
    state.compiled_path = path


def _accounting_wanted(config: CampaignConfig, device: str) -> bool:
    from ..config_findings import accounting_wanted

    return accounting_wanted(config.account, device)


def _accounting_fits(state: ProblemState) -> bool:
    """The accounting compiles the problem again (about 1.5 compiles): it runs when what is left after it
    still gives the search half of the problem's budget, and always when configuration changes are to be
    verified (they need it)."""
    if state.config.config_changes_allowed:
        return True
    compile_s = state.result.compile_s or state.result.stage_seconds.get("compile", 0.0)
    return state.budget_left() - 1.5 * compile_s >= 0.5 * state.config.timeout_s


def _account(state: ProblemState) -> None:
    """Where the full callable's time goes beyond its kernels (CUDA-graph input copy, launch gaps,
    guards and wrappers), measured in this process on the model the eager stage built."""
    import torch._inductor.config as inductor_config

    from ..measure.accounting_run import account_compiled_callable

    inductor_config.trace.enabled = False  # the dumps are written; the accounting's compiles write none
    gpu = state.device.startswith("cuda")
    # the other mode informs a recommendation (GPU only; eager is timed already) and is its figure when the
    # configuration check has no time left to verify it
    accounting = account_compiled_callable(state.model, _make_inputs(state)(0), "max-autotune" if gpu else "default",
                                           device=state.device, name=state.spec.name,
                                           alternatives=gpu)
    state.accounting = accounting.to_json()


def _config_findings(state: ProblemState) -> None:
    """Without the optimizer: the overheads, the recommendation and (when allowed) its verification."""
    from ..config_findings import accounting_summary, find_config_changes
    from ..measure.accounting import CallableAccounting

    accounting = CallableAccounting.from_json(state.accounting or {})
    findings = find_config_changes(accounting, allowed=state.config.config_changes_allowed,
                                   verify=_in_process_verifier(state))
    _keep_findings(state.result, accounting_summary(accounting), findings.suggestions(), findings.config_change())


def _in_process_verifier(state: ProblemState) -> Callable[[Any, Any], Any]:
    """Verify an option in this process (it imports torch already; the optimizer uses its worker)."""

    def verify(recommendation: Any, option: Any) -> Any:
        from ..measure.accounting_verify import verify_config_task
        from ..recommend import verdict_from_task, verification_payload

        baseline = recommendation.baseline_mode or ("max-autotune" if state.device.startswith("cuda") else "default")
        payload = verification_payload(state.problem_path, option, baseline)
        return verdict_from_task(verify_config_task({**payload, "device": state.device}), option, baseline)

    return verify


def _keep_findings(result: ProblemResult, accounting: dict[str, Any] | None, suggestions: list[str],
                   config_change: dict[str, Any] | None) -> None:
    result.accounting = accounting
    result.suggestions = list(suggestions)
    result.config_change = config_change


def _release_baselines(state: ProblemState) -> None:
    """Free the eager model and the compiled callable (and its CUDA-graph pool) before the search,
    whose workers share this GPU. Only the timing samples are kept."""
    import gc

    import torch
    import torch._dynamo

    state.model = None
    state.compiled_callable = None
    torch._dynamo.reset()
    gc.collect()
    if state.device.startswith("cuda"):
        torch.cuda.empty_cache()


def _classify(state: ProblemState) -> None:
    from ..artifacts import parse_output_code
    from ..dispatch import analyze

    graphs = [parse_output_code(path) for path in state.graph_paths]
    if not graphs:
        state.result.classification = "no-triton"
        state.result.dispatch_evidence = "torch.compile produced no graph"
        return
    # the graph with the most Triton launches is the one worth optimizing
    state.graph = max(graphs, key=lambda g: (len(g.launches), len(g.kernels)))
    state.result.kernels = sum(len(g.kernels) for g in graphs)
    state.result.extern_calls = sum(len(g.extern_calls) for g in graphs)
    report = None
    if state.device.startswith("cuda"):
        try:
            from ..measure.launch_timing import time_launches

            timing = time_launches(state.graph, device=state.device)
            report = analyze(state.graph, timing.launch_times_ms, timing.overheads, timing.path)
            state.launch_timing = timing.to_json()
            state.result.sol = _timed_sol(state.graph, timing, state.device, state.result.notes)
        except Exception as exc:  # noqa: BLE001 - the untimed classification still stands
            state.result.notes.append(f"per-launch timing failed, classified by launch counts: {exc}")
    if report is None:
        report = analyze(state.graph)
    state.result.classification = report.classification
    state.result.dispatch_evidence = report.evidence
    if len(graphs) > 1:
        state.result.notes.append(f"{len(graphs)} graphs (graph breaks); optimizing {state.graph.name}")


def _optimize(state: ProblemState) -> None:
    result = state.result
    if state.graph is None:
        if state.graph_paths:
            from ..artifacts import parse_output_code

            state.graph = parse_output_code(state.graph_paths[0])
        else:
            result.outcome, result.category = "fallback", "no-triton-kernels"
            result.reason = "torch.compile produced no graph to optimize"
            return
    try:
        from ..search.pipeline import OptimizeConfig, optimize
    except ImportError as exc:
        raise StageFailed("optimize", f"the optimizer is not available: {exc}", exc) from exc
    known = OptimizeConfig.__dataclass_fields__
    wanted = state.config.optimizer_overrides()
    settings = {k: v for k, v in wanted.items() if k in known}
    if unknown := sorted(set(wanted) - set(known)):
        result.notes.append(f"optimizer options it does not know were ignored: {', '.join(unknown)}")
    settings["device"] = state.device
    settings["run_root"] = os.path.join(state.work_dir, "runs")
    settings["account_callable"] = "off"  # the account stage measured it (or could not: no second try)
    settings["keep_for_confirmation"] = True  # an accepted graph is confirmed here after the run
    # The search plans against what is left of the problem's budget, less what follows it here.
    budget = max(1.0, state.budget_left() - _reserve_after_optimize(state))
    asked = settings.get("budget_s")
    settings["budget_s"] = min(budget, float(asked)) if isinstance(asked, (int, float)) and asked > 0 else budget
    result.optimize_budget_s = round(settings["budget_s"], 3)
    config = OptimizeConfig(**settings)
    name = state.spec.name

    def forward(event: ProgressEvent) -> None:  # the optimizer's own progress, tagged with the problem
        if event.stage == "start" and event.extra.get("run_dir"):
            result.run_id, result.run_dir = event.extra.get("run_id"), str(event.extra["run_dir"])
            state.save_partial()  # the parent finds the run's verified result there if it must kill us
        state.sink.progress(f"{name}: {event.message}", stage="optimize", problem=name,
                            iteration=event.iteration, iterations=event.iterations,
                            best_speedup=event.best_speedup)

    inner = EventSink(forward, state.sink.cancel_event)
    outcome = optimize(state.graph.path, config=config, sink=inner, launch_timing=state.launch_timing,
                       problem=state.problem_path, accounting=state.accounting)
    state.optimize_result = outcome
    _keep_findings(result, getattr(outcome, "accounting", None), list(getattr(outcome, "suggestions", []) or []),
                   getattr(outcome, "config_change", None))
    found = getattr(outcome, "cascade", None)
    cascade = found.to_json() if found is not None else None
    result.outcome, result.category = classify_decision(outcome.decision, outcome.reason, cascade,
                                                        result.classification)
    result.reason = outcome.reason or outcome.decision
    result.run_id, result.run_dir = outcome.run_id, outcome.run_dir
    result.budget_reached = bool(getattr(outcome, "budget_reached", False))
    result.time_split = compact_time_split(getattr(outcome, "time_split", None))
    result.found_unverified = list(getattr(outcome, "found_unverified", None) or [])
    result.kernels_changed = sorted(getattr(outcome, "accepted_sources", {}) or {})
    result.sol = _optimized_sol(result.sol, getattr(outcome, "kernels", None) or [])
    if outcome.speedup is not None:
        ci = outcome.ci or (outcome.speedup, outcome.speedup)
        result.gate4 = {"speedup": outcome.speedup, "ci_low": ci[0], "ci_high": ci[1],
                        "path": outcome.timing_path}
    if result.outcome == "error":
        result.reason = f"the optimizer returned an unknown decision {outcome.decision!r}: {outcome.reason}"


def _timed_sol(graph: Any, timing: Any, device: str, notes: list[str]) -> dict[str, Any]:
    """Baseline speed of light from the classify timing: the longest Triton launch's ideal bytes over
    its timed duration, and the graph's inputs and outputs over the timed graph (both module-call
    path, no ncu), at the device's measured copy bandwidth."""
    from ..measure.peaks import device_peaks
    from ..measure.traffic import speed_of_light

    peaks = device_peaks(device)
    if peaks is None:
        notes.append(f"no measured peaks for {device}: the speed of light is unknown")
    copy = peaks.copy_bytes_per_s if peaks is not None else None
    triton = [launch.order for launch in graph.launches if launch.order in timing.launch_times_ms]
    longest = max(triton, key=lambda order: timing.launch_times_ms[order], default=None)
    traffic = timing.launch_traffic.get(longest) if longest is not None else None
    kernel = speed_of_light(traffic.ideal if traffic is not None else None,
                            duration_ms=timing.launch_times_ms.get(longest) if longest is not None else None,
                            duration_source=f"timed launch, {timing.path} path", copy_bytes_per_s=copy)
    whole = speed_of_light(timing.graph_ideal, duration_ms=timing.total_ms,
                           duration_source=f"timed graph, {timing.path} path", copy_bytes_per_s=copy)
    return {"kernel": traffic.kernel if traffic is not None else None, "baseline_pct": kernel.sol_pct,
            "after_pct": None, "traffic_ratio": None, "ideal_bytes": kernel.ideal_bytes, "causes": [],
            "source": kernel.duration_source, "unknown_reason": kernel.unknown_reason,
            "graph_baseline_pct": whole.sol_pct, "graph_ideal_bytes": whole.ideal_bytes,
            "graph_source": whole.duration_source, "copy_bytes_per_s": copy}


def _optimized_sol(sol: dict[str, Any] | None, kernels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The optimizer's figures for its main kernel (ncu time where it ran) replace the timed ones;
    after an accepted rewrite, its SOL (baseline x the kernel speedup)."""
    main = next((k for k in kernels if isinstance(k, dict) and k.get("sol_pct") is not None), None)
    if main is None:
        return sol
    return {**(sol or {}), "kernel": main.get("name"), "baseline_pct": main.get("sol_pct"),
            "after_pct": main.get("sol_after_pct"), "traffic_ratio": main.get("traffic_ratio"),
            "ideal_bytes": main.get("ideal_bytes"), "causes": list(main.get("causes") or []),
            "paper_tier": main.get("paper_tier"), "source": "the optimizer's analysis (ncu time where it ran)"}


def _restitched_path(state: ProblemState) -> str:
    outcome = state.optimize_result
    cascade = getattr(outcome, "cascade", None)
    path = getattr(cascade, "restitched_path", None) if cascade is not None else None
    if path and os.path.isfile(path):
        return path
    from ..gates.restitch import restitch

    text = restitch(state.graph, outcome.accepted_sources)
    path = os.path.join(state.work_dir, "restitched_output_code.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _confirm(state: ProblemState) -> None:
    """A fresh A/B of the accepted graph against Inductor's, apart from the gate that accepted it."""
    from ..graph_module import call_graph, load_graph_module, make_inputs
    from ..measure.timing import ab_compare

    baseline = load_graph_module(state.graph.path, state.device)
    candidate = load_graph_module(_restitched_path(state), state.device)
    ab = ab_compare(lambda inputs: call_graph(baseline, inputs), lambda inputs: call_graph(candidate, inputs),
                    device=state.device, path_a=MODULE_CALL, path_b=MODULE_CALL,
                    make_inputs=lambda i: make_inputs(baseline, 7000 + i), rounds=state.config.confirm_rounds)
    state.result.confirm = ab.to_json()


def _baseline_figures(state: ProblemState) -> None:
    """vs max-autotune, vs eager and max-autotune vs eager, each naming its path and source."""
    fill_baseline_figures(state.result, state.eager_samples, state.compiled_samples, state.compiled_path)


def _reserve_after_optimize(state: ProblemState) -> float:
    return AFTER_OPTIMIZE_RESERVE_S["cuda" if state.device.startswith("cuda") else "cpu"]


def _confirmation_s(state: ProblemState) -> float:
    """The confirmation A/B's time, from gate 4's A/B of the accepted graph (what the optimizer kept for it)."""
    from ..search.deadline import confirmation_s

    cascade = getattr(state.optimize_result, "cascade", None)
    gate4 = cascade.verdict(4) if cascade is not None and hasattr(cascade, "verdict") else None
    return confirmation_s(gate4.seconds if gate4 is not None else None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m kernelopt_core.bench.problem_main PAYLOAD.json\n")
        return 2
    die_with_owner()  # the bench: a killed bench takes its problems (and they their workers)
    with open(args[0], encoding="utf-8") as handle:
        payload = json.load(handle)
    result = run_problem(payload, json_line_sink(sys.stdout))
    return 0 if result.outcome != "error" else 1


def _close_helper_processes() -> None:
    """Stop what this process started: the optimizer's workers and zygotes (in sessions of their
    own) and Inductor's compile workers (which would notice their parent's end only within a
    minute). os._exit skips the atexit handlers that close them; a problem that ends normally
    leaves nothing for the bench to end."""
    module = sys.modules.get("kernelopt_core.measure.worker")
    if module is not None:
        module.close_all_workers()
    zygotes = sys.modules.get("kernelopt_core.sandbox.zygote")
    if zygotes is not None:
        zygotes.close_zygotes()
    compile_pools = sys.modules.get("torch._inductor.async_compile")
    if compile_pools is not None and hasattr(compile_pools, "shutdown_compile_workers"):
        try:
            compile_pools.shutdown_compile_workers()
        except Exception:  # noqa: BLE001 - best effort: the bench ends whatever is left
            pass


if __name__ == "__main__":
    code = main()
    _close_helper_processes()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written; skip torch's slow interpreter teardown (seconds per problem). Whatever
    # else this process started dies with it (parent-death signal) or is ended by the bench.
    os._exit(code)
