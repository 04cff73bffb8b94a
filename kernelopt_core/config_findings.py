"""What a run says about the compiled callable beyond its kernels: overheads, suggestions, and the
configuration changes that were recommended and (where the user allows it) verified.

Pure Python, no torch. The same findings go into ``result.json`` of ``optimize`` (key
``config_change``, with the accounting under ``accounting``), into a campaign's per-problem
results and report, and into the language server's first-line diagnostic.

The source is the whole-callable accounting when the problem is known (a ``compile_report.json``
above the dump, or a campaign's problem): its overheads are shares of the callable the user calls
(``compiled-callable*``). Without it, the dump's own timing (``module-call``) is all there is.

A configuration speedup is measured between two full callables (``compiled-callable-cudagraphs``
against ``compiled-callable``, or two ``compiled-callable-cudagraphs`` for static inputs); it is
reported beside a kernel speedup (``module-call``), never multiplied into it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .dispatch import DispatchReport, OverheadItem
from .measure.accounting import CallableAccounting, describe_overhead
from .recommend import ConfigOption, ConfigRecommendation, ConfigVerdict, recommend_config

SOURCE_CALLABLE = "whole callable"
SOURCE_DUMP = "dump"
# When to account for the whole callable: "auto" does on a GPU only. On the CPU backend every
# compiled call runs in the Triton interpreter (seconds for a small MLP; the accounting makes some
# fifteen of them) and there are no CUDA graphs, so no configuration change can be recommended.
ACCOUNTING_SETTINGS = ("auto", "on", "off")


def accounting_wanted(setting: str | bool | None, device: str) -> bool:
    """Whether to account for the whole callable on ``device`` under ``setting`` (auto/on/off)."""
    if isinstance(setting, bool):
        return setting
    value = (setting or "auto").lower()
    if value not in ACCOUNTING_SETTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTING_SETTINGS)}, not {setting!r}")
    return value == "on" or (value == "auto" and device.startswith("cuda"))

# verify(recommendation, option) -> the verdict; raises for a verification that could not run
Verifier = Callable[[ConfigRecommendation, ConfigOption], ConfigVerdict]


@dataclass
class OptionResult:
    """One option of a recommendation after verification: its verdict, or why it has none."""

    option: ConfigOption
    verdict: ConfigVerdict | None = None
    error: str | None = None
    not_verified: bool = False  # no time was left to verify it: the accounting's figure stands, unverified
    measured_speedup: float | None = None  # that figure (current over recommended mode, full callable)

    @property
    def accepted(self) -> bool:
        return self.verdict is not None and self.verdict.accepted

    def to_json(self) -> dict[str, Any]:
        if self.verdict is not None:
            return {**self.verdict.to_json(), "title": self.option.title}
        return {"option": self.option.name, "title": self.option.title, "change": dict(self.option.change),
                "assumes": self.option.assumes, "snippet": self.option.snippet, "accepted": False, "ok": False,
                "reason": self.error or "not verified", "not_verified": self.not_verified,
                "measured_speedup": self.measured_speedup}


@dataclass
class ConfigFindings:
    source: str  # SOURCE_CALLABLE or SOURCE_DUMP
    path: str | None  # the timing path the overheads' shares are of
    overheads: list[OverheadItem]
    recommendation: ConfigRecommendation | None = None
    allowed: bool = False  # the user allowed configuration changes: the options were verified
    results: list[OptionResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> OptionResult | None:
        """The accepted option with the largest speedup (ties: the recommended order)."""
        accepted = [r for r in self.results if r.accepted]
        if not accepted:
            return None
        return max(accepted, key=lambda r: (r.verdict.speedup if r.verdict else None) or 0.0)

    def suggestions(self) -> list[str]:
        lines = []
        rec = self.recommendation
        if rec is not None:
            lines.append(f"{rec.title}. {rec.reason}")
        chosen = self.chosen
        if chosen is not None and chosen.verdict is not None:
            lines.append(f"verified: {describe_verdict(chosen.verdict)}")
        elif self.allowed and rec is not None and self.results and all(r.not_verified for r in self.results):
            lines.append(f"not verified (no time was left for the check): {self.results[0].error}")
        elif self.allowed and rec is not None:
            reasons = "; ".join(f"{r.option.name}: {r.verdict.reason if r.verdict else r.error}" for r in self.results)
            lines.append(f"no configuration change was accepted ({reasons or 'nothing verified'})")
        elif rec is not None:
            lines.append("not verified: allow configuration changes (--allow-config-changes) to check it "
                         "through gates 3-4 on the full callable")
        lines += [f"{item.name}: {item.suggestion}" for item in self.overheads if item.suggestion]
        return lines

    def config_change(self) -> dict[str, Any] | None:
        """``result.json``'s ``config_change``: None without a recommendation."""
        rec = self.recommendation
        if rec is None:
            return None
        chosen = self.chosen
        first = self.results[0].to_json() if self.results else None
        return {
            "recommendation": rec.to_json(), "source": self.source, "path": self.path, "allowed": self.allowed,
            # the accepted option with the best speedup, else the first option's verdict (or why it has none)
            "verified": chosen.to_json() if chosen is not None else first,
            "chosen": chosen.option.name if chosen is not None else None,
            "verifications": [r.to_json() for r in self.results],
            "snippet": (chosen.option if chosen is not None else self._primary()).snippet,
        }

    def _primary(self) -> ConfigOption:
        from .recommend import primary_option

        assert self.recommendation is not None
        return primary_option(self.recommendation)

    def to_markdown(self) -> str:
        """The report's section on the callable beyond its kernels."""
        where = f"the full callable (`{self.path}`)" if self.source == SOURCE_CALLABLE else \
            f"the dump's `call()` (`{self.path or 'module-call'}`; the problem file is unknown)"
        lines = ["## Outside the kernels", "", f"Overheads as shares of {where}:", ""]
        lines += [f"- {describe_overhead(item)}" + (f" — {item.suggestion}" if item.suggestion else "")
                  for item in self.overheads] or ["- none measured"]
        rec = self.recommendation
        if rec is None:
            return "\n".join(lines + ["", "No configuration change is recommended.", ""])
        lines += ["", f"**Recommended: {rec.title}.** {rec.reason}", ""]
        lines += ["| option | change | verified | speedup [95% CI] | paths | assumes about the caller |",
                  "|---|---|---|---|---|---|"]
        by_name = {r.option.name: r for r in self.results}
        for option in rec.options:
            found = by_name.get(option.name)
            verdict = found.verdict if found else None
            state = ("accepted" if verdict.accepted else "rejected") if verdict else \
                (f"not verified: {found.error}" if found and found.not_verified else
                 f"could not run: {found.error}" if found and found.error else "not verified")
            speed = f"{verdict.speedup:.2f}x" + (f" [{verdict.ci[0]:.2f}, {verdict.ci[1]:.2f}]" if verdict.ci else "") \
                if verdict and verdict.speedup else "–"
            paths = f"{verdict.baseline_path} → {verdict.candidate_path}" if verdict and verdict.baseline_path else "–"
            lines.append(f"| {option.title} | `{option.change}` | {state} | {speed} | {paths} | "
                         f"{option.assumes.replace('|', '/')} |")
        chosen = self.chosen
        if chosen is not None:
            lines += ["", f"Verified and chosen: **{chosen.option.title}** (it assumes {chosen.option.assumes}).",
                      "", "```python", chosen.option.snippet, "```"]
        elif not self.allowed:
            lines += ["", "Not verified: run with `--allow-config-changes` to check the options through "
                          "gates 3-4 on the full callable."]
        lines += ["", "A configuration speedup is timed between full callables; it is not a kernel rewrite and "
                      "is never multiplied into the kernel speedup above."]
        for note in self.notes:
            lines.append(f"- note: {note}")
        return "\n".join(lines) + "\n"


def describe_verdict(verdict: ConfigVerdict) -> str:
    ci = f" [{verdict.ci[0]:.2f}, {verdict.ci[1]:.2f}]" if verdict.ci else ""
    speed = f"{verdict.speedup:.2f}x{ci}" if verdict.speedup else "no speedup measured"
    return (f"{_change_words(verdict.change)}: {speed} through the full callable "
            f"({verdict.baseline_path} -> {verdict.candidate_path}); assumes {verdict.assumes or 'nothing stated'}")


def _change_words(change: dict[str, Any]) -> str:
    words = f"mode='{change.get('mode')}'"
    return words + " with the inputs marked static" if change.get("static_inputs") else words


def accounting_summary(accounting: CallableAccounting) -> dict[str, Any]:
    """What results keep of an accounting (no per-launch times, no samples)."""
    data = accounting.to_json()
    for key in ("graphs",):
        data.pop(key, None)
    for timing in [data.get("callable"), *(data.get("alternatives") or [])]:
        if isinstance(timing, dict):
            timing.pop("samples_ms", None)
    return data


def find_config_changes(source: CallableAccounting | DispatchReport | dict[str, Any], *, allowed: bool = False,
                        verify: Verifier | None = None) -> ConfigFindings:
    """Overheads, the recommendation and, when ``allowed`` and ``verify`` is given, each option's verdict."""
    if isinstance(source, dict):
        source = CallableAccounting.from_json(source)
    if isinstance(source, CallableAccounting):
        findings = ConfigFindings(SOURCE_CALLABLE, source.path, list(source.overheads), allowed=allowed,
                                  notes=list(source.notes))
    else:
        findings = ConfigFindings(SOURCE_DUMP, source.timing_path, list(source.overheads), allowed=allowed)
    findings.recommendation = recommend_config(source)
    rec = findings.recommendation
    if rec is None or not allowed or verify is None:
        return findings
    from .recommend import ConfigNotVerified, measured_speedup, primary_option

    for option in rec.options or [primary_option(rec)]:
        try:
            findings.results.append(OptionResult(option, verdict=verify(rec, option)))
        except ConfigNotVerified as exc:  # no time left: the recommendation stands with its measured figure
            findings.results.append(OptionResult(option, error=str(exc), not_verified=True,
                                                 measured_speedup=measured_speedup(rec, option)))
        except Exception as exc:  # noqa: BLE001 - a verification that cannot run is reported, never fatal
            findings.results.append(OptionResult(option, error=f"{type(exc).__name__}: {exc}"))
    return findings
