"""Gates 2-4 of a kernel in an Inductor dump, as worker tasks (what the graph compares and times).

The worker loads the baseline graph, captures the kernels' launches and compares; the candidate runs
in its own contained process (:mod:`.skeleton`, shared with a user's kernel). Replies as
:mod:`.skeleton` says.

Each gate task reads a :class:`..task_payload.GateRequest` of a :class:`..task_payload.GraphCandidate`
(the original graph, the candidate's re-stitched copy, the replaced kernels and their sources) and
its gate's settings (:mod:`..registry`); the search's kernel timing and output comparison read a
:class:`..task_payload.KernelTimingRequest`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...measure.task_context import RECYCLE_KEY, worker_device
from ..registry import KernelGate, KernelSettings, ModelGate, ModelSettings, PerfGate, PerfSettings
from ..task_payload import GateRequest, GraphCandidate, KernelTimingRequest
from ..verdict import TaskReply
from .skeleton import (
    CANDIDATE,
    SandboxSlot,
    baseline_slot,
    candidate_inputs,
    candidate_slot,
    model_numbers,
    perf_gate,
    run_gate_task,
    sanitizer_rejection,
    time_kernel_pair,
)
from .skeleton import CouldNotVerify as _CouldNotVerify
from .skeleton import SetupError as _SetupError
from .skeleton import candidate_failure as _candidate_failure
from .skeleton import candidate_memory as _candidate_memory
from .skeleton import candidate_outputs as _candidate_outputs
from .skeleton import containment as _containment
from .skeleton import could_not_verify as _could_not_verify
from .skeleton import is_oom as _is_oom
from .skeleton import release_mappings as _release_mappings
from .skeleton import sandbox_failure as _sandbox_failure
from .skeleton import settle_spare as _settle_spare
from .skeleton import share_inputs as _share_inputs
from .skeleton import spare_candidate_status as _spare_candidate_status
from .skeleton import verdict as _verdict

if TYPE_CHECKING:
    from ...artifacts.kernel_arguments import Role
    from ...artifacts.model import TritonKernel
    from ..model import SeedCheck

KernelRequest = GateRequest[GraphCandidate, KernelSettings]
ModelRequest = GateRequest[GraphCandidate, ModelSettings]
PerfRequest = GateRequest[GraphCandidate, PerfSettings]


def _load(path: str, device: str, role: str) -> ModuleType:
    from ...graph_module import load_graph_module

    with open(path, "rb") as handle:
        digest = hashlib.sha256(os.path.abspath(path).encode() + b"\0" + handle.read()).hexdigest()[:20]
    return load_graph_module(path, device, module_name=f"kernelopt_{role}_{digest}")


def _load_baseline(graph_path: str, device: str) -> ModuleType:
    try:
        return _load(graph_path, device, "baseline")
    except Exception as exc:  # noqa: BLE001
        raise _SetupError(f"the baseline graph {graph_path} cannot be loaded: {type(exc).__name__}: {exc}") from exc


# --- the candidate's process -----------------------------------------------------------------


def _candidate(restitched: str, device: str, *, from_spare: bool = False, keep_spare: bool = False,
               scratch_root: str | None = None) -> SandboxSlot:
    """This candidate's process, kept by its re-stitched graph's path (:func:`.skeleton.candidate_slot`)."""
    return candidate_slot(device, restitched, from_spare=from_spare, keep_spare=keep_spare, scratch_root=scratch_root)


def _candidate_of(request: GateRequest[GraphCandidate, Any], from_spare: bool = False,
                  keep_spare: bool = False) -> SandboxSlot:
    return _candidate(request.target.restitched, request.device, from_spare=from_spare, keep_spare=keep_spare,
                      scratch_root=request.scratch_root)


def _tuned_configs(graph: Any, module: Any, sources: dict[str, str], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per kernel whose candidate keeps the original's decorators: the config the baseline graph tuned the
    original to (tuned_config.py), for the candidate to launch with instead of tuning itself again."""
    from ..tuned_config import original_config, same_config_space

    tuned: dict[str, dict[str, Any]] = {}
    for name in names:
        original = graph.kernel(name)
        config = original_config(getattr(module, name, None))
        if original is not None and config is not None and name in sources \
                and same_config_space(original.source, sources[name], name):
            tuned[name] = config
    return tuned


def _load_candidate_kernels(slot: SandboxSlot, sources: dict[str, str], names: list[str], device_str: str,
                            tuned: dict[str, dict[str, Any]] | None = None) -> TaskReply | None:
    """The candidate's kernels in its process (once each); ``tuned``: configs to pin (:func:`_tuned_configs`)."""
    for name in names:
        if f"kernel:{name}" in slot.loaded:
            continue
        if name not in sources:
            raise _SetupError(f"the payload carries no candidate source for {name}")
        pin = {"tuned_config": tuned[name]} if tuned and name in tuned else {}
        reply = slot.process.call("load_kernel", name=name, source=sources[name], device_str=device_str, **pin)
        if not reply.get("ok"):
            return _candidate_failure(reply, f"{name} fails to load")
        slot.tuned[name] = str(reply.get("tuned") or "tuned on its first launch")
        slot.loaded.add(f"kernel:{name}")
    return None


def _load_candidate_graph(slot: SandboxSlot, restitched: str) -> TaskReply | None:
    """The re-stitched graph in the candidate's process (once per candidate); a verdict when it fails."""
    if "graph" not in slot.loaded:
        reply = slot.process.call("load_graph", path=restitched)
        if not reply.get("ok"):
            return _candidate_failure(reply, "the re-stitched graph fails to load")
        slot.loaded.add("graph")
    return None


def _peak_device_bytes(device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return int(torch.cuda.max_memory_allocated())


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats()


# --- gate 2 ----------------------------------------------------------------------------------


def run_kernel_gate(payload: dict[str, Any]) -> dict[str, Any]:
    from ...sandbox.spare import closing_spare_unless_verdict

    return closing_spare_unless_verdict(lambda: run_gate_task(KernelGate(), _kernel_gate, payload, GraphCandidate.read))


def _kernel_gate(request: KernelRequest) -> TaskReply:
    import torch

    from ...artifacts import parse_output_code
    from ...artifacts.kernel_arguments import argument_roles, runtime_parameters
    from ...graph_module import make_inputs
    from ...sandbox.exchange import ExchangeArena
    from ...sandbox.process import SandboxError
    from ..kernel import MANY_LAUNCHES_BYTES, MAX_LAUNCHES
    from ..kernel_gate import BATTERIES, check_kernel
    from ..launch_capture import capture_launches
    from ..step_clock import StepClock

    device = request.device
    target, settings = request.target, request.settings
    graph = parse_output_code(target.graph)
    names: list[str] = list(target.kernels)
    seeds = tuple(settings.seeds)
    low_memory = request.common.low_memory
    battery = settings.battery
    if battery not in BATTERIES:
        raise _SetupError(f"gate 2's battery is one of {', '.join(BATTERIES)}, not {battery!r}")
    clock = StepClock(device)  # where gate 2's time and memory go (loading compiles every kernel of a graph)
    with clock("sanitizer_ahead"):
        _sanitize_ahead(request)
    with clock("load_baseline"):
        baseline = _load_baseline(target.graph, device)
    resident = _allocated(device)  # what the loaded graph keeps (its constants): never counted as retained
    kernels: dict[str, tuple[TritonKernel, list[str], dict[str, Role]]] = {}
    for name in names:
        kernel = graph.kernel(name)
        assert kernel is not None
        params = runtime_parameters(kernel.source, name)
        role_of = argument_roles(kernel.source, name, list(kernel.inductor_meta.get("mutated_arg_names") or []))
        kernels[name] = (kernel, params, role_of)
    # Outputs are poisoned before every run: their captured values are never read, so only their layout is kept.
    layouts_only = {name: {i for i, p in enumerate(params) if role_of.get(p) == "output"}
                    for name, (_, params, role_of) in kernels.items()}
    try:
        with clock("capture"):
            limit = 1 if low_memory else MAX_LAUNCHES
            launches, output = capture_launches(baseline, names, make_inputs(baseline, seed=seeds[0] if seeds else 0),
                                                limit=limit, limit_bytes=MANY_LAUNCHES_BYTES,
                                                layouts_only=layouts_only)
            del output
            _release_cached(device)
    except Exception as exc:  # noqa: BLE001
        if _is_oom(exc):
            raise
        raise _SetupError(f"the baseline graph fails on its own inputs: {type(exc).__name__}: {exc}") from exc
    try:
        with clock("load_candidate"):  # getting the process (the spare, or a fresh one) and loading the kernels
            slot = _candidate_of(request, from_spare=True, keep_spare=settings.spare)
            process = slot.process
            tuned = _tuned_configs(graph, baseline, target.sources, names)
            failed = _load_candidate_kernels(slot, target.sources, names, graph.device or "cuda", tuned)
    except SandboxError as exc:
        return _sandbox_failure(exc, "the candidate's process")
    containment = _containment(process)
    candidate_process = slot.how  # from the spare or not, and the seconds getting it took
    if failed is not None:
        failed.numbers.update(steps_s=clock.rounded(), containment=containment, battery=battery,
                              candidate_process=candidate_process)
        return failed
    loading_peak = _candidate_memory(process, reset=True)  # the candidate process's peak while loading
    candidate_peak = loading_peak
    per_kernel: dict[str, Any] = {}
    copy_broke: str | None = None  # an instrumented copy failed (it may have ended the candidate's process)
    peak_tracked = 0
    working = 0
    checks_begin = time.perf_counter()
    arena = ExchangeArena(device)
    try:
        for name in names:
            kernel, params, role_of = kernels[name]
            kernel_launches = [launch for launch in launches if launch.kernel == name]
            if not kernel_launches:
                per_kernel[name] = {"passed": False, "checks": [], "reason": f"{name} was not launched by the graph "
                                                                           "on its own inputs; it cannot be checked"}
                continue
            width = len(kernel_launches[0].args)
            arg_names = [params[i] if i < len(params) else f"launcher_arg{i}" for i in range(width)]
            roles: list[Role] = [role_of.get(n, "scalar") if i < len(params) else "scalar"
                                 for i, n in enumerate(arg_names)]
            if low_memory and device.startswith("cuda"):  # the captured values move to the host, in place
                kernel_launches = kernel_launches[:1]
                kernel_launches[0].args[:] = [v.cpu() if isinstance(v, torch.Tensor) and not v.is_meta else v
                                              for v in kernel_launches[0].args]
            values = [launch.args for launch in kernel_launches]
            probe = _decision_probe(process, request, kernel, name, graph.device or "cuda", tuned.get(name)) \
                if battery == "full" else None
            outcome = check_kernel(
                getattr(baseline, name), process, arena, name, values,
                [launch.kwargs for launch in kernel_launches][: len(values)], arg_names, roles, seeds, device,
                reruns=settings.reruns,
                original_uses_atomics=bool(kernel.inductor_meta.get("atomic_add_found")),
                extra_sets=_extra_sets(kernel, request, values[0], roles, arg_names) if battery == "full" else (),
                timeout_s=request.common.run_timeout_s, row_length=_row_length(kernel.source),
                structure=request.pins.error_structure, battery=battery, clock=clock,
                decisions=probe)
            failed_check = outcome.failed
            peak_tracked = max(peak_tracked, outcome.peak_bytes)
            working = max(working, outcome.working_set_bytes)
            per_kernel[name] = {
                "passed": failed_check is None, "checks": [c.to_json() for c in outcome.checks],
                "roles": dict(zip(arg_names, roles, strict=True)), "launches": len(kernel_launches),
                "launch_limits_s": list(outcome.launch_limits_s),
                "runs": {"original": outcome.original_runs, "candidate": outcome.candidate_runs},
                "reason": (f"{name}, {failed_check.label}: {failed_check.problems[0]}" if failed_check else
                           f"{name}: {len(outcome.checks)} runs match the original"),
                "max_abs_diff": max((c.max_abs_diff for c in outcome.checks), default=0.0),
                "could_not_run": bool(failed_check is not None and failed_check.could_not_run),
                "violation": bool(failed_check is not None and failed_check.violation),
            }
            if failed_check is not None and copy_broke and not failed_check.could_not_run:
                # an earlier kernel's instrumented copy took the candidate's process down: this failure is the
                # check's, not the candidate's
                per_kernel[name]["could_not_run"] = True
                per_kernel[name]["reason"] += f" (after {copy_broke})"
            if probe is not None and probe.failed is not None:
                copy_broke = probe.failed
            if probe is not None:
                per_kernel[name]["decisions"] = probe.coverage.to_json()
                unproven = probe.reason() if failed_check is None else None
                if unproven is not None:
                    per_kernel[name]["not_verified"] = f"{name}: {unproven}"
    finally:
        running_peak = _candidate_memory(process)
        peaks = [p for p in (loading_peak, running_peak) if p is not None]
        candidate_peak = max(peaks) if peaks else None
        _release_mappings(process)  # before the arena frees its buffers: a mapped buffer cannot be freed
        for launch in launches:  # the captured values, and the original's buffers standing in for them
            launch.args.clear()
        arena_peak, arena_pool = arena.peak_bytes, arena.pool_id
        arena.close()  # (it also hands the allocator's cached blocks back to the device)
    steps = {**clock.rounded(), "checks_s": round(time.perf_counter() - checks_begin, 4)}  # checks_s: all the runs
    memory = _gate2_memory(clock, working, peak_tracked, candidate_peak)
    recycle = _retained_memory(device, resident, arena_peak, memory, arena_pool)
    numbers = {"kernels": per_kernel, "steps_s": steps, "battery": battery, "memory": memory,
               "containment": containment, "candidate_process": candidate_process,
               "launch_configs": {name: slot.tuned[name] for name in names if name in slot.tuned}}
    verdict = _gate2_verdict(per_kernel, numbers, battery, seeds)
    verdict.recycle = recycle
    return verdict


# Device memory gate 2 may leave allocated in the worker (caches of a loaded graph) before it is replaced.
RETAINED_SLACK_BYTES = 256 * 2**20


def _retained_memory(device: str, before: int | None, arena_peak: int, memory: dict[str, Any],
                     arena_pool: tuple[int, int] | None = None) -> str | None:
    """What a task (gate 2, kernel timing) left allocated in the worker after it freed everything it made,
    beyond what its loaded graph keeps (recorded in ``memory``),
    and, when that is more than slack, why the worker should be replaced: the backstop behind each process's
    own copy (:func:`time_kernel_pair`), since kernel timing once left a working set behind per candidate
    (docs/gates.md, gate 2's memory). Past slack the
    record also says which pool and, with allocation history on, which line of ours holds it
    (:mod:`..measure.allocator_census`)."""
    if before is None or not device.startswith("cuda"):
        return None
    from ...measure.allocator_census import census, settled_allocated

    retained = settled_allocated() - before
    memory["retained_after_bytes"] = retained
    if retained <= max(RETAINED_SLACK_BYTES, arena_peak // 4):
        return None

    memory["retained_census"] = census({arena_pool: "exchange arena"} if arena_pool else {})
    reason = (f"the task left {retained / 2**30:.2f} GiB allocated after freeing its buffers; the worker is "
              "replaced so that it is given back")
    memory["worker_replaced"] = reason
    return reason


def _decision_probe(process: Any, request: KernelRequest, kernel: Any, name: str, device_str: str,
                    tuned: dict[str, Any] | None = None) -> Any:
    """The instrumented copy of a candidate that adds data-dependent decisions, loaded in its process
    (:mod:`..decision_coverage`); None when it adds none, or the payload turns the evidence off. ``tuned``: the
    launch config the candidate itself is pinned to, which the copy (the same configs, one more argument) takes
    too, rather than tuning itself on the working set (30 s at 12.9 GB)."""
    from ..decision_coverage import plan_decision_probe

    source = request.target.sources.get(name)
    if not request.pins.decisions or source is None:
        return None
    plan = plan_decision_probe(kernel.source, source, name, request.settings.decision_search_s)
    if plan is None or not plan.source:
        return plan.run if plan is not None else None
    try:
        pin = {"tuned_config": tuned} if tuned is not None else {}
        reply = process.call("load_kernel", name=name, key=plan.run.key, source=plan.source, device_str=device_str,
                             **pin)
    except Exception as exc:  # noqa: BLE001 - the copy's failure to load is reported as missing evidence
        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    if not reply.get("ok"):
        plan.run.failed = f"the instrumented copy failed to load: {str(reply.get('error'))[:600]}"
    return plan.run


def _gate2_verdict(per_kernel: dict[str, Any], numbers: dict[str, Any], battery: str,
                   seeds: tuple[int, ...]) -> TaskReply:
    unverifiable = [v for v in per_kernel.values() if v.get("could_not_run")]
    stage = BATTERY_NAMES[battery]
    if unverifiable:
        return _could_not_verify(f"{stage}: {unverifiable[0]['reason']}", **numbers)
    failing = [v for v in per_kernel.values() if not v["passed"]]
    if failing:
        numbers["violation"] = any(v.get("violation") for v in failing)
        return _verdict(False, f"{stage}: {failing[0]['reason']}", **numbers)
    unproven = [v["not_verified"] for v in per_kernel.values() if v.get("not_verified")]
    if unproven:  # every run matched, but a path the candidate adds was never taken: no verdict either way
        unverified = _could_not_verify(f"{stage}: {unproven[0]}", **numbers)
        unverified.not_verified = True
        return unverified
    runs = sum(len(v["checks"]) for v in per_kernel.values())
    worst = max((v["max_abs_diff"] for v in per_kernel.values()), default=0.0)
    if battery == "screen":
        covered = f"the captured launch and seed {seeds[0]}" if seeds else "the captured launch"
        return _verdict(True, f"{stage}: {runs} runs ({covered}) match the original (max |diff| {worst:.3g}); "
                              "the full battery runs before acceptance", max_abs_diff=worst, **numbers)
    return _verdict(True, f"{stage}: {runs} runs (captured launches, seeds {', '.join(map(str, seeds))}, stale "
                          f"outputs, re-runs{', input sets' if _input_sets_available() else ''}) match the "
                          f"original (max |diff| {worst:.3g})", max_abs_diff=worst, **numbers)


# How a gate-2 verdict names the battery it ran (the search's screen, or every check before acceptance).
BATTERY_NAMES = {"screen": "screen (captured launch, one seed)", "full": "full battery"}


def _allocated(device: str) -> int | None:
    """This worker's allocated device memory (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize()
    return int(torch.cuda.memory_allocated())


def _release_cached(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _gate2_memory(clock: Any, working: int, tracked: int, candidate_peak: int | None) -> dict[str, Any]:
    """Gate 2's memory against the launch's working set: its own buffers as it counts them (tracked), and
    what the device's allocators saw (the worker's and the candidate process's peaks, on a GPU)."""
    def ratio(value: int | None) -> float | None:
        return round(value / working, 2) if value is not None and working else None

    device_peak = clock.peak_allocated
    both = None if device_peak is None else device_peak + (candidate_peak or 0)
    return {"working_set_bytes": working, "tracked_peak_bytes": tracked, "ratio_to_working_set": ratio(tracked),
            "device_peak_bytes": device_peak, "device_reserved_peak_bytes": clock.peak_reserved,
            "candidate_process_peak_bytes": candidate_peak,
            "device_peak_ratio": ratio(both),  # the worker's and the candidate process's peaks together
            "device_in_use_before_bytes": clock.in_use_before, "device_in_use_peak_bytes": clock.in_use_peak,
            "peak_bytes_by_step": dict(clock.peaks) or None}


def _input_sets_available() -> bool:
    return True


def _row_length(source: str) -> int | None:
    """The reduction length Inductor fixed in the kernel body (``r0_numel = 1500``), if any."""
    import re

    match = re.search(r"^\s*r0_numel = (\d+)\s*$", source, re.MULTILINE)
    return int(match.group(1)) if match else None


def _extra_sets(kernel: Any, request: KernelRequest, values: list[Any], roles: list[Any],
                names: list[str]) -> list[Any]:
    """Gate 2's input sets (NaN/Inf, zeros, constant rows, ...), in all floating inputs at once and
    in each alone."""
    from ..kernel import kernel_input_sets
    from ..structured_input_sets import adds_decisions, candidate_constants

    if not request.common.input_sets:
        return []
    candidate = request.target.sources.get(kernel.name) or ""
    pins = request.pins
    return kernel_input_sets(values, roles, names, kernel.kind in ("red", "per"), _row_length(kernel.source),
                             adds_decisions=adds_decisions(pins.adds_decisions, kernel.source, candidate),
                             constants=candidate_constants(pins.constants, candidate, kernel.source))


# --- gate 3 ----------------------------------------------------------------------------------


def run_model_gate(payload: dict[str, Any]) -> dict[str, Any]:
    # gate 3 takes over the sanitizer run its finalist's gate 2 began
    return run_gate_task(ModelGate(), _model_gate, payload, GraphCandidate.read,
                         keep_sanitizer=lambda target: target.restitched)


def _model_gate(request: ModelRequest) -> TaskReply:
    from ...graph_module import call_graph, make_inputs
    from ...sandbox.exchange import ExchangeArena
    from ...sandbox.process import SandboxError
    from ..float64_reference import ReferenceUnavailable, find_fx_graph_runnable, load_reference
    from ..model import check_seed, judge_structure
    from ..sanitize import abandon_sanitizer, claim_sanitizer
    from ..step_clock import StepClock

    device, target = request.device, request.target
    seeds, tolerance = request.settings.seeds, request.settings.tolerance
    _reset_peak(device)
    clock = StepClock(device)  # where gate 3's time goes (a finalist's cost, which the search's budget plans by)
    with clock("sanitizer_open"):
        # a run gate 2 began staged takes the device now, while the graphs below load (they hold no buffers)
        claimed = claim_sanitizer(target.restitched)
    loaded = False
    try:
        with clock("load_baseline"):
            baseline = _load_baseline(target.graph, device)
        with clock("load_candidate"):
            slot = _candidate_of(request)
            process = slot.process
            load_failure = _load_candidate_graph(slot, target.restitched)
            if load_failure is not None:
                return load_failure
        loaded = True
    except SandboxError as exc:
        return _sandbox_failure(exc, "the candidate's process")
    finally:
        if claimed is not None and not loaded:  # gate 3 ends here: nobody reads the run
            abandon_sanitizer(claimed[0])
    containment = _containment(process)
    with clock("sanitizer"):
        sanitizing, beside = _begin_sanitize(request, claimed)  # beside the seeds below where there is room
    rejected = sanitizer_rejection(sanitizing.result(), containment) if sanitizing.done() else None
    if rejected is not None:
        return rejected
    reference: Any = None
    reference_error: str | None = None
    checks: list[SeedCheck] = []
    child_peak = 0
    structure = request.pins.error_structure
    plan: list[tuple[int, str | None]] = [(seed, None) for seed in seeds]
    if request.common.input_sets:
        plan += [(seeds[-1] + 1 + i if seeds else i, name) for i, name in enumerate(GATE3_INPUT_SETS)]

    def inputs_for(seed: int, input_set: str | None) -> list[Any]:
        values = make_inputs(baseline, seed=seed)
        if input_set is not None:
            from ..input_sets import fill, input_sets_for
            from ..kernel import device_chunk

            for value in values:
                if hasattr(value, "is_floating_point") and value.is_floating_point() and \
                        input_set in {f.name for f in input_sets_for(value.dtype, False)}:
                    fill(value, input_set, seed=seed, chunk=device_chunk(value))
        return values

    for seed, input_set in plan:
        what = f"seed {seed}" + (f" (inputs: {input_set})" if input_set else "")
        arena = ExchangeArena(device)
        try:
            with clock("inputs"):
                inputs = inputs_for(seed, input_set)
            with clock("share_inputs"):
                refs, args = _share_inputs(arena, inputs)
            try:
                with clock("candidate_run"):
                    reply = process.call("run_graph", refs=refs, args=args, timeout_s=request.common.run_timeout_s)
            except SandboxError as exc:
                return _sandbox_failure(exc, f"the re-stitched graph on {what}")
            if not reply.get("ok"):
                verdict = _candidate_failure(reply, f"the re-stitched graph fails on {what}")
                verdict.numbers.update(seeds=[c.to_json() for c in checks], containment=containment,
                                       steps_s=clock.rounded())
                return verdict
            with clock("candidate_outputs"):
                candidate_out = _candidate_outputs(process, reply)
            try:
                with clock("baseline_run"):
                    baseline_out = call_graph(baseline, inputs)
            except Exception as exc:  # noqa: BLE001
                if _is_oom(exc):
                    raise
                raise _SetupError(f"the baseline graph fails on {what}: {type(exc).__name__}: {exc}") from exc
            del inputs
            if reference is None and reference_error is None:
                path = find_fx_graph_runnable(target.graph, target.fx_graph_runnable)
                try:
                    with clock("load_reference"):
                        if path is None:
                            raise ReferenceUnavailable("no fx_graph_runnable.py beside the dump")
                        reference = load_reference(path, device)
                        _check_reference_arguments(reference, target.graph)
                except ReferenceUnavailable as exc:
                    reference_error = str(exc)
            with clock("compare"):
                check = check_seed(seed, baseline_out, candidate_out, tolerance, reference,
                                   lambda seed=seed, input_set=input_set: inputs_for(seed, input_set), reference_error)
            check.label = input_set
            if check.passed and structure and reference is not None and input_set in (None, *STRUCTURE_INPUT_SETS):
                try:
                    with clock("reference_run"):
                        r64 = reference(inputs_for(seed, input_set))
                    with clock("structure"):
                        check = judge_structure(check, baseline_out, candidate_out, r64)
                    del r64
                except Exception as exc:  # noqa: BLE001 - the reference's own failure: measured nothing
                    if _is_oom(exc):
                        raise
                    check.notes.append(f"error structure not measured: {type(exc).__name__}: {exc}")
            checks.append(check)
            del baseline_out, candidate_out
            with clock("release"):
                memory = process.call("memory", reset=True)
                child_peak = max(child_peak, int(memory.get("peak_bytes") or 0))
                process.call("release")
            if not check.passed:
                break
        finally:
            _release_mappings(process)
            arena.close()
    with clock("sanitizer_wait"):
        sanitizer = sanitizing.result()
    if beside and sanitizer.out_of_memory:
        # Its target ran out of device memory beside gate 2's or these seeds' buffers, now released: the tools
        # again, alone and one after the other; out of memory again, the note says so and the seeds decide.
        with clock("sanitizer_alone"):
            sanitizer = _sanitize(request, side_by_side=False)
    rejected = sanitizer_rejection(sanitizer, containment)
    if rejected is not None:
        return rejected
    numbers = {**model_numbers(checks, tolerance, containment, sanitizer), "steps_s": clock.rounded(),
               "memory": {"device_peak_bytes": _peak_device_bytes(device),
                          "candidate_process_peak_bytes": child_peak or None}}
    fallbacks = [c.fallback for c in checks if c.fallback is not None]
    if fallbacks:
        numbers["float64_reference"] = reference is not None
    failed = next((c for c in checks if not c.passed), None)
    if failed is not None:
        labelled = f" (inputs: {failed.label})" if failed.label else ""
        return _verdict(False, f"seed {failed.seed}{labelled}: {failed.problem}", **numbers)
    if fallbacks:
        return _verdict(True, f"seeds {', '.join(map(str, seeds))}: outside atol=rtol={tolerance:g} on "
                              f"{len(fallbacks)} seed(s) but within the float64 rule ({fallbacks[0].rule}); "
                              f"{sanitizer.note}", **numbers)
    return _verdict(True, f"seeds {', '.join(map(str, seeds))} match the baseline at atol=rtol={tolerance:g} "
                          f"(max |diff| {numbers['max_abs_diff']:.3g}); {sanitizer.note}", **numbers)


def _begin_sanitize(request: ModelRequest, claimed: tuple[Any, bool] | None) -> tuple[Any, bool]:
    """:func:`_sanitize` for gate 3: the run its gate 2 began (``claimed``: :func:`claim_sanitizer`'s answer),
    else one on a thread of its own when the device has room for its targets, else now (a future either way);
    and whether it runs beside other work. A staged run is waited for here: its targets hold the device."""
    from concurrent.futures import wait

    from ..sanitize import begin_sanitizer, graph_working_set_bytes, room_beside

    target = request.target
    if claimed is not None:
        ahead, staged = claimed
        if staged:  # its targets loaded beside gate 2 and take the device now: done before the seeds
            wait([ahead])
            return ahead, False
        return ahead, True
    beside = request.common.sanitize and room_beside(request.device, graph_working_set_bytes(target.graph))
    return begin_sanitizer(lambda: _sanitize(request), beside, key=target.restitched), beside


def _sanitize_ahead(request: KernelRequest) -> None:
    """Gate 2's full battery of a finalist whose gate 3 follows: start the sanitizer's targets now, beside the
    battery (no timing runs in either). Where the device's free memory covers the targets' need on top of what
    the battery will hold they run to the end; elsewhere they start staged, loading the graph and then waiting
    for gate 3 to open their gate once the battery's buffers are gone. Gate 3 takes the run."""
    from ..sanitize import DeviceGate, begin_sanitizer, graph_working_set_bytes, room_beside

    device = request.device
    if not request.settings.sanitize_ahead or not request.common.sanitize or not device.startswith("cuda"):
        return
    gate = None if room_beside(device, graph_working_set_bytes(request.target.graph)) else DeviceGate()
    begin_sanitizer(lambda: _sanitize(request, gate=gate), True, key=request.target.restitched, gate=gate)


def _sanitize(request: GateRequest[GraphCandidate, Any], side_by_side: bool = True, gate: Any = None) -> Any:
    """compute-sanitizer memcheck and racecheck on each kernel's captured launch (sanitize.sanitize_finalist);
    ``gate``: a staged start (sanitize.DeviceGate), removed once the run ends."""
    from ..sanitize import sanitize_finalist

    target = request.target
    try:
        return sanitize_finalist(target.graph, target.restitched, list(target.kernels), dict(request.compiled or {}),
                                 request.device, timeout_s=request.common.sanitizer_timeout_s,
                                 enabled=request.common.sanitize, side_by_side=side_by_side, gate=gate)
    finally:
        if gate is not None:
            gate.close()


def _check_reference_arguments(reference: Any, graph_path: str) -> None:
    """Repro.forward must take the wrapper's arguments, by name and in order."""
    import inspect

    from ...artifacts import parse_output_code
    from ..float64_reference import ReferenceUnavailable

    wanted = [spec.name for spec in parse_output_code(graph_path).inputs]
    taken = list(inspect.signature(reference.module.forward).parameters)
    if wanted and taken != wanted:
        raise ReferenceUnavailable(f"{reference.path}: Repro takes ({', '.join(taken)}) but the graph is called with "
                                   f"({', '.join(wanted)})")


# --- gate 4 ----------------------------------------------------------------------------------


def run_perf_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return run_gate_task(PerfGate(), _perf_gate, payload, GraphCandidate.read)


INPUT_SEEDS = (1000, 1001, 1002)
# Gate 3 runs these input sets through the whole graph (gate 2 runs all of them on the kernel);
# the error structure is judged on the graph's own random inputs and on these.
GATE3_INPUT_SETS = ("nan-inf", "zeros", "constant-rows", "offset-rows", "all-negative")
STRUCTURE_INPUT_SETS = ("offset-rows", "all-negative")


def begin_baseline_timing(payload: dict[str, Any]) -> dict[str, Any]:
    """Task: start the baseline's timing process (loading the original graph: seconds) on a thread, so that the
    first candidate's kernel timing finds it ready (the holder's lock makes that timing wait for the start). A
    start that fails is forgotten: the timing starts the process itself and says why.
    Payload: ``graph`` (the original output_code.py) and ``device`` (default: the worker's)."""
    import threading

    from ...measure.task_context import worker_device
    from ...payload_fields import PayloadReader

    fields = PayloadReader(payload, "the baseline timing's payload")
    graph_path, device = fields.text("graph"), fields.text("device", None) or worker_device()

    def start() -> None:
        try:
            _baseline_process(graph_path, device)
        except Exception:  # noqa: BLE001 - only a head start: the timing tries again
            pass

    threading.Thread(target=start, name="baseline-timing-start", daemon=True).start()
    return {"started": True}


def _baseline_process(graph_path: str, device: str, inputs: bool = False,
                      scratch_root: str | None = None) -> SandboxSlot:
    """A process holding the original graph, timed the same way as the candidate's (reused per graph).

    Its graph input sets are made only when ``inputs`` asks (graph timing): kernel timing needs none, and
    three input sets held for the whole search are device memory every candidate's gate 2 lacks.
    ``from_start``: called by :func:`begin_baseline_timing`'s thread (every other caller waits for it).
    """
    from ...sandbox.process import SandboxError

    key = os.path.abspath(graph_path)

    def load(process: Any) -> None:
        reply = process.call("load_graph", path=key)
        if not reply.get("ok"):
            raise _SetupError(f"the baseline graph fails to load in its timing process: {reply.get('error')}")

    slot = baseline_slot(device, key, load, scratch_root)
    if inputs and "inputs" not in slot.loaded:
        try:
            reply = slot.process.call("make_inputs", seeds=list(INPUT_SEEDS))
        except SandboxError as exc:
            raise _CouldNotVerify(f"the baseline's timing process: {exc}") from exc
        if not reply.get("ok"):
            raise _SetupError(f"the baseline graph cannot make its inputs: {reply.get('error')}")
        slot.loaded.add("inputs")
    return slot


def _perf_gate(request: PerfRequest) -> TaskReply:
    from ...measure.paths import TimingPath

    device, target = request.device, request.target
    names = list(target.kernels)

    def sides() -> tuple[SandboxSlot, SandboxSlot] | TaskReply:
        baseline = _baseline_process(target.graph, device, inputs=True, scratch_root=request.scratch_root)
        slot = _candidate_of(request)
        failed = _load_candidate_graph(slot, target.restitched)
        if failed is None:
            failed = candidate_inputs(slot, INPUT_SEEDS, "the re-stitched graph")
        return failed if failed is not None else (baseline, slot)

    return perf_gate(request.settings, device, sides, INPUT_SEEDS, TimingPath.MODULE_CALL.value,
                     lambda baseline, slot: _kernel_speedups(target, device, baseline, slot, names,
                                                             request.settings.rounds) if names else {})


def _kernel_speedups(target: GraphCandidate, device: str, baseline: SandboxSlot, slot: SandboxSlot,
                     names: list[str], rounds: int | None) -> dict[str, float]:
    """Each kernel alone, on its captured arguments in exchange memory both processes map."""
    from ...artifacts import parse_output_code
    from ...graph_module import make_inputs
    from ..launch_capture import capture_launches

    graph = parse_output_code(target.graph)
    module = _load_baseline(target.graph, device)
    launches, output = capture_launches(module, names, make_inputs(module, seed=1000), limit=1)
    del output
    tuned = _tuned_configs(graph, module, target.sources, names)
    if _load_candidate_kernels(slot, target.sources, names, graph.device or "cuda", tuned) is not None:
        return {}
    speedups: dict[str, float] = {}
    for launch in launches:
        kernel = graph.kernel(launch.kernel)
        assert kernel is not None
        failed = _load_original_kernel(baseline, launch.kernel, kernel.source, graph.device or "cuda",
                                       getattr(module, launch.kernel, None))
        if failed is not None:
            raise RuntimeError(f"the original {launch.kernel} fails to load in its timing process")
        from ..kernel_gate import _child_kwargs

        timing, _ = time_kernel_pair(baseline.process, slot.process, device, rounds, launch.kernel, launch.args,
                                     _child_kwargs(launch.kwargs))  # (which empties launch.args)
        speedups[launch.kernel] = timing.speedup
    return speedups


def _load_original_kernel(baseline: SandboxSlot, name: str, source: str, device_str: str,
                          tuned_in_graph: Any = None) -> dict[str, Any] | None:
    """The original kernel in the baseline's timing process (once); the failed reply when it cannot load.
    ``tuned_in_graph``: the original as the loaded baseline graph tuned it, whose config it launches with."""
    from ..tuned_config import original_config

    if f"kernel:{name}" not in baseline.loaded:
        config = original_config(tuned_in_graph)
        pin = {"tuned_config": config} if config is not None else {}
        reply = baseline.process.call("load_kernel", name=name, source=source, device_str=device_str, **pin)
        if not reply.get("ok"):
            return dict(reply)
        baseline.loaded.add(f"kernel:{name}")
    return None


# --- kernel-alone timing and output comparison for the search ---------------------------------


def _restitched_sources(restitched: str, names: list[str]) -> dict[str, str]:
    from ...artifacts import parse_output_code
    from ...artifacts.model import MissingKernel

    try:
        return parse_output_code(restitched).kernel_sources(names)
    except MissingKernel as missing:
        raise _SetupError(f"the re-stitched graph has no kernel {missing.name}") from None


@dataclass
class _CapturedLaunch:
    """One kernel's first launch in the baseline graph, with the candidate's source from its re-stitched copy."""

    sources: dict[str, str]  # the candidate's, by kernel name
    graph: Any  # the parsed dump
    kernel: Any  # the original kernel
    module: ModuleType  # the baseline graph, loaded
    launch: Any


def _captured_launch(request: KernelTimingRequest, device: str, seed: int,
                     before_capture: Callable[[], Any] = lambda: None) -> _CapturedLaunch | dict[str, Any]:
    """The kernel's captured launch on the graph's inputs of ``seed``, or ``{"error": ...}``."""
    from ...artifacts import parse_output_code
    from ...graph_module import make_inputs
    from ..launch_capture import capture_launches

    name = request.kernel
    sources = _restitched_sources(request.restitched, [name])
    graph = parse_output_code(request.graph)
    kernel = graph.kernel(name)
    if kernel is None:
        return {"error": f"{request.graph} has no kernel {name}"}
    module = _load_baseline(request.graph, device)
    before_capture()
    launches, output = capture_launches(module, [name], make_inputs(module, seed=seed), limit=1)
    del output
    if not launches:
        return {"error": f"{name} was not launched by the graph"}
    return _CapturedLaunch(sources, graph, kernel, module, launches[0])


# The search's kernel timing runs while the next spare process starts (waiting for it is, by inference, most
# of a candidate's timing on the H100: docs/optimizer.md); a candidate that times faster than this is timed
# again after the spare has started, so that a figure that could make it a finalist never shares the machine.
RETIME_ABOVE = 1.0


def time_candidate_kernel(request: KernelTimingRequest) -> dict[str, Any]:
    """The kernel-alone speedup of the request's candidate, its CI and both medians (or ``{"error"}``)."""
    from ...sandbox.process import SandboxError
    from ..kernel_gate import _child_kwargs
    from ..step_clock import StepClock

    device = request.device or worker_device()
    name = request.kernel
    resident: list[int | None] = []
    clock = StepClock(device)  # where a candidate's timing goes (the search plans its next candidate by it)
    with clock("capture"):
        captured = _captured_launch(request, device, 2000, lambda: resident.append(_allocated(device)))
    if isinstance(captured, dict):
        return captured
    graph, original, launch = captured.graph, captured.kernel, captured.launch
    arena_peak = 0
    # whether the next spare was starting (RETIME_ABOVE; gate 4's timing always waits for it)
    spare_starting = bool(_spare_candidate_status({}).get("starting"))
    retimed = False
    try:
        with clock("load_candidate"):
            slot = _candidate(request.restitched, device)  # the screen's process for this candidate, or a fresh one
            failed = _load_candidate_kernels(slot, captured.sources, [name], graph.device or "cuda",
                                             _tuned_configs(graph, captured.module, captured.sources, [name]))
        if failed is not None:
            return {"error": failed.reason}
        with clock("load_original"):
            baseline = _baseline_process(request.graph, device)
            reply = _load_original_kernel(baseline, name, original.source, graph.device or "cuda",
                                          getattr(captured.module, name, None))
        if reply is not None:
            return {"error": f"the original {name} fails to load in its timing process: {reply.get('error')}"}

        def time_pair(captured_launch: Any) -> tuple[Any, int]:  # consumes the launch's captured values
            return time_kernel_pair(baseline.process, slot.process, device, request.rounds, name,
                                    captured_launch.args, _child_kwargs(captured_launch.kwargs))

        with clock("time_pair"):
            timing, arena_peak = time_pair(launch)
        if spare_starting and timing.speedup > RETIME_ABOVE:
            # a figure that could make it a finalist is measured with the machine to itself
            retimed = True
            with clock("retime"):
                _settle_spare()
                again = _captured_launch(request, device, 2000)
                if isinstance(again, dict):
                    return again
                timing, peak = time_pair(again.launch)
                arena_peak = max(arena_peak, peak)
    except (SandboxError, RuntimeError, _CouldNotVerify) as exc:
        return {"error": str(exc), "steps_s": clock.rounded()}
    finally:
        with clock("close_candidate"):
            CANDIDATE.close()
    out: dict[str, Any] = {"speedup": timing.speedup, "ci": [timing.ci_low, timing.ci_high],
                           "baseline_ms": timing.a.median_ms, "ms": timing.b.median_ms,
                           "timed_by": "the checker's clock, each side in its own process", "steps_s": clock.rounded(),
                           "rounds": timing.rounds, "spare_starting": spare_starting, "retimed": retimed}
    memory: dict[str, Any] = {}
    recycle = _retained_memory(device, resident[0], arena_peak, memory)
    if memory:
        out["memory"] = memory
    if recycle:
        out[RECYCLE_KEY] = recycle
    return out


def compare_candidate_outputs(request: KernelTimingRequest) -> dict[str, Any]:
    """The candidate's largest output difference from the original on the captured launch (or ``{"error"}``)."""
    import torch

    from ...artifacts.kernel_arguments import argument_roles, runtime_parameters
    from ...sandbox.exchange import ExchangeArena
    from ..kernel import Side, run_original
    from ..kernel_gate import CandidateSide

    device = request.device or worker_device()
    name = request.kernel
    captured = _captured_launch(request, device, request.seed)
    if isinstance(captured, dict):
        return captured
    graph, kernel, module, launch = captured.graph, captured.kernel, captured.module, captured.launch
    params = runtime_parameters(kernel.source, name)
    role_of = argument_roles(kernel.source, name, list(kernel.inductor_meta.get("mutated_arg_names") or []))
    roles = [role_of.get(params[i], "scalar") if i < len(params) else "scalar" for i in range(len(launch.args))]
    CANDIDATE.close()
    slot = _candidate(request.restitched, device)
    process = slot.process
    arena = ExchangeArena(device)
    try:
        failed = _load_candidate_kernels(slot, captured.sources, [name], graph.device or "cuda",
                                         _tuned_configs(graph, module, captured.sources, [name]))
        if failed is not None:
            return {"error": failed.reason}
        original, candidate = Side(launch.args, roles), CandidateSide(launch.args, roles, process, arena, name, 600.0)
        original.fill(launch.args)
        run_original(getattr(module, name), original, launch.args, launch.kwargs, device)
        candidate.fill(launch.args)
        candidate.launch(launch.args, launch.kwargs)
        if candidate.run.error:
            return {"error": candidate.run.error}
        diffs = [float((candidate.run.guarded[i].view.double() - original.run.guarded[i].view.double()).abs().max())
                 if candidate.run.guarded[i].view.numel() else 0.0
                 for i, role in enumerate(roles) if role != "input" and i in candidate.run.guarded]
        nan = any(bool(torch.isnan(candidate.run.guarded[i].view).any()) for i, role in enumerate(roles)
                  if role != "input" and i in candidate.run.guarded)
        return {"max_abs_diff": max(diffs, default=0.0), "nan": nan}
    finally:
        arena.close()
        CANDIDATE.close()


__all__ = ["begin_baseline_timing", "compare_candidate_outputs", "run_kernel_gate", "run_model_gate", "run_perf_gate",
           "time_candidate_kernel"]
