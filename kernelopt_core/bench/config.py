"""The settings of a campaign, shared by the parent process and every problem's subprocess.

``timeout_s`` (``--timeout``) is each problem's **budget**: its whole time, compile and search
included. The problem passes the optimizer what is left of it after its own stages (import, eager,
compile, max-autotune, accounting), less a reserve for the stages that follow the optimizer
(confirmation A/B, result); the search plans against that. The parent kills the problem's process
only as a backstop, :func:`grace_s` after the budget, and then keeps what the run had verified.
``deadline_s`` (``--budget``) is the campaign's: no problem starts after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..json_records import JsonRecord

DTYPES = ("fp32", "bf16")


@dataclass
class CampaignConfig(JsonRecord):
    device: str = "auto"  # auto, cpu (the CPU Triton backend) or cuda
    dtype: str = "fp32"  # bf16 casts the model and the floating-point inputs
    scale: str | None = None  # sets KERNELOPT_PROBLEM_SCALE in each problem's process (e.g. "tiny")
    provider: str = "offline"
    model: str | None = None  # the LLM model for LLM providers; None keeps the optimizer's default
    beam_width: int | None = None  # None keeps the optimizer's defaults (B=4, T=5, N=4, K=4)
    iterations: int | None = None
    plans: int | None = None
    retries: int | None = None
    force: bool = False  # optimize vendor-dominated graphs too
    optimizer_options: dict[str, Any] = field(default_factory=dict)  # any other OptimizeConfig field
    optimize: bool = True  # False: time, compile and classify only
    # account for the whole torch.compile callable (overheads, recommended configuration change):
    # "auto" (on a GPU), "on" or "off" (see config_findings.accounting_wanted)
    account: str = "auto"
    # verify the recommended configuration change through gates 3-4 on the full callable
    allow_config_changes: bool = False
    gpus: int = 0  # spread over this many local GPUs (one slot per GPU); 0 = one slot
    workers: int = 1  # parallel CPU slots when the device is the CPU
    ray_address: str | None = None  # "local" or a cluster address
    resume: bool = False
    timeout_s: float = 1800.0  # per problem, including compile and search: the problem's budget
    deadline_s: float | None = None  # no problem starts after this many seconds of campaign time
    timing_reps: int | None = None  # None adapts to the callable's speed
    confirm_rounds: int | None = None  # rounds of the confirmation A/B; None: the timer's default
    plot: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.timeout_s <= 0:
            raise ValueError("the per-problem timeout must be positive")
        if self.gpus < 0 or self.workers < 1:
            raise ValueError("--gpus must be >= 0 and --workers >= 1")
        if isinstance(self.account, bool):
            self.account = "on" if self.account else "off"
        if self.account not in ("auto", "on", "off"):
            raise ValueError(f"accounting must be auto, on or off, not {self.account!r}")

    def grace_s(self) -> float:
        """How long after its budget a problem's process is killed (the backstop): a quarter of the
        budget, between 10 s and 2 min."""
        return grace_s(self.timeout_s)

    def optimizer_overrides(self) -> dict[str, Any]:
        """Fields for the optimizer's OptimizeConfig that this campaign sets (None = its default).

        The named fields win over ``optimizer_options``; fields the optimizer does not know are
        dropped by the problem's process (and noted in its result)."""
        values = {**self.optimizer_options, "provider": self.provider, "model": self.model, "beam_width": self.beam_width,
                  "iterations": self.iterations, "plans": self.plans, "retries": self.retries,
                  "force": self.force}
        if self.allow_config_changes:
            values["allow_config_changes"] = True
        return {k: v for k, v in values.items() if v is not None}

    @property
    def config_changes_allowed(self) -> bool:
        """``--allow-config-changes``, or the same set through ``--optimizer-option``."""
        return self.allow_config_changes or self.optimizer_options.get("allow_config_changes") is True


def grace_s(budget_s: float) -> float:
    return min(120.0, max(10.0, 0.25 * budget_s))


# What a problem keeps of its budget for the stages after the optimizer whatever its outcome: writing the
# result and ending the problem's processes. The confirmation A/B of an accepted graph is kept by the
# optimizer itself once it accepts one, sized from gate 4's A/B of it (search.deadline.confirmation_s).
AFTER_OPTIMIZE_RESERVE_S = {"cpu": 5.0, "cuda": 5.0}
