"""The group-norm tail exploration's kernels, in Triton's CPU interpreter against a float64 reference (its
``--check``, in a process of its own: the interpreter's state is per process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_checked_variant_matches_the_float64_reference() -> None:
    done = subprocess.run([sys.executable, "benchmarks/explore/explore_groupnorm_tail.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert set(result) == {"p92_conv_gn_lse", "p21_conv_sigmoid_gn"}
    for pattern in result.values():
        for name, errors in pattern.items():
            if name.startswith("stats"):
                assert errors["mean_err"] < 1e-5 and errors["rstd_rel_err"] < 1e-5, (name, errors)
            else:
                assert errors["max_err"] < 1e-4, (name, errors)
    assert any(name.startswith("apply") for name in result["p92_conv_gn_lse"])
