"""Worker jobs of the search: what Inductor chose for each kernel, and kernel-alone timings.

These run inside a :class:`kernelopt_core.measure.worker.Worker` (``"kernelopt_core.search.
kernel_jobs:<function>"``) and import torch inside the functions. Kernel-alone timings rank
candidates inside the beam; they never accept anything (gate 4 does, end to end).
"""

from __future__ import annotations

import traceback
from typing import Any


def _config_json(config: Any) -> dict[str, Any]:
    kwargs = dict(getattr(config, "kwargs", {}) or {})
    return {"blocks": {k: int(v) for k, v in kwargs.items() if isinstance(v, int)},
            "num_warps": int(getattr(config, "num_warps", 4) or 4),
            "num_stages": int(getattr(config, "num_stages", 1) or 1)}


def graph_facts(payload: dict[str, Any]) -> dict[str, Any]:
    """Per kernel: Inductor's launch configs and the kernel-alone time on its captured arguments."""
    from ..gates.launch_capture import capture_launches
    from ..gates.perf import time_kernels
    from ..graph_module import load_graph_module, make_inputs

    device = str(payload["device"])
    module = load_graph_module(str(payload["graph_path"]), device)
    names = [str(n) for n in payload["kernels"]]
    launches, _ = capture_launches(module, names, make_inputs(module, seed=2000), limit=1)
    facts: dict[str, Any] = {}
    for name in names:
        kernel = getattr(module, name)
        configs = [_config_json(c) for c in getattr(kernel, "configs", []) or []]
        # After a run the autotuner keeps the winner's launcher: put the config that runs first.
        launchers = getattr(kernel, "launchers", None) or []
        chosen = _config_json(launchers[0].config) if launchers and hasattr(launchers[0], "config") else None
        if chosen is not None:
            configs = [chosen, *[c for c in configs if c != chosen]]
        launch = next((item for item in launches if item.kernel == name), None)
        entry: dict[str, Any] = {"configs": configs, "launched": launch is not None}
        if launch is not None and payload.get("time", True):
            try:
                # A against itself: the median of both sides is the kernel's time.
                timing = time_kernels(kernel, kernel, launch.args, launch.kwargs, device, payload.get("rounds"))
                entry["ms"] = (timing.a.median_ms + timing.b.median_ms) / 2
            except Exception as exc:  # noqa: BLE001 - a kernel we cannot time is reported, not fatal
                entry["error"] = f"{type(exc).__name__}: {exc}"
        facts[name] = entry
    return {"kernels": facts}


def time_candidates(payload: dict[str, Any]) -> dict[str, Any]:
    """Kernel-alone interleaved A/B of each re-stitched candidate against the baseline kernel."""
    from ..gates.launch_capture import capture_launches
    from ..gates.perf import time_kernels
    from ..graph_module import load_graph_module, make_inputs

    device = str(payload["device"])
    name = str(payload["kernel"])
    baseline = load_graph_module(str(payload["graph_path"]), device)
    launches, _ = capture_launches(baseline, [name], make_inputs(baseline, seed=2000), limit=1)
    if not launches:
        return {"error": f"{name} was not launched by the graph"}
    launch = launches[0]
    out: dict[str, Any] = {}
    for candidate_id, path in dict(payload["candidates"]).items():
        try:
            module = load_graph_module(str(path), device)
            timing = time_kernels(getattr(baseline, name), getattr(module, name), launch.args, launch.kwargs, device,
                                  payload.get("rounds"))
            out[candidate_id] = {"speedup": timing.speedup, "ci": [timing.ci_low, timing.ci_high],
                                 "baseline_ms": timing.a.median_ms, "ms": timing.b.median_ms}
        except Exception as exc:  # noqa: BLE001 - one bad candidate must not lose the others
            out[candidate_id] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    return {"candidates": out}


def compare_kernel_outputs(payload: dict[str, Any]) -> dict[str, Any]:
    """Run each re-stitched candidate's kernel on the baseline's captured launch arguments and report
    the largest difference of its outputs from the baseline kernel's (a quick pre-check for tests and
    diagnostics; gate 2 is the real check)."""
    import torch

    from ..gates.launch_capture import capture_launches, clone_value
    from ..graph_module import load_graph_module, make_inputs

    device = str(payload["device"])
    name = str(payload["kernel"])
    baseline = load_graph_module(str(payload["graph_path"]), device)
    launches, _ = capture_launches(baseline, [name], make_inputs(baseline, seed=int(payload.get("seed", 0))), limit=1)
    if not launches:
        return {"error": f"{name} was not launched by the graph"}
    launch = launches[0]

    def run(kernel: Any) -> list[Any]:
        args = [clone_value(a) for a in launch.args]
        kernel.run(*args, **launch.kwargs)
        return [a for a in args if isinstance(a, torch.Tensor)]

    expected = run(getattr(baseline, name))
    out: dict[str, Any] = {}
    for candidate_id, path in dict(payload["candidates"]).items():
        try:
            got = run(getattr(load_graph_module(str(path), device), name))
            diff = max(((g.double() - e.double()).abs().max().item() if g.numel() else 0.0)
                       for g, e in zip(got, expected, strict=True))
            out[candidate_id] = {"max_abs_diff": diff, "nan": any(bool(torch.isnan(g).any()) for g in got)}
        except Exception as exc:  # noqa: BLE001 - report per candidate
            out[candidate_id] = {"error": f"{type(exc).__name__}: {exc}"}
    return {"candidates": out}
