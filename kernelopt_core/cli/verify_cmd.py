"""``kernelopt verify DUMP --kernel NAME --candidate FILE [--json] [--events] [--device D]``.

``DUMP`` may also be a project's own kernel file (``my_kernels.py --kernel K --harness H``); the
candidate is then a kernel module or an edited copy of that file (docs/user-kernels.md).

Runs the four-gate cascade on a hand-edited (or generated) kernel and says whether it would be
accepted. Exit status: 0 accepted, 1 rejected (the graph falls back to the compiler's code),
2 the check could not run or could not verify (bad arguments, unreadable dump or candidate,
unknown kernel, no device for the graph, the check itself ran out of memory). The language
server runs this for "Verify my edit".
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import TYPE_CHECKING, Any

from .common import DEVICE_HELP, console, err_console, fail, output_result

if TYPE_CHECKING:
    from ..artifacts.model import CompiledGraph
    from ..gates.verdict import CascadeResult

MAX_CANDIDATE_BYTES = 1 << 20


class VerifySetupError(Exception):
    """A problem with the inputs of the check (exit status 2)."""


def register(sub: Any) -> None:
    parser = sub.add_parser("verify", help="run the four verification gates on a candidate kernel")
    parser.add_argument("dump", metavar="PATH", help="a dump folder, one output_code.py, or your own kernel file "
                                                     "(FILE.py with @triton.jit kernels; see --harness)")
    parser.add_argument("--kernel", required=True, help="the Triton kernel the candidate replaces")
    parser.add_argument("--candidate", required=True, help="a file with the full candidate kernel module source; "
                                                           "for your own kernel file also an edited copy of that "
                                                           "file (its kernel, or its launch site alone)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--gates", default="1,2,3,4", help="which gates to run, e.g. 1,2,3 (default: all four)")
    parser.add_argument("--workdir", help="where the re-stitched output_code.py (or your kernel's candidate module) "
                                          "goes, kept after the command (default: a temporary folder, removed "
                                          "when the command ends)")
    parser.add_argument("--min-speedup", type=float, default=1.03, help="gate 4 threshold (default 1.03)")
    parser.add_argument("--diff", action="store_true", help="also print the unified diff of the re-stitched graph "
                                                            "(of your file, for a project's own kernel)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--events", action="store_true", help="stream @kernelopt-event JSON lines on stdout")
    from ..userkernels.cli import add_harness_argument

    add_harness_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The check, in ``--workdir`` when given (kept), else in a temporary folder that goes with the
    command, whatever way it ends."""
    if args.workdir:
        return _run(args)
    with tempfile.TemporaryDirectory(prefix="kernelopt-verify-") as folder:
        args.workdir, args.workdir_is_temporary = folder, True
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..events import CancelledError, EventSink, heartbeat, json_line_sink
    from ..gates.cascade import CascadeSetupError, run_cascade
    from ..gates.verdict import CascadeConfig

    sink = json_line_sink() if args.events else EventSink()
    from ..userkernels.cli import is_user_kernel_path

    if is_user_kernel_path(args.dump):  # a project's own @triton.jit kernel (docs/user-kernels.md)
        return _run_user_kernel(args, sink)
    try:
        graph = find_graph(args.dump, args.kernel)
        candidate = read_candidate(args.candidate)
        gates = parse_gates(args.gates)
        if args.min_speedup <= 0:
            raise VerifySetupError(f"--min-speedup must be positive, got {args.min_speedup}")
    except VerifySetupError as exc:
        return _could_not_run(args, str(exc), None)
    config = CascadeConfig(device=args.device, run_gates=gates, workdir=args.workdir, min_speedup=args.min_speedup)
    try:
        if args.events:
            with heartbeat(sink, 10.0) as beating:
                result = run_cascade(graph, {args.kernel: candidate}, config, sink=beating)
        elif args.json:
            result = run_cascade(graph, {args.kernel: candidate}, config, sink=sink)
        else:
            with console.status(f"verifying {args.kernel} ..."):
                result = run_cascade(graph, {args.kernel: candidate}, config, sink=sink)
    except CascadeSetupError as exc:
        return _could_not_run(args, str(exc), exc.partial)
    except CancelledError as exc:
        return _could_not_run(args, str(exc), None)
    _forget_temporary_paths(args, result)
    output_result(args, _result_json(result), lambda: print_report(result, show_diff=args.diff))
    if result.could_not_verify:
        # Not a rejection: the check itself failed (e.g. it ran out of memory). Exit 2, like any
        # check that could not run.
        return fail(f"could not verify: {result.reason}")
    return 0 if result.accepted else 1


def _run_user_kernel(args: argparse.Namespace, sink: Any) -> int:
    from ..events import CancelledError
    from ..gates.cascade import CascadeSetupError
    from ..userkernels.cli import verify_user_kernel

    try:
        candidate = read_candidate(args.candidate)
        gates = parse_gates(args.gates)
        if args.min_speedup <= 0:
            raise VerifySetupError(f"--min-speedup must be positive, got {args.min_speedup}")
        if args.events or args.json:
            result = verify_user_kernel(args, candidate, gates, sink, VerifySetupError)
        else:
            with console.status(f"verifying {args.kernel} ..."):
                result = verify_user_kernel(args, candidate, gates, sink, VerifySetupError)
    except VerifySetupError as exc:
        return _could_not_run(args, str(exc), None)
    except CascadeSetupError as exc:
        return _could_not_run(args, str(exc), exc.partial)
    except CancelledError as exc:
        return _could_not_run(args, str(exc), None)
    _forget_temporary_paths(args, result)
    output_result(args, _result_json(result), lambda: print_report(result, show_diff=args.diff, user=True))
    if result.could_not_verify:
        return fail(f"could not verify: {result.reason}")
    return 0 if result.accepted else 1


def _result_json(result: CascadeResult) -> dict[str, Any]:
    data = result.to_json()
    data["correct_not_faster"] = correct_not_faster(result)
    return data


def _forget_temporary_paths(args: argparse.Namespace, result: CascadeResult) -> None:
    """The re-stitched graph is removed with the temporary folder: do not point at it."""
    if getattr(args, "workdir_is_temporary", False):
        result.restitched_path = None


def _could_not_run(args: argparse.Namespace, message: str, partial: CascadeResult | None) -> int:
    from ..userkernels.cli import is_user_kernel_path

    data: dict[str, Any] = {"accepted": False, "failed_gate": None, "error": message, "could_not_run": True,
                            "gates": partial.to_json()["gates"] if partial is not None else []}
    user = is_user_kernel_path(args.dump)
    output_result(args, data, lambda: print_report(partial, show_diff=False, user=user) if partial is not None
                  else None)
    return fail(f"the check could not run: {message}")


def find_graph(dump: str, kernel: str) -> CompiledGraph:
    from ..artifacts import DumpError, discover, parse_output_code

    if not os.path.exists(dump):
        raise VerifySetupError(f"{dump}: no such file or folder")
    if os.path.isfile(dump):
        try:
            graphs = [parse_output_code(dump)]
        except DumpError as exc:
            raise VerifySetupError(str(exc)) from None
    else:
        graphs, problems = discover(dump)
        if not graphs:
            detail = f" ({problems[0]})" if problems else ""
            raise VerifySetupError(f"no Inductor dumps found under {dump}{detail}")
    matching = [g for g in graphs if g.kernel(kernel) is not None]
    if not matching:
        known = sorted({k.name for g in graphs for k in g.kernels})
        raise VerifySetupError(f"no graph under {dump} has a Triton kernel named {kernel} "
                               f"(kernels: {', '.join(known) or 'none'})")
    if len(matching) > 1:
        raise VerifySetupError(f"{len(matching)} graphs under {dump} have a kernel named {kernel}: "
                               f"{', '.join(g.path for g in matching)}; pass the output_code.py itself")
    return matching[0]


def read_candidate(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_CANDIDATE_BYTES:
            raise VerifySetupError(f"{path}: {size} bytes is too large for a kernel module")
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise VerifySetupError(f"{path}: cannot read the candidate: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerifySetupError(f"{path}: the candidate is not UTF-8 text") from None
    if not text.strip():
        raise VerifySetupError(f"{path}: the candidate file is empty")
    return text


def parse_gates(text: str) -> tuple[int, ...]:
    try:
        gates = tuple(sorted({int(part) for part in text.replace(" ", "").split(",") if part}))
    except ValueError:
        raise VerifySetupError(f"--gates takes numbers 1-4 separated by commas, got {text!r}") from None
    if not gates or any(g not in (1, 2, 3, 4) for g in gates):
        raise VerifySetupError(f"--gates takes numbers 1-4 separated by commas, got {text!r}")
    return gates


def correct_not_faster(result: CascadeResult) -> bool:
    """Rejected by gate 4 alone, after gates 1-3 ran and passed: correct, but not faster."""
    if result.accepted or result.could_not_verify or result.failed_gate != 4:
        return False
    passed = {v.gate for v in result.gates if v.passed}
    return {1, 2, 3} <= passed


def print_report(result: CascadeResult, show_diff: bool, user: bool = False) -> None:
    """``user``: a project's own kernel, said in its words (your file, the candidate kernel module)."""
    from rich.markup import escape
    from rich.table import Table

    slower = correct_not_faster(result)
    verdict = "[bold green]ACCEPTED[/bold green]" if result.accepted else (
        "[bold yellow]COULD NOT VERIFY[/bold yellow]" if result.could_not_verify else
        "[bold yellow]CORRECT, NOT FASTER[/bold yellow]" if slower else "[bold red]REJECTED[/bold red]")
    console.print(f"{verdict} {escape(', '.join(result.kernels))} in {escape(result.graph_path or '')}")
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("gate")
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("reason")
    for v in result.gates:
        mark = "[green]pass[/green]" if v.passed else (
            "[yellow]could not verify[/yellow]" if v.could_not_verify else "[red]FAIL[/red]")
        table.add_row(f"{v.gate} {v.name}", mark, f"{v.seconds:.1f} s", escape(v.reason))
    console.print(table)
    model = result.verdict(3)
    if model is not None and model.numbers.get("d_ref") is not None:
        n = model.numbers
        rho = f"{n['rho']:.3g}" if n.get("rho") is not None else "n/a"
        console.print(f"float64 fallback: d_ref={n['d_ref']:.3g}  d_opt={n['d_opt']:.3g}  rho={rho}")
    if result.speedup is not None and result.ci is not None:
        console.print(f"end-to-end speedup {result.speedup:.3f}x (95% CI {result.ci[0]:.3f}-{result.ci[1]:.3f}) "
                      f"through {result.timing_path}")
    for name, speedup in result.kernel_speedups.items():
        console.print(f"  kernel alone {escape(name)}: {speedup:.3f}x (reported, never decides)")
    if not result.accepted:
        kept = "your file keeps its kernel" if user else "the graph keeps the compiler's kernel"
        failed = result.verdict(result.failed_gate) if result.failed_gate else None
        if slower:
            passed = [str(v.gate) for v in result.gates if v.passed]
            console.print(f"[yellow]correct, not faster:[/yellow] gates {', '.join(passed)} passed (the candidate "
                          f"computes what the original does), gate 4 found it not faster; {kept}. For a "
                          f"correctness-only check: the same command with --gates {','.join(passed)}",
                          soft_wrap=True, highlight=False)
        elif failed is not None:  # its reason is the table's row: said once
            console.print(f"[yellow]fallback:[/yellow] rejected by gate {failed.gate} ({failed.name}), its reason in "
                          f"the table above; {kept}", soft_wrap=True, highlight=False)
        else:
            console.print(f"[yellow]fallback:[/yellow] {escape(result.reason)}; {kept}", soft_wrap=True)
    if result.quarantined:
        console.print("[bold red]quarantined:[/bold red] the candidate tried to write a file or open a socket "
                      "from its contained process")
    for note in result.notes:
        err_console.print(f"[yellow]note[/yellow] {escape(note)}")
    if result.restitched_path:
        what = "candidate kernel module" if user else "re-stitched graph"
        console.print(f"{what}: {escape(result.restitched_path)}")
    else:
        what = "candidate kernel module" if user else "re-stitched graph"
        console.print(f"{what}: not kept (pass --workdir DIR to keep it)", style="dim")
    if show_diff and result.diff:
        console.print(escape(result.diff), highlight=False, soft_wrap=True)
