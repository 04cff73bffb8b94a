"""The settings of an optimize run (:class:`OptimizeConfig`) and the error that stops one before it starts."""

from __future__ import annotations

from dataclasses import dataclass

from ..json_records import JsonRecord
from .deadline import DEFAULT_BUDGET_S

# The CPU interpreter runs a small graph in ~0.1-1 s: fewer A/B rounds than a GPU's budget keep a
# run to minutes; the confidence interval still decides gate 4.
CPU_AB_ROUNDS = 6
CPU_KERNEL_ROUNDS = 4


class OptimizeError(RuntimeError):
    """The optimization cannot start: unreadable dump, unknown kernel, bad resume, bad provider setup."""


@dataclass
class OptimizeConfig(JsonRecord):
    provider: str = "offline"
    model: str = "claude-sonnet-4-6"
    beam_width: int = 4  # B
    iterations: int = 5  # T
    plans: int = 4  # N, per beam node and iteration
    retries: int = 4  # K, executor attempts per plan
    device: str = "auto"
    force: bool = False  # search vendor-dominated graphs too
    allow_config_changes: bool = False  # verify a recommended torch.compile configuration change too
    # account for the whole torch.compile callable when the problem is known (compile_report.json):
    # "auto" (on a GPU), "on" or "off" (see config_findings.accounting_wanted)
    account_callable: str = "auto"
    run_root: str = ".kernelopt/runs"
    # Ablation switches: every component can be turned off.
    use_beam: bool = True  # off: greedy, width 1
    use_ncu: bool = True  # off: no profiling, tier unknown
    use_memory: bool = True  # off: no run FIFO, no cross-run store, no AVOID list
    use_perf_gate: bool = True  # off: finalists pass on gates 1-3 plus the kernel-alone timing
    multi_iteration: bool = True  # off: one iteration
    diversity: bool = True  # beam diversity (best per chain first)
    meltdown: bool = True
    early_stop: bool = True
    ucb_c: float = 1.4
    patience: int = 2
    meltdown_window: int = 6
    meltdown_unique: int = 2
    max_kernels: int = 3  # kernels searched per graph, by time share
    min_share: float = 0.02  # kernels below this share of the graph are not worth a search
    finalists: int = 2  # gate 3-4 attempts per kernel (targeted retries on a perf rejection)
    min_speedup: float = 1.03
    ab_rounds: int | None = None  # gate 4 rounds; None: the device's timing effort (measure.timing)
    kernel_rounds: int | None = None  # kernel-alone A/B rounds for ranking candidates
    memory_path: str | None = None  # the cross-run SQLite store; None: the user cache folder
    api_max_retries: int = 4
    api_timeout_s: float = 300.0
    api_base_delay_s: float = 1.0
    base_url: str | None = None
    # seconds for the whole run, from start to written result (0 or None: no limit); the search plans
    # against it (kernelopt_core.search.deadline). Like the transport fields, a resumed run takes this
    # invocation's budget, not the one it started with.
    budget_s: float | None = DEFAULT_BUDGET_S
    # the caller times an accepted rewrite again after the run (the bench's confirmation A/B): once one is
    # accepted, the budget keeps that A/B's time, sized from gate 4's own A/B of it (deadline.confirmation_s)
    keep_for_confirmation: bool = False


# How to reach the provider, where runs live and how long this invocation may take: a resumed run takes
# these from its own invocation; every other field is the run's own.
TRANSPORT_FIELDS = ("run_root", "base_url", "api_max_retries", "api_timeout_s", "api_base_delay_s", "budget_s")
