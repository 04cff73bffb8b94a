"""Bad input: one clear message per file naming it, no traceback, the other graphs still reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import H200_DUMPS, ROOT

from kernelopt_core.artifacts import DumpError, discover, parse_output_code
from kernelopt_core.cli.main import main

GOOD = H200_DUMPS / "softmax" / "output_code.py"


def _write_bad_files(root: Path) -> dict[str, tuple[Path, str]]:
    """Each bad case in its own graph folder: name -> (path, words its message must contain)."""
    cases: dict[str, tuple[Path, str]] = {}

    def place(name: str) -> Path:
        path = root / name / "output_code.py"
        path.parent.mkdir(parents=True)
        return path

    p = place("empty")
    p.write_bytes(b"")
    cases["empty"] = (p, "empty")
    p = place("truncated")
    p.write_text(GOOD.read_text()[:5000])  # cut inside the kernel's triple-quoted source
    cases["truncated"] = (p, "truncated")
    p = place("binary")
    p.write_bytes(bytes(range(256)) * 40)
    cases["binary"] = (p, "binary")
    p = place("latin1")
    p.write_bytes("# caf\xe9\nprint(1)\n".encode("latin-1"))
    cases["latin1"] = (p, "not UTF-8")
    p = place("not_inductor")
    p.write_text("import torch\n\ndef call(x):\n    return x + 1\n")
    cases["not_inductor"] = (p, "not an Inductor wrapper")
    p = place("huge")
    with open(p, "wb") as handle:  # 50 MB, written sparsely-fast
        handle.write(b"# " + b"x" * (50 * 1000 * 1000 - 2))
    cases["huge"] = (p, "limit")
    p = place("unreadable")
    if os.geteuid() == 0:
        # root reads chmod-000 files: a dangling symlink is the unreadable file here
        p.symlink_to(root / "does-not-exist.py")
    else:
        shutil.copy(GOOD, p)
        p.chmod(0)
    cases["unreadable"] = (p, "cannot read")
    return cases


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[Path, str]]]:
    """One folder for the module: every bad case plus one good graph (the tests only read it)."""
    tmp_path = tmp_path_factory.mktemp("bad_input")
    cases = _write_bad_files(tmp_path)
    good = tmp_path / "good" / "output_code.py"
    good.parent.mkdir()
    shutil.copy(GOOD, good)
    return tmp_path, cases


def test_each_bad_file_is_one_problem_naming_it(bad_folder: tuple[Path, dict[str, tuple[Path, str]]]) -> None:
    root, cases = bad_folder
    graphs, problems = discover(str(root))
    assert [g.name for g in graphs] == ["good"]
    by_path = {p.path: p for p in problems}
    assert len(problems) == len(cases)
    for name, (path, words) in cases.items():
        problem = by_path[str(path)]
        assert words in problem.problem, (name, problem.problem)
        assert "Traceback" not in problem.problem


def test_parser_raises_only_dump_error_naming_the_file(bad_folder: tuple[Path, dict[str, tuple[Path, str]]]) -> None:
    _, cases = bad_folder
    for _, (path, words) in cases.items():
        with pytest.raises(DumpError) as info:
            parse_output_code(str(path))
        assert str(path) in str(info.value) and words in str(info.value)


def test_truncated_file_problem_carries_the_line(bad_folder: tuple[Path, dict[str, tuple[Path, str]]]) -> None:
    root, cases = bad_folder
    _, problems = discover(str(root))
    (problem,) = [p for p in problems if p.path == str(cases["truncated"][0])]
    assert problem.line is not None
    assert str(problem).startswith(f"{cases['truncated'][0]}:{problem.line + 1}: ")


def test_cli_reports_each_problem_once_and_still_lists_good_graph(
    bad_folder: tuple[Path, dict[str, tuple[Path, str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, cases = bad_folder
    assert main(["inspect", str(root)]) == 0  # something could be read
    out, err = capsys.readouterr()
    assert "good" in out and "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0" in out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == len(cases)
    for path, words in cases.values():
        (line,) = [entry for entry in lines if str(path) in entry]
        assert line.startswith("skipped ") and words in line
    assert "Traceback" not in err


def test_cli_json_lists_problems(bad_folder: tuple[Path, dict[str, tuple[Path, str]]],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    root, cases = bad_folder
    assert main(["inspect", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [g["name"] for g in data["graphs"]] == ["good"]
    assert sorted(p["path"] for p in data["problems"]) == sorted(str(p) for p, _ in cases.values())


def test_cli_exit_code_nonzero_only_when_nothing_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = _write_bad_files(tmp_path)
    assert main(["inspect", str(tmp_path)]) == 2  # nothing could be read: could not run, as in every command
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == len(cases) + 1  # each skipped file, then the error
    assert err[-1].startswith(f"error: no Inductor dumps found under {tmp_path} ({len(cases)} file(s) skipped")
    assert main(["inspect", str(cases["binary"][0])]) == 2  # one bad file named explicitly
    assert "binary" in capsys.readouterr().err
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    assert main(["inspect", str(empty)]) == 2
    assert "no Inductor dumps found" in capsys.readouterr().err


def test_markup_like_text_in_paths_is_printed_verbatim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "[bold]run[red]" / "output_code.py"
    odd.parent.mkdir()
    odd.write_text("")
    assert main(["inspect", str(tmp_path)]) == 2
    assert f"{odd}: file is empty" in capsys.readouterr().err


def test_cli_subprocess_has_no_traceback(bad_folder: tuple[Path, dict[str, tuple[Path, str]]]) -> None:
    root, cases = bad_folder
    done = subprocess.run(
        [sys.executable, "-m", "kernelopt_core.cli.main", "inspect", str(root)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    for path, _ in cases.values():
        assert done.stderr.count(str(path)) == 1
