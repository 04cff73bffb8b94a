"""Gate tasks' payloads and replies are dataclasses, JSON only across the process boundary: what the cascade
sends reads back equal in the worker, the wire keeps the keys it always had, a malformed payload is a clear
"could not verify" (never a crash), and a gate registered without its parts is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kernelopt_core.gates.cascade import SHARED_TASKS, run_cascade
from kernelopt_core.gates.registry import (
    GATES,
    CommonSettings,
    Gate,
    GateRegistrationError,
    KernelGate,
    KernelSettings,
    ModelGate,
    ModelSettings,
    PerfGate,
    PerfSettings,
    StaticGate,
    register,
)
from kernelopt_core.gates.task_payload import GateRequest, GraphCandidate, KernelTimingRequest, Pins
from kernelopt_core.gates.verdict import CascadeConfig, CascadeResult, GateVerdict, TaskReply
from kernelopt_core.measure.task_context import RECYCLE_KEY
from kernelopt_core.payload_fields import PayloadError, PayloadReader
from kernelopt_core.userkernels.payload import UserKernelPayload, UserTimingRequest

GRAPH_TASKS = "kernelopt_core.gates.tasks.graph"
USER_TASKS = "kernelopt_core.userkernels.tasks"


def _graph_candidate() -> GraphCandidate:
    return GraphCandidate(graph="/dumps/g/output_code.py", restitched="/work/g-1/output_code.py",
                          kernels=("triton_poi_0", "triton_red_1"), sources={"triton_poi_0": "src0", "triton_red_1": "src1"},
                          device="cpu", fx_graph_runnable="/dumps/g/fx_graph_runnable.py")


def _user_payload(**changes: Any) -> UserKernelPayload:
    user = UserKernelPayload(file="/p/softmax.py", kernel="softmax_kernel",
                             harness={"kind": "function", "file": "/p/softmax.py", "name": "bench_softmax"},
                             module="import triton\n", device="cpu", loaded=("input_ptr",), atomics=False,
                             candidate="import triton\n# faster\n", candidate_configs=({"BLOCK": 64, "num_warps": 4},),
                             workdir="/tmp/work")
    return user.but(**changes)


def _config() -> CascadeConfig:
    return CascadeConfig(seeds_kernel=(5, 6), seeds_model=(7,), gate2_battery="screen", spare_candidate=True,
                         ab_rounds=9, low_memory=True, sanitizer_timeout_s=12.0, job_timeout_s=100.0)


# --- payloads: what is sent reads back equal ----------------------------------------------------------------


@pytest.mark.parametrize("gate", [2, 3, 4])
@pytest.mark.parametrize("target", [_graph_candidate(), _user_payload()], ids=["graph", "user-kernel"])
def test_a_gate_request_reads_back_equal_from_its_json(gate: int, target: Any) -> None:
    kind = GATES[gate]
    request = GateRequest(target, CommonSettings.of(_config()), kind.settings(_config(), (1, 2)),
                          compiled={"triton_poi_0": {"configs": [{"shared_bytes": 0}]}})
    read = UserKernelPayload.read if isinstance(target, UserKernelPayload) else GraphCandidate.read
    assert GateRequest.from_json(request.to_json(), read, kind.read_settings) == request


def test_the_wire_keeps_the_keys_the_gpu_scripts_and_tasks_have_always_used() -> None:
    request = GateRequest(_graph_candidate(), CommonSettings.of(_config()), GATES[2].settings(_config(), (1, 2)))
    assert set(request.to_json()) == {
        "graph", "restitched", "kernels", "device", "sources", "fx_graph_runnable",  # the target's
        "low_memory", "input_sets", "sanitize", "sanitizer_timeout_s", "run_timeout_s",  # every gate's
        "seeds", "reruns", "battery", "spare", "sanitize_ahead", "decision_search_s",  # gate 2's
        "compiled"}
    # pins go on the wire only when set, and read back
    pinned = GateRequest(_graph_candidate(), CommonSettings.of(_config()), GATES[3].settings(_config(), (3,)),
                         pins=Pins(adds_decisions=False, constants=(0.5, 2.0), decisions=False, error_structure=False),
                         scratch_root="/scratch")
    data = pinned.to_json()
    assert (data["adds_decisions"], data["constants"], data["decisions"], data["error_structure"]) == \
        (False, [0.5, 2.0], False, False)
    assert GateRequest.from_json(data, GraphCandidate.read, GATES[3].read_settings) == pinned


def test_a_user_kernels_payload_reads_back_equal_and_keeps_its_keys() -> None:
    user = _user_payload(edited_file="/p/edited/softmax.py")
    assert UserKernelPayload.from_json(user.to_json()) == user
    timing = UserTimingRequest(user, rounds=20)
    assert UserTimingRequest.from_json(timing.to_json()) == timing
    facts = _user_payload(candidate=None, candidate_configs=(), workdir=None)  # what the facts task is sent
    assert set(facts.to_json()) == {"file", "kernel", "harness", "device", "module", "loaded", "atomics"}
    assert UserKernelPayload.from_json(facts.to_json()) == facts


def test_the_searchs_kernel_timing_request_reads_its_payload() -> None:
    sent = {"graph_path": "/dumps/g/output_code.py", "device": "cpu", "kernel": "triton_poi_0", "rounds": 5,
            "candidates": {"c": "/work/c.py"}, "restitched": "/work/c.py"}
    request = KernelTimingRequest.from_json(sent)
    assert request == KernelTimingRequest("/dumps/g/output_code.py", "/work/c.py", "triton_poi_0", "cpu", 5)
    assert KernelTimingRequest.from_json(request.to_json()) == request


# --- replies ----------------------------------------------------------------------------------------------


def test_a_task_reply_reads_back_equal_and_keeps_the_wire_shape() -> None:
    passed = TaskReply.verdict(True, "faster", speedup=1.2)
    assert passed.to_json() == {"passed": True, "reason": "faster", "numbers": {"speedup": 1.2}}
    unproven = TaskReply.unverified("a path was never taken", oom=False)
    unproven.not_verified, unproven.recycle = True, "the job left 5.00 GiB allocated"
    assert unproven.to_json() == {"passed": False, "reason": "a path was never taken", "numbers": {"oom": False},
                                  "could_not_verify": True, "not_verified": True,
                                  RECYCLE_KEY: "the job left 5.00 GiB allocated"}
    setup = TaskReply.setup_failure("the baseline graph cannot be loaded")
    assert setup.to_json() == {"setup_error": "the baseline graph cannot be loaded"}
    for reply in (passed, unproven, setup):
        assert TaskReply.from_json(reply.to_json()) == reply
    verdict = unproven.to_verdict(2, "kernel", 1.5)
    assert verdict == GateVerdict(2, "kernel", False, "a path was never taken", {"oom": False}, 1.5,
                                  could_not_verify=True)


# --- a malformed payload is a clear "could not verify" ------------------------------------------------------


@pytest.mark.parametrize("module", [GRAPH_TASKS, USER_TASKS])
@pytest.mark.parametrize("task", ["run_kernel_gate", "run_model_gate", "run_perf_gate"])
def test_a_malformed_payload_is_could_not_verify_naming_the_key(module: str, task: str) -> None:
    import importlib

    run = getattr(importlib.import_module(module), task)
    reply = TaskReply.from_json(run({"graph": 3, "file": ["not", "a", "path"], "kernels": "k", "device": "cpu"}))
    assert reply.could_not_verify and not reply.passed and reply.setup_error is None
    assert "malformed payload" in reply.reason and ("'graph'" in reply.reason or "'file'" in reply.reason), reply.reason
    wrong_settings = TaskReply.from_json(run({**_graph_candidate().to_json(), **_user_payload().to_json(),
                                              "seeds": "zero", "tolerance": "tight", "min_speedup": "fast"}))
    assert wrong_settings.could_not_verify and "settings" in wrong_settings.reason, wrong_settings.reason


def test_a_user_kernel_gate_without_a_candidate_could_not_verify() -> None:
    from kernelopt_core.userkernels.tasks import run_model_gate

    request = GateRequest(_user_payload(candidate=None), CommonSettings.of(_config()),
                          GATES[3].settings(_config(), (3,)))
    reply = TaskReply.from_json(run_model_gate(request.to_json()))
    assert reply.could_not_verify and "'candidate'" in reply.reason, reply.reason


@dataclass
class _StandInTarget:
    """A target whose gate 2 runs the real graph task on the payload the test corrupts."""

    tasks: str = GRAPH_TASKS
    retry_low_memory: bool = True
    static_gate_uses_worker: bool = False
    gate2_screen: bool = True
    path: str = "/dumps/g/output_code.py"

    def check(self, candidates: dict[str, str]) -> None:
        return None

    def resolve_device(self, requested: str, gates: tuple[int, ...]) -> str:
        return "cpu"

    def write_candidate(self, candidates: dict[str, str], config: CascadeConfig, result: CascadeResult) -> str:
        return "/work/g-1/output_code.py"

    def prepare(self, call: Any, config: CascadeConfig) -> None:
        return None

    def static_gate(self, candidates: dict[str, str], config: CascadeConfig) -> tuple[GateVerdict, None]:
        raise AssertionError("gate 1 is not run here")

    def gate_payload(self, candidates: dict[str, str], written: str | None, device: str) -> GraphCandidate:
        return GraphCandidate("/dumps/g/output_code.py", str(written), tuple(candidates), dict(candidates), device)


def test_the_cascade_turns_a_malformed_payload_into_could_not_verify_not_a_crash() -> None:
    from kernelopt_core.gates.cascade import _call_in_process

    called: list[str] = []

    def corrupting(task: str, payload: dict[str, Any]) -> dict[str, Any]:
        called.append(task)
        if task.startswith(SHARED_TASKS):
            return {"closed": True}
        return _call_in_process(task, {**payload, "sources": {"triton_poi_0": 7}})

    result = run_cascade(_StandInTarget(), {"triton_poi_0": "src"}, CascadeConfig(run_gates=(2,)), call=corrupting)
    assert called[0] == f"{GRAPH_TASKS}:run_kernel_gate"
    assert result.could_not_verify and not result.accepted and result.failed_gate == 2
    assert "could not verify" in result.reason and "'sources'" in result.reason, result.reason


# --- one class, registered in one place -----------------------------------------------------------------------


def test_the_registry_is_the_four_gates_each_with_its_parts() -> None:
    assert register(StaticGate(), KernelGate(), ModelGate(), PerfGate()).keys() == GATES.keys()
    assert [type(GATES[g].settings(CascadeConfig(), (1, 2, 3, 4))) for g in (2, 3, 4)] == \
        [KernelSettings, ModelSettings, PerfSettings]


class _NoSettings(Gate):
    number, name, task = 5, "energy", "run_energy_gate"


@dataclass(frozen=True)
class _EnergySettings:
    budget_j: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {"budget_j": self.budget_j}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> _EnergySettings:
        return cls(float(payload.get("budget_j", 1.0)))


class _SettingsNeverMade(Gate):
    number, name, task, Settings = 5, "energy", "run_energy_gate", _EnergySettings


class _EnergyGate(_SettingsNeverMade):
    def settings(self, config: CascadeConfig, gates: tuple[int, ...]) -> _EnergySettings:
        return _EnergySettings(2.0)


class _Unnamed(_EnergyGate):
    name = "perf"  # another gate's


@pytest.mark.parametrize("fifth,problem", [
    (_NoSettings(), "declares no Settings dataclass"),
    (_SettingsNeverMade(), "makes no settings from the configuration"),
    (_Unnamed(), "needs a name of its own"),
])
def test_a_gate_registered_without_its_parts_is_refused(fifth: Gate, problem: str) -> None:
    with pytest.raises(GateRegistrationError, match=problem):
        register(StaticGate(), KernelGate(), ModelGate(), PerfGate(), fifth)


def test_a_gate_with_its_parts_registers_and_a_gap_in_the_numbers_does_not() -> None:
    table = register(StaticGate(), KernelGate(), ModelGate(), PerfGate(), _EnergyGate())
    assert table[5].read_settings({"budget_j": 3}) == _EnergySettings(3.0)
    with pytest.raises(GateRegistrationError, match="registered as gate 4 but says it is 5"):
        register(StaticGate(), KernelGate(), ModelGate(), _EnergyGate())


def test_a_payload_error_names_what_is_wrong() -> None:
    with pytest.raises(PayloadError, match="has no 'restitched'"):
        GraphCandidate.read(PayloadReader({"graph": "/g.py"}))
    with pytest.raises(PayloadError, match="is a list, not a JSON object"):
        UserKernelPayload.from_json([])  # type: ignore[arg-type]


# --- the measurement jobs read their payloads the same way ------------------------------------------------------


def test_the_measurement_jobs_read_their_payloads_into_dataclasses() -> None:
    from kernelopt_core.measure.graph_tasks import GraphABRequest, GraphTimingRequest, LaunchTimingRequest
    from kernelopt_core.search.kernel_tasks import GraphFactsRequest

    facts = GraphFactsRequest("/dumps/g/output_code.py", "cpu", ("triton_poi_0",), time=False, rounds=3)
    assert GraphFactsRequest.from_json(facts.to_json()) == facts
    launches = LaunchTimingRequest("/dumps/g/output_code.py", "cuda:0", iters=5, overheads=False)
    assert LaunchTimingRequest.from_json(launches.to_json()) == launches
    # the GPU scripts' payloads, as they send them
    assert LaunchTimingRequest.from_json({"dump": "/d.py", "device": "cpu", "overheads": False}) == \
        LaunchTimingRequest("/d.py", "cpu", None, False)
    cpu_ab = {"baseline": "/d.py", "candidate": "/d.py", "rounds": 3, "reps_per_round": 1, "warmup": 1, "input_sets": 1}
    assert GraphABRequest.from_json({**cpu_ab, "cuda_graph": True}) == GraphABRequest(
        "/d.py", "/d.py", rounds=3, reps_per_round=1, warmup=1, input_sets=1, cuda_graph=True)
    assert GraphTimingRequest.from_json({"dump": "/d.py"}) == GraphTimingRequest("/d.py")
    with pytest.raises(PayloadError, match="'rounds' is str"):
        GraphABRequest.from_json({**cpu_ab, "rounds": "three"})
