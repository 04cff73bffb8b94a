"""Profile a compiled graph's Triton kernels with ncu, cached per (kernel source, input shapes, GPU).

ncu runs :mod:`kernelopt_core.measure.run_graph` on the dump, collecting the sections and the raw
metrics asked for (by default the DRAM byte counters, L2 hit rate and sector efficiency the
speed-of-light figures need). Only the kernels asked for (all of
the graph's Triton kernels by default; vendor calls are kept, never profiled) are matched with
``-k regex:``, and only launches inside the runner's profiler range (after warm-up) count.
Each kernel's launches are cached on their own, so changing one kernel re-profiles only it.

ncu is injected into the runner alone (``--target-processes application-only``), and the runner compiles
the wrapper's kernels in its own process (``TORCHINDUCTOR_COMPILE_THREADS=1``): a pool of compile workers
would start, and under ``all`` be instrumented, for kernels that Triton's cache already holds. The runner
shares the worker's Inductor cache (the same environment), so the configs the worker tuned are read, not
tuned again under ncu; it says which kernels still tuned. No torch here.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.model import CompiledGraph
from .cache_dir import cache_file, key_of, read_json, write_json
from .devices import cuda_index, gpu_name
from .ncu import (
    DEFAULT_METRICS,
    DEFAULT_SECTIONS,
    KernelMetrics,
    NcuError,
    NcuPermissionDenied,
    build_ncu_command,
    find_ncu,
    run_ncu,
    summarize_launches,
)
from .run_graph import program_steps, tuned_kernels

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# The runner under ncu: only it is profiled, and Inductor compiles in it (no pool of compile workers).
RUNNER_TARGET_PROCESSES = "application-only"
RUNNER_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


@dataclass
class GraphProfile:
    graph: str
    dump: str
    gpu: str
    kernels: list[KernelMetrics]  # one per kernel: its median launch
    launches: list[KernelMetrics] = field(default_factory=list)  # every launch behind ``kernels``
    command: list[str] | None = None  # the ncu command, when ncu ran
    csv_text: str | None = None
    wall_s: float = 0.0  # time spent in ncu (0 when everything came from the cache)
    from_cache: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps_s: dict[str, float] = field(default_factory=dict)  # where ncu's wall time went (the runner's steps)
    tuned: list[str] | None = None  # kernels that autotuned in the runner's warm-up (None: not reported)

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "dump": self.dump, "gpu": self.gpu,
                "kernels": [k.to_json() for k in self.kernels], "command": self.command,
                "wall_s": self.wall_s, "from_cache": self.from_cache, "notes": self.notes,
                "steps_s": self.steps_s, "tuned": self.tuned}


def input_signature(graph: CompiledGraph) -> list[Any]:
    return [[i.name, i.kind, i.shape, i.stride, i.dtype, i.value if i.kind != "tensor" else None]
            for i in graph.inputs]


def ncu_cache_key(source_hash: str, inputs: list[Any], gpu: str,
                  sections: tuple[str, ...] = DEFAULT_SECTIONS, metrics: tuple[str, ...] = DEFAULT_METRICS) -> str:
    return key_of("ncu-v2", source_hash, inputs, gpu, list(sections), list(metrics))


def runner_program(graph: CompiledGraph, *, iters: int = 1, warmup: int = 2, device: str = "cuda:0",
                   python: str | None = None) -> list[str]:
    """The program ncu runs for ``graph``: :mod:`.run_graph` on its dump."""
    return [python or sys.executable, "-m", "kernelopt_core.measure.run_graph", "--dump", graph.path,
            "--iters", str(iters), "--warmup", str(warmup), "--device", device]


def runner_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """What the runner's environment adds to this process's: the package on PYTHONPATH, no compile pool."""
    return {**RUNNER_ENV, **(env or {}), "PYTHONPATH": _python_path()}


def profile_graph(graph: CompiledGraph, *, kernels: list[str] | None = None, iters: int = 1, warmup: int = 2,
                  device: str = "cuda:0", python: str | None = None, use_cache: bool = True,
                  sections: tuple[str, ...] = DEFAULT_SECTIONS, timeout_s: float = 600.0,
                  gpu: str | None = None, cancel: threading.Event | None = None,
                  env: dict[str, str] | None = None, metrics: tuple[str, ...] = DEFAULT_METRICS) -> GraphProfile:
    """ncu metrics for the graph's Triton kernels; raises NcuNotFound/NcuPermissionDenied/NcuError."""
    names = list(kernels) if kernels else [k.name for k in graph.kernels]
    known = {k.name: k for k in graph.kernels}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{graph.path}: no Triton kernel named {', '.join(unknown)}; "
                         f"the graph has {', '.join(known) or 'none'}")
    gpu = gpu or gpu_name(cuda_index(device))
    inputs = input_signature(graph)
    cached: dict[str, list[KernelMetrics]] = {}
    if use_cache:
        for name in names:
            entry = read_json(cache_file("ncu", ncu_cache_key(known[name].source_hash, inputs, gpu, sections, metrics)))
            if isinstance(entry, dict) and entry.get("launches"):
                try:
                    cached[name] = [KernelMetrics.from_json(item) for item in entry["launches"]]
                except (TypeError, KeyError):
                    pass  # an old or damaged entry is a miss
    missing = [n for n in names if n not in cached]
    profile = GraphProfile(graph=graph.name, dump=graph.path, gpu=gpu, kernels=[], from_cache=sorted(cached))
    fresh: dict[str, list[KernelMetrics]] = {}
    if missing:
        launches_per_call = sum(len(graph.launches_of(n)) for n in missing) or len(missing)
        program = runner_program(graph, iters=iters, warmup=warmup, device=device, python=python)
        ncu = find_ncu()
        begin = time.monotonic()
        collected = metrics
        while True:
            command = build_ncu_command(program, ncu=ncu, kernels=missing,
                                        launch_count=launches_per_call * max(1, iters), sections=sections,
                                        metrics=collected, target_processes=RUNNER_TARGET_PROCESSES)
            try:
                run = run_ncu(command, timeout_s=max(1.0, timeout_s - (time.monotonic() - begin)),
                              env=runner_env(env), cancel=cancel)
                break
            except NcuPermissionDenied:
                raise
            except NcuError as exc:
                # A metric this ncu or GPU does not know fails the whole run: drop it, say so, retry once.
                unknown = [m for m in collected if m in str(exc)]
                if not unknown or cancel is not None and cancel.is_set():
                    raise
                collected = tuple(m for m in collected if m not in unknown)
                profile.notes.append(f"ncu could not collect {', '.join(unknown)} here; profiled without it")
        profile.wall_s = time.monotonic() - begin
        profile.command, profile.csv_text = command, run.csv_text
        profile.steps_s = program_steps(run.log_text, run.started, run.ended)
        profile.tuned = tuned_kernels(run.log_text)
        if profile.tuned:
            profile.notes.append(f"autotuned under ncu (not found tuned in the Inductor cache): "
                                 f"{', '.join(profile.tuned)}")
        for item in run.launches:
            fresh.setdefault(item.name, []).append(item)
        for name in missing:
            if name not in fresh:
                profile.notes.append(f"ncu reported no launch of {name}")
                continue
            try:
                write_json(cache_file("ncu", ncu_cache_key(known[name].source_hash, inputs, gpu, sections, metrics)), {
                    "kernel": name, "gpu": gpu, "inputs": inputs, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "command": command, "launches": [m.to_json() for m in fresh[name]],
                })
            except OSError as exc:  # an unwritable cache costs a re-profile next time, not this result
                profile.notes.append(f"could not cache the ncu result of {name}: {exc}")
    for name in names:
        profile.launches.extend(cached.get(name) or fresh.get(name) or [])
    profile.kernels = summarize_launches(profile.launches)
    return profile


def _python_path() -> str:
    import os

    return os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
