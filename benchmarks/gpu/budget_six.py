"""Issue 25's targets: six kbscale problems through `kernelopt bench` at a budget each, and their checks.

Run on the device (4 GPUs: the six problems in two waves of about 4 minutes each):

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT budget_six:560
    # with KERNELOPT_BUDGET_SIX_GPUS=4 (default: every visible GPU, at most one a problem)

On the CPU first, at the problems' tiny scale (plumbing only; the figures mean nothing there):

    KERNELOPT_BUDGET_SIX_DEVICE=cpu KERNELOPT_PROBLEM_SCALE=tiny KERNELOPT_BUDGET_SIX_S=240 \\
        KERNELOPT_BUDGET_SIX_PROBLEMS=avg_pool1d,l2_norm KERNELOPT_GPU_BUDGET_S=600 \\
        python3 -m benchmarks.gpu.budget_six /tmp/budget_six

A thin driver over the public CLI: `kernelopt bench SUITE --timeout BUDGET` with default search
options (offline provider), one problem per GPU. It then reads the campaign's results.json and
checks the targets: 0 errors and 0 timeouts; screen median <= 10 s and p90 <= 20 s; the kernel-only
geomean vs max-autotune >= 1.15x with 0 regressions. It writes ``budget_six.json`` and
``budget_six.md`` (the checks, one row per problem with its time split) beside the campaign folder
(``campaign/``: results.json, report.md, each run's report.md with its per-candidate times under
``work/<problem>/runs/``). Knobs: ``KERNELOPT_GPU_BUDGET_S`` (the whole call, default 560: the
campaign is stopped then), ``KERNELOPT_BUDGET_SIX_S`` (per-problem budget, default 180),
``KERNELOPT_BUDGET_SIX_PROBLEMS`` (comma-separated kbscale names, or ``level2/NAME`` for another set's), ``KERNELOPT_BUDGET_SIX_GPUS``,
``KERNELOPT_BUDGET_SIX_DEVICE`` (default auto), ``KERNELOPT_BUDGET_SIX_RESUME_FROM`` (an earlier
``campaign/`` folder whose finished problems are kept: the six may span device calls),
``KERNELOPT_BUDGET_SIX_CONFIG=1`` (``--allow-config-changes``: each problem's configuration check runs
beside its search; the record's configuration column says what it verified, or "not verified" with the
accounting's figure). Each problem's row also gives the share of its budget it used, its configuration
check's and final gates' seconds, and a candidate found too late for the final gates ("found, not
verified within the budget", with its kernel speedup).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from benchmarks.gpu.devicescript import (
    KBSCALE,
    Budget,
    env_float,
    env_int,
    env_list,
    env_text,
    environment,
    kernelopt,
    read_json,
    seed_campaign,
    write_record,
)

SUITE = KBSCALE
SIX = ("max_pool2d_dilated", "avg_pool1d", "softmax_long_rows", "l2_norm", "layer_norm_16_rows", "cross_entropy")
TARGETS = {"errors": 0, "timeouts": 0, "screen_median_s": 10.0, "screen_p90_s": 20.0, "geomean": 1.15,
           "regressions": 0}


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no torch: no GPU
        return 0


def problem_path(name: str) -> str:
    """A kbscale problem by name, or another set's as ``SET/name`` (``level2/conv2d_add_scale_sigmoid_groupnorm``)."""
    if "/" in name:
        return os.path.join(os.path.dirname(SUITE), f"{name}.py")
    return os.path.join(SUITE, f"{name}.py")


def _suite(out_dir: str, problems: list[str]) -> str:
    """A suite folder holding the chosen problems and nothing else (copies: the campaign reads the
    folder's files). It starts empty: on a warm device machine an earlier call's suite is still there,
    and its problems would run again (seen on the H200: a problem ran twice and the last was cut off)."""
    folder = os.path.join(out_dir, "suite")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name in problems:
        copy = os.path.join(folder, f"{name}.py")  # SET/name keeps its folder: the campaign reads the level there
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copy(problem_path(name), copy)
    return folder


def check(results: dict[str, Any], targets: dict[str, float] = TARGETS) -> dict[str, Any]:
    """The targets against a campaign's results.json: each check's value, target and verdict."""
    summary = results.get("summary") or {}
    problems = results.get("problems") or []
    time_totals = summary.get("time") or {}
    errors = [p for p in problems if p.get("outcome") == "error"]
    timeouts = [p for p in errors if p.get("category") == "timeout"]
    overall = summary.get("overall") or {}
    geomean = overall.get("geomean_vs_max_autotune")
    regressions = summary.get("regression_count", len((summary.get("regression") or {}).get("regressions") or []))
    rows = {
        "errors": (len(errors), targets["errors"], len(errors) <= targets["errors"]),
        "timeouts": (len(timeouts), targets["timeouts"], len(timeouts) <= targets["timeouts"]),
        "screen_median_s": (time_totals.get("screen_median_s"), targets["screen_median_s"],
                            _at_most(time_totals.get("screen_median_s"), targets["screen_median_s"])),
        "screen_p90_s": (time_totals.get("screen_p90_s"), targets["screen_p90_s"],
                         _at_most(time_totals.get("screen_p90_s"), targets["screen_p90_s"])),
        "geomean": (geomean, targets["geomean"], isinstance(geomean, (int, float)) and geomean >= targets["geomean"]),
        "regressions": (regressions, targets["regressions"], regressions <= targets["regressions"]),
    }
    per_problem = []
    for p in problems:
        split = p.get("time_split") or {}
        speedup = (p.get("vs_max_autotune") or {}).get("value")
        per_problem.append({
            "name": p.get("name"), "outcome": p.get("outcome"), "category": p.get("category"),
            "budget_reached": p.get("budget_reached"), "vs_max_autotune": speedup, "wall_s": p.get("wall_s"),
            "budget_s": p.get("budget_s"), "optimize_budget_s": p.get("optimize_budget_s"),
            "optimize_s": (p.get("stage_seconds") or {}).get("optimize"), "screened": split.get("screened"),
            "screened_per_minute": split.get("screened_per_minute"),
            "screen_median_s": (split.get("screen_s") or {}).get("median"),
            "screen_p90_s": (split.get("screen_s") or {}).get("p90"), "finalize_s": split.get("finalize_s"),
            "final_gates_s": split.get("final_gates_s") or [],
            "stages": split.get("stages"), "reason": p.get("reason"),
            "budget_used": _share(p.get("wall_s"), p.get("budget_s")),
            "config_s": (split.get("stages") or {}).get("config"), "config": config_cell(p.get("config_change")),
            "config_memory": config_memory(p.get("config_change")),
            "config_memory_phases": config_memory_phases(p.get("config_change")),
            "found_unverified": [f"{f.get('kernel')} {f.get('candidate')} {f.get('kernel_speedup'):.3f}x"
                                 for f in p.get("found_unverified") or []
                                 if isinstance(f, dict) and isinstance(f.get("kernel_speedup"), (int, float))],
        })
    return {"checks": {k: {"value": v, "target": t, "passed": ok} for k, (v, t, ok) in rows.items()},
            "passed": all(ok for _, _, ok in rows.values()), "time": time_totals, "problems": per_problem}


def _share(part: Any, whole: Any) -> float | None:
    if not isinstance(part, (int, float)) or not isinstance(whole, (int, float)) or whole <= 0:
        return None
    return round(part / whole, 3)


def config_cell(change: Any) -> str:
    """A problem's configuration change in a few words: the chosen option and its verified speedup, else why not."""
    if not isinstance(change, dict):
        return "-"
    verified = change.get("verified") if isinstance(change.get("verified"), dict) else {}
    mode = ((change.get("recommendation") or {}).get("change") or {}).get("mode")
    if not change.get("allowed"):
        return f"{mode} recommended (not allowed)"
    if change.get("chosen") and isinstance(verified.get("speedup"), (int, float)):
        return f"{change['chosen']} verified {verified['speedup']:.2f}x"
    if verified.get("not_verified"):
        measured = verified.get("measured_speedup")
        return f"{mode} not verified" + (f" (measured {measured:.2f}x)" if isinstance(measured, (int, float)) else "")
    return f"{mode} rejected: {str(verified.get('reason') or '?')[:60]}"


def config_memory(change: Any) -> list[float]:
    """Each configuration check's device peak over the problem's working set (issue 40's target: <= 3x)."""
    if not isinstance(change, dict):
        return []
    ratios = []
    for verdict in change.get("verifications") or []:
        memory = verdict.get("memory") if isinstance(verdict, dict) else None
        ratio = memory.get("peak_over_working_set") if isinstance(memory, dict) else None
        if isinstance(ratio, (int, float)):
            ratios.append(float(ratio))
    return ratios


def config_memory_phases(change: Any) -> list[dict[str, Any]]:
    """Per configuration check: the running device peak after each of its phases, and what its worker still
    held when it began, over the working set (which phase sets the peak)."""
    if not isinstance(change, dict):
        return []
    out = []
    for verdict in change.get("verifications") or []:
        memory = verdict.get("memory") if isinstance(verdict, dict) else None
        if not isinstance(memory, dict) or not memory.get("working_set_bytes"):
            continue
        working = float(memory["working_set_bytes"])
        phases = {k: round(v / working, 3) for k, v in (memory.get("peak_bytes_by_phase") or {}).items()
                  if isinstance(v, (int, float))}
        held = memory.get("held_at_start_bytes")
        out.append({"option": verdict.get("option"), "phases_over_working_set": phases,
                    "held_at_start_over_working_set": round(held / working, 3) if isinstance(held, int) else None})
    return out


def _at_most(value: Any, target: float) -> bool:
    return isinstance(value, (int, float)) and value <= target


def gates_split_text(split: dict[str, Any]) -> str:
    """One finalist's gate seconds, e.g. "9.5 / 45.1 / 1.6 (29.2)"."""
    def cell(key: str) -> str:
        value = split.get(key)
        return f"{value:.1f}" if isinstance(value, (int, float)) else "-"

    sanitizer = f" ({cell('sanitizer')})" if "sanitizer" in split else ""
    return f"{cell('2')} / {cell('3')} / {cell('4')}{sanitizer}"


def markdown(verdict: dict[str, Any], budget_s: float) -> str:
    lines = [f"Each problem's budget: {budget_s:.0f} s (`kernelopt bench --timeout`).", "",
             "| check | value | target | passed |", "|---|---|---|---|"]
    for name, row in verdict["checks"].items():
        value = row["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        limit = "<=" if name not in ("geomean",) else ">="
        lines.append(f"| {name} | {shown} | {limit} {row['target']} | {'yes' if row['passed'] else '**no**'} |")
    lines += ["", "| problem | outcome | vs max-autotune | budget reached | wall s | budget used | optimizer got s "
                  "| screened | per min | screen median s | p90 s | final gates s | gate 2 / 3 / 4 (sanitizer) s | config s "
                  "| configuration | config peak / working set | found, not verified |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in verdict["problems"]:
        def num(value: Any, digits: int = 1) -> str:
            return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"

        lines.append(f"| {p['name']} | {p['outcome']}{' (' + p['category'] + ')' if p['category'] else ''} "
                     f"| {num(p['vs_max_autotune'], 3)} | {'yes' if p['budget_reached'] else 'no'} | {num(p['wall_s'])} "
                     f"| {num(100 * p['budget_used'], 0) + '%' if p.get('budget_used') is not None else '-'} "
                     f"| {num(p['optimize_budget_s'])} | {p['screened'] if p['screened'] is not None else '-'} "
                     f"| {num(p['screened_per_minute'])} | {num(p['screen_median_s'])} | {num(p['screen_p90_s'])} "
                     f"| {', '.join(num(s) for s in p['finalize_s'] or []) or '-'} "
                     f"| {'; '.join(gates_split_text(g) for g in p.get('final_gates_s') or []) or '-'} "
                     f"| {num(p.get('config_s'))} "
                     f"| {p.get('config') or '-'} | {', '.join(num(r, 2) + 'x' for r in p.get('config_memory') or []) or '-'} "
                     f"| {'; '.join(p.get('found_unverified') or []) or '-'} |")
    time_totals = verdict.get("time") or {}
    if time_totals.get("stages"):
        lines += ["", "Optimizer seconds per stage, summed: " + ", ".join(
            f"{k} {v:.0f}" for k, v in time_totals["stages"].items() if isinstance(v, (int, float)) and v >= 0.5)]
    return "\n".join(lines) + "\n"


def run(out_dir: str) -> dict[str, Any]:
    out_dir = os.path.abspath(out_dir)
    budget = Budget.from_env(560.0)
    budget_s = env_float("KERNELOPT_BUDGET_SIX_S", 180.0)
    device = env_text("KERNELOPT_BUDGET_SIX_DEVICE", "auto")
    problems = env_list("KERNELOPT_BUDGET_SIX_PROBLEMS") or list(SIX)
    unknown = [n for n in problems if not os.path.isfile(problem_path(n))]
    if unknown:
        raise SystemExit(f"no such problem (kbscale, or SET/name under benchmarks/problems): {', '.join(unknown)}")
    os.makedirs(out_dir, exist_ok=True)
    campaign = os.path.join(out_dir, "campaign")
    resumed = seed_campaign(campaign, env_text("KERNELOPT_BUDGET_SIX_RESUME_FROM"))
    gpus = env_int("KERNELOPT_BUDGET_SIX_GPUS", 0) or min(len(problems), _visible_gpus())
    args = ["bench", _suite(out_dir, problems), "--out", campaign, "--timeout", f"{budget_s:g}", "--device", device,
            "--no-plot"]
    if env_text("KERNELOPT_BUDGET_SIX_CONFIG", "0") == "1":
        args.append("--allow-config-changes")
    if gpus > 1 and device != "cpu":
        args += ["--gpus", str(gpus)]
    if resumed:
        args.append("--resume")
    done = kernelopt(args, timeout_s=budget.left() - 20, log_path=os.path.join(out_dir, "bench_stderr.log"))
    results = read_json(os.path.join(campaign, "results.json"))
    if results is None:
        raise SystemExit(f"the campaign wrote no results.json: {done.why()}")
    verdict = check(results)
    verdict.update(environment=environment(device), budget_s=budget_s, device=device, gpus=gpus, wall_s=done.wall_s,
                   exit_code=done.returncode, command=["kernelopt", *args])
    write_record(out_dir, "budget_six", verdict, f"Six kbscale problems at a {budget_s:.0f} s budget each (issue 25)",
                 markdown(verdict, budget_s).splitlines())
    print(f"budget_six: {'PASS' if verdict['passed'] else 'FAIL'} in {done.wall_s:.0f} s on {gpus or 1} slot(s): "
          + "; ".join(f"{k} {row['value']} (target {row['target']})" for k, row in verdict["checks"].items()))
    for p in verdict["problems"]:
        print(f"  {p['name']}: {p['outcome']} vs MA {p['vs_max_autotune']} screened {p['screened']} "
              f"median {p['screen_median_s']} s, wall {p['wall_s']} s")
    return verdict


def combine(out_dir: str, picks: dict[str, str], stem: str = "budget_six_combined") -> dict[str, Any]:
    """The six checked together when they ran in several device calls: each problem's result is read from
    the campaign folder named for it (its ``problems/<name>.json``, as the bench wrote it) and summarised by
    the bench's own summary, so the geomean and the screen percentiles cover exactly these runs. The
    environment of each call comes from the ``budget_six.json`` beside its campaign folder."""
    from kernelopt_core.bench.results import load_result
    from kernelopt_core.bench.summary import summarize_campaign

    results, sources = [], {}
    for name, campaign in picks.items():
        result = load_result(campaign, name)
        if result is None:
            raise SystemExit(f"no finished result of {name} in {campaign}")
        results.append(result)
        record = read_json(os.path.join(os.path.dirname(os.path.abspath(campaign)), "budget_six.json")) or {}
        sources[name] = {"campaign": campaign, "environment": record.get("environment")}
    results.sort(key=lambda r: (r.level, r.name))
    summary = summarize_campaign(results)
    verdict = check({"summary": summary.to_json(), "problems": [r.to_json() for r in results]})
    budgets = {r.budget_s for r in results if r.budget_s is not None}
    first = next((s["environment"] for s in sources.values() if s["environment"]), None)
    verdict.update(environment=first, sources=sources, budget_s=max(budgets) if budgets else None)
    write_record(out_dir, stem, verdict, "Six kbscale problems at a 180 s budget each (issue 25), gathered from "
                 "several device calls", markdown(verdict, max(budgets) if budgets else 0.0).splitlines())
    return verdict


if __name__ == "__main__":
    import sys

    if len(sys.argv) >= 3 and sys.argv[1] == "--combine":
        # python3 -m benchmarks.gpu.budget_six --combine OUT_DIR name=CAMPAIGN_DIR ...
        picks = dict(arg.split("=", 1) for arg in sys.argv[3:])
        verdict = combine(sys.argv[2], picks)
        print("PASS" if verdict["passed"] else "FAIL", {k: row["value"] for k, row in verdict["checks"].items()})
    elif len(sys.argv) == 2:
        run(sys.argv[1])
    else:
        raise SystemExit("usage: python3 benchmarks/gpu/budget_six.py OUT_DIR\n"
                         "       python3 -m benchmarks.gpu.budget_six --combine OUT_DIR name=CAMPAIGN_DIR ...")
