"""The CLI invocations behind the server commands, and how a job's progress reads to the user.

``kernelopt optimize|profile|verify ... --events --json`` (the ``--events --json`` pair is added
by the job runner's argv builder).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kernelopt_core.job_runner import Job

from .settings import Settings

DEFAULT_API_KEY_ENV = "ANTHROPIC_API_KEY"


def _harness(harness: str | None) -> list[str]:
    """A project's own kernel: the harness the ``harnesses`` setting names (else the file's comment)."""
    return ["--harness", harness] if harness else []


def optimize_args(dump: str, kernel: str, settings: Settings, harness: str | None = None) -> list[str]:
    beam = settings.beam
    return ["optimize", dump, "--kernel", kernel, "--provider", settings.provider, "--model", settings.model,
            "--beam-width", str(beam.width), "--iterations", str(beam.iterations), "--plans", str(beam.plans),
            "--retries", str(beam.retries), "--device", settings.device, "--budget", f"{settings.budget:g}",
            *(["--allow-config-changes"] if settings.allow_config_changes else []), *_harness(harness)]


def profile_args(dump: str, kernel: str, settings: Settings, harness: str | None = None) -> list[str]:
    return ["profile", dump, "--kernel", kernel, "--device", settings.device, *_harness(harness)]


def verify_args(dump: str, kernel: str, candidate_file: str, settings: Settings, harness: str | None = None) -> \
        list[str]:
    return ["verify", dump, "--kernel", kernel, "--candidate", candidate_file, "--device", settings.device,
            *_harness(harness)]


def job_env(settings: Settings) -> dict[str, str]:
    """Settings the commands read from the environment.

    The provider reads ANTHROPIC_API_KEY: a key kept under another name is passed on under it.
    The ncu runner reads KERNELOPT_NCU (see kernelopt_core.measure.ncu.find_ncu).
    """
    env: dict[str, str] = {}
    if settings.api_key_env != DEFAULT_API_KEY_ENV and os.environ.get(settings.api_key_env):
        env[DEFAULT_API_KEY_ENV] = os.environ[settings.api_key_env]
    if settings.ncu_path != "ncu":
        env["KERNELOPT_NCU"] = settings.ncu_path
    return env


@dataclass
class JobLink:
    """What the server keeps about a job it started for a kernel."""

    job_id: str
    kind: str
    uri: str
    kernel: str
    graph_path: str
    kernel_hash: str  # the source the job works on: the on-disk kernel, or the edited one (verify)
    cwd: str
    kernel_hashes: dict[str, str] = field(default_factory=dict)  # every kernel of the dump at submit
    token: str | None = None  # the $/progress token, once the client accepted it
    temp_dir: str | None = None  # verify: where the candidate file was written
    run_id: str | None = None
    user_kernel: bool = False  # a project's own kernel (user_kernels.py), not a kernel of a dump


def progress_text(event: dict[str, Any], kernel: str = "") -> tuple[str, int | None]:
    """A progress line from a job event: iteration, candidate and gate level as the job reports them.
    The kernel's (long) name is dropped from the line: the progress title already names it."""
    message = str(event.get("message") or "")
    if kernel:
        message = message.replace(f"{kernel}: ", "").replace(kernel, "the kernel")
    iteration, iterations = event.get("iteration"), event.get("iterations")
    if isinstance(iteration, int) and isinstance(iterations, int) and "iteration" not in message.lower():
        message = f"iteration {iteration}/{iterations} · {message}" if message else f"iteration {iteration}/{iterations}"
    best = event.get("best_speedup")
    if isinstance(best, (int, float)) and "best" not in message.lower():
        message += f" · best {best:.2f}×"
    percentage = event.get("percentage")
    if isinstance(percentage, (int, float)) and not isinstance(percentage, bool):
        return message, max(0, min(100, int(percentage)))
    if isinstance(iteration, int) and isinstance(iterations, int) and iterations > 0:
        return message, max(0, min(100, int(100 * (iteration - 1) / iterations)))
    return message, None


def job_status(job: Job, link: JobLink, **extra: Any) -> dict[str, Any]:
    """The ``kernelopt/jobStatus`` notification (docs/lsp-contract.md); empty fields are left out."""
    event = job.last_event or {}
    payload: dict[str, Any] = {
        "jobId": job.id, "kind": link.kind, "state": job.state, "kernel": link.kernel, "uri": link.uri,
        "message": job.message, "iteration": event.get("iteration"), "iterations": event.get("iterations"),
        "bestSpeedup": event.get("best_speedup"), "runId": link.run_id,
    }
    payload.update(extra)
    return {k: v for k, v in payload.items() if v is not None and v != ""}
