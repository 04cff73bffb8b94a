"""A candidate pinned to the original's tuned config on the device: one launcher, no tuning, the same outputs.

    PYTHONPATH=.:server python benchmarks/gpu/pinned_config_check.py OUT_DIR   (or through run_all.py)

Compiles a row softmax (4096 x 65536 fp32, 1 GB in, 1 GB out) with ``mode="max-autotune-no-cudagraphs"``,
loads its graph through ``graph_module`` and runs it (the original tunes: its configs, then coordinate
descent), then loads the reduction kernel's source twice more as a candidate whose body changed (a comment;
its decorators are the original's): left to tune itself on its first launch, pinned after loading
(``sandbox.pinned_config.pin_config``) and loaded pinned (``load_pinned``: only that config compiled), each
to ``gates.tuned_config.original_config`` of the original. For each: the load's and the first launch's
seconds, the launchers after it, whether it tuned, and its outputs against the original's (bitwise). Writes ``pinned_config_check.json`` and ``.md``; changes no GPU setting.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ROWS, COLUMNS = 4096, 65536
# each a fresh load of the kernel's source with a comment added: the third compiles the pinned config alone
LABELS = ("left to tune itself", "pinned after loading", "loaded pinned")


def _output_code(scratch: str) -> str:
    import torch
    from torch._inductor.utils import run_and_get_code

    def softmax(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 1.5, dim=-1)

    x = torch.randn(ROWS, COLUMNS, device="cuda")
    compiled = torch.compile(softmax, mode="max-autotune-no-cudagraphs")
    _, codes = run_and_get_code(compiled, x)
    path = os.path.join(scratch, "output_code.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(codes[0])
    return path


def _first_launch(kernel: Any, launch: Any) -> dict[str, Any]:
    import torch

    from kernelopt_core.gates.launch_capture import clone_value

    tuned: list[str] = []
    for method in ("autotune_to_one_config", "coordinate_descent_tuning"):
        original = getattr(kernel, method, None)
        if original is not None:
            def spy(*args: Any, _original: Any = original, _name: str = method, **kwargs: Any) -> Any:
                tuned.append(_name)
                return _original(*args, **kwargs)
            setattr(kernel, method, spy)
    values = [clone_value(v) for v in launch.args]
    torch.cuda.synchronize()
    begin = time.perf_counter()
    kernel.run(*values, **launch.kwargs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - begin
    config = kernel.launchers[0].config if kernel.launchers else None
    return {"seconds": round(seconds, 3), "launchers": len(kernel.launchers), "tuned_by": tuned,
            "config": str(config), "values": values}


def run(out_dir: str) -> dict[str, Any]:
    import torch
    import triton
    from torch._inductor.async_compile import AsyncCompile

    from kernelopt_core.artifacts import parse_output_code
    from kernelopt_core.gates.launch_capture import capture_launches, clone_value
    from kernelopt_core.gates.tuned_config import original_config, same_config_space
    from kernelopt_core.graph_module import load_graph_module, make_inputs
    from kernelopt_core.sandbox.pinned_config import load_pinned, pin_config

    scratch = tempfile.mkdtemp(prefix="kernelopt-pinned-")
    path = _output_code(scratch)
    graph = parse_output_code(path)
    module = load_graph_module(path, "cuda")
    inputs = make_inputs(module, seed=0)
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "triton": triton.__version__, "shape": [ROWS, COLUMNS], "kernels": []}
    for kernel in graph.kernels:
        launches, _ = capture_launches(module, [kernel.name], [clone_value(v) for v in inputs], limit=1)
        if not launches:
            continue
        launch = launches[0]
        original = getattr(module, kernel.name)
        expected = [clone_value(v) for v in launch.args]
        original.run(*expected, **launch.kwargs)
        torch.cuda.synchronize()
        tuned = original_config(original)
        row: dict[str, Any] = {"kernel": kernel.name, "original_config": tuned,
                               "coordinate_descent": bool(original.inductor_meta.get("coordinate_descent_tuning"))}
        for label in LABELS:
            source = kernel.source + f"\n# a candidate's body: {label}\n"
            row.setdefault("same_config_space", same_config_space(kernel.source, source, kernel.name))
            begin = time.perf_counter()
            alone = load_pinned(kernel.name, source, tuned) if label == LABELS[2] and tuned else None
            if alone is not None:
                candidate, note = alone
            else:
                candidate = AsyncCompile().triton(kernel.name, source, "cuda")
                candidate = candidate.result() if hasattr(candidate, "result") else candidate
                note = pin_config(candidate, tuned) if label != LABELS[0] and tuned else "not pinned"
            load_s = time.perf_counter() - begin
            first = _first_launch(candidate, launch)
            values = first.pop("values")
            first["equal_to_original"] = all(torch.equal(a, b) for a, b in zip(values, expected, strict=True)
                                             if isinstance(a, torch.Tensor))
            row[label] = {"note": note, "load_s": round(load_s, 3), **first}
            del values
        results["kernels"].append(row)
        launch.args.clear()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "pinned_config_check.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)
    lines = [f"# A candidate pinned to the original's tuned config ({results['gpu']}, torch {results['torch']}, "
             f"triton {results['triton']})", "",
             f"Row softmax {ROWS}x{COLUMNS} fp32, max-autotune-no-cudagraphs.", "",
             "| kernel | candidate | load s | first launch s | launchers | tuned by | equal to the original | note |",
             "|---|---|---|---|---|---|---|---|"]
    for row in results["kernels"]:
        for label in LABELS:
            got = row[label]
            lines.append(f"| `{row['kernel']}` | {label} | {got['load_s']} | {got['seconds']} | {got['launchers']} | "
                         f"{', '.join(got['tuned_by']) or '-'} | {got['equal_to_original']} | {got['note']} |")
    with open(os.path.join(out_dir, "pinned_config_check.md"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return results


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "."), indent=2)[:4000])
