"""Stand-ins for gate 2's two sides, so :func:`check_kernel` runs without the Triton interpreter.

``TorchKernel`` plays the original kernel (``run(*args)`` computes a row softmax with torch, in
place into its output argument); ``InProcessCandidate`` plays the candidate's contained process:
it answers ``run_kernel`` by mapping the exchange buffers the checker laid out, as the real
process does, and running a torch function on them. Tests give the candidate a behaviour (correct,
stale, nondeterministic, wrong on some input set) and check what gate 2 says, in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernelopt_core.sandbox.exchange import SharedRef, TensorView, open_shared, view_of

Behaviour = Callable[[torch.Tensor, torch.Tensor, int], None]  # (input, output, call number) -> writes output


def softmax_rows(x: torch.Tensor, out: torch.Tensor, _call: int) -> None:
    out.copy_(torch.softmax(x, dim=-1))


class TorchKernel:
    """The original: ``run(in_ptr0, out_ptr0, xnumel, r0_numel, stream=...)``."""

    def __init__(self, behaviour: Behaviour = softmax_rows):
        self.behaviour = behaviour
        self.calls = 0

    def run(self, x: torch.Tensor, out: torch.Tensor, *_: Any, **__: Any) -> None:
        self.behaviour(x, out, self.calls)
        self.calls += 1


class InProcessCandidate:
    """Answers the checker's ``run_kernel`` and ``memory`` requests in this process."""

    closed = False
    pid = 0

    def __init__(self, behaviour: Behaviour = softmax_rows):
        self.behaviour = behaviour
        self.calls = 0
        self.requests: list[str] = []

    def call(self, command: str, timeout_s: float = 600.0, **payload: Any) -> dict[str, Any]:
        self.requests.append(command)
        if command == "memory":
            return {"ok": True, "peak_bytes": None}
        assert command == "run_kernel", command
        shared = [SharedRef.from_json(r) for r in payload["refs"]]
        args = [view_of(open_shared(shared[a["view"]["buffer"]]), TensorView.from_json(a["view"]))
                if isinstance(a, dict) and "view" in a else a for a in payload["args"]]
        self.behaviour(args[0], args[1], self.calls)
        self.calls += 1
        return {"ok": True}


def softmax_launch(rows: int, columns: int, seed: int = 0) -> tuple[list[Any], list[str], list[str]]:
    """(values, names, roles) of one captured launch of a row softmax."""
    generator = torch.Generator().manual_seed(seed)
    values: list[Any] = [torch.randn(rows, columns, generator=generator), torch.empty(rows, columns), rows, columns]
    return values, ["in_ptr0", "out_ptr0", "xnumel", "r0_numel"], ["input", "output", "scalar", "scalar"]


__all__ = ["InProcessCandidate", "TorchKernel", "softmax_launch", "softmax_rows"]
