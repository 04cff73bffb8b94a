"""The run's experience: the per-run memory, the cross-run store and its AVOID list, and what each
measured candidate teaches them (through the summarizer agent)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runs import Journal
from .agents import KernelBrief, Outcome, Plan, Proposal, Summarizer
from .llm import ProviderError
from .memory import ExperienceStore, RunMemory, search_memory
from .options import OptimizeConfig


@dataclass
class Experience:
    config: OptimizeConfig
    journal: Journal
    run_id: str
    device_kind: str
    run_memory: RunMemory | None = None
    store: ExperienceStore | None = None
    brief: KernelBrief | None = None  # the kernel being searched (the memory tool filters by its kind)

    @classmethod
    def open(cls, config: OptimizeConfig, journal: Journal, run_id: str, device_kind: str) -> Experience:
        experience = cls(config, journal, run_id, device_kind, RunMemory() if config.use_memory else None)
        if config.use_memory:
            try:
                experience.store = ExperienceStore(config.memory_path)
            except Exception as exc:  # noqa: BLE001 - sqlite3/OS errors: the search runs without it
                journal.record("note", message=f"cross-run memory unavailable: {exc}")
        return experience

    def lookup(self, query: str) -> str:
        """The planner's ``search_memory`` tool."""
        brief = self.brief
        return search_memory(query, self.run_memory, self.store, kernel_kind=brief.kind if brief else None,
                             device=self.device_kind)

    def avoid_snapshot(self) -> set[str]:
        """The AVOID list as it was when the run started (a resumed run must plan the same way)."""
        entry = self.journal.lookup("memory_snapshot", "avoid")
        if entry is not None:
            return set(entry["value"])
        avoid = sorted(self.store.avoid_list(device=self.device_kind)) if self.store is not None else []
        self.journal.append("memory_snapshot", "avoid", value=avoid)
        return set(avoid)

    def boosts(self) -> dict[str, float]:
        """Families that already won in this run (from the run memory) rank higher."""
        if self.run_memory is None:
            return {}
        out: dict[str, float] = {}
        for item in self.run_memory.items:
            if item.speedup >= 1.05:
                out[item.rewrite_type] = max(out.get(item.rewrite_type, 0.0), item.speedup)
        return out

    def learn(self, summarizer: Summarizer, brief: KernelBrief, plan: Plan, proposal: Proposal,
              speedup: float | None, rejected: str | None, label: str) -> None:
        outcome = Outcome(plan, proposal, speedup, rejected)
        try:
            item, update = summarizer.summarize(brief, outcome, self.run_memory)
        except ProviderError as exc:
            self.journal.record("llm_error", agent="summarizer", message=str(exc))
            return
        changed = self.run_memory.apply(item, update) if self.run_memory is not None else False
        self.journal.record("experience", kernel=brief.name, candidate=label, item=item.to_json(),
                            update=update.action, kept=changed)
        if self.store is not None:
            success = speedup is not None and speedup >= self.config.min_speedup
            try:
                self.store.record_attempt(self.run_id, label, proposal.family, success, speedup=speedup,
                                          kernel_kind=brief.kind, device=self.device_kind)
                if changed:
                    self.store.add_experience(self.run_id, label, item)
            except Exception as exc:  # noqa: BLE001 - a locked or damaged store costs memory, not the run
                self.journal.record("note", message=f"cross-run memory not updated: {exc}")

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

