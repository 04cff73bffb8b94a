"""The device scripts of benchmarks/gpu and their shared helper, on the CPU (the scripts run on the GPU).

Every script imports here and exposes ``run(out_dir)``; each knob it reads is named in its docstring;
benchmarks/gpu/README.md lists it; nothing in the product imports benchmarks/ (the exploration
prototypes least of all). The helper's budget, records, packing, CLI call and capped children are
checked with stand-in clocks and tiny processes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "benchmarks" / "gpu"
NOT_SCRIPTS = {"__init__", "devicescript", "run_all"}
SCRIPTS = sorted(p.stem for p in GPU.glob("*.py") if p.stem not in NOT_SCRIPTS)
PRODUCT = ("kernelopt_core", "kernelopt", "server")
KNOB_READ = re.compile(r"""(?:env_(?:text|list|float|int|flag)|os\.environ\.get)\(\s*["'](KERNELOPT_\w+)["']""")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gpu import devicescript  # noqa: E402 - after the repository root is on sys.path
from benchmarks.gpu.run_all import module_name  # noqa: E402


def test_the_device_scripts_are_there() -> None:
    assert {"measure", "gates", "bench", "optimize", "budget_six", "compile_pool"} <= set(SCRIPTS)
    assert not list(GPU.glob("explore*")), "exploration prototypes live in benchmarks/explore"


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_imports_and_exposes_run(name: str) -> None:
    module = importlib.import_module(f"benchmarks.gpu.{name}")
    assert callable(getattr(module, "run", None)), f"{name}.py has no run(out_dir)"
    first = next(iter(inspect.signature(module.run).parameters.values()))
    assert first.name in ("out_dir", "out") and first.default is inspect.Parameter.empty
    assert module.__doc__ and "run_all.py" in module.__doc__, f"{name}.py: say how run_all.py runs it"


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_knob_a_script_reads_is_in_its_docstring(name: str) -> None:
    source = (GPU / f"{name}.py").read_text()
    doc = ast.get_docstring(ast.parse(source)) or ""
    read = set(KNOB_READ.findall(source))
    if "Budget.from_env" in source:
        read.add("KERNELOPT_GPU_BUDGET_S")
    assert not sorted(k for k in read if k not in doc), f"{name}.py reads knobs its docstring does not name"


def test_the_readme_lists_every_script() -> None:
    readme = (GPU / "README.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)\.py` \|", readme, flags=re.MULTILINE))
    assert listed == set(SCRIPTS)


def _imported_modules(path: Path) -> list[str]:
    """Modules a file imports, statically or through importlib / runpy with a constant name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "spec_from_file_location", "run_path", "run_module", "__import__"):
            names += [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return names


def test_nothing_in_the_product_imports_benchmarks() -> None:
    found = [f"{path.relative_to(ROOT)}: {name}" for package in PRODUCT for path in (ROOT / package).rglob("*.py")
             for name in _imported_modules(path) if name.startswith("benchmarks") or "explore" in name]
    assert not found


def test_no_device_script_imports_an_exploration_prototype() -> None:
    found = [f"{path.name}: {name}" for path in GPU.glob("*.py") for name in _imported_modules(path)
             if "explore" in name]
    assert not found


def test_the_records_the_product_cites_exist() -> None:
    from kernelopt_core.search.rewrites import measured

    for name in ("EXPLORE_REDUCTIONS", "EXPLORE_WINDOWS", "FAMILIES_SOFTMAX", "FAMILIES_CROSS_ENTROPY"):
        assert (ROOT / getattr(measured, name)).is_file(), name


def test_run_all_finds_scripts_and_prototypes_by_name() -> None:
    assert module_name("measure") == "benchmarks.gpu.measure"
    assert module_name("explore/explore_windows") == "benchmarks.explore.explore_windows"
    for name in ("measure", "explore/explore_windows", "explore/explore_reductions"):
        assert importlib.util.find_spec(module_name(name)) is not None


# --- the helper ----------------------------------------------------------------------------------------


def test_budget_with_a_stand_in_clock() -> None:
    now = [100.0]
    budget = devicescript.Budget(60.0, clock=lambda: now[0])
    now[0] = 130.0
    assert budget.elapsed() == 30.0 and budget.left() == 30.0
    assert budget.allows(29.0) and not budget.allows(30.0)


def test_knobs_and_the_budget_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELOPT_GPU_BUDGET_S", "42")
    monkeypatch.setenv("KERNELOPT_TEST_LIST", " a, ,b ")
    monkeypatch.setenv("KERNELOPT_TEST_FLAG", "1")
    assert devicescript.Budget.from_env(300.0).total_s == 42.0
    assert devicescript.env_list("KERNELOPT_TEST_LIST") == ["a", "b"]
    assert devicescript.env_flag("KERNELOPT_TEST_FLAG") and not devicescript.env_flag("KERNELOPT_TEST_UNSET")
    assert devicescript.env_float("KERNELOPT_TEST_UNSET", 1.5) == 1.5 and devicescript.env_int("KERNELOPT_TEST_UNSET", 3) == 3


def test_environment_names_versions_without_importing_triton() -> None:
    env = devicescript.environment("cpu")
    assert env["torch"] and env["triton"] and env["python"] and env["date"].endswith("+00:00")
    line = devicescript.environment_line(env)
    assert f"torch {env['torch']}" in line and f"triton {env['triton']}" in line
    peaks = {"copy_bytes_per_s": 4.243e12, "matmul_flops_per_s": 7.57e14}
    assert devicescript.peaks_line(peaks).startswith("Device peaks: copy 4,243 GB/s")
    assert devicescript.measured_peaks("cpu") is None


def test_a_record_is_json_and_markdown_headed_by_the_environment(tmp_path: Path) -> None:
    env = {"date": "2026-12-01T00:00:00+00:00", "gpu": "NVIDIA H200", "gpu_count": 2, "driver": "580.159.04",
           "torch": "2.11.0+cu130", "triton": "3.6.0", "ncu": "2025.3.1.0", "python": "3.12.3"}
    rows = devicescript.table(("case", "value"), [("a|b", devicescript.cell(None)), ("c", devicescript.cell(1.23456, ".2f"))])
    devicescript.write_record(str(tmp_path), "thing", {"environment": env, "value": 1}, "A thing", rows)
    assert json.loads((tmp_path / "thing.json").read_text())["value"] == 1
    text = (tmp_path / "thing.md").read_text().splitlines()
    assert text[0] == "# A thing"
    assert text[2] == ("2026-12-01T00:00:00+00:00 · 2x NVIDIA H200, driver 580.159.04 · torch 2.11.0+cu130 · "
                       "triton 3.6.0 · ncu 2025.3.1.0 · Python 3.12.3")
    assert "| a/b | - |" in text and "| c | 1.23 |" in text


def test_packing_keeps_text_results_only(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "measure" / "inductor_cache").mkdir(parents=True)
    (work / "measure" / "measure.json").write_text("{}")
    (work / "measure" / "log.txt").write_text("log")
    (work / "measure" / "kernel.so").write_bytes(b"\0" * 10)
    (work / "measure" / "inductor_cache" / "x.json").write_text("{}")
    (work / "measure" / "huge.csv").write_bytes(b"x" * (devicescript.MAX_PACKED_BYTES + 1))
    devicescript.pack_results(str(work), str(tmp_path / "results.tar.gz"))
    with tarfile.open(tmp_path / "results.tar.gz") as tar:
        files = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert files == ["gpu/measure/log.txt", "gpu/measure/measure.json"]


def test_a_cli_call_returns_its_json(tmp_path: Path) -> None:
    dump = ROOT / "tests" / "fixtures" / "inductor-h200-torch2.11" / "softmax" / "output_code.py"
    done = devicescript.kernelopt(["inspect", str(dump)], timeout_s=120, cwd=str(tmp_path))
    assert done.ok, done.why()
    assert done.data["graphs"][0]["kernels"] and (tmp_path / "kernelopt-inspect.log").is_file()
    failed = devicescript.kernelopt(["inspect", str(tmp_path / "missing.py")], timeout_s=120, cwd=str(tmp_path))
    assert not failed.ok and failed.returncode == 2 and "exit 2" in failed.why()


def test_a_capped_child_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"  # deaf to the polite stop: SIGKILL must follow
            # in a session of its own, as the measurement worker is: the session's SIGKILL misses it
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(60)\n")
    began = time.monotonic()
    returncode, wall = devicescript.run_capped([sys.executable, "-c", code], str(tmp_path / "log.txt"), 2.0,
                                               grace_s=0.5)
    assert returncode is None and wall < 30 and time.monotonic() - began < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_campaign_is_seeded_from_an_earlier_one(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier" / "problems" / "level1"
    earlier.mkdir(parents=True)
    (earlier / "a.json").write_text("{}")
    target = tmp_path / "campaign"
    assert devicescript.seed_campaign(str(target), str(tmp_path / "earlier")) == 1
    assert (target / "problems" / "level1" / "a.json").is_file()
    assert devicescript.seed_campaign(str(target), None) == 0
    assert devicescript.seed_campaign(str(target), str(tmp_path / "nowhere")) == 0
    assert os.listdir(target / "problems") == ["level1"]


def test_reverify_applies_a_recorded_diff_by_its_text_and_finds_every_accepted_one() -> None:
    from benchmarks.gpu.reverify_accepted import accepted_diffs, apply_hunks, parse_hunks

    diff = ("--- a/x/output_code.py\n+++ b/x/output_code.py\n@@ -2,3 +2,3 @@\n"
            " a = 1\n-b = 2\n+b = 3\n c = 4\n")
    moved = "header\nextra line\na = 1\nb = 2\nc = 4\n"  # the hunk's line numbers no longer match
    assert apply_hunks(moved, parse_hunks(diff)) == "header\nextra line\na = 1\nb = 3\nc = 4\n"
    with pytest.raises(ValueError, match="occur 0 times"):
        apply_hunks("a = 1\nb = 5\nc = 4\n", parse_hunks(diff))
    with pytest.raises(ValueError, match="occur 2 times"):
        apply_hunks("a = 1\nb = 2\nc = 4\na = 1\nb = 2\nc = 4\n", parse_hunks(diff))
    found = accepted_diffs()
    assert {problem for problem, _ in found} >= {"avg_pool1d", "l2_norm", "layer_norm_16_rows", "softmax_long_rows"}
    assert all(os.path.basename(path).endswith("final.diff") for _, path in found)
