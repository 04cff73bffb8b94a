"""Re-stitching and the four-gate verification cascade (see docs/gates.md).

Importing this package never imports torch: the heavy work runs in worker jobs
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
#   "input-families"       gates 2 and 3 run the input families of input_families.py and compare with its rule
#   "error-structure"      gates 2 and 3 reject systematic bias and outlying elements (error_structure.py)
#   "guard-range"          gate 2's guards cover the largest offset a launch can form
#   "scratch-guards"       gate 2 guards and poisons a launcher's scratch like an output
#   "containment"          each candidate runs in a fresh, resource-limited process it cannot escape
#   "one-input-families"   gate 2 also runs the families in each floating input alone (kernel.one_input_sets)
#   "race-rule"            gate 1 rejects a load of what the same program stored without a barrier (static_reloads.py)
CAPABILITIES: frozenset[str] = frozenset({"gate1-resolution", "launcher-dialect", "launcher-candidates", "input-families",
                                         "error-structure", "guard-range", "scratch-guards", "containment",
                                         "one-input-families", "race-rule"})

__all__ = [
    "CAPABILITIES", "GATES", "GATE_NAMES", "CascadeConfig", "CascadeResult", "CascadeSetupError", "GateVerdict", "RestitchError",
    "restitch", "run_cascade", "run_static_gate", "unified_diff", "write_restitched",
]
