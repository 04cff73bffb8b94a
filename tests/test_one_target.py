"""One target, two kinds: the search reads a dump's graph and a project's own kernel through one protocol,
so none of its modules picks a side by testing whether a target (or a user's kernel) was given."""

from __future__ import annotations

import ast
from pathlib import Path

SEARCH = Path(__file__).resolve().parents[1] / "kernelopt_core" / "search"
# The names a branch on the kind of target tests against None.
TARGET_NAMES = {"target", "user", "user_kernel", "user_target"}


def _name(node: ast.expr) -> str | None:
    """``target``, or ``ctx.target`` / ``self.target`` (not ``statement.target``, an assignment's)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("ctx", "self"):
        return node.attr
    return None


def side_branches(source: str) -> list[int]:
    """Lines that compare a target's name with None (``target is not None``, ``ctx.target is None``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value is None for o in operands) and \
                    any(_name(o) in TARGET_NAMES for o in operands):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_a_branch_on_the_kind_of_target() -> None:
    assert side_branches("if ctx.target is not None:\n    pass\n") == [1]
    assert side_branches("x = a if user is None else b\n") == [1]
    assert side_branches("if ctx.target.users_own:\n    pass\nif budget is None:\n    pass\n") == []
    assert side_branches("if statement.target is None:\n    pass\n") == []


def test_no_module_of_the_search_branches_on_whether_a_target_was_given() -> None:
    found = {str(path.relative_to(SEARCH)): side_branches(path.read_text(encoding="utf-8"))
             for path in sorted(SEARCH.rglob("*.py"))}
    assert {path: lines for path, lines in found.items() if lines} == {}


# --- the gates: objects registered in one place ---------------------------------------------------------


def test_every_gate_is_one_registered_class_that_both_kinds_of_target_run() -> None:
    import importlib

    from kernelopt_core.gates.cascade_target import GraphGates
    from kernelopt_core.gates.registry import GATE_NAMES, GATES, Gate
    from kernelopt_core.gates.verdict import CascadeConfig
    from kernelopt_core.userkernels.cascade import UserKernelGates

    assert list(GATES) == sorted(GATES) and all(isinstance(g, Gate) and g.number == n for n, g in GATES.items())
    assert GATE_NAMES == {1: "static", 2: "kernel", 3: "model", 4: "perf"}
    assert CascadeConfig().run_gates == tuple(GATES)  # by default the cascade runs every registered gate
    in_worker = [g.task for g in GATES.values() if g.task is not None]
    assert in_worker == ["run_kernel_gate", "run_model_gate", "run_perf_gate"]
    for tasks in (GraphGates.tasks, UserKernelGates.tasks):
        module = importlib.import_module(tasks)
        assert [task for task in in_worker if not callable(getattr(module, task, None))] == [], tasks


def test_a_gates_settings_are_what_its_task_reads_and_its_verdict_is_typed() -> None:
    from kernelopt_core.gates.registry import GATES, CommonSettings
    from kernelopt_core.gates.verdict import CascadeConfig, CascadeResult, TaskReply

    config = CascadeConfig(gate2_battery="screen", spare_candidate=True, ab_rounds=7, job_timeout_s=100.0)
    assert GATES[2].settings(config, (1, 2)).to_json() == {"seeds": [0, 42, 1337], "reruns": 2, "battery": "screen",
                                                 "spare": True, "sanitize_ahead": False, "decision_search_s": 30.0}
    assert GATES[2].settings(config, (1, 2, 3)).to_json()["battery"] == "full"  # past gate 2 only the full battery
    assert GATES[2].settings(config, (2, 3, 4)).to_json()["sanitize_ahead"]  # gate 3's sanitizer may start beside it
    assert GATES[3].settings(config, (3,)).to_json() == {"seeds": [0, 42, 123], "tolerance": 1e-4}
    assert GATES[4].settings(config, (4,)).to_json() == {"min_speedup": 1.03, "rounds": 7, "kernel_timing": True}
    assert CommonSettings.of(config).run_timeout_s == 80.0
    reply = TaskReply.from_json({"passed": True, "reason": "faster", "numbers": {
        "speedup": 1.2, "ci_low": 1.1, "ci_high": 1.3, "timing_path": "module-call", "kernel_speedups": {"k": 1.5},
        "containment": {"contained": True}, "sanitizer_note": "races not checked on the CPU"}})
    verdict = reply.to_verdict(4, "perf", 1.0)
    assert verdict.speed.ci == (1.1, 1.3) and verdict.containment == {"contained": True} and not verdict.oom
    result = CascadeResult(False, None, "")
    GATES[4].take(result, verdict)
    assert (result.speedup, result.ci, result.timing_path, result.kernel_speedups) == (
        1.2, (1.1, 1.3), "module-call", {"k": 1.5})
    assert TaskReply.from_json({"setup_error": "the baseline cannot load"}).setup_error == "the baseline cannot load"


def test_a_task_reads_back_the_settings_the_cascade_sent_and_the_configuration_defaults_without_them() -> None:
    from kernelopt_core.gates.registry import GATES, KernelSettings, ModelSettings, PerfSettings
    from kernelopt_core.gates.verdict import CascadeConfig

    config = CascadeConfig(seeds_kernel=(5, 6), seeds_model=(7,), determinism_reruns=4, gate2_battery="screen",
                           spare_candidate=True, decision_search_s=2.5, model_tolerance=1e-3, min_speedup=1.2,
                           ab_rounds=9, kernel_timing=False)
    sent = {gate: GATES[gate].settings(config, (1, 2)).to_json() for gate in (2, 3, 4)}
    assert KernelSettings.from_json(sent[2]) == KernelSettings([5, 6], 4, "screen", True, False, 2.5)
    assert ModelSettings.from_json(sent[3]) == ModelSettings([7], 1e-3)
    assert PerfSettings.from_json(sent[4]) == PerfSettings(1.2, 9, False)
    # a task called with no settings (a test, a script) runs as a default configuration would send
    default = CascadeConfig()
    for gate, kind in ((2, KernelSettings), (3, ModelSettings), (4, PerfSettings)):
        assert kind.from_json({}).to_json() == GATES[gate].settings(default, (1, 2)).to_json(), gate
