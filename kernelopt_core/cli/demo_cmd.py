"""``kernelopt demo [--out DIR]``: compile, inspect and optimize the bundled example, no API key needed.

It compiles ``examples/gelu_mlp.py`` (on the GPU when there is one, else with the CPU Triton
backend), shows what Inductor wrote (vendor calls kept, Triton kernels to rewrite), optimizes it
with the offline provider on a small beam so it finishes in minutes, and prints the report and
where the run folder and diff are. This is what ``make demo`` runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .common import console, err_console, fail, print_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gelu_mlp.py"
# A small beam: minutes on 2 CPU cores (the interpreter runs a graph call in ~0.5 s).
DEMO_BEAM = {"cpu": dict(beam_width=2, iterations=2, plans=2, retries=2),
             "cuda": dict(beam_width=2, iterations=3, plans=2, retries=2)}


def register(sub: Any) -> None:
    parser = sub.add_parser("demo", help="compile, inspect and optimize the bundled example (offline, no API key)")
    parser.add_argument("--out", default="demo-out", help="folder for the dumps and the run (default demo-out)")
    parser.add_argument("--device", default="auto", help="auto (GPU when present), cpu or cuda")
    parser.add_argument("--problem", default=str(EXAMPLE), help="a KernelBench-format problem (default: the example)")
    parser.add_argument("--json", action="store_true", help="print the optimize result as JSON at the end")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..artifacts import discover
    from ..compile import ProblemError, compile_problem, resolve_device
    from ..dispatch import analyze
    from ..events import CancelledError
    from ..search.pipeline import OptimizeConfig, OptimizeError, optimize
    from .optimize_cmd import LiveProgress, print_result

    out = Path(args.out).resolve()
    if not os.path.isfile(args.problem):
        return fail(f"{args.problem}: no such problem file")
    device = resolve_device(args.device)
    mode = "max-autotune" if device.startswith("cuda") else "default"
    console.rule("[bold]1. compile")
    try:
        with console.status(f"torch.compile {Path(args.problem).name} on {device} ({mode})"):
            compiled = compile_problem(args.problem, str(out / "dumps"), mode, device)
    except ProblemError as exc:
        return fail(str(exc))
    console.print(f"compiled on {compiled.device} in {compiled.compile_s:.1f} s; max |compiled - eager| = "
                  f"{compiled.max_abs_err:.2g}")
    graphs, problems = discover(str(out / "dumps"))
    if not graphs:
        return fail(f"no dump was written under {out / 'dumps'}: {problems[:1]}")
    graph = max(graphs, key=lambda g: len(g.launches))
    console.rule("[bold]2. inspect")
    report = analyze(graph)
    console.print(f"graph {graph.name}: [green]{report.classification}[/green] ({report.evidence})")
    for item in graph.timeline():
        if hasattr(item, "kernel"):
            kernel = graph.kernel(item.kernel)  # type: ignore[union-attr]
            ops = ", ".join(op.removeprefix("aten.") for op in (kernel.aten_ops if kernel else [])[:8])
            console.print(f"  Triton  {item.kernel}  [dim]({kernel.kind if kernel else '?'}: {ops})[/dim]")  # type: ignore[union-attr]
        else:
            console.print(f"  vendor  {item.op}  [dim](kept: vendor libraries run near peak)[/dim]")  # type: ignore[union-attr]
    console.rule("[bold]3. optimize (offline provider, small beam)")
    beam = DEMO_BEAM["cuda" if compiled.device.startswith("cuda") else "cpu"]
    config = OptimizeConfig(provider="offline", device=compiled.device, run_root=str(out / "runs"), **beam)
    console.print("beam " + ", ".join(f"{k}={v}" for k, v in beam.items()) + " (reduced from B=4, T=5, N=4, K=4 "
                  "so the demo takes minutes)")
    try:
        with LiveProgress(console) as view:
            result = optimize(graph.path, config=config, sink=view.sink())
    except OptimizeError as exc:
        return fail(str(exc))
    except CancelledError:
        err_console.print("[yellow]cancelled[/yellow]")
        return 130
    data = result.to_json()
    console.rule("[bold]4. result")
    print_result(console, data)
    report_path = Path(result.run_dir) / "report.md"
    if report_path.is_file():
        from rich.markdown import Markdown

        console.rule("[bold]report.md")
        console.print(Markdown(report_path.read_text(encoding="utf-8")))
    if args.json:
        print_json(data)
    return 0
