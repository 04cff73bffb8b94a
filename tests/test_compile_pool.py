"""Gate 1's compile pool (issue 25, item 5): a kernel's launch configs compile at once, each in a fresh
contained process, with the same verdicts and registers as one after another; a disk cache answers a
source compiled before (by any candidate, kernel or run) without compiling it again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.gates.compile_cache import CompileCache, keepable, toolchain_identity
from kernelopt_core.gates.ptx_compile import PtxCompiler, _Outcome
from kernelopt_core.gates.static import run_static_gate

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor-h200-torch2.11"

# A launcher-style module and two launch plans: the smallest compile with two configs.
TINY = '''
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)
'''


def _plan(block: int, warps: int) -> dict[str, Any]:
    return {"kernel": "add_one", "constants": {"BLOCK": block}, "num_warps": warps, "num_stages": 1,
            "signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}}


PLANS = [_plan(128, 4), _plan(256, 2)]


def _configs(compiled: dict[str, Any]) -> list[tuple[Any, ...]]:
    keys = ("kwargs", "num_warps", "num_stages", "ok", "stage", "n_regs", "n_spills", "shared_bytes", "error")
    return [tuple(str(c.get(k)) for k in keys) for c in compiled["configs"]]


@pytest.fixture
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELOPT_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_parallel_compiles_give_the_same_verdicts_and_registers_as_serial_ones() -> None:
    graph = parse_output_code(str(H200 / "matmul_bias_relu" / "output_code.py"))
    kernel = graph.kernels[0]  # a pointwise kernel with two launch configs
    broken = kernel.source.replace("tl.arange(0, XBLOCK)", "tl.arange(0, 3)", 1)
    assert broken != kernel.source
    verdicts: dict[int, list[Any]] = {}
    for workers in (1, 2):
        compiler = PtxCompiler(workers=workers, cache=False)
        try:
            verdicts[workers] = [run_static_gate(graph, kernel.name, source, compiler=compiler)
                                 for source in (kernel.source, broken)]
            assert compiler.stats.compiled == 2 * 3  # per module: a count, then a process per config
        finally:
            compiler.close()
    serial, parallel = verdicts[1], verdicts[2]
    assert serial[0].passed and not serial[1].passed, (serial[0].reason, serial[1].reason)
    assert "stopped at frontend" in serial[1].reason
    configs = serial[0].numbers["compile"]["configs"]
    assert len(configs) == 2 and all(isinstance(c["n_regs"], int) and c["n_regs"] > 0 for c in configs)
    for one, other in zip(serial, parallel, strict=True):
        assert (one.passed, one.reason) == (other.passed, other.reason)
        assert _configs(one.numbers["compile"]) == _configs(other.numbers["compile"])
        assert other.numbers["compile"]["containment"]["pid"] > 0  # compiled in a contained process


def test_a_compiles_units_and_a_batch_of_probes_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two units meet at a barrier only if they run at the same time: no clock involved."""
    meeting = threading.Barrier(2, timeout=30)
    seen: list[dict[str, Any]] = []

    def unit(self: PtxCompiler, kernel_name: str, source: str, unit: dict[str, Any], deadline: float) -> _Outcome:
        seen.append(unit)
        try:
            meeting.wait()
        except threading.BrokenBarrierError:
            return _Outcome({"failure": {"ok": False, "stage": "crash", "configs": [], "error": "ran alone"}})
        config = {"ok": True, "stage": "cubin", "n_regs": 8, "n_spills": 0, "shared_bytes": 0}
        return _Outcome({"total": 1, "config": config}, containment={"pid": 1, "contained": True})

    monkeypatch.setattr(PtxCompiler, "_compile_unit", unit)
    compiler = PtxCompiler(workers=2, cache=False)
    try:
        both = compiler.compile("add_one", TINY, launches=PLANS)
        assert both["ok"] and len(both["configs"]) == 2, both
        meeting.reset()
        probes = [compiler.submit("add_one", TINY + f"\n# variant {i}\n", max_configs=1) for i in range(2)]
        assert all(p.result(timeout=60)["ok"] for p in probes)
    finally:
        compiler.close()
    assert [u.get("plan", {}).get("num_warps") for u in seen[:2]] == [4, 2]
    assert seen[2:] == [{"index": 0}, {"index": 0}]  # a probe compiles the first config only, with no count


def test_the_cache_answers_without_compiling_and_a_change_misses(cache_folder: Path) -> None:
    first = PtxCompiler(workers=2)
    try:
        compiled = first.compile("add_one", TINY, launches=PLANS)
        assert compiled["ok"] and compiled["stage"] == "cubin", compiled
        assert first.stats.compiled == 2 and compiled["cache"] == {"hits": 0, "compiled": 2}
    finally:
        first.close()
    assert len(list((cache_folder / "sm90-compile").glob("*.json"))) == 2

    later = PtxCompiler(workers=2)  # another run: nothing in memory, the same cache folder
    try:
        again = later.compile("add_one", TINY, launches=PLANS)
        assert later.stats.compiled == 0 and again["cache"] == {"hits": 2, "compiled": 0}
        assert _configs(again) == _configs(compiled) and again["ok"] and "containment" not in again

        edited = later.compile("add_one", TINY + "\n# edited\n", launches=PLANS)
        assert edited["ok"] and later.stats.compiled == 2  # a changed source misses
        retuned = later.compile("add_one", TINY, launches=[PLANS[0], _plan(256, 8)])
        assert retuned["ok"] and later.stats.compiled == 3  # only the changed config compiles
        assert retuned["cache"] == {"hits": 1, "compiled": 1}
    finally:
        later.close()


def test_the_cache_key_holds_the_config_target_and_toolchain() -> None:
    cache = CompileCache()
    key = cache.key("add_one", TINY, {"plan": PLANS[0]})
    assert key == CompileCache().key("add_one", TINY, {"plan": PLANS[0]})
    assert key != cache.key("add_one", TINY, {"plan": PLANS[1]})
    assert key != cache.key("add_one", TINY, {"index": 0})
    assert key != cache.key("other_name", TINY, {"plan": PLANS[0]})
    identity = toolchain_identity()
    assert identity["target"] == ["cuda", 90, 32] and identity["triton"]
    for change in ({"triton": "0.0.1"}, {"torch": "0.0.1"}, {"target": ["cuda", 100, 32]}):
        assert CompileCache(toolchain={**identity, **change}).key("add_one", TINY, {"plan": PLANS[0]}) != key


def test_only_what_the_candidate_decides_is_kept() -> None:
    cubin = {"ok": True, "stage": "cubin", "n_regs": 20, "n_spills": 0}
    assert keepable({"total": 2, "config": cubin})
    assert keepable({"total": 2})  # a count
    assert keepable({"total": 1, "config": {"ok": False, "stage": "frontend", "error": "arange must be a power of 2"}})
    assert keepable({"failure": {"ok": False, "stage": "import", "error": "fails to load: NameError: x"}})
    assert not keepable({"total": 1, "config": {"ok": True, "stage": "ptx", "note": "ptxas is unavailable"}})
    assert not keepable({"total": 1, "config": {"ok": False, "stage": "ptx", "error": "ptxas fatal"}})
    assert not keepable({"total": 1, "config": {"ok": False, "stage": "frontend", "error": "MemoryError: "}})
    assert not keepable({"failure": {"ok": False, "stage": "crash", "error": "the Triton compile crashed"}})
    assert not keepable({"failure": {"ok": False, "stage": "import", "error": "ModuleNotFoundError: foo"}})
