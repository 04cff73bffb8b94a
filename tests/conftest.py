"""Shared fixtures: the H200 dumps, and one graph compiled for the CPU Triton backend."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kernelopt_core.artifacts.model import TritonKernel

# The measurement cache and the cross-run experience memory live in the user's cache folder; the tests
# get their own (per process, so pytest-xdist workers never share a SQLite memory or an AVOID list).
if "KERNELOPT_TEST_KEEP_CACHE" not in os.environ:
    import atexit
    import tempfile

    os.environ["KERNELOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelopt-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KERNELOPT_CACHE_DIR"], True)  # nothing outlives the run

# The suite runs examples/gelu_mlp.py at its tiny size, 16 rows, as `kernelopt demo` does on the CPU:
# the interpreter runs one program per row, and this graph's kernel is most of the suite's work (about
# 3 s a call at 64 rows on this machine's cores). Every subprocess inherits the setting;
# KERNELOPT_PROBLEM_SCALE=full runs the suite at 64 rows. Candidates that take all rows in one
# program use XBLOCK=EXAMPLE_ROWS.
os.environ.setdefault("KERNELOPT_PROBLEM_SCALE", "tiny")
EXAMPLE_ROWS = 16 if os.environ["KERNELOPT_PROBLEM_SCALE"] == "tiny" else 64

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200_DUMPS = FIXTURES / "inductor-h200-torch2.11"
H200_GRAPHS = sorted(p.name for p in H200_DUMPS.iterdir() if (p / "output_code.py").is_file())


def one_program_example_candidate(kernel: TritonKernel) -> str:
    """The example's kernel as one program over all its rows: the same arithmetic per row as Inductor's
    program per row (XBLOCK=1), and far fewer interpreter launches. Enough warps that the tile does not
    spill on sm_90: 64 x 256 at 4 warps spills 4.6 KB per thread, and gate 1's compile then takes 26 s
    instead of 2."""
    from kernelopt_core.search.rewrites.kernel_source import (
        LaunchConfig,
        parse_kernel_module,
        with_launch_config,
    )

    return with_launch_config(parse_kernel_module(kernel.source, kernel.name),
                              LaunchConfig.of({"XBLOCK": EXAMPLE_ROWS}, num_warps=EXAMPLE_ROWS // 2))


# The longest test files of `make test`, run first: pytest-xdist hands files to the two workers in
# collection order (the Makefile turns off its own reordering, which puts files with many tests first), so
# a long file collected last would leave one worker idle while the other finishes it. Seconds per file
# from a clean clone's `make test` on 2026-12-06 while another CI run shared the 2 cores (an idle machine
# takes about half); a file not named here runs after these, in collection order.
LONGEST_FIRST = (
    "tests/adversarial/test_adversarial_corpus.py",  # 294
    "tests/test_reduction_families.py",  # 199
    "tests/test_userkernels_sanitize.py",  # 194
    "tests/test_window_families.py",  # 168
    "tests/lsp/test_lsp_user_kernels.py",  # 119
    "tests/test_bench_campaign.py",  # 104
    "tests/test_rewrites.py",  # 97
    "tests/test_gates_cascade.py",  # 85
    "tests/test_spare_candidate.py",  # 78
    "tests/test_level2_families.py",  # 62
    "tests/test_gate_decisions_runs.py",  # 59
    "tests/test_config_changes_cpu.py",  # 58
    "tests/adversarial/test_input_set_probe.py",  # 58
    "tests/test_gates_static_data.py",  # 56
    "tests/test_deploy_runtime.py",  # 52
    "tests/test_bench_hygiene.py",  # 49
    "tests/test_compile_cpu.py",  # 43
    "tests/test_explore_reductions.py",  # 40
    "tests/test_gates_static.py",  # 35
    "tests/test_profile_cli.py",  # 32
    "tests/test_search_pipeline.py",  # 31
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: the order within a file, and among the others, is kept


@pytest.fixture(scope="session")
def h200_dumps() -> Path:
    return H200_DUMPS


_COMPILE_PROBLEMS = """
import glob, json, os, sys
from kernelopt_core.compile import compile_problem
spec = json.loads(sys.argv[1])
found = {}
for name, path in spec["problems"].items():
    out = os.path.join(spec["out"], name)
    compile_problem(path, out, "default", "cpu")
    paths = sorted(glob.glob(os.path.join(out, "torch_compile_debug", "run_*", "torchinductor", "*", "output_code.py")))
    found[name] = paths[-1] if paths else None
print("@compiled-graphs " + json.dumps(found))
"""


def compile_cpu_problems(problems: dict[str, Path], out: Path, **env: str) -> dict[str, str]:
    """Each problem (name -> file) compiled for the CPU backend at the tiny scale, all in one subprocess:
    name -> its output_code.py. ``env``: more of the compile's environment. Raises with the compile's
    stderr where it fails or leaves a problem without a graph."""
    spec = {"problems": {k: str(v) for k, v in problems.items()}, "out": str(out)}
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", "KERNELOPT_PROBLEM_SCALE": "tiny", **env,
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-c", _COMPILE_PROBLEMS, json.dumps(spec)], env=full_env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    line = next((x for x in done.stdout.splitlines() if x.startswith("@compiled-graphs ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"compiling {', '.join(problems)} failed:\n{done.stderr[-4000:]}")
    found = json.loads(line.split(" ", 1)[1])
    if not all(found.values()):
        raise RuntimeError(f"a problem compiled to no graph: {found}")
    return found


def compile_example(problem: Path, out: Path, **environment: str) -> Path:
    """Compile a KernelBench-format problem with the CPU Triton backend in a subprocess (``environment``: extra
    variables for it, e.g. ``TORCHINDUCTOR_PERSISTENT_REDUCTIONS="0"`` for looped reductions)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **environment}
    subprocess.run(
        [sys.executable, "-m", "kernelopt_core.cli.main", "compile", str(problem), "--out", str(out),
         "--device", "cpu"],
        check=True, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    found = sorted(out.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py"))
    assert found, f"no dump written for {problem}"
    return found[0]


def shared_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this run shares (the run's base temp folder), for builds
    that are the same for all of them: each is made once per run, under a lock, not once per worker."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def cpu_example_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """output_code.py of examples/gelu_mlp.py compiled for the CPU Triton backend (once per run)."""
    root = shared_build_dir(tmp_path_factory)
    out, done = root / "cpu_example", root / "cpu_example.done"
    with FileLock(str(root / "cpu_example.lock")):
        if done.is_file():  # built by another worker; tests never modify it
            return Path(done.read_text())
        shutil.rmtree(out, ignore_errors=True)  # a build that failed half-way
        dump = compile_example(ROOT / "examples" / "gelu_mlp.py", out)
        done.write_text(str(dump))
        return dump


def run_watched(command: list[str], *, stall_s: float = 240.0, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a CLI command to its end, however long the work takes, failing only when it stops
    reporting: no line on stdout or stderr for ``stall_s`` seconds. Long commands print a
    progress or heartbeat line at least every 10 s (``kernelopt_core.events.heartbeat``), so the
    budget comes from the work, not from a wall clock that a loaded machine overruns."""
    import threading
    import time

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **kwargs)  # type: ignore[call-overload]
    lines: dict[str, list[str]] = {"out": [], "err": []}
    last = [time.monotonic()]

    def drain(stream: object, key: str) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines[key].append(line)
            last[0] = time.monotonic()

    readers = [threading.Thread(target=drain, args=(process.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(process.stderr, "err"), daemon=True)]
    for reader in readers:
        reader.start()
    while process.poll() is None:
        if time.monotonic() - last[0] > stall_s:
            os.killpg(process.pid, 9)
            process.wait()
            raise AssertionError(f"{' '.join(command[:6])} ... printed nothing for {stall_s:g} s; stderr tail:\n"
                                 + "".join(lines["err"][-20:]))
        time.sleep(0.2)
    for reader in readers:
        reader.join(timeout=10)
    return subprocess.CompletedProcess(command, process.returncode, "".join(lines["out"]), "".join(lines["err"]))


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not), asked of psutil."""
    import psutil

    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def processes_below(root: int) -> dict[int, str]:
    """``root``, every process below it and every member of the sessions they lead, by pid, with their
    command lines (psutil): what must be gone once ``root``'s work is over."""
    import psutil

    found = {root: " ".join(psutil.Process(root).cmdline())}
    found.update({p.pid: " ".join(p.cmdline()) for p in psutil.Process(root).children(recursive=True)})
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getsid(process.pid) in found:
                found[process.pid] = " ".join(process.info["cmdline"] or [])
        except OSError:
            continue
    return found


TINY_SUITE = ROOT / "benchmarks" / "problems" / "tiny"
_COMPILE_TINY_SUITE = """
import glob, json, os, sys
from kernelopt_core.compile import compile_problem
spec = json.loads(sys.argv[1])
found = {}
for name in spec["problems"]:
    out = os.path.join(spec["out"], name)
    compile_problem(os.path.join(spec["dir"], name + ".py"), out, "default", "cpu")
    paths = sorted(glob.glob(os.path.join(out, "torch_compile_debug", "run_*", "torchinductor", "*", "output_code.py")))
    found[name] = paths[-1]
print("@tiny-graphs " + json.dumps(found))
"""


@pytest.fixture(scope="session")
def tiny_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tiny suite compiled for the CPU backend (once per run, in one subprocess)."""
    root = shared_build_dir(tmp_path_factory) / "tiny-suite-dumps"
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "manifest.json"
    with FileLock(str(root / "manifest.lock")):
        if not manifest.is_file():
            spec = {"problems": sorted(p.stem for p in TINY_SUITE.glob("*.py")), "out": str(root),
                    "dir": str(TINY_SUITE)}
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            done = subprocess.run([sys.executable, "-c", _COMPILE_TINY_SUITE, json.dumps(spec)], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=900)
            line = next((x for x in done.stdout.splitlines() if x.startswith("@tiny-graphs ")), None)
            assert done.returncode == 0 and line is not None, done.stderr[-3000:]
            manifest.write_text(line.split(" ", 1)[1])
        return json.loads(manifest.read_text())


@pytest.fixture(autouse=True)
def _sigint_not_left_ignored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves SIGINT ignored in this pytest process would hand the ignoring on to every command
    a later test starts (an ignored signal survives exec), and the Ctrl-C tests would see a CLI deaf to it:
    the full suite showed that on 2026-12-02 (the two Ctrl-C tests failed there, never alone). Put back and
    name the test."""
    yield
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        warnings.warn(f"{request.node.nodeid} left SIGINT ignored in the test process; put back", stacklevel=1)


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """For modules of many small tensors (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``):
    one thread is faster there, and kind to a shared machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
