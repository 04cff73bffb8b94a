"""A tiny program for ncu to run: ``python -m kernelopt_core.measure.run_graph --dump output_code.py``.

Runs only as its own process (imports torch). It loads the wrapper, makes inputs from the
wrapper's ``get_args()``, warms up (compilation and runtime autotuning launch kernels many times),
then opens the profiler range (cudaProfilerStart) around ``--iters`` calls, so that ncu run with
``--profile-from-start off`` sees only the steady-state launches. On the CPU backend it just runs.

It prints, on stderr, ``RUN-GRAPH-STEP <name> <seconds>`` as each step ends, ``RUN-GRAPH-TUNED <kernels>``
(the kernels that autotuned in its warm-up: none when the Inductor cache it shares with the worker holds
their tuned configs) and ``RUN-GRAPH-CLOCK started|done <wall clock>``, from which :func:`program_steps`
adds the time before its first line (ncu's start, Python's) and after its last (the exit, ncu's report).
The module's top level imports no torch: the profile's caller reads the steps with it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from ..process_lifetime import die_with_owner

STEP = "RUN-GRAPH-STEP"
TUNED = "RUN-GRAPH-TUNED"
CLOCK = "RUN-GRAPH-CLOCK"
_STEP_LINE = re.compile(rf"^{STEP} (\S+) ([0-9.]+)$", re.MULTILINE)
_TUNED_LINE = re.compile(rf"^{TUNED} ?(.*)$", re.MULTILINE)
_CLOCK_LINE = re.compile(rf"^{CLOCK} (started|done) ([0-9.]+)$", re.MULTILINE)
# methods of Inductor's CachingAutotuner that run only when a kernel tunes on its first launch
_TUNING_METHODS = ("autotune_to_one_config", "coordinate_descent_tuning")


def program_steps(text: str, started: float | None = None, ended: float | None = None) -> dict[str, float]:
    """The runner's steps, in order, from what it printed; with the wall clock at which its parent
    (ncu) was started and ended, also ``start_the_profiler_and_python`` (to its first line) and
    ``exit_and_report`` (from its last line). Empty when it printed none."""
    steps: dict[str, float] = {}
    clocks = dict(_CLOCK_LINE.findall(text))
    if started and "started" in clocks:
        steps["start_the_profiler_and_python"] = round(max(0.0, float(clocks["started"]) - started), 3)
    for name, seconds in _STEP_LINE.findall(text):
        steps[name] = round(steps.get(name, 0.0) + float(seconds), 3)
    if ended and "done" in clocks:
        steps["exit_and_report"] = round(max(0.0, ended - float(clocks["done"])), 3)
    return steps


def tuned_kernels(text: str) -> list[str] | None:
    """The kernels the runner saw autotune during its warm-up (None: it did not say)."""
    found = _TUNED_LINE.findall(text)
    if not found:
        return None
    return [name for name in found[-1].split() if name]


class _Steps:
    def __init__(self) -> None:
        self.last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        print(f"{STEP} {name} {now - self.last:.3f}", file=sys.stderr, flush=True)
        self.last = now


def _watch_tuning(module: Any) -> list[str]:
    """A list that fills with the names of the module's Inductor kernels as they autotune."""
    tuned: list[str] = []
    for name, kernel in list(vars(module).items()):
        for method in _TUNING_METHODS:
            original = getattr(kernel, method, None)
            if not callable(original) or not hasattr(kernel, "launchers"):
                continue

            def spy(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
                if _name not in tuned:
                    tuned.append(_name)
                return _original(*args, **kwargs)

            try:
                setattr(kernel, method, spy)
            except (AttributeError, TypeError):  # not an object that takes attributes: not watched
                continue
    return tuned


def main(argv: list[str] | None = None) -> int:
    print(f"{CLOCK} started {time.time():.3f}", file=sys.stderr, flush=True)
    parser = argparse.ArgumentParser(prog="kernelopt-run-graph")
    parser.add_argument("--dump", required=True, help="the output_code.py to run")
    parser.add_argument("--iters", type=int, default=1, help="profiled calls")
    parser.add_argument("--warmup", type=int, default=2, help="calls before the profiler range opens")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: what the dump was compiled for)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    die_with_owner()  # its parent is ncu: it watches the process that started ncu
    steps = _Steps()

    from ..artifacts import DumpError, parse_output_code

    try:
        graph = parse_output_code(args.dump)
    except DumpError as exc:
        print(f"run_graph: {exc}", file=sys.stderr)
        return 2
    device = args.device or graph.device or "cuda"
    import torch

    from ..graph_module import call_graph, load_graph_module, make_inputs

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(device))
        torch.empty(1, device=device)  # the CUDA context, timed apart from the graph
    steps.done("import_torch_and_start_cuda")
    module = load_graph_module(args.dump, device)
    steps.done("load_the_graph")
    inputs = make_inputs(module, args.seed)
    steps.done("make_inputs")
    tuned = _watch_tuning(module)
    for _ in range(max(0, args.warmup)):
        call_graph(module, inputs)
    if cuda:
        torch.cuda.synchronize()
    steps.done("warm_up")
    print(f"{TUNED} {' '.join(tuned)}".rstrip() if tuned else TUNED, file=sys.stderr, flush=True)
    if cuda:
        torch.cuda.profiler.start()
    begin = time.perf_counter()
    for _ in range(max(1, args.iters)):
        call_graph(module, inputs)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    elapsed = time.perf_counter() - begin
    steps.done("profiled_calls")
    print(f"run_graph: {graph.name}: {args.iters} call(s) in {elapsed * 1000:.2f} ms on {device}", file=sys.stderr)
    print(f"{CLOCK} done {time.time():.3f}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
