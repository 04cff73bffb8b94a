"""Where a rewrite family is tried and what the cost model expects of it come from one place: the
family's declaration, checked when it is registered in FAMILIES. The tables the planner and the cost
model read are derived from the declarations, and they equal the tables the code held by hand
before (so the order families are tried in, and the traffic plans, stay as they were)."""

from __future__ import annotations

from kernelopt_core.search.agents import planner
from kernelopt_core.search.rewrites import budget as cost_model

# The hand-written tables as they stood before the declarations (agents/context.py, agents/planner.py
# and rewrites/budget.py at 932595b), copied literally.
DIRECTION_FAMILIES = {
    "vectorize-loads": ("launch_config", "vector_hints"),
    "fuse-rereads": ("single_read", "cooperative_rows"),
    "eviction-hints": ("eviction_hints",),
    "cheaper-math": ("fast_math",),
    "tile-tuning": ("launch_config",),
    "more-programs": ("split_programs", "cooperative_rows", "launch_config"),
    "smaller-blocks-more-warps": ("launch_config",),
    "reduce-register-pressure": ("split_reduction", "int32_index", "launch_config"),
    "raise-occupancy": ("launch_config",),
    "coalesce-access": ("vector_hints", "launch_config"),
    "l2-friendly-order": ("program_order", "eviction_hints", "launch_config"),
}
DEFAULT_ORDER = {
    "cpu": ("user_autotune", "launch_config", "single_read", "mask_removal", "fast_math", "user_fast_math",
            "split_reduction", "split_programs", "eviction_hints", "vector_hints", "int32_index", "cooperative_rows",
            "program_order"),
    "cuda": ("user_autotune", "program_order", "launch_config", "single_read", "cooperative_rows", "split_programs",
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
FAMILY_EFFICIENCY = {"single_read": 0.94, "cooperative_rows": 0.80, "split_programs": 0.80}


def test_the_planner_tables_are_the_hand_written_ones():
    assert planner.DIRECTION_FAMILIES == DIRECTION_FAMILIES
    assert planner.DEFAULT_ORDER == DEFAULT_ORDER
    assert planner.EVIDENCE_FAMILIES == EVIDENCE_FAMILIES
    assert planner.LATER_EVIDENCE_FAMILIES == LATER_EVIDENCE_FAMILIES


def test_the_cost_model_efficiencies_are_the_hand_written_ones():
    assert cost_model.FAMILY_EFFICIENCY == FAMILY_EFFICIENCY
