"""The spare candidate process (issues 25 and 26): ready before the next candidate asks, never shared by
two candidates, replaced when it died, and gone with the work that started it (checked by pid).

The keeper's tests start CPU processes from this process's zygote (milliseconds each); the worker's
run gate 2's screen on the corpus' elementwise graph in a CPU worker, as the search does.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import running

from kernelopt_core.sandbox.process import SandboxProcess
from kernelopt_core.sandbox.spare import SPARE_ENV, SpareKeeper


def wait_until(condition: Callable[[], Any], what: str, bound_s: float = 120.0) -> Any:
    deadline = time.monotonic() + bound_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {bound_s:g} s: {what}"
        time.sleep(0.05)
    return value


@pytest.fixture(autouse=True)
def spares_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPARE_ENV, raising=False)  # the default, whatever the shell says; workers inherit it


@pytest.fixture
def keeper() -> Iterator[SpareKeeper]:
    kept = SpareKeeper()
    yield kept
    kept.close()


def _ready_spare(keeper: SpareKeeper) -> dict[str, Any]:
    return wait_until(lambda: keeper.status() if keeper.status()["pid"] else None, "the spare is ready")


# --- the keeper ----------------------------------------------------------------------------------------


def test_the_next_candidate_takes_the_spare_started_before_it_asked(keeper: SpareKeeper) -> None:
    first = keeper.take("cpu", "cpu", keep_spare=True)
    assert not first.from_spare and first.note == "no spare was kept"
    spare = _ready_spare(keeper)
    assert spare["pid"] != first.process.pid and spare["scratch"] != first.process.scratch
    first.process.close()
    second = keeper.take("cpu", "cpu", keep_spare=True)
    try:
        assert second.from_spare and second.process.pid == spare["pid"], second
        assert second.spare_age_s is not None and second.spare_age_s > second.seconds
        assert second.process.call("hello")["pid"] == spare["pid"]
        following = _ready_spare(keeper)  # the one after it was started at once
        assert following["pid"] not in (first.process.pid, second.process.pid)
    finally:
        second.process.close()
    assert not os.path.exists(second.process.scratch)


def test_a_killed_spare_is_replaced_by_a_fresh_process(keeper: SpareKeeper) -> None:
    keeper.take("cpu", "cpu", keep_spare=True).process.close()
    spare = _ready_spare(keeper)
    os.kill(spare["pid"], signal.SIGKILL)
    wait_until(lambda: not running(spare["pid"]), "the spare is gone")
    taken = keeper.take("cpu", "cpu", keep_spare=True)
    try:
        assert not taken.from_spare and taken.process.pid != spare["pid"], taken
        assert taken.note is not None and f"pid {spare['pid']}" in taken.note
        assert taken.process.call("hello")["ok"]
        assert not os.path.exists(spare["scratch"])  # the dead spare's scratch went with it
        assert _ready_spare(keeper)["pid"] not in (spare["pid"], taken.process.pid)
    finally:
        taken.process.close()


def test_a_spare_broken_while_it_starts_is_never_handed_out() -> None:
    def broken_spares(*args: Any, cancel: Any = None, **kwargs: Any) -> SandboxProcess:
        process = SandboxProcess.start(*args, cancel=cancel, **kwargs)
        if cancel is not None:  # a spare (the keeper starts those cancellably): its warm-up cannot be asked
            process.connection.close()
        return process

    keeper = SpareKeeper(start=broken_spares)
    try:
        keeper.take("cpu", "cpu", keep_spare=True).process.close()
        keeper.settle()
        status = keeper.status()
        assert status["pid"] is None and "discarded" in str(status["error"]), status
        taken = keeper.take("cpu", "cpu")
        taken.process.close()
        assert not taken.from_spare and "discarded" in str(taken.note)
    finally:
        keeper.close()


def test_closing_ends_the_spare_and_removes_its_scratch(keeper: SpareKeeper) -> None:
    keeper.take("cpu", "cpu", keep_spare=True).process.close()
    spare = _ready_spare(keeper)
    keeper.close()
    assert not running(spare["pid"]) and not os.path.exists(spare["scratch"])
    assert keeper.status()["pid"] is None


def test_a_spare_for_another_scratch_folder_is_discarded(keeper: SpareKeeper, tmp_path: Path) -> None:
    keeper.take("cpu", "cpu", str(tmp_path / "a"), keep_spare=True).process.close()
    spare = _ready_spare(keeper)
    taken = keeper.take("cpu", "cpu", str(tmp_path / "b"))
    try:
        assert not taken.from_spare and "another device or scratch" in str(taken.note)
        assert not running(spare["pid"]) and keeper.status()["pid"] is None  # not asked to keep one
    finally:
        taken.process.close()


def test_the_knob_turns_spares_off(keeper: SpareKeeper, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPARE_ENV, "0")
    for _ in range(2):
        taken = keeper.take("cpu", "cpu", keep_spare=True)
        taken.process.close()
        assert not taken.from_spare and SPARE_ENV in str(taken.note)
        assert keeper.status() == {"pid": None, "starting": False, "error": None}


# --- gate 2 in a worker -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from adversarial.dumps import compiled_corpus_graphs

    from kernelopt_core.artifacts import parse_output_code

    return parse_output_code(compiled_corpus_graphs(tmp_path_factory, problems=("elementwise",))["elementwise"])


def _screen(worker: Any, graph: Any, workdir: Path, source: str | None = None) -> Any:
    from kernelopt_core.gates import CascadeConfig, run_cascade

    kernel = graph.kernels[0]
    config = CascadeConfig(run_gates=(2,), gate2_battery="screen", workdir=str(workdir), spare_candidate=True)
    result = run_cascade(graph, {kernel.name: source or kernel.source}, config, worker=worker)
    verdict = result.verdict(2)
    assert verdict is not None, result.reason
    return verdict


def _spare_pid(worker: Any) -> int:
    def ask() -> int | None:
        outcome = worker.call("kernelopt_core.gates.tasks.skeleton:spare_candidate_status", {})
        assert outcome.ok, outcome.failure
        return outcome.value["pid"]

    return wait_until(ask, "the worker's spare is ready")


def _same(a: Any, b: Any) -> None:
    assert (a.passed, a.could_not_verify, a.reason) == (b.passed, b.could_not_verify, b.reason)
    for name, kernel in a.numbers["kernels"].items():
        other = b.numbers["kernels"][name]
        assert [c["label"] for c in kernel["checks"]] == [c["label"] for c in other["checks"]]
        assert kernel["max_abs_diff"] == other["max_abs_diff"]


def test_gate2_screens_take_the_spare_and_nothing_outlives_the_worker(elementwise: Any, tmp_path: Path) -> None:
    from kernelopt_core.measure.worker import Worker

    worker = Worker("cpu")
    try:
        fresh = _screen(worker, elementwise, tmp_path)
        assert fresh.passed and fresh.numbers["candidate_process"]["from_spare"] is False, fresh.reason
        spare = _spare_pid(worker)
        assert running(spare)
        from_spare = _screen(worker, elementwise, tmp_path)  # the same candidate again: a new process
        how = from_spare.numbers["candidate_process"]
        assert how["from_spare"] and how["pid"] == spare == from_spare.numbers["containment"]["pid"], how
        assert how["spare_age_s"] > how["seconds"]
        _same(from_spare, fresh)
        wait_until(lambda: not running(spare), "that candidate's cascade closed its process")

        killed = _spare_pid(worker)
        os.kill(killed, signal.SIGKILL)
        replaced = _screen(worker, elementwise, tmp_path)
        how = replaced.numbers["candidate_process"]
        assert not how["from_spare"] and f"pid {killed}" in str(how["note"]), how
        _same(replaced, fresh)

        closed = _spare_pid(worker)
        assert worker.call("kernelopt_core.gates.tasks.skeleton:close_candidate", {}).ok
        wait_until(lambda: not running(closed), "close_candidate ends the spare")
        assert worker.call("kernelopt_core.gates.tasks.skeleton:spare_candidate_status", {}).value["pid"] is None

        _screen(worker, elementwise, tmp_path)
        last = _spare_pid(worker)
    finally:
        worker.close()
    wait_until(lambda: not running(last), f"the spare (pid {last}) ends with the worker", bound_s=30)


def test_a_full_gate2_keeps_no_spare_and_a_killed_worker_takes_its_spare(elementwise: Any, tmp_path: Path) -> None:
    from kernelopt_core.gates import CascadeConfig, run_cascade
    from kernelopt_core.measure.worker import Worker

    kernel = elementwise.kernels[0]
    worker = Worker("cpu")
    try:
        result = run_cascade(elementwise, {kernel.name: kernel.source},
                             CascadeConfig(run_gates=(2,), workdir=str(tmp_path)), worker=worker)
        assert result.accepted, result.reason
        status = worker.call("kernelopt_core.gates.tasks.skeleton:spare_candidate_status", {}).value
        assert status["pid"] is None and not status["starting"]  # not a screen: no next candidate expected
        _screen(worker, elementwise, tmp_path)
        spare = _spare_pid(worker)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)  # no orderly exit: the parent-death signals must do it
        wait_until(lambda: not running(spare), f"the spare (pid {spare}) ends with its killed worker", bound_s=30)
    finally:
        worker.close()


# --- the first screen's head start ------------------------------------------------------------------------


def test_ensure_spare_starts_one_spare_and_the_first_candidate_takes_it(keeper: SpareKeeper) -> None:
    assert keeper.ensure_spare("cpu", "cpu") is True
    assert keeper.ensure_spare("cpu", "cpu") is False  # one is starting or kept: no second
    spare = _ready_spare(keeper)
    taken = keeper.take("cpu", "cpu")
    try:
        assert taken.from_spare and taken.process.pid == spare["pid"], taken
    finally:
        taken.process.close()
    assert keeper.status()["pid"] is None  # not asked to keep another


def test_a_zygote_started_in_the_background_serves_the_first_spawn() -> None:
    from kernelopt_core.sandbox.zygote import Zygote

    zygote = Zygote("cpu")
    try:
        assert zygote.pid is None
        zygote.start_in_background()
        pid = wait_until(lambda: zygote.pid, "the zygote runs")
        process = SandboxProcess.start("cpu", "cpu", zygote=zygote)
        try:
            assert process.call("hello")["ok"] and zygote.pid == pid  # forked by that zygote, not a new one
        finally:
            process.close()
    finally:
        zygote.close()
    assert not running(pid)


def test_a_zygote_that_fails_in_the_background_is_reported_by_the_first_spawn() -> None:
    from kernelopt_core.sandbox.zygote import Zygote, ZygoteError

    zygote = Zygote("cpu", preload=("kernelopt_no_such_module",))
    try:
        zygote.start_in_background()  # no exception here: the head start is best effort
        with pytest.raises(ZygoteError, match="did not start"):
            zygote.spawn({}, timeout_s=60)
    finally:
        zygote.close()


def test_the_first_screen_takes_a_spare_started_before_its_gate_1(elementwise: Any, tmp_path: Path) -> None:
    from kernelopt_core.gates import CascadeConfig, run_cascade
    from kernelopt_core.measure.worker import Worker

    kernel = elementwise.kernels[0]
    worker = Worker("cpu")
    try:
        config = CascadeConfig(run_gates=(1, 2), gate2_battery="screen", workdir=str(tmp_path),
                               spare_candidate=True)
        result = run_cascade(elementwise, {kernel.name: kernel.source}, config, worker=worker)
        assert result.accepted, result.reason
        verdict = result.verdict(2)
        assert verdict is not None
        how = verdict.numbers["candidate_process"]
        # the worker had no spare before this cascade: the one taken was started ahead of gate 1
        assert how["from_spare"] and how["spare_age_s"] > result.verdict(1).seconds, how
        following = _spare_pid(worker)  # and the next candidate's is starting
        assert following != how["pid"]
    finally:
        worker.close()
    wait_until(lambda: not running(following), "the spare ends with the worker", bound_s=30)


# --- the user-kernel cascade ------------------------------------------------------------------------------


@pytest.mark.parametrize("spare", [True, False])
def test_the_user_cascade_asks_for_the_spare_before_gate_1(spare: bool, tmp_path: Path) -> None:
    import shutil

    from kernelopt_core.gates.verdict import CascadeConfig
    from kernelopt_core.userkernels.cascade import run_user_cascade
    from kernelopt_core.userkernels.target import user_target

    examples = Path(__file__).resolve().parents[1] / "examples" / "user_kernels"
    shutil.copy(examples / "softmax.py", tmp_path / "softmax.py")
    target = user_target(str(tmp_path / "softmax.py"), "softmax_kernel", "bench_softmax", "cpu")
    asked: list[str] = []

    def call(task: str, payload: dict[str, Any]) -> dict[str, Any]:  # stands in for the worker
        asked.append(task.rpartition(":")[2])
        return {"passed": False, "reason": "stand-in verdict", "plan": None}

    config = CascadeConfig(device="cpu", run_gates=(1, 2), workdir=str(tmp_path / "verify"), spare_candidate=spare)
    run_user_cascade(target, target.module.source, config, call=call)
    assert ("begin_spare" in asked) is spare
    if spare:
        assert asked[0] == "begin_spare"  # before gate 1 compiles, so gate 2's process starts meanwhile
    assert asked[-1] == "close_candidate"
