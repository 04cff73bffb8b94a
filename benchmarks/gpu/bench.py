"""The benchmark suite on the GPU(s) (issue 8), within a hard time budget: survey, campaign, scaling.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT bench:560
    python -m benchmarks.gpu.bench OUT_DIR --device cpu --suite benchmarks/problems/tiny --scale tiny  # CPU

A driver over the public Python API of ``kernelopt bench`` (``kernelopt_core.bench``: the campaign,
its config and results), which it needs beyond the CLI: a campaign cancelled at a given second (the
running problem is recorded as cancelled and runs again on resume) and the scaling run's two campaigns.

Three phases, each recorded even when a later one runs out of time:
1. eager survey: every problem's eager time against the 1-15 ms target and its stated estimate;
2. the campaign on one GPU with the offline provider and a reduced beam (B=2, T=1, N=2, K=1,
   no ncu, one finalist, one kernel per graph), a per-problem cap, problems interleaved by level
   (L1, L2, L3, L1, ...) so each level is covered; problems not started within the budget are
   listed as not reached;
   (``KERNELOPT_BENCH_GPUS=2`` spreads it over two GPUs, one problem per GPU at a time);
3. scaling, when ``KERNELOPT_BENCH_SCALING`` names problems and two GPUs are visible: those
   problems as a campaign on 1 GPU, then as a campaign on 2 GPUs, each from fresh folders (so
   fresh Inductor and Triton caches), and the wall-time speedup of the second over the first.
``KERNELOPT_BENCH_CONFIG_CHANGES=1`` runs the campaigns as ``kernelopt bench --allow-config-changes``:
each problem's whole callable is accounted for and the recommended torch.compile change is
verified through gates 3-4 on the full callable; the summary then has the geomean "with
configuration changes" beside the kernel-only one (raise ``KERNELOPT_BENCH_PER_PROBLEM_S``: the
accounting and each verified option compile the problem again). ``KERNELOPT_BENCH_ACCOUNTING=1``
accounts without verifying. Unset, the campaign runs as before (no accounting).
Only torch, triton, numpy and rich are needed (no anthropic/pygls/watchdog). GPU clocks and
settings are never touched. Writes ``bench_gpu.{json,md}`` and ``campaign/`` (results.json, report.md,
problems/), ``scaling_*/`` for phase 3.

Knobs (read at import): ``KERNELOPT_GPU_BUDGET_S`` (default 470, all phases),
``KERNELOPT_BENCH_SURVEY=0`` (skip phase 1), ``KERNELOPT_BENCH_PER_PROBLEM_S`` (150),
``KERNELOPT_BENCH_RESUME_FROM`` (an earlier campaign folder), ``KERNELOPT_BENCH_GPUS`` (1, N or all),
``KERNELOPT_BENCH_SCALING=a,b``, ``KERNELOPT_BENCH_BEAM=B,T,N,K``, ``KERNELOPT_BENCH_NCU=1``,
``KERNELOPT_BENCH_FINALISTS``, ``KERNELOPT_BENCH_SUITE`` (default benchmarks/problems),
``KERNELOPT_BENCH_ONLY=a,b``, ``KERNELOPT_BENCH_CONFIG_CHANGES=1``, ``KERNELOPT_BENCH_ACCOUNTING=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.gpu.devicescript import (
    ROOT,
    env_flag,
    env_float,
    env_int,
    env_list,
    env_text,
    environment,
    seed_campaign,
    write_json,
)

BUDGET_S = env_float("KERNELOPT_GPU_BUDGET_S", 470.0)  # the whole script, all phases
SURVEY_S = 100.0
# the survey ran on the H200 already (benchmarks/results/h200/bench_gpu.json): 0 skips it
RUN_SURVEY = env_text("KERNELOPT_BENCH_SURVEY", "1") != "0"
# a problem still running at this point is killed and recorded as a timeout (max-autotune compiles
# of GEMM problems alone take 25-60 s on the H200)
PER_PROBLEM_S = env_float("KERNELOPT_BENCH_PER_PROBLEM_S", 150.0)
# a finished campaign folder (its problems/**.json) to resume from: the campaign spans device calls
RESUME_FROM = env_text("KERNELOPT_BENCH_RESUME_FROM") or None
STOP_MARGIN_S = 25.0  # the running problem is cancelled this long before the budget ends (it runs again on resume)
START_MARGIN_S = 45.0  # no problem starts in the last this-many seconds before that
# GPUs for the campaign (phase 2); "all" takes every visible one
CAMPAIGN_GPUS = env_text("KERNELOPT_BENCH_GPUS", "1")
# comma-separated problem names (e.g. level1/bmm) for the 1-GPU against 2-GPU scaling run (phase 3)
SCALING_PROBLEMS = env_list("KERNELOPT_BENCH_SCALING")
REDUCED_BEAM: dict[str, Any] = {"beam_width": 2, "iterations": 1, "plans": 2, "retries": 1}
REDUCED_OPTIONS: dict[str, Any] = {"use_ncu": False, "finalists": 1, "max_kernels": 1, "ab_rounds": 15}
# KERNELOPT_BENCH_BEAM="B,T,N,K" overrides the reduced beam; KERNELOPT_BENCH_NCU=1 profiles with ncu
# (the speed-of-light figures need it); KERNELOPT_BENCH_FINALISTS sets gate 3-4 attempts per kernel
if env_list("KERNELOPT_BENCH_BEAM"):
    _b, _t, _n, _k = (int(v) for v in env_list("KERNELOPT_BENCH_BEAM"))
    REDUCED_BEAM = {"beam_width": _b, "iterations": _t, "plans": _n, "retries": _k}
if env_flag("KERNELOPT_BENCH_NCU"):
    REDUCED_OPTIONS["use_ncu"] = True
REDUCED_OPTIONS["finalists"] = env_int("KERNELOPT_BENCH_FINALISTS", REDUCED_OPTIONS["finalists"])
# KERNELOPT_BENCH_SUITE: a problem folder (default benchmarks/problems); KERNELOPT_BENCH_ONLY: names to run
SUITE = env_text("KERNELOPT_BENCH_SUITE") or None
ONLY = env_list("KERNELOPT_BENCH_ONLY")
# verify recommended torch.compile configuration changes (kernelopt bench --allow-config-changes)
CONFIG_CHANGES = env_flag("KERNELOPT_BENCH_CONFIG_CHANGES")
# the whole-callable accounting (on with CONFIG_CHANGES, which needs it)
ACCOUNTING = CONFIG_CHANGES or env_flag("KERNELOPT_BENCH_ACCOUNTING")


def _campaign_config(device: str, gpus: int, deadline_s: float, per_problem_s: float, scale: str | None,
                     resume: bool = False, workers: int = 1) -> Any:
    from kernelopt_core.bench.config import CampaignConfig

    return CampaignConfig(device=device, gpus=gpus, provider="offline", scale=scale, timeout_s=per_problem_s,
                          workers=workers, deadline_s=max(1.0, deadline_s), optimizer_options=dict(REDUCED_OPTIONS),
                          confirm_rounds=15, resume=resume, account="on" if ACCOUNTING else "off",
                          allow_config_changes=CONFIG_CHANGES, **REDUCED_BEAM)


def _stderr_sink(stop_after_s: float | None = None) -> Any:
    """One line per finished problem on stderr, for the log of the GPU session. With
    ``stop_after_s`` the sink cancels the campaign then: the running problem is stopped and
    recorded as cancelled, which a resumed campaign runs again."""
    import threading

    from kernelopt_core.events import EventSink

    def show(event: Any) -> None:
        if event.stage in ("problem-done", "campaign"):
            sys.stderr.write(f"[bench] {event.message}\n")
            sys.stderr.flush()

    sink = EventSink(show)
    if stop_after_s is not None:
        timer = threading.Timer(max(1.0, stop_after_s), sink.cancel_event.set)
        timer.daemon = True
        timer.start()
    return sink


def _campaign_slots(kind: str, visible: int) -> int:
    """How many GPUs the campaign spreads over (0 on the CPU: one CPU worker)."""
    if kind != "cuda":
        return 0
    wanted = visible if CAMPAIGN_GPUS == "all" else int(CAMPAIGN_GPUS)
    return max(1, min(wanted, visible))


def _earlier_walls() -> dict[str, float]:
    """Per-problem wall seconds from the campaign being resumed (for planning the scaling run)."""
    import glob

    walls: dict[str, float] = {}
    for path in glob.glob(os.path.join(RESUME_FROM or "", "problems", "**", "*.json"), recursive=True):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            walls[data["name"]] = float(data["wall_s"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return walls


def _scaling_estimate(names: list[str]) -> float:
    """Seconds to keep for the scaling phase: the problems' earlier walls once on 1 GPU and about
    half again on 2, plus slack; 60 s per problem never seen."""
    walls = _earlier_walls()
    one = sum(walls.get(name, 60.0) for name in names)
    return one * 1.7 + 30.0


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables (inherited by the problem subprocesses) for a block."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _scaling(subset: list[Any], device: str, kind: str, out_dir: str, per_problem_s: float, scale: str | None,
             left: Callable[[], float], suite: str) -> dict[str, Any]:
    """``subset`` as a campaign on one slot, then on two, each in a fresh folder; both walls and
    their ratio. Each problem compiles from an empty Inductor/Triton cache and each run starts
    from an empty experience memory."""
    from kernelopt_core.bench.campaign import run_campaign

    if len(subset) < 2:
        return {"skipped": f"fewer than 2 of the named problems were found: {SCALING_PROBLEMS}"}
    estimate = _scaling_estimate([p.name for p in subset])
    if left() < estimate:
        return {"skipped": f"{left():.0f} s left, the scaling run needs about {estimate:.0f} s"}
    runs: dict[str, Any] = {}
    walls: dict[str, float] = {}
    for label, slots in (("one_gpu", 1), ("two_gpus", 2)):
        # on the CPU (the smoke test) CPU workers stand in for GPUs
        config = _campaign_config(device, slots if kind == "cuda" else 0, left() - STOP_MARGIN_S, per_problem_s,
                                  scale, workers=1 if kind == "cuda" else slots)
        run_dir = os.path.join(out_dir, f"scaling_{label}")
        # a fresh experience memory per run, so the second run does not plan from the first one's
        with _environment(KERNELOPT_CACHE_DIR=os.path.join(run_dir, "kernelopt_cache")):
            result = run_campaign(subset, config, run_dir, _stderr_sink(), suite=suite)
        runs[label] = _campaign_json(result)
        unfinished = [r.name for r in result.results if r.category == "cancelled"] + list(result.not_reached)
        if unfinished:
            return {**runs, "problems": [p.name for p in subset],
                    "incomplete": f"{label}: {', '.join(unfinished)} did not finish; no ratio is given"}
        walls[label] = result.info.wall_s
    one_wall_sum = sum(p["wall_s"] for p in runs["one_gpu"]["problems"])
    two_wall_sum = sum(p["wall_s"] for p in runs["two_gpus"]["problems"])
    outcomes = {label: {p["name"]: p["outcome"] for p in run["problems"]} for label, run in runs.items()}
    return {
        **runs, "problems": [p.name for p in subset],
        "one_gpu_wall_s": walls["one_gpu"], "two_gpu_wall_s": walls["two_gpus"],
        "wall_time_speedup": round(walls["one_gpu"] / walls["two_gpus"], 3) if walls["two_gpus"] else None,
        # the sum of per-problem walls on 2 GPUs over that on 1: how much running side by side
        # slows each problem (shared CPUs for compiles, shared host memory bandwidth)
        "per_problem_slowdown": round(two_wall_sum / one_wall_sum, 3) if one_wall_sum else None,
        "same_outcomes": outcomes["one_gpu"] == outcomes["two_gpus"],
    }


def _survey(problems: list[Any], out_dir: str, kind: str, scale: str | None, left_s: float) -> dict[str, Any]:
    """Every problem's eager time against the 1-15 ms target; a failure is recorded, not raised."""
    from kernelopt_core.bench.eager_survey import survey_eager

    try:
        survey_device = "cuda:0" if kind == "cuda" else "cpu"
        env = {"KERNELOPT_PROBLEM_SCALE": scale} if scale else None
        rows = survey_eager(problems, os.path.join(out_dir, "survey"), survey_device,
                            timeout_s=min(SURVEY_S, max(10.0, left_s * 0.25)), env=env)
    except Exception as exc:  # noqa: BLE001 - record and go on to the campaign
        return {"error": f"{type(exc).__name__}: {exc}"}
    measured = [r for r in rows if r.get("median_ms") is not None]
    ratios = sorted(r["measured_over_estimate"] for r in measured if r.get("measured_over_estimate"))
    return {
        "measured": len(measured), "within_target": sum(1 for r in measured if r["within_target"]),
        "outside_target": [r["name"] for r in measured if not r["within_target"]],
        "failed": [r["name"] for r in rows if r.get("median_ms") is None],
        "median_measured_over_estimate": ratios[len(ratios) // 2] if ratios else None, "rows": rows,
    }


def _campaign_json(result: Any) -> dict[str, Any]:
    from kernelopt_core.bench.config_change import config_figure

    summary = result.summary
    return {
        "out_dir": result.out_dir, "wall_s": result.info.wall_s, "workers": result.info.workers,
        "counts": summary.counts, "fallback_reasons": summary.fallback_reasons, "error_reasons": summary.error_reasons,
        "geomean_vs_max_autotune": {level: g.geomean_vs_max_autotune for level, g in summary.levels.items()},
        "geomean_vs_max_autotune_all": summary.overall.geomean_vs_max_autotune,
        "geomean_vs_eager": {level: g.geomean_vs_eager for level, g in summary.levels.items()},
        # beside the kernel-only geomean: counting verified configuration changes (never a product)
        "geomean_with_config_changes": {level: g.geomean_with_config_changes for level, g in summary.levels.items()},
        "geomean_with_config_changes_all": summary.overall.geomean_with_config_changes,
        "config_changes_accepted": summary.overall.config_changes_accepted,
        "fast_p": summary.overall.fast_p,
        "regressions": summary.regression.regressions, "regression_count": len(summary.regression.regressions),
        "unconfirmed": summary.regression.unconfirmed,
        "not_reached": result.not_reached,
        "problems": [{"name": r.name, "level": r.level, "outcome": r.outcome, "category": r.category,
                      "reason": r.reason[:200], "wall_s": r.wall_s, "stage_seconds": r.stage_seconds,
                      "vs_max_autotune": r.vs_max_autotune.to_json() if r.vs_max_autotune else None,
                      "eager_ms": (r.eager or {}).get("median_ms"),
                      "max_autotune_ms": (r.max_autotune or {}).get("median_ms"), "gpu": r.gpu,
                      "overhead_share": (r.accounting or {}).get("overhead_share"),
                      "config_change": figure.to_json() if (figure := config_figure(r)) else None}
                     for r in result.results],
    }


def _campaign_markdown(title: str, data: dict[str, Any], level: int = 2) -> list[str]:
    heading = "#" * level
    if "error" in data:
        return ["", f"{heading} {title}", f"failed: {data['error']}"]
    lines = ["", f"{heading} {title}", f"- wall {data['wall_s']:.0f} s; counts {data['counts']}; "
             f"regressions {data['regression_count']} {data['regressions'] or ''}",
             f"- geomean vs max-autotune per level: {data['geomean_vs_max_autotune']} "
             f"(all: {data['geomean_vs_max_autotune_all']})",
             f"- with configuration changes (the better of kernel and verified configuration figure per problem, "
             f"never a product): {data.get('geomean_with_config_changes')} "
             f"(all: {data.get('geomean_with_config_changes_all')}; {data.get('config_changes_accepted', 0)} accepted)",
             f"- fallback reasons {data['fallback_reasons']}; errors {data['error_reasons']}",
             f"- not reached ({len(data['not_reached'])}): {', '.join(data['not_reached']) or 'none'}",
             "", "| problem | outcome | reason | GPU | wall s | vs max-autotune | configuration change |",
             "|---|---|---|---|---|---|---|"]
    for row in data["problems"]:
        figure = row["vs_max_autotune"]
        shown = f"{figure['value']:.3f} [{figure['ci_low']:.3f}, {figure['ci_high']:.3f}]" if figure else "–"
        config = row.get("config_change")
        change = (f"{config['value']:.3f} [{config['ci_low']:.3f}, {config['ci_high']:.3f}] {config['change']} "
                  f"({config['path']})" if config else "–")
        reason = str(row["reason"]).replace("|", "/")[:90]
        lines.append(f"| `{row['name']}` | {row['outcome']} | {reason} | {row['gpu']} | {row['wall_s']:.1f} | {shown} "
                     f"| {change} |")
    return lines


def _markdown(summary: dict[str, Any]) -> str:
    lines = ["# Benchmark suite on the GPU (offline provider, reduced beam)", ""]
    lines.append(f"- {summary.get('date')}; device: {summary.get('device')} ({summary.get('gpu_name')}); "
                 f"GPUs visible: {summary.get('gpus_visible')}; torch {summary.get('torch')}; "
                 f"total wall {summary.get('wall_s', 0):.0f} s of a {summary.get('budget_s', 0):.0f} s budget")
    lines.append(f"- beam: {summary.get('beam')}, optimizer options {summary.get('optimizer_options')}; "
                 f"per-problem cap {summary.get('per_problem_s', 0):.0f} s")
    survey = summary.get("eager_survey") or {}
    if survey.get("skipped"):
        lines += ["", f"Eager survey skipped ({survey['skipped']})."]
    elif survey:
        lines += ["", "## Eager times against the 1-15 ms target",
                  f"{survey.get('within_target')} of {survey.get('measured')} measured problems within target; "
                  f"median measured/estimate {survey.get('median_measured_over_estimate')}", "",
                  "| problem | eager ms | estimate ms | measured/estimate | within 1-15 ms |", "|---|---|---|---|---|"]
        for row in survey.get("rows", []):
            ms = row.get("median_ms")
            ratio = row.get("measured_over_estimate")
            lines.append(f"| `{row['name']}` | {f'{ms:.3g}' if ms else row.get('error', '–')} | "
                         f"{row.get('estimate_ms')} | {f'{ratio:.2f}' if ratio else '–'} | "
                         f"{'yes' if row.get('within_target') else 'NO'} |")
    campaign = summary.get("campaign")
    if campaign:
        resumed = (summary.get("resumed_from") or {}).get("results", 0)
        lines += _campaign_markdown(f"Campaign on {campaign.get('workers', '?')} worker(s)"
                                    + (f", {resumed} problem(s) resumed from earlier runs (their walls are "
                                       "theirs; the campaign wall is this call's)" if resumed else ""), campaign)
    scaling = summary.get("scaling")
    if scaling:
        lines += ["", "## Scaling: the same problems on 1 GPU, then on 2"]
        if "wall_time_speedup" in scaling:
            lines += [f"- problems: {', '.join(scaling['problems'])}",
                      f"- wall {scaling['one_gpu_wall_s']:.1f} s on 1 GPU, {scaling['two_gpu_wall_s']:.1f} s on 2: "
                      f"**{scaling['wall_time_speedup']:.2f}x**; per-problem walls summed, 2 GPUs over 1: "
                      f"{scaling['per_problem_slowdown']}; same outcomes: {scaling['same_outcomes']}"]
        else:
            lines.append(f"- {scaling.get('skipped') or scaling.get('incomplete') or scaling.get('error')}")
        for label in ("one_gpu", "two_gpus"):
            if label in scaling:
                lines += _campaign_markdown(f"Scaling run, {label.replace('_', ' ')}", scaling[label], level=3)
    return "\n".join(lines) + "\n"


def run(out_dir: str, device: str = "auto", suite: str | None = None, scale: str | None = None,
        budget_s: float = BUDGET_S, per_problem_s: float = PER_PROBLEM_S, levels: set[int] | None = None) -> dict:
    """The suite on this machine's GPU(s); ``device="cpu"``/``scale="tiny"`` give a CPU smoke test."""
    from kernelopt_core.bench.campaign import run_campaign
    from kernelopt_core.bench.scheduler import resolve_device, visible_gpus
    from kernelopt_core.bench.suite import discover_suite, interleave_levels

    started = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)
    suite = suite or (os.path.join(ROOT, SUITE) if SUITE and not os.path.isabs(SUITE) else SUITE) or \
        os.path.join(ROOT, "benchmarks", "problems")
    gpus = visible_gpus()
    kind = resolve_device(device, gpus)
    summary: dict[str, Any] = {"device": kind, "gpus_visible": len(gpus), "suite": suite, "budget_s": budget_s,
                               "beam": REDUCED_BEAM, "optimizer_options": REDUCED_OPTIONS,
                               "config_changes": CONFIG_CHANGES, "accounting": ACCOUNTING,
                               "per_problem_s": per_problem_s}
    env = environment(kind)
    summary.update(environment=env, date=env["date"], torch=env["torch"], gpu_name=env["gpu"] if kind == "cuda" else None)
    problems = interleave_levels(discover_suite(suite, levels))
    if ONLY:  # in the order given: the most telling problems first
        by_name = {p.name: p for p in problems}
        by_name.update({p.name.split("/")[-1]: p for p in problems})
        problems = [by_name[n] for n in ONLY if n in by_name]
        summary["only"] = ONLY
    summary["problems"] = len(problems)

    def left() -> float:
        return budget_s - (time.monotonic() - started)

    # 1. eager survey
    if RUN_SURVEY:
        summary["eager_survey"] = _survey(problems, out_dir, kind, scale, left())
    else:
        summary["eager_survey"] = {"skipped": "KERNELOPT_BENCH_SURVEY=0: it ran in an earlier call"}
    write_json(os.path.join(out_dir, "bench_gpu.json"), summary)

    # 2. the campaign, on KERNELOPT_BENCH_GPUS GPUs
    slots = _campaign_slots(kind, len(gpus))
    scaling = SCALING_PROBLEMS and (kind == "cpu" or len(gpus) >= 2)
    scaling_estimate = _scaling_estimate(SCALING_PROBLEMS) if scaling else 0.0
    allot = left() - scaling_estimate - STOP_MARGIN_S
    try:
        campaign_dir = os.path.join(out_dir, "campaign")
        seeded = seed_campaign(campaign_dir, RESUME_FROM)
        summary["resumed_from"] = {"folder": RESUME_FROM, "results": seeded} if seeded else None
        config = _campaign_config(device, slots, allot - START_MARGIN_S, per_problem_s, scale,
                                  resume=bool(seeded))
        result = run_campaign(problems, config, campaign_dir, _stderr_sink(allot), suite=suite)
        summary["campaign"] = _campaign_json(result)
    except Exception as exc:  # noqa: BLE001
        summary["campaign"] = {"error": f"{type(exc).__name__}: {exc}"}
    write_json(os.path.join(out_dir, "bench_gpu.json"), summary)

    # 3. the same problems on 1 GPU, then on 2 GPUs
    if SCALING_PROBLEMS:
        if not scaling:
            summary["scaling"] = {"skipped": f"only {len(gpus)} GPU visible"}
        else:
            subset = [p for p in problems if p.name in SCALING_PROBLEMS]
            try:
                summary["scaling"] = _scaling(subset, device, kind, out_dir, per_problem_s, scale, left, suite)
            except Exception as exc:  # noqa: BLE001 - the campaign's results are kept
                summary["scaling"] = {"error": f"{type(exc).__name__}: {exc}"}
        write_json(os.path.join(out_dir, "bench_gpu.json"), summary)
    summary["wall_s"] = round(time.monotonic() - started, 1)
    write_json(os.path.join(out_dir, "bench_gpu.json"), summary)
    with open(os.path.join(out_dir, "bench_gpu.md"), "w", encoding="utf-8") as handle:
        handle.write(_markdown(summary))
    brief = {k: v for k, v in summary.items() if k not in ("eager_survey", "campaign", "scaling")}
    campaign = summary.get("campaign")
    if isinstance(campaign, dict):
        brief["campaign"] = {k: campaign.get(k) for k in ("wall_s", "counts", "geomean_vs_max_autotune",
                                                          "geomean_with_config_changes", "config_changes_accepted",
                                                          "regression_count", "not_reached", "error") if k in campaign}
    survey = summary.get("eager_survey") or {}
    brief["scaling"] = {k: v for k, v in (summary.get("scaling") or {}).items() if k not in ("one_gpu", "two_gpus")}
    brief["eager_survey"] = {k: survey.get(k) for k in ("measured", "within_target", "outside_target",
                                                         "median_measured_over_estimate", "error", "skipped") if k in survey}
    return brief


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--suite", default=None, help="a problem folder (default: KERNELOPT_BENCH_SUITE or benchmarks/problems)")
    parser.add_argument("--scale", default=None, help="KERNELOPT_PROBLEM_SCALE for the problems, e.g. tiny")
    args = parser.parse_args()
    print(json.dumps(run(args.out_dir, args.device, args.suite, args.scale), indent=1, default=str))
