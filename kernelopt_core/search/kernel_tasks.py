"""Worker tasks of the search: what Inductor chose for each kernel, and kernel-alone timings.

These run inside a :class:`kernelopt_core.measure.worker.Worker` (``"kernelopt_core.search.
kernel_tasks:<function>"``) and import torch inside the functions. Kernel-alone timings rank
candidates inside the beam; they never accept anything (gate 4 does, end to end).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..gates.task_payload import KernelTimingRequest
from ..payload_fields import PayloadReader


@dataclass(frozen=True)
class GraphFactsRequest:
    """``graph_facts``'s payload: the kernels of one dump whose launch configs (and times) are wanted."""

    graph_path: str
    device: str
    kernels: tuple[str, ...]
    time: bool = True  # also each kernel's time on its captured arguments
    rounds: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"graph_path": self.graph_path, "device": self.device, "kernels": list(self.kernels),
                "rounds": self.rounds, "time": self.time}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphFactsRequest:
        fields = PayloadReader(data, "graph_facts's payload")
        return cls(graph_path=fields.text("graph_path"), device=fields.text("device"), kernels=fields.texts("kernels"),
                   time=fields.flag("time", True), rounds=fields.integer("rounds", None))


def _candidates(payload: dict[str, Any]) -> dict[str, str]:
    """The re-stitched candidates of a timing or comparison job, by id."""
    found = PayloadReader(payload, "the candidates job's payload").mapping("candidates")
    return {str(key): str(path) for key, path in found.items()}


def _config_json(config: Any) -> dict[str, Any]:
    kwargs = dict(getattr(config, "kwargs", {}) or {})
    return {"blocks": {k: int(v) for k, v in kwargs.items() if isinstance(v, int)},
            "num_warps": int(getattr(config, "num_warps", 4) or 4),
            "num_stages": int(getattr(config, "num_stages", 1) or 1)}


def graph_facts(payload: dict[str, Any]) -> dict[str, Any]:
    """Per kernel: Inductor's launch configs and the kernel-alone time on its captured arguments."""
    from ..gates.launch_capture import capture_launches
    from ..gates.perf import time_kernels
    from ..graph_module import load_graph_module, make_inputs

    request = GraphFactsRequest.from_json(payload)
    device = request.device
    module = load_graph_module(request.graph_path, device)
    names = list(request.kernels)
    launches, _ = capture_launches(module, names, make_inputs(module, seed=2000), limit=1)
    facts: dict[str, Any] = {}
    for name in names:
        kernel = getattr(module, name)
        configs = [_config_json(c) for c in getattr(kernel, "configs", []) or []]
        # After a run the autotuner keeps the winner's launcher: put the config that runs first.
        launchers = getattr(kernel, "launchers", None) or []
        chosen = _config_json(launchers[0].config) if launchers and hasattr(launchers[0], "config") else None
        if chosen is not None:
            configs = [chosen, *[c for c in configs if c != chosen]]
        launch = next((item for item in launches if item.kernel == name), None)
        entry: dict[str, Any] = {"configs": configs, "launched": launch is not None}
        if launch is not None and request.time:
            try:
                # A against itself: the median of both sides is the kernel's time.
                timing = time_kernels(kernel, kernel, launch.args, launch.kwargs, device, request.rounds)
                entry["ms"] = (timing.a.median_ms + timing.b.median_ms) / 2
            except Exception as exc:  # noqa: BLE001 - a kernel we cannot time is reported, not fatal
                entry["error"] = f"{type(exc).__name__}: {exc}"
        facts[name] = entry
    return {"kernels": facts}


def time_candidates(payload: dict[str, Any]) -> dict[str, Any]:
    """Kernel-alone interleaved A/B of each re-stitched candidate against the baseline kernel.

    Each candidate runs in a fresh contained process of its own (never in this worker), the
    original kernel in a timing process of the baseline's; both get the same captured arguments
    and are timed on this process's clock (:func:`kernelopt_core.gates.tasks.graph.time_candidate_kernel`).
    """
    from ..gates.tasks.graph import time_candidate_kernel
    from ..measure.task_context import RECYCLE_KEY

    out: dict[str, Any] = {}
    for candidate_id, path in _candidates(payload).items():
        try:
            out[candidate_id] = time_candidate_kernel(KernelTimingRequest.from_json({**payload, "restitched": path}))
        except Exception as exc:  # noqa: BLE001 - one bad candidate must not lose the others
            out[candidate_id] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    result: dict[str, Any] = {"candidates": out}
    recycle = next((v.pop(RECYCLE_KEY) for v in out.values() if isinstance(v, dict) and v.get(RECYCLE_KEY)), None)
    if recycle:  # memory this worker could not give back: the timings stand, the next task gets a fresh worker
        result[RECYCLE_KEY] = recycle
    return result


def compare_kernel_outputs(payload: dict[str, Any]) -> dict[str, Any]:
    """Run each re-stitched candidate's kernel (in a contained process of its own) on the baseline's
    captured launch arguments and report the largest difference of its outputs from the baseline
    kernel's (a quick pre-check for tests and diagnostics; gate 2 is the real check)."""
    from ..gates.tasks.graph import compare_candidate_outputs

    out: dict[str, Any] = {}
    for candidate_id, path in _candidates(payload).items():
        try:
            request = KernelTimingRequest.from_json({**payload, "restitched": path})
            out[candidate_id] = compare_candidate_outputs(request)
        except Exception as exc:  # noqa: BLE001 - report per candidate
            out[candidate_id] = {"error": f"{type(exc).__name__}: {exc}"}
    return {"candidates": out}
