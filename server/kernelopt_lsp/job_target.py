"""What a job works on, however the command named it (a kernel of a dump, or a project's own kernel)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelopt_core.artifacts.model import CompiledGraph


@dataclass(frozen=True)
class JobTarget:
    uri: str  # the document the command came from
    path: str  # the file the CLI reads (the dump, or the project's own .py)
    kernel: str
    graph: CompiledGraph  # what the job's results attach to: the dump, or the kernel file read as one
    kernel_hash: str  # the source the job works on: the on-disk kernel, or the edited one (verify)
    harness: str | None = None  # a project's own kernel: the harness the settings name
    user_kernel: bool = False
