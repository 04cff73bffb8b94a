"""Optimize runs on disk: ``<run_root>/<id>/`` with an append-only journal, candidates and reports.

Layout::

    journal.jsonl        every plan, candidate, gate result, timing and LLM call, one JSON per line
    candidates/          each candidate kernel module (named by kernel and source hash)
    ncu/                 profiler output
    report.md            speedup table, gate outcomes, fallback reason
    final.diff           the accepted change against the original output_code.py (may be empty)
    result.json          the OptimizeResult
    original_kernel.py / optimized_kernel.py   the best kernel before/after (for editors)

Each journal line is fsynced before the run moves on; expensive results are recorded under a ``(kind,
key)`` a resumed run looks up: after a SIGKILL anywhere, a torn last line is dropped and the rest kept.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic_files import fsync_dir, write_text_atomic

JOURNAL = "journal.jsonl"


class RunError(ValueError):
    """A run folder that cannot be created, found or resumed (the message says which and why)."""


@dataclass
class Journal:
    """An append-only JSON-lines file; each entry gets a sequence number and a timestamp."""

    path: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped_tail: bool = False  # a torn last line was found (and removed) on load
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _index: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)
    _cursor: dict[str, int] = field(default_factory=dict, repr=False)  # record(): position per kind

    @classmethod
    def open(cls, path: Path) -> Journal:
        journal = cls(path)
        if path.exists():
            journal._load()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        return journal

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = 0
        position = 0
        for line in raw.splitlines(keepends=True):
            position += len(line)
            if not line.endswith(b"\n"):
                self.dropped_tail = True  # the process died mid-write: this line never completed
                break
            try:
                entry = json.loads(line)
            except ValueError:
                self.dropped_tail = True
                break
            if isinstance(entry, dict):
                self._remember(entry)
            good_end = position
        if good_end < len(raw):
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)
                os.fsync(handle.fileno())

    def _remember(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        if "key" in entry:
            self._index[(str(entry.get("kind")), str(entry["key"]))] = entry

    def append(self, kind: str, key: str | None = None, **data: Any) -> dict[str, Any]:
        with self._lock:
            entry: dict[str, Any] = {"seq": len(self.entries), "time": round(time.time(), 3), "kind": kind}
            if key is not None:
                entry["key"] = key
            entry.update(data)
            line = json.dumps(entry, default=str, sort_keys=False) + "\n"
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self._remember(json.loads(line))
            return entry

    def record(self, kind: str, **data: Any) -> dict[str, Any]:
        """Append an informational entry, unless a resumed run is replaying one already recorded.

        The n-th ``record`` of a kind matches the n-th entry of that kind in the journal; when that
        entry holds the same data the run is replaying what it did before the interruption and
        nothing is written twice. Anything new (or different) is appended.
        """
        position = self._cursor.get(kind, 0)
        self._cursor[kind] = position + 1
        same_kind = [e for e in self.entries if e.get("kind") == kind and "key" not in e]
        if position < len(same_kind):
            recorded = same_kind[position]
            comparable = json.loads(json.dumps(data, default=str))
            if all(recorded.get(k) == v for k, v in comparable.items()):
                return recorded
        return self.append(kind, **data)

    def lookup(self, kind: str, key: str) -> dict[str, Any] | None:
        return self._index.get((kind, key))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e.get("kind") == kind]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:32] or "graph"


@dataclass
class RunFolder:
    path: Path
    journal: Journal

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def candidates_dir(self) -> Path:
        return self.path / "candidates"

    @property
    def ncu_dir(self) -> Path:
        return self.path / "ncu"

    @classmethod
    def create(cls, run_root: str | Path, label: str) -> RunFolder:
        root = Path(run_root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"{root}: cannot create the run folder ({exc.strerror})") from None
        for _ in range(20):
            run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(label)}-{secrets.token_hex(2)}"
            path = root / run_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 20 collisions of 16 random bits in one second
            raise RunError(f"{root}: could not pick a fresh run id")
        (path / "candidates").mkdir()
        (path / "ncu").mkdir()
        fsync_dir(root)
        return cls(path, Journal.open(path / JOURNAL))

    @classmethod
    def open(cls, run: str | Path, run_root: str | Path | None = None) -> RunFolder:
        """An existing run, by folder path or by id under ``run_root``."""
        candidates = [Path(run)]
        if run_root is not None:
            candidates.append(Path(run_root) / str(run))
        for path in candidates:
            if (path / JOURNAL).is_file():
                (path / "candidates").mkdir(exist_ok=True)
                (path / "ncu").mkdir(exist_ok=True)
                return cls(path, Journal.open(path / JOURNAL))
        where = " or ".join(str(p) for p in candidates)
        raise RunError(f"no run to resume at {where} (a run folder holds {JOURNAL})")

    def write_candidate(self, kernel: str, source_hash: str, source: str) -> Path:
        path = self.candidates_dir / f"{kernel}.{source_hash[:12]}.py"
        if not path.exists():
            write_text_atomic(path, source)
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.path / name
        write_text_atomic(path, text)
        return path

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=1, default=str) + "\n")

    def read_json(self, name: str) -> Any | None:
        try:
            return json.loads((self.path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


def _fmt_speedup(value: Any) -> str:
    return f"{value:.3f}x" if isinstance(value, (int, float)) else "-"


def _steps_text(numbers: Any) -> str:
    """A gate's largest steps (its ``steps_s``), e.g. "candidate 3.8 s, compare 0.8 s"; "-" for none."""
    steps = numbers.get("steps_s") if isinstance(numbers, dict) else None
    if not isinstance(steps, dict):
        return "-"
    timed = sorted(((float(v), str(k)) for k, v in steps.items() if isinstance(v, (int, float)) and k != "checks_s"
                    and float(v) >= 0.5), reverse=True)
    return ", ".join(f"{name} {seconds:.1f} s" for seconds, name in timed[:5]) or "-"


def _fmt_pct(value: Any) -> str:
    return f"{value:.0f}%" if isinstance(value, (int, float)) else "-"


def _fmt_ratio(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


def _fmt_ci(ci: Any) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]"
    return "-"


def _fmt_seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    if value >= 60:
        minutes, seconds = divmod(int(round(value)), 60)
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    return f"{value:.1f} s"


def _time_section(split: dict[str, Any], budget: dict[str, Any]) -> list[str]:
    """## Time: seconds per stage, the screening rate, what the budget cut short, each candidate's time."""
    stages = split.get("stages") or {}
    if not stages:
        return []
    total = split.get("total_s") or 0.0
    lines = ["", "## Time", "", f"{_fmt_seconds(total)} in all.", "", "| stage | seconds | share |", "|---|---|---|"]
    for name, seconds in stages.items():
        if seconds or name == "other":
            lines.append(f"| {name} | {seconds:.1f} | {100 * seconds / total if total else 0:.0f}% |")
    screened, rate = split.get("screened") or 0, split.get("screened_per_minute")
    screen = split.get("screen_s") or {}
    if screened:
        lines += ["", f"{screened} candidate(s) screened in {_fmt_seconds(split.get('search_s'))} of search "
                      f"(beam, screen and time stages): {rate:.2f} per minute; screen median "
                      f"{_fmt_seconds(screen.get('median'))}, p90 {_fmt_seconds(screen.get('p90'))}, "
                      f"max {_fmt_seconds(screen.get('max'))}."
                  + (f" {split.get('replayed')} result(s) replayed from the journal." if split.get("replayed") else "")]
    for stop in budget.get("stops") or []:
        lines.append(f"- budget stop at {stop.get('stage')}" + (f" ({stop.get('kernel')})" if stop.get("kernel") else "")
                     + f": {stop.get('detail')}")
    candidates = split.get("candidates") or []
    if candidates:
        lines += ["", "| candidate | kernel | family | verdict | kernel speedup | propose s | screen s | time s "
                      "| final gates s |", "|---|---|---|---|---|---|---|---|---|"]
        for c in candidates:
            final = c.get("finalize_s")
            lines.append(f"| `{c.get('label')}` | `{c.get('kernel')}` | {c.get('family')} | {c.get('verdict') or '-'}"
                         f"{' (replayed)' if c.get('replayed') else ''} | {_fmt_speedup(c.get('speedup'))} "
                         f"| {c.get('propose_s', 0):.1f} | {c.get('screen_s', 0):.1f} | {c.get('time_s', 0):.1f} "
                         f"| {f'{final:.1f}' if isinstance(final, (int, float)) else '-'} |")
    return lines


def render_report(result: dict[str, Any], journal: Journal) -> str:
    """report.md: the decision, the speedup table, the gate outcomes and the fallback reason."""
    started = next((e for e in journal.entries if e.get("kind") == "run_started"), {})
    lines = [f"# KernelOPT run {result.get('run_id')}", ""]
    user = started.get("user_kernel") or None  # a project's own kernel: its file and harness, not a graph
    if user:
        harness = user.get("harness") or {}
        lines.append(f"- your file: `{user.get('file', '?')}`, kernel `{user.get('kernel', '?')}`, harness "
                     f"`{harness.get('text') or harness.get('name') or '?'}`")
    else:
        lines.append(f"- graph: `{started.get('graph_path', '?')}`")
    lines.append(f"- device: {started.get('device', '?')}; provider: {started.get('provider', '?')}"
                 + (f" ({started.get('model')})" if started.get("provider") not in (None, "offline") else ""))
    config = started.get("config") or {}
    if config:
        lines.append("- search: " + ", ".join(f"{k}={config[k]}" for k in
                                               ("beam_width", "iterations", "plans", "retries") if k in config))
    if not result.get("final", True):
        lines.append("- **provisional**: verified while the search went on; the run had not finished when this was "
                     "written")
    lines.append(f"- **decision: {result.get('decision')}** — {result.get('reason')}")
    budget = result.get("budget") or {}
    if budget:
        limit = budget.get("seconds")
        lines.append(f"- budget: {_fmt_seconds(limit) if limit else 'no limit'}"
                     + (", **budget reached**" if budget.get("reached") else "")
                     + f"; {_fmt_seconds(budget.get('elapsed_s'))} used")
        for ended in budget.get("nothing_left") or []:  # a beam that ended before its budget, and why
            lines.append(f"- ended with {_fmt_seconds(budget.get('left_s'))} of the budget left: nothing left to try "
                         f"for `{ended.get('kernel')}` ({ended.get('reason')})")
    lines.append(f"- end-to-end speedup: {_fmt_speedup(result.get('speedup'))} (95% CI {_fmt_ci(result.get('ci'))}, "
                 f"timing path `{result.get('timing_path') or '-'}`)")
    for found in result.get("found_unverified") or []:  # worth finalizing, but the budget had no time left
        lines.append(f"- `{found.get('kernel')}` {found.get('candidate')} ({found.get('title')}): kernel speedup "
                     f"{_fmt_speedup(found.get('kernel_speedup'))} (95% CI {_fmt_ci(found.get('ci'))}), "
                     f"**{found.get('status')}**")
    if str(started.get("device", "")).startswith("cpu"):
        lines.append("- note: times are CPU Triton-interpreter wall-clock times, not GPU times")
    lines += ["", "## Kernels", "",
              "| kernel | share | SOL | traffic | causes | decision | best rewrite | kernel speedup | SOL after "
              "| candidates | passed gates 1-2 |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kernel in result.get("kernels", []):
        share = kernel.get("share")
        share_text = "~100%" if kernel.get("share_note") else f"{share:.0%}" if isinstance(share, (int, float)) \
            else "-"
        lines.append(
            f"| `{kernel.get('name')}` | {share_text} "
            f"| {_fmt_pct(kernel.get('sol_pct'))} | {_fmt_ratio(kernel.get('traffic_ratio'))} "
            f"| {', '.join(kernel.get('causes') or []) or '-'} "
            f"| {kernel.get('decision')} | {kernel.get('best_title') or '-'} "
            f"| {_fmt_speedup(kernel.get('kernel_speedup'))} | {_fmt_pct(kernel.get('sol_after_pct'))} "
            f"| {kernel.get('candidates', 0)} | {kernel.get('screened_ok', 0)} |")
    for kernel in result.get("kernels", []):
        if kernel.get("share_note"):  # no share figure for this kernel: why, with both spreads
            lines += ["", f"~100%: {kernel['share_note']}"]
    if any(k.get("ideal_bytes") for k in result.get("kernels", [])):
        lines += ["", "SOL: speed of light, the kernel's ideal bytes (each tensor read or written once) over its "
                      "time at the device's measured copy bandwidth; traffic: DRAM bytes measured by ncu over the "
                      "ideal bytes; SOL after: the baseline SOL times the accepted rewrite's kernel speedup. The "
                      "paper's SOL-memory tier: " + ", ".join(f"`{k.get('name')}` {k.get('paper_tier') or '-'}"
                                                             for k in result.get("kernels", [])) + "."]
    cascade = result.get("cascade") or {}
    if cascade.get("gates"):
        lines += ["", "## Gate outcomes (final candidate)", "",
                  "| gate | passed | reason | seconds | where the time went |", "|---|---|---|---|---|"]
        for gate in cascade["gates"]:
            reason = str(gate.get("reason", "")).replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {gate.get('gate')} {gate.get('name')} | {'yes' if gate.get('passed') else 'no'} "
                         f"| {reason} | {gate.get('seconds', 0):.1f} | {_steps_text(gate)} |")
    rejections: dict[str, int] = {}
    for entry in journal.of_kind("screen"):
        value = entry.get("value") or {}
        if not entry.get("passed") and not value.get("could_not_verify"):
            gate = f"gate {entry.get('failed_gate')}"
            rejections[gate] = rejections.get(gate, 0) + 1
    if rejections:
        lines += ["", "## Rejected candidates", ""]
        lines += [f"- {gate}: {count}" for gate, count in sorted(rejections.items())]
    unverified = journal.of_kind("could_not_verify")
    if unverified:
        lines += ["", "## Could not verify", "",
                  "The check itself failed for these candidates (e.g. it ran out of memory); they were neither "
                  "accepted nor counted as rejected, and nothing was learnt from them:", ""]
        lines += [f"- `{e.get('candidate')}`: {str(e.get('reason', ''))[:300]}" for e in unverified]
    quarantined = journal.of_kind("quarantine")
    if quarantined:
        lines += ["", "## Quarantined candidates", "",
                  "These candidates tried to write a file or open a socket from their contained process and were "
                  "refused (docs/gates.md, Containment):", ""]
        for entry in quarantined:
            where = entry.get("containment") or {}
            lines.append(f"- `{entry.get('candidate')}` ({entry.get('title')}, source {str(entry.get('source_hash'))[:12]}, "
                         f"process {where.get('pid', '?')}): {str(entry.get('reason', ''))[:300]}")
    optimized = result.get("decision") == "optimized"
    if not optimized:
        kept = "Your file keeps its kernel" if user else "The compiler's own code is kept"
        lines += ["", "## Fallback", "", f"{kept}, for the reason the decision above gives."]
    usage = result.get("llm_usage") or {}
    if usage.get("calls"):
        cost = usage.get("cost_usd")
        lines += ["", "## LLM usage", "",
                  f"{usage['calls']} call(s), {usage.get('input_tokens', 0)} input / {usage.get('output_tokens', 0)} "
                  f"output tokens, {usage.get('cache_read_input_tokens', 0)} read from the prompt cache, "
                  f"{usage.get('retries', 0)} retries; cost "
                  + (f"${cost:.4f}" if isinstance(cost, (int, float)) else "unknown for this model")]
    lines += _time_section(result.get("time_split") or {}, budget)
    skipped = [e for e in journal.entries if e.get("kind") == "finalist_skipped"]
    if skipped:
        lines += ["", "Not sent to the final gates (the end-to-end gate was out of their reach):"]
        lines += [f"- `{e.get('node')}` (`{e.get('kernel')}`): {e.get('reason')}" for e in skipped]
    if result.get("suggestions"):
        lines += ["", "## Suggestions outside the kernels", ""]
        lines += [f"- {s}" for s in result["suggestions"]]
    change = ("the accepted change is in `final.diff`" + (" (apply it with `patch -p1`; nothing was written to "
                                                            "your file)" if user else "")) if optimized else \
        "nothing changed, so `final.diff` is empty"
    lines += ["", f"Journal: `{JOURNAL}` ({len(journal.entries)} entries); {change}.", ""]
    return "\n".join(lines)
