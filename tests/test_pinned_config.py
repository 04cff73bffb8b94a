"""A candidate that keeps the original's decorators launches with the config the baseline graph tuned the
original to, and does not tune itself again (gates/tuned_config.py, sandbox/pinned_config.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.tuned_config import same_config_space

# In a fresh process: the CPU backend patches Inductor and Triton process-wide.
PIN_AND_RUN = r'''
import json, sys
from kernelopt_core.graph_module import load_graph_module, make_inputs

dump = sys.argv[1]
module = load_graph_module(dump, "cpu")  # first: it sets up the CPU backend before Triton is imported
import torch
from torch._inductor.async_compile import AsyncCompile
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.launch_capture import capture_launches, clone_value
from kernelopt_core.gates.tuned_config import original_config
from kernelopt_core.sandbox.pinned_config import load_pinned, pin_config
from kernelopt_core.sandbox.process import SandboxProcess
(kernel,) = parse_output_code(dump).kernels
launches, _ = capture_launches(module, [kernel.name], make_inputs(module, seed=0), limit=1)
tuned = original_config(getattr(module, kernel.name))
out = {"tuned": tuned}

def run(candidate):
    values = [clone_value(v) for v in launches[0].args]
    candidate.run(*values, **launches[0].kwargs)
    return values

expected = run(getattr(module, kernel.name))
for label, config in (("own", tuned), ("other", {**tuned, "num_warps": tuned["num_warps"] * 2})):
    candidate = AsyncCompile().triton(kernel.name, kernel.source + "\n# a rewrite of the body\n", "cpu")
    candidate = candidate.result() if hasattr(candidate, "result") else candidate
    note = pin_config(candidate, config)
    def no_tuning(*args, **kwargs):
        raise AssertionError("the pinned kernel tuned itself")
    candidate.autotune_to_one_config = no_tuning
    got = run(candidate)
    same = all(torch.equal(a, b) for a, b in zip(got, expected) if isinstance(a, torch.Tensor))
    ran = candidate.configs[0] if candidate.triton_interpret else candidate.launchers[0].config
    out[label] = {"note": note, "launchers": len(candidate.launchers), "same_outputs": same,
                  "num_warps": ran.num_warps, "kwargs": ran.kwargs}
alone, note = load_pinned(kernel.name, kernel.source + "\n# loaded pinned\n", tuned)
got = run(alone)
out["alone"] = {"note": note, "configs": [c.kwargs for c in alone.configs],
                "same_outputs": all(torch.equal(a, b) for a, b in zip(got, expected) if isinstance(a, torch.Tensor))}
with SandboxProcess.start("cpu", "cpu") as process:
    reply = process.call("load_kernel", name=kernel.name, source=kernel.source, device_str="cpu", tuned_config=tuned)
    out["sandbox"] = reply.get("tuned")
    reply = process.call("load_kernel", name=kernel.name, key="broken", source=kernel.source, device_str="cpu",
                         tuned_config={"kwargs": {"NO_SUCH_BLOCK": 3}, "num_warps": 4})
    out["broken"] = [reply.get("ok"), reply.get("tuned")]
print("RESULT " + json.dumps(out))
'''


def test_the_original_s_tuned_config_is_pinned_in_the_candidate_and_launches_without_tuning(
        cpu_example_dump: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PIN_AND_RUN, str(cpu_example_dump)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT ")).removeprefix("RESULT "))
    assert result["tuned"] and "kwargs" in result["tuned"] and result["tuned"]["num_warps"] >= 1
    own, other = result["own"], result["other"]
    # The CPU interpreter runs a kernel's first config and has no launchers; on a GPU the pinned config is the
    # kernel's one launcher, compiled there when it is not among its own (benchmarks/gpu: the screen's
    # "launch_configs" in gate 2's numbers)
    assert own["note"] == "pinned to the original's tuned config" and own["same_outputs"]
    assert own["num_warps"] == result["tuned"]["num_warps"] and own["kwargs"] == result["tuned"]["kwargs"]
    assert other["same_outputs"] and other["num_warps"] == 2 * own["num_warps"]
    # loaded for the tuned config alone: no other config of the kernel's list is compiled (on a GPU each is a
    # compile of its own)
    assert result["alone"] == {"note": "pinned to the original's tuned config (compiled alone)",
                               "configs": [result["tuned"]["kwargs"]], "same_outputs": True}
    assert result["sandbox"] == "pinned to the original's tuned config (compiled alone)"
    ok, note = result["broken"]  # a config naming other parameters: it loads and tunes itself as before
    assert ok and note == "not pinned: the original's config names other parameters than the candidate's configs"


def test_only_a_candidate_with_the_original_s_decorators_word_for_word_gets_the_config(
        cpu_example_dump: Path) -> None:
    (kernel,) = parse_output_code(str(cpu_example_dump)).kernels
    name, source = kernel.name, kernel.source
    body_changed = source.replace("tl.load(", "tl.load(", 1) + "\n# body only\n"
    assert same_config_space(source, body_changed, name)
    assert "'r0_': 256" in source
    assert not same_config_space(source, source.replace("'r0_': 256", "'r0_': 512", 1), name)  # other size hints
    assert not same_config_space(source, source.replace(f"def {name}(", "def renamed(", 1), name)
    assert not same_config_space(source, "def broken(:\n", name)
