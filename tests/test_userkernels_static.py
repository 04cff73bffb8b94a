"""A project's own Triton kernels, read without running them: discovery, hints, the kernel module,
applying a candidate back into the file, harness names, the index, the user dialect of gate 1 and
the user-kernel rewrite families. Pure Python: no worker, no torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelopt_core.search.rewrites import FAMILIES, RewriteContext, applicable_families, parse_kernel_module
from kernelopt_core.userkernels import UserKernelError, looks_like_user_kernels, parse_user_kernels
from kernelopt_core.userkernels.dialect import (
    caller_passes,
    candidate_configs,
    check_user_source,
    compile_configs,
)
from kernelopt_core.userkernels.extract import (
    ApplyError,
    ExtractError,
    apply_candidate,
    apply_line_edits,
    candidate_edits,
    extract_kernel_module,
)
from kernelopt_core.userkernels.harness import HarnessError, natural_module, resolve_spec
from kernelopt_core.userkernels.hints import file_hints, kernel_facts
from kernelopt_core.userkernels.index import UserKernelIndex, is_candidate_user_file
from kernelopt_core.userkernels.launcher import launcher_source, signature_types
from kernelopt_core.userkernels.target import TargetError, user_target

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "user_kernels"
FIXTURE = ROOT / "tests" / "fixtures" / "user_kernels" / "scale_kernels.py"

MATMUL = '''
import triton
from triton import language as tl
from triton import Config, jit

CONFIGS = [Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4), Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8)]


@jit
def _tile(a, b):
    return tl.dot(a, b)


@triton.heuristics({"EVEN_K": lambda args: args["K"] % 32 == 0})
@triton.autotune(configs=CONFIGS, key=[])
@jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    a = tl.load(a_ptr + rm[:, None] * K)
    b = tl.load(b_ptr + rn[None, :], mask=rn[None, :] < N, other=0.0)
    acc = _tile(a, b)
    low = tl.dot(a.to(tl.float16), b.to(tl.float16))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc + low)


def matmul(a, b, c):
    M, K = a.shape
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, b.shape[1], K, BLOCK_N=32)
'''


def _file(text: str, name: str = "kernels.py"):
    return parse_user_kernels(name, text)


# --- discovery ---------------------------------------------------------------------------------------


def test_examples_are_found_and_read_without_running_them() -> None:
    softmax = parse_user_kernels(str(EXAMPLES / "softmax.py"))
    kernel = softmax.kernel("softmax_kernel")
    assert kernel is not None and [k.name for k in softmax.kernels] == ["softmax_kernel"]
    assert kernel.runtime_params == ["output_ptr", "input_ptr", "input_row_stride", "output_row_stride", "n_cols"]
    assert kernel.constexprs == ["BLOCK_SIZE"]
    assert [(a.kind, a.masked, a.block) for a in kernel.accesses] == [("load", True, True), ("store", True, True)]
    assert softmax.harness_for("softmax_kernel") == "bench_softmax" and softmax.default_harness == "bench_softmax"
    [site] = kernel.launches
    assert site.function == "softmax" and site.grid == "(n_rows,)" and not site.grid_uses_cdiv
    assert site.kwargs == {"num_warps": "num_warps", "BLOCK_SIZE": "BLOCK_SIZE"}
    assert kernel.caller_passed() == ["num_warps", "BLOCK_SIZE"]

    layer_norm = parse_user_kernels(str(EXAMPLES / "layer_norm.py"))
    kernel = layer_norm.kernel("_layer_norm_fwd_fused")
    assert kernel is not None and kernel.harness == "layer_norm_problem.py"  # the comment right above it
    assert kernel.stored_params() >= {"Y", "Mean", "Rstd"} and {"X", "W", "B"} <= kernel.loaded_params()
    unmasked = [a for a in kernel.accesses if not a.masked]
    assert [(a.kind, a.pointer, a.block) for a in unmasked] == [("store", "Mean + row", False),
                                                                ("store", "Rstd + row", False)]


def test_decorators_configs_helpers_dots_and_aliases() -> None:
    file = _file(MATMUL)
    assert [k.name for k in file.kernels] == ["matmul_kernel"] and [h.name for h in file.helpers] == ["_tile"]
    kernel = file.kernels[0]
    assert kernel.heuristics == ["EVEN_K"] and kernel.helpers == ["_tile"]
    assert kernel.autotune is not None and kernel.autotune.key == [] and kernel.autotune.configs_literal
    assert [c.label() for c in kernel.autotune.configs] == ["BLOCK_M=64, BLOCK_N=64, num_warps=4",
                                                            "BLOCK_M=128, BLOCK_N=64, num_warps=8"]
    assert [d.low_precision_operands for d in file.helpers[0].dots + kernel.dots] == [False, True]
    [site] = kernel.launches
    assert site.grid_uses_cdiv and site.grid.startswith("lambda meta:")  # the name resolved to its lambda


def test_inductor_files_and_plain_python_are_not_user_kernels() -> None:
    assert not looks_like_user_kernels("import torch\nx = 1\n")
    assert not looks_like_user_kernels("@triton.jit\ndef k(): pass\nx = async_compile.triton('k', '')\n")
    assert not looks_like_user_kernels("@triton_heuristics.pointwise()\n@triton.jit\ndef k(): pass\n")
    assert looks_like_user_kernels("import triton\n@triton.jit\ndef k(x): pass\n")
    assert not is_candidate_user_file("/a/b/output_code.py") and not is_candidate_user_file("/a/.venv/x.py")
    with pytest.raises(UserKernelError, match="syntax error"):
        _file("import triton\n@triton.jit\ndef k(:\n")


def test_harness_comments_name_a_kernel_or_the_file() -> None:
    text = ("import triton\n\n# kernelopt: harness=bench_b kernel=b\n# kernelopt: harness=bench_all\n"
            "@triton.jit\ndef a(x):\n    pass\n\n\n@triton.jit\ndef b(x):\n    pass\n"
            "# kernelopt: harness=h kernel=missing\n")
    file = _file(text)
    assert file.harness_for("b") == "bench_b"
    assert file.harness_for("a") == "bench_all" and file.default_harness is None
    assert any("names kernel missing" in w for w in file.warnings)


def test_which_kernels_a_harness_function_reaches_is_read_from_the_source() -> None:
    text = ("import triton\n\n@triton.jit\ndef a(x):\n    pass\n\n@triton.jit\ndef b(x):\n    pass\n\n"
            "@triton.jit\ndef c(x):\n    pass\n\n"
            "LAUNCH_A = a\n\nclass Op:\n    def forward(self, x):\n        LAUNCH_A[(1,)](x)\n\n"
            "def run_b(x):\n    b[(1,)](x)\n\n"
            "# kernelopt: harness=bench_a\n"
            "def bench_a():\n    return Op().forward, (1,)\n\n"  # through a class method and a module alias
            "def bench_b():\n    return run_b, (1,)\n\n"
            "def helper():\n    run_b(1)\n")
    file = _file(text)
    assert file.harness_kernels == {"bench_a": ["a"], "bench_b": ["b"], "helper": ["b"]}
    assert file.pair_functions == ["bench_a", "bench_b"]  # helper returns nothing: not a harness
    assert file.harness_for("a") == "bench_a" and file.harness_for("b") is None  # the default never launches b
    assert file.harness_for("c") == "bench_a"  # c is launched nowhere in the file: the source cannot tell
    assert file.harness_choices("b") == ["bench_b"]


# --- hints ---------------------------------------------------------------------------------------------


def test_hints_name_the_line_and_why() -> None:
    hints = {(h.code, h.severity) for h in file_hints(_file(MATMUL))}
    assert ("unmasked-access", "warning") in hints  # a block load without mask under a cdiv grid
    assert ("autotune-key", "warning") in hints  # two configs, no key
    assert ("dot-precision", "information") in hints  # the fp32 dot in the helper; the fp16 one says nothing
    assert ("default-num-warps", "information") not in hints  # the autotune configs set num_warps
    scale = parse_user_kernels(str(FIXTURE))
    by_kernel = {(h.kernel, h.code, h.severity) for h in file_hints(scale)}
    assert ("copy_kernel", "unmasked-access", "warning") in by_kernel
    assert not [h for h in file_hints(scale) if h.kernel == "scale_kernel"]  # a clean kernel has no hints
    assert not [h for h in file_hints(parse_user_kernels(str(EXAMPLES / "softmax.py")))]


def test_autotune_conflict_stray_keys_and_missing_meta_are_errors() -> None:
    text = ("import triton\nimport triton.language as tl\n\n"
            "@triton.autotune(configs=[triton.Config({'BLOCK': 32, 'X': 1}), triton.Config({'BLOCK': 64})], "
            "key=['nn'])\n@triton.jit\ndef k(p, n, BLOCK: tl.constexpr, OTHER: tl.constexpr):\n"
            "    tl.store(p + tl.arange(0, BLOCK), 1.0, mask=tl.arange(0, BLOCK) < n)\n\n\n"
            "def run(p):\n    k[(1,)](p, 4, BLOCK=16)\n")
    hints = {h.code: h for h in file_hints(_file(text)) if h.severity == "error"}
    assert set(hints) == {"autotune-key", "autotune-config", "autotune-conflict", "missing-meta"}
    assert "Conflicting meta-parameters" in hints["autotune-conflict"].message
    assert "OTHER" in hints["missing-meta"].message


def test_facts_lines() -> None:
    file = parse_user_kernels(str(EXAMPLES / "softmax.py"))
    facts = kernel_facts(file, file.kernels[0])
    assert facts[0].endswith("tl.constexpr: BLOCK_SIZE") and "1 load(s) (1 masked)" in facts[2]
    assert facts[-1] == "launched in softmax() with grid `(n_rows,)` and num_warps=num_warps, BLOCK_SIZE=BLOCK_SIZE"


# --- the kernel module and applying a candidate ------------------------------------------------------------


def test_kernel_module_holds_triton_code_only() -> None:
    module = extract_kernel_module(MATMUL, "matmul_kernel", "mm.py", ["BLOCK_N"])
    assert "# kernelopt: the caller passes BLOCK_N" in module.source
    assert "def _tile(a, b):" in module.source and "def matmul(" not in module.source
    assert "configs=[Config(" in module.source and module.inlined_configs  # the named list written out
    assert "from triton import Config, jit" in module.source
    with pytest.raises(ExtractError, match="plain Python function"):
        extract_kernel_module("import triton\ndef f():\n    return 1\n\n@triton.jit\ndef k(x):\n    f()\n", "k")
    with pytest.raises(ExtractError, match="not a Triton import"):
        extract_kernel_module("import triton\nimport numpy as np\n@triton.jit\ndef k(x):\n    y = np.pi\n", "k")


def test_apply_edits_the_kernel_function_only_and_undoes() -> None:
    text = (EXAMPLES / "softmax.py").read_text()
    module = extract_kernel_module(text, "softmax_kernel", "softmax.py").source
    candidate = module.replace("tl.exp(row_minus_max)", "tl.exp2(row_minus_max * 1.4426950408889634)")
    candidate = candidate.replace("@triton.jit\ndef softmax_kernel", "@triton.jit\ndef softmax_kernel")
    candidate += "\n\n@triton.jit\ndef _unused_helper(x):\n    return x\n"
    candidate = candidate.replace("import triton\n", "import triton\nimport math\n", 1)
    edits = candidate_edits(text, "softmax_kernel", candidate, "softmax.py")
    new = apply_line_edits(text, edits)
    assert "tl.exp2(row_minus_max * 1.4426950408889634)" in new and "import math\n" in new
    assert new.index("def _unused_helper") < new.index("def softmax_kernel")
    assert new.split("def softmax(x):")[1] == text.split("def softmax(x):")[1]  # the wrapper is untouched
    assert parse_user_kernels("softmax.py", new).kernel("softmax_kernel") is not None
    # take the three changes back out by hand: what is left is the user's file, byte for byte
    back = new.replace("@triton.jit\ndef _unused_helper(x):\n    return x\n\n\n", "").replace("import math\n", "", 1)
    assert back == text.replace("tl.exp(row_minus_max)", "tl.exp2(row_minus_max * 1.4426950408889634)")


def test_apply_keeps_a_named_configs_list_and_refuses_what_does_not_fit() -> None:
    module = extract_kernel_module(MATMUL, "matmul_kernel", "mm.py").source
    body_only = module.replace("acc = _tile(a, b)", "acc = _tile(a, b) * 1.0")
    new = apply_candidate(MATMUL, "matmul_kernel", body_only)
    assert "@triton.autotune(configs=CONFIGS, key=[])" in new and "acc = _tile(a, b) * 1.0" in new
    assert apply_candidate(MATMUL, "matmul_kernel", module) == MATMUL.rstrip("\n") + "\n"  # unchanged: no edit
    with pytest.raises(ApplyError, match="defines no function matmul_kernel"):
        candidate_edits(MATMUL, "matmul_kernel", module.replace("def matmul_kernel", "def other"))
    with pytest.raises(ApplyError, match="does not parse"):
        candidate_edits(MATMUL, "matmul_kernel", "def (")


# --- harness names, targets, the index ---------------------------------------------------------------------


def test_harness_specs(tmp_path: Path) -> None:
    kernel_file = tmp_path / "pkg" / "kernels.py"
    kernel_file.parent.mkdir()
    kernel_file.write_text("import triton\n")
    (tmp_path / "pkg" / "problem.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "test_kernels.py").write_text("x = 1\n")
    assert resolve_spec("bench", str(kernel_file)).kind == "function"
    assert resolve_spec("problem.py", str(kernel_file)).kind == "problem"
    assert resolve_spec("test_kernels.py::test_it", str(kernel_file)).kind == "pytest"
    assert resolve_spec("problem.py::make", str(kernel_file)).kind == "function"
    with pytest.raises(HarnessError, match="not found"):
        resolve_spec("missing.py", str(kernel_file))
    with pytest.raises(HarnessError, match="a function name"):
        resolve_spec("problem.py::1x", str(kernel_file))
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert natural_module(str(kernel_file)) == (str(tmp_path), "pkg.kernels")


def test_targets_say_what_is_missing(tmp_path: Path) -> None:
    target = user_target(str(EXAMPLES / "softmax.py"), device="cpu")
    assert target.kernel == "softmax_kernel" and target.harness.name == "bench_softmax"
    graph = target.graph()
    assert graph.path == target.file and graph.kernels[0].source == target.module.source and graph.device == "cpu"
    copy = tmp_path / "k.py"
    copy.write_text((EXAMPLES / "softmax.py").read_text().replace("# kernelopt: harness=bench_softmax\n", ""))
    with pytest.raises(TargetError, match="no harness for softmax_kernel"):
        user_target(str(copy), device="cpu")
    with pytest.raises(TargetError, match="has no zero-argument function of that name"):
        user_target(str(copy), harness="nope", device="cpu")
    with pytest.raises(TargetError, match="no @triton.jit kernel named other"):
        user_target(str(copy), "other", harness="bench_softmax", device="cpu")


def test_harnesses_setting(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "server"))
    from kernelopt_lsp.settings import parse_settings

    settings, problems = parse_settings({"harnesses": {"k.py": "bench", "sub/k.py::kern": "problem.py"}},
                                        root=str(tmp_path))
    assert not problems
    assert settings.harness_for(str(tmp_path / "k.py"), "any") == "bench"
    assert settings.harness_for(str(tmp_path / "sub" / "k.py"), "kern") == "problem.py"
    assert settings.harness_for(str(tmp_path / "sub" / "k.py"), "other") is None
    _, problems = parse_settings({"harnesses": {"k.py": ""}}, root=str(tmp_path))
    assert problems and "kernelopt.harnesses" in problems[0]


def test_index_follows_files(tmp_path: Path) -> None:
    index = UserKernelIndex()
    path = tmp_path / "k.py"
    path.write_text(FIXTURE.read_text())
    (tmp_path / "plain.py").write_text("print('triton')\n")
    assert index.scan(str(tmp_path)) == {str(path)}
    assert [k.name for k in index.file_at(str(path)).kernels] == ["scale_kernel", "copy_kernel"]
    path.write_text("import triton\n")
    os.utime(path, (1, 1))
    assert index.update(str(path)) and index.file_at(str(path)) is None
    path.unlink()
    assert not index.update(str(path)) and not index.knows(str(path))


# --- gate 1, the user dialect (the compile is tested with the worker) -----------------------------------------------


@pytest.mark.parametrize("edit,rule,words", [
    (lambda s: s, None, None),
    (lambda s: s.replace("numerator = tl.exp(row_minus_max)", "import os\n    numerator = tl.exp(row_minus_max)"),
     "forbidden-import", "`import os`"),
    (lambda s: s.replace("tl.exp(row_minus_max)", "torch.exp(row_minus_max)"), "torch", "`torch` used"),
    (lambda s: s.replace("n_cols, BLOCK_SIZE", "n, BLOCK_SIZE"), "contract", "signature changed"),
    (lambda s: s.replace("@triton.jit\ndef", "@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 64})], "
                                             "key=['n_cols'])\n@triton.jit\ndef"), "contract", "passes itself"),
    (lambda s: s + "\n\ndef helper():\n    return 1\n", "top-level", "plain Python"),
    (lambda s: s.replace("@triton.jit\ndef", "@triton.jit\n@triton.autotune(configs=[triton.Config({}, num_stages=2)], "
                                             "key=[])\ndef"), "contract", "directly above its def"),
])
def test_user_dialect(edit, rule, words) -> None:
    text = (EXAMPLES / "softmax.py").read_text()
    original = extract_kernel_module(text, "softmax_kernel", "softmax.py", ["num_warps", "BLOCK_SIZE"]).source
    assert caller_passes(original) == ["num_warps", "BLOCK_SIZE"]
    report = check_user_source(original, "softmax_kernel", edit(original))
    if rule is None:
        assert report.ok, report.findings
    else:
        assert not report.ok and report.findings[0].rule == rule and words in report.findings[0].message


def test_heuristics_lambdas_are_allowed_in_decorators_only() -> None:
    module = extract_kernel_module(MATMUL, "matmul_kernel", "mm.py").source
    assert check_user_source(module, "matmul_kernel", module).ok
    bad = module.replace("acc = _tile(a, b)", "acc = (lambda q: q)(_tile(a, b))")
    assert [f.rule for f in check_user_source(module, "matmul_kernel", bad).findings] == ["forbidden-call"]
    assert candidate_configs(module, "matmul_kernel")[1] == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8}


def test_launcher_and_compile_signature_from_a_plan() -> None:
    plan = {"arguments": [{"param": "x_ptr", "kind": "tensor", "dtype": "torch.float16"},
                          {"param": "n", "kind": "scalar", "value": 3_000_000_000}],
            "positional": [{"arg": 0}, {"arg": 1}], "keywords": {"BLOCK": {"literal": "64"}},
            "pinned": {"keywords": {"BLOCK": {"literal": "64"}, "num_warps": {"literal": "2"}}, "grid": [5]},
            "grid": {"keys": ["BLOCK"], "table": [[[64], [5]], [[128], [3]]]}}
    module = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n" \
             "    pass\n"
    wrapper = launcher_source(module, "k", plan)
    assert "_KO_GRID = _KoTableGrid([\"BLOCK\"], [[[64], [5]], [[128], [3]]])" in wrapper
    assert "def kernelopt_launch(a0, a1):\n    k[_KO_GRID](a0, a1, BLOCK=64)" in wrapper
    pinned = launcher_source(module, "k", plan, pinned=True)
    assert "_ko_base(k)[(5,)](a0, a1, BLOCK=64, num_warps=2)" in pinned
    signature, constants = signature_types(plan, ["x_ptr", "n", "BLOCK"], ["BLOCK"])
    assert signature == {"x_ptr": "*fp16", "n": "i64", "BLOCK": "constexpr"} and constants == {"BLOCK": 64}
    assert compile_configs(module, "k", plan) == [{"kwargs": {}, "num_warps": 2}]


# --- rewrite families ----------------------------------------------------------------------------------------


def _context(module: str, name: str, device: str) -> RewriteContext:
    parsed = parse_kernel_module(module, name)
    return RewriteContext(module=parsed, original=parsed, device=device)


def test_user_families_apply_to_user_kernels_only() -> None:
    scale = extract_kernel_module(FIXTURE.read_text(), "scale_kernel", "scale_kernels.py").source
    status = applicable_families(_context(scale, "scale_kernel", "cpu"))
    assert status["user_autotune"] is None and status["launch_config"] is not None
    [first, *_] = FAMILIES["user_autotune"].variants(_context(scale, "scale_kernel", "cpu"))
    assert "triton.Config({'BLOCK': 64}, num_warps=1)" in first.source and first.title == "autotune blocks x4"
    assert check_user_source(scale, "scale_kernel", first.source).ok
    gpu = FAMILIES["user_autotune"].variants(_context(scale, "scale_kernel", "cuda"))
    assert "triton.Config({'BLOCK': 8}, num_warps=1)" in gpu[0].source  # /2, x1, x2 first on a GPU
    softmax = extract_kernel_module((EXAMPLES / "softmax.py").read_text(), "softmax_kernel", "softmax.py",
                                    ["num_warps", "BLOCK_SIZE"]).source
    assert "wrapper" in FAMILIES["user_autotune"].not_applicable(_context(softmax, "softmax_kernel", "cuda"))
    fast = FAMILIES["user_fast_math"].variants(_context(softmax, "softmax_kernel", "cuda"))
    titles = [v.title for v in fast]
    assert titles == ["exp and log through exp2/log2", "one reciprocal per row statistic", "exp2 and a reciprocal"]
    assert "tl.exp2(row_minus_max * 1.4426950408889634)" in fast[0].source
    assert "softmax_output = numerator * (1.0 / denominator)" in fast[1].source
    assert all(check_user_source(softmax, "softmax_kernel", v.source).ok for v in fast)
    inductor = "@triton_heuristics.pointwise(size_hints={'x': 8})\n@triton.jit\ndef k(x):\n    y = tl.exp(x)\n"
    assert FAMILIES["user_fast_math"].not_applicable(_context(inductor, "k", "cuda")) is not None
