"""Beam search pieces: UCB selection with diversity, meltdown detection, early stop."""

from __future__ import annotations

import math

from kernelopt_core.search.beam import (
    BeamNode,
    EarlyStop,
    MeltdownDetector,
    record_visit,
    select_beam,
    ucb_score,
)


def node(id: str, latency: float, chain: str, visits: int = 1, parent: str | None = "root") -> BeamNode:
    return BeamNode(id, f"src-{id}", f"h-{id}", latency, 1.0 / latency, chain, parent=parent, visits=visits)


def test_ucb_score_is_mean_reward_plus_exploration() -> None:
    n = node("a", 0.5, "a", visits=4)
    assert math.isclose(ucb_score(n, 16, c=1.4), 2.0 + 1.4 * math.sqrt(math.log(16) / 4))
    rarely = node("b", 0.5, "b", visits=1)
    assert ucb_score(rarely, 16) > ucb_score(n, 16)  # fewer visits: more exploration bonus


def test_diversity_takes_the_best_of_each_chain_then_fills_by_latency() -> None:
    nodes = [node("root", 1.0, "root", parent=None), node("a1", 0.40, "a"), node("a2", 0.41, "a"),
             node("a3", 0.42, "a"), node("b1", 0.80, "b")]
    beam = select_beam(nodes, 3, c=0.0)
    assert [n.id for n in beam] == ["a1", "b1", "root"]  # one per chain first (root, a, b)
    beam = select_beam(nodes, 4, c=0.0)
    assert [n.id for n in beam] == ["a1", "b1", "root", "a2"]  # then the fastest left
    without = select_beam(nodes, 3, c=0.0, diversity=False)
    assert [n.id for n in without] == ["a1", "a2", "a3"]
    assert select_beam(nodes, 0) == [] and select_beam([], 4) == []


def test_visits_are_credited_up_the_chain() -> None:
    root = node("root", 1.0, "root", parent=None)
    child = node("a1", 0.5, "a1")
    grandchild = node("a2", 0.25, "a1", parent="a1")
    nodes = [root, child, grandchild]
    record_visit(nodes, "a2", 4.0)
    assert (grandchild.visits, child.visits, root.visits) == (2, 2, 2)
    assert grandchild.mean_reward == (4.0 + 4.0) / 2


def test_meltdown_when_six_directions_collapse_to_two() -> None:
    detector = MeltdownDetector()
    for direction in ["launch_config", "persistent", "launch_config", "persistent", "launch_config"]:
        detector.observe(direction)
        assert not detector.melted  # fewer than 6 seen
    detector.observe("persistent")
    assert detector.melted and detector.banned() == {"launch_config", "persistent"}
    detector.observe("fast_math")  # window slides: 3 distinct now
    assert not detector.melted and detector.banned() == set()


def test_early_stop_after_two_iterations_without_improvement() -> None:
    stop = EarlyStop(patience=2)
    assert not stop.update(1.0)
    assert not stop.update(0.8)
    assert not stop.update(0.9)  # worse: stale 1
    assert stop.update(None)  # nothing new: stale 2 -> stop
    again = EarlyStop(patience=2)
    again.update(1.0)
    again.update(1.0)
    assert not again.update(0.5)  # an improvement resets the count
