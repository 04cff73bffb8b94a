"""``kernelopt verify``: exit 0 accepted, 1 rejected, 2 could not run; --json and --events."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from adversarial.corpus import CASES
from adversarial.dumps import compiled_corpus_graphs

from kernelopt_core.artifacts import parse_output_code
from kernelopt_core.cli.main import main
from kernelopt_core.events import parse_event_line

BY_ID = {c.id: c for c in CASES}


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return compiled_corpus_graphs(tmp_path_factory)


def _write_candidate(graphs: dict[str, str], case_id: str, folder: Path) -> tuple[str, str, str]:
    case = BY_ID[case_id]
    graph = parse_output_code(graphs[case.problem])
    kernel = graph.kernels[0]
    path = folder / f"{case_id}.py"
    path.write_text(case.candidate(kernel.source, kernel.name), encoding="utf-8")
    return str(Path(graph.path).parent), kernel.name, str(path)


@pytest.mark.parametrize("problem,args_for,message", [
    ("missing dump", lambda d, k, c: ["/no/such/dump", "--kernel", k, "--candidate", c], "no such file or folder"),
    ("unknown kernel", lambda d, k, c: [d, "--kernel", "triton_nope", "--candidate", c], "no graph under"),
    ("missing candidate", lambda d, k, c: [d, "--kernel", k, "--candidate", "/no/such.py"], "cannot read the candidate"),
    ("bad gates", lambda d, k, c: [d, "--kernel", k, "--candidate", c, "--gates", "1,7"], "--gates takes numbers 1-4"),
])
def test_could_not_run_exits_2(graphs: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               problem: str, args_for, message: str) -> None:
    dump, kernel, candidate = _write_candidate(graphs, "E-xblock64", tmp_path)
    assert main(["verify", *args_for(dump, kernel, candidate)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_empty_candidate_exits_2_with_json(graphs: dict[str, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    dump, kernel, _ = _write_candidate(graphs, "E-xblock64", tmp_path)
    empty = tmp_path / "empty.py"
    empty.write_text("\n", encoding="utf-8")
    assert main(["verify", dump, "--kernel", kernel, "--candidate", str(empty), "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["accepted"] is False and data["failed_gate"] is None and "empty" in data["error"]


def test_rejected_exits_1_with_the_documented_json(graphs: dict[str, str], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dump, kernel, candidate = _write_candidate(graphs, "S-import-subprocess", tmp_path)
    assert main(["verify", dump, "--kernel", kernel, "--candidate", candidate, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["accepted"] is False and data["failed_gate"] == 1
    (gate,) = data["gates"]
    assert gate["gate"] == 1 and gate["passed"] is False and "subprocess" in gate["reason"]


def test_rejected_report_for_people(graphs: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump, kernel, candidate = _write_candidate(graphs, "E-half-store", tmp_path)
    assert main(["verify", dump, "--kernel", kernel, "--candidate", candidate, "--gates", "1,2",
                 "--workdir", str(tmp_path / "work")]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "REJECTED" in out and "unwritten" in out and "keeps the compiler's kernel" in out


def test_accepted_exits_0_and_streams_events(graphs: dict[str, str], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    dump, kernel, candidate = _write_candidate(graphs, "S-xblock16", tmp_path)
    code = main(["verify", dump, "--kernel", kernel, "--candidate", candidate, "--events",
                 "--workdir", str(tmp_path / "work")])
    events = [parse_event_line(line) for line in capsys.readouterr().out.splitlines()]
    assert all(e is not None for e in events), "--events writes nothing but event lines on stdout"
    progress = [e for e in events if e["event"] == "progress"]
    (result,) = [e["result"] for e in events if e["event"] == "result"]
    assert code == 0, result["reason"]
    assert result["accepted"] is True and [g["gate"] for g in result["gates"]] == [1, 2, 3, 4]
    assert {e["extra"].get("gate") for e in progress} >= {1, 2, 3, 4}


def test_the_temporary_folder_goes_with_the_command_and_workdir_keeps_it(
        graphs: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where tempfile puts this process's folders
    dump, kernel, candidate = _write_candidate(graphs, "S-import-subprocess", tmp_path)
    assert main(["verify", dump, "--kernel", kernel, "--candidate", candidate, "--gates", "1"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "re-stitched graph: not kept (pass --workdir DIR to keep it)" in out
    assert list(temp.iterdir()) == []  # the re-stitched graph's folder went with the command
    assert main(["verify", dump, "--kernel", kernel, "--candidate", candidate, "--gates", "1", "--json",
                 "--workdir", str(tmp_path / "work")]) == 1
    kept = json.loads(capsys.readouterr().out)["restitched_path"]
    assert Path(kept).is_file() and Path(kept).is_relative_to(tmp_path / "work")
