"""One user kernel to profile, optimize or verify: its file, its harness and its kernel module.

:func:`user_target` resolves what the CLI and the language server are given (a ``.py`` file,
``--kernel``, ``--harness`` or a ``# kernelopt: harness=`` comment, ``--device``) into a
:class:`UserKernelTarget`: the parsed kernel, the harness spec, the extracted kernel module and
the device. The target also speaks the optimizer's language: :meth:`graph` is the
:class:`~kernelopt_core.artifacts.model.CompiledGraph` view the search pipeline reads (one
kernel, one launch), :meth:`rewrite` puts accepted kernels into the user's file text, and the
search's evaluator gates it through :meth:`gates` and measures it through :mod:`.measurements`.
Nothing here imports torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

from ..artifacts.model import CompiledGraph, Launch, TritonKernel, source_hash
from .extract import (
    ApplyError,
    ExtractError,
    KernelModule,
    apply_candidate,
    extract_kernel_module,
    unified_file_diff,
)
from .harness import HarnessError, HarnessSpec, harness_advice, resolve_spec
from .model import UserKernel
from .parse import UserKernelError, looks_like_user_kernels, parse_user_kernels, read_user_file
from .payload import UserKernelPayload

CONTRACT_PROMPT = "user_kernel_contract.md"


class TargetError(ValueError):
    """What was asked cannot be a user-kernel target; the message says why and what to do."""


def is_user_kernel_file(path: str) -> bool:
    """A ``.py`` file that defines its own Triton kernels (and is not an Inductor dump)."""
    if not (path.endswith(".py") and os.path.isfile(path)) or os.path.basename(path) == "output_code.py":
        return False
    try:
        return looks_like_user_kernels(read_user_file(path))
    except UserKernelError:
        return False


def resolve_device(requested: str | None) -> str:
    """``auto`` is the first GPU when nvidia-smi sees one, else the CPU (Triton's interpreter)."""
    wanted = (requested or "auto").strip().lower()
    if wanted == "auto":
        return "cuda:0" if _has_gpu() else "cpu"
    if wanted == "cuda":
        return "cuda:0"
    if wanted == "cpu" or (wanted.startswith("cuda:") and wanted[5:].isdigit()):
        return wanted
    raise TargetError(f"unknown device {requested!r}: use auto, cpu, cuda or cuda:N")


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "GPU" in done.stdout


@dataclass
class UserKernelTarget:
    """A user's kernel as the search's target (:class:`kernelopt_core.search.target.Target`)."""

    users_own: ClassVar[bool] = True
    compile_probes: ClassVar[bool] = False
    times_kernel_in_gate4: ClassVar[bool] = True
    cascade_timeout_s: ClassVar[float | None] = 900.0

    file: str
    kernel: str
    harness: HarnessSpec
    device: str
    module: KernelModule
    parsed: UserKernel
    text: str

    @property
    def device_kind(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"

    @property
    def name(self) -> str:
        return f"{os.path.splitext(os.path.basename(self.file))[0]}.{self.kernel}"

    def payload(self, *, candidate: str | None = None, candidate_configs: list[dict[str, Any]] | None = None,
                workdir: str | None = None) -> UserKernelPayload:
        """What every worker task of :mod:`.tasks` reads about this kernel (and a candidate of it)."""
        return UserKernelPayload(file=self.file, kernel=self.kernel, harness=self.harness.to_json(),
                                 module=self.module.source, device=self.device,
                                 loaded=tuple(sorted(self.parsed.loaded_params())),
                                 atomics=any(a.kind == "atomic" for a in self.parsed.accesses), candidate=candidate,
                                 candidate_configs=tuple(candidate_configs or ()), workdir=workdir)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "kernel": self.kernel, "harness": self.harness.to_json(), "device": self.device}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserKernelTarget:
        return user_target(data["file"], data["kernel"], harness_spec=HarnessSpec.from_json(data["harness"]),
                           device=data.get("device"))

    # --- the optimizer's view ----------------------------------------------------------------------

    def graph(self) -> CompiledGraph:
        """The search pipeline's view: one kernel whose source is the kernel module, one launch."""
        kernel = TritonKernel(
            name=self.kernel, kind="other", source=self.module.source, name_range=self.parsed.name_range,
            statement_range=self.parsed.statement_range, source_start_line=self.parsed.statement_range.start_line,
            def_line=self.parsed.def_line, heuristic="user", signature=list(self.parsed.params),
            device_str=self.device_kind,
        )
        launch = Launch(order=0, kernel=self.kernel, style="grid", args=[], kwargs={}, int_args=[], grid=None,
                        stream=None, line=self.parsed.def_line, function=self.harness.describe())
        return CompiledGraph(path=self.file, name=self.name, text_hash=source_hash(self.text), wrapper_style="unknown",
                             device=self.device_kind, kernels=[kernel], launches=[launch])

    # --- the user's words for the optimizer's steps (a harness and a kernel, not a graph) -----------

    def timing_step(self) -> str:
        return (f"timing {self.kernel} alone and the harness {self.harness.describe()} (the first measurement "
                "also starts the worker)")

    def dispatch_evidence(self, report: Any, timing: dict[str, Any] | None) -> str:
        """What dispatch found, said of the kernel and its harness (``report``: a DispatchReport)."""
        note = (timing or {}).get("share_note")
        if note:
            return str(note)
        if not report.timed:
            return f"{self.kernel} was not timed (no share of the harness call)"
        share = report.share_of(self.kernel)
        return (f"{self.kernel} is {share:.0%} of a harness call ({self.harness.describe()}); the harness's own "
                f"work outside it is {1 - share:.0%}")

    def rewrite(self, text: str, sources: dict[str, str]) -> str:
        """The file ``text`` with the accepted kernel module(s) put in (raises ApplyError)."""
        for name, source in sources.items():
            text = apply_candidate(text, name, source, self.file)
        return text

    def diff(self, candidate: str, text: str | None = None) -> str | None:
        """The unified diff of the file with ``candidate`` in place: "" when that changes nothing, None
        when the candidate cannot be put into the file."""
        current = self.text if text is None else text
        try:
            new = apply_candidate(current, self.kernel, candidate, self.file)
        except ApplyError:
            return None
        return unified_file_diff(current, new, _label(self.file))

    @property
    def contract_prompt(self) -> str:
        return CONTRACT_PROMPT

    def resume_record(self) -> dict[str, Any] | None:
        return self.to_json()

    def rewritten_name(self) -> str:
        return os.path.basename(self.file)

    # --- measured through the search's evaluator, in the worker of its device ----------------------

    def device_for(self, requested: str) -> str:
        return self.device  # resolved with the target

    def gates(self) -> Any:
        """The cascade's view (:class:`.cascade.UserKernelGates`); it keeps the launch plan once captured."""
        from .cascade import UserKernelGates

        return UserKernelGates(self)

    def facts(self, call: Any, device: str, kernels: list[str], rounds: int | None) -> dict[str, Any]:
        return {"kernels": {name: {"configs": []} for name in kernels}}  # no autotuner configs to read

    def launch_timing(self, call: Any, worker: Any, device: str, workdir: str) -> dict[str, Any] | None:
        from .measurements import launch_timing

        return launch_timing(self, call, workdir)

    def profile(self, kernel: str, sections: tuple[str, ...], device: str, cancel: threading.Event | None,
                together: tuple[str, ...] = ()) -> dict[str, Any] | None:
        from .measurements import profile  # one kernel: nothing to profile together

        return profile(self, sections, cancel)

    def time_candidate(self, call: Any, device: str, kernel: str, source: str, written: str | None,
                       rounds: int | None, workdir: str) -> dict[str, Any]:
        from .measurements import time_candidate

        return time_candidate(self, call, source, rounds, workdir)


def _label(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path.lstrip("/")
    return path.lstrip("/") if relative.startswith("..") else relative


def user_target(path: str, kernel: str | None = None, harness: str | None = None, device: str | None = "auto",
                *, harness_spec: HarnessSpec | None = None, cwd: str | None = None) -> UserKernelTarget:
    """Resolve a user kernel target; raises :class:`TargetError` with what to do."""
    path = os.path.abspath(path)
    try:
        text = read_user_file(path)
        parsed = parse_user_kernels(path, text)
    except UserKernelError as exc:
        raise TargetError(str(exc)) from None
    if not parsed.kernels:
        raise TargetError(f"{path} defines no @triton.jit kernel")
    if kernel is None:
        if len(parsed.kernels) > 1:
            raise TargetError(f"{path} defines {len(parsed.kernels)} kernels "
                              f"({', '.join(k.name for k in parsed.kernels)}): pick one with --kernel")
        kernel = parsed.kernels[0].name
    found = parsed.kernel(kernel)
    if found is None:
        helper = parsed.function(kernel)
        if helper is not None:
            raise TargetError(f"{kernel} is a @triton.jit helper only other kernels call; optimize the kernel that "
                              f"calls it ({', '.join(k.name for k in parsed.kernels if kernel in k.helpers)})")
        raise TargetError(f"{path} has no @triton.jit kernel named {kernel} "
                          f"(kernels: {', '.join(k.name for k in parsed.kernels)})")
    if harness_spec is None:
        text_spec = harness or parsed.harness_for(kernel)
        if not text_spec:
            raise TargetError(f"no harness for {kernel}: {harness_advice(parsed, kernel)}")
        try:
            harness_spec = resolve_spec(text_spec, path, cwd)
        except HarnessError as exc:
            raise TargetError(str(exc)) from None
        if harness_spec.kind != "problem" and harness_spec.file == path and \
                harness_spec.name not in parsed.harness_functions:
            raise TargetError(f"harness {harness_spec.name}: {os.path.basename(path)} has no zero-argument function "
                              f"of that name (found: {', '.join(parsed.harness_functions) or 'none'})")
    try:
        module = extract_kernel_module(text, kernel, path, found.caller_passed())
    except ExtractError as exc:
        raise TargetError(f"{kernel} cannot be optimized on its own: {exc}") from None
    return UserKernelTarget(file=path, kernel=kernel, harness=harness_spec, device=resolve_device(device),
                            module=module, parsed=found, text=text)


__all__ = ["TargetError", "UserKernelTarget", "is_user_kernel_file", "resolve_device", "user_target"]
