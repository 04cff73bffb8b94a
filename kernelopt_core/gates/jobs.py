"""Gates 2-4 as worker jobs: plain functions from a JSON-able payload to a JSON-able verdict.

They run inside a worker (``Worker.call("kernelopt_core.gates.jobs:run_kernel_gate", payload)``)
or in-process (tests, or when no worker is wanted); torch is imported inside the functions.
Each returns ``{"passed": bool, "reason": str, "numbers": {...}}``, or ``{"setup_error": str}``
when the *baseline* cannot be loaded or run (then no verdict on the candidate is possible).

Payload keys: ``graph`` (the original output_code.py), ``restitched`` (the candidate's
re-stitched copy), ``kernels`` (names of the replaced kernels), ``device`` (default: the
worker's), and per gate: ``seeds``, ``reruns`` (2); ``seeds``, ``tolerance``, ``fx_graph_runnable``
(3); ``rounds``, ``min_speedup``, ``kernel_timing`` (4).
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from types import ModuleType
from typing import Any


class _SetupError(Exception):
    pass


def _device(payload: dict[str, Any]) -> str:
    from ..measure.job_context import worker_device

    return str(payload.get("device") or worker_device())


def _load(path: str, device: str, role: str) -> ModuleType:
    from ..graph_module import load_graph_module

    with open(path, "rb") as handle:
        digest = hashlib.sha256(os.path.abspath(path).encode() + b"\0" + handle.read()).hexdigest()[:20]
    return load_graph_module(path, device, module_name=f"kernelopt_{role}_{digest}")


def _load_baseline(payload: dict[str, Any], device: str) -> ModuleType:
    try:
        return _load(payload["graph"], device, "baseline")
    except Exception as exc:  # noqa: BLE001
        raise _SetupError(f"the baseline graph {payload['graph']} cannot be loaded: {type(exc).__name__}: {exc}") from exc


def _load_candidate(payload: dict[str, Any], device: str) -> tuple[ModuleType | None, str | None]:
    try:
        return _load(payload["restitched"], device, "restitched"), None
    except Exception as exc:  # noqa: BLE001 - the candidate's own failure is a verdict
        return None, f"the re-stitched graph fails to load: {type(exc).__name__}: {str(exc)[:2000]}"


def _verdict(passed: bool, reason: str, **numbers: Any) -> dict[str, Any]:
    return {"passed": passed, "reason": reason, "numbers": numbers}


def _guarded(job: Any, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        return job(payload)
    except _SetupError as exc:
        return {"setup_error": str(exc)}


# --- gate 2 ----------------------------------------------------------------------------------


def run_kernel_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return _guarded(_kernel_gate, payload)


def _kernel_gate(payload: dict[str, Any]) -> dict[str, Any]:
    from ..artifacts import parse_output_code
    from ..graph_module import make_inputs
    from .kernel import MAX_LAUNCHES, argument_roles, check_kernel, runtime_parameters
    from .launch_capture import capture_launches

    device = _device(payload)
    graph = parse_output_code(payload["graph"])
    names: list[str] = list(payload["kernels"])
    seeds = tuple(int(s) for s in payload.get("seeds", (0, 42, 1337)))
    steps: dict[str, float] = {}  # where gate 2's time goes (loading compiles every kernel of a graph)
    mark = time.perf_counter()
    baseline = _load_baseline(payload, device)
    steps["load_baseline_s"], mark = round(time.perf_counter() - mark, 3), time.perf_counter()
    try:
        launches, _ = capture_launches(baseline, names, make_inputs(baseline, seed=seeds[0] if seeds else 0),
                                       limit=MAX_LAUNCHES)
    except Exception as exc:  # noqa: BLE001
        raise _SetupError(f"the baseline graph fails on its own inputs: {type(exc).__name__}: {exc}") from exc
    steps["capture_s"], mark = round(time.perf_counter() - mark, 3), time.perf_counter()
    candidate_module, error = _load_candidate(payload, device)
    steps["load_candidate_s"], mark = round(time.perf_counter() - mark, 3), time.perf_counter()
    if candidate_module is None:
        return _verdict(False, error or "the re-stitched graph fails to load", steps_s=steps)
    per_kernel: dict[str, Any] = {}
    for name in names:
        kernel = graph.kernel(name)
        assert kernel is not None
        kernel_launches = [launch for launch in launches if launch.kernel == name]
        if not kernel_launches:
            per_kernel[name] = {"passed": False, "checks": [], "reason": f"{name} was not launched by the graph "
                                                                       "on its own inputs; it cannot be checked"}
            continue
        params = runtime_parameters(kernel.source, name)
        mutated = list(kernel.inductor_meta.get("mutated_arg_names") or [])
        role_of = argument_roles(kernel.source, name, mutated)
        width = len(kernel_launches[0].args)
        arg_names = [params[i] if i < len(params) else f"launcher_arg{i}" for i in range(width)]
        roles = [role_of.get(n, "scalar") if i < len(params) else "scalar" for i, n in enumerate(arg_names)]
        checks = check_kernel(
            getattr(baseline, name), getattr(candidate_module, name),
            [launch.args for launch in kernel_launches], [launch.kwargs for launch in kernel_launches],
            arg_names, roles, seeds, device, reruns=int(payload.get("reruns", 2)),
            original_uses_atomics=bool(kernel.inductor_meta.get("atomic_add_found")),
        )
        failed = next((c for c in checks if not c.passed), None)
        per_kernel[name] = {
            "passed": failed is None, "checks": [c.to_json() for c in checks],
            "roles": dict(zip(arg_names, roles, strict=True)), "launches": len(kernel_launches),
            "reason": (f"{name}, {failed.label}: {failed.problems[0]}" if failed else
                       f"{name}: {len(checks)} runs match the original"),
            "max_abs_diff": max((c.max_abs_diff for c in checks), default=0.0),
        }
    steps["checks_s"] = round(time.perf_counter() - mark, 3)
    failing = [v for v in per_kernel.values() if not v["passed"]]
    if failing:
        return _verdict(False, failing[0]["reason"], kernels=per_kernel, steps_s=steps)
    runs = sum(len(v["checks"]) for v in per_kernel.values())
    worst = max((v["max_abs_diff"] for v in per_kernel.values()), default=0.0)
    return _verdict(True, f"{runs} runs (captured launch, seeds {', '.join(map(str, seeds))}, stale outputs, "
                          f"re-runs) match the original (max |diff| {worst:.3g})", kernels=per_kernel,
                    max_abs_diff=worst, steps_s=steps)


# --- gate 3 ----------------------------------------------------------------------------------


def run_model_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return _guarded(_model_gate, payload)


def _model_gate(payload: dict[str, Any]) -> dict[str, Any]:
    from ..graph_module import call_graph, make_inputs
    from .float64_reference import ReferenceUnavailable, find_fx_graph_runnable, load_reference
    from .model import check_seed, clone_inputs

    device = _device(payload)
    seeds = [int(s) for s in payload.get("seeds", (0, 42, 123))]
    tolerance = float(payload.get("tolerance", 1e-4))
    baseline = _load_baseline(payload, device)
    candidate, error = _load_candidate(payload, device)
    if candidate is None:
        return _verdict(False, error or "the re-stitched graph fails to load")
    reference: Any = None
    reference_error: str | None = None
    checks = []
    for seed in seeds:
        inputs = make_inputs(baseline, seed=seed)
        try:
            baseline_out = call_graph(baseline, clone_inputs(inputs))
        except Exception as exc:  # noqa: BLE001
            raise _SetupError(f"the baseline graph fails on seed {seed}: {type(exc).__name__}: {exc}") from exc
        try:
            candidate_out = call_graph(candidate, clone_inputs(inputs))
        except Exception as exc:  # noqa: BLE001
            return _verdict(False, f"the re-stitched graph fails on seed {seed}: {type(exc).__name__}: "
                                   f"{str(exc)[:1000]}", seeds=[c.to_json() for c in checks])
        if reference is None and reference_error is None:
            path = find_fx_graph_runnable(payload["graph"], payload.get("fx_graph_runnable"))
            try:
                if path is None:
                    raise ReferenceUnavailable("no fx_graph_runnable.py beside the dump")
                reference = load_reference(path, device)
                _check_reference_arguments(reference, payload["graph"])
            except ReferenceUnavailable as exc:
                reference_error = str(exc)
        checks.append(check_seed(seed, baseline_out, candidate_out, tolerance, reference,
                                 clone_inputs(inputs), reference_error))
    numbers: dict[str, Any] = {"seeds": [c.to_json() for c in checks], "tolerance": tolerance,
                               "max_abs_diff": max((c.max_abs_diff for c in checks), default=0.0)}
    fallbacks = [c.fallback for c in checks if c.fallback is not None]
    if fallbacks:
        worst = max(fallbacks, key=lambda d: (not d.passed, d.rho or 0.0, d.d_opt))
        numbers.update(d_ref=worst.d_ref, d_opt=worst.d_opt, rho=worst.rho, float64_reference=reference is not None)
    else:
        numbers.update(d_ref=None, d_opt=None, rho=None)
    failed = next((c for c in checks if not c.passed), None)
    if failed is not None:
        return _verdict(False, f"seed {failed.seed}: {failed.problem}", **numbers)
    if fallbacks:
        return _verdict(True, f"seeds {', '.join(map(str, seeds))}: outside atol=rtol={tolerance:g} on "
                              f"{len(fallbacks)} seed(s) but within the float64 rule ({fallbacks[0].rule})", **numbers)
    return _verdict(True, f"seeds {', '.join(map(str, seeds))} match the baseline at atol=rtol={tolerance:g} "
                          f"(max |diff| {numbers['max_abs_diff']:.3g})", **numbers)


def _check_reference_arguments(reference: Any, graph_path: str) -> None:
    """Repro.forward must take the wrapper's arguments, by name and in order."""
    import inspect

    from ..artifacts import parse_output_code
    from .float64_reference import ReferenceUnavailable

    wanted = [spec.name for spec in parse_output_code(graph_path).inputs]
    taken = list(inspect.signature(reference.module.forward).parameters)
    if wanted and taken != wanted:
        raise ReferenceUnavailable(f"{reference.path}: Repro takes ({', '.join(taken)}) but the graph is called with "
                                   f"({', '.join(wanted)})")


# --- gate 4 ----------------------------------------------------------------------------------


def run_perf_gate(payload: dict[str, Any]) -> dict[str, Any]:
    return _guarded(_perf_gate, payload)


def _perf_gate(payload: dict[str, Any]) -> dict[str, Any]:
    from ..graph_module import make_inputs
    from .launch_capture import capture_launches
    from .perf import perf_decision, time_graphs, time_kernels

    device = _device(payload)
    names: list[str] = list(payload.get("kernels") or [])
    min_speedup = float(payload.get("min_speedup", 1.03))
    rounds = payload.get("rounds")
    baseline = _load_baseline(payload, device)
    candidate, error = _load_candidate(payload, device)
    if candidate is None:
        return _verdict(False, error or "the re-stitched graph fails to load")
    try:
        result = time_graphs(baseline, candidate, device, rounds)
    except Exception as exc:  # noqa: BLE001
        return _verdict(False, f"timing failed: {type(exc).__name__}: {str(exc)[:1000]}",
                        traceback=traceback.format_exc()[-3000:])
    decision = perf_decision(result.speedup, result.ci_low, result.ci_high, min_speedup, result.path)
    kernel_speedups: dict[str, float] = {}
    kernel_notes: list[str] = []
    if payload.get("kernel_timing", True) and names:
        try:
            launches, _ = capture_launches(baseline, names, make_inputs(baseline, seed=1000), limit=1)
            for launch in launches:
                timing = time_kernels(getattr(baseline, launch.kernel), getattr(candidate, launch.kernel),
                                      launch.args, launch.kwargs, device, rounds)
                kernel_speedups[launch.kernel] = timing.speedup
        except Exception as exc:  # noqa: BLE001 - reported, never decides
            kernel_notes.append(f"kernel-alone timing failed: {type(exc).__name__}: {exc}")
    note = "" if device.startswith("cuda") else " [CPU Triton interpreter wall-clock time, not GPU time]"
    return _verdict(decision.passed, decision.reason + note, speedup=result.speedup, ci_low=result.ci_low,
                    ci_high=result.ci_high, timing_path=result.path, rounds=result.rounds,
                    baseline_median_ms=result.a.median_ms, candidate_median_ms=result.b.median_ms,
                    min_speedup=min_speedup, kernel_speedups=kernel_speedups, kernel_notes=kernel_notes,
                    device=device)
