"""Nsight Compute on a user kernel: ncu runs the harness, filtered to the kernel's launches.

``python -m kernelopt_core.userkernels.ncu_run --file F --kernel K --harness-json J --device D``
is the program ncu starts (it imports the user's code and torch): it warms the harness up
(compiles and autotuning launch the kernel many times), then opens the profiler range around
``--iters`` calls, so ncu (``--profile-from-start off``) sees only steady-state launches.
:func:`profile_user_kernel_ncu` builds the ncu command line and reads its CSV (the client half
imports nothing heavy).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..measure.ncu import (
    DEFAULT_METRICS,
    DEFAULT_SECTIONS,
    KernelMetrics,
    NcuError,
    build_ncu_command,
    find_ncu,
    run_ncu,
    summarize_launches,
)
from ..process_lifetime import die_with_owner

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def profile_user_kernel_ncu(target: Any, *, sections: tuple[str, ...] = DEFAULT_SECTIONS, iters: int = 1,
                            warmup: int = 2, launches_per_call: int | None = None, python: str | None = None,
                            timeout_s: float = 600.0, cancel: threading.Event | None = None,
                            metrics: tuple[str, ...] = DEFAULT_METRICS) -> KernelMetrics | None:
    """The kernel's ncu metrics (median launch), or None when ncu saw no launch of it.
    Raises NcuNotFound / NcuPermissionDenied / NcuError."""
    program = [python or sys.executable, "-m", "kernelopt_core.userkernels.ncu_run", "--file", target.file,
               "--kernel", target.kernel, "--harness-json", json.dumps(target.harness.to_json()),
               "--device", target.device, "--iters", str(iters), "--warmup", str(warmup)]
    count = (launches_per_call or 1) * max(1, iters)
    collected = metrics
    while True:
        command = build_ncu_command(program, ncu=find_ncu(), kernels=[target.kernel], launch_count=count,
                                    sections=sections, metrics=collected)
        pythonpath = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
        try:
            run = run_ncu(command, timeout_s=timeout_s, env={"PYTHONPATH": pythonpath}, cancel=cancel,
                          cwd=os.path.dirname(target.file))
            break
        except NcuError as exc:
            unknown = [m for m in collected if m in str(exc)]
            if not unknown or (cancel is not None and cancel.is_set()) or type(exc).__name__ != "NcuError":
                raise
            collected = tuple(m for m in collected if m not in unknown)
    found = [m for m in summarize_launches(run.launches) if m.name == target.kernel or target.kernel in (m.name or "")]
    return found[0] if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelopt-user-ncu-run")
    parser.add_argument("--file", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--harness-json", required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--iters", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    die_with_owner()  # its parent is ncu: it watches the process that started ncu
    if args.device == "cpu":
        from ..backends import cpu_triton

        cpu_triton.activate()
    import torch

    from .harness import HarnessSpec, LoadedHarness
    from .runtime import prepare_kernel

    harness = LoadedHarness(HarnessSpec.from_json(json.loads(args.harness_json)), args.file, args.kernel, args.device)
    prepare_kernel(harness.kernel_object)
    inputs = harness.make_inputs(0)
    cuda = args.device.startswith("cuda")
    for _ in range(max(0, args.warmup)):
        harness.run(list(inputs))
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    begin = time.perf_counter()
    for _ in range(max(1, args.iters)):
        harness.run(list(inputs))
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"ncu_run: {args.kernel}: {args.iters} harness call(s) in {(time.perf_counter() - begin) * 1e3:.2f} ms "
          f"on {args.device}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
