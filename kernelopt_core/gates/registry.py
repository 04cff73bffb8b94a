"""The gates as objects, registered in one place (:data:`GATES`).

A gate is a class: its number and name, the worker task that runs it (in each target's task module;
gate 1 runs in the cascade's own process), the settings its task takes from the cascade's
configuration (a dataclass each), and what the cascade's result takes from its verdict. Adding a
gate means adding one class here; the cascade (:mod:`.cascade`) asks the registry for the rest.
The worker's tasks read their settings back with the same classes (``from_json``): a key left out
takes the configuration's default. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, ClassVar, Protocol

from ..payload_fields import PayloadReader
from .verdict import CascadeConfig, CascadeResult, GateVerdict

_DEFAULTS = CascadeConfig()  # what a task reads for a setting its payload leaves out (a task called directly)


def gate2_battery(config: CascadeConfig, gates: tuple[int, ...]) -> str:
    """The battery gate 2 runs: the configured one, but always the full battery when the cascade goes on to
    gate 3 or 4 (no candidate reaches acceptance on the screen alone)."""
    return config.gate2_battery if max(gates) <= 2 else "full"


@dataclass(frozen=True)
class CommonSettings:
    """What every gate task takes from the configuration."""

    low_memory: bool  # a smaller check: one captured launch, argument values on the host
    input_sets: bool  # the input sets (NaN/Inf, zeros, constant rows, ...)
    sanitize: bool  # compute-sanitizer on a GPU (gate 3)
    sanitizer_timeout_s: float
    run_timeout_s: float  # a hung candidate is the candidate process's to lose, inside the task's time

    @classmethod
    def of(cls, config: CascadeConfig) -> CommonSettings:
        return cls(low_memory=config.low_memory, input_sets=config.input_sets, sanitize=config.sanitize,
                   sanitizer_timeout_s=config.sanitizer_timeout_s, run_timeout_s=max(1.0, 0.8 * config.job_timeout_s))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, fields: PayloadReader) -> CommonSettings:
        return cls(low_memory=fields.flag("low_memory", _DEFAULTS.low_memory),
                   input_sets=fields.flag("input_sets", _DEFAULTS.input_sets),
                   sanitize=fields.flag("sanitize", _DEFAULTS.sanitize),
                   sanitizer_timeout_s=fields.number("sanitizer_timeout_s", _DEFAULTS.sanitizer_timeout_s),
                   run_timeout_s=fields.number("run_timeout_s", max(1.0, 0.8 * _DEFAULTS.job_timeout_s)))


class GateSettings(Protocol):
    """A gate's own settings: what its task takes from the configuration, and reads back (a dataclass)."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class KernelSettings:
    seeds: list[int]
    reruns: int  # extra runs of the candidate on the same inputs
    battery: str  # "screen" or "full"
    spare: bool  # keep a spare process ready for the next candidate
    sanitize_ahead: bool = False  # gate 3 follows: its sanitizer may start beside this battery
    decision_search_s: float = 30.0  # the search for outcomes of added decisions not yet seen

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> KernelSettings:
        fields = PayloadReader(payload, "gate 2's settings")
        return cls(seeds=list(fields.integers("seeds", _DEFAULTS.seeds_kernel)),
                   reruns=fields.integer("reruns", _DEFAULTS.determinism_reruns),
                   battery=fields.text("battery", _DEFAULTS.gate2_battery) or _DEFAULTS.gate2_battery,
                   spare=fields.flag("spare", False), sanitize_ahead=fields.flag("sanitize_ahead", False),
                   decision_search_s=fields.number("decision_search_s", _DEFAULTS.decision_search_s))


@dataclass(frozen=True)
class ModelSettings:
    seeds: list[int]
    tolerance: float  # atol = rtol

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> ModelSettings:
        fields = PayloadReader(payload, "gate 3's settings")
        return cls(seeds=list(fields.integers("seeds", _DEFAULTS.seeds_model)),
                   tolerance=fields.number("tolerance", _DEFAULTS.model_tolerance))


@dataclass(frozen=True)
class PerfSettings:
    min_speedup: float
    rounds: int | None  # None: the device's timing effort (measure.timing)
    kernel_timing: bool  # also time the kernel alone (reported, never decides)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> PerfSettings:
        fields = PayloadReader(payload, "gate 4's settings")
        return cls(min_speedup=fields.number("min_speedup", _DEFAULTS.min_speedup),
                   rounds=fields.integer("rounds", None),
                   kernel_timing=fields.flag("kernel_timing", _DEFAULTS.kernel_timing))


class Gate:
    """One gate: subclasses set ``number``, ``name`` and, for a gate run in the worker, ``task`` and
    ``Settings`` (the dataclass its task reads back), and say what their task takes."""

    number: ClassVar[int]
    name: ClassVar[str]
    task: ClassVar[str | None] = None  # the worker task in the target's task module; None: runs in the cascade
    Settings: ClassVar[Any] = None  # its settings' dataclass (to_json, from_json); None for gate 1

    def settings(self, config: CascadeConfig, gates: tuple[int, ...]) -> GateSettings:
        """This gate's settings from ``config`` (``gates``: the cascade's gates)."""
        raise NotImplementedError(f"gate {self.number} ({self.name}) runs no task")

    def read_settings(self, payload: dict[str, Any]) -> Any:
        """The settings a task reads back from its payload (the configuration's defaults for keys left out)."""
        return self.Settings.from_json(payload)

    def take(self, result: CascadeResult, verdict: GateVerdict) -> None:
        """What the cascade's result takes from this gate's verdict beyond the pass or fail."""
        return None


class StaticGate(Gate):
    number, name = 1, "static"


class KernelGate(Gate):
    number, name, task, Settings = 2, "kernel", "run_kernel_gate", KernelSettings

    def settings(self, config: CascadeConfig, gates: tuple[int, ...]) -> KernelSettings:
        return KernelSettings(seeds=list(config.seeds_kernel), reruns=config.determinism_reruns,
                              battery=gate2_battery(config, gates), spare=config.spare_candidate,
                              sanitize_ahead=3 in gates, decision_search_s=config.decision_search_s)


class ModelGate(Gate):
    number, name, task, Settings = 3, "model", "run_model_gate", ModelSettings

    def settings(self, config: CascadeConfig, gates: tuple[int, ...]) -> ModelSettings:
        return ModelSettings(seeds=list(config.seeds_model), tolerance=config.model_tolerance)


class PerfGate(Gate):
    number, name, task, Settings = 4, "perf", "run_perf_gate", PerfSettings

    def settings(self, config: CascadeConfig, gates: tuple[int, ...]) -> PerfSettings:
        return PerfSettings(min_speedup=config.min_speedup, rounds=config.ab_rounds,
                            kernel_timing=config.kernel_timing)

    def take(self, result: CascadeResult, verdict: GateVerdict) -> None:
        speed = verdict.speed
        if speed.speedup is not None:
            result.speedup, result.ci, result.timing_path = speed.speedup, speed.ci, speed.timing_path
        result.kernel_speedups = dict(speed.kernel_speedups)


class GateRegistrationError(TypeError):
    """A gate registered without one of its parts (a number in order, a name, a task's settings)."""


def register(*gates: Gate) -> dict[int, Gate]:
    """The gates by number, each checked for its parts: numbered 1, 2, ... in order, named once, and a gate
    run in the worker with a settings dataclass that its own ``settings`` makes and its task reads back."""
    table: dict[int, Gate] = {}
    for position, gate in enumerate(gates, start=1):
        kind = type(gate).__name__
        number, name = getattr(gate, "number", None), getattr(gate, "name", None)
        if number != position:
            raise GateRegistrationError(f"{kind} is registered as gate {position} but says it is {number}")
        if not isinstance(name, str) or not name or name in {g.name for g in table.values()}:
            raise GateRegistrationError(f"{kind} needs a name of its own, not {name!r}")
        if gate.task is not None:
            settings_class: Any = gate.Settings
            if not (isinstance(settings_class, type) and is_dataclass(settings_class) and callable(getattr(settings_class, "from_json", None))
                    and callable(getattr(settings_class, "to_json", None))):
                raise GateRegistrationError(f"{kind} runs the task {gate.task} but declares no Settings dataclass "
                                            "with to_json and from_json")
            if type(gate).settings is Gate.settings:
                raise GateRegistrationError(f"{kind} runs the task {gate.task} but makes no settings from the "
                                            "configuration (its settings method)")
            made = gate.settings(_DEFAULTS, tuple(range(1, len(gates) + 1)))
            if not isinstance(made, settings_class) or gate.read_settings(made.to_json()) != made:
                raise GateRegistrationError(f"{kind}'s settings do not read back as its Settings")
        table[position] = gate
    return table


GATES: dict[int, Gate] = register(StaticGate(), KernelGate(), ModelGate(), PerfGate())
GATE_NAMES: dict[int, str] = {number: gate.name for number, gate in GATES.items()}
ALL_GATES: tuple[int, ...] = tuple(GATES)


def _gate_list(gates: list[int]) -> str:
    return f"gate{'s' if len(gates) > 1 else ''} {', '.join(map(str, gates))}"


def acceptance(gates: tuple[int, ...], passed_earlier: tuple[int, ...] = ()) -> tuple[str, str | None]:
    """The reason of a cascade that passed ``gates``, and a note when that is not a full acceptance.
    ``passed_earlier``: gates the candidate passed before this cascade (its screen's)."""
    earlier = sorted(g for g in set(passed_earlier) if g in GATE_NAMES and g not in gates)
    skipped = [g for g in GATE_NAMES if g not in gates and g not in earlier]
    at_screen = f"{_gate_list(earlier)} at its screen" if earlier else ""
    if not skipped:
        return "passed all four gates" + (f" ({at_screen})" if at_screen else ""), None
    not_run = f"{_gate_list(skipped)} not run"
    reason = f"passed {_gate_list(sorted(gates))} ({'; '.join(p for p in (at_screen, not_run) if p)})"
    return reason, f"{_gate_list(skipped)} did not run; this is not a full acceptance"



__all__ = ["ALL_GATES", "GATES", "GATE_NAMES", "CommonSettings", "Gate", "GateRegistrationError", "GateSettings",
           "KernelGate", "KernelSettings", "ModelGate", "ModelSettings", "PerfGate", "PerfSettings", "StaticGate",
           "acceptance", "gate2_battery", "register"]
