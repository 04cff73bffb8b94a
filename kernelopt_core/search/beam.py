"""Beam search over kernel candidates: UCB selection with diversity, meltdown detection, early stop.

* Each node is a verified candidate (it passed gates 1-2) with a measured kernel latency; its
  *chain* is the first-iteration ancestor it descends from.
* Selection: UCB score = mean reward + c * sqrt(ln(total visits) / visits), reward = speedup over
  the baseline kernel. With diversity on, the beam takes the best node (by UCB) of each chain
  first, then fills the remaining slots by latency.
* Meltdown: when the last 6 plan directions hold 2 or fewer distinct ones, the planner is forced
  to diversify.
* Early stop: 2 iterations in a row without a new best latency end the search.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

UCB_C = 1.4


@dataclass
class BeamNode:
    id: str
    source: str
    source_hash: str
    latency_ms: float
    speedup: float  # baseline kernel latency / this latency
    chain: str  # id of the first-iteration ancestor ("root" for the baseline itself)
    parent: str | None = None
    iteration: int = 0
    family: str = ""
    direction: str = ""
    visits: int = 1
    reward_sum: float = 0.0
    ci_low: float | None = None  # the lower bound of its kernel speedup's confidence interval, when timed
    ci_high: float | None = None  # and its upper bound

    def __post_init__(self) -> None:
        if self.reward_sum == 0.0:
            self.reward_sum = self.speedup * self.visits

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / max(self.visits, 1)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "source_hash": self.source_hash, "latency_ms": self.latency_ms,
                "speedup": self.speedup, "chain": self.chain, "parent": self.parent, "iteration": self.iteration,
                "family": self.family, "direction": self.direction, "visits": self.visits,
                "reward_sum": self.reward_sum}


def ucb_score(node: BeamNode, total_visits: int, c: float = UCB_C) -> float:
    return node.mean_reward + c * math.sqrt(math.log(max(total_visits, 1)) / max(node.visits, 1))


def select_beam(nodes: list[BeamNode], width: int, *, c: float = UCB_C, diversity: bool = True) -> list[BeamNode]:
    """The next beam: best per chain by UCB, then the fastest remaining; ties broken by id."""
    if width <= 0 or not nodes:
        return []
    total = sum(n.visits for n in nodes)
    by_ucb = sorted(nodes, key=lambda n: (-ucb_score(n, total, c), n.latency_ms, n.id))
    if not diversity:
        return by_ucb[:width]
    chosen: list[BeamNode] = []
    seen_chains: set[str] = set()
    for node in by_ucb:
        if node.chain not in seen_chains and len(chosen) < width:
            chosen.append(node)
            seen_chains.add(node.chain)
    for node in sorted(nodes, key=lambda n: (n.latency_ms, n.id)):
        if len(chosen) >= width:
            break
        if node not in chosen:
            chosen.append(node)
    return chosen


def record_visit(nodes: list[BeamNode], node_id: str, reward: float) -> None:
    """Credit an expansion's outcome (best child speedup) to the node and its ancestors."""
    by_id = {n.id: n for n in nodes}
    current = by_id.get(node_id)
    while current is not None:
        current.visits += 1
        current.reward_sum += reward
        current = by_id.get(current.parent) if current.parent else None


@dataclass
class MeltdownDetector:
    window: int = 6
    max_unique: int = 2
    recent: deque[str] = field(default_factory=deque)

    def observe(self, direction: str) -> None:
        self.recent.append(direction)
        while len(self.recent) > self.window:
            self.recent.popleft()

    @property
    def melted(self) -> bool:
        return len(self.recent) >= self.window and len(set(self.recent)) <= self.max_unique

    def banned(self) -> set[str]:
        """Directions to steer away from while melted."""
        return set(self.recent) if self.melted else set()


@dataclass
class EarlyStop:
    patience: int = 2
    best_latency: float = math.inf
    stale: int = 0

    def update(self, latency_ms: float | None, min_gain: float = 1e-9) -> bool:
        """Record an iteration's best latency; True when the search should stop."""
        if latency_ms is not None and latency_ms < self.best_latency * (1 - min_gain):
            self.best_latency = latency_ms
            self.stale = 0
        else:
            self.stale += 1
        return self.stale >= self.patience
