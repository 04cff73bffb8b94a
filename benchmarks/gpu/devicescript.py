"""What every device script shares: environment, peaks, budget, the CLI, child processes, records, packing.

A device script (``benchmarks/gpu/<name>.py``) exposes ``run(out_dir) -> dict`` and is a thin
driver over the public CLI (:func:`kernelopt`) or the public Python API. This module holds what
they all need, so a script is only what it measures:

* :func:`environment`: date, Python, torch, triton, GPU(s), driver, clocks and ncu, without
  importing torch or triton (the CPU backend must set ``TRITON_INTERPRET`` first);
* :func:`measured_peaks`: the device's copy bandwidth and matmul rate, measured by the product;
* :class:`Budget`: the script's time budget, ``KERNELOPT_GPU_BUDGET_S`` (run_all.py sets it);
* ``env_*``: the scripts' environment knobs (each script's docstring lists its own);
* :func:`kernelopt`: one CLI command in its own process, its ``--json`` result parsed;
* :class:`CappedChild`: a child process killed with everything it started past its cap;
* :func:`seed_campaign`: a campaign resumed from an earlier device call's results;
* :func:`write_record`: ``<stem>.json`` and a short ``<stem>.md`` headed by the date and versions;
* :func:`pack_results`: the text results as one tarball (the device tool returns at most 8 files);
* :func:`compile_largest_graph`, :func:`time_graph`, :func:`rewrite_context`, :func:`compile_probe`:
  the in-process steps of the scripts that drive the rewrite families and the analyst directly.

Import it as ``from benchmarks.gpu.devicescript import ...``: the repository root must be on
``sys.path`` (run_all.py and ``python -m benchmarks.gpu.<name>`` from the root see to that; on the
device, ``PYTHONPATH=$PWD:$PWD/server``).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelopt_core.atomic_files import write_text_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KBSCALE = os.path.join(ROOT, "benchmarks", "problems", "kbscale")  # the KernelBench-scale memory-bound set
FIXTURE_MODELS = os.path.join(ROOT, "benchmarks", "problems", "fixture_models")  # the 9 models of the H200 dumps
FIXTURE_DUMPS = os.path.join(ROOT, "tests", "fixtures", "inductor-h200-torch2.11")  # their max-autotune dumps
BUDGET_VARIABLE = "KERNELOPT_GPU_BUDGET_S"
CLOCKS_NOTE = "none (ncu --clock-control none; GPU clocks and settings left as they are)"


# --- environment knobs ------------------------------------------------------------------------------


def env_text(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_list(name: str) -> list[str]:
    """A comma-separated knob: its non-empty items, in order."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_float(name: str, default: float) -> float:
    text = env_text(name)
    return float(text) if text else default


def env_int(name: str, default: int) -> int:
    text = env_text(name)
    return int(text) if text else default


def env_flag(name: str) -> bool:
    """A knob that is on when set to 1."""
    return env_text(name) == "1"


# --- time ---------------------------------------------------------------------------------------------


@dataclass
class Budget:
    """A script's wall-clock budget; ``clock`` is replaceable so tests need no real waiting."""

    total_s: float
    clock: Callable[[], float] = time.monotonic
    start: float = field(init=False)

    def __post_init__(self) -> None:
        self.start = self.clock()

    @classmethod
    def from_env(cls, default_s: float) -> Budget:
        """``KERNELOPT_GPU_BUDGET_S`` (run_all.py passes each script's cap), else ``default_s``."""
        return cls(env_float(BUDGET_VARIABLE, default_s))

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.total_s - self.elapsed()

    def allows(self, needed_s: float) -> bool:
        return self.left() > needed_s


# --- environment --------------------------------------------------------------------------------------


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _command_output(command: list[str], timeout_s: float = 60.0) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _ncu_version() -> str:
    from kernelopt_core.measure.ncu import NcuError, find_ncu

    try:
        ncu = find_ncu()
    except NcuError:
        return "unavailable (not found)"
    lines = (_command_output([ncu, "--version"]) or "").splitlines()
    return lines[-1] if lines else "unavailable (no version printed)"


def environment(device: str | None = None) -> dict[str, Any]:
    """Where and with what a script ran: UTC date, Python, torch, triton, each GPU's name, driver,
    clocks and temperature (nvidia-smi), ncu's version. Imports neither torch nor triton."""
    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0], "torch": _version("torch"), "triton": _version("triton"),
        "device": device, "gpu": None, "gpu_count": 0, "driver": None, "clocks": CLOCKS_NOTE,
    }
    smi = shutil.which("nvidia-smi")
    rows = _command_output([smi, "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu",
                            "--format=csv,noheader"], timeout_s=30) if smi else None
    if rows:
        gpus = [[part.strip() for part in line.split(",")] for line in rows.splitlines() if line.strip()]
        info.update(gpu=gpus[0][0], gpu_count=len(gpus), driver=gpus[0][1] if len(gpus[0]) > 1 else None,
                    nvidia_smi=rows.splitlines())
    info["ncu"] = _ncu_version() if info["gpu"] else "not looked for (no GPU)"
    return info


def environment_line(env: dict[str, Any]) -> str:
    """One markdown line: date · GPU (driver) · torch · triton · ncu · Python."""
    gpu = env.get("gpu") or f"no GPU ({env.get('device') or 'cpu'})"
    if env.get("gpu_count", 0) > 1:
        gpu = f"{env['gpu_count']}x {gpu}"
    if env.get("driver"):
        gpu += f", driver {env['driver']}"
    parts = [str(env.get("date")), gpu, f"torch {env.get('torch')}", f"triton {env.get('triton')}"]
    if env.get("gpu"):
        parts.append(f"ncu {env.get('ncu')}")
    parts.append(f"Python {env.get('python')}")
    return " · ".join(parts)


# --- device peaks ---------------------------------------------------------------------------------------


def measured_peaks(device: str, *, refresh: bool = False, in_process: bool = False) -> dict[str, Any] | None:
    """The device's copy bandwidth (2 GiB device-to-device, read + write) and bf16 matmul rate, as the
    product measures and caches them per GPU (:mod:`kernelopt_core.measure.peaks`); ``refresh``
    measures again. In a worker of its own, closed after, unless ``in_process`` (a script process that
    holds the GPU already). None on the CPU; ``{"error": ...}`` when they could not be measured."""
    if not device.startswith("cuda"):
        return None
    from kernelopt_core.measure.peaks import DevicePeaks, device_peaks, peaks_task

    try:
        if in_process:
            data = peaks_task({"device": device, "refresh": refresh})
            peaks = DevicePeaks.from_json(data) if data else None
        else:
            from kernelopt_core.measure.worker import Worker

            with Worker(device) as worker:
                peaks = device_peaks(device, worker=worker, refresh=refresh)
    except Exception as exc:  # noqa: BLE001 - recorded; the script goes on without the speed of light
        return {"error": f"{type(exc).__name__}: {exc}"}
    if peaks is None:
        return {"error": f"the peaks of {device} could not be measured"}
    return {**peaks.to_json(), "copy_GBps": round(peaks.copy_bytes_per_s / 1e9, 1),
            "matmul_TFLOPs": round(peaks.matmul_flops_per_s / 1e12, 1)}


def peaks_line(peaks: dict[str, Any] | None) -> str:
    if not peaks:
        return "Device peaks: none (no GPU)."
    if "error" in peaks:
        return f"Device peaks: {peaks['error']}."
    return (f"Device peaks: copy {peaks['copy_bytes_per_s'] / 1e9:,.0f} GB/s (2 GiB device-to-device, read + write), "
            f"bf16 matmul {peaks['matmul_flops_per_s'] / 1e12:,.0f} TFLOP/s.")


# --- records --------------------------------------------------------------------------------------------


def failure(exc: BaseException) -> dict[str, Any]:
    """An exception as a record entry (inside an ``except`` block: the traceback's tail too)."""
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object from ``path``; None when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path: str, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n", durable=False)


def cell(value: Any, spec: str = "", suffix: str = "") -> str:
    """A markdown table cell: "-" for a missing value, ``spec`` for numbers, pipes escaped."""
    if value is None or value == "":
        return "-"
    if spec and isinstance(value, (int, float)):
        return f"{value:{spec}}{suffix}"
    return f"{value}{suffix}".replace("|", "/").replace("\n", " ")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Markdown table lines; cells that are not strings yet go through :func:`cell`, and no cell can
    break the table (pipes and newlines are replaced)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = (c.replace("|", "/").replace("\n", " ") if isinstance(c, str) else cell(c) for c in row)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_record(out_dir: str, stem: str, data: dict[str, Any], title: str, body: Sequence[str]) -> None:
    """``<stem>.json`` (``data``) and ``<stem>.md``: the title, the line of ``data["environment"]``
    (date and versions), then ``body``. Scripts call it after every step, so a run stopped by its
    cap keeps what it measured."""
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, f"{stem}.json"), data)
    head = [f"# {title}", ""]
    if isinstance(data.get("environment"), dict):
        head += [environment_line(data["environment"]), ""]
    write_text_atomic(os.path.join(out_dir, f"{stem}.md"), "\n".join([*head, *body]).rstrip("\n") + "\n",
                      durable=False)


# --- processes --------------------------------------------------------------------------------------------


def seed_campaign(campaign_dir: str, earlier: str | None) -> int:
    """Copy an earlier campaign's per-problem results (its ``problems/`` folder) into ``campaign_dir``,
    so that a resumed campaign keeps them and runs only the rest: a campaign may span device calls.
    How many result files were copied (0 when ``earlier`` has none)."""
    source = os.path.join(earlier or "", "problems")
    if not earlier or not os.path.isdir(source):
        return 0
    shutil.copytree(source, os.path.join(campaign_dir, "problems"), dirs_exist_ok=True)
    return sum(1 for _, _, files in os.walk(source) for name in files if name.endswith(".json"))


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with the repository (and the language server) on PYTHONPATH."""
    paths = [ROOT, os.path.join(ROOT, "server"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


class CappedChild:
    """A child process in its own session, stopped with everything it started once it runs past
    ``cap_s``: SIGINT first (the CLI then closes its workers and keeps what it verified), SIGKILL to
    the group ``grace_s`` later."""

    def __init__(self, argv: list[str], log_path: str, cap_s: float, *, env: dict[str, str] | None = None,
                 cwd: str = ROOT, grace_s: float = 10.0, label: str = ""):
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        self.label = label
        self.cap_s = cap_s
        self.grace_s = grace_s
        self.begin = time.monotonic()
        self._log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(argv, cwd=cwd, env=env or child_env(), stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def running(self) -> bool:
        """Still running and within its cap."""
        return self.process.poll() is None and time.monotonic() - self.begin < self.cap_s

    def wait(self) -> int | None:
        """Wait for it to finish or reach its cap, then :meth:`stop`."""
        try:
            self.process.wait(timeout=max(0.0, self.cap_s - (time.monotonic() - self.begin)))
        except subprocess.TimeoutExpired:
            pass
        return self.stop()

    def stop(self) -> int | None:
        """Reap it; one still running is stopped. Its exit status, or None when it had to be stopped."""
        code = self.process.poll()
        if code is None:
            _stop_group(self.process, self.grace_s)
        self._log.close()
        return code

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.begin


def _stop_group(process: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGINT to the child's session; ``grace_s`` later, SIGKILL to everything below the child, those
    in sessions of their own too (a measurement worker, a sandbox zygote): the product's own
    :class:`~kernelopt_core.process_lifetime.ProcessTree`, which remembers them by pid."""
    from kernelopt_core.process_lifetime import ProcessTree

    tree = ProcessTree(process.pid)
    _signal_session(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    tree.end()
    try:
        process.wait(timeout=30.0)
    except subprocess.TimeoutExpired:
        pass


def _signal_session(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_capped(argv: list[str], log_path: str, cap_s: float, **options: Any) -> tuple[int | None, float]:
    """:class:`CappedChild` to the end: (exit status or None when stopped at its cap, wall seconds)."""
    child = CappedChild(argv, log_path, cap_s, **options)
    code = child.wait()
    return code, round(child.wall_s, 1)


def gates_from_env(name: str) -> tuple[int, ...]:
    """The gates a script runs its candidates through: ``name``'s comma list of 1-4, else all four."""
    gates = tuple(sorted({int(g) for g in env_list(name) if g.isdigit() and 1 <= int(g) <= 4}))
    return gates or (1, 2, 3, 4)


def run_problems_in_turn(script: str, out_dir: str, names: Sequence[str], device: str, scale: str, cap_s: float,
                         budget: Budget, results: dict[str, Any], save: Callable[[dict[str, Any]], None]) -> None:
    """Each problem in a capped child process of ``script`` (``--one NAME``, see :func:`problem_script_main`),
    one after another while ``budget`` lasts: its entry (the ``problems/NAME.json`` the child wrote, or why
    there is none) goes into ``results["problems"]``, and ``save`` records the results after each."""
    for name in names:
        left = budget.left() - 10.0
        if left < min(cap_s, 60.0):
            results["skipped"].append(f"{name}: out of time")
            continue
        limit = min(cap_s, left)
        code, wall = run_capped([sys.executable, os.path.abspath(script), out_dir, "--one", name, "--device", device,
                                 "--scale", scale, "--cap", str(limit)], os.path.join(out_dir, "logs", f"{name}.log"),
                                limit + 10.0, env=child_env())
        entry = read_json(os.path.join(out_dir, "problems", f"{name}.json"))
        if entry is None or (code not in (0, None) and "wall_s" not in entry):
            why = "ran past its cap" if code is None else f"exited with status {code}"
            entry = {**(entry or {"problem": name}), "error": f"the problem process {why}", "log": f"logs/{name}.log"}
        entry["process_wall_s"] = wall
        results["problems"][name] = entry
        save(results)


def out_dir_main(argv: list[str] | None, description: str, device_variable: str,
                 run: Callable[[str], Any]) -> int:
    """The command line of a script that takes ``OUT_DIR [--device D]``: the device goes to ``device_variable``
    (the script's knob), and ``run(OUT_DIR)``'s summary is printed."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out_dir")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    if args.device:
        os.environ[device_variable] = args.device
    print(run(args.out_dir))
    return 0


def problem_script_main(argv: list[str] | None, description: str, per_problem_s: float,
                        run_problem: Callable[[str, str, str, str, float], dict[str, Any]],
                        write: Callable[[str, str, dict[str, Any]], None],
                        run: Callable[[str, str, str, list[str] | None], Any]) -> int:
    """The command line of a script whose problems run by :func:`run_problems_in_turn`: ``OUT [--device]
    [--scale] [--problems a,b]`` runs the campaign; ``--one NAME --cap S`` is one problem's child, which
    writes its entry (or its failure) through ``write``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", default="h200")
    parser.add_argument("--problems", default="")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=float, default=per_problem_s, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        try:
            entry = run_problem(args.one, args.out, args.device, args.scale, args.cap)
        except Exception as exc:  # noqa: BLE001 - recorded for the campaign
            entry = {"problem": args.one, **failure(exc)}
        write(args.out, args.one, entry)
        return 0
    problems = [p for p in args.problems.split(",") if p] or None
    print(json.dumps(run(args.out, args.device, args.scale, problems), indent=1, default=str))
    return 0


@dataclass
class CliRun:
    """One ``kernelopt`` command: its parsed ``--json`` output and how it ended."""

    args: list[str]
    data: Any  # the command's JSON result; None when it printed none
    returncode: int | None  # None: stopped at its timeout
    wall_s: float
    log: str  # the tail of its stderr (progress, warnings, the error)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.data is not None

    def why(self) -> str:
        """Why it gave no result, in a line."""
        ended = "stopped at its timeout" if self.returncode is None else f"exit {self.returncode}"
        tail = self.log.strip().splitlines()[-1:] or ["no output"]
        return f"kernelopt {self.args[0]} {ended}: {tail[0][:300]}"


def kernelopt(args: Sequence[str], *, timeout_s: float, cwd: str = ROOT, log_path: str | None = None,
              env: dict[str, str] | None = None) -> CliRun:
    """``python -m kernelopt_core.cli.main ARGS --json`` in a process of its own session, stopped at
    ``timeout_s``. Its stderr goes to ``log_path`` (default: a ``kernelopt-<command>.log`` in ``cwd``)."""
    args = [str(a) for a in args]
    log_path = log_path or os.path.join(cwd, f"kernelopt-{args[0]}.log")
    out_path = f"{log_path}.stdout"
    command = [sys.executable, "-m", "kernelopt_core.cli.main", *args, "--json"]
    os.makedirs(cwd, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as stdout, open(log_path, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen(command, cwd=cwd, env=env or child_env(), stdout=stdout, stderr=stderr,
                                   start_new_session=True)
        begin = time.monotonic()
        try:
            code: int | None = process.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            _stop_group(process, grace_s=10.0)
            code = None
    wall = round(time.monotonic() - begin, 1)
    with open(out_path, encoding="utf-8") as handle:
        text = handle.read()
    os.unlink(out_path)
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        data = None
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        log = handle.read()[-3000:]
    return CliRun(args, data, code, wall, log)


# --- packing ----------------------------------------------------------------------------------------------

PACKED_SUFFIXES = (".json", ".jsonl", ".md", ".txt", ".csv", ".png", ".diff", ".log")  # .jsonl: run journals
MAX_PACKED_BYTES = 4 * 1024 * 1024
UNPACKED_FOLDERS = ("inductor_cache", "runtime_inductor_cache", "__pycache__")


def _packed(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Results and logs; not compiled dumps, caches or large binaries."""
    if info.isdir():
        return None if os.path.basename(info.name) in UNPACKED_FOLDERS else info
    if not info.name.endswith(PACKED_SUFFIXES) or info.size > MAX_PACKED_BYTES:
        return None
    return info


def pack_results(folder: str, tar_path: str, arcname: str = "gpu") -> None:
    """``folder``'s text results (at most 4 MiB a file) as one gzipped tarball: the device tool
    returns at most 8 files from a call."""
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(folder, arcname=arcname, filter=_packed)


# --- in process: compile, time, analyse (the scripts that drive the families and the analyst) ------------


def use_device(device: str) -> str:
    """``auto`` -> ``cuda:0`` when a GPU is visible, else ``cpu``; on the CPU the CPU Triton backend
    is switched on (before anything imports triton)."""
    if device == "auto":
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    if not device.startswith("cuda"):
        from kernelopt_core.backends import cpu_triton

        cpu_triton.activate()
    return device


def free_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def compile_largest_graph(problem: str, work: str, device: str) -> tuple[dict[str, Any], Any]:
    """``problem`` compiled in this process (max-autotune on a GPU, default on the CPU backend):
    facts for the record, and the dumped graph with the most launches (None when none was dumped)."""
    import torch

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.compile import compile_problem

    cuda = device.startswith("cuda")
    compiled = compile_problem(problem, work, "max-autotune" if cuda else "default", "cuda" if cuda else "cpu")
    torch._dynamo.reset()
    free_device_memory()
    facts: dict[str, Any] = {"compile_s": compiled.compile_s, "mode": compiled.mode,
                             "max_rel_err": compiled.max_rel_err, "graphs": len(compiled.graphs)}
    if not compiled.graphs:
        return {**facts, "error": "torch.compile wrote no graph"}, None
    graph = max((parse_output_code(path) for path in compiled.graphs), key=lambda g: (len(g.launches), len(g.kernels)))
    return {**facts, "dump": graph.path}, graph


def compile_in_own_process(problem_path: str, work: str, device: str, timeout_s: float) -> str:
    """The problem's graph with the most kernels, compiled by ``kernelopt compile`` in a process of its own
    (max-autotune on a GPU, default on the CPU backend): the script's own process never imports torch."""
    from kernelopt_core.artifacts import parse_output_code

    mode = "max-autotune" if device.startswith("cuda") else "default"
    done = kernelopt(["compile", problem_path, "--out", work, "--device", device, "--mode", mode],
                     timeout_s=timeout_s, cwd=work)
    graphs = (done.data or {}).get("graphs") or []
    if not graphs:
        raise RuntimeError(f"kernelopt compile wrote no graph (exit {done.returncode}): {done.log[-1500:]}")
    return max(graphs, key=lambda path: len(parse_output_code(path).kernels))


def time_graph(graph: Any, device: str) -> Any:
    """One timed run of ``graph`` in this process, every launch's arguments recorded (LaunchTiming)."""
    from kernelopt_core.measure.graph_tasks import time_launches_task
    from kernelopt_core.measure.launch_timing import launch_timing_from_json

    timing = launch_timing_from_json(time_launches_task({"dump": graph.path, "device": device, "overheads": False}))
    free_device_memory()
    return timing


def kernel_time_ms(graph: Any, timing: Any, kernel_name: str) -> float:
    """A kernel's time per graph call, over all its launches."""
    return sum(timing.launch_times_ms.get(launch.order, 0.0) for launch in graph.launches_of(kernel_name))


def rewrite_context(graph: Any, kernel: Any, timing: Any, peaks: Any, device: str, *, metrics: Any = None,
                    probe: Callable[[str], dict[str, Any] | None] | None = None) -> tuple[Any, Any]:
    """The analyst's verdict on ``kernel`` (from its timed launch, and ncu ``metrics`` when given) and
    the RewriteContext the search builds from it: (context, analysis)."""
    from kernelopt_core.analyst import analyze_kernel, rewrite_evidence
    from kernelopt_core.measure.traffic import kernel_launch
    from kernelopt_core.search.rewrites import RewriteContext, parse_kernel_module

    cpu = not device.startswith("cuda")
    launch = kernel_launch(timing.launch_traffic.values(), kernel.name)
    timed_ms = timing.launch_times_ms.get(launch.order) if launch is not None else None
    analysis = analyze_kernel(metrics, None, peaks, kernel, launch_args=launch, duration_ms=timed_ms,
                              duration_source=f"timed launch, {timing.path} path", cpu=cpu)
    evidence = rewrite_evidence(analysis, launch)
    module = parse_kernel_module(kernel.source, kernel.name)
    sms = evidence.get("sm_count")
    context = RewriteContext(module=module, original=module, device="cpu" if cpu else "cuda", tier=analysis.tier,
                             evidence=evidence, compile_probe=None if cpu else probe,
                             **({"multiprocessors": int(sms)} if isinstance(sms, int) and sms > 0 else {}))
    return context, analysis


class _MemoryJournal:
    """The probe journal of a run folder, kept in memory (a script has no run folder)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str | None], dict[str, Any]] = {}

    def lookup(self, kind: str, key: str) -> dict[str, Any] | None:
        return self.entries.get((kind, key))

    def append(self, kind: str, key: str | None = None, **data: Any) -> dict[str, Any]:
        self.entries[(kind, key)] = data
        return data

    def record(self, kind: str, **data: Any) -> dict[str, Any]:
        return data


_PROBES = _MemoryJournal()


def compile_probe(source: str) -> dict[str, Any] | None:
    """The families' compile probe as the search provides it (registers, spills and shared memory of
    the first launch config compiled for sm_90), each source compiled once per process."""
    from kernelopt_core.search.compile_probes import probe_sources

    return probe_sources(_PROBES, [source])[0]
