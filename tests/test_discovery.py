"""Discovery: debug dump folders and Inductor cache-dir files, grouped, linked, de-duplicated, incremental."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import FIXTURES, H200_DUMPS

from kernelopt_core.artifacts import DumpIndex, discover, is_candidate_dump, parse_output_code

OLD_STYLE = FIXTURES / "synthetic" / "call_grid_style.py"
# The two "# kernel path:" comments in OLD_STYLE name these cache files.
POI_FILE = ("kq", "ckqxg3wfwrmu5nd4hh2kh7jv6ql2lpn3d7wkmvhvzxqfhbw3cbry.py")
RED_FILE = ("zz", "czzxbhy2o4q6xkjxtzcmktxm5ukomrahzzh4l7ytjnmxh3qkkl7b.py")
WRAPPER_FILE = ("w3", "cw3fakewrapperhashabcdefghijklmnopqrstuvwxyz0123456789.py")


def _make_cache_dir(root: Path) -> Path:
    cache = root / "inductor_cache"
    graph = parse_output_code(str(OLD_STYLE))
    for (sub, name), kernel in zip((POI_FILE, RED_FILE), graph.kernels, strict=True):
        (cache / sub).mkdir(parents=True, exist_ok=True)
        (cache / sub / name).write_text(kernel.source)  # a cache kernel file is the module source
    (cache / WRAPPER_FILE[0]).mkdir(parents=True, exist_ok=True)
    shutil.copy(OLD_STYLE, cache / WRAPPER_FILE[0] / WRAPPER_FILE[1])
    # Files that are in the cache but are not ours: a C++ kernel, a triton launcher json, a random .py
    (cache / "xx").mkdir()
    (cache / "xx" / "cxxcppkernelabcdefghijklmnopqrstuvwxyz.py").write_text("cpp_fused_add_0 = async_compile.cpp('''x''')\n")
    (cache / "xx" / "notes.py").write_text("print('hello')\n")
    return cache


def _make_debug_dir(root: Path, graphs: list[str]) -> Path:
    run = root / "torch_compile_debug" / "run_2026_01_01_00_00_00_000000-pid_1" / "torchinductor"
    for name in graphs:
        shutil.copytree(H200_DUMPS / name, run / f"model__0_inference_0.{name}")
    return run


def test_candidate_names() -> None:
    assert is_candidate_dump("/a/b/output_code.py")
    assert is_candidate_dump(f"/cache/{POI_FILE[0]}/{POI_FILE[1]}")
    assert not is_candidate_dump(f"/cache/kqq/{POI_FILE[1]}")  # parent must be 2 chars
    assert not is_candidate_dump("/cache/kq/cshort.py")
    assert not is_candidate_dump("/cache/kq/model.py")


def test_cache_dir_wrapper_is_found_and_kernels_linked_to_their_files(tmp_path: Path) -> None:
    cache = _make_cache_dir(tmp_path)
    graphs, problems = discover(str(tmp_path))
    assert problems == []
    (graph,) = graphs  # the kernel files and foreign files are not graphs
    assert graph.path == str(cache / WRAPPER_FILE[0] / WRAPPER_FILE[1])
    assert graph.name == WRAPPER_FILE[1].removesuffix(".py")
    files = [k.kernel_file for k in graph.kernels]
    assert files == [str(cache / POI_FILE[0] / POI_FILE[1]), str(cache / RED_FILE[0] / RED_FILE[1])]


def test_kernel_file_missing_leaves_link_empty(tmp_path: Path) -> None:
    cache = _make_cache_dir(tmp_path)
    (cache / RED_FILE[0] / RED_FILE[1]).unlink()
    (graph,), _ = discover(str(tmp_path))
    assert graph.kernels[0].kernel_file is not None
    assert graph.kernels[1].kernel_file is None
    assert graph.kernels[1].kernel_path is not None  # the comment is still known


def test_debug_dirs_group_per_graph_with_side_files(tmp_path: Path) -> None:
    _make_debug_dir(tmp_path, ["softmax", "attention"])
    graphs, problems = discover(str(tmp_path))
    assert problems == []
    assert [g.name for g in graphs] == ["model__0_inference_0.attention", "model__0_inference_0.softmax"]
    for graph in graphs:
        folder = os.path.dirname(graph.path)
        assert graph.fx_graph_runnable == os.path.join(folder, "fx_graph_runnable.py")
        assert graph.ir_post_fusion == os.path.join(folder, "ir_post_fusion.txt")


def test_identical_wrapper_in_debug_dir_and_cache_counts_once_debug_copy_wins(tmp_path: Path) -> None:
    run = _make_debug_dir(tmp_path, ["rmsnorm"])
    twin = tmp_path / "inductor_cache" / "ab" / "cabcdefghijklmnopqrstuvwxyz0123456789.py"
    twin.parent.mkdir(parents=True)
    shutil.copy(H200_DUMPS / "rmsnorm" / "output_code.py", twin)
    graphs, _ = discover(str(tmp_path))
    (graph,) = graphs
    assert graph.path == str(run / "model__0_inference_0.rmsnorm" / "output_code.py")
    # A different wrapper in the cache is its own graph.
    other = tmp_path / "inductor_cache" / "cd" / "ccdefghijklmnopqrstuvwxyz0123456789ab.py"
    other.parent.mkdir(parents=True)
    shutil.copy(H200_DUMPS / "softmax" / "output_code.py", other)
    graphs, _ = discover(str(tmp_path))
    assert sorted(g.path for g in graphs) == sorted([graph.path, str(other)])


def test_skips_tool_folders(tmp_path: Path) -> None:
    hidden = tmp_path / ".venv" / "lib" / "output_code.py"
    hidden.parent.mkdir(parents=True)
    shutil.copy(H200_DUMPS / "softmax" / "output_code.py", hidden)
    assert discover(str(tmp_path)) == ([], [])


def test_a_single_file_is_read_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "my_graph.py"
    shutil.copy(H200_DUMPS / "softmax" / "output_code.py", path)
    (graph,), problems = discover(str(path))
    assert problems == [] and graph.name == "my_graph"
    assert discover(str(tmp_path / "nope"))[1][0].problem == "no such file or folder"


def test_incremental_update_and_remove(tmp_path: Path) -> None:
    run = _make_debug_dir(tmp_path, ["softmax", "rmsnorm"])
    index = DumpIndex()
    index.scan(str(tmp_path))
    assert len(index.graphs()) == 2
    softmax = run / "model__0_inference_0.softmax" / "output_code.py"
    first = index.graph_at(str(softmax))
    assert first is not None
    # Unchanged file: nothing re-parsed, the same object is kept.
    assert index.update(str(softmax)) is False
    assert index.graph_at(str(softmax)) is first
    # A change (different size) re-parses just that file.
    softmax.write_text(softmax.read_text() + "\n# touched\n")
    assert index.update(str(softmax)) is True
    second = index.graph_at(str(softmax))
    assert second is not None and second is not first and second.text_hash != first.text_hash
    # The file turns bad: the graph goes, a problem naming it comes.
    softmax.write_text("")
    assert index.update(str(softmax)) is True
    assert index.graph_at(str(softmax)) is None
    problem = index.problem_at(str(softmax))
    assert problem is not None and problem.path == str(softmax) and "empty" in problem.problem
    assert [g.name for g in index.graphs()] == ["model__0_inference_0.rmsnorm"]
    # Removal by event, and removal noticed by a re-scan.
    assert index.remove(str(softmax)) is True
    assert index.remove(str(softmax)) is False
    assert index.problems() == []
    rms = run / "model__0_inference_0.rmsnorm" / "output_code.py"
    rms.unlink()
    assert index.update(str(rms)) is True  # a vanished file is dropped
    assert index.graphs() == []
    # New file appears: a single update is enough.
    new = run / "model__0_inference_0.new" / "output_code.py"
    new.parent.mkdir()
    shutil.copy(H200_DUMPS / "transpose" / "output_code.py", new)
    index.update(str(new))
    assert [g.name for g in index.graphs()] == ["model__0_inference_0.new"]


def test_rescan_drops_deleted_files(tmp_path: Path) -> None:
    run = _make_debug_dir(tmp_path, ["softmax", "rmsnorm"])
    index = DumpIndex()
    index.scan(str(tmp_path))
    shutil.rmtree(run / "model__0_inference_0.softmax")
    index.scan(str(tmp_path))
    assert [g.name for g in index.graphs()] == ["model__0_inference_0.rmsnorm"]


def test_kernel_file_linking_follows_incremental_events(tmp_path: Path) -> None:
    cache = _make_cache_dir(tmp_path)
    poi = cache / POI_FILE[0] / POI_FILE[1]
    index = DumpIndex()
    index.scan(str(tmp_path))
    assert index.graphs()[0].kernels[0].kernel_file == str(poi)
    index.remove(str(poi))
    assert index.graphs()[0].kernels[0].kernel_file is None
    index.update(str(poi))
    assert index.graphs()[0].kernels[0].kernel_file == str(poi)
