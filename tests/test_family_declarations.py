"""Where a rewrite family is tried and what the cost model expects of it come from one place: the
family's declaration, checked when it is registered in FAMILIES. The tables the planner and the cost
model read are derived from the declarations, and they equal the tables the code held by hand
before (so the order families are tried in, and the traffic plans, stay as they were)."""

from __future__ import annotations

import pytest

from kernelopt_core.search.agents import planner
from kernelopt_core.search.rewrites import FAMILIES
from kernelopt_core.search.rewrites.declaration import (
    CauseCall,
    FamilyDeclaration,
    FamilyDeclarationError,
    register_families,
    traffic_efficiencies,
)

# The hand-written tables as they stood before the declarations (agents/context.py, agents/planner.py
# and rewrites/budget.py, now rewrites/cost_model.py, at 932595b), copied literally; shifted_moments (added
# after them) placed where its declaration puts it; channel_groups (later still) is called for by nothing.
DIRECTION_FAMILIES = {
    "vectorize-loads": ("launch_config", "vector_hints", "shifted_moments"),
    "fuse-rereads": ("single_read", "cooperative_rows"),
    "eviction-hints": ("eviction_hints",),
    "cheaper-math": ("fast_math", "shifted_moments"),
    "tile-tuning": ("launch_config",),
    "more-programs": ("split_programs", "cooperative_rows", "launch_config"),
    "smaller-blocks-more-warps": ("launch_config",),
    "reduce-register-pressure": ("split_reduction", "int32_index", "launch_config"),
    "raise-occupancy": ("launch_config",),
    "coalesce-access": ("vector_hints", "launch_config"),
    "l2-friendly-order": ("program_order", "eviction_hints", "launch_config"),
}
DEFAULT_ORDER = {
    "cpu": ("user_autotune", "launch_config", "shifted_moments", "single_read", "mask_removal", "fast_math", "user_fast_math",
            "split_reduction", "split_programs", "eviction_hints", "vector_hints", "int32_index", "cooperative_rows",
            "program_order"),
    "cuda": ("user_autotune", "program_order", "shifted_moments", "launch_config", "single_read", "cooperative_rows", "split_programs",
             "eviction_hints", "vector_hints", "mask_removal", "fast_math", "user_fast_math", "split_reduction",
             "int32_index"),
}
EVIDENCE_FAMILIES = {
    "strided-access": ("windowed", "strided_access"),
    "low-parallelism": ("strided_access",),
}
LATER_EVIDENCE_FAMILIES = {
    "l2-thrash": ("program_order", "eviction_hints"),
}
FAMILY_EFFICIENCY = {"single_read": 0.94, "cooperative_rows": 0.80, "split_programs": 0.80, "channel_groups": 0.31}


def test_the_planner_tables_are_the_hand_written_ones():
    assert planner.DIRECTION_FAMILIES == DIRECTION_FAMILIES
    assert planner.DEFAULT_ORDER == DEFAULT_ORDER
    assert planner.EVIDENCE_FAMILIES == EVIDENCE_FAMILIES
    assert planner.LATER_EVIDENCE_FAMILIES == LATER_EVIDENCE_FAMILIES


def test_the_cost_model_efficiencies_are_the_hand_written_ones():
    assert traffic_efficiencies(FAMILIES) == FAMILY_EFFICIENCY
    for name, efficiency in FAMILY_EFFICIENCY.items():
        assert FAMILIES[name].declaration.traffic_efficiency == efficiency


def test_the_algorithmic_cause_tables_are_those_evidence_families_read():
    assert planner.ALGORITHM_FAMILIES == {"low-parallelism": ("split_programs", "cooperative_rows"),
                                          "re-reads": ("single_read", "cooperative_rows", "program_order")}
    assert planner.ALGORITHM_FAMILIES_NOT_POINTWISE == {"low-parallelism": ("split_programs", "cooperative_rows"),
                                                        "re-reads": ("single_read", "cooperative_rows")}


def test_every_registered_family_is_declared():
    for name, family in FAMILIES.items():
        assert isinstance(family.declaration, FamilyDeclaration), name


class _Family:
    name = "made_up"
    summary = "a family for this test"


def _declaration(**changes) -> FamilyDeclaration:
    fields = {"directions": {"tile-tuning": 1}, "causes": (), "device_order": {"cuda": 1},
              "traffic_efficiency": None}
    return FamilyDeclaration(**{**fields, **changes})


def test_a_family_registered_without_a_declaration_is_refused():
    with pytest.raises(FamilyDeclarationError, match="made_up.*without a FamilyDeclaration"):
        register_families((_Family(), None))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FamilyDeclaration(directions={}, causes=())  # type: ignore[call-arg]  # device order, cost missing


@pytest.mark.parametrize(("changes", "problem"), [
    ({"causes": (CauseCall("slow-kernel", "algorithm", 1),)}, "cause 'slow-kernel' is none of the analyst's"),
    ({"causes": (CauseCall("re-reads", "first", 1),)}, "stage 'first'"),  # type: ignore[arg-type]
    ({"directions": {"tile-tuning": 0}}, "rank 0 of direction 'tile-tuning'"),
    ({"device_order": {"tpu": 1}}, "device 'tpu'"),
    ({"traffic_efficiency": 1.5}, "traffic efficiency 1.5"),
])
def test_a_declaration_that_cannot_place_the_family_is_refused(changes, problem):
    with pytest.raises(FamilyDeclarationError, match=problem):
        register_families((_Family(), _declaration(**changes)))  # type: ignore[arg-type]


def test_a_registered_family_is_placed_by_its_declaration_alone():
    families = register_families((_Family(), _declaration(causes=(CauseCall("l2-thrash", "later", 1),))))
    assert families["made_up"].declaration.device_order == {"cuda": 1}
    assert planner.direction_families(families) == {"tile-tuning": ("made_up",)}
    assert planner.cause_families(families, "later") == {"l2-thrash": ("made_up",)}
    assert planner.default_order(families) == {"cuda": ("made_up",)}


def _hand_written_evidence_families(ctx) -> list[str]:
    """planner.evidence_families as written by hand at 932595b."""
    causes = ctx.evidence.get("causes") or []
    ratio = ctx.evidence.get("traffic_ratio")
    order: list[str] = []
    if "low-parallelism" in causes:
        order += ["split_programs", "cooperative_rows"]
    if "re-reads" in causes or (isinstance(ratio, (int, float)) and ratio >= 1.3):
        order += ["single_read", "cooperative_rows"]
        if ctx.module.is_pointwise:
            order.append("program_order")
    return list(dict.fromkeys(order))


def test_evidence_families_follow_the_hand_written_rules():
    from itertools import combinations
    from types import SimpleNamespace

    from kernelopt_core.analyst import CAUSES

    cause_sets = [list(c) for n in range(len(CAUSES) + 1) for c in combinations(CAUSES, n)]
    cause_sets += [list(reversed(c)) for c in cause_sets]
    checked = 0
    for causes in cause_sets:
        for ratio in (None, 1.0, 1.3, 2.0):
            for pointwise in (False, True):
                ctx = SimpleNamespace(evidence={"causes": causes, "traffic_ratio": ratio},
                                      module=SimpleNamespace(is_pointwise=pointwise))
                assert planner.evidence_families(ctx) == _hand_written_evidence_families(ctx), (causes, ratio)
                checked += 1
    assert checked == 2 * 16 * 4 * 2
