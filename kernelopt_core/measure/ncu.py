"""Nsight Compute: the command line, running it, and its CSV as typed per-kernel metrics.

``parse_ncu_csv`` reads the ``--csv`` details page (one row per metric or rule, per profiled
launch). It skips the ``==PROF==``/``==WARNING==`` lines and whatever the program printed before
the header, strips thousands separators, and converts units (time to ns, throughput to
bytes/s, sizes to bytes, frequencies to Hz). Nothing here imports torch.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..process_lifetime import end_tree, owned_command, start_owned

DEFAULT_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis",
    "SchedulerStats", "WarpStateStats",
)
# The sections whose figures the analyst reads (its tier, speed of light, causes and directions): Speed of
# Light (duration, memory and compute %), Occupancy, LaunchStats (registers, grid, waves, SMs, shared memory)
# and MemoryWorkloadAnalysis (DRAM bandwidth, L2 hit rate). Each section adds replay passes of the kernel;
# the other three of DEFAULT_SECTIONS (compute pipes, scheduler and warp stalls) only add rules to the
# evidence text, so the offline search profiles these alone (docs/measurement.md).
ANALYST_SECTIONS: tuple[str, ...] = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis")
# Raw metrics collected beside the sections (ncu ``--metrics``; their rows carry the section name
# "Command line profiler metrics"): DRAM bytes for the traffic ratio, the L2 hit rate, and the
# global-load sector efficiency (useful bytes per 32-byte sector) for strided access.
DRAM_READ_METRIC = "dram__bytes_read.sum"
DRAM_WRITE_METRIC = "dram__bytes_write.sum"
L2_HIT_METRIC = "lts__t_sector_hit_rate.pct"
SECTOR_EFFICIENCY_METRIC = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
DEFAULT_METRICS: tuple[str, ...] = (DRAM_READ_METRIC, DRAM_WRITE_METRIC, L2_HIT_METRIC, SECTOR_EFFICIENCY_METRIC)
PERMISSION_MARKER = "ERR_NVGPUCTRPERM"
TARGET_PROCESSES = ("all", "application-only")


class NcuError(RuntimeError):
    """ncu ran but gave nothing usable."""


class NcuNotFound(NcuError):
    """No ncu executable on this machine."""


class NcuPermissionDenied(NcuError):
    """The GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM)."""


class NcuParseError(NcuError):
    """The text is not an ncu ``--csv`` details report."""


@dataclass
class NcuRule:
    name: str  # e.g. "SOLBottleneck", "AchievedOccupancy"
    type: str  # INF, OPT, WRN, ERR
    description: str
    est_speedup_pct: float | None  # ncu's estimated speedup if the issue were fixed
    speedup_type: str = ""  # "local" (this kernel) or "global" (the whole run)
    section: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class KernelMetrics:
    """What ncu measured for one profiled launch of a kernel (or the median launch of several)."""

    name: str
    duration_ns: float | None
    memory_pct: float | None  # SOL memory throughput, % of peak
    dram_pct: float | None
    compute_pct: float | None  # SOL compute (SM) throughput, % of peak
    achieved_occupancy_pct: float | None
    registers: int | None
    block_size: int | None
    grid_size: int | None
    rules: list[NcuRule] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # "Section: Metric" -> {"value", "unit"}
    launch_id: int | None = None
    launches: int = 1  # how many launches this summarizes
    theoretical_occupancy_pct: float | None = None
    dram_bytes_per_s: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    waves_per_sm: float | None = None
    shared_mem_per_block_bytes: float | None = None
    sm_count: int | None = None
    sm_busy_pct: float | None = None
    issue_slots_busy_pct: float | None = None
    no_eligible_pct: float | None = None
    warp_cycles_per_issued: float | None = None
    duration_ns_range: tuple[float, float] | None = None  # min and max over the launches summarized
    dram_read_bytes: float | None = None  # dram__bytes_read.sum
    dram_write_bytes: float | None = None  # dram__bytes_write.sum
    sector_efficiency_pct: float | None = None  # global loads: useful bytes per fetched sector, %

    @property
    def dram_bytes(self) -> float | None:
        """Bytes moved to and from DRAM by this launch (read + write), when ncu counted both."""
        if self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return self.dram_read_bytes + self.dram_write_bytes

    def top_rules(self, count: int = 3) -> list[NcuRule]:
        """Rules ranked by estimated speedup (rules without one last), at most ``count``."""
        ranked = sorted(self.rules, key=lambda r: -(r.est_speedup_pct if r.est_speedup_pct is not None else -1.0))
        return ranked[:count]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rules"] = [r.to_json() for r in self.rules]
        if self.duration_ns_range is not None:
            data["duration_ns_range"] = list(self.duration_ns_range)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelMetrics:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["rules"] = [NcuRule(**r) for r in data.get("rules", [])]
        if known.get("duration_ns_range") is not None:
            known["duration_ns_range"] = tuple(known["duration_ns_range"])
        return cls(**known)


# --- units -----------------------------------------------------------------------------------

_SCALE_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
            "s": 1e9, "second": 1e9}


def parse_number(text: str | None) -> float | None:
    """ncu's number text: thousands separators, "n/a"/"no data" as None."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in {"n/a", "no data", "nan", "-"}:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_base_unit(value: float, unit: str) -> tuple[float, str]:
    """Convert a value to ns, bytes, bytes/s or Hz; other units are returned unchanged."""
    unit = (unit or "").strip()
    if unit in _TIME_NS:
        return value * _TIME_NS[unit], "ns"
    match = re.fullmatch(r"([kKMGTP]?)byte(?:/(s|second))?", unit)
    if match:
        return value * _SCALE_PREFIX[match.group(1)], "byte/s" if match.group(2) else "byte"
    match = re.fullmatch(r"([kKMGT]?)hz", unit, re.IGNORECASE)
    if match:
        return value * _SCALE_PREFIX[match.group(1).upper() if match.group(1) != "k" else "k"], "hz"
    match = re.fullmatch(r"cycle/(nsecond|usecond|msecond|second)", unit)
    if match:  # older ncu: SM frequency in cycles per nanosecond
        return value * 1e9 / _TIME_NS[match.group(1)], "hz"
    return value, unit


# --- parsing ---------------------------------------------------------------------------------

# (field, metric names (old and new ncu), required unit or None)
_FIELDS: list[tuple[str, tuple[str, ...], str | None]] = [
    ("duration_ns", ("Duration", "gpu__time_duration.sum"), "ns"),
    ("memory_pct", ("Memory Throughput", "Memory [%]"), "%"),
    ("dram_pct", ("DRAM Throughput", "DRAM [%]"), "%"),
    ("compute_pct", ("Compute (SM) Throughput", "Compute (SM) [%]", "SM [%]"), "%"),
    ("achieved_occupancy_pct", ("Achieved Occupancy",), "%"),
    ("theoretical_occupancy_pct", ("Theoretical Occupancy",), "%"),
    ("registers", ("Registers Per Thread",), None),
    ("block_size", ("Block Size",), None),
    ("grid_size", ("Grid Size",), None),
    ("dram_bytes_per_s", ("Memory Throughput", "DRAM Bandwidth"), "byte/s"),
    ("l1_hit_pct", ("L1/TEX Hit Rate",), "%"),
    ("l2_hit_pct", ("L2 Hit Rate", L2_HIT_METRIC), "%"),
    ("dram_read_bytes", (DRAM_READ_METRIC,), "byte"),
    ("dram_write_bytes", (DRAM_WRITE_METRIC,), "byte"),
    ("sector_efficiency_pct", (SECTOR_EFFICIENCY_METRIC,), "%"),
    ("waves_per_sm", ("Waves Per SM",), None),
    ("sm_count", ("# SMs",), None),
    ("sm_busy_pct", ("SM Busy",), "%"),
    ("issue_slots_busy_pct", ("Issue Slots Busy",), "%"),
    ("no_eligible_pct", ("No Eligible",), "%"),
    ("warp_cycles_per_issued", ("Warp Cycles Per Issued Instruction",), None),
]
_INT_FIELDS = {"registers", "block_size", "grid_size", "sm_count"}


def _find_header(lines: list[str]) -> int:
    for index, line in enumerate(lines):
        if line.startswith('"ID",') or line.startswith("ID,"):
            return index
    return -1


def _check_errors(text: str) -> None:
    if PERMISSION_MARKER in text:
        raise NcuPermissionDenied(
            "ncu may not read the GPU performance counters on this machine (ERR_NVGPUCTRPERM). "
            "Allow them for all users (options nvidia NVreg_RestrictProfilingToAdminUsers=0) or run as "
            "root; see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
        )


def parse_ncu_csv(text: str, source: str = "the ncu output") -> list[KernelMetrics]:
    """One :class:`KernelMetrics` per profiled launch (ncu's ``ID``), in ID order."""
    _check_errors(text)
    lines = text.splitlines()
    start = _find_header(lines)
    if start < 0:
        errors = [line for line in lines if line.startswith("==ERROR==")]
        detail = f": {errors[0]}" if errors else ""
        raise NcuParseError(f"{source}: no ncu CSV header (a line starting with \"ID\") found{detail}; "
                            "was ncu run with --csv and did it profile any kernel?")
    body = [line for line in lines[start:] if line.strip() and not line.startswith("==")]
    reader = csv.DictReader(io.StringIO("\n".join(body)))
    fields = reader.fieldnames or []
    for needed in ("ID", "Kernel Name", "Metric Name", "Metric Value"):
        if needed not in fields:
            raise NcuParseError(f"{source}: the CSV has no {needed!r} column (this is not the --csv details page)")
    launches: dict[str, dict[str, Any]] = {}
    for row in reader:
        launch_id = (row.get("ID") or "").strip()
        if not launch_id or not launch_id.isdigit():
            continue
        launch = launches.setdefault(launch_id, {"name": row.get("Kernel Name") or "", "metrics": [],
                                                 "rules": [], "block": row.get("Block Size"),
                                                 "grid": row.get("Grid Size")})
        rule_name = (row.get("Rule Name") or "").strip()
        metric_name = (row.get("Metric Name") or "").strip()
        section = (row.get("Section Name") or "").strip()
        if rule_name and not metric_name:
            launch["rules"].append(NcuRule(
                name=rule_name, type=(row.get("Rule Type") or "").strip(),
                description=(row.get("Rule Description") or "").strip(),
                est_speedup_pct=parse_number(row.get("Estimated Speedup")),
                speedup_type=(row.get("Estimated Speedup Type") or "").strip(), section=section,
            ))
        elif metric_name:
            launch["metrics"].append((section, metric_name, (row.get("Metric Unit") or "").strip(),
                                      row.get("Metric Value") or ""))
    return [_launch_metrics(int(launch_id), data) for launch_id, data in
            sorted(launches.items(), key=lambda item: int(item[0]))]


def _launch_metrics(launch_id: int, data: dict[str, Any]) -> KernelMetrics:
    raw: dict[str, Any] = {}
    by_name: dict[str, list[tuple[float | None, str]]] = {}
    for section, metric, unit, text in data["metrics"]:
        number = parse_number(text)
        value: Any = text.strip()
        base_unit = unit
        if number is not None:
            value, base_unit = to_base_unit(number, unit)
        raw[f"{section}: {metric}"] = {"value": value, "unit": base_unit}
        by_name.setdefault(metric, []).append((value if number is not None else None, base_unit))
    values: dict[str, Any] = {}
    for name, aliases, unit in _FIELDS:
        for alias in aliases:
            found = [v for v, u in by_name.get(alias, []) if v is not None and (unit is None or u == unit)]
            if found:
                values[name] = int(found[0]) if name in _INT_FIELDS else float(found[0])
                break
    static = _raw_number(raw, "Launch Statistics: Static Shared Memory Per Block")
    dynamic = _raw_number(raw, "Launch Statistics: Dynamic Shared Memory Per Block")
    if static is not None or dynamic is not None:
        values["shared_mem_per_block_bytes"] = (static or 0.0) + (dynamic or 0.0)
    if "block_size" not in values:
        values["block_size"] = _dims_product(data.get("block"))
    if "grid_size" not in values:
        values["grid_size"] = _dims_product(data.get("grid"))
    return KernelMetrics(
        name=data["name"], duration_ns=values.pop("duration_ns", None), memory_pct=values.pop("memory_pct", None),
        dram_pct=values.pop("dram_pct", None), compute_pct=values.pop("compute_pct", None),
        achieved_occupancy_pct=values.pop("achieved_occupancy_pct", None),
        registers=values.pop("registers", None), block_size=values.pop("block_size", None),
        grid_size=values.pop("grid_size", None), rules=data["rules"], raw=raw, launch_id=launch_id, **values,
    )


def _raw_number(raw: dict[str, Any], key: str) -> float | None:
    item = raw.get(key)
    return item["value"] if item and isinstance(item["value"], float) else None


def _dims_product(text: str | None) -> int | None:
    numbers = re.findall(r"\d+", (text or "").replace(",", ""))
    if not numbers:
        return None
    product = 1
    for n in numbers:
        product *= int(n)
    return product


def summarize_launches(launches: list[KernelMetrics]) -> list[KernelMetrics]:
    """One entry per kernel name: its median launch by duration (ties: the earliest launch).

    All numbers of an entry come from that one real launch, so they stay consistent with each
    other; ``launches`` and ``duration_ns_range`` say how many were seen and how they spread.
    """
    by_name: dict[str, list[KernelMetrics]] = {}
    for item in launches:
        by_name.setdefault(item.name, []).append(item)
    summary: list[KernelMetrics] = []
    for items in by_name.values():
        timed = [m for m in items if m.duration_ns is not None]
        ordered = sorted(timed, key=lambda m: m.duration_ns or 0.0) if timed else items
        chosen = ordered[len(ordered) // 2]
        durations = [m.duration_ns for m in timed if m.duration_ns is not None]
        merged = KernelMetrics.from_json(chosen.to_json())
        merged.launches = len(items)
        merged.duration_ns_range = (min(durations), max(durations)) if durations else None
        summary.append(merged)
    return summary


# --- running ncu -----------------------------------------------------------------------------


def find_ncu() -> str:
    """The ncu executable: $KERNELOPT_NCU, then PATH, then the usual CUDA install folders."""
    candidates = [os.environ.get("KERNELOPT_NCU", ""), shutil.which("ncu") or "",
                  "/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise NcuNotFound("Nsight Compute (ncu) was not found: install it (it ships with the CUDA toolkit), "
                      "put it on PATH, or set KERNELOPT_NCU to its path")


def kernel_regex(names: list[str]) -> str:
    """An ncu ``-k regex:`` filter matching exactly these kernel names."""
    return "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"


def build_ncu_command(program: list[str], *, ncu: str = "ncu", kernels: list[str] | None = None,
                      launch_skip: int | None = None, launch_count: int | None = None,
                      sections: tuple[str, ...] = DEFAULT_SECTIONS, from_start: bool = False,
                      metrics: tuple[str, ...] = DEFAULT_METRICS, target_processes: str = "all") -> list[str]:
    """The ncu command line. Clocks are never locked (``--clock-control none``): kernels are
    measured at the clocks the user's model would see. With ``from_start=False`` only the
    region between cudaProfilerStart/Stop is profiled (the runner opens it after warm-up).
    Values are printed in base units (``--print-units base``: bytes, not Mbyte).
    ``target_processes``: ``all`` injects ncu into every process the program starts (a user's harness
    may launch its kernel from one); ``application-only`` into the program alone, as for a graph's
    runner, whose only children are Inductor's compile workers, which launch no kernel."""
    if target_processes not in TARGET_PROCESSES:
        raise ValueError(f"target_processes must be one of {', '.join(TARGET_PROCESSES)}, not {target_processes!r}")
    command = [ncu, "--csv", "--print-units", "base", "--clock-control", "none",
               "--target-processes", target_processes]
    if not from_start:
        command += ["--profile-from-start", "off"]
    for section in sections:
        command += ["--section", section]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    if kernels:
        command += ["-k", kernel_regex(kernels)]
    if launch_skip:
        command += ["--launch-skip", str(launch_skip)]
    if launch_count:
        command += ["--launch-count", str(launch_count)]
    return command + list(program)


@dataclass
class NcuRun:
    command: list[str]
    csv_text: str
    launches: list[KernelMetrics]
    wall_s: float
    returncode: int
    log_text: str = ""  # ncu's and the program's stderr (the runner's step lines)
    started: float = 0.0  # wall clock (time.time()) when ncu was started, and when it ended
    ended: float = 0.0


def run_ncu(command: list[str], *, timeout_s: float = 600.0, env: dict[str, str] | None = None,
            cwd: str | None = None, cancel: threading.Event | None = None) -> NcuRun:
    """Run an ncu command line. ncu and its target stay in this process's group and die with it
    (:mod:`kernelopt_core.process_lifetime`); a timeout or ``cancel`` ends them by pid."""
    begin, started = time.monotonic(), time.time()
    if shutil.which(command[0]) is None:  # asked here: the launcher would only exit 127
        raise NcuNotFound(f"cannot run {command[0]!r}: not found")
    try:
        process = start_owned(owned_command(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **(env or {})}, cwd=cwd)
    except FileNotFoundError as exc:
        raise NcuNotFound(f"cannot run {command[0]!r}: {exc}") from exc
    while True:
        try:
            stdout, stderr = process.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            cancelled = cancel is not None and cancel.is_set()
            if cancelled or time.monotonic() - begin > timeout_s:
                _kill_group(process)
                why = "was cancelled" if cancelled else f"ran past {timeout_s:g} s"
                raise NcuError(f"ncu {why}: {' '.join(command[:6])} ...") from None
    wall = time.monotonic() - begin
    text = (stdout or "") + "\n" + (stderr or "")
    _check_errors(text)
    try:
        launches = parse_ncu_csv(stdout or "", source="ncu")
    except NcuParseError as exc:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise NcuError(f"ncu exited with status {process.returncode} and no metrics: {exc}\n{tail}") from exc
    return NcuRun(command=command, csv_text=stdout or "", launches=launches, wall_s=wall,
                  returncode=process.returncode, log_text=stderr or "", started=started, ended=time.time())


def _kill_group(process: subprocess.Popen[str]) -> None:
    end_tree(process.pid)  # ncu and its target, not the group: that is the worker's own
    process.communicate()
