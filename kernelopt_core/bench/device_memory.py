"""Device memory between a campaign's problems: back to the baseline, or a clear error.

Before each problem the bench reads the GPU's memory in use (its baseline); after the problem's
processes are gone it reads again, waiting a little for the driver to free what they held. If the
memory is not back, the bench ends the processes of its own that still hold some (by pid) and
reads again. If it is still not back, the slot is *held*: every later problem on it fails at once
with "GPU memory held by pid N (command): X GiB", instead of running out of memory inside someone
else's eager run; before each one the bench reads again, and the slot is free once memory is back.

The bench itself never initialises CUDA (a context costs memory): it asks ``nvidia-smi``. The
reader is injectable (tests drive the guard with a stand-in). Without nvidia-smi the check is
a no-op whose note says so.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from ..process_lifetime import command_line, describe_process

TOLERANCE_MIB = 256.0  # readings drift by a few MiB; a leaked CUDA context alone is about 500 MiB
SETTLE_READS = 40  # the driver frees a dead process's memory within seconds; large contexts take longer
SETTLE_INTERVAL_S = 0.5
HELD_CATEGORY = "gpu-memory-held"


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: float | None
    command: str

    def describe(self) -> str:
        size = f"{self.used_mib / 1024:.1f} GiB" if self.used_mib is not None else "an unknown amount"
        return f"{describe_process(self.pid, self.command, 120)}: {size}"


@dataclass(frozen=True)
class MemoryReading:
    used_mib: float
    total_mib: float | None = None
    processes: tuple[GpuProcess, ...] = ()


class NoReader(RuntimeError):
    """The device's memory cannot be read here (no nvidia-smi): the check is skipped."""


# The memory of one GPU (a CUDA_VISIBLE_DEVICES entry: index or UUID); raises NoReader when it
# cannot be read.
MemoryReader = Callable[[str], MemoryReading]


def _smi(*args: str) -> list[list[str]]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise NoReader("nvidia-smi was not found: device memory between problems is not checked")
    done = subprocess.run([smi, *args, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise NoReader(f"nvidia-smi failed ({done.returncode}): {(done.stderr or done.stdout).strip()[:200]}")
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


def _mib(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]" inside some containers
        return None


def read_nvidia_smi(gpu: str) -> MemoryReading:
    """The memory in use on ``gpu`` and the processes holding it, from nvidia-smi (raises NoReader)."""
    rows = _smi("-i", gpu, "--query-gpu=uuid,memory.used,memory.total")
    if not rows or len(rows[0]) < 3 or _mib(rows[0][1]) is None:
        raise NoReader(f"nvidia-smi gave no memory figure for GPU {gpu}")
    uuid, used, total = rows[0][0], _mib(rows[0][1]), _mib(rows[0][2])
    processes = []
    for row in _smi("--query-compute-apps=gpu_uuid,pid,process_name,used_memory"):
        if len(row) < 4 or row[0] != uuid or not row[1].isdigit():
            continue
        pid = int(row[1])
        processes.append(GpuProcess(pid, _mib(row[3]), command_line(pid) or row[2]))
    return MemoryReading(float(used or 0.0), total, tuple(processes))


@dataclass
class MemoryCheck:
    """What the bench found on the device after one problem."""

    gpu: str
    baseline_mib: float | None = None
    after_mib: float | None = None
    released: bool = True  # back within the tolerance of the baseline
    ended: list[str] = field(default_factory=list)  # our own processes that still held memory, ended by pid
    held_by: list[str] = field(default_factory=list)  # still holding it after that
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def message(self) -> str:
        extra = ((self.after_mib or 0.0) - (self.baseline_mib or 0.0)) / 1024
        holders = "; ".join(self.held_by) or "processes nvidia-smi does not name"
        return (f"GPU memory held by {holders} ({extra:.1f} GiB above the {(self.baseline_mib or 0.0) / 1024:.1f} GiB "
                f"in use before)")


class DeviceMemoryGuard:
    """One GPU slot's memory across the problems it runs (see the module's docstring)."""

    def __init__(self, gpu: str, reader: MemoryReader = read_nvidia_smi, *,
                 tolerance_mib: float = TOLERANCE_MIB, settle_reads: int = SETTLE_READS,
                 settle_interval_s: float = SETTLE_INTERVAL_S, sleep: Callable[[float], None] = time.sleep):
        self.gpu = gpu
        self.reader = reader
        self.tolerance_mib = tolerance_mib
        self.settle_reads = settle_reads
        self.settle_interval_s = settle_interval_s
        self.sleep = sleep
        self.hold: MemoryCheck | None = None  # memory still held after a problem
        self._held_since: MemoryReading | None = None  # the baseline it is held against
        self.unreadable: str | None = None  # why the last read gave nothing

    def _read(self) -> MemoryReading | None:
        try:
            reading = self.reader(self.gpu)
        except NoReader as exc:
            self.unreadable = str(exc)
            return None
        except (OSError, subprocess.SubprocessError) as exc:
            self.unreadable = f"the device memory could not be read: {exc}"
            return None
        self.unreadable = None
        return reading

    def blocked(self) -> str | None:
        """Before a problem: the error that ends it at once while memory is still held, else None."""
        if self.hold is None:
            return None
        reading = self._read()
        if reading is None or reading.used_mib <= (self.hold.baseline_mib or 0.0) + self.tolerance_mib:
            self.hold = self._held_since = None
            return None
        self.hold.after_mib = reading.used_mib
        self.hold.held_by = self._holders(reading) or self.hold.held_by
        return self.hold.message()

    def _holders(self, reading: MemoryReading) -> list[str]:
        """The processes holding memory that were not there before the problem (else all of them)."""
        before = {p.pid for p in self._held_since.processes} if self._held_since is not None else set()
        return [p.describe() for p in reading.processes if p.pid not in before] \
            or [p.describe() for p in reading.processes]

    def baseline(self) -> MemoryReading | None:
        return self._read()

    def _settled(self, baseline: MemoryReading) -> MemoryReading | None:
        """Read until memory is back within the tolerance, at most ``settle_reads`` times."""
        reading = None
        for attempt in range(max(1, self.settle_reads)):
            if attempt:
                self.sleep(self.settle_interval_s)
            reading = self._read()
            if reading is None or reading.used_mib <= baseline.used_mib + self.tolerance_mib:
                break
        return reading

    def after(self, baseline: MemoryReading | None, ours: Collection[int],
              end: Callable[[int], object]) -> MemoryCheck:
        """After a problem whose processes are gone: is memory back? ``ours`` are the pids the
        problem started (ended with ``end`` when they still hold memory)."""
        check = MemoryCheck(self.gpu)
        if baseline is None:
            check.note = self.unreadable
            return check
        check.baseline_mib = baseline.used_mib
        reading = self._settled(baseline)
        if reading is None:
            check.note = self.unreadable
            return check
        leftovers = [p for p in reading.processes if p.pid in ours]
        if reading.used_mib > baseline.used_mib + self.tolerance_mib and leftovers:
            for process in leftovers:
                end(process.pid)
            check.ended = [p.describe() for p in leftovers]
            reading = self._settled(baseline) or reading
        check.after_mib = reading.used_mib
        check.released = reading.used_mib <= baseline.used_mib + self.tolerance_mib
        if not check.released:
            self.hold, self._held_since = check, baseline
            check.held_by = self._holders(reading)
        return check
