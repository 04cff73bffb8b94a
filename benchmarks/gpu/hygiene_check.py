"""Nothing outlives a bench problem (issue 26), on the GPU: a three-problem ``kernelopt bench``
campaign through the CLI whose middle problem is timed out while its worker holds device memory
mid-job; after each problem, the processes left and the device memory against the baseline.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT hygiene_check:600
    PYTHONPATH=.:server python3 benchmarks/gpu/hygiene_check.py OUT_DIR       # alone (also on the CPU)

The middle problem is made to hold: its model set-up runs a worker job (:func:`hold_memory_task`)
that allocates ``KERNELOPT_HYGIENE_HOLD_GIB`` (16) GiB on the GPU and sleeps, as the optimizer's
worker did when the campaign of the issue lost 103 GB to a timed-out problem. The campaign's
``--timeout`` (``KERNELOPT_HYGIENE_TIMEOUT_S``: 180 s on the GPU, 150 s on the CPU) ends it. The
two real problems around it run the optimizer with a small beam (``--no-optimize`` on the CPU,
where the interpreter is slow, and with ``KERNELOPT_HYGIENE_OPTIMIZE=0``); the third must run normally.

Recorded: at the baseline, at each problem's end (seen on the campaign's event stream) and after
the campaign: the device memory in use (nvidia-smi; this process never initialises CUDA) and every
process of ours still running (a /proc scan for the environment variable the campaign's processes
inherit: orphans included, the next problem's own processes excluded); beside them the bench's own check of each problem
(``processes_ended``, ``device_memory``). Success: ``ok`` true, i.e. the middle problem timed out
mid-job, the bench ended its worker, the bench found the device memory back at its baseline after
every problem, the third problem ran, nothing of ours was left after any problem, and after the
campaign the memory in use is within 256 MiB of the baseline; and, on a GPU, the memory reading taken
while the middle problem holds its memory shows it (a reader that always said 0 would prove nothing).
Processes seen after a problem count only if they are still there 2 s later (the bench's own nvidia-smi
read is not a leftover). On the CPU the memory part is a note (no nvidia-smi).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.gpu.devicescript import environment, table, write_record  # noqa: E402 - after the path is set

HOLD_GIB = float(os.environ.get("KERNELOPT_HYGIENE_HOLD_GIB", "16"))
GPU_PROBLEMS = ("level1/leaky_relu_softplus.py", "level1/rms_norm.py")  # about 35 s each in the H200 campaign
CPU_PROBLEMS = ("tiny/scale_shift_relu.py", "tiny/row_softmax.py")
SMALL_BEAM = ["--beam-width", "1", "--iterations", "1", "--plans", "1", "--retries", "1",
              "--optimizer-option", "use_ncu=false", "--optimizer-option", "finalists=1"]
MEMORY_TOLERANCE_MIB = 256.0
RUN_ENV = "KERNELOPT_HYGIENE_RUN"  # marks every process of the campaign (inherited environment)

HOLDER = '''"""Holds device memory in the optimizer's worker, mid-job, until the bench times the problem out."""
import torch

from kernelopt_core.measure.worker import get_worker

LEVEL = 1


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    worker = get_worker("cuda:0" if torch.cuda.is_available() else "cpu")
    worker.call("benchmarks.gpu.hygiene_check:hold_memory_task", {{"gib": {gib}, "marker": {marker!r}}},
                timeout_s=36000)
    return []
'''


def hold_memory_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Inside the worker: hold ``gib`` GiB of device memory (a quarter GiB of host memory on the CPU),
    say so in ``marker``, and sleep until ended."""
    import torch

    from kernelopt_core.measure.task_context import worker_device

    device = worker_device()
    gib = float(payload["gib"]) if device.startswith("cuda") else 0.25
    held = torch.ones(int(gib * 2**30), dtype=torch.uint8, device=device)
    with open(payload["marker"], "w", encoding="utf-8") as handle:
        json.dump({"worker": os.getpid(), "device": device, "bytes": held.numel()}, handle)
    time.sleep(36000)
    return {}


def _ours(tag: str) -> dict[int, str]:
    """Every process of this campaign still running: the ones whose environment carries ``tag``
    (inherited by everything the bench starts; orphans re-parented to init included, other users'
    and other runs' processes not), from /proc."""
    marker = f"{RUN_ENV}={tag}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().decode("utf-8", "replace").rsplit(")", 1)[-1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if state != "Z":
            found[int(entry)] = command[:200]
    return found


def _memory(gpu: str | None, baseline: float | None) -> dict[str, Any]:
    from kernelopt_core.bench.device_memory import NoReader, read_nvidia_smi

    if gpu is None:
        return {"note": "no GPU (nvidia-smi not found or failed): device memory not read"}
    try:
        reading = read_nvidia_smi(gpu)
    except NoReader as exc:
        return {"note": str(exc)}
    return {"used_mib": reading.used_mib, "over_baseline_mib": None if baseline is None else reading.used_mib - baseline,
            "processes": [p.describe() for p in reading.processes]}


def _left(tag: str, bench_pid: int, running: str | None, confirm_s: float = 2.0) -> dict[int, str]:
    """Our processes other than the bench itself and the problem now running (``running``: its name)
    that are still there ``confirm_s`` later: a short-lived command the bench itself runs at that moment
    (its nvidia-smi memory read, seen on the H200) is not a leftover."""
    from kernelopt_core.process_lifetime import descendants

    def look() -> dict[int, str]:
        ours = _ours(tag)
        ours.pop(bench_pid, None)
        for pid, command in list(ours.items()):
            if "kernelopt_core.bench.problem_main" in command and running and \
                    f"/{running.replace('/', '__')}/" in command:
                for below in [pid, *descendants(pid)]:
                    ours.pop(below, None)
        return ours

    first = look()
    if not first:
        return first
    time.sleep(confirm_s)
    again = look()
    return {pid: command for pid, command in first.items() if again.get(pid) == command}


def _watch_the_hold(marker: str, gpu: str | None, base_mib: float | None, seen: dict[str, Any],
                    stop: threading.Event) -> None:
    """Once the holder says it holds its memory, read the device memory: the reading that shows the bench's
    memory check can see what a leftover would hold (a reader that always said 0 would prove nothing)."""
    while not stop.is_set():
        if os.path.exists(marker):
            time.sleep(1.0)  # the allocation is done before the marker is written; let the reading settle
            seen.update(_memory(gpu, base_mib))
            return
        stop.wait(0.5)


def _gpu() -> str | None:
    from kernelopt_core.bench.device_memory import NoReader, read_nvidia_smi

    gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    try:
        read_nvidia_smi(gpu)
    except (NoReader, OSError):
        return None
    return gpu


def run(out_dir: str) -> dict[str, Any]:
    from kernelopt_core.events import parse_event_line

    os.makedirs(out_dir, exist_ok=True)
    gpu = _gpu()
    suite, campaign = os.path.join(out_dir, "suite"), os.path.join(out_dir, "campaign")
    shutil.rmtree(suite, ignore_errors=True)
    shutil.rmtree(campaign, ignore_errors=True)
    os.makedirs(suite)
    marker = os.path.join(out_dir, "holder_mid_job.json")
    if os.path.exists(marker):
        os.unlink(marker)
    real = GPU_PROBLEMS if gpu else CPU_PROBLEMS
    names = ["a_first", "b_holds_memory_mid_job", "c_after"]  # the suite runs in name order
    shutil.copy(os.path.join(ROOT, "benchmarks", "problems", real[0]), os.path.join(suite, names[0] + ".py"))
    with open(os.path.join(suite, names[1] + ".py"), "w", encoding="utf-8") as handle:
        handle.write(HOLDER.format(gib=HOLD_GIB, marker=marker))
    shutil.copy(os.path.join(ROOT, "benchmarks", "problems", real[1]), os.path.join(suite, names[2] + ".py"))
    timeout_s = float(os.environ.get("KERNELOPT_HYGIENE_TIMEOUT_S", "180" if gpu else "150"))
    command = [sys.executable, "-m", "kernelopt_core.cli.main", "bench", suite, "--out", campaign, "--events",
               "--no-plot", "--timeout", str(timeout_s), "--device", "cuda" if gpu else "cpu"]
    # KERNELOPT_HYGIENE_OPTIMIZE=0: the real problems only measure (their workers still start and end)
    optimize = gpu and os.environ.get("KERNELOPT_HYGIENE_OPTIMIZE", "1") != "0"
    command += SMALL_BEAM if optimize else ["--no-optimize"] + ([] if gpu else ["--scale", "tiny"])
    tag = f"{os.getpid()}-{time.time_ns()}"
    baseline = _memory(gpu, None)
    base_mib = baseline.get("used_mib")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
           RUN_ENV: tag}
    started = time.monotonic()
    snapshots: list[dict[str, Any]] = []
    during_hold: dict[str, Any] = {}
    stop_watch = threading.Event()
    watcher = threading.Thread(target=_watch_the_hold, args=(marker, gpu, base_mib, during_hold, stop_watch),
                               daemon=True)
    watcher.start()
    with open(os.path.join(out_dir, "bench_stderr.log"), "w", encoding="utf-8") as log:
        bench = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        assert bench.stdout is not None
        done: list[str] = []
        for line in bench.stdout:
            event = parse_event_line(line.rstrip("\n"))
            if not event or event.get("stage") != "problem-done":
                continue
            done.append(str((event.get("extra") or {}).get("problem")))
            following = names[len(done)] if len(done) < len(names) else None
            snapshots.append({"after": done[-1], "at_s": round(time.monotonic() - started, 1),
                              "left": _left(tag, bench.pid, following), "memory": _memory(gpu, base_mib)})
            print(f"[hygiene] after {done[-1]}: {len(snapshots[-1]['left'])} process(es) left, "
                  f"memory {snapshots[-1]['memory']}", flush=True)
        code = bench.wait()
    stop_watch.set()
    watcher.join(timeout=5.0)
    time.sleep(2.0)  # the driver frees a dead context within moments
    final = {"left": _ours(tag), "memory": _memory(gpu, base_mib)}
    problems = _problems(campaign)
    holder = problems.get(names[1], {})
    over = final["memory"].get("over_baseline_mib")
    checks = {
        "exit_status_0": code == 0,
        "holder_reached_mid_job": os.path.exists(marker),
        "holder_timed_out": holder.get("category") == "timeout",
        "holder_worker_ended_by_the_bench": bool(holder.get("processes_ended")),
        # the bench's own check, read before the next problem started (the driver's snapshots at each
        # problem's end are beside it, for the record: the next problem may already be starting then)
        "bench_saw_memory_back_after_each_problem": all((p.get("device_memory") or {}).get("released", True)
                                                        for p in problems.values()),
        "third_problem_ran": problems.get(names[2], {}).get("category") != "gpu-memory-held"
                             and problems.get(names[2], {}).get("outcome") not in (None, "error"),
        "nothing_left_after_any_problem": all(not s["left"] for s in snapshots) and not final["left"],
        "memory_back_to_baseline_after_campaign": over is None or over <= MEMORY_TOLERANCE_MIB,
        # on a GPU the reader must see the held memory, or the checks above would prove nothing
        "memory_seen_while_held": gpu is None or (during_hold.get("over_baseline_mib") or 0.0)
        >= 0.9 * HOLD_GIB * 1024,
    }
    result = {"ok": all(checks.values()), "checks": checks, "device": f"cuda (GPU {gpu})" if gpu else "cpu",
              "command": " ".join(command), "exit_status": code, "hold_gib": HOLD_GIB if gpu else 0.25,
              "timeout_s": timeout_s, "baseline": baseline, "during_hold": during_hold or None,
              "after_each_problem": snapshots, "after_campaign": final,
              "problems": problems, "wall_s": round(time.monotonic() - started, 1)}
    result["environment"] = environment("cuda" if gpu else "cpu")
    write_record(out_dir, "hygiene_check", result, "Nothing outlives its problem (issue 26)", _body(result))
    return result


def _mib(value: Any) -> str:
    return "-" if value is None else f"{float(value):g}"


def _body(result: dict[str, Any]) -> list[str]:
    """The checks, the memory while the middle problem held its memory, and after each problem."""
    held = result.get("during_hold") or {}
    lines = [f"`kernelopt {result['command'].split(' -m kernelopt_core.cli.main ', 1)[-1]}`: the middle problem "
             f"holds {result['hold_gib']:g} GiB mid-job and is timed out at {result['timeout_s']:g} s. "
             f"Wall {result['wall_s']} s.", ""]
    lines += table(("check", "passed"), [(name.replace("_", " "), "yes" if passed else "**no**")
                                         for name, passed in result["checks"].items()])
    lines += ["", f"Device memory in use (nvidia-smi): baseline {_mib(result['baseline'].get('used_mib'))} MiB; while the "
              f"middle problem held its memory {_mib(held.get('used_mib'))} MiB "
              f"({'; '.join(held.get('processes') or []) or 'no process named'}).", ""]
    rows = [(s["after"], s["at_s"], s["left"], s["memory"]) for s in result["after_each_problem"]]
    rows.append(("the campaign", result["wall_s"], result["after_campaign"]["left"], result["after_campaign"]["memory"]))
    lines += table(("after", "at s", "processes of ours left", "memory in use MiB", "over baseline MiB"),
                   [(after, at, len(left), _mib(memory.get("used_mib")), _mib(memory.get("over_baseline_mib")))
                    for after, at, left, memory in rows])
    return lines


def _problems(campaign: str) -> dict[str, dict[str, Any]]:
    """The bench's own record of each problem: outcome, what it ended, its memory check."""
    try:
        with open(os.path.join(campaign, "results.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    keys = ("outcome", "category", "reason", "wall_s", "processes_ended", "device_memory", "notes")
    return {p["name"]: {k: p.get(k) for k in keys} for p in data.get("problems", [])}


if __name__ == "__main__":
    summary = run(sys.argv[1] if len(sys.argv) > 1 else "hygiene_out")
    print(json.dumps({k: summary[k] for k in ("ok", "checks", "device", "wall_s")}, indent=1))
    sys.exit(0 if summary["ok"] else 1)
