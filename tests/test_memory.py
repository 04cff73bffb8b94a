"""Experience memory: the per-run FIFO and the cross-run SQLite store with its AVOID tracker."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kernelopt_core.search.memory import (
    ExperienceItem,
    ExperienceStore,
    MemoryUpdate,
    RunMemory,
    default_store_path,
    informative,
    search_memory,
)


def item(speedup: float, family: str = "launch_config", title: str = "bigger XBLOCK") -> ExperienceItem:
    return ExperienceItem(speedup=speedup, rewrite_type=family, direction=family, strategy_title=title,
                          applicable_when="persistent reductions with few rows")


def test_only_informative_results_are_kept() -> None:
    assert informative(1.05) and informative(2.0)
    assert informative(1 / 1.2) and informative(0.5)
    assert not informative(1.049) and not informative(1.0) and not informative(0.85)
    memory = RunMemory()
    assert not memory.apply(item(1.01), MemoryUpdate("append"))
    assert not memory.apply(item(1.5), MemoryUpdate("skip"))
    assert memory.apply(item(1.5), MemoryUpdate("append"))
    assert memory.apply(item(0.7, "fast_math"), MemoryUpdate("append"))
    assert [i.speedup for i in memory.items] == [1.5, 0.7]


def test_fifo_of_eight_drops_the_oldest_and_replace_works() -> None:
    memory = RunMemory()
    for n in range(10):
        memory.apply(item(1.1 + n / 100, title=f"t{n}"), MemoryUpdate("append"))
    assert len(memory.items) == 8
    assert [i.strategy_title for i in memory.items][0] == "t2"
    memory.apply(item(3.0, title="better"), MemoryUpdate("replace", replace_index=0))
    assert memory.items[0].strategy_title == "better" and len(memory.items) == 8


def test_run_memory_search_ranks_by_keywords() -> None:
    memory = RunMemory()
    memory.apply(item(1.5, "persistent", "inline the row loop"), MemoryUpdate("append"))
    memory.apply(item(1.3, "eviction_hints", "stream the rows"), MemoryUpdate("append"))
    found = memory.search("persistent row loop")
    assert found[0].rewrite_type == "persistent"
    assert memory.search("")[0].rewrite_type == "eviction_hints"  # newest first without a query


def test_store_avoid_tracker_and_idempotent_recording(tmp_path: Path) -> None:
    store = ExperienceStore(tmp_path / "memory.sqlite")
    for n, ok in enumerate([False, False]):
        store.record_attempt("run1", f"c{n}", "fast_math", ok, kernel_kind="per", device="cpu")
    assert store.avoid_list() == set()  # 2 tries are not enough to judge
    store.record_attempt("run1", "c2", "fast_math", True, kernel_kind="per", device="cpu")
    store.record_attempt("run1", "c2", "fast_math", True, kernel_kind="per", device="cpu")  # a resumed run
    assert store.avoid_list() == set()  # 1/3 = 33% is not under 30%
    store.record_attempt("run2", "c0", "fast_math", False, kernel_kind="per", device="cpu")
    assert store.avoid_list() == {"fast_math"}  # 1/4 = 25% after >= 3 tries
    for n in range(3):
        store.record_attempt("run2", f"l{n}", "launch_config", True, kernel_kind="per", device="cpu")
    stats = {s.strategy: s for s in store.stats()}
    assert (stats["fast_math"].tries, stats["fast_math"].successes) == (4, 1)
    assert stats["launch_config"].success_rate == 1.0
    assert store.avoid_list(device="cuda") == set()  # filtered by device
    store.close()


def test_store_persists_across_runs_and_is_searchable(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    store = ExperienceStore(path)
    store.add_experience("run1", "c1", item(1.8, "persistent", "inline row loops"))
    store.add_experience("run1", "c1", item(1.8, "persistent", "inline row loops"))  # idempotent
    store.close()
    again = ExperienceStore(path)
    found = again.search("row loops")
    assert len(found) == 1 and found[0].speedup == 1.8
    with sqlite3.connect(path) as raw:  # a damaged row is skipped, never fatal
        raw.execute("INSERT INTO experiences (run_id, key, created, item, search_text) VALUES "
                    "('x', 'y', 0, 'not json', 'row loops')")
    assert len(again.search("row loops")) == 1
    text = search_memory("row", RunMemory(), again)
    assert "inline row loops" in text and "This run" in text and "Past runs" in text
    again.close()


def test_search_memory_reports_avoid(tmp_path: Path) -> None:
    store = ExperienceStore(tmp_path / "m.sqlite")
    for n in range(3):
        store.record_attempt("r", f"k{n}", "vector_hints", False)
    assert "AVOID" in search_memory("anything", None, store) and "vector_hints (0/3)" in search_memory("x", None, store)
    assert search_memory("x", None, None) == "memory is switched off for this run"
    store.close()


def test_default_path_follows_the_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path / "cache"))
    assert default_store_path() == tmp_path / "cache" / "memory.sqlite"
