"""Re-stitching and the four-gate verification cascade (see docs/gates.md).

Importing this package never imports torch: the heavy work runs in worker tasks
(:mod:`kernelopt_core.gates.tasks`) and a Triton compile subprocess (:mod:`.ptx_compile`).
"""

from .cascade import CascadeSetupError, run_cascade, run_static_gate
from .registry import GATE_NAMES, GATES
from .restitch import RestitchError, restitch, unified_diff, write_restitched
from .verdict import CascadeConfig, CascadeResult, GateVerdict

# What the gates can check today. The adversarial corpus skips (and names) the cases that need
# something not listed here; whoever lands a capability adds its name:
#   "gate1-resolution"     gate 1 resolves every name against a listed namespace (static_resolution.py)
#   "launcher-dialect"     gate 1 checks launcher modules and compiles their kernels (static_launcher.py)
#   "launcher-candidates"  gates 2-4 load and run launcher candidates (kernelopt_core/launchers.py)
#   "input-sets"           gates 2 and 3 run the input sets of input_sets.py and compare with its rule
#   "error-structure"      gates 2 and 3 reject systematic bias and outlying elements (error_structure.py)
#   "guard-range"          gate 2's guards cover the largest offset a launch can form
#   "scratch-guards"       gate 2 guards and poisons a launcher's scratch like an output
#   "containment"          each candidate runs in a fresh, resource-limited process it cannot escape
#   "one-input-sets"       gate 2 also runs the input sets in each floating input alone (kernel.one_input_sets)
#   "race-rule"            gate 1 rejects a load of what the same program stored without a barrier (static_reloads.py)
#   "per-input-draws"      gate 2's input sets give each floating input its own draw (kernel.all_input_sets)
#   "structured-input-sets" gate 2 runs sign blocks, sorted/repeated/leading-max/sparse rows and the candidate's
#                          constants for a candidate that adds decisions (structured_input_sets.py)
#   "magnitude-sweep"      gate 2 sweeps 1e-30..1e30 per group of rows against the original's own rounding there
#   "aliasing-run"         gate 2 passes one tensor for every same-layout input once (kernel.alias_sets)
#   "stale-unlike-answer"  gate 2's stale-output run starts from outputs wrong at every element
#   "decision-coverage"    every decision a candidate adds is seen both ways, or it is "not verified" (decisions.py)
#   "pointer-rule"         gate 1 rejects control flow on addresses
#   "write-only-rule"      gate 1 rejects reads of a buffer the original only writes
CAPABILITIES: frozenset[str] = frozenset({"gate1-resolution", "launcher-dialect", "launcher-candidates", "input-sets",
                                         "error-structure", "guard-range", "scratch-guards", "containment",
                                         "one-input-sets", "race-rule", "per-input-draws", "structured-input-sets",
                                         "magnitude-sweep", "aliasing-run", "stale-unlike-answer",
                                         "decision-coverage", "pointer-rule", "write-only-rule"})

__all__ = [
    "CAPABILITIES", "GATES", "GATE_NAMES", "CascadeConfig", "CascadeResult", "CascadeSetupError", "GateVerdict", "RestitchError",
    "restitch", "run_cascade", "run_static_gate", "unified_diff", "write_restitched",
]
