"""compute-sanitizer on a user kernel's finalist: the user's harness run once with the candidate (GPU only).

Gate 3 of a user kernel runs memcheck and racecheck on every finalist as for Inductor's: command,
report reading, time limit and wording are :mod:`kernelopt_core.gates.sanitize`'s. Only the target
differs: :func:`main`, run under the tool, loads the user's file and harness, contains itself with
the candidate process's policy, imports the candidate with its jit functions renamed with
``CHECKED_SUFFIX`` (only those are instrumented) where the original kernel was, and runs the
harness once on its seed-0 inputs (an autotuned candidate launches each config once).

It prints ``SANITIZE-STEP`` lines and ``SANITIZE-TARGET-OK``. On the CPU it runs as a plain process
on Triton's interpreter (the tests do). The worker side (:func:`sanitize_user_finalist`,
:func:`user_sanitizer_target`) imports nothing heavy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..gates.registry import CommonSettings
from ..gates.sanitize import (
    CHECKED_SUFFIX,
    SanitizerReport,
    SanitizerTarget,
    Steps,
    checked_source,
    not_checked,
    owns_shared_memory,
    run_target,
    sanitize_kernels,
    shared_memory_bytes,
)
from ..process_lifetime import die_with_owner
from .harness_module import write_candidate_module
from .payload import UserKernelPayload

TARGET_MODULE = "kernelopt_core.userkernels.sanitize_target"


def user_sanitizer_target(user: UserKernelPayload, device: str, folder: str) -> SanitizerTarget | str:
    """The target for the payload's candidate, its renamed module written under ``folder``; or why there
    is nothing to instrument."""
    kernel = user.kernel
    checked, renames = checked_source(user.candidate or "")
    if kernel not in renames:
        return f"the candidate defines no @triton.jit {kernel} to instrument"
    path = write_candidate_module(folder, renames[kernel], checked)
    return SanitizerTarget(TARGET_MODULE, ("--kernel-file", os.path.abspath(user.file), "--kernel", kernel,
                                           "--harness", json.dumps(user.harness), "--candidate", path,
                                           "--device", device))


def sanitize_user_finalist(user: UserKernelPayload, common: CommonSettings, compiled: dict[str, Any] | None,
                           device: str, folder: str) -> SanitizerReport:
    """memcheck and racecheck on the harness run with the candidate (on a GPU), each limited to
    ``common.sanitizer_timeout_s``; on the CPU or turned off, the note says what was not checked.
    ``compiled``: gate 1's compile numbers (racecheck runs only where the kernel uses shared memory)."""
    skipped = not_checked(device, common.sanitize)
    if skipped is not None:
        return skipped
    target = user_sanitizer_target(user, device, folder)
    if isinstance(target, str):
        return SanitizerReport([], [], f"races and stray accesses not checked: {target}")
    timeout_s = common.sanitizer_timeout_s
    kernel = user.kernel
    return sanitize_kernels([kernel], device, lambda tool, _: run_target(tool, target, timeout_s),
                            {kernel: shared_memory_bytes(compiled)},
                            owns_shared={kernel: owns_shared_memory(user.candidate or "")})


# --- under the sanitizer --------------------------------------------------------------------------


def launch_each_config_once(obj: Any) -> list[float]:
    """Make every autotuner over the candidate run each config once (wall clock; which one it then picks
    does not matter here) instead of benchmarking it. The list fills with each tried config's time (ms)."""
    from .runtime import autotuners

    tried: list[float] = []

    def one_run(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
        begin = time.perf_counter()
        kernel_call()
        tried.append((time.perf_counter() - begin) * 1e3)
        return [tried[-1]] * len(quantiles) if quantiles else tried[-1]

    for tuner in autotuners(obj):
        tuner.__dict__["do_bench"] = one_run  # an instance entry takes precedence over the cached_property
    return tried


def main(argv: list[str] | None = None) -> int:
    """Load the harness (the user's code), contain ourselves, run the harness once with the candidate."""
    parser = argparse.ArgumentParser(prog="kernelopt-user-sanitize-target")
    parser.add_argument("--kernel-file", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--harness", required=True, help="a HarnessSpec's JSON")
    parser.add_argument("--candidate", required=True, help="the candidate module, its jit functions renamed")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--scratch", required=True)
    print(f"SANITIZE-CLOCK started {time.time():.3f}", flush=True)
    args = parser.parse_args(argv)
    die_with_owner()  # its parent is compute-sanitizer: it watches the worker that started both
    steps = Steps()
    cuda = args.device.startswith("cuda")
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # a plain run on the CPU: Triton's interpreter
    import torch

    from ..sandbox.policy import SandboxPolicy, apply_policy
    from .capture import capturing
    from .harness_module import HarnessRuntime

    if cuda:
        torch.cuda.set_device(torch.device(args.device))
        torch.empty(1, device=args.device)  # the CUDA context, timed apart from the harness
    steps.done("import_torch_and_start_cuda" if cuda else "import_torch")
    runtime = HarnessRuntime(json.dumps({"kernel_file": args.kernel_file, "kernel": args.kernel,
                                         "harness": json.loads(args.harness), "device": args.device}))
    steps.done("load_the_harness")
    apply_policy(SandboxPolicy(scratch=args.scratch))
    candidate = runtime.install_candidate(args.candidate, args.kernel + CHECKED_SUFFIX)
    tried = launch_each_config_once(candidate)
    inputs = runtime.harness.make_inputs(0)
    steps.done("load_the_candidate_and_make_inputs")
    with capturing(candidate, limit=0) as capture:  # counts the candidate's launches, keeps none
        runtime.harness.run(inputs)
        if cuda:
            torch.cuda.synchronize()
    tuned = f",_{len(tried)}_config{'s' if len(tried) != 1 else ''}_tried_once" if tried else ""
    steps.done(f"run_the_harness_({capture.count}_launch{'es' if capture.count != 1 else ''}{tuned})")
    if not capture.count:  # nothing was checked: never a pass
        print(f"the harness never launched the candidate's {args.kernel}", file=sys.stderr)
        return 3
    print("SANITIZE-TARGET-OK")
    print(f"SANITIZE-CLOCK done {time.time():.3f}", flush=True)
    return 0


__all__ = ["TARGET_MODULE", "launch_each_config_once", "main", "sanitize_user_finalist", "user_sanitizer_target"]


if __name__ == "__main__":
    sys.exit(main())
