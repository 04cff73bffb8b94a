"""Verify a configuration change like any candidate. Runs in a worker subprocess (imports torch).

The candidate is the problem compiled with the recommended configuration; the baseline is the
same problem compiled as the user had it. Both are checked gate-3 style (seeds 0, 42, 123 at
1e-4 relative, with the float64 fallback of the reference system) and timed interleaved through
the full callable, the path the user calls. The two callables' paths may differ in CUDA graphs;
that is the point of the change, and both are user-facing callables
(:func:`kernelopt_core.measure.accounting.speedup_between` with ``across_configurations``).

With ``static_inputs`` the candidate keeps the baseline's mode and marks its inputs with
``torch._dynamo.mark_static_address``. That assumes the caller reuses the same input tensors, so
the candidate is checked the way such a caller runs it: one set of input tensors, refilled in
place with each seed's data before each call.
"""

from __future__ import annotations

import copy
import sys
import time
from functools import partial
from typing import Any

from .accounting import callable_path, mode_uses_cudagraphs, speedup_between
from .statistics import ab_speedup, summarize

MODEL_SEEDS = (0, 42, 123)
MODEL_TOLERANCE = 1e-4
RHO_LIMIT = 10.0
D_REF_FLOOR = 1e-8
# Elements compared per step: a whole output cast to float64 is twice its size again, on a device that
# already holds both callables' working sets; a chunk of 2^24 elements is 128 MB in float64.
COMPARE_CHUNK = 1 << 24


def _flat_tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _flat_tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _flat_tensors(item)]
    return []


def _chunks(t: Any) -> Any:
    """``t`` flattened, in COMPARE_CHUNK pieces (views: nothing is copied)."""
    flat = t.reshape(-1)
    for start in range(0, flat.numel(), COMPARE_CHUNK):
        yield flat[start:start + COMPARE_CHUNK]


def _work_device(*groups: list[Any]) -> Any:
    """Where to compute: the device of the first tensor not on the host (outputs kept on the host are
    compared there one chunk at a time), else the host."""
    return next((t.device for group in groups for t in group if t.device.type != "cpu"), None)


def _max_abs(tensors: list[Any], device: Any = None) -> float:
    return max((float(piece.to(device or piece.device).double().abs().max())
                for t in tensors if t.numel() for piece in _chunks(t)), default=0.0)


def _max_diff(a: list[Any], b: list[Any]) -> float:
    """The largest absolute difference, in float64, one chunk at a time (either side may live on the host)."""
    device = _work_device(a, b)
    best = 0.0
    for x, y in zip(a, b, strict=True):
        if not x.numel():
            continue
        for px, py in zip(_chunks(x), _chunks(y), strict=True):
            where = device or px.device
            best = max(best, float((px.to(where).double() - py.to(where).double()).abs().max()))
    return best


def compare_outputs(baseline: Any, candidate: Any, reference64: Any | None, tol: float = MODEL_TOLERANCE
                    ) -> dict[str, Any]:
    """Gate-3 style: relative error vs the baseline at ``tol``, else the float64 rho rule.

    ``reference64`` is the float64 output, or a function computing it (only called when needed:
    on a large graph it costs twice the memory of the baseline).
    """
    base, cand = _flat_tensors(baseline), _flat_tensors(candidate)
    if len(base) != len(cand) or any(x.shape != y.shape for x, y in zip(base, cand, strict=True)):
        return {"passed": False, "reason": "outputs differ in number or shape"}
    if any(not bool(t.isfinite().all()) for t in cand if t.is_floating_point()) and all(
            bool(t.isfinite().all()) for t in base if t.is_floating_point()):
        return {"passed": False, "reason": "candidate output has NaN/inf where the baseline has none"}
    scale = max(_max_abs(base, _work_device(base, cand)), 1e-12)
    rel = _max_diff(base, cand) / scale
    numbers: dict[str, Any] = {"rel_err": rel}
    if rel <= tol:
        return {"passed": True, "reason": f"relative error {rel:.2e} <= {tol:g}", **numbers}
    if reference64 is None:
        return {"passed": False, "reason": f"relative error {rel:.2e} > {tol:g} (no float64 reference)", **numbers}
    ref = _flat_tensors(reference64() if callable(reference64) else reference64)
    d_ref, d_opt = _max_diff(base, ref), _max_diff(cand, ref)
    numbers.update(d_ref=d_ref, d_opt=d_opt)
    if d_ref >= D_REF_FLOOR:
        rho = d_opt / d_ref
        numbers["rho"] = rho
        return {"passed": rho <= RHO_LIMIT, "reason": f"float64 fallback: rho = {rho:.2f} (limit {RHO_LIMIT:g})",
                **numbers}
    relative = d_opt / scale
    return {"passed": relative <= tol, "reason": f"float64 fallback: d_opt/|ref| = {relative:.2e} (limit {tol:g})",
            **numbers}


def _inputs_for_seed(problem: Any, device: str, seed: int) -> list[Any]:
    """The problem's inputs under ``seed``, made on the device (GBs made on the host and copied over take
    seconds per seed)."""
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]


def _clone(value: Any, to_host: bool = False) -> Any:
    """A copy of a call's outputs (cudagraph trees overwrite a replay's outputs on the next replay); on the
    host with ``to_host``, so the device holds one working set per callable, not a third copy."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True) if to_host else value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v, to_host) for v in value)
    return value


def _static_copies(inputs: list[Any]) -> list[Any]:
    """Copies of ``inputs`` marked static: the tensors a caller keeps and refills in place."""
    import torch

    copies = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    for x in copies:
        if isinstance(x, torch.Tensor):
            torch._dynamo.mark_static_address(x)
    return copies


def _refill(static: list[Any], values: list[Any]) -> list[Any]:
    import torch

    for target, value in zip(static, values, strict=True):
        if isinstance(target, torch.Tensor):
            target.copy_(value)
    return static


def _own_frame(model: Any) -> Any:
    """``model`` behind a forward of its own, so dynamo caches the candidate's compile apart from
    the baseline's (two ``torch.compile`` calls of one mode may otherwise share cache entries)."""
    import torch

    class StaticInputsModel(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(*args)

    return StaticInputsModel(model)


def verify_config_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker task: ``{"problem", "baseline_mode", "candidate_mode", "static_inputs"?, "seeds"?, "tol"?,
    "min_speedup"?, "rounds"?}``."""
    import torch

    from ..compile import build_problem, load_problem
    from .accounting_run import SyncedTimer, compile_callable
    from .task_context import worker_device

    device = payload.get("device") or worker_device()
    if device == "auto":
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    seeds = tuple(payload.get("seeds") or MODEL_SEEDS)
    tol = float(payload.get("tol") or MODEL_TOLERANCE)
    min_speedup = float(payload.get("min_speedup") or 1.03)
    rounds = int(payload.get("rounds") or (30 if device.startswith("cuda") else 7))
    baseline_mode, candidate_mode = str(payload["baseline_mode"]), str(payload["candidate_mode"])
    static = bool(payload.get("static_inputs"))
    notes: list[str] = []
    modes = {"baseline": baseline_mode, "candidate": candidate_mode}
    if not device.startswith("cuda"):
        notes.append("on the CPU backend every mode compiles as 'default': baseline and candidate are the same code"
                     + (" (no CUDA graphs, so static inputs change nothing)" if static else ""))
        modes = {"baseline": "default", "candidate": "default"}
    if static:
        notes.append("candidate: inputs marked with torch._dynamo.mark_static_address and refilled in place "
                     "before each call (what it assumes of the caller)")
    problem = load_problem(str(payload["problem"]))
    if static:  # dynamo inlines the model into the wrapper's frame: its class's module must be importable
        sys.modules.setdefault(problem.__name__, problem)
    cuda = device.startswith("cuda")
    held_at_start = None
    if cuda:
        # what this worker still held when the task began counts in the peak: recorded apart, to tell it from
        # what the check itself allocates
        held_at_start = int(torch.cuda.memory_allocated(device))
        torch.cuda.reset_peak_memory_stats(device)  # this task's peak, not an earlier task's in this worker
    model, inputs = build_problem(problem, device)
    gates: list[dict[str, Any]] = []
    with torch.no_grad():
        started = time.perf_counter()
        baseline, _, base_skipped = compile_callable(model, inputs, modes["baseline"])
        phase_peaks = {"baseline_compile": _peak(device)}  # the running peak after each phase: which one sets it
        # static: the candidate's own inputs, refilled in place for each call (None: it takes the caller's)
        cand_inputs = _static_copies(inputs) if static else None
        candidate, _, cand_skipped = compile_callable_keep(_own_frame(model) if static else model,
                                                           cand_inputs if cand_inputs is not None else inputs,
                                                           modes["candidate"])
        phase_peaks["candidate_compile"] = _peak(device)
        del inputs  # the seeds bring their own; the last seed's are timed (one input set on the device at a time)
        _free(device)
        # the candidate's replay overwrites the baseline's outputs only when both are CUDA graphs of one tree
        shared_pool = cuda and static and mode_uses_cudagraphs(modes["baseline"]) and not base_skipped
        reference = copy.deepcopy(model).double()
        per_seed = []
        seed_inputs: list[Any] = []
        for seed in seeds:
            seed_inputs = []  # the previous seed's inputs go before this seed's come
            seed_inputs = _inputs_for_seed(problem, device, seed)
            base_out = baseline(*seed_inputs)
            if shared_pool:
                base_out = _clone(base_out, to_host=True)
            cand_out = candidate(*(_refill(cand_inputs, seed_inputs) if cand_inputs is not None else seed_inputs))

            ref_out = partial(_float64_call, reference, seed_inputs)
            per_seed.append({"seed": seed, **compare_outputs(base_out, cand_out, ref_out, tol)})
            del base_out, cand_out, ref_out
        inputs = seed_inputs
        phase_peaks["seeds"] = _peak(device)
        correct = all(item["passed"] for item in per_seed)
        failed = next((item for item in per_seed if not item["passed"]), None)
        gates.append({"gate": 3, "name": "model", "passed": correct, "seconds": time.perf_counter() - started,
                      "reason": f"seeds {list(seeds)}: " + ("all within tolerance" if failed is None else
                                                            f"seed {failed['seed']}: {failed['reason']}"),
                      "seeds": per_seed})
        if cand_inputs is not None:
            _refill(cand_inputs, inputs)  # both sides are timed on the same data
        comparison = None
        peak = _peak(device)
        if correct:
            started = time.perf_counter()
            timer = SyncedTimer(device)
            path_a = callable_path(modes["baseline"] if not base_skipped else "default", device)
            path_b = callable_path(modes["candidate"] if not cand_skipped else "default", device)
            b_inputs = cand_inputs if cand_inputs is not None else inputs
            a_ms, b_ms = _interleaved(timer, partial(baseline, *inputs), partial(candidate, *b_inputs), rounds)
            paired = ab_speedup(a_ms, b_ms, path_a.value)
            comparison = speedup_between(summarize(a_ms, path_a.value), summarize(b_ms, path_b.value),
                                         across_configurations=True)
            comparison.ci_low, comparison.ci_high = paired.ci_low, paired.ci_high  # rounds are paired
            passed = comparison.speedup >= min_speedup and comparison.ci_low > 1.0
            gates.append({"gate": 4, "name": "perf", "passed": passed, "seconds": time.perf_counter() - started,
                          "reason": (f"{comparison.describe(baseline_mode, candidate_mode)}; needs >= {min_speedup:.2f}x "
                                     "with the interval above 1.0"),
                          "speedup": comparison.speedup, "ci": [comparison.ci_low, comparison.ci_high],
                          "baseline_path": path_a.value, "candidate_path": path_b.value, "rounds": rounds})
        peak = _peak(device) or peak
    working = _working_set_bytes(problem, device)
    # the compiled callables and every tensor go before the device's cache is emptied
    del baseline, candidate, reference, inputs, seed_inputs, cand_inputs, model
    torch._dynamo.reset()
    _free(device)
    accepted = all(g["passed"] for g in gates) and len(gates) == 2
    return {
        "accepted": accepted, "baseline_mode": baseline_mode, "candidate_mode": candidate_mode,
        "change": {"mode": candidate_mode, **({"static_inputs": True} if static else {})}, "device": device,
        "reason": next((g["reason"] for g in gates if not g["passed"]), gates[-1]["reason"]),
        "gates": gates, "comparison": comparison.to_json() if comparison else None,
        "cudagraphs": {"baseline": mode_uses_cudagraphs(modes["baseline"]) and not base_skipped and device != "cpu",
                       "candidate": mode_uses_cudagraphs(modes["candidate"]) and not cand_skipped and device != "cpu"},
        "notes": notes,
        # the device's allocator peak over the task and the problem's inputs and outputs (None on the CPU)
        "memory": {"peak_bytes": peak, "working_set_bytes": working,
                   "peak_over_working_set": round(peak / working, 3) if peak and working else None,
                   "peak_bytes_by_phase": {**phase_peaks, "timing": peak}, "held_at_start_bytes": held_at_start},
    }


def _float64_call(reference: Any, inputs: list[Any]) -> Any:
    """``reference`` (a float64 copy of the model) on ``inputs`` with their floating tensors in float64."""
    import torch

    return reference(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _peak(device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return int(torch.cuda.max_memory_allocated(device))


def _working_set_bytes(problem: Any, device: str) -> int | None:
    """The problem's inputs and outputs in bytes, from their shapes (meta tensors: nothing is allocated)."""
    if not device.startswith("cuda"):
        return None
    import torch

    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            values = [x for x in problem.get_inputs() if isinstance(x, torch.Tensor)]
            model = problem.Model(*problem.get_init_inputs())
            outputs = _flat_tensors(model(*values))
    except Exception:  # noqa: BLE001 - a model that cannot run on meta tensors has no figure
        return None
    return sum(t.numel() * t.element_size() for t in [*values, *outputs])


def compile_callable_keep(model: Any, inputs: list[Any], mode: str) -> tuple[Any, Any, bool]:
    """Like :func:`accounting_run.compile_callable` but without resetting dynamo (keeps the baseline)."""
    import torch

    from .accounting_run import WARMUP_CALLS, _cudagraph_skips, _synchronize

    skips = _cudagraph_skips()
    compiled = torch.compile(model, mode=None if mode == "default" else mode)
    for _ in range(WARMUP_CALLS):
        compiled(*inputs)
    _synchronize(inputs)
    return compiled, None, _cudagraph_skips() > skips


def _interleaved(timer: Any, fn_a: Any, fn_b: Any, rounds: int) -> tuple[list[float], list[float]]:
    """A,B then B,A alternately; one sample per side per round."""
    for _ in range(2):
        timer.once(fn_a)
        timer.once(fn_b)
    a_ms: list[float] = []
    b_ms: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            a_ms.append(timer.once(fn_a))
            b_ms.append(timer.once(fn_b))
        else:
            b_ms.append(timer.once(fn_b))
            a_ms.append(timer.once(fn_a))
    return a_ms, b_ms
