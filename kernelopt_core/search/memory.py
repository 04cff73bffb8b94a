"""Experience memory: a per-run FIFO and a persistent cross-run store with an AVOID tracker.

* :class:`RunMemory` keeps at most 8 experience items, and only informative ones: a speedup of
  at least 1.05x or a slowdown of at least 1.20x (speedup <= 1/1.2).
* :class:`ExperienceStore` is SQLite under the user cache folder
  (``$KERNELOPT_CACHE_DIR/memory.sqlite`` or ``~/.cache/kernelopt/memory.sqlite``). It keeps the
  experience items of past runs and every attempt of a strategy; a strategy with a success rate
  under 30% after at least 3 attempts is marked AVOID.

Both are searchable by the planner's ``search_memory(query)`` tool. Recording is idempotent per
(run, key) so a resumed run never counts an attempt twice.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

KEEP_SPEEDUP = 1.05
KEEP_SLOWDOWN = 1.20
RUN_CAPACITY = 8
AVOID_MIN_TRIES = 3
AVOID_MAX_RATE = 0.30

MemoryAction = Literal["append", "replace", "skip"]


@dataclass
class ExperienceItem:
    speedup: float
    rewrite_type: str  # the rewrite family, or "llm"
    direction: str
    profiling_signal: str = ""
    strategy_title: str = ""
    strategy_description: str = ""
    slow_pseudocode: str = ""
    fast_pseudocode: str = ""
    applicable_when: str = ""
    not_applicable_when: str = ""
    kernel_kind: str = ""  # poi/red/per
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExperienceItem:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["speedup"] = float(known.get("speedup", 1.0))
        known.setdefault("rewrite_type", "unknown")
        known.setdefault("direction", "")
        return cls(**known)

    def text(self) -> str:
        return " ".join(str(v) for v in asdict(self).values())

    def describe(self) -> str:
        verdict = "worked" if self.speedup >= 1.0 else "hurt"
        line = f"[{self.rewrite_type}] {self.strategy_title or self.direction}: {self.speedup:.2f}x ({verdict})"
        if self.applicable_when:
            line += f"; applies when {self.applicable_when}"
        if self.not_applicable_when:
            line += f"; not when {self.not_applicable_when}"
        return line


@dataclass
class MemoryUpdate:
    action: MemoryAction
    replace_index: int | None = None


def informative(speedup: float) -> bool:
    """Worth remembering: a clear win or a clear loss."""
    return speedup >= KEEP_SPEEDUP or speedup <= 1.0 / KEEP_SLOWDOWN


@dataclass
class RunMemory:
    capacity: int = RUN_CAPACITY
    items: deque[ExperienceItem] = field(default_factory=deque)

    def apply(self, item: ExperienceItem, update: MemoryUpdate) -> bool:
        """Add an item as the summarizer asked; returns whether memory changed."""
        if update.action == "skip" or not informative(item.speedup):
            return False
        if update.action == "replace" and update.replace_index is not None and 0 <= update.replace_index < len(self.items):
            self.items[update.replace_index] = item
            return True
        self.items.append(item)
        while len(self.items) > self.capacity:
            self.items.popleft()  # FIFO: the oldest goes first
        return True

    def search(self, query: str, limit: int = 5) -> list[ExperienceItem]:
        return _rank([(item.text(), item) for item in self.items], query, limit)

    def to_json(self) -> list[dict[str, Any]]:
        return [item.to_json() for item in self.items]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) > 1}


def _rank(entries: list[tuple[str, Any]], query: str, limit: int) -> list[Any]:
    """Keyword overlap, newest first among equals; an empty query returns the newest entries."""
    words = _words(query)
    scored = []
    for position, (text, value) in enumerate(entries):
        score = len(words & _words(text)) if words else 1
        if score:
            scored.append((score, position, value))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    return [value for _, _, value in scored[:limit]]


def default_store_path() -> Path:
    from ..measure.cache_dir import cache_root

    return cache_root() / "memory.sqlite"


@dataclass
class StrategyStats:
    strategy: str
    tries: int
    successes: int

    @property
    def success_rate(self) -> float:
        return self.successes / self.tries if self.tries else 0.0

    @property
    def avoid(self) -> bool:
        return self.tries >= AVOID_MIN_TRIES and self.success_rate < AVOID_MAX_RATE


class ExperienceStore:
    """The cross-run SQLite store. Safe for several processes (SQLite locking, short transactions)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(str(self.path), timeout=30.0)
        self._connection.execute("PRAGMA journal_mode=WAL")
        with self._connection:
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS experiences (id INTEGER PRIMARY KEY, run_id TEXT, key TEXT, "
                "created REAL, item TEXT, search_text TEXT, UNIQUE(run_id, key))")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY, run_id TEXT, key TEXT, "
                "strategy TEXT, kernel_kind TEXT, device TEXT, success INTEGER, speedup REAL, created REAL, "
                "UNIQUE(run_id, key))")

    def close(self) -> None:
        self._connection.close()

    def record_attempt(self, run_id: str, key: str, strategy: str, success: bool, *, speedup: float | None = None,
                       kernel_kind: str = "", device: str = "") -> None:
        with self._connection:
            self._connection.execute(
                "INSERT OR IGNORE INTO attempts (run_id, key, strategy, kernel_kind, device, success, speedup, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, key, strategy, kernel_kind, device, int(success), speedup, time.time()))

    def add_experience(self, run_id: str, key: str, item: ExperienceItem) -> None:
        with self._connection:
            self._connection.execute(
                "INSERT OR IGNORE INTO experiences (run_id, key, created, item, search_text) VALUES (?, ?, ?, ?, ?)",
                (run_id, key, time.time(), json.dumps(item.to_json()), item.text()))

    def stats(self, kernel_kind: str | None = None, device: str | None = None) -> list[StrategyStats]:
        query = "SELECT strategy, COUNT(*), SUM(success) FROM attempts"
        where, args = [], []
        if kernel_kind:
            where.append("kernel_kind = ?")
            args.append(kernel_kind)
        if device:
            where.append("device = ?")
            args.append(device)
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " GROUP BY strategy ORDER BY strategy"
        rows = self._connection.execute(query, args).fetchall()
        return [StrategyStats(str(s), int(n), int(ok or 0)) for s, n, ok in rows]

    def avoid_list(self, kernel_kind: str | None = None, device: str | None = None) -> set[str]:
        return {s.strategy for s in self.stats(kernel_kind, device) if s.avoid}

    def search(self, query: str, limit: int = 5) -> list[ExperienceItem]:
        rows = self._connection.execute("SELECT search_text, item FROM experiences ORDER BY id").fetchall()
        entries = []
        for text, raw in rows:
            try:
                entries.append((text, ExperienceItem.from_json(json.loads(raw))))
            except (ValueError, TypeError):
                continue  # a damaged row is skipped, never fatal
        return _rank(entries, query, limit)


def search_memory(query: str, run: RunMemory | None, store: ExperienceStore | None, *, kernel_kind: str | None = None,
                  device: str | None = None, limit: int = 5) -> str:
    """The planner tool's answer: matching items from this run and past runs, and the AVOID list."""
    lines: list[str] = []
    if run is not None:
        found = run.search(query, limit)
        lines.append(f"This run ({len(run.items)} item(s) kept):")
        lines += [f"  - {item.describe()}" for item in found] or ["  (nothing matching)"]
    if store is not None:
        found = store.search(query, limit)
        lines.append("Past runs:")
        lines += [f"  - {item.describe()}" for item in found] or ["  (nothing matching)"]
        stats = store.stats(kernel_kind, device)
        avoid = [s for s in stats if s.avoid]
        if avoid:
            lines.append("AVOID (success < 30% after >= 3 tries): " + ", ".join(
                f"{s.strategy} ({s.successes}/{s.tries})" for s in avoid))
        tried = [s for s in stats if not s.avoid]
        if tried:
            lines.append("Strategy record: " + ", ".join(f"{s.strategy} {s.successes}/{s.tries}" for s in tried))
    return "\n".join(lines) if lines else "memory is switched off for this run"
