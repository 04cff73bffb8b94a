"""Eager time of every problem in a suite, against the size target (1-15 ms on an H200).

Each problem states its estimate in a ``# est. eager H200: ~X ms (reason)`` line. The survey runs
in one subprocess (``python -m kernelopt_core.bench.eager_survey PAYLOAD.json``, which imports
torch) writing one JSON line per problem; :func:`survey_eager` restarts it after a crash or a
hang, skipping the problems already done and recording the one that broke it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from ..process_lifetime import die_with_owner, end_tree, start_owned
from .child_output import stdout_lines
from .problem_process import PACKAGE_ROOT
from .suite import ProblemSpec

ESTIMATE = re.compile(r"^# est\. eager H200: ~([0-9.]+) ms \((.+)\)$", re.MULTILINE)
TARGET_MS = (1.0, 15.0)


def stated_estimate(path: str) -> tuple[float | None, str | None]:
    try:
        with open(path, encoding="utf-8") as handle:
            match = ESTIMATE.search(handle.read())
    except OSError:
        return None, None
    return (float(match.group(1)), match.group(2)) if match else (None, None)


def _measure(spec: ProblemSpec, device: str, reps: int | None) -> dict[str, Any]:
    import torch

    from ..compile import load_problem
    from ..measure.timing import time_callable

    module = load_problem(spec.path)
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs()).eval()

    def make(index: int) -> list[Any]:
        torch.manual_seed(1000 + index)
        with torch.device(device):
            return [v.to(device) if isinstance(v, torch.Tensor) else v for v in module.get_inputs()]

    def eager(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return model(*inputs)

    stats = time_callable(eager, device=device, path="eager", make_inputs=make, reps=reps, input_sets=2)
    return {"median_ms": stats.median_ms, "ci_low_ms": stats.ci_low_ms, "ci_high_ms": stats.ci_high_ms,
            "n": stats.n, "path": stats.path}


def _release_memory(device: str) -> None:
    """The next problem gets the GPU's memory back (inputs here reach several GB)."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _child(payload_path: str) -> int:
    die_with_owner()
    with open(payload_path, encoding="utf-8") as handle:
        payload = json.load(handle)
    device = payload["device"]
    if device == "cpu":
        from ..backends import cpu_triton

        cpu_triton.activate()
    with open(payload["out"], "a", encoding="utf-8") as out:
        for data in payload["problems"]:
            spec = ProblemSpec.from_json(data)
            print(json.dumps({"start": spec.name}), flush=True)
            row: dict[str, Any] = {"name": spec.name, "level": spec.level}
            started = time.perf_counter()
            try:
                row.update(_measure(spec, device, payload.get("reps")))
            except Exception as exc:  # noqa: BLE001 - one bad problem is a row, not the end of the survey
                row["error"] = f"{type(exc).__name__}: {exc}"
            row["wall_s"] = round(time.perf_counter() - started, 3)
            _release_memory(device)
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


def _judge(row: dict[str, Any], spec: ProblemSpec) -> dict[str, Any]:
    estimate, reason = stated_estimate(spec.path)
    row["estimate_ms"], row["estimate_reason"] = estimate, reason
    measured = row.get("median_ms")
    row["within_target"] = measured is not None and TARGET_MS[0] <= measured <= TARGET_MS[1]
    row["measured_over_estimate"] = (measured / estimate) if measured and estimate else None
    return row


def survey_eager(problems: Sequence[ProblemSpec], out_dir: str, device: str = "cuda:0", timeout_s: float = 120.0,
                 per_problem_s: float = 60.0, reps: int | None = None, env: dict[str, str] | None = None,
                 ) -> list[dict[str, Any]]:
    """Time every problem eagerly; rows in suite order, with the estimate and the target verdict."""
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, "eager_survey.jsonl")
    if os.path.exists(out_path):
        os.unlink(out_path)
    rows: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout_s
    remaining = list(problems)
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, child_env.get("PYTHONPATH", "")) if p)
    while remaining and time.monotonic() < deadline:
        payload_path = os.path.join(out_dir, "eager_survey_payload.json")
        with open(payload_path, "w", encoding="utf-8") as handle:
            json.dump({"device": device, "out": out_path, "reps": reps,
                       "problems": [p.to_json() for p in remaining]}, handle)
        current = _run_child(payload_path, deadline, per_problem_s, child_env)
        for line in open(out_path, encoding="utf-8") if os.path.exists(out_path) else []:
            row = json.loads(line)
            rows[row["name"]] = row
        if current is not None and current not in rows:
            rows[current] = {"name": current, "error": "the survey process crashed or hung on this problem"}
        remaining = [p for p in problems if p.name not in rows]
    by_name = {p.name: p for p in problems}
    judged = [_judge(rows[p.name], p) for p in problems if p.name in rows]
    judged += [_judge({"name": p.name, "level": p.level, "error": "not reached within the survey's time"}, p)
               for p in problems if p.name not in rows]
    return [row for row in judged if row["name"] in by_name]


def _run_child(payload_path: str, deadline: float, per_problem_s: float, env: dict[str, str]) -> str | None:
    """Run the survey child until it ends or stalls; returns the problem it was on when it died."""
    process = start_owned([sys.executable, "-m", "kernelopt_core.bench.eager_survey", payload_path],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                          start_new_session=True)
    lines = stdout_lines(process, "eager-survey")
    current: str | None = None
    last_start = time.monotonic()
    ended = False
    while not ended:
        now = time.monotonic()
        if now >= deadline or now - last_start > per_problem_s:
            break
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            ended = True
        elif line.startswith('{"start"'):
            current = json.loads(line)["start"]
            last_start = time.monotonic()
    end_tree(process.pid)  # a stalled survey, or whatever it left running
    process.wait()
    return None if ended and process.returncode == 0 else current


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
