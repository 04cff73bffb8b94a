"""The callable beyond its kernels: the whole-callable accounting, the overheads and suggestions, and
the recommended torch.compile configuration change, verified through gates 3-4 when allowed.

:meth:`CallableChecks.plan` reads the recommendation before the search, so that the schedule keeps the
check's slot only when there is something to verify. The check runs at the end, in the evaluator's
worker once the search's working sets are released (one working set on the device at a time), with
the time that is left as its limit; one that does not fit is reported with the accounting's figure,
"not verified". When only its slot stops the search's next candidate, it runs then instead
(:meth:`CallableChecks.check_now`), and the search goes on with what it left."""

from __future__ import annotations

from typing import Any

from ..dispatch import DispatchReport
from .run_context import RunContext


class CallableChecks:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.accounting_summary: dict[str, Any] | None = None
        self.released = False  # the search's working sets were given back before the first check

    def plan(self, report: DispatchReport) -> None:
        """Before the search: keep the configuration check's slot only when a change is recommended."""
        ctx = self.ctx
        if not ctx.schedule.config_check:
            return
        from ..config_findings import find_config_changes
        from ..measure.accounting import CallableAccounting

        with ctx.times.stage("config"):
            data = self._accounting()
            try:
                source: Any = CallableAccounting.from_json(data) if data is not None else report
                recommendation = find_config_changes(source).recommendation
            except (KeyError, TypeError, ValueError):
                recommendation = None
        ctx.schedule.config_check = recommendation is not None
        ctx.journal.record("config_plan", recommended=recommendation is not None,
                           slot_s=round(ctx.schedule.config_slot_s(), 3),
                           title=recommendation.title if recommendation is not None else None)

    def check_now(self, report: DispatchReport) -> bool:
        """Run the configuration check while the search goes on (its verdicts are journaled, and read back at
        the end): the search then has what the check leaves of its slot. The search's processes, given back
        for the check, start again in the background. False when there is no check to run (or it ran)."""
        ctx = self.ctx
        schedule = ctx.schedule
        if not schedule.config_check or schedule.config_slot_used:
            return False
        if ctx.budget.limited and schedule.config_time_s() < min(schedule.config_s(), schedule.config_slot_s()):
            return False  # it would not run now: its slot stays kept, for the end
        ctx.journal.record("config_now", left_s=round(ctx.budget.left(), 3),
                           reason="the configuration check's slot alone stopped the search")
        self.findings(report)
        schedule.config_slot_used = True
        if self.released:  # the search takes the device again: a later check gives its working sets back again
            self.released = False
            ctx.evaluator.warm_up()
        return True

    def findings(self, report: DispatchReport) -> Any:
        """Overheads, suggestions and the configuration change: from the whole callable when the
        problem is known, else from the dump's own timing."""
        from ..config_findings import accounting_summary, find_config_changes
        from ..measure.accounting import CallableAccounting

        ctx = self.ctx
        with ctx.times.stage("config"):
            source: Any = report
            data = self._accounting()
            if data is not None:
                try:
                    source = CallableAccounting.from_json(data)
                    self.accounting_summary = accounting_summary(source)
                except (KeyError, TypeError, ValueError) as exc:
                    ctx.journal.record("note", message=f"the whole-callable accounting could not be read: {exc}")
                    source = report
            return find_config_changes(source, allowed=ctx.config.allow_config_changes, verify=self._verify_option)

    def _accounting(self) -> dict[str, Any] | None:
        """The whole-callable accounting (given, journaled, or measured in the worker), else None."""
        ctx = self.ctx
        source = ctx.callable_source
        entry = ctx.journal.lookup("accounting", "callable")
        if entry is not None:
            value = entry["value"]
        elif source.accounting is not None:
            value = source.accounting
            ctx.journal.append("accounting", "callable", value=value, given=True)
        elif source.problem is None or not self._accounting_wanted():
            return None
        else:
            import os

            ctx.progress(f"accounting for the whole callable of {os.path.basename(source.problem)}", stage="account")
            try:
                from ..measure.accounting_run import account_problem

                # the other mode informs a recommendation (GPU only) and is its figure when no check fits
                gpu = ctx.evaluator.device.startswith("cuda")
                measured = account_problem(source.problem, source.mode or "max-autotune", ctx.evaluator.device,
                                           alternatives=gpu)
                value = measured.to_json()
            except Exception as exc:  # noqa: BLE001 - the accounting adds information; the run stands without it
                value = {"error": f"{type(exc).__name__}: {exc}"}
            ctx.journal.append("accounting", "callable", value=value)
        if not isinstance(value, dict) or "error" in value:
            reason = value.get("error") if isinstance(value, dict) else "not an object"
            ctx.journal.record("note", message=f"whole-callable accounting unavailable: {reason}")
            return None
        return value

    def _accounting_wanted(self) -> bool:
        from ..config_findings import accounting_wanted

        try:
            return accounting_wanted(self.ctx.config.account_callable, self.ctx.evaluator.device)
        except ValueError as exc:
            self.ctx.journal.record("note", message=f"whole-callable accounting skipped: {exc}")
            return False

    def _verify_option(self, recommendation: Any, option: Any) -> Any:
        """Verify one configuration option like a candidate (needs the problem the dump came from)."""
        from ..recommend import (
            ConfigNotVerified,
            ConfigVerdict,
            ConfigVerificationError,
            measured_text,
            verify_option,
        )

        ctx = self.ctx
        problem = ctx.callable_source.problem
        if problem is None:
            raise ConfigVerificationError("the problem file behind this dump is unknown (no compile_report.json)")
        key = f"verify:{option.name}"
        entry = ctx.journal.lookup("config_change", key)
        if entry is not None:
            if entry["value"].get("error"):
                raise ConfigVerificationError(entry["value"]["error"])
            return ConfigVerdict.from_json(entry["value"])
        if not ctx.schedule.may_check_config():  # not journaled: a resumed run with time left checks it
            raise ConfigNotVerified(f"budget reached (a configuration check takes about {ctx.schedule.config_s():.0f} "
                                    f"s, {max(0.0, ctx.budget.left()):.0f} s were left); "
                                    f"{measured_text(recommendation, option)}")
        if not self.released:  # the search is over: its working sets go before the check's comes
            self.released = True
            release = getattr(ctx.evaluator, "release", None)
            if callable(release):
                ctx.journal.record("released", value=release())
        ctx.progress(f"verifying the configuration change {option.change} through gates 3-4", stage="gate")
        baseline = recommendation.baseline_mode or ctx.callable_source.mode or "max-autotune"
        limit = ctx.schedule.config_time_s() if ctx.budget.limited else 900.0
        begin = ctx.times.clock()
        try:
            in_worker = getattr(ctx.evaluator, "verify_config", None)
            if callable(in_worker):  # in the search's own worker: no second process holds a working set
                verdict = in_worker(problem, option, baseline, limit)
            else:
                verdict = verify_option(problem, option, baseline, device=ctx.evaluator.device, timeout_s=limit)
        except ConfigNotVerified as exc:  # its time ran out: not journaled, a resumed run with time left checks it
            raise ConfigNotVerified(f"{exc}; {measured_text(recommendation, option)}") from None
        except Exception as exc:
            ctx.journal.append("config_change", key, value={"error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            ctx.schedule.config_measured.append(ctx.times.clock() - begin)
        ctx.journal.append("config_change", key, value=verdict.to_json())
        return verdict
