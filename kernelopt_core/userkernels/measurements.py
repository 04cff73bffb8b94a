"""What the search measures of a user's kernel, in the worker of its device: the kernel alone and its
harness (the dispatch timing), ncu on the harness, and a candidate's kernel-alone A/B.

:class:`.target.UserKernelTarget` answers the search's target protocol with these; a dump's graph
answers with its own (:class:`kernelopt_core.search.target.DumpTarget`). Nothing here imports torch.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..gates.cascade_target import TaskCaller, TaskFailed

TASKS = "kernelopt_core.userkernels.tasks"


def _root(workdir: str) -> str:
    return os.path.join(workdir, "user-kernel")


def launch_timing(target: Any, call: TaskCaller, workdir: str) -> dict[str, Any]:
    """The kernel alone on its captured launch and the harness, timed in the worker, as a dispatch timing;
    ``{"error": ...}`` when the harness cannot run."""
    try:
        reply = call(f"{TASKS}:profile_user_kernel", target.payload(workdir=_root(workdir)).to_json())
    except TaskFailed as exc:
        return {"error": str(exc)}
    if "setup_error" in reply:
        return {"error": str(reply["setup_error"])}
    if reply.get("could_not_verify"):
        return {"error": str(reply.get("reason"))}
    return timing_from_profile(target, reply)


def timing_from_profile(target: Any, profile: dict[str, Any]) -> dict[str, Any]:
    """The dispatch timing the pipeline reads (``LaunchTiming.to_json()`` keys) from a profile reply: the
    harness's time outside the kernel is an overhead item, so the kernel's share is its share of the harness."""
    from ..measure.traffic import LaunchArg, LaunchTraffic

    kernel_ms = float(profile.get("kernel_ms") or 0.0) * max(1, int(profile.get("launches_per_call") or 1))
    harness_ms = float(profile.get("harness_ms") or 0.0)
    rest = max(0.0, harness_ms - kernel_ms)
    traffic = LaunchTraffic(order=0, kernel=target.kernel,
                            args=[LaunchArg.from_json(a) for a in profile.get("launch_args") or []])
    overheads = []
    if rest > 0:
        overheads.append({"name": "harness", "time_ms": rest, "share": rest / harness_ms if harness_ms else 0.0,
                          "detail": "the harness's time outside this kernel (the wrapper, allocations, other ops)",
                          "suggestion": ""})
    return {"launch_times_ms": {"0": kernel_ms}, "overheads": overheads, "path": "harness",
            "launch_traffic": [traffic.to_json()], "total_ms": harness_ms, "share_basis_ms": harness_ms,
            "share_note": profile.get("share_note")}


def profile(target: Any, sections: tuple[str, ...], cancel: threading.Event | None) -> dict[str, Any]:
    """ncu's metrics of the kernel, running the harness (on a GPU)."""
    from ..measure.ncu import NcuError
    from .ncu_run import profile_user_kernel_ncu

    try:
        metrics = profile_user_kernel_ncu(target, sections=sections, cancel=cancel)
    except (NcuError, OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"metrics": metrics.to_json() if metrics else None, "notes": []}


def time_candidate(target: Any, call: TaskCaller, source: str, rounds: int | None, workdir: str) -> dict[str, Any]:
    """Kernel-alone A/B of a candidate against the original, each in its own process."""
    from .dialect import candidate_configs
    from .payload import UserTimingRequest

    user = target.payload(candidate=source, candidate_configs=candidate_configs(source, target.kernel),
                          workdir=_root(workdir))
    try:
        value = call(f"{TASKS}:time_user_candidate", UserTimingRequest(user, rounds).to_json())
    except TaskFailed as exc:
        return {"error": str(exc)}
    if "error" in value or "setup_error" in value:
        return {"error": str(value.get("error") or value.get("setup_error"))}
    return value


__all__ = ["TASKS", "launch_timing", "profile", "time_candidate", "timing_from_profile"]
