"""Discover and parse 1,000 output_code.py files; the target is <= 3 s on the 2-core CI machine.

The files are the H200 fixtures copied into a temporary TORCH_COMPILE_DEBUG-like tree, each
perturbed (a unique comment and a renamed buffer) so that no two are identical and
de-duplication cannot skip work. Writes benchmarks/results/parse_speed.json and .md.

    .venv/bin/python benchmarks/parse_speed.py [--files 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelopt_core.artifacts import DumpIndex  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11"
RESULTS = ROOT / "benchmarks" / "results"
TARGET_S = 3.0


def make_tree(root: Path, count: int) -> int:
    """Write ``count`` distinct wrappers; returns the bytes written."""
    sources = sorted(p.read_text() for p in FIXTURES.glob("*/output_code.py"))
    written = 0
    for i in range(count):
        text = sources[i % len(sources)]
        text = f"# perturbed copy {i}\n" + text.replace("buf0", f"buf0_{i}")
        run = root / "torch_compile_debug" / f"run_{i // 100:03d}" / "torchinductor" / f"model__{i}_inference_{i}.0"
        run.mkdir(parents=True)
        (run / "output_code.py").write_text(text)
        written += len(text)
    return written


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - torch is optional for this benchmark
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; do not update benchmarks/results")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kernelopt-parse-speed-"))
    try:
        size = make_tree(tmp, args.files)
        times, kernels, graphs = [], 0, 0
        for _ in range(args.repeats):
            started = time.perf_counter()
            index = DumpIndex()
            index.scan(str(tmp))
            found = index.graphs()
            times.append(time.perf_counter() - started)
            graphs = len(found)
            kernels = sum(len(g.kernels) for g in found)
            assert not index.problems(), index.problems()[:3]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "benchmark": "discover + parse output_code.py files",
        "files": args.files,
        "graphs_found": graphs,
        "kernels_found": kernels,
        "megabytes": round(size / 1e6, 2),
        "seconds_median": round(statistics.median(times), 3),
        "seconds_all": [round(t, 3) for t in times],
        "target_seconds": TARGET_S,
        "passed": statistics.median(times) <= TARGET_S,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "platform": platform.platform()},
        "python": platform.python_version(),
        "torch": torch_version(),
    }
    print(json.dumps(result, indent=1))
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "parse_speed.json").write_text(json.dumps(result, indent=1) + "\n")
        (RESULTS / "parse_speed.md").write_text(
            "# Parse speed\n\n"
            f"Discovering and parsing **{args.files}** `output_code.py` files ({result['megabytes']} MB, "
            f"{kernels} kernels) took **{result['seconds_median']} s** (median of {args.repeats}; "
            f"all: {result['seconds_all']}). Target: <= {TARGET_S} s -> "
            f"{'met' if result['passed'] else 'NOT met'}.\n\n"
            f"- date: {result['date']}\n- machine: {result['machine']['nproc']} CPUs, {result['machine']['cpu']}, "
            f"{result['machine']['platform']}\n- python {result['python']}, torch {result['torch']}\n"
        )
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
