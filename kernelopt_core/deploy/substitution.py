"""Which accepted kernel may replace a kernel Inductor is loading, and why (or why not).

Pure Python, no torch: the rules are testable on their own and the runtime hook only asks
:meth:`SubstitutionTable.decide`. The rules, in order:

1. the kernel's source hash equals an entry's ``original_hash`` exactly;
2. the entry passed the gates, and was made with this torch and triton release;
3. the accepted source defines the function Inductor will look up, with the same parameters;
4. the kernel is compiled for fixed shapes (every ``*numel`` parameter is pinned to a literal in
   the body) and those numels are the ones the entry was verified on. A kernel compiled for
   dynamic shapes would run on shapes nobody verified: it is left alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ..accepted import AcceptedEntry, AcceptedStore, StoreProblem, StoreUnreadable
from ..artifacts import source_hash

_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)
_SYMBOLIC_PARAM = re.compile(r"^(ks|s|u)\d+$")  # Inductor's names for symbolic sizes


@dataclass
class Decision:
    replace: bool
    reason: str
    entry: AcceptedEntry | None = None
    source: str | None = None  # the source to load: the accepted one when replace, else None


@dataclass
class KernelHeader:
    """What the rules need from a kernel module source: its function and pinned numels."""

    function: str | None
    params: list[str]
    pinned_numels: dict[str, int]
    error: str | None = None

    @property
    def numel_params(self) -> list[str]:
        return [p for p in self.params if p.endswith("numel")]

    @property
    def dynamic(self) -> bool:
        unpinned = [p for p in self.numel_params if p not in self.pinned_numels]
        return bool(unpinned) or any(_SYMBOLIC_PARAM.match(p) for p in self.params)


def read_header(source: str, function: str | None = None) -> KernelHeader:
    """The kernel function's parameters and the numels its body pins (``xnumel = 64``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return KernelHeader(None, [], {}, error=f"does not parse ({exc.msg}, line {exc.lineno})")
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    func = next((f for f in funcs if f.name == function), None) if function else (funcs[0] if funcs else None)
    if func is None:
        return KernelHeader(None, [], {}, error=f"defines no function {function or ''}".rstrip())
    params = [a.arg for a in func.args.args]
    pinned: dict[str, int] = {}
    for stmt in func.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id in params and stmt.targets[0].id.endswith("numel")
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, int)):
            pinned[stmt.targets[0].id] = stmt.value.value
    return KernelHeader(func.name, params, pinned)


@dataclass
class SubstitutionTable:
    """The usable entries of a store, indexed by the hash of the source they replace."""

    by_hash: dict[str, AcceptedEntry] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # one warning per entry (or store) not used
    store_root: str | None = None

    @classmethod
    def from_store(cls, store: AcceptedStore, torch_version: str, triton_version: str) -> SubstitutionTable:
        table = cls(store_root=store.root)
        try:
            entries, problems = store.scan()
        except StoreUnreadable as exc:
            table.skipped.append(f"{exc}; no kernels will be replaced")
            return table
        table.skipped.extend(f"skipping corrupted accepted entry {p}" for p in problems)
        table.add_entries(entries, torch_version, triton_version, problems)
        return table

    def add_entries(self, entries: list[AcceptedEntry], torch_version: str, triton_version: str,
                    problems: list[StoreProblem] | None = None) -> None:
        for entry in entries:
            reason = entry_unusable(entry, torch_version, triton_version)
            if reason is not None:
                self.skipped.append(f"skipping accepted entry {entry.id} ({entry.kernel_name}): {reason}")
                continue
            current = self.by_hash.get(entry.original_hash)
            # Several entries for one kernel: the newest wins (the user accepted it last).
            if current is None or (entry.created, entry.id) > (current.created, current.id):
                self.by_hash[entry.original_hash] = entry

    def decide(self, kernel_name: str, source: str) -> Decision:
        entry = self.by_hash.get(source_hash(source))
        if entry is None:
            return Decision(False, "no accepted entry for this source")
        original = read_header(source, kernel_name)
        if original.error is not None or original.function != kernel_name:
            return Decision(False, f"the kernel being loaded {original.error or 'has another function name'}", entry)
        accepted = read_header(entry.accepted_source, kernel_name)
        if accepted.error is not None:
            return Decision(False, f"entry {entry.id}: the accepted source {accepted.error}", entry)
        if accepted.params != original.params:
            return Decision(False, f"entry {entry.id}: the accepted kernel's parameters {accepted.params} differ "
                                   f"from the original's {original.params}", entry)
        if original.dynamic:
            return Decision(False, f"entry {entry.id}: this kernel is compiled for dynamic shapes; it was verified "
                                   f"only on numels {entry.launch_numels or 'unknown'}", entry)
        pinned = [original.pinned_numels[p] for p in original.numel_params]
        # Launches whose numels the dump wrote as names, not literals, say nothing: the hash decides.
        verified = [launch[:len(pinned)] for launch in entry.launch_numels if len(launch) >= len(pinned)]
        if pinned and verified:
            if pinned not in verified:
                return Decision(False, f"entry {entry.id}: numels {pinned} are outside those verified {verified}", entry)
        if accepted.numel_params and accepted.pinned_numels != original.pinned_numels:
            return Decision(False, f"entry {entry.id}: the accepted kernel pins numels {accepted.pinned_numels}, "
                                   f"the original {original.pinned_numels}", entry)
        return Decision(True, "exact source match, verified shapes", entry, entry.accepted_source)


def entry_unusable(entry: AcceptedEntry, torch_version: str, triton_version: str) -> str | None:
    """Why an entry must not be used in this process, or None."""
    if not entry.gates_passed:
        return "it has no passing gate record"
    if release(entry.torch_version) != release(torch_version) or release(entry.triton_version) != release(triton_version):
        return (f"made with torch {entry.torch_version} / triton {entry.triton_version}, this process has torch "
                f"{torch_version} / triton {triton_version}")
    names = _DEF.findall(entry.accepted_source)
    if entry.kernel_name not in names:
        return f"the accepted source defines no function {entry.kernel_name}"
    return None


def release(version: str) -> str:
    """``2.11.0+cu128`` -> ``2.11.0``: the build tag does not change Inductor's code generation."""
    return version.split("+", 1)[0].strip()
