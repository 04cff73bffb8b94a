"""The CLI side of user kernels: ``kernelopt profile|verify|optimize FILE.py --kernel K --harness H``.

The commands in :mod:`kernelopt_core.cli` hand a ``.py`` file that defines its own Triton kernels
(and is not an Inductor dump) to the functions here; results have the commands' usual JSON shapes,
so the language server reads them as it reads a dump's. Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..events import EventSink
from .target import TargetError, UserKernelTarget, is_user_kernel_file, user_target

HARNESS_HELP = ("for a project's own kernel (FILE.py): a zero-argument function of FILE returning (callable, "
                "inputs), a KernelBench problem file, or file.py::function; default: the file's "
                "`# kernelopt: harness=` comment")


def add_harness_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--harness", metavar="NAME|PROBLEM.py|FILE.py::NAME", help=HARNESS_HELP)


def is_user_kernel_path(path: str | None) -> bool:
    return bool(path) and is_user_kernel_file(str(path))


def target_from_args(args: argparse.Namespace, path: str) -> UserKernelTarget:
    return user_target(path, getattr(args, "kernel", None), getattr(args, "harness", None),
                       getattr(args, "device", "auto"), cwd=os.getcwd())


# --- profile ---------------------------------------------------------------------------------------


def profile_user_kernel(args: argparse.Namespace, sink: EventSink, result_type: Any, failure: Any) -> Any:
    """``kernelopt profile FILE.py``: the kernel alone and the harness timed; ncu on a GPU when it is there."""
    from ..analyst import analyze_kernel
    from ..gates.cascade import task_caller
    from ..measure.ncu import NcuError, NcuNotFound, NcuPermissionDenied
    from ..measure.traffic import LaunchArg, LaunchTraffic
    from .hints import file_hints

    try:
        target = target_from_args(args, args.path)
    except TargetError as exc:
        raise failure(str(exc)) from None
    sink.progress(f"running {target.harness.describe()} and capturing {target.kernel}", stage="profile",
                  percentage=10)
    call = task_caller(target.device, None, 900.0, sink)
    workdir = os.path.join(os.getcwd(), ".kernelopt", "user-kernels")
    reply = call("kernelopt_core.userkernels.tasks:profile_user_kernel", target.payload(workdir=workdir).to_json())
    if "setup_error" in reply:
        raise failure(str(reply["setup_error"]))
    if reply.get("could_not_verify") or "kernel_ms" not in reply:
        raise failure(str(reply.get("reason") or "the profile task failed"))
    result = result_type(source="timing", graphs=[target.file])
    result.ncu_available = False
    cpu = target.device == "cpu"
    metrics = None
    peaks = None
    if cpu:
        result.notes.append(f"{target.kernel} runs on Triton's CPU interpreter; ncu needs an NVIDIA GPU: timed in "
                            "a cpu worker instead, tier unknown")
    else:
        from ..measure.peaks import device_peaks
        from .ncu_run import profile_user_kernel_ncu

        sink.progress(f"ncu on {target.kernel}", stage="profile", percentage=50)
        try:
            metrics = profile_user_kernel_ncu(target, launches_per_call=int(reply.get("launches_per_call") or 1),
                                              cancel=sink.cancel_event)
            result.ncu_available = metrics is not None
            result.source = "ncu" if metrics is not None else "timing"
            if metrics is None:
                result.notes.append(f"ncu reported no launch of {target.kernel}")
        except (NcuNotFound, NcuPermissionDenied) as exc:
            result.notes.append(f"ncu not available: {exc}; timed instead")
        except NcuError as exc:
            result.notes.append(f"ncu failed on {target.kernel}: {exc}; timed instead")
        peaks = device_peaks(target.device, cancel=sink.cancel_event)
        result.peaks = peaks.to_json() if peaks is not None else None
    traffic = LaunchTraffic(order=0, kernel=target.kernel,
                            args=[LaunchArg.from_json(a) for a in reply.get("launch_args") or []])
    kernel_ms = float(reply["kernel_ms"])
    analysis = analyze_kernel(metrics, None, peaks, None, launch_args=traffic, duration_ms=kernel_ms,
                              duration_source="the kernel alone on its captured launch (no ncu)"
                              if metrics is None else None, cpu=cpu)
    launches = reply.get("launches") or []
    first = launches[0] if launches else {}
    per_call = int(reply.get("launches_per_call") or 1)
    analysis.evidence.append(f"harness {reply.get('harness')}: {float(reply['harness_ms']):.4f} ms per call, "
                             f"{per_call} launch(es) of {target.kernel} per call")
    if first:
        analysis.evidence.append(f"captured launch: grid {tuple(first.get('grid') or [])}, "
                                 + ", ".join(f"{k}={v}" for k, v in (first.get("meta") or {}).items())
                                 + (f"; autotune chose {first['autotune'][0]}" if first.get("autotune") else ""))
    duration_ns = metrics.duration_ns if metrics is not None and metrics.duration_ns else kernel_ms * 1e6
    row: dict[str, Any] = {
        "name": target.kernel, "graph": target.file, "kind": "user", "duration_ns": duration_ns,
        "time_share": reply.get("share"), "time_share_of": "harness", "time_share_note": reply.get("share_note"),
        "tier": analysis.tier,
        "dram_pct": metrics.dram_pct if metrics else None, "sm_pct": metrics.compute_pct if metrics else None,
        "memory_pct": metrics.memory_pct if metrics else None,
        "occupancy_pct": metrics.achieved_occupancy_pct if metrics else None,
        "registers": metrics.registers if metrics else None, "block_size": metrics.block_size if metrics else None,
        "grid_size": metrics.grid_size if metrics else None, "launches": per_call,
        "rules": [r.to_json() for r in metrics.top_rules(len(metrics.rules))] if metrics else [],
        "top_rule": analysis.top_rules[0].name if analysis.top_rules else None, "evidence": analysis.evidence,
        "directions": [d.to_json() for d in analysis.directions], "achieved": analysis.achieved,
        "source": "ncu" if metrics is not None else "timing", "timing_path": "kernel", "device": target.device,
        "harness_ms": reply.get("harness_ms"), "harness": reply.get("harness"), "grid": first.get("grid"),
        "meta": first.get("meta"), "autotune": first.get("autotune"), "user_launches": launches,
        "l2_hit_pct": metrics.l2_hit_pct if metrics else None,
        "sector_efficiency_pct": metrics.sector_efficiency_pct if metrics else None,
        **analysis.sol_fields(),
    }
    result.kernels.append(row)
    if reply.get("share_note"):
        result.notes.append(str(reply["share_note"]))
    try:
        from .parse import parse_user_kernels

        parsed = parse_user_kernels(target.file, target.text)
        for hint in file_hints(parsed):
            if hint.kernel == target.kernel and hint.severity in ("error", "warning"):
                result.notes.append(f"hint, line {hint.range.start_line + 1}: {hint.message}")
    except Exception:  # noqa: BLE001 - hints add words; the profile stands without them
        pass
    sink.progress("profile done", percentage=100, stage="profile")
    return result


# --- verify ------------------------------------------------------------------------------------------


def verify_user_kernel(args: argparse.Namespace, candidate: str, gates: tuple[int, ...], sink: EventSink,
                       setup_error: Any) -> Any:
    """``kernelopt verify FILE.py --kernel K --candidate M.py``: the four gates on a candidate kernel module,
    or on the kernel of an edited copy of FILE; a copy whose edit is at the launch site alone (another
    BLOCK, grid or num_warps at the launch) runs through the gates with its launch (:mod:`.edited_launch`)."""
    from ..gates.verdict import CascadeConfig
    from .cascade import run_user_cascade
    from .edited_file import outside_note, read_candidate

    try:
        target = target_from_args(args, args.dump)
    except TargetError as exc:
        raise setup_error(str(exc)) from None
    found = read_candidate(target, candidate)
    config = CascadeConfig(device=target.device, run_gates=gates, workdir=args.workdir, min_speedup=args.min_speedup)
    if found.outside and not found.kernel_changed:
        return _verify_launch_edit(args, target, found, candidate, config, sink, setup_error)
    result = run_user_cascade(target, found.module, config, sink)
    if found.outside:
        result.notes.append(outside_note(target, found))
    return result


def _verify_launch_edit(args: argparse.Namespace, target: UserKernelTarget, found: Any, candidate: str,
                        config: Any, sink: EventSink, setup_error: Any) -> Any:
    """The gates on an edited copy of the user's file whose kernel is unchanged: gate 2 runs the kernel with
    the edited launch against the original launch, gates 3-4 the harness with the edited copy."""
    from ..gates.cascade import task_caller
    from .cascade import run_user_cascade
    from .edited_file import launch_edit_note, write_edited_copy
    from .extract import unified_file_diff

    try:
        edited = write_edited_copy(target, candidate, os.path.join(args.workdir or os.getcwd(), "edited"))
    except (OSError, ValueError) as exc:
        raise setup_error(str(exc)) from None
    call = task_caller(target.device, None, config.job_timeout_s, sink)
    result = run_user_cascade(target, found.module, config, sink,
                              call=lambda task, payload: call(task, {**payload, "edited_file": edited}))
    label = os.path.relpath(target.file)
    result.diff = unified_file_diff(target.text, candidate, target.file.lstrip("/") if label.startswith("..")
                                    else label) or None
    unchanged = f"the candidate's {target.kernel} is the one in"
    result.notes = [note for note in result.notes if not note.startswith(unchanged)]
    result.notes.insert(0, launch_edit_note(target, found, config.run_gates))
    return result


__all__ = ["add_harness_argument", "is_user_kernel_path", "profile_user_kernel",
           "target_from_args", "verify_user_kernel"]
