"""The cascade's view of a user's kernel (:class:`UserKernelGates`): the same four gates, in the same
order, with the same verdicts as a dump's kernels (:func:`kernelopt_core.gates.cascade.run_cascade`).

What differs is only what a user's kernel supplies:

1. static: the user-kernel dialect (:mod:`.dialect`) and the compile for sm_90, on the launch plan
   the worker captured from the harness;
2-4. the worker tasks of :mod:`.tasks`: the candidate against the original on the captured launch;
   the harness with the candidate (compute-sanitizer first, on a GPU) against the original's output;
   the harness timed on each side.

The user's file is never written: the result carries the unified diff of the file with the
candidate in place. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Protocol

from ..events import EventSink
from ..gates.cascade import CascadeSetupError, TaskCaller, run_cascade
from ..gates.verdict import CascadeConfig, CascadeResult, GateVerdict
from .dialect import candidate_configs, run_user_static_gate
from .measurements import TASKS
from .payload import UserKernelPayload


class UserKernelTarget(Protocol):
    """What the cascade reads of :class:`.target.UserKernelTarget` (which makes the cascade's view itself)."""

    file: str
    kernel: str
    device: str
    module: Any

    @property
    def name(self) -> str: ...

    def payload(self, *, candidate: str | None = None, candidate_configs: list[dict[str, Any]] | None = None,
                workdir: str | None = None) -> UserKernelPayload: ...

    def diff(self, candidate: str, text: str | None = None) -> str | None: ...


def facts(target: UserKernelTarget, call: TaskCaller, workdir: str) -> dict[str, Any]:
    """The captured launches of the target (raises CascadeSetupError when the harness cannot run)."""
    reply = call(f"{TASKS}:user_kernel_facts", target.payload(workdir=workdir).to_json())
    if "setup_error" in reply:
        raise CascadeSetupError(str(reply["setup_error"]))
    return reply


def _default_root() -> str:
    return os.path.join(tempfile.gettempdir(), f"kernelopt-verify-{os.getuid()}")


class UserKernelGates:
    """A user's kernel as the cascade verifies it: one candidate kernel module, run through its harness."""

    tasks = TASKS
    retry_low_memory = False  # its tasks have no smaller check
    static_gate_uses_worker = True  # gate 1 checks the candidate against the launch plan the worker captured
    gate2_screen = False  # its gate 2 runs every check on the one captured launch, in the screen too

    def __init__(self, target: UserKernelTarget, plan: dict[str, Any] | None = None):
        self.target = target
        self.plan = plan
        self.root = _default_root()  # the tasks' work folder: the configuration's, once a candidate is written

    @property
    def path(self) -> str:
        return self.target.file

    def check(self, candidates: dict[str, str]) -> None:
        if set(candidates) != {self.target.kernel}:
            raise CascadeSetupError(f"a user-kernel cascade verifies {self.target.kernel} alone, not "
                                    f"{', '.join(sorted(candidates)) or 'nothing'}")

    def resolve_device(self, requested: str, gates: tuple[int, ...]) -> str:
        return self.target.device  # the target resolved it

    def _candidate(self, candidates: dict[str, str]) -> str:
        return candidates[self.target.kernel]

    def _workdir(self, candidate: str) -> str:
        digest = hashlib.sha256(f"{self.target.file}\0{self.target.kernel}\0{candidate}".encode()).hexdigest()[:12]
        return os.path.join(self.root, f"{self.target.name}-{digest}")

    def write_candidate(self, candidates: dict[str, str], config: CascadeConfig,
                        result: CascadeResult) -> str | None:
        """The candidate module in a work folder, and the diff of the user's file with it in place."""
        target, candidate = self.target, self._candidate(candidates)
        self.root = config.workdir or _default_root()
        diff = target.diff(candidate)
        result.diff = diff or None
        if diff == "":
            result.notes.append(f"the candidate's {target.kernel} is the one in {os.path.basename(target.file)}: "
                                "no change, no diff")
        elif diff is None:
            result.notes.append("the candidate cannot be put into the file as a diff (see gate 1)")
        workdir = self._workdir(candidate)
        candidate_file = os.path.join(workdir, f"{target.kernel}.py")
        try:
            os.makedirs(workdir, exist_ok=True)
            with open(candidate_file, "w", encoding="utf-8") as handle:
                handle.write(candidate)
        except (OSError, UnicodeError) as exc:
            result.notes.append(f"the candidate could not be written to {candidate_file}: {exc}")
            return None
        result.restitched_path = candidate_file
        return candidate_file

    def prepare(self, call: TaskCaller | None, config: CascadeConfig) -> None:
        """The launch plan the harness makes (once): gate 1 checks the candidate against it."""
        if self.plan is None:
            assert call is not None
            self.plan = facts(self.target, call, self.root).get("plan")

    def static_gate(self, candidates: dict[str, str],
                    config: CascadeConfig) -> tuple[GateVerdict, dict[str, Any] | None]:
        verdict = run_user_static_gate(self.target.module.source, self.target.kernel, self._candidate(candidates),
                                       self.plan, config.compile_timeout_s, device=self.target.device)
        compiled = verdict.numbers.get("compile")
        return verdict, compiled if isinstance(compiled, dict) else None

    def gate_payload(self, candidates: dict[str, str], written: str | None, device: str) -> UserKernelPayload:
        candidate = self._candidate(candidates)
        return self.target.payload(candidate=candidate, candidate_configs=candidate_configs(candidate, self.target.kernel),
                                   workdir=self.root)


def run_user_cascade(target: UserKernelTarget, candidate: str, config: CascadeConfig | None = None,
                     sink: EventSink | None = None, worker: Any = None, *, call: TaskCaller | None = None,
                     plan: dict[str, Any] | None = None) -> CascadeResult:
    """Gates ``config.run_gates`` in order on one candidate kernel module of ``target``."""
    return run_cascade(UserKernelGates(target, plan), {target.kernel: candidate}, config, sink, worker, call=call)


__all__ = ["TASKS", "UserKernelGates", "facts", "run_user_cascade"]
