"""What the server remembers about kernels: the last profile, gate verdicts and optimize runs.

Each record carries the hash of the kernel source it was made on, so a feature can tell that
the kernel has changed since (a stale result). Runs are also read back from
``.kernelopt/runs/<id>/result.json`` so results survive a server restart.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from kernelopt_core.artifacts.model import source_hash

RUNS_DIR = os.path.join(".kernelopt", "runs")


@dataclass
class ProfileRecord:
    """One kernel's entry of ``kernelopt profile --json`` (``{"kernels": [...]}``)."""

    graph_path: str
    kernel: str
    source_hash: str
    metrics: dict[str, Any]
    created: float = field(default_factory=time.time)

    def number(self, key: str) -> float | None:
        value = self.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    @property
    def tier(self) -> str | None:
        tier = self.metrics.get("tier")
        return tier if isinstance(tier, str) and tier else None

    @property
    def share_basis(self) -> str:
        """What the time share is a share of: "graph", or "profiled kernels" (ncu times only the kernels)."""
        basis = self.metrics.get("time_share_of")
        return basis if isinstance(basis, str) and basis else "graph"

    @property
    def time_share(self) -> float | None:
        """Fraction (0..1) of the share basis. None when it says nothing: one kernel profiled alone
        is 100% of the profiled kernels."""
        share = self.number("time_share")
        if share is None:
            return None
        if self.share_basis == "profiled kernels" and self.profiled_kernels <= 1:
            return None
        return share / 100.0 if share > 1.0 else share

    @property
    def share_over_whole(self) -> bool:
        """A project's kernel timed alone over its whole harness call, or within noise of it: ~100% (a note
        says why, with both spreads)."""
        return bool(self.metrics.get("time_share_note"))

    @property
    def profiled_kernels(self) -> int:
        count = self.metrics.get("profiled_kernels")
        return count if isinstance(count, int) else 1

    @property
    def share_words(self) -> str:
        return "of graph time" if self.share_basis == "graph" else f"of {self.share_basis} time"

    @property
    def rules(self) -> list[dict[str, Any]]:
        rules = self.metrics.get("rules")
        if not isinstance(rules, list):
            return []
        out = [r if isinstance(r, dict) else {"name": str(r)} for r in rules]
        # Rules with the largest estimated speedup first (the planner's top 3 come from here).
        return sorted(out, key=lambda r: -(_float(r.get("est_speedup_pct")) or 0.0))


@dataclass
class GateRecord:
    """The verdict of the gates on a kernel, from ``verify`` or an ``optimize`` run."""

    graph_path: str
    kernel: str
    kind: str  # verify | optimize
    source_hash: str  # the kernel source the verdict is about (the edit, or the original)
    accepted: bool
    failed_gate: int | None
    reason: str
    gates: list[dict[str, Any]] = field(default_factory=list)
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    decision: str | None = None  # optimize: optimized | matched | fallback
    run_id: str | None = None
    optimized_hash: str | None = None  # optimize: the accepted kernel's source hash
    created: float = field(default_factory=time.time)


@dataclass
class RunRecord:
    """One optimize run: where its files are and what it decided."""

    run_id: str
    run_dir: str
    graph_path: str
    kernel: str
    original_hash: str
    decision: str
    reason: str
    speedup: float | None
    ci: tuple[float, float] | None
    optimized_source: str | None
    result: dict[str, Any]

    @property
    def diff_path(self) -> str:
        return os.path.join(self.run_dir, "final.diff")

    @property
    def original_kernel_path(self) -> str:
        return os.path.join(self.run_dir, "original_kernel.py")

    @property
    def optimized_kernel_path(self) -> str:
        return os.path.join(self.run_dir, "optimized_kernel.py")

    def has_diff(self) -> bool:
        """The run wrote a diff that is not empty (an accepted kernel)."""
        try:
            return os.path.getsize(self.diff_path) > 0
        except OSError:
            return False


class ResultStore:
    def __init__(self) -> None:
        self._profiles: dict[tuple[str, str], ProfileRecord] = {}
        self._gates: dict[tuple[str, str, str], GateRecord] = {}
        self._runs: dict[str, RunRecord] = {}
        self._last_run: dict[tuple[str, str], str] = {}
        self._overheads: dict[str, list[dict[str, Any]]] = {}
        self._config_changes: dict[str, dict[str, Any]] = {}

    # wrapper-level overheads of a graph (from a timed profile, or an optimize run's whole-callable accounting)
    def set_overheads(self, graph_path: str, items: list[dict[str, Any]]) -> None:
        self._overheads[graph_path] = items

    def overheads(self, graph_path: str) -> list[dict[str, Any]]:
        return self._overheads.get(graph_path, [])

    # the configuration change an optimize run recommended (and verified) for a graph; None clears it
    def set_config_change(self, graph_path: str, finding: dict[str, Any] | None) -> None:
        if isinstance(finding, dict) and isinstance(finding.get("recommendation"), dict):
            self._config_changes[graph_path] = finding
        else:
            self._config_changes.pop(graph_path, None)

    def config_change(self, graph_path: str) -> dict[str, Any] | None:
        return self._config_changes.get(graph_path)

    # profiles
    def set_profile(self, record: ProfileRecord) -> None:
        self._profiles[(record.graph_path, record.kernel)] = record

    def profile(self, graph_path: str, kernel: str) -> ProfileRecord | None:
        return self._profiles.get((graph_path, kernel))

    # gate verdicts
    def set_gates(self, record: GateRecord) -> None:
        self._gates[(record.graph_path, record.kernel, record.kind)] = record

    def gate_records(self, graph_path: str, kernel: str) -> list[GateRecord]:
        return [r for kind in ("optimize", "verify") if (r := self._gates.get((graph_path, kernel, kind)))]

    # runs
    def add_run(self, record: RunRecord) -> None:
        self._runs[record.run_id] = record
        self._last_run[(record.graph_path, record.kernel)] = record.run_id

    def run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def last_run(self, graph_path: str, kernel: str) -> RunRecord | None:
        run_id = self._last_run.get((graph_path, kernel))
        return self._runs.get(run_id) if run_id else None

    def graphs_with_results(self) -> set[str]:
        paths = {key[0] for key in self._profiles} | {key[0] for key in self._gates} | set(self._overheads)
        paths |= set(self._config_changes)
        return paths | {r.graph_path for r in self._runs.values()}


# --- reading job results -------------------------------------------------------------------------


def profile_records(result: Any, graph_path: str, hashes: dict[str, str]) -> list[ProfileRecord]:
    """ProfileRecords from a ``profile --json`` result; ``hashes`` maps kernel name -> source hash."""
    if not isinstance(result, dict) or not isinstance(result.get("kernels"), list):
        raise ValueError("the profile result has no 'kernels' list")
    rows = [item for item in result["kernels"] if isinstance(item, dict) and isinstance(item.get("name"), str)]
    records = []
    for item in rows:
        if item["name"] in hashes:
            records.append(ProfileRecord(graph_path, item["name"], hashes[item["name"]],
                                         {**item, "profiled_kernels": len(rows)}))
    return records


def gate_record_from_cascade(cascade: Any, *, graph_path: str, kernel: str, kind: str,
                             kernel_hash: str) -> GateRecord:
    """A GateRecord from a ``CascadeResult.to_json()`` (the verify result, or an optimize run's)."""
    if not isinstance(cascade, dict):
        raise ValueError("the gate result is not an object")
    gates = [g for g in cascade.get("gates") or [] if isinstance(g, dict)]
    failed = cascade.get("failed_gate")
    return GateRecord(
        graph_path=graph_path, kernel=kernel, kind=kind, source_hash=kernel_hash,
        accepted=bool(cascade.get("accepted")), failed_gate=failed if isinstance(failed, int) else None,
        reason=str(cascade.get("reason") or ""), gates=gates, speedup=_float(cascade.get("speedup")),
        ci=_pair(cascade.get("ci")),
    )


def run_record_from_result(result: Any, *, graph_path: str, kernel: str, original_hash: str,
                           cwd: str | None) -> RunRecord:
    """A RunRecord from ``OptimizeResult.to_json()``; a relative run_dir is taken against ``cwd``."""
    if not isinstance(result, dict) or not result.get("run_id"):
        raise ValueError("the optimize result has no run_id")
    run_dir = str(result.get("run_dir") or os.path.join(RUNS_DIR, str(result["run_id"])))
    if not os.path.isabs(run_dir):
        run_dir = os.path.join(cwd or os.getcwd(), run_dir)
    run_dir = os.path.abspath(run_dir)
    optimized = _optimized_source(result, kernel, run_dir)
    return RunRecord(
        run_id=str(result["run_id"]), run_dir=run_dir, graph_path=graph_path, kernel=kernel,
        original_hash=original_hash, decision=str(result.get("decision") or "fallback"),
        reason=str(result.get("reason") or ""), speedup=_float(result.get("speedup")),
        ci=_pair(result.get("ci")), optimized_source=optimized if isinstance(optimized, str) else None,
        result=result,
    )


def _optimized_source(result: dict[str, Any], kernel: str, run_dir: str) -> str | None:
    """The accepted kernel source: inline (``accepted_sources``) or the run's ``optimized_kernel.py``."""
    sources = result.get("accepted_sources")
    if isinstance(sources, dict):
        found = sources.get(kernel)
        if found is None and len(sources) == 1:
            found = next(iter(sources.values()))
        if isinstance(found, str):
            return found
    accepted = result.get("accepted_kernels")
    if result.get("decision") == "optimized" and (not isinstance(accepted, list) or kernel in accepted
                                                  or len(accepted) == 1):
        path = os.path.join(run_dir, "optimized_kernel.py")
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except OSError:
            return None
    return None


def gate_record_from_run(run: RunRecord) -> GateRecord:
    cascade = run.result.get("cascade")
    base = GateRecord(
        graph_path=run.graph_path, kernel=run.kernel, kind="optimize", source_hash=run.original_hash,
        accepted=run.decision == "optimized", failed_gate=None, reason=run.reason, speedup=run.speedup,
        ci=run.ci, decision=run.decision, run_id=run.run_id,
        optimized_hash=source_hash(run.optimized_source) if run.optimized_source else None,
    )
    if isinstance(cascade, dict):
        gates = gate_record_from_cascade(cascade, graph_path=run.graph_path, kernel=run.kernel,
                                         kind="optimize", kernel_hash=run.original_hash)
        base.failed_gate = gates.failed_gate
        base.gates = gates.gates
        base.reason = run.reason or gates.reason
    return base


def find_run_dir(run_id: str, roots: list[str]) -> str | None:
    """``<root>/.kernelopt/runs/<run_id>`` under the first root that has it."""
    if not run_id or os.sep in run_id or "/" in run_id or run_id in (".", ".."):
        return None
    for root in roots:
        candidate = os.path.join(root, RUNS_DIR, run_id)
        if os.path.isdir(candidate):
            return candidate
    return None


def load_run(run_dir: str, graph_path: str | None = None) -> RunRecord:
    """Read a finished run back from its folder (``result.json``)."""
    path = os.path.join(run_dir, "result.json")
    try:
        with open(path, encoding="utf-8") as handle:
            result = json.load(handle)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    if not isinstance(result, dict):
        raise ValueError(f"{path}: not a JSON object")
    kernels = result.get("kernels") or []
    kernel = ""
    if isinstance(kernels, list) and kernels and isinstance(kernels[0], dict):
        kernel = str(kernels[0].get("name") or kernels[0].get("kernel") or "")
    sources = result.get("accepted_sources")
    if not kernel and isinstance(sources, dict) and sources:
        kernel = next(iter(sources))
    original = ""
    original_file = os.path.join(run_dir, "original_kernel.py")
    if os.path.isfile(original_file):
        with open(original_file, encoding="utf-8") as handle:
            original = source_hash(handle.read())
    graph = graph_path or str(result.get("path") or result.get("graph_path") or "")
    result.setdefault("run_dir", run_dir)
    return run_record_from_result(result, graph_path=graph, kernel=kernel, original_hash=original, cwd=run_dir)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = _float(value[0]), _float(value[1])
        if low is not None and high is not None:
            return (low, high)
    return None


def callable_overhead_items(result: Any) -> list[dict[str, Any]] | None:
    """The whole-callable overhead items of an ``optimize --json`` result (``accounting.overheads``),
    marked ``basis: "callable"``; None when the run had no accounting (the problem was unknown)."""
    accounting = result.get("accounting") if isinstance(result, dict) else None
    if not isinstance(accounting, dict) or not isinstance(accounting.get("overheads"), list):
        return None
    return [{**item, "basis": "callable", "path": accounting.get("path")} for item in accounting["overheads"]
            if isinstance(item, dict) and isinstance(item.get("name"), str)]


def overhead_items(result: Any, graph_path: str) -> list[dict[str, Any]]:
    """The overhead items a ``profile --json`` result gives for one graph (timed profiles only)."""
    if not isinstance(result, dict) or not isinstance(result.get("overheads"), list):
        return []
    wanted = os.path.realpath(graph_path)
    return [item for item in result["overheads"] if isinstance(item, dict) and isinstance(item.get("name"), str)
            and (not item.get("graph") or os.path.realpath(str(item["graph"])) == wanted)]
