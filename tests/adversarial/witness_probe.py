"""Run a corpus case's witness: the candidate and the original graph on one crafted input, judged by gate 3's
own rule (:func:`kernelopt_core.gates.model.check_seed`: atol = rtol = 1e-4, then the float64 ratio against the
graph's float64 reference).

A wrong case's witness must show it wrong (the rule fails); a correct case's witness, an input that takes its
unusual path, must show it right. The witness may alias two inputs (the same tensor passed twice), hand the
candidate the output buffer of an earlier call (``stale``: what a caching allocator does), or place the output
buffer in memory (``output_at``). The graphs run in a fresh process on the CPU backend (the candidates never run
in the caller). Imports torch only in that process.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.restitch import write_restitched

from .edits import Case, Witness

TOLERANCE = 1e-4  # gate 3's atol = rtol


@dataclass
class WitnessOutcome:
    case_id: str
    matches: bool  # the candidate's outputs pass gate 3's rule against the original's
    reason: str
    max_abs_diff: float
    error: str | None = None  # the witness could not run: neither shown wrong nor right


def _arguments(witness: Witness, inputs: list[Any]) -> list[Any]:
    args = list(inputs)
    if witness.alias is not None:
        i, j = witness.alias
        args[j] = args[i]
    return args


def _call(module: Any, args: list[Any], buffer: Any | None) -> Any:
    """Call the graph; ``buffer`` (if given) is what its wrapper's one output allocation returns."""
    if buffer is None:
        return module.call(list(args))
    allocate = module.empty_strided_cpu
    handed = []

    def give(size: Any, stride: Any, dtype: Any) -> Any:
        if handed:
            return allocate(size, stride, dtype)
        handed.append(True)
        if tuple(buffer.shape) != tuple(size) or tuple(buffer.stride()) != tuple(stride) or buffer.dtype != dtype:
            raise ValueError(f"the witness's buffer is {tuple(buffer.shape)} {buffer.dtype}, the wrapper allocates "
                             f"{tuple(size)} {dtype}")
        return buffer

    module.empty_strided_cpu = give
    try:
        return module.call(list(args))
    finally:
        module.empty_strided_cpu = allocate


def run_witness(case: Case, graph_path: str, workdir: str) -> WitnessOutcome:
    import torch

    from kernelopt_core.gates.float64_reference import find_fx_graph_runnable, load_reference
    from kernelopt_core.gates.model import check_seed, tensor_outputs
    from kernelopt_core.graph_module import load_graph_module, make_inputs

    witness = case.witness
    if witness is None:
        raise ValueError(f"{case.id} has no witness")
    graph = parse_output_code(graph_path)
    kernel = graph.kernels[0]
    restitched, _ = write_restitched(graph, {kernel.name: case.candidate(kernel.source, kernel.name)},
                                     os.path.join(workdir, case.id))
    baseline = load_graph_module(graph_path, "cpu")
    candidate = load_graph_module(restitched, "cpu")
    reference_path = find_fx_graph_runnable(graph_path, None)
    reference = load_reference(reference_path, "cpu") if reference_path else None
    own = make_inputs(baseline, seed=0)
    inputs = witness.make(torch, own)
    args = _arguments(witness, inputs)
    buffer = None
    if witness.stale is not None:  # the candidate's own earlier output, left in the buffer it gets back
        earlier = witness.stale(torch, own)
        buffer = tensor_outputs(_call(candidate, _arguments(witness, earlier), None))[0]
    expected = _call(baseline, args, None)
    if witness.output_at is not None:
        buffer = witness.output_at(torch, inputs, tensor_outputs(expected)[0])
    got = _call(candidate, args, buffer)

    def reference_inputs() -> list[Any]:  # the float64 reference sees the same values (aliasing kept)
        return _arguments(witness, [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])

    check = check_seed(0, expected, got, TOLERANCE, reference, reference_inputs, None)
    return WitnessOutcome(case.id, check.passed, check.problem or "matches", check.max_abs_diff)


def run_in_subprocess(graphs: dict[str, str], case_ids: list[str], workdir: str,
                      timeout_s: float = 1800.0) -> dict[str, WitnessOutcome]:
    """:func:`run_witness` for each case in a fresh process on the CPU backend."""
    from .runner import run_probe_module

    spec = {"graphs": graphs, "cases": case_ids, "workdir": workdir}
    raw = run_probe_module("tests.adversarial.witness_probe", spec, "@witness-results", "the witness probe", timeout_s)
    return {case_id: WitnessOutcome(**outcome) for case_id, outcome in raw.items()}


def _main(argv: list[str]) -> int:
    from kernelopt_core.backends import cpu_triton

    cpu_triton.activate()  # before anything imports Triton
    import torch

    from .corpus import CASES

    torch.set_num_threads(1)
    spec = json.loads(argv[0])
    by_id = {case.id: case for case in CASES}
    results = {}
    for case_id in spec["cases"]:
        case = by_id[case_id]
        try:
            outcome = run_witness(case, spec["graphs"][case.problem], spec["workdir"])
        except Exception as exc:  # noqa: BLE001 - reported per case, the others still run
            outcome = WitnessOutcome(case_id, False, "", float("nan"), error=f"{type(exc).__name__}: {exc}")
        results[case_id] = asdict(outcome)
    print("@witness-results " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
