"""A tiny program for ncu to run: ``python -m kernelopt_core.measure.run_graph --dump output_code.py``.

Runs only as its own process (imports torch). It loads the wrapper, makes inputs from the
wrapper's ``get_args()``, warms up (compilation and runtime autotuning launch kernels many times),
then opens the profiler range (cudaProfilerStart) around ``--iters`` calls, so that ncu run with
``--profile-from-start off`` sees only the steady-state launches. On the CPU backend it just runs.
"""

from __future__ import annotations

import argparse
import sys
import time

from ..process_lifetime import die_with_owner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelopt-run-graph")
    parser.add_argument("--dump", required=True, help="the output_code.py to run")
    parser.add_argument("--iters", type=int, default=1, help="profiled calls")
    parser.add_argument("--warmup", type=int, default=2, help="calls before the profiler range opens")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: what the dump was compiled for)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    die_with_owner()  # its parent is ncu: it watches the process that started ncu

    from ..artifacts import DumpError, parse_output_code

    try:
        graph = parse_output_code(args.dump)
    except DumpError as exc:
        print(f"run_graph: {exc}", file=sys.stderr)
        return 2
    device = args.device or graph.device or "cuda"
    from ..graph_module import call_graph, load_graph_module, make_inputs

    module = load_graph_module(args.dump, device)
    import torch

    cuda = device.startswith("cuda")
    inputs = make_inputs(module, args.seed)
    for _ in range(max(0, args.warmup)):
        call_graph(module, inputs)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    begin = time.perf_counter()
    for _ in range(max(1, args.iters)):
        call_graph(module, inputs)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    elapsed = time.perf_counter() - begin
    print(f"run_graph: {graph.name}: {args.iters} call(s) in {elapsed * 1000:.2f} ms on {device}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
