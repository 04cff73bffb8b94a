"""The accepted-kernel store: kernels that passed the gates, kept for the user's own programs.

One JSON file per entry in ``.kernelopt/accepted/`` of the project (``KERNELOPT_ACCEPTED_DIR``
overrides; the project is the nearest folder above the working directory that holds a
``.kernelopt`` folder, else the working directory). Entries are written atomically (a temporary
file in the same folder, then ``os.replace``), so a reader never sees half an entry.

Pure Python: no torch or triton import. The language server, the CLI and ``kernelopt.enable()``
all read this store.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .artifacts import CompiledGraph, DumpError, parse_output_code, source_hash
from .artifacts.model import MissingKernel
from .atomic_files import write_json_atomic

STORE_ENV = "KERNELOPT_ACCEPTED_DIR"
STORE_SUBDIR = os.path.join(".kernelopt", "accepted")
SCHEMA_VERSION = 1
_HASH = re.compile(r"^[0-9a-f]{64}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


class AcceptedStoreError(Exception):
    """The store or one of its entries cannot be used; the message says which and why."""


class StoreUnreadable(AcceptedStoreError):
    """The store folder itself cannot be read: nothing in it may be used."""


@dataclass
class AcceptedEntry:
    """One accepted kernel: what it replaces, what replaces it, and the evidence."""

    original_hash: str  # source_hash() of the kernel module source Inductor wrote
    kernel_name: str
    input_specs: list[dict[str, Any]]  # the graph inputs it was verified on (InputSpec fields)
    accepted_source: str  # the full kernel module source that replaces it
    gates: dict[str, Any] | None  # CascadeResult.to_json() of the verification
    speedup: float | None
    ci: tuple[float, float] | None
    torch_version: str
    triton_version: str
    gpu: str
    created: str  # ISO 8601, UTC
    run_id: str | None = None
    # Beyond the agreed fields: what the runtime checks and the editor shows.
    id: str = ""
    original_source: str | None = None
    graph_path: str | None = None
    timing_path: str | None = None
    launch_numels: list[list[int]] = field(default_factory=list)  # trailing int args of each verified launch
    signature: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.id:
            self.id = entry_id(self.original_hash, self.accepted_source)

    @property
    def accepted_hash(self) -> str:
        return source_hash(self.accepted_source)

    @property
    def gates_passed(self) -> bool:
        return isinstance(self.gates, dict) and self.gates.get("accepted") is True

    def summary(self) -> str:
        speed = f"{self.speedup:.3f}x" if self.speedup is not None else "speedup not measured"
        if self.ci is not None:
            speed += f" (95% CI {self.ci[0]:.3f}-{self.ci[1]:.3f})"
        return f"{self.id} {self.kernel_name}: {speed}, torch {self.torch_version}, {self.gpu}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ci"] = list(self.ci) if self.ci is not None else None
        data["accepted_hash"] = self.accepted_hash
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "entry") -> AcceptedEntry:
        """Read an entry, refusing anything malformed with a message naming ``where``."""
        if not isinstance(data, dict):
            raise AcceptedStoreError(f"{where}: not a JSON object")
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise AcceptedStoreError(f"{where}: missing field(s) {', '.join(missing)}")
        for name, kinds in _TYPES.items():
            if name in data and data[name] is not None and not isinstance(data[name], kinds):
                raise AcceptedStoreError(f"{where}: field {name!r} has the wrong type ({type(data[name]).__name__})")
        if not _HASH.match(data["original_hash"]):
            raise AcceptedStoreError(f"{where}: original_hash is not a sha256 hex digest")
        if not _IDENTIFIER.match(data["kernel_name"]):
            raise AcceptedStoreError(f"{where}: kernel_name {data['kernel_name']!r} is not a Python identifier")
        if not data["accepted_source"].strip():
            raise AcceptedStoreError(f"{where}: accepted_source is empty")
        if int(data.get("schema", SCHEMA_VERSION)) > SCHEMA_VERSION:
            raise AcceptedStoreError(f"{where}: written by a newer kernelopt (schema {data['schema']})")
        recorded = data.get("accepted_hash")
        if recorded is not None and recorded != source_hash(data["accepted_source"]):
            raise AcceptedStoreError(f"{where}: accepted_source does not match its recorded hash (edited or damaged)")
        ci = data.get("ci")
        if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(_is_number(x) for x in ci)):
            raise AcceptedStoreError(f"{where}: ci must be [low, high]")
        known = {name for name in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["ci"] = (float(ci[0]), float(ci[1])) if ci is not None else None
        entry = cls(**values)
        expected_id = entry_id(entry.original_hash, entry.accepted_source)
        if entry.id != expected_id:
            raise AcceptedStoreError(f"{where}: id {entry.id!r} does not match its content (expected {expected_id})")
        return entry


_REQUIRED = ("original_hash", "kernel_name", "accepted_source", "torch_version", "triton_version")
_TYPES: dict[str, type | tuple[type, ...]] = {
    "original_hash": str, "kernel_name": str, "accepted_source": str, "input_specs": list, "gates": dict,
    "speedup": (int, float), "torch_version": str, "triton_version": str, "gpu": str, "created": str,
    "run_id": str, "id": str, "original_source": str, "graph_path": str, "timing_path": str,
    "launch_numels": list, "signature": list, "notes": list, "schema": int,
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def entry_id(original_hash: str, accepted_source: str) -> str:
    """Stable id: the same replacement of the same kernel is one entry, however often it is added."""
    return hashlib.sha256(f"{original_hash}:{source_hash(accepted_source)}".encode()).hexdigest()[:12]


@dataclass
class StoreProblem:
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def default_store_root(cwd: str | None = None) -> str:
    """``$KERNELOPT_ACCEPTED_DIR``, else ``.kernelopt/accepted`` of the nearest project above ``cwd``."""
    override = os.environ.get(STORE_ENV)
    if override:
        return os.path.abspath(os.path.expanduser(override))
    start = os.path.abspath(cwd or os.getcwd())
    folder = start
    while True:
        if os.path.isdir(os.path.join(folder, ".kernelopt")):
            return os.path.join(folder, STORE_SUBDIR)
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.join(start, STORE_SUBDIR)
        folder = parent


class AcceptedStore:
    """The entries in one store folder. Every method names the file and problem when it fails."""

    def __init__(self, root: str | None = None):
        self.root = os.path.abspath(root) if root else default_store_root()

    # --- reading ---------------------------------------------------------------------------

    def scan(self) -> tuple[list[AcceptedEntry], list[StoreProblem]]:
        """Every readable entry (oldest first) and every entry file that could not be used.

        Raises :class:`StoreUnreadable` when the folder exists but cannot be listed. A missing
        folder is an empty store.
        """
        if not os.path.lexists(self.root):
            return [], []
        if not os.path.isdir(self.root):
            raise StoreUnreadable(f"{self.root}: the accepted-kernel store is not a folder")
        try:
            names = sorted(os.listdir(self.root))
        except OSError as exc:
            raise StoreUnreadable(f"{self.root}: cannot list the accepted-kernel store ({exc.strerror or exc})") from None
        entries: list[AcceptedEntry] = []
        problems: list[StoreProblem] = []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = os.path.join(self.root, name)
            try:
                entry = self._read(path)
            except AcceptedStoreError as exc:
                problems.append(StoreProblem(path, str(exc).removeprefix(f"{path}: ")))
                continue
            if name != f"{entry.id}.json":
                problems.append(StoreProblem(path, f"file name does not match the entry id {entry.id}"))
                continue
            entries.append(entry)
        entries.sort(key=lambda e: (e.created, e.id))
        return entries, problems

    def list(self) -> list[AcceptedEntry]:
        """Readable entries, oldest first; unreadable ones are left out (see :meth:`scan`)."""
        try:
            return self.scan()[0]
        except StoreUnreadable:
            return []

    def get(self, entry_id_or_prefix: str) -> AcceptedEntry | None:
        path = self._resolve(entry_id_or_prefix, must_exist=False)
        if path is None:
            return None
        return self._read(path)

    def find_by_source_hash(self, original_hash: str) -> builtins.list[AcceptedEntry]:
        """Entries that replace the kernel with this source hash, newest first."""
        found = [e for e in self.list() if e.original_hash == original_hash]
        return sorted(found, key=lambda e: (e.created, e.id), reverse=True)

    def find_by_accepted_hash(self, accepted_hash: str) -> builtins.list[AcceptedEntry]:
        """Entries whose accepted source has this hash (e.g. a dump already edited to it)."""
        return [e for e in self.list() if e.accepted_hash == accepted_hash]

    # --- writing ---------------------------------------------------------------------------

    def add(self, entry: AcceptedEntry) -> str:
        """Write ``entry`` atomically; returns its id (adding the same entry again overwrites it)."""
        data = entry.to_json()
        AcceptedEntry.from_json(json.loads(json.dumps(data)), where=f"entry {entry.id}")  # validate first
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise AcceptedStoreError(f"{self.root}: cannot create the store ({exc.strerror or exc})") from None
        final = os.path.join(self.root, f"{entry.id}.json")
        try:
            write_json_atomic(final, data, sort_keys=True)
        except OSError as exc:
            raise AcceptedStoreError(f"{self.root}: cannot write to the store ({exc.strerror or exc})") from None
        return entry.id

    def remove(self, entry_id_or_prefix: str) -> str:
        """Delete one entry (by id or a unique prefix of at least 4 characters); returns the id."""
        path = self._resolve(entry_id_or_prefix, must_exist=True)
        assert path is not None
        try:
            os.unlink(path)
        except OSError as exc:
            raise AcceptedStoreError(f"{path}: cannot remove ({exc.strerror or exc})") from None
        return os.path.basename(path).removesuffix(".json")

    # --- internals -------------------------------------------------------------------------

    def _read(self, path: str) -> AcceptedEntry:
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except OSError as exc:
            raise AcceptedStoreError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise AcceptedStoreError(f"{path}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise AcceptedStoreError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        return AcceptedEntry.from_json(data, where=path)

    def _resolve(self, key: str, must_exist: bool) -> str | None:
        key = key.strip().removesuffix(".json")
        if not re.fullmatch(r"[0-9a-f]{4,12}", key):
            if must_exist:
                raise AcceptedStoreError(f"{key!r} is not an entry id (4 to 12 hex characters)")
            return None
        try:
            names = os.listdir(self.root) if os.path.isdir(self.root) else []
        except OSError as exc:
            raise StoreUnreadable(f"{self.root}: cannot list the accepted-kernel store ({exc.strerror or exc})") from None
        matches = sorted(n for n in names if n.endswith(".json") and n.startswith(key) and not n.startswith("."))
        if len(matches) == 1:
            return os.path.join(self.root, matches[0])
        if not must_exist and not matches:
            return None
        if not matches:
            raise AcceptedStoreError(f"no accepted entry {key} in {self.root}")
        raise AcceptedStoreError(f"{key} matches {len(matches)} entries in {self.root}: give more characters")


# --- building entries ----------------------------------------------------------------------


def installed_version(package: str) -> str:
    """A package's installed version, read from metadata (no import)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version(package)
    except PackageNotFoundError:
        return "not installed"


def entry_from_cascade(
    graph: CompiledGraph, kernel_name: str, accepted_source: str, cascade: dict[str, Any] | None, *,
    run_id: str | None = None, gpu: str | None = None, torch_version: str | None = None,
    triton_version: str | None = None, require_accepted: bool = True,
) -> AcceptedEntry:
    """An entry for ``kernel_name`` of ``graph`` replaced by ``accepted_source``, with its gate record."""
    kernel = graph.kernel(kernel_name)
    if kernel is None:
        known = ", ".join(k.name for k in graph.kernels) or "none"
        raise AcceptedStoreError(f"{graph.path}: no Triton kernel {kernel_name} (kernels: {known})")
    if require_accepted and not (isinstance(cascade, dict) and cascade.get("accepted") is True):
        reason = cascade.get("reason") if isinstance(cascade, dict) else "no gate record"
        raise AcceptedStoreError(f"{kernel_name}: the candidate did not pass the gates ({reason}); not accepted")
    if accepted_source == kernel.source:
        raise AcceptedStoreError(f"{kernel_name}: the accepted source is the original source; nothing to replace")
    cascade = cascade or {}
    ci = cascade.get("ci")
    kernel_speedups = cascade.get("kernel_speedups") or {}
    return AcceptedEntry(
        original_hash=kernel.source_hash, kernel_name=kernel_name,
        input_specs=[asdict(spec) for spec in graph.inputs], accepted_source=accepted_source,
        gates=cascade or None,
        speedup=_float_or_none(cascade.get("speedup")),
        ci=(float(ci[0]), float(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None,
        torch_version=torch_version or installed_version("torch"),
        triton_version=triton_version or installed_version("triton"),
        gpu=gpu or str(cascade.get("gpu") or cascade.get("device") or graph.device or "unknown"),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        run_id=run_id, original_source=kernel.source, graph_path=graph.path,
        timing_path=cascade.get("timing_path"),
        launch_numels=[list(launch.int_args) for launch in graph.launches_of(kernel_name)],
        signature=list(kernel.signature),
        notes=[f"kernel speedup {kernel_speedups[kernel_name]:.3f}x"] if _is_number(kernel_speedups.get(kernel_name)) else [],
    )


def _float_or_none(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def entries_from_run(run_dir: str) -> list[AcceptedEntry]:
    """One entry per accepted kernel of an optimize run (``.kernelopt/runs/<id>/result.json``)."""
    result_path = os.path.join(run_dir, "result.json")
    try:
        with open(result_path, encoding="utf-8") as handle:
            result = json.load(handle)
    except OSError as exc:
        raise AcceptedStoreError(f"{result_path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AcceptedStoreError(f"{result_path}: not valid JSON ({exc})") from None
    if not isinstance(result, dict):
        raise AcceptedStoreError(f"{result_path}: not a JSON object")
    decision = result.get("decision")
    if decision != "optimized":
        raise AcceptedStoreError(
            f"{run_dir}: the run has no accepted kernel (decision {decision!r}: {result.get('reason') or 'no reason'})")
    cascade = result.get("cascade") if isinstance(result.get("cascade"), dict) else None
    graph = _graph_of_run(result, cascade, run_dir)
    sources = _accepted_sources(result, run_dir)
    env: dict[str, Any] = result["environment"] if isinstance(result.get("environment"), dict) else {}
    run_id = str(result.get("run_id") or os.path.basename(os.path.normpath(run_dir)))
    entries = []
    for name, source in sources.items():
        gate_record = cascade or {"accepted": True, "reason": f"optimize run {run_id}: {result.get('reason', '')}",
                                  "speedup": result.get("speedup"), "ci": result.get("ci"),
                                  "timing_path": result.get("timing_path")}
        entries.append(entry_from_cascade(
            graph, name, source, gate_record, run_id=run_id,
            gpu=env.get("gpu") or result.get("gpu") or result.get("device"),
            torch_version=env.get("torch") or result.get("torch_version"),
            triton_version=env.get("triton") or result.get("triton_version"),
        ))
    return entries


def _accepted_sources(result: dict[str, Any], run_dir: str) -> dict[str, str]:
    """Kernel name -> accepted source: inline in result.json, else from the run's re-stitched graph."""
    inline = result.get("accepted_sources")
    if isinstance(inline, dict) and inline and all(isinstance(v, str) for v in inline.values()):
        return dict(inline)
    names = result.get("accepted_kernels")
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise AcceptedStoreError(f"{run_dir}: result.json names no accepted kernels")
    restitched = os.path.join(run_dir, "optimized_output_code.py")
    try:
        optimized = parse_output_code(restitched)
    except DumpError as exc:
        raise AcceptedStoreError(f"{run_dir}: the run's optimized graph cannot be read: {exc}") from None
    try:
        return optimized.kernel_sources(names)
    except MissingKernel as missing:
        raise AcceptedStoreError(f"{restitched}: no kernel {missing.name}, which result.json says was accepted") from None


def entry_from_run(run_dir: str) -> AcceptedEntry:
    """The entry for an optimize run's accepted kernel (its fastest one when it accepted several)."""
    entries = entries_from_run(run_dir)
    return max(entries, key=lambda e: e.speedup if e.speedup is not None else 0.0)


def _graph_of_run(result: dict[str, Any], cascade: dict[str, Any] | None, run_dir: str) -> CompiledGraph:
    candidates = [result.get("graph_path"), result.get("path"), result.get("graph"),
                  (cascade or {}).get("graph_path")]
    for path in candidates:
        if isinstance(path, str) and path:
            try:
                return parse_output_code(path)
            except DumpError as exc:
                raise AcceptedStoreError(f"{run_dir}: the run's graph cannot be read: {exc}") from None
    raise AcceptedStoreError(f"{run_dir}: result.json does not say which graph the run optimized")
