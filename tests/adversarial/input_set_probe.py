"""Run a corpus case on the input sets at the graph level, with the comparison rule and the
error-structure check, directly (not through the gates).

This is what gates 2 and 3 will do once the input sets are wired into them (issue 20): it shows,
before that, that each issue-20 case is exposed by the input sets it names and passes on the
graph's own inputs, and that the correct variants pass every input set. It runs the candidate in
this process, so only cases marked ``probe=True`` (no stray writes, no hostile code) come here.
Imports torch: tests only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.restitch import write_restitched

from .corpus import PROBLEM_ROWS, Case

TOLERANCE = 1e-4  # gate 3's atol = rtol
PLAIN = ""  # the graph's own random inputs


@dataclass
class ProbeOutcome:
    input_set: str  # PLAIN for the graph's own inputs
    tolerance_ok: bool  # NaN/Inf positions and atol/rtol (compare_outputs)
    structure_ok: bool  # error_structure (True where the input set skips it)
    reason: str

    @property
    def ok(self) -> bool:
        return self.tolerance_ok and self.structure_ok


def _reference(graph_path: str, device: str) -> Any:
    from kernelopt_core.gates.float64_reference import find_fx_graph_runnable, load_reference

    path = find_fx_graph_runnable(graph_path, None)
    return load_reference(path, device) if path else None


def probe(case: Case, graph_path: str, workdir: str, input_sets: tuple[str, ...], seed: int = 0,
          device: str = "cpu") -> list[ProbeOutcome]:
    """The case's candidate against the original graph on each input set (PLAIN: the graph's inputs)."""
    import torch

    from kernelopt_core.gates.error_structure import error_structure
    from kernelopt_core.gates.input_sets import INPUT_SETS, compare_outputs, fill, is_floating
    from kernelopt_core.gates.model import clone_inputs, tensor_outputs
    from kernelopt_core.graph_module import call_graph, load_graph_module, make_inputs

    graph = parse_output_code(graph_path)
    kernel = graph.kernels[0]
    restitched, _ = write_restitched(graph, {kernel.name: case.candidate(kernel.source, kernel.name)},
                                     os.path.join(workdir, case.id))
    baseline = load_graph_module(graph_path, device)
    candidate = load_graph_module(restitched, device)
    reference = _reference(graph_path, device)
    rows_in, keeps_rows = PROBLEM_ROWS[case.problem]
    outcomes = []
    for name in input_sets:
        inputs = make_inputs(baseline, seed=seed)
        set_name, _, alone = name.partition("@")  # "zeros@1": the second floating input alone
        input_set = INPUT_SETS[set_name] if set_name else None
        if input_set is not None:
            floating = [t for t in inputs if isinstance(t, torch.Tensor) and is_floating(t.dtype)]
            for tensor in [floating[int(alone)]] if alone else floating:
                fill(tensor, input_set, seed=seed, row_length=rows_in)
        expected = tensor_outputs(call_graph(baseline, clone_inputs(inputs)))
        got = tensor_outputs(call_graph(candidate, clone_inputs(inputs)))
        r64 = tensor_outputs(reference(clone_inputs(inputs))) if reference is not None else [None] * len(expected)
        problems = []
        tolerance_ok = structure_ok = True
        for index, (c, o, r) in enumerate(zip(got, expected, r64, strict=True)):
            compared = compare_outputs(c, o, atol=TOLERANCE, rtol=TOLERANCE)
            if not compared.ok:
                tolerance_ok = False
                problems.append(f"output {index}: {compared.reason}")
            if o.is_floating_point() and (input_set is None or input_set.error_structure):
                structure = error_structure(c, o, r.to(o.device) if r is not None else None,
                                            row_length=rows_in if keeps_rows else None)
                if not structure.passed:
                    structure_ok = False
                    problems.append(f"output {index}: {structure.reason}")
        outcomes.append(ProbeOutcome(name, tolerance_ok, structure_ok, "; ".join(problems) or "matches"))
    return outcomes


def probe_in_subprocess(graphs: dict[str, str], plan: dict[str, tuple[str, ...]], workdir: str,
                        timeout_s: float = 1800.0) -> dict[str, list[ProbeOutcome]]:
    """Run :func:`probe` for ``plan`` (case id -> input sets) in a fresh process on the CPU backend:
    the candidates never run in the caller, and Triton starts there with the interpreter on."""
    from .runner import run_probe_module

    spec = {"graphs": graphs, "plan": {k: list(v) for k, v in plan.items()}, "workdir": workdir}
    raw = run_probe_module("tests.adversarial.input_set_probe", spec, "@probe-results", "the input-set probe", timeout_s)
    return {case_id: [ProbeOutcome(**o) for o in outcomes] for case_id, outcomes in raw.items()}


def _main(argv: list[str]) -> int:
    import json
    from dataclasses import asdict

    from kernelopt_core.backends import cpu_triton

    cpu_triton.activate()  # before anything imports Triton
    import torch

    from .corpus import CASES

    torch.set_num_threads(1)  # tiny tensors: one thread is faster on a shared machine
    spec = json.loads(argv[0])
    by_id = {case.id: case for case in CASES}
    results = {}
    for case_id, input_sets in spec["plan"].items():
        case = by_id[case_id]
        try:
            outcomes = probe(case, spec["graphs"][case.problem], spec["workdir"], tuple(input_sets))
        except Exception as exc:  # noqa: BLE001 - reported per case, the others still run
            outcomes = [ProbeOutcome("error", False, False, f"{type(exc).__name__}: {exc}")]
        results[case_id] = [asdict(o) for o in outcomes]
    print("@probe-results " + json.dumps(results))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
