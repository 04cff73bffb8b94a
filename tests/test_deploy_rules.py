"""The substitution rules, without torch: which kernel may be replaced, and the reason when not."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import H200_DUMPS

from kernelopt_core.accepted import AcceptedEntry, AcceptedStore, entry_from_cascade
from kernelopt_core.artifacts import parse_output_code, source_hash
from kernelopt_core.deploy.substitution import SubstitutionTable, read_header, release

TORCH, TRITON = "2.11.0+cu128", "3.6.0"
PASSED = {"accepted": True, "reason": "all gates passed", "speedup": 1.2, "ci": [1.1, 1.3]}


def kernel_of(graph: str) -> tuple[str, str]:
    parsed = parse_output_code(str(H200_DUMPS / graph / "output_code.py"))
    return parsed.kernels[0].name, parsed.kernels[0].source


def entry_for(graph: str, accepted: str | None = None, **changes: object) -> AcceptedEntry:
    parsed = parse_output_code(str(H200_DUMPS / graph / "output_code.py"))
    kernel = parsed.kernels[0]
    source = accepted or kernel.source.replace("@triton.jit\n", "@triton.jit\n# accepted variant\n", 1)
    entry = entry_from_cascade(parsed, kernel.name, source, PASSED, torch_version=TORCH, triton_version=TRITON,
                               gpu="NVIDIA H200")
    for key, value in changes.items():
        setattr(entry, key, value)
    return entry


def table_of(*entries: AcceptedEntry, torch: str = TORCH, triton: str = TRITON) -> SubstitutionTable:
    table = SubstitutionTable()
    table.add_entries(list(entries), torch, triton)
    return table


def test_exact_match_is_replaced() -> None:
    entry = entry_for("rmsnorm")
    name, source = kernel_of("rmsnorm")
    decision = table_of(entry).decide(name, source)
    assert decision.replace and decision.source == entry.accepted_source and decision.entry is entry


def test_one_character_different_is_not_touched() -> None:
    entry = entry_for("rmsnorm")
    name, source = kernel_of("rmsnorm")
    for changed in (source.replace("4096.0", "4096.1", 1), source + " ", source.replace("xnumel = 8192", "xnumel = 8193")):
        assert changed != source
        decision = table_of(entry).decide(name, changed)
        assert not decision.replace and decision.entry is None
        assert decision.reason == "no accepted entry for this source"


def test_other_torch_or_triton_release_is_skipped_with_a_warning() -> None:
    entry = entry_for("rmsnorm")
    table = table_of(entry, torch="2.12.0")
    assert table.by_hash == {}
    (warning,) = table.skipped
    assert entry.id in warning and "made with torch 2.11.0+cu128 / triton 3.6.0" in warning and "torch 2.12.0" in warning
    assert not table_of(entry, triton="3.7.0").by_hash
    # Only the build tag differs: the same release generates the same code.
    assert table_of(entry, torch="2.11.0+cu126").by_hash
    assert release("2.11.0+cu128") == "2.11.0"


def test_entry_without_passing_gates_is_skipped() -> None:
    entry = entry_for("rmsnorm", gates={"accepted": False, "reason": "gate 4"})
    table = table_of(entry)
    assert not table.by_hash and "no passing gate record" in table.skipped[0]
    assert not table_of(entry_for("rmsnorm", gates=None)).by_hash


def test_accepted_source_must_define_the_kernel_with_the_same_parameters() -> None:
    name, source = kernel_of("rmsnorm")
    renamed = entry_for("rmsnorm", accepted=source.replace(f"def {name}(", "def other_kernel("))
    table = table_of(renamed)
    assert not table.by_hash and f"defines no function {name}" in table.skipped[0]
    fewer = entry_for("rmsnorm", accepted=source.replace("in_ptr1, out_ptr1,", "out_ptr1,", 1).replace(
        "tmp9 = tl.load(in_ptr1", "tmp9 = tl.load(in_ptr0", 1))
    decision = table_of(fewer).decide(name, source)
    assert not decision.replace and "parameters" in decision.reason and decision.entry is fewer


def test_dynamic_shape_kernel_is_left_alone() -> None:
    name, source = kernel_of("rmsnorm")
    dynamic = source.replace("    xnumel = 8192\n", "", 1)  # what Inductor writes for a symbolic size
    entry = entry_for("rmsnorm", original_hash=source_hash(dynamic))  # as if it had been accepted for it
    decision = table_of(entry).decide(name, dynamic)
    assert not decision.replace and "dynamic shapes" in decision.reason and "[[8192, 4096]]" in decision.reason


def test_numels_outside_verified_are_left_alone() -> None:
    name, source = kernel_of("rmsnorm")
    entry = entry_for("rmsnorm", launch_numels=[[4096, 4096]])
    decision = table_of(entry).decide(name, source)
    assert not decision.replace and "numels [8192, 4096] are outside those verified [[4096, 4096]]" in decision.reason
    assert table_of(entry_for("rmsnorm", launch_numels=[])).decide(name, source).replace  # unknown: the hash decides
    assert table_of(entry_for("rmsnorm", launch_numels=[[]])).decide(name, source).replace  # numels were names


def test_accepted_kernel_pinning_other_numels_is_refused() -> None:
    name, source = kernel_of("rmsnorm")
    entry = entry_for("rmsnorm", accepted=source.replace("xnumel = 8192", "xnumel = 4096", 1))
    decision = table_of(entry).decide(name, source)
    assert not decision.replace and "pins numels" in decision.reason


def test_template_kernel_without_numels_is_replaced() -> None:
    parsed = parse_output_code(str(H200_DUMPS / "attention" / "output_code.py"))
    tem = next(k for k in parsed.kernels if k.kind == "tem")
    entry = entry_from_cascade(parsed, tem.name, tem.source + "\n# accepted\n", PASSED,
                               torch_version=TORCH, triton_version=TRITON)
    header = read_header(tem.source, tem.name)
    assert header.numel_params == [] and not header.dynamic
    assert table_of(entry).decide(tem.name, tem.source).replace


def test_newest_entry_for_a_kernel_wins() -> None:
    old = entry_for("rmsnorm", created="2026-01-01T00:00:00+00:00")
    _, source = kernel_of("rmsnorm")
    new = entry_for("rmsnorm", accepted=source.replace("@triton.jit\n", "@triton.jit\n# newer\n", 1),
                    created="2026-02-01T00:00:00+00:00")
    assert table_of(new, old).by_hash[old.original_hash] is new
    assert table_of(old, new).by_hash[old.original_hash] is new


def test_table_from_store_reports_corrupt_and_unreadable(tmp_path: Path) -> None:
    store = AcceptedStore(str(tmp_path / "store"))
    good = entry_for("rmsnorm")
    store.add(good)
    (tmp_path / "store" / "0123456789ab.json").write_text(json.dumps({"kernel_name": "x"}))
    table = SubstitutionTable.from_store(store, TORCH, TRITON)
    assert list(table.by_hash.values())[0].id == good.id
    (warning,) = table.skipped
    assert warning.startswith(f"skipping corrupted accepted entry {tmp_path / 'store' / '0123456789ab.json'}: missing")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    table = SubstitutionTable.from_store(AcceptedStore(str(not_a_folder)), TORCH, TRITON)
    assert table.by_hash == {} and "no kernels will be replaced" in table.skipped[0]
