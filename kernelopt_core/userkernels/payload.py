"""What a user kernel's worker tasks read about the kernel and its candidate, typed on both sides.

:meth:`.target.UserKernelTarget.payload` makes a :class:`UserKernelPayload`; it crosses to the
worker as JSON (:meth:`~UserKernelPayload.to_json`, the keys the tasks have always read) and the
tasks of :mod:`.tasks` read it back with :meth:`~UserKernelPayload.read`. A gate task's payload
is a :class:`kernelopt_core.gates.task_payload.GateRequest` of one. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..payload_fields import PayloadError, PayloadReader


@dataclass(frozen=True)
class UserKernelPayload:
    """A user's kernel, its harness and (for gates and timings) the candidate kernel module."""

    file: str  # the user's kernel file
    kernel: str
    harness: dict[str, Any]  # a HarnessSpec's JSON
    module: str  # the extracted kernel module's source (the original)
    device: str | None = None  # None: the worker's
    loaded: tuple[str, ...] = ()  # the parameters the kernel loads from (a written one is "inout")
    atomics: bool = False  # the original uses atomics (its outputs may differ run to run)
    candidate: str | None = None  # the candidate kernel module
    candidate_configs: tuple[dict[str, Any], ...] = ()  # its literal autotune configs
    workdir: str | None = None  # where the tasks write launchers, harness modules and candidates
    edited_file: str | None = None  # an edited copy of the file whose launch site alone differs

    @property
    def candidate_source(self) -> str:
        """The candidate kernel module (a gate task's payload must carry one)."""
        if self.candidate is None:
            raise PayloadError("the payload has no 'candidate' (the candidate kernel module)")
        return self.candidate

    def but(self, **changes: Any) -> UserKernelPayload:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "kernel": self.kernel, "harness": dict(self.harness),
                                "device": self.device, "module": self.module, "loaded": list(self.loaded),
                                "atomics": self.atomics}
        optional = {"candidate": self.candidate, "workdir": self.workdir, "edited_file": self.edited_file}
        data.update({key: value for key, value in optional.items() if value is not None})
        if self.candidate_configs or self.candidate is not None:
            data["candidate_configs"] = [dict(c) for c in self.candidate_configs]
        return data

    @classmethod
    def read(cls, fields: PayloadReader) -> UserKernelPayload:
        file, kernel, harness = fields.text("file"), fields.text("kernel"), fields.mapping("harness")
        if not isinstance(harness.get("file"), str):
            raise PayloadError(f"{fields.what}'s 'harness' names no file")
        return cls(file=file, kernel=kernel, harness=dict(harness),
                   module=fields.text("module"), device=fields.text("device", None),
                   loaded=fields.texts("loaded", ()), atomics=fields.flag("atomics", False),
                   candidate=fields.text("candidate", None),
                   candidate_configs=tuple(fields.records("candidate_configs", ())),
                   workdir=fields.text("workdir", None), edited_file=fields.text("edited_file", None))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserKernelPayload:
        return cls.read(PayloadReader(data, "the user kernel task's payload"))


@dataclass(frozen=True)
class UserTimingRequest:
    """A candidate's kernel-alone A/B for the search (its ranking; never a verdict)."""

    user: UserKernelPayload  # with the candidate
    rounds: int | None = None  # None: the device's timing budget

    def to_json(self) -> dict[str, Any]:
        return {**self.user.to_json(), "rounds": self.rounds}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserTimingRequest:
        fields = PayloadReader(data, "the user kernel timing's payload")
        return cls(UserKernelPayload.read(fields), fields.integer("rounds", None))


__all__ = ["UserKernelPayload", "UserTimingRequest"]
