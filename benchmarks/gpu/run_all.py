"""Run device scripts in one device call, each in its own process under a time cap, and pack the results.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT measure:240 gates:180 ...

NAME is a script of ``benchmarks/gpu`` (``measure``) or a path under ``benchmarks/`` (``explore/
explore_windows``). Each exposes ``run(out_dir) -> dict`` and runs in a subprocess (a crash or hang in
one cannot take the others down) under a wall-clock cap of BUDGET seconds, also passed as
``KERNELOPT_GPU_BUDGET_S`` so it can plan. Scripts work in ``/tmp/kernelopt-gpu-work/<name>/``; the
text results of all of them are packed into ``$OUT/results.tar.gz`` after each script (the device tool
returns at most 8 files), beside ``$OUT/summary.json`` (the environment and each script's status).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # run as a file: benchmarks.gpu.devicescript must be importable
    sys.path.insert(0, ROOT)
WORK = os.path.join("/tmp", "kernelopt-gpu-work")  # outside $OUT: only the packed results go there
TAIL_CHARS = 1500


def module_name(name: str) -> str:
    """``measure`` -> ``benchmarks.gpu.measure``; ``explore/explore_windows`` -> ``benchmarks.explore.explore_windows``."""
    parts = [p for p in name.removesuffix(".py").split("/") if p]
    return ".".join(["benchmarks", *(parts if len(parts) > 1 else ["gpu", *parts])])


def run_one(name: str, budget_s: int, out_root: str) -> dict[str, object]:
    """One script in a child process of its own session; past ``budget_s`` the session is stopped."""
    from benchmarks.gpu.devicescript import child_env, run_capped

    out_dir = os.path.join(out_root, os.path.basename(name))
    os.makedirs(out_dir, exist_ok=True)
    code = ("import importlib, json\n"
            f"result = importlib.import_module({module_name(name)!r}).run({out_dir!r})\n"
            f"json.dump(result, open({os.path.join(out_dir, 'summary.json')!r}, 'w'), indent=1, default=str)\n")
    env = child_env(KERNELOPT_GPU_BUDGET_S=str(budget_s), PYTHONUNBUFFERED="1")
    returncode, wall = run_capped([sys.executable, "-c", code], os.path.join(out_dir, "log.txt"), budget_s,
                                  env=env, grace_s=5.0)
    status = (f"timed out after {budget_s} s" if returncode is None else
              "ok" if returncode == 0 else f"exit {returncode}")
    print(f"[{name}] {status} in {wall:.0f} s", flush=True)
    return {"name": name, "status": status, "wall_s": wall}


def main() -> int:
    from benchmarks.gpu.devicescript import environment, pack_results, write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("scripts", nargs="+", help="NAME:BUDGET_SECONDS")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    summary: dict[str, object] = {"environment": environment("cuda"), "runs": []}
    print(json.dumps(summary["environment"]), flush=True)
    runs: list[dict[str, object]] = []
    summary["runs"] = runs
    for spec in args.scripts:
        name, _, budget = spec.partition(":")
        runs.append(run_one(name, int(budget or 240), WORK))
        write_json(os.path.join(WORK, "run_all.json"), summary)
        pack_results(WORK, os.path.join(args.out, "results.tar.gz"))
    write_json(os.path.join(args.out, "summary.json"), summary)
    for run in runs:
        log = os.path.join(WORK, os.path.basename(str(run["name"])), "log.txt")
        tail = open(log).read()[-TAIL_CHARS:] if os.path.exists(log) else ""
        print(f"--- {run['name']}: {run['status']} ({run['wall_s']} s)\n{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
