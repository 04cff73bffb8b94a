"""Run the GPU campaign scripts in one device call, each in its own process with a time cap.

    PYTHONPATH=.:server python benchmarks/gpu/run_all.py --out $OUT measure:240 gates:180 ...

Every ``benchmarks/gpu/<name>.py`` exposes ``run(out_dir) -> dict``. Each runs in a subprocess
(so a crash or hang in one cannot take the others down), under a wall-clock cap; its budget is
also passed as ``KERNELOPT_GPU_BUDGET_S`` so it can plan. Everything written is packed into one
``results.tar.gz`` (the device tool returns at most 8 files), plus ``summary.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def environment() -> dict:
    info: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        import torch
        import triton

        info.update(torch=torch.__version__, triton=triton.__version__,
                    gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    gpu_count=torch.cuda.device_count(), cuda=torch.version.cuda)
    except Exception as exc:  # noqa: BLE001
        info["torch_error"] = repr(exc)
    try:
        out = subprocess.run(["ncu", "--version"], capture_output=True, text=True, timeout=60).stdout
        info["ncu"] = out.strip().splitlines()[-1]
    except Exception as exc:  # noqa: BLE001
        info["ncu"] = f"unavailable: {exc}"
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        info["nvidia_smi"] = f"unavailable: {exc}"
    info["python"] = sys.version.split()[0]
    return info


def run_one(name: str, budget_s: int, out_root: str) -> dict:
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    code = (
        "import json, sys, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('gpu_{name}', {os.path.join(HERE, name + '.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)\n"
        f"res = mod.run({out_dir!r})\n"
        f"json.dump(res, open({os.path.join(out_dir, 'summary.json')!r}, 'w'), indent=1, default=str)\n"
    )
    env = {**os.environ, "KERNELOPT_GPU_BUDGET_S": str(budget_s), "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    with open(os.path.join(out_dir, "log.txt"), "w") as log:
        try:
            proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=budget_s, start_new_session=True)
            status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {budget_s} s"
    wall = time.perf_counter() - started
    print(f"[{name}] {status} in {wall:.0f} s", flush=True)
    return {"name": name, "status": status, "wall_s": round(wall, 1)}


TEXT_SUFFIXES = (".json", ".md", ".txt", ".csv", ".png", ".diff", ".log")
MAX_PACKED_FILE = 4 * 1024 * 1024


def _small_text(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Pack results and logs, not compiled dumps, caches or large binaries."""
    if info.isdir():
        return None if os.path.basename(info.name) in ("inductor_cache", "runtime_inductor_cache", "__pycache__") \
            else info
    if not info.name.endswith(TEXT_SUFFIXES) or info.size > MAX_PACKED_FILE:
        return None
    return info


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("scripts", nargs="+", help="NAME:BUDGET_SECONDS")
    args = parser.parse_args()
    # Work outside $OUT: the device tool returns at most 8 files, so only the packed text results
    # (results.tar.gz) and summary.json go there.
    work = os.path.join("/tmp", "kernelopt-gpu-work")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    summary = {"environment": environment(), "runs": []}
    print(json.dumps(summary["environment"]), flush=True)
    for spec in args.scripts:
        name, _, budget = spec.partition(":")
        summary["runs"].append(run_one(name, int(budget or 240), work))
        with open(os.path.join(work, "run_all.json"), "w") as handle:
            json.dump(summary, handle, indent=1)
        with tarfile.open(os.path.join(args.out, "results.tar.gz"), "w:gz") as tar:
            tar.add(work, arcname="gpu", filter=_small_text)
    with open(os.path.join(args.out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    for run in summary["runs"]:
        log = os.path.join(work, run["name"], "log.txt")
        tail = open(log).read()[-1500:] if os.path.exists(log) else ""
        print(f"--- {run['name']}: {run['status']} ({run['wall_s']} s)\n{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
