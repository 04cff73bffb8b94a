"""Which process keeps a worker's exchange buffers alive (issue 26 item 5), scenario by scenario.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT ipc_retention:120
    python -m benchmarks.gpu.ipc_retention OUT_DIR          # GPU only (the CPU has no CUDA IPC to watch)

On the H200 (2026-12-02) every ``time_candidates`` job of a search left its exchange arena allocated in the
worker (one working set per candidate), while gate 2's jobs left nothing. Gate 2 shares its buffers with
one fresh candidate process; kernel timing shares them with the candidate's process and with the
baseline's long-lived timing process. This script plays each pattern in this process (standing in for
the worker) with the elementwise fixture kernel on three 64 MB buffers, and records this process's
allocator after the arena closed (``torch.cuda.ipc_collect`` included) and again after the consumer
processes were closed. A scenario that keeps memory names its holder. The last scenario is kernel timing as
it runs since (``time_kernel_pair``: each process on its own copy, in an arena of its own). Knobs: ``KERNELOPT_GPU_BUDGET_S``
(default 120), ``KERNELOPT_IPC_DEVICE`` (default cuda:0).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from benchmarks.gpu.devicescript import environment, out_dir_main, table, write_record

FIXTURE = os.path.join("tests", "fixtures", "inductor-h200-torch2.11", "elementwise", "output_code.py")
KERNEL = "triton_poi_fused_add_mul_sigmoid_sub_tanh_0"
NUMEL = 16_777_216  # the fixture's launch: three float32 tensors of this many elements


def _allocated(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    from kernelopt_core.measure.allocator_census import settled_allocated

    return settled_allocated()


def _process(device: str, graph: bool) -> Any:
    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.sandbox.process import SandboxProcess

    process = SandboxProcess.start("cuda" if device.startswith("cuda") else "cpu", device)
    try:
        if graph:  # as the baseline's timing process is: the whole graph loaded first
            reply = process.call("load_graph", path=os.path.abspath(FIXTURE))
            assert reply.get("ok"), reply
        kernel = parse_output_code(FIXTURE).kernel(KERNEL)
        assert kernel is not None
        reply = process.call("load_kernel", name=KERNEL, source=kernel.source,
                             device_str="cuda" if device.startswith("cuda") else "cpu")
        assert reply.get("ok"), reply
    except BaseException:
        process.close()  # its scratch folder goes with it
        raise
    return process


def _scenario(device: str, name: str, consumers: list[Any], command: str, close: list[Any]) -> dict[str, Any]:
    import torch

    from kernelopt_core.gates.tasks.skeleton import release_mappings as _release_mappings
    from kernelopt_core.gates.tasks.skeleton import share_inputs as _share_inputs
    from kernelopt_core.sandbox.exchange import ExchangeArena

    before = _allocated(device)
    arena = ExchangeArena(device)
    tensors = [torch.randn(NUMEL, device=device), torch.randn(NUMEL, device=device), torch.empty(NUMEL, device=device)]
    refs, args = _share_inputs(arena, tensors)
    del tensors
    args = [*args, NUMEL]
    kwargs = {"stream": "__current_stream__"}
    for process in consumers:
        if command == "repeat":
            reply = process.call("repeat", what="kernel", name=KERNEL, refs=refs, args=args, kwargs=kwargs, reps=3,
                                 flush_l2=device.startswith("cuda"))
        else:
            reply = process.call("run_kernel", name=KERNEL, refs=refs, args=args, kwargs=kwargs)
        assert reply.get("ok"), reply
    for process in consumers:
        _release_mappings(process)
    arena.close()
    after_close = _allocated(device) - before
    for process in close:
        process.close()
    after_exit = _allocated(device) - before
    return {"scenario": name, "command": command, "consumers": len(consumers),
            "retained_after_arena_close_bytes": after_close, "retained_after_processes_closed_bytes": after_exit}


def _pair_scenario(device: str, name: str, baseline: Any, candidate: Any) -> dict[str, Any]:
    """Kernel timing as the search runs it now (:func:`kernelopt_core.gates.tasks.skeleton.time_kernel_pair`)."""
    import torch

    from kernelopt_core.gates.tasks.skeleton import time_kernel_pair

    before = _allocated(device)
    values = [torch.randn(NUMEL, device=device), torch.randn(NUMEL, device=device), torch.empty(NUMEL, device=device),
              NUMEL]
    timing, peak = time_kernel_pair(baseline, candidate, device, 3, KERNEL, values, {"stream": "__current_stream__"})
    del values
    after_close = _allocated(device) - before
    candidate.close()
    return {"scenario": name, "command": "repeat", "consumers": 2, "arena_peak_bytes": peak,
            "speedup": round(timing.speedup, 3), "retained_after_arena_close_bytes": after_close,
            "retained_after_processes_closed_bytes": _allocated(device) - before}


def run(out_dir: str) -> dict[str, Any]:
    device = os.environ.get("KERNELOPT_IPC_DEVICE", "cuda:0")
    os.makedirs(out_dir, exist_ok=True)
    report: dict[str, Any] = {"environment": environment(device), "rows": []}
    if not device.startswith("cuda"):
        report["skipped"] = "GPU only: the CPU backend shares buffers through files, with no reference counts"
        write_record(out_dir, "ipc_retention", report, "Which process keeps the worker's exchange buffers",
                     report["skipped"])
        return {"skipped": report["skipped"]}

    def record(row: dict[str, Any]) -> None:
        report["rows"].append(row)
        rows = [(r["scenario"], r.get("command", "-"), r.get("consumers", "-"),
                 r.get("retained_after_arena_close_bytes", r.get("error", "-")),
                 r.get("retained_after_processes_closed_bytes", "-")) for r in report["rows"]]
        write_record(out_dir, "ipc_retention", report, "Which process keeps the worker's exchange buffers",
                     table(("scenario", "command", "consumers", "retained after arena close (bytes)",
                            "retained after the processes closed (bytes)"), rows))

    persistent = graph_holder = None
    plans = [
        ("fresh process, run_kernel (gate 2)", "run_kernel", "fresh", False),
        ("fresh process, repeat (candidate timing)", "repeat", "fresh", False),
        ("long-lived process, repeat, 1st use", "repeat", "persistent", False),
        ("long-lived process, repeat, 2nd use", "repeat", "persistent", False),
        ("long-lived graph process, repeat, 1st use (baseline timing)", "repeat", "graph", False),
        ("long-lived graph process, repeat, 2nd use", "repeat", "graph", False),
        ("fresh + long-lived graph process, repeat (time_candidates)", "repeat", "graph", True),
    ]
    try:
        for name, command, kind, with_fresh in plans:
            begin = time.monotonic()
            try:
                if kind == "persistent":
                    persistent = persistent or _process(device, graph=False)
                    consumers, close = [persistent], []
                elif kind == "graph":
                    graph_holder = graph_holder or _process(device, graph=True)
                    consumers, close = [graph_holder], []
                else:
                    consumers, close = [], []
                if kind == "fresh" or with_fresh:
                    fresh = _process(device, graph=False)
                    consumers, close = [fresh, *consumers], [fresh]
                row = _scenario(device, name, consumers, command, close)
            except Exception as exc:  # noqa: BLE001 - one scenario's failure is recorded, the rest still run
                row = {"scenario": name, "error": f"{type(exc).__name__}: {exc}"}
            row["seconds"] = round(time.monotonic() - begin, 2)
            record(row)
        begin = time.monotonic()
        try:
            graph_holder = graph_holder or _process(device, graph=True)
            row = _pair_scenario(device, "fresh + long-lived graph process, an arena each (time_kernel_pair, the fix)",
                                 graph_holder, _process(device, graph=False))
        except Exception as exc:  # noqa: BLE001
            row = {"scenario": "time_kernel_pair", "error": f"{type(exc).__name__}: {exc}"}
        row["seconds"] = round(time.monotonic() - begin, 2)
        record(row)
        for process in (persistent, graph_holder):
            if process is not None:
                before = _allocated(device)
                process.close()
                report.setdefault("freed_when_long_lived_closed_bytes", []).append(before - _allocated(device))
        record(report["rows"].pop())  # rewrite the record with the closing figures
    finally:
        for process in (persistent, graph_holder):
            if process is not None:
                process.close()
    return {"rows": len(report["rows"])}


def main(argv: list[str] | None = None) -> int:
    return out_dir_main(argv, __doc__.splitlines()[0], "KERNELOPT_IPC_DEVICE", run)


if __name__ == "__main__":
    sys.exit(main())
