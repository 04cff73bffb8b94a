"""The agents: profiler, planner, executor and summarizer (the analyst is kernelopt_core.analyst).

Each works with an LLM provider when one is configured, and deterministically without one.
"""

from __future__ import annotations

from .context import KernelBrief, Plan, Proposal
from .executor import Executor
from .planner import Planner, PlanRequest
from .profiler import NcuRequest, Profiler
from .summarizer import Outcome, Summarizer

__all__ = ["Executor", "KernelBrief", "NcuRequest", "Outcome", "Plan", "PlanRequest", "Planner", "Profiler",
           "Proposal", "Summarizer"]
