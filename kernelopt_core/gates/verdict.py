"""What the gates say: one verdict per gate, and the cascade's decision. Pure data, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..measure.task_context import RECYCLE_KEY

GATE2_BATTERIES: tuple[str, ...] = ("screen", "full")


@dataclass
class GateVerdict:
    gate: int  # 1..4
    name: str  # "static", "kernel", "model", "perf"
    passed: bool
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    # The check itself failed (out of memory, its process could not start): no verdict on the
    # candidate. Never counted as a rejection, never learnt from as the candidate's fault.
    could_not_verify: bool = False

    @property
    def status(self) -> str:
        return "passed" if self.passed else ("could not verify" if self.could_not_verify else "rejected")

    # --- the numbers the cascade reads, typed (every other number is the gate's own record) -------------

    @property
    def oom(self) -> bool:
        """The check ran out of memory (a smaller check may fit)."""
        return bool(self.numbers.get("oom"))

    @property
    def violation(self) -> bool:
        """The candidate tried what its process may not do (a file, a socket), here or in gate 1's compile."""
        compile_numbers = self.numbers.get("compile")
        return bool(self.numbers.get("violation") or
                    (isinstance(compile_numbers, dict) and compile_numbers.get("violation")))

    @property
    def containment(self) -> dict[str, Any] | None:
        """The candidate's process: pid, and what held (filesystem, network)."""
        found = self.numbers.get("containment")
        return found if isinstance(found, dict) else None

    @property
    def sanitizer_note(self) -> str | None:
        note = self.numbers.get("sanitizer_note")
        return note if isinstance(note, str) else None

    @property
    def speed(self) -> Speed:
        """Gate 4's end-to-end speedup, its interval and path, and the kernels' own speedups."""
        numbers = self.numbers
        measured = numbers.get("speedup") is not None
        return Speed(speedup=float(numbers["speedup"]) if measured else None,
                     ci=(float(numbers["ci_low"]), float(numbers["ci_high"])) if measured else None,
                     timing_path=numbers.get("timing_path") if measured else None,
                     kernel_speedups={str(k): float(v) for k, v in (numbers.get("kernel_speedups") or {}).items()})

    def to_json(self) -> dict[str, Any]:
        # The numbers sit beside the fixed keys (the documented --json shape); a number never
        # overwrites one of them.
        fixed = ("gate", "name", "passed", "reason", "seconds", "could_not_verify", "status")
        data: dict[str, Any] = {k: v for k, v in self.numbers.items() if k not in fixed}
        data.update({"gate": self.gate, "name": self.name, "passed": self.passed, "reason": self.reason,
                     "seconds": round(self.seconds, 4), "could_not_verify": self.could_not_verify,
                     "status": self.status})
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GateVerdict:
        fixed = ("gate", "name", "passed", "reason", "seconds", "could_not_verify", "status")
        return cls(gate=int(data["gate"]), name=str(data.get("name", "")),
                   passed=bool(data["passed"]), reason=str(data.get("reason", "")),
                   numbers={k: v for k, v in data.items() if k not in fixed},
                   seconds=float(data.get("seconds", 0.0)), could_not_verify=bool(data.get("could_not_verify")))


@dataclass(frozen=True)
class Speed:
    speedup: float | None
    ci: tuple[float, float] | None
    timing_path: str | None
    kernel_speedups: dict[str, float]


@dataclass
class TaskReply:
    """A gate task's reply: typed on both sides, JSON only across the process boundary (:meth:`to_json`).

    On the wire: ``{"passed", "reason", "numbers"}``, with ``"could_not_verify": true`` when the check itself
    failed, ``"not_verified": true`` when every run matched but a path the candidate adds was never taken, and
    ``"recycle_worker"`` when the job left memory only the worker's end gives back; or ``{"setup_error"}``
    alone when the original cannot be loaded or run.
    """

    passed: bool
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)
    could_not_verify: bool = False  # the check itself failed
    setup_error: str | None = None  # the original cannot be loaded or run: the cascade cannot go on
    not_verified: bool = False  # could not verify because evidence was missing (not because the check broke)
    recycle: str | None = None  # why the worker should be replaced after this job (the verdict stands)

    @classmethod
    def verdict(cls, passed: bool, reason: str, **numbers: Any) -> TaskReply:
        return cls(passed, reason, numbers)

    @classmethod
    def unverified(cls, reason: str, **numbers: Any) -> TaskReply:
        """The check itself failed: neither a pass nor a rejection of the candidate."""
        return cls(False, reason, numbers, could_not_verify=True)

    @classmethod
    def setup_failure(cls, message: str) -> TaskReply:
        return cls(False, "", {}, setup_error=message)

    def to_json(self) -> dict[str, Any]:
        if self.setup_error is not None:
            return {"setup_error": self.setup_error}
        data: dict[str, Any] = {"passed": self.passed, "reason": self.reason, "numbers": self.numbers}
        if self.could_not_verify:
            data["could_not_verify"] = True
        if self.not_verified:
            data["not_verified"] = True
        if self.recycle:
            data[RECYCLE_KEY] = self.recycle
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskReply:
        setup_error = data.get("setup_error")
        recycle = data.get(RECYCLE_KEY)
        return cls(passed=bool(data.get("passed")), reason=str(data.get("reason", "")),
                   numbers=dict(data.get("numbers") or {}), could_not_verify=bool(data.get("could_not_verify")),
                   setup_error=str(setup_error) if setup_error is not None else None,
                   not_verified=bool(data.get("not_verified")), recycle=str(recycle) if recycle else None)

    def to_verdict(self, gate: int, name: str, seconds: float) -> GateVerdict:
        return GateVerdict(gate, name, self.passed, self.reason, self.numbers, seconds,
                           could_not_verify=self.could_not_verify)


@dataclass
class CascadeConfig:
    device: str = "auto"
    seeds_kernel: tuple[int, ...] = (0, 42, 1337)
    seeds_model: tuple[int, ...] = (0, 42, 123)
    min_speedup: float = 1.03
    ab_rounds: int | None = None  # None: the device's timing effort (measure.timing)
    run_gates: tuple[int, ...] = (1, 2, 3, 4)  # every gate of registry.GATES (a test holds them equal)
    workdir: str | None = None  # where re-stitched graphs go; a temporary folder when None
    model_tolerance: float = 1e-4  # gate 3: atol = rtol
    determinism_reruns: int = 2  # gate 2: extra runs of the candidate on the same inputs
    job_timeout_s: float = 600.0
    compile_timeout_s: float = 300.0
    kernel_timing: bool = True  # gate 4: also time the kernel alone (reported, never decides)
    low_memory: bool = False  # a smaller check: one captured launch, argument values on the host
    retry_low_memory: bool = True  # a gate that runs out of memory is retried once with low_memory
    input_sets: bool = True  # gates 2-3 also run the input sets (NaN/Inf, zeros, constant rows, ...)
    # Gate 2's battery: "full" (captured launches, every seed, stale outputs, re-runs, input sets, the
    # error structure and its sensitivity run, guards) or "screen" (the first captured launch and the first
    # seed: the search's ranking screen). A cascade that goes on past gate 2 always runs the full battery.
    gate2_battery: str = "full"
    # Keep the candidate's process after the cascade, for a kernel timing of the same candidate that
    # follows at once (the search's screen); the next candidate's cascade closes it either way.
    keep_candidate: bool = False
    # Keep a spare candidate process ready for the next candidate (the search's screens, one after another):
    # gate 2 takes it and starts the next at once; off, each candidate's process is started when it is needed.
    spare_candidate: bool = False
    sanitize: bool = True  # on a GPU, gate 3 runs compute-sanitizer on the candidate's captured launch
    # each sanitizer tool's limit: one that does not finish is a note in the verdict, never a pass (the
    # search sets it from the time its budget leaves, so a finalist's sanitizers cannot take the run over)
    sanitizer_timeout_s: float = 600.0
    # Gate 2's full battery: how long it may keep drawing inputs for an outcome of an added decision not yet
    # seen (docs/gates.md, "Acceptance by evidence"); candidates that add no decisions never search.
    decision_search_s: float = 30.0
    # gate 1's compile numbers per kernel when gate 1 ran earlier (a finalist's screen): the sanitizer runs
    # racecheck only on kernels whose compile uses shared memory; unknown counts as used
    compiled: dict[str, Any] | None = None
    # Gates this candidate passed before this cascade (a finalist's screen's): an acceptance names them
    # instead of calling them "not run".
    passed_earlier: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device, "seeds_kernel": list(self.seeds_kernel), "seeds_model": list(self.seeds_model),
            "min_speedup": self.min_speedup, "ab_rounds": self.ab_rounds, "run_gates": list(self.run_gates),
            "workdir": self.workdir, "model_tolerance": self.model_tolerance,
            "determinism_reruns": self.determinism_reruns, "low_memory": self.low_memory,
            "input_sets": self.input_sets, "gate2_battery": self.gate2_battery,
        }


@dataclass
class CascadeResult:
    accepted: bool
    failed_gate: int | None
    reason: str
    gates: list[GateVerdict] = field(default_factory=list)
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    timing_path: str | None = None
    kernel_speedups: dict[str, float] = field(default_factory=dict)
    restitched_path: str | None = None  # the re-stitched output_code.py written for this candidate
    diff: str | None = None  # unified diff against the original output_code.py
    graph_path: str | None = None
    kernels: list[str] = field(default_factory=list)
    device: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    could_not_verify: bool = False  # a gate's own check failed: neither accepted nor rejected
    containment: dict[str, Any] | None = None  # the candidate's process: pid, what held
    quarantined: bool = False  # the candidate tried what its process may not do (a file, a socket)

    @property
    def decision(self) -> str:
        if self.accepted:
            return "accepted"
        return "could-not-verify" if self.could_not_verify else "fallback"

    def verdict(self, gate: int) -> GateVerdict | None:
        return next((v for v in self.gates if v.gate == gate), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "decision": self.decision,
            "failed_gate": self.failed_gate,
            "reason": self.reason,
            "gates": [v.to_json() for v in self.gates],
            "speedup": self.speedup,
            "ci": list(self.ci) if self.ci is not None else None,
            "timing_path": self.timing_path,
            "kernel_speedups": dict(self.kernel_speedups),
            "restitched_path": self.restitched_path,
            "diff": self.diff,
            "graph_path": self.graph_path,
            "kernels": list(self.kernels),
            "device": self.device,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
            "could_not_verify": self.could_not_verify,
            "containment": self.containment,
            "quarantined": self.quarantined,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CascadeResult:
        ci = data.get("ci")
        return cls(
            accepted=bool(data["accepted"]), failed_gate=data.get("failed_gate"), reason=str(data.get("reason", "")),
            gates=[GateVerdict.from_json(v) for v in data.get("gates", [])],
            speedup=data.get("speedup"), ci=(float(ci[0]), float(ci[1])) if ci else None,
            timing_path=data.get("timing_path"), kernel_speedups=dict(data.get("kernel_speedups") or {}),
            restitched_path=data.get("restitched_path"), diff=data.get("diff"),
            graph_path=data.get("graph_path"), kernels=list(data.get("kernels") or []),
            device=data.get("device"), seconds=float(data.get("seconds", 0.0)),
            notes=list(data.get("notes") or []), could_not_verify=bool(data.get("could_not_verify")),
            containment=data.get("containment"), quarantined=bool(data.get("quarantined")),
        )
