"""Re-stitching and the four-gate verification cascade (see docs/gates.md).

Importing this package never imports torch: the heavy work runs in worker jobs
(:mod:`kernelopt_core.gates.jobs`) and a Triton compile subprocess (:mod:`.ptx_compile`).
"""

from .cascade import CascadeSetupError, run_cascade, run_static_gate
from .restitch import RestitchError, restitch, unified_diff, write_restitched
from .verdict import GATE_NAMES, CascadeConfig, CascadeResult, GateVerdict

__all__ = [
    "GATE_NAMES", "CascadeConfig", "CascadeResult", "CascadeSetupError", "GateVerdict", "RestitchError",
    "restitch", "run_cascade", "run_static_gate", "unified_diff", "write_restitched",
]
