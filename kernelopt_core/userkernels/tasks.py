"""Gates 2-4 of a user's ``@triton.jit`` kernel, as worker tasks: what its harness compares and times.

The worker imports the user's kernel file and harness (the user's own code, as for a dump's baseline
graph), runs the harness once and captures the kernel's launches; the candidate runs in its own
contained process (:mod:`kernelopt_core.gates.tasks.skeleton`, shared with a dump's kernels).
Gate 2 repeats the captured launch with the candidate through a generated launcher (:mod:`.launcher`)
on guarded exchange buffers, the original pinned to the launch it made; gate 3 runs compute-sanitizer
on a GPU (:mod:`.sanitize_target`), then the harness with the candidate in place of the kernel
(:mod:`.harness_module`) against the original's output (the float64 rule where the harness runs in
float64, else the kernel tolerance); gate 4 times the harness on each side in its own process.
Payloads: a :class:`.payload.UserKernelPayload` (``candidate``; ``edited_file``, a copy of the user's
file whose launch site alone differs, :mod:`.edited_launch`, run on the candidate's side); a gate
task's is a :class:`kernelopt_core.gates.task_payload.GateRequest` of one. Replies as the skeleton says.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..gates.registry import KernelGate, KernelSettings, ModelGate, ModelSettings, PerfGate, PerfSettings
from ..gates.task_payload import GateRequest
from ..gates.tasks.skeleton import (
    BASELINE,
    SandboxSlot,
    baseline_slot,
    candidate_inputs,
    candidate_slot,
    close_candidate,
    model_numbers,
    perf_gate,
    reply_json,
    run_gate_task,
    sanitizer_rejection,
    time_kernel_pair,
)
from ..gates.tasks.skeleton import CouldNotVerify as _CouldNotVerify
from ..gates.tasks.skeleton import SetupError as _SetupError
from ..gates.tasks.skeleton import candidate_failure as _failure
from ..gates.tasks.skeleton import candidate_outputs as _candidate_outputs
from ..gates.tasks.skeleton import containment as _containment
from ..gates.tasks.skeleton import could_not_verify as _could_not_verify
from ..gates.tasks.skeleton import flavor as _device_str
from ..gates.tasks.skeleton import guarded as _guarded
from ..gates.tasks.skeleton import is_oom as _is_oom
from ..gates.tasks.skeleton import sandbox_failure as _sandbox_failure
from ..gates.tasks.skeleton import share_inputs_strictly as _share_inputs
from ..gates.tasks.skeleton import verdict as _verdict
from ..gates.verdict import TaskReply
from ..payload_fields import PayloadError
from .launcher import LAUNCHER_NAME, launcher_source
from .payload import UserKernelPayload, UserTimingRequest

if TYPE_CHECKING:
    from ..artifacts.kernel_arguments import Role
    from ..gates.model import SeedCheck

_SESSIONS_LOCK = threading.Lock()
_SESSIONS: dict[str, Any] = {}
INPUT_SEEDS = (1000, 1001)
KernelRequest = GateRequest[UserKernelPayload, KernelSettings]
ModelRequest = GateRequest[UserKernelPayload, ModelSettings]
PerfRequest = GateRequest[UserKernelPayload, PerfSettings]
KERNEL_TOLERANCE = {"torch.float32": 1e-3, "torch.float64": 1e-3, "torch.float16": 1e-2, "torch.bfloat16": 1e-2}


def _device(user: UserKernelPayload) -> str:
    from ..measure.task_context import worker_device

    return user.device or worker_device()


def _workdir(user: UserKernelPayload) -> str:
    folder = user.workdir or os.path.join(tempfile.gettempdir(), f"kernelopt-user-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    return str(folder)


# --- the session: the user's harness, run once and captured ------------------------------------------


@dataclass
class Session:
    key: str
    device: str
    harness: Any
    params: list[str]
    constexprs: list[str]
    capture: Any
    output: Any
    plan: dict[str, Any]
    values: list[Any]
    roles: list[Role]
    names: list[str]
    original: Any  # the pinned launcher of the original kernel (runs here, in the checker)
    module: str
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "missing"


def _session_key(user: UserKernelPayload) -> str:
    spec = user.harness
    parts = [os.path.abspath(user.file), _file_digest(user.file), user.kernel, json.dumps(spec),
             _file_digest(spec["file"]), _device(user), hashlib.sha256(user.module.encode()).hexdigest()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _signature(source: str, kernel: str) -> tuple[list[str], list[str]]:
    from .parse import parse_user_kernels

    parsed = parse_user_kernels("<module>", source).function(kernel)
    if parsed is None:
        raise _SetupError(f"the kernel module defines no {kernel}")
    return parsed.params, parsed.constexprs


def session(user: UserKernelPayload) -> Session:
    key = _session_key(user)
    with _SESSIONS_LOCK:
        found = _SESSIONS.get(key)
        if found is not None:
            return found
        _SESSIONS.clear()  # one harness at a time: the previous one's tensors are released
    built = _build_session(user, key)
    with _SESSIONS_LOCK:
        _SESSIONS[key] = built
    return built


def _build_session(user: UserKernelPayload, key: str) -> Session:
    import torch

    from ..launchers import load_launcher
    from .capture import LaunchPlanError, capture_launches, launch_plan, plan_values
    from .harness import HarnessError, HarnessSpec, LoadedHarness
    from .runtime import prepare_kernel

    device = _device(user)
    kernel = user.kernel
    params, constexprs = _signature(user.module, kernel)
    spec = HarnessSpec.from_json(user.harness)
    try:
        harness = LoadedHarness(spec, user.file, kernel, device)
        prepare_kernel(harness.kernel_object)
        inputs = harness.make_inputs(0)
    except HarnessError as exc:
        raise _SetupError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the user's code failed: said as such
        raise _SetupError(f"the harness ({spec.describe()}) failed to load: {type(exc).__name__}: {exc}") from exc
    try:
        capture, output = capture_launches(harness, inputs)
    except Exception as exc:  # noqa: BLE001
        if _is_oom(exc):
            raise
        raise _SetupError(f"the harness ({spec.describe()}) failed with the original kernel: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not capture.launches:
        raise _SetupError(f"the harness ({spec.describe()}) ran but never launched {kernel}: "
                          f"{_other_harnesses(user.file, kernel, spec)}")
    first = capture.launches[0]
    try:
        plan = launch_plan(first, params, constexprs)
    except LaunchPlanError as exc:
        raise _SetupError(f"the launch of {kernel} cannot be repeated: {exc}") from None
    values = plan_values(first, plan)
    names = [a["param"] for a in plan["arguments"]]
    folder = os.path.join(_workdir(user), "launchers")
    try:
        original = load_launcher(LAUNCHER_NAME, launcher_source(user.module, kernel, plan, pinned=True),
                                 _device_str(device), directory=folder)
    except Exception as exc:  # noqa: BLE001
        raise _SetupError(f"the original {kernel} cannot be launched on its own: {type(exc).__name__}: {exc}") from exc
    written = _written(original, values, device)
    loaded = set(user.loaded)
    roles: list[Role] = []
    for index, (name, value) in enumerate(zip(names, values, strict=True)):
        if not isinstance(value, torch.Tensor):
            roles.append("scalar")
        elif index in written:
            roles.append("inout" if name in loaded else "output")
        else:
            roles.append("input")
    built = Session(key=key, device=device, harness=harness, params=params, constexprs=constexprs, capture=capture,
                    output=output, plan=plan, values=values, roles=roles, names=names, original=original,
                    module=user.module)
    built.facts = _facts(built)
    return built


def _other_harnesses(path: str, kernel: str, tried: Any) -> str:
    """The way out when a harness never launched the kernel (read from the kernel's file, not run)."""
    from .harness import harness_advice
    from .parse import UserKernelError, parse_user_kernels, read_user_file

    try:
        parsed = parse_user_kernels(path, read_user_file(path))
    except UserKernelError:
        return "pass --harness NAME with a harness that launches it"
    same_file = tried.kind == "function" and os.path.abspath(tried.file) == os.path.abspath(path)
    return harness_advice(parsed, kernel, tried.name if same_file else None)


def _written(launcher: Any, values: list[Any], device: str) -> set[int]:
    """Which arguments the original writes (their indexes): run it once on copies and compare."""
    import torch

    from ..gates.launch_capture import clone_value

    copies = [clone_value(v) for v in values]
    before = [clone_value(v) for v in values]
    launcher.run(*copies)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    changed: set[int] = set()
    for index, (a, b) in enumerate(zip(before, copies, strict=True)):
        if not isinstance(a, torch.Tensor) or not a.numel():
            continue
        if a.is_floating_point():
            same = bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
        else:
            same = torch.equal(a, b)
        if not same:
            changed.add(index)
    return changed


def _facts(built: Session) -> dict[str, Any]:
    import torch

    from .capture import launch_summary

    role_by_param = {name: role for name, role in zip(built.names, built.roles, strict=True)}
    outputs = built.output if isinstance(built.output, (tuple, list)) else [built.output]
    return {
        "harness": built.harness.spec.describe(), "harness_kind": built.harness.spec.kind,
        "launches": [launch_summary(launch, built.params, role_by_param) for launch in built.capture.launches],
        "launches_per_call": built.capture.count,
        "arguments": [{**arg, "role": role} for arg, role in zip(built.plan["arguments"], built.roles, strict=True)],
        "plan": built.plan,
        "outputs": [{"dtype": str(o.dtype), "shape": list(o.shape)} for o in outputs if isinstance(o, torch.Tensor)],
        "device": built.device,
    }


# --- facts and profile --------------------------------------------------------------------------------


def _user_task(work: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """A task that is no gate (facts, a profile) at the process boundary: its record, or why it has none."""
    try:
        user = UserKernelPayload.from_json(payload)
    except PayloadError as exc:
        return _could_not_verify(f"the task got a malformed payload: {exc}").to_json()
    return reply_json(_guarded(lambda: work(user), _device(user)))


def user_kernel_facts(payload: dict[str, Any]) -> dict[str, Any]:
    """The captured launches, the launch plan and the argument roles (JSON)."""
    return _user_task(lambda user: session(user).facts, payload)


def profile_user_kernel(payload: dict[str, Any]) -> dict[str, Any]:
    """Facts, the kernel alone on its captured launch, and the harness, each timed here."""
    return _user_task(_profile, payload)


def _profile(user: UserKernelPayload) -> dict[str, Any]:
    from ..gates.launch_capture import clone_value
    from ..measure.launch_args import describe
    from ..measure.paths import TimingPath
    from ..measure.timing import time_callable
    from .share import harness_share

    built = session(user)
    device = built.device
    copies = [clone_value(v) for v in built.values]
    kernel = time_callable(lambda: built.original.run(*copies), device=device, path=TimingPath.KERNEL.value,
                           flush_l2=True)
    harness = built.harness
    sets = [harness.make_inputs(seed) for seed in INPUT_SEEDS]
    whole = time_callable(lambda inputs: harness.run(list(inputs)), device=device, path=TimingPath.HARNESS.value,
                          make_inputs=lambda i: sets[i % len(sets)], input_sets=len(sets), flush_l2=True)
    args = []
    for position, (name, value, role) in enumerate(zip(built.names, built.values, built.roles, strict=True)):
        arg = describe(value, position)
        arg.name = name
        if arg.is_tensor:
            arg.role = role if role in ("input", "output", "inout") else "input"
        args.append(arg.to_json())
    share = harness_share(user.kernel, kernel.to_json(), whole.to_json(), built.capture.count)
    return {**built.facts, "kernel_timing": kernel.to_json(), "harness_timing": whole.to_json(),
            "kernel_ms": kernel.median_ms, "harness_ms": whole.median_ms, "share": share.share,
            "share_note": share.note, "launch_args": args}


# --- the candidate's process ---------------------------------------------------------------------------


def _candidate_key(user: UserKernelPayload) -> str:
    edited = user.edited_file
    parts = [_session_key(user), user.candidate or "", _file_digest(edited) if edited else ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _candidate_side(user: UserKernelPayload) -> tuple[str, dict[str, Any]]:
    """The kernel file and harness (a HarnessSpec's JSON) the candidate's side runs: the user's, or with a
    launch-site edit the edited copy (and a harness of the file becomes the copy's)."""
    edited = user.edited_file
    harness = dict(user.harness)
    if not edited:
        return user.file, harness
    if os.path.abspath(str(harness.get("file"))) == os.path.abspath(user.file):
        harness["file"] = edited
    return edited, harness


def _candidate(user: UserKernelPayload, device: str, *, from_spare: bool = False, keep_spare: bool = False,
               scratch_root: str | None = None) -> SandboxSlot:
    """This candidate's process, kept by the harness and the candidate's source (:func:`candidate_slot`)."""
    return candidate_slot(device, _candidate_key(user), from_spare=from_spare, keep_spare=keep_spare,
                          scratch_root=scratch_root)


def close_user_processes(payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """End the candidate's and the baseline's processes and forget the harness."""
    close_candidate()
    BASELINE.close()
    with _SESSIONS_LOCK:
        _SESSIONS.clear()
    return {"closed": True}


def _candidate_plan(built: Session, user: UserKernelPayload) -> dict[str, Any]:
    from .capture import grid_table

    plan = dict(built.plan)
    plan["grid"] = grid_table(built.capture.launches[0], built.constexprs, list(user.candidate_configs))
    return plan


_EDITED_PLANS: dict[str, dict[str, Any]] = {}  # the launch an edited copy makes, by candidate process key


def _launch_plan(slot: SandboxSlot, built: Session, user: UserKernelPayload, run_timeout_s: float) -> dict[str, Any]:
    """The launch the candidate's launcher repeats: the captured one (its grid over the candidate's configs),
    or with a launch-site edit the launch the edited copy makes, captured in the candidate's process (the
    copy is the user's edit: the checker never imports it) on the same arguments as the original's."""
    from .edited_launch import CAPTURE_PLAN, plan_mismatch

    if not user.edited_file:
        return _candidate_plan(built, user)
    if slot.key not in _EDITED_PLANS:
        kernel_file, harness = _candidate_side(user)
        reply = slot.process.call("call", timeout_s=run_timeout_s,
                                  callable=CAPTURE_PLAN, kwargs={
                                      "kernel_file": kernel_file, "kernel": user.kernel, "harness": harness,
                                      "device": built.device, "params": built.params,
                                      "constexprs": built.constexprs})
        if not reply.get("ok"):
            raise _EditedLaunchFailed(_failure(dict(reply), "the harness with the edited file fails"))
        plan = reply["result"]
        mismatch = plan_mismatch(built.plan, plan)
        if mismatch:
            raise _CouldNotVerify(f"the edited launch passes other arguments than the original's ({mismatch}); "
                                  "gate 2 compares the two launches on the same arguments")
        _EDITED_PLANS.clear()  # one candidate process at a time
        _EDITED_PLANS[slot.key] = plan
    return dict(_EDITED_PLANS[slot.key])


class _EditedLaunchFailed(Exception):
    """The edited copy's harness failed in the candidate's process: ``verdict`` says so."""

    def __init__(self, verdict: TaskReply):
        super().__init__(verdict.reason)
        self.verdict = verdict


def _load_launcher(slot: SandboxSlot, source: str, device: str) -> dict[str, Any] | None:
    if "launcher" in slot.loaded:
        return None
    reply = slot.process.call("load_kernel", name=LAUNCHER_NAME, source=source, device_str=_device_str(device))
    if not reply.get("ok"):
        return dict(reply)
    slot.loaded.add("launcher")
    return None


def _load_harness(slot: SandboxSlot, user: UserKernelPayload, device: str, candidate: str | None,
                  run_timeout_s: float) -> dict[str, Any] | None:
    from .harness_module import write_candidate_module, write_harness_module

    if "harness" in slot.loaded:
        return None
    folder = _workdir(user)
    candidate_file = write_candidate_module(os.path.join(folder, "candidates"), user.kernel, candidate) \
        if candidate is not None else None
    kernel_file, harness = _candidate_side(user) if candidate is not None else (user.file, user.harness)
    path = write_harness_module(os.path.join(folder, "harnesses"), {
        "kernel_file": os.path.abspath(kernel_file), "kernel": user.kernel, "harness": harness,
        "device": device, "candidate_file": candidate_file})
    reply = slot.process.call("load_graph", path=path, timeout_s=run_timeout_s)
    if not reply.get("ok"):
        return dict(reply)
    slot.loaded.add("harness")
    return None


# --- gate 2 -------------------------------------------------------------------------------------------


def run_kernel_gate(payload: dict[str, Any]) -> dict[str, Any]:
    from ..sandbox.spare import closing_spare_unless_verdict

    return closing_spare_unless_verdict(lambda: run_gate_task(KernelGate(), _kernel_gate, payload,
                                                              UserKernelPayload.read))


def _decision_probe(process: Any, request: KernelRequest, launched: str, device: str) -> Any:
    """The instrumented copy of a candidate that adds data-dependent decisions (the same as an Inductor
    kernel's, :mod:`kernelopt_core.gates.decision_coverage`), loaded in its process; None when it adds none."""
    from ..gates.decision_coverage import plan_decision_probe

    if not request.pins.decisions:
        return None
    user = request.target
    plan = plan_decision_probe(user.module, user.candidate_source, LAUNCHER_NAME, request.settings.decision_search_s,
                               launched_source=launched)
    if plan is None or not plan.source:
        return plan.run if plan is not None else None
    reply = process.call("load_kernel", name=LAUNCHER_NAME, key=plan.run.key, source=plan.source,
                         device_str=_device_str(device))
    if not reply.get("ok"):
        plan.run.failed = f"the instrumented copy failed to load: {str(reply.get('error'))[:600]}"
    return plan.run


def _kernel_gate(request: KernelRequest) -> TaskReply:
    from ..gates.kernel import kernel_input_sets
    from ..gates.kernel_gate import check_kernel
    from ..gates.launch_capture import clone_value
    from ..gates.structured_input_sets import adds_decisions, candidate_constants
    from ..sandbox.exchange import ExchangeArena
    from ..sandbox.process import SandboxError

    user, settings, common = request.target, request.settings, request.common
    candidate = user.candidate_source
    built = session(user)
    device = built.device
    kernel = user.kernel
    seeds = tuple(settings.seeds)
    try:
        entry = _candidate(user, device, from_spare=True, keep_spare=settings.spare, scratch_root=request.scratch_root)
        launched = launcher_source(candidate, kernel, _launch_plan(entry, built, user, common.run_timeout_s))
        failed = _load_launcher(entry, launched, device)
        probe = _decision_probe(entry.process, request, launched, device) if failed is None else None
    except SandboxError as exc:
        return _sandbox_failure(exc, "the candidate's process")
    except _EditedLaunchFailed as exc:
        return exc.verdict
    containment = _containment(entry.process)
    candidate_process = entry.how  # from the spare or not, and the seconds getting it took
    if failed is not None:
        verdict = _failure(failed, f"{kernel} fails to load")
        verdict.numbers.update(containment=containment, candidate_process=candidate_process)
        return verdict
    # The same input sets as an Inductor kernel's (a wrong edit hides from random inputs here too), rows being each
    # tensor's last dimension: a user kernel's reduction length is not written into its source.
    input_sets = [] if not common.input_sets else \
        kernel_input_sets(built.values, built.roles, built.names, _reduces(built.module), None,
                          adds_decisions=adds_decisions(request.pins.adds_decisions),
                          constants=candidate_constants(request.pins.constants, candidate, built.module))
    arena = ExchangeArena(device)
    try:
        outcome = check_kernel(built.original, entry.process, arena, LAUNCHER_NAME, [[clone_value(v) for v in built.values]],
                               [{}], built.names, built.roles, seeds, device, reruns=settings.reruns,
                               original_uses_atomics=user.atomics, extra_sets=input_sets,
                               timeout_s=common.run_timeout_s, decisions=probe)
    finally:
        arena.close()
    failed_check = outcome.failed
    numbers: dict[str, Any] = {
        "kernels": {kernel: {"passed": failed_check is None, "checks": [c.to_json() for c in outcome.checks],
                             "roles": dict(zip(built.names, built.roles, strict=True)),
                             "launches": len(built.capture.launches)}},
        "containment": containment, "candidate_process": candidate_process,
        "max_abs_diff": max((c.max_abs_diff for c in outcome.checks), default=0.0),
        "memory": {"working_set_bytes": outcome.working_set_bytes, "tracked_peak_bytes": outcome.peak_bytes},
    }
    if failed_check is not None:
        reason = f"{kernel}, {failed_check.label}: {failed_check.problems[0]}"
        if failed_check.could_not_run:
            return _could_not_verify(reason, **numbers)
        numbers["violation"] = failed_check.violation
        return _verdict(False, reason, **numbers)
    if probe is not None:
        numbers["kernels"][kernel]["decisions"] = probe.coverage.to_json()
        unproven = probe.reason()
        if unproven is not None:  # every run matched, but a path the candidate adds was never taken
            unverified = _could_not_verify(f"{kernel}: {unproven}", **numbers)
            unverified.not_verified = True
            return unverified
    return _verdict(True, f"{len(outcome.checks)} runs (captured launch, seeds {', '.join(map(str, seeds))}, stale "
                          f"outputs, re-runs{', input sets' if input_sets else ''}) match the original (max |diff| "
                          f"{numbers['max_abs_diff']:.3g})", **numbers)


_REDUCTION_CALL = re.compile(r"\b(?:sum|max|min|reduce|argmax|argmin|xor_sum|cumsum|cumprod|associative_scan)\(")


def _reduces(module_source: str) -> bool:
    """Whether the kernel module reduces (the reduction-only input sets apply to it)."""
    return bool(_REDUCTION_CALL.search(module_source))


# --- gate 3 -------------------------------------------------------------------------------------------


def run_model_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return run_gate_task(ModelGate(), _harness_gate, payload, UserKernelPayload.read)


def _kernel_tolerance(outputs: Any) -> float:
    from ..gates.model import tensor_outputs

    return max((KERNEL_TOLERANCE.get(str(t.dtype), 0.0) for t in tensor_outputs(outputs)), default=1e-3) or 1e-3


def _harness_gate(request: ModelRequest) -> TaskReply:
    from ..gates.launch_capture import clone_value
    from ..gates.model import check_seed
    from ..sandbox.exchange import ExchangeArena
    from ..sandbox.process import SandboxError

    user, settings, run_timeout_s = request.target, request.settings, request.common.run_timeout_s
    candidate = user.candidate_source
    built = session(user)
    device = built.device
    harness = built.harness
    pytest_kind = harness.spec.kind == "pytest"
    seeds = [0] if pytest_kind else settings.seeds
    try:
        entry = _candidate(user, device, scratch_root=request.scratch_root)
        failed = _load_harness(entry, user, device, candidate, run_timeout_s)
    except SandboxError as exc:
        return _sandbox_failure(exc, "the candidate's process")
    containment = _containment(entry.process)
    if failed is not None:
        verdict = _failure(failed, "the harness with the candidate fails to load")
        verdict.numbers.update(containment=containment)
        return verdict
    sanitizer = _sanitize(request, device)
    rejected = sanitizer_rejection(sanitizer, containment)
    if rejected is not None:
        return rejected
    reference, reference_error = _float64_reference(harness, seeds[0], pytest_kind)
    tolerance = settings.tolerance if reference is not None else _kernel_tolerance(built.output)
    checks: list[SeedCheck] = []
    for seed in seeds:
        inputs = harness.make_inputs(seed)
        arena = ExchangeArena(device)
        try:
            refs, args = _share_inputs(arena, inputs)
            try:
                reply = entry.process.call("run_graph", refs=refs, args=args, timeout_s=run_timeout_s)
            except SandboxError as exc:
                return _sandbox_failure(exc, f"the harness with the candidate, seed {seed}")
            if not reply.get("ok"):
                verdict = _failure(reply, f"the harness with the candidate fails on seed {seed}")
                verdict.numbers.update(seeds=[c.to_json() for c in checks], containment=containment)
                return verdict
            candidate_out = _candidate_outputs(entry.process, reply)
            try:
                original_out = harness.run([clone_value(x) for x in inputs])
            except Exception as exc:  # noqa: BLE001
                if _is_oom(exc):
                    raise
                raise _SetupError(f"the harness fails with the original kernel on seed {seed}: "
                                  f"{type(exc).__name__}: {exc}") from exc
            checks.append(check_seed(seed, original_out, candidate_out, tolerance, reference,
                                     lambda seed=seed: [clone_value(x) for x in harness.make_inputs(seed)], reference_error))
            del original_out, candidate_out
            entry.process.call("release")
        finally:
            arena.close()
    numbers = {**model_numbers(checks, tolerance, containment, sanitizer), "float64_reference": reference is not None,
               "reference_error": reference_error, "compared_with": "the original kernel in the same harness"}
    failed_seed = next((c for c in checks if not c.passed), None)
    if failed_seed is not None:
        return _verdict(False, f"seed {failed_seed.seed}: {failed_seed.problem}", **numbers)
    if pytest_kind:
        return _verdict(True, f"the test {harness.spec.name} passes with the candidate; {numbers['sanitizer_note']}",
                        **numbers)
    basis = "float64 rule where outside atol=rtol=1e-4" if reference is not None else \
        f"kernel tolerance atol=rtol={tolerance:g} (no float64 run: {reference_error})"
    return _verdict(True, f"seeds {', '.join(map(str, seeds))}: the harness output matches the original's "
                          f"({basis}; max |diff| {numbers['max_abs_diff']:.3g}); {numbers['sanitizer_note']}",
                    **numbers)


def _float64_reference(harness: Any, seed: int, pytest_kind: bool) -> tuple[Any, str | None]:
    """The harness run in float64 with the original kernel (tried on ``seed``'s inputs), or why there is none."""
    from ..gates.launch_capture import clone_value
    from .harness import HarnessError

    if pytest_kind:
        return None, "a test returns no outputs; passing it is the check"
    try:
        reference = harness.float64_reference()
        reference([clone_value(x) for x in harness.make_inputs(seed)])
    except HarnessError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - the original in float64 failed: no reference, said why
        if _is_oom(exc):
            raise
        return None, f"the original does not run in float64 ({type(exc).__name__}: {exc})"
    return reference, None


def _sanitize(request: ModelRequest, device: str) -> Any:
    """compute-sanitizer memcheck and racecheck on the harness run with the candidate (on a GPU; the
    request's ``sanitize`` and ``sanitizer_timeout_s`` as for Inductor's finalists)."""
    from .sanitize_target import sanitize_user_finalist

    kernel_file, harness = _candidate_side(request.target)
    candidate_side = request.target.but(file=kernel_file, harness=harness)
    return sanitize_user_finalist(candidate_side, request.common, request.compiled, device,
                                  os.path.join(_workdir(request.target), "sanitize"))


# --- gate 4 -------------------------------------------------------------------------------------------


def run_perf_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return run_gate_task(PerfGate(), _perf_gate, payload, UserKernelPayload.read)


def _baseline(user: UserKernelPayload, device: str, scratch_root: str | None = None) -> SandboxSlot:
    """A process holding the original kernel and harness, timed like the candidate's (kept per harness)."""
    return baseline_slot(device, _session_key(user), scratch_root=scratch_root)


def _prepare_harness_sides(request: PerfRequest, device: str) -> tuple[SandboxSlot, SandboxSlot] | TaskReply:
    user, run_timeout_s = request.target, request.common.run_timeout_s
    baseline = _baseline(user, device, request.scratch_root)
    failed = _load_harness(baseline, user, device, None, run_timeout_s)
    if failed is not None:
        raise _SetupError(f"the original harness fails to load in its timing process: {failed.get('error')}")
    if "inputs" not in baseline.loaded:
        reply = baseline.process.call("make_inputs", seeds=list(INPUT_SEEDS))
        if not reply.get("ok"):
            raise _SetupError(f"the harness cannot make its inputs: {reply.get('error')}")
        baseline.loaded.add("inputs")
    candidate = _candidate(user, device, scratch_root=request.scratch_root)
    failed = _load_harness(candidate, user, device, user.candidate_source, run_timeout_s)
    if failed is not None:
        return _failure(failed, "the harness with the candidate fails to load")
    cannot = candidate_inputs(candidate, INPUT_SEEDS, "the harness with the candidate")
    return cannot if cannot is not None else (baseline, candidate)


def _perf_gate(request: PerfRequest) -> TaskReply:
    from ..measure.paths import TimingPath

    user, settings = request.target, request.settings
    built = session(user)
    return perf_gate(settings, built.device, lambda: _prepare_harness_sides(request, built.device), INPUT_SEEDS,
                     TimingPath.HARNESS.value,
                     lambda baseline, candidate: {user.kernel: _kernel_ab(user, built, built.device, settings.rounds,
                                                                          request.common.run_timeout_s).speedup})


# --- kernel alone, for the search ---------------------------------------------------------------------


def _kernel_ab(user: UserKernelPayload, built: Session, device: str, rounds: int | None,
               run_timeout_s: float = 600.0) -> Any:
    """The candidate's kernel against the original's on the captured launch, each in its own process."""
    from ..sandbox.spare import settle_spare

    kernel = user.kernel
    settle_spare()  # a spare still starting would share the machine with the timing
    baseline = _baseline(user, device)
    failed = _load_launcher(baseline, launcher_source(built.module, kernel, built.plan), device)
    if failed is not None:
        raise RuntimeError(f"the original {kernel} fails to load in its timing process: {failed.get('error')}")
    candidate = _candidate(user, device)
    try:
        plan = _launch_plan(candidate, built, user, run_timeout_s)
    except (_EditedLaunchFailed, _CouldNotVerify) as exc:
        raise RuntimeError(str(exc)) from None
    failed = _load_launcher(candidate, launcher_source(user.candidate_source, kernel, plan), device)
    if failed is not None:
        raise RuntimeError(f"the candidate fails to load: {failed.get('error')}")
    timing, _ = time_kernel_pair(baseline.process, candidate.process, device, rounds, LAUNCHER_NAME,
                                 list(built.values), {}, share=_share_inputs)
    return timing


def time_user_candidate(payload: dict[str, Any]) -> dict[str, Any]:
    """Kernel-alone A/B of a candidate that passed gates 1-2: speedup, CI and both medians."""
    from ..sandbox.process import SandboxError

    try:
        request = UserTimingRequest.from_json(payload)
        built = session(request.user)
        timing = _kernel_ab(request.user, built, built.device, request.rounds)
    except (_SetupError, _CouldNotVerify, PayloadError, SandboxError, RuntimeError) as exc:
        return {"error": str(exc)}
    finally:
        close_candidate({"keep_spare": True})  # the candidate's process; a spare waits for the next screen
    return {"speedup": timing.speedup, "ci": [timing.ci_low, timing.ci_high], "baseline_ms": timing.a.median_ms,
            "ms": timing.b.median_ms, "timed_by": "the checker's clock, each side in its own process"}


__all__ = ["close_user_processes", "profile_user_kernel", "run_kernel_gate", "run_model_gate", "run_perf_gate",
           "session", "time_user_candidate", "user_kernel_facts"]
