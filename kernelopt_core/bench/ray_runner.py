"""Run a campaign on a Ray cluster: one task per problem, each task resumable.

A task asks for one GPU (``num_gpus=1``; Ray pins it through ``CUDA_VISIBLE_DEVICES``) or, on a
CPU-only cluster, one CPU. It skips its problem when the problem's result file already exists
(a retried or resumed task does not run twice), else runs the problem in its own subprocess
exactly as a local slot does, writes the result file and returns the result, which the driver
writes into its own output folder too (clusters without a shared file system still gather
everything). Ray is optional: without it ``--ray`` says how to install it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..events import EventSink
from .config import CampaignConfig
from .problem_process import PACKAGE_ROOT, Slot, run_problem_process
from .results import ProblemResult, load_result
from .suite import ProblemSpec

INSTALL_HINT = "pip install 'kernelopt[ray]' (ray>=2.9)"


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


def run_problem_task(spec_json: dict[str, Any], config_json: dict[str, Any], out_dir: str,
                     device: str) -> dict[str, Any]:
    """The body of one Ray task (runs on a Ray worker)."""
    spec = ProblemSpec.from_json(spec_json)
    config = CampaignConfig.from_json(config_json)
    host = socket.gethostname()
    finished = load_result(out_dir, spec.name)
    if finished is not None:
        return {"result": finished.to_json(), "skipped": True, "node": host}
    if device == "cuda":
        pinned = os.environ.get("CUDA_VISIBLE_DEVICES", "")  # Ray set it to this task's GPU
        slot = Slot("cuda:0", None, f"{host}:gpu{pinned}")
    else:
        slot = Slot("cpu", None, f"{host}:cpu")
    result = run_problem_process(spec, config, out_dir, slot, EventSink())
    return {"result": result.to_json(), "skipped": False, "node": host}


def connect(address: str, config: CampaignConfig) -> tuple[Any, bool]:
    """(ray module, whether we started it); ``address`` is "local" or a cluster address."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)}}
    try:
        if address == "local":
            ray.init(num_cpus=config.workers if config.workers > 1 else None, include_dashboard=False,
                     log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
    except Exception as exc:  # noqa: BLE001 - say which cluster could not be reached
        raise RayUnavailable(f"cannot start or reach the Ray cluster {address!r}: {type(exc).__name__}: {exc}") from exc
    return ray, True


def cluster_device(ray: Any, config: CampaignConfig) -> str:
    if config.device.startswith("cuda"):
        return "cuda"
    if config.device == "cpu":
        return "cpu"
    return "cuda" if ray.cluster_resources().get("GPU", 0) >= 1 else "cpu"


def run_on_ray(problems: Sequence[ProblemSpec], config: CampaignConfig, out_dir: str, sink: EventSink,
               on_result: Callable[[ProblemResult], None],
               deadline: float | None = None) -> tuple[list[ProblemResult], list[str], str]:
    """Submit one task per problem; returns (results, names not reached, device kind)."""
    ray, started_here = connect(config.ray_address or "local", config)
    try:
        device = cluster_device(ray, config)
        resources: dict[str, Any] = {"num_gpus": 1} if device == "cuda" else {"num_cpus": 1}
        task = ray.remote(max_retries=1, **resources)(run_problem_task)
        out_dir = os.path.abspath(out_dir)
        futures = {task.remote(p.to_json(), config.to_json(), out_dir, device): p for p in problems}
        sink.progress(f"submitted {len(futures)} Ray task(s) ({resources})", stage="campaign")
        results: list[ProblemResult] = []
        not_reached: list[str] = []
        waiting = list(futures)
        while waiting:
            if sink.cancelled or (deadline is not None and time.monotonic() >= deadline):
                for future in waiting:
                    ray.cancel(future, force=True)
                    not_reached.append(futures[future].name)
                break
            done, waiting = ray.wait(waiting, num_returns=1, timeout=1.0)
            for future in done:
                spec = futures[future]
                try:
                    answer = ray.get(future)
                    result = ProblemResult.from_json(answer["result"])
                    note = "resumed: the Ray task found this result already written"
                    if answer.get("skipped") and note not in result.notes:
                        result.notes.append(note)
                except Exception as exc:  # noqa: BLE001 - a lost task is an error result, the campaign goes on
                    result = ProblemResult(name=spec.name, level=spec.level, path=spec.path, outcome="error",
                                           category="crash", reason=f"the Ray task failed: {type(exc).__name__}: {exc}",
                                           device=device, dtype=config.dtype)
                results.append(result)
                on_result(result)
        return results, not_reached, device
    finally:
        if started_here:
            ray.shutdown()
