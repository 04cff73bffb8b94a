"""benchmarks/explore/explore_channel_groups.py builds what its device run times: each variant of the
channel_groups launcher for problem 92's H100 statistics kernel compiles for sm_90 here (Triton's front end,
LLVM and the NVPTX back end run without a GPU), and the chunk-length run includes the length the family used
before session 22 (1024 pixels) beside today's even split (993)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.explore.explore_channel_groups import chunk_variants, generated, variants

ROOT = Path(__file__).resolve().parent.parent

_COMPILE = """
import importlib.util, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

name = sys.argv[1]
for index, path in enumerate(sys.argv[2:]):
    text = open(path).read()
    spec = importlib.util.spec_from_file_location(f"variant{index}", path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    fn = getattr(module, name + "_pass0")
    launch = text.split(name + "_pass0[")[1].split(chr(10))[0]
    constants = {k: int(v) for k, v in re.findall(r"(XBLOCK|R0_BLOCK|CHUNK|S|S_BLOCK)=(\\d+)", launch)}
    warps = int(re.search(r"num_warps=(\\d+)", launch).group(1))
    signature = {a: "constexpr" if a in constants else "*fp32" if "ptr" in a else "i32" for a in fn.arg_names}
    compiled = triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps, "num_stages": 1})
    print("@loads", index, compiled.asm["ptx"].count("ld.global"), flush=True)
"""


def test_every_variant_of_problem_92s_launcher_compiles_for_sm90(tmp_path: Path) -> None:
    source, name, (grouping, shape, _) = generated("p92", 0)
    assert (grouping.groups, grouping.per_group, shape.chunks, shape.chunk) == (16, 4, 16, 993)
    chosen = {**variants(source), **chunk_variants(source)}
    assert "CHUNK=1024 (rounded up to the step, before session 22)" in chosen
    assert "grid (chunk, sample)" in chosen and "_pass0[(16, 128)]" in chosen["grid (chunk, sample)"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    env.pop("TRITON_INTERPRET", None)
    paths = []
    for index, text in enumerate(chosen.values()):
        paths.append(tmp_path / f"variant_{index}.py")
        paths[-1].write_text(text.replace("triton_helpers.set_driver_to_gpu()", ""))
    done = subprocess.run([sys.executable, "-c", _COMPILE, name, *map(str, paths)], env=env, capture_output=True,
                          text=True, timeout=600)
    compiled = dict(re.findall(r"@loads (\d+) (\d+)", done.stdout))
    labels = list(chosen)
    assert done.returncode == 0, (labels[len(compiled)] if len(compiled) < len(labels) else "", done.stderr[-2000:])
    # every variant reached PTX, and reads the tensor (hoisting moves only the per-channel loads out of the loop)
    assert len(compiled) == len(labels) and all(int(loads) > 0 for loads in compiled.values())
