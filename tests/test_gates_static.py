"""Gate 1: the source rules (pure Python) and the sm_90 compile (a Triton subprocess, no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.static import check_source, run_static_gate

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"
GRAPHS = sorted(p.name for p in H200.iterdir() if (p / "output_code.py").is_file())


def _kernel(graph: str = "elementwise"):
    g = parse_output_code(str(H200 / graph / "output_code.py"))
    return g, g.kernels[0]


CUDA_CODEGEN = Path(__file__).resolve().parent / "adversarial" / "cuda_codegen"
DUMPS = [H200 / name / "output_code.py" for name in GRAPHS] + sorted(CUDA_CODEGEN.glob("*.output_code.txt"))


@pytest.mark.parametrize("path", DUMPS, ids=[f"{p.parent.name}/{p.name}" for p in DUMPS])
def test_inductor_kernels_pass_the_source_rules(path: Path) -> None:
    graph = parse_output_code(str(path), path.read_text())
    assert graph.kernels
    for kernel in graph.kernels:
        report = check_source(kernel.source, kernel.name, kernel.source)
        assert report.ok, [f.describe() for f in report.findings]
        assert report.dialect == "inductor" and not report.notes


BODY_ANCHOR = "    xoffset = tl.program_id(0) * XBLOCK\n"


def _in_body(line: str):
    return lambda src: src.replace(BODY_ANCHOR, BODY_ANCHOR + "    " + line + "\n", 1)


def _at_top(text: str):
    return lambda src: src.replace("\n@triton_heuristics.", "\n" + text + "\n@triton_heuristics.", 1)


BAD = [
    ("torch call", _in_body("t = torch.zeros(3)"), "torch", "`torch` used"),
    ("extern call", _in_body("t = extern_kernels.mm(a, b)"), "torch", "extern_kernels"),
    ("torch via helpers", _in_body("t = triton_helpers.torch.ones(1)"), "torch", "reaches torch"),
    ("import os", _at_top("import os"), "forbidden-import", "`os`"),
    ("from subprocess", _at_top("from subprocess import run"), "forbidden-import", "subprocess"),
    ("import ctypes", _at_top("import ctypes"), "forbidden-import", "ctypes"),
    ("import threading", _at_top("import threading"), "forbidden-import", "threading"),
    ("import multiprocessing", _at_top("import multiprocessing"), "forbidden-import", "multiprocessing"),
    ("import torch submodule", _at_top("import torch._inductor.runtime.triton_helpers"), "forbidden-import", "torch"),
    ("helpers import of torch", _at_top("from torch._inductor.runtime.triton_helpers import torch"),
     "forbidden-import", "import torch"),
    ("relative import", _at_top("from . import x"), "forbidden-import", "relative"),
    ("star import", _at_top("from triton.language import *"), "forbidden-import", "import *"),
    ("socket name", _in_body("s = socket.socket()"), "forbidden-import", "socket"),
    ("open", _in_body("f = open('/tmp/x')"), "forbidden-call", "file I/O"),
    ("eval", _in_body("f = eval('1')"), "forbidden-call", "eval"),
    ("exec at import", _at_top("exec('x = 1')"), "forbidden-call", "exec"),
    ("compile", _in_body("f = compile('1', 'x', 'eval')"), "forbidden-call", "compile"),
    ("__import__", _in_body("m = __import__('os')"), "forbidden-call", "__import__"),
    ("getattr", _in_body("f = getattr(tl, 'sum')"), "forbidden-call", "getattr"),
    ("setattr", _in_body("setattr(tl, 'x', 1)"), "forbidden-call", "setattr"),
    ("dunder attribute", _in_body("g = tl.sum.__globals__"), "forbidden-call", "__globals__"),
    ("try in kernel", lambda s: s.replace(BODY_ANCHOR, "    try:\n        pass\n    except Exception:\n        pass\n"
                                          + BODY_ANCHOR, 1), "try-except", "try/except"),
    ("try at top", _at_top("try:\n    import math\nexcept ImportError:\n    math = None"), "try-except",
     "try/except"),
    ("global", _in_body("global _seen"), "global-state", "global _seen"),
    ("module list", _at_top("_cache = []"), "global-state", "mutable"),
    ("module dict", _at_top("_cache = dict()"), "global-state", "mutable"),
    ("module set", _at_top("_seen = {1, 2}"), "global-state", "mutable"),
    ("function attribute", lambda s: s + "\ntriton_poi_fused_add_mul_sigmoid_sub_tanh_0.cache = {}\n",
     "global-state", "attribute"),
    ("id caching", _in_body("k = id(in_ptr0)"), "forbidden-call", "identity"),
    ("driver stream", _in_body("s = triton.runtime.driver.active.get_current_stream()"), "forbidden-import",
     "triton.runtime"),
    ("stream attribute", _in_body("s = tl.cuda.Stream()"), "stream", "stream"),
    ("class", _at_top("class Cache:\n    pass"), "top-level", "class Cache"),
    ("top-level call", _at_top("print('hi')"), "forbidden-call", "print"),
]


# Issue 20: ways around a name-based allowlist. Each must be rejected by resolving what the name is.
BYPASSES = [
    ("os through triton_heuristics", _at_top("from torch._inductor.runtime.triton_heuristics import os"),
     "forbidden-import", "triton_heuristics.os"),
    ("os through an alias of triton_heuristics",
     lambda s: _in_body("th.os.system('id')")(_at_top("import torch._inductor.runtime.triton_heuristics as th")(s)),
     "forbidden-import", "triton_heuristics.os"),
    ("builtins through triton_helpers", _in_body("b = triton_helpers.builtins"), "forbidden-import",
     "triton_helpers.builtins"),
    ("triton through triton_helpers", _in_body("d = triton_helpers.triton.runtime.driver"), "forbidden-import",
     "triton_helpers.triton"),
    ("a host function of triton_helpers", _in_body("o = triton_helpers.get_backend_options()"), "forbidden-import",
     "get_backend_options"),
    ("the driver switch inside a kernel", _in_body("triton_helpers.set_driver_to_gpu()"), "forbidden-call",
     "set_driver_to_gpu"),
    ("math imported as tl", lambda s: s.replace("import triton.language as tl", "import math as tl"),
     "forbidden-import", "math.constexpr"),
    ("tl rebound at module level", _at_top("tl = triton_helpers"), "top-level", "not a constant"),
    ("an import rebound", _at_top("triton_helpers = 1"), "top-level", "bound twice"),
    ("a module as a value", _in_body("m = triton_helpers"), "forbidden-import", "used as a value"),
    ("a function through a local", _in_body("f = tl.load\n    v = f(in_ptr0)"), "forbidden-call", "local variable"),
    ("a timer", _in_body("t = tl.extra.cuda.globaltimer()"), "forbidden-import", "globaltimer"),
    ("device_print", _in_body("tl.device_print('x', xmask)"), "forbidden-import", "device_print"),
    ("a nested def", _in_body("def f():\n        pass"), "construct", "nested"),
    ("a comprehension", _in_body("f = [i for i in range(3)]"), "construct", "ListComp"),
    ("an f-string", _in_body("s = f'{xmask!r}'"), "construct", "JoinedStr"),
    ("item assignment", _in_body("xnumel[0] = 1"), "construct", "only names are assigned"),
    ("a dunder through a call result", _in_body("c = tl.program_id(0).to(tl.int32).__class__"), "forbidden-call",
     "__class__"),
    ("__builtins__", _in_body("b = __builtins__"), "forbidden-call", "__builtins__"),
    ("str.format", _in_body("z = 'a'.format(1)"), "forbidden-call", ".format"),
    ("an undecorated function", _at_top("def helper():\n    return 1"), "top-level", "undecorated"),
    ("module-level if", _at_top("if True:\n    x = 1"), "top-level", "If"),
    ("a foreign decorator", lambda s: s.replace("@triton.jit\n", "@functools.lru_cache\n@triton.jit\n"),
     "forbidden-import", "functools"),
    ("code in a default", lambda s: s.replace("xnumel, XBLOCK : tl.constexpr)",
                                              "xnumel, XBLOCK : tl.constexpr, Z=open('/etc/hostname'))"),
     "global-state", "default"),
    ("code in an annotation", lambda s: s.replace("xnumel, XBLOCK", "xnumel: print('x'), XBLOCK"), "top-level",
     "annotation"),
    ("code in filename=", lambda s: s.replace("filename=__file__", "filename=__import__('os').getcwd()"),
     "decorator", "runs code at import"),
    ("code in DeviceProperties", lambda s: s.replace("DeviceProperties(type='cuda'",
                                                     "DeviceProperties(type=open('/etc/hostname').read()"),
     "decorator", "literal keyword"),
    ("code in set()", lambda s: s.replace("set()", "set(open('/etc/hostname'))"), "decorator", "runs code"),
    ("code in @triton.jit(...)", lambda s: s.replace("@triton.jit\n", "@triton.jit(debug=exec('1'))\n"),
     "decorator", "exec"),
    ("** in the decorator", lambda s: s.replace("filename=__file__", "**{'filename': __file__}"), "decorator",
     "hides"),
    ("code in a precomputed grid", lambda s: s.replace(
        "'grid_type': 'Grid1D'", "'grid_type': 'PrecomputedGrid', 'precomputed_grids': [{'config': {'XBLOCK': 128}, "
        "'python': [\"__import__('os').system('id') or 1\", 1, 1], 'cpp': [1, 1, 1]}]"), "decorator",
     "Inductor executes these strings"),
    ("a string config value", lambda s: s.replace("filename=__file__", "filename=__file__, config={'XBLOCK': 'x'}"),
     "decorator", "not a number"),
    ("autotune in a plain candidate", lambda s: s.replace(
        "@triton.jit\n", "@triton.autotune(configs=[triton.Config({'XBLOCK': 64})], key=[])\n@triton.jit\n"),
     "decorator", "launcher modules"),
]


@pytest.mark.parametrize("label,edit,rule,words", BYPASSES, ids=[b[0] for b in BYPASSES])
def test_bypasses_are_resolved_and_rejected(label: str, edit, rule: str, words: str) -> None:
    _, kernel = _kernel()
    candidate = edit(kernel.source)
    assert candidate != kernel.source, "the edit did not apply"
    report = check_source(kernel.source, kernel.name, candidate)
    texts = " | ".join(f"{f.rule}: {f.describe()}" for f in report.findings)
    assert not report.ok, label
    assert rule in {f.rule for f in report.findings}, texts
    assert words in texts, texts
    assert all(f.line for f in report.findings if f.rule != "contract"), texts


def test_an_allowed_module_under_another_name_is_the_same_module() -> None:
    _, kernel = _kernel()
    candidate = kernel.source.replace("import triton.language as tl", "import triton.language as tl\n"
                                      "import triton.language as language").replace("tl.sigmoid(", "language.sigmoid(")
    assert candidate != kernel.source
    assert check_source(kernel.source, kernel.name, candidate).ok


@pytest.mark.parametrize("label,edit,rule,words", BAD, ids=[b[0] for b in BAD])
def test_forbidden_constructs_are_named(label: str, edit, rule: str, words: str) -> None:
    _, kernel = _kernel()
    candidate = edit(kernel.source)
    assert candidate != kernel.source, "the edit did not apply"
    report = check_source(kernel.source, kernel.name, candidate)
    assert not report.ok
    rules = {f.rule for f in report.findings}
    texts = " | ".join(f.describe() for f in report.findings)
    assert rule in rules, texts
    assert words in texts, texts
    assert all(f.line for f in report.findings if f.rule != "contract"), texts


CONTRACT = [
    ("renamed kernel", lambda s, n: s.replace(f"def {n}(", "def other_kernel("), "defines no function named"),
    ("dropped parameter", lambda s, n: s.replace("in_ptr1, ", "", 1), "signature changed"),
    ("reordered parameters", lambda s, n: s.replace("in_ptr0, in_ptr1,", "in_ptr1, in_ptr0,", 1),
     "signature changed"),
    ("pointer dtype", lambda s, n: s.replace("'in_ptr0': '*fp32'", "'in_ptr0': '*fp16'", 1), "changed type"),
    ("no heuristics", lambda s, n: s[:s.index("@triton_heuristics.")] + s[s.index("@triton.jit"):],
     "no @triton_heuristics"),
    ("no jit", lambda s, n: s.replace("@triton.jit\n", ""), "@triton.jit"),
    ("unknown grid", lambda s, n: s.replace("'grid_type': 'Grid", "'grid_type': 'MyGrid", 1), "unknown grid_type"),
]


@pytest.mark.parametrize("label,edit,words", CONTRACT, ids=[c[0] for c in CONTRACT])
def test_launcher_contract(label: str, edit, words: str) -> None:
    _, kernel = _kernel()
    candidate = edit(kernel.source, kernel.name)
    assert candidate != kernel.source
    report = check_source(kernel.source, kernel.name, candidate)
    assert not report.ok
    assert words in " | ".join(f.describe() for f in report.findings)


def test_mutated_args_must_stay_declared() -> None:
    _, kernel = _kernel("attention")
    assert "'mutated_arg_names': ['in_out_ptr0']" in kernel.source
    candidate = kernel.source.replace("'mutated_arg_names': ['in_out_ptr0']", "'mutated_arg_names': []")
    report = check_source(kernel.source, kernel.name, candidate)
    assert "drops in_out_ptr0" in " | ".join(f.describe() for f in report.findings)


def test_syntax_error_names_the_line() -> None:
    _, kernel = _kernel()
    report = check_source(kernel.source, kernel.name, kernel.source + "\ndef broken(:\n")
    assert [f.rule for f in report.findings] == ["syntax"] and report.findings[0].line


def test_local_names_that_shadow_builtins_are_fine() -> None:
    _, kernel = _kernel()
    candidate = _in_body("input = xnumel\n    id = input + 1")(kernel.source)
    assert check_source(kernel.source, kernel.name, candidate).ok


def test_atomics_are_noted_not_rejected() -> None:
    _, kernel = _kernel()
    report = check_source(kernel.source, kernel.name, _in_body("tl.atomic_add(out_ptr0, 1.0)")(kernel.source))
    assert report.ok and report.uses_atomics


def test_gate_compiles_for_sm90() -> None:
    graph, kernel = _kernel("rmsnorm")
    verdict = run_static_gate(graph, kernel.name, kernel.source)
    assert verdict.passed, verdict.reason
    compiled = verdict.numbers["compile"]
    assert compiled["ok"] and compiled["stage"] in ("ptx", "cubin")
    assert all(c["ptx_bytes"] > 1000 and "ptx" in c["stages"] for c in compiled["configs"])
    assert len(compiled["configs"]) == compiled["configs_total"] >= 2


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'triton_per_fused_0' for 'sm_90a'
ptxas info    : Function properties for triton_per_fused_0
    4596 bytes stack frame, 2300 bytes spill stores, 2296 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4596 bytes cumulative stack size
"""


def test_registers_and_spills_are_read_from_the_ptxas_log() -> None:
    from kernelopt_core.gates.sm90_compile import usage_from_ptxas_log

    assert usage_from_ptxas_log(PTXAS_LOG) == {"n_regs": 255, "n_spills": 4596}
    assert usage_from_ptxas_log("") is None  # a cached compile runs no ptxas: the caller assembles once more
    assert usage_from_ptxas_log(PTXAS_LOG.replace("Used 255 registers", "Used registers")) is None


_COMPILE_ONCE = r"""
import json, sys
import kernelopt_core.gates.sm90_compile as sm90_compile
from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.sandbox.zygote import _preload

_preload("compile")  # what the compile zygote does before it forks a compile: no GPU driver needed

def second_ptxas_run(*args, **kwargs):
    raise AssertionError("ptxas ran a second time for the register counts")

sm90_compile.register_usage = second_ptxas_run
graph = parse_output_code(sys.argv[1])
kernel = graph.kernels[0]
print("RESULT " + json.dumps(sm90_compile.compile_source(kernel.name, kernel.source, sys.argv[2])))
"""


def test_the_compile_reads_registers_from_tritons_own_ptxas_run(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # a cold cache: ptxas really runs
    done = subprocess.run([sys.executable, "-c", _COMPILE_ONCE, str(H200 / "rmsnorm" / "output_code.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["ok"] and result["stage"] == "cubin", result
    for config in result["configs"]:
        assert isinstance(config["n_regs"], int) and 0 < config["n_regs"] <= 255, config
        assert config["n_spills"] == 0, config


def test_gate_reports_a_compile_error() -> None:
    graph, kernel = _kernel("elementwise")
    candidate = kernel.source.replace("tl.arange(0, XBLOCK)", "tl.arange(0, 3)", 1)
    assert candidate != kernel.source
    verdict = run_static_gate(graph, kernel.name, candidate)
    assert not verdict.passed
    assert "does not compile for sm_90 (stopped at frontend)" in verdict.reason
    assert "power of 2" in verdict.numbers["compile"]["error"]


def test_gate_names_an_unknown_kernel() -> None:
    graph, _ = _kernel()
    verdict = run_static_gate(graph, "triton_nope", "x = 1\n")
    assert not verdict.passed and "no Triton kernel named triton_nope" in verdict.reason


@pytest.mark.parametrize("junk", ["x = 1\x00\n", "y = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "\ufeff\ud800"])
def test_junk_sources_are_rejected_not_raised(junk: str) -> None:
    _, kernel = _kernel()
    report = check_source(kernel.source, kernel.name, junk)
    assert not report.ok and report.findings[0].rule in ("syntax", "contract")
