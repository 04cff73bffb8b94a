"""Gate 2, multi-seed kernel correctness. Runs inside a worker (imports torch inside functions).

The original kernel runs here, in the checker; the candidate runs in its own contained process
(:mod:`kernelopt_core.sandbox`) on exchange buffers this process lays out and inspects. Both run on
the captured launch arguments, fresh random inputs per seed, the input sets (:mod:`.input_sets`,
and :mod:`.structured_input_sets` for a candidate that adds decisions), re-runs that must reproduce
the first result bit for bit, and a run with stale outputs left in the buffers. Every tensor sits
in a guarded allocation and every output is poisoned first (:mod:`kernelopt_core.sandbox.
guarded_buffers`), so unwritten elements and stray reads or writes are caught. The argument values
and both guarded copies (about 3 W for a working set W) are allocated once and reused by every run;
comparisons go chunk by chunk. Tolerance: atol = rtol = 1e-3 for fp32 (and fp64), 1e-2 for
fp16/bf16, exact for integers. The runs in full: docs/gates.md, "Gate 2, multi-seed kernel
correctness".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..artifacts.kernel_arguments import Role
from ..sandbox.guarded_buffers import (
    GuardedTensor,
    bits,
    chunks,
    fill_poison,
    guarded_allocation,
    poison_bits,
)
from .error_structure import MAGNITUDE_RTOL, MagnitudeFloor

KERNEL_TOLERANCE = {"torch.float32": 1e-3, "torch.float64": 1e-3, "torch.float16": 1e-2, "torch.bfloat16": 1e-2}
DISTRIBUTIONS = ("randn", "uniform", "small-ints")
LARGE_MAGNITUDE = {"torch.float16": 100.0, "torch.bfloat16": 100.0}  # others: 1000
MAX_LAUNCHES = 4
MANY_LAUNCHES_BYTES = 256 << 20  # above this working set only the first launch is captured


# --- buffers and runs --------------------------------------------------------------------------


@dataclass
class KernelRun:
    """One side's buffers after a run: guarded tensors by argument index, and what went wrong."""

    guarded: dict[int, GuardedTensor] = field(default_factory=dict)
    error: str | None = None
    problems: list[str] = field(default_factory=list)  # found by the side itself (a launcher's scratch)
    violation: bool = False  # the candidate tried something its process may not do
    could_not_run: bool = False  # the harness failed, not the kernel (e.g. out of memory)


class Side:
    """One kernel's guarded argument buffers, allocated once and refilled for every run."""

    def __init__(self, values: list[Any], roles: list[Role], allocate: Callable[[int], Any] | None = None,
                 device: Any = None):
        """Buffers shaped like ``values`` (tensors, or meta tensors giving only a layout), on ``device``
        (default: each value's own) or in memory ``allocate`` gives."""
        import torch

        self.roles = roles
        self.run = KernelRun()
        self.aliases: dict[int, int] = {}  # argument -> the argument whose buffer it is given (an aliasing run)
        for index, value in enumerate(values):
            if isinstance(value, torch.Tensor):
                where = value.device if device is None else torch.device(device)
                self.run.guarded[index] = guarded_allocation(tuple(value.size()), value.dtype, where,
                                                             tuple(value.stride()), allocate)

    @property
    def nbytes(self) -> int:
        return sum(g.nbytes for g in self.run.guarded.values())

    def fill(self, values: list[Any], outputs: str = "poison") -> None:
        """Copy the inputs in; outputs are poisoned ("poison") or left as they are ("keep")."""
        self.run.error, self.run.problems, self.run.violation, self.run.could_not_run = None, [], False, False
        for index, guarded in self.run.guarded.items():
            guarded.restore_guard()
            if self.roles[index] == "output":
                if outputs == "poison":
                    fill_poison(guarded.view)
            elif not _same_tensor(guarded.view, values[index]):  # the original's inputs are their own source
                guarded.view.copy_(values[index])

    def arguments(self, values: list[Any]) -> list[Any]:
        return [self.run.guarded[self.aliases.get(i, i)].view if i in self.run.guarded else v
                for i, v in enumerate(values)]


def _same_tensor(a: Any, b: Any) -> bool:
    return a is b or (getattr(b, "data_ptr", None) is not None and a.data_ptr() == b.data_ptr()
                      and a.stride() == b.stride() and a.size() == b.size() and a.dtype == b.dtype
                      and a.device == b.device)


def run_original(kernel: Any, side: Side, values: list[Any], kwargs: dict[str, Any], device: str) -> None:
    try:
        kernel.run(*side.arguments(values), **kwargs)
        _synchronize(device)
    except Exception as exc:  # noqa: BLE001 - reported as the original's failure
        side.run.error = f"{type(exc).__name__}: {str(exc)[:2000]}"


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


# --- comparing runs ----------------------------------------------------------------------------


@dataclass
class RunCheck:
    label: str
    problems: list[str] = field(default_factory=list)
    max_abs_diff: float = 0.0
    mismatched: int = 0
    could_not_run: bool = False  # the check itself failed (the verdict is "could not verify")
    violation: bool = False
    figures: dict[str, Any] = field(default_factory=dict)  # error-structure numbers, when measured
    structure_problems: int = 0  # how many of the problems are the error structure's

    @property
    def structure_only(self) -> bool:
        """Failed on the error's structure alone (every element within the tolerance, NaN/Inf in place)."""
        return bool(self.problems) and self.structure_problems == len(self.problems)

    @property
    def passed(self) -> bool:
        return not self.problems

    def cannot_run(self, problem: str) -> RunCheck:
        """The check itself could not run, for this reason (the verdict is "could not verify")."""
        self.problems.append(problem)
        self.could_not_run = True
        return self

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "passed": self.passed, "problems": self.problems,
                "max_abs_diff": self.max_abs_diff, "mismatched": self.mismatched,
                "could_not_run": self.could_not_run, "violation": self.violation, **self.figures}


def _tolerance(dtype: Any) -> float | None:
    return KERNEL_TOLERANCE.get(str(dtype))


class Tally:
    """Figures summed or maximised chunk by chunk on the tensors' device and read with one
    synchronisation at the end (a read per chunk would stall a GPU once per chunk)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def add(self, key: str, value: Any) -> None:
        self._values[key] = value if key not in self._values else self._values[key] + value

    def max(self, key: str, value: Any) -> None:
        import torch

        self._values[key] = value if key not in self._values else torch.maximum(self._values[key], value)

    def read(self) -> dict[str, float]:
        import torch

        if not self._values:
            return {}
        keys = list(self._values)
        numbers = torch.stack([self._values[k].to(torch.float64) for k in keys]).tolist()
        return dict(zip(keys, numbers, strict=True))


def fingerprint(view: Any) -> list[int]:
    """A per-chunk checksum of a tensor's bits (to recognise a buffer left unchanged)."""
    import torch

    sums = []
    for piece in chunks(view):
        raw = bits(piece).to(torch.int64)
        sums.append(raw.sum())
        sums.append(raw.mul_(1000003).remainder_(2_147_483_647).sum())
    if not sums:
        return []
    numbers = torch.stack(sums).tolist()
    return [int(a) ^ (int(b) << 1) for a, b in zip(numbers[0::2], numbers[1::2], strict=True)]


def pairs(a: Any, b: Any) -> Iterator[tuple[Any, Any]]:
    """Matching chunks of two same-shaped tensors (their layouts may differ)."""
    yield from _pairs(a, b)


def _pairs(a: Any, b: Any) -> Iterator[tuple[Any, Any]]:
    by_rows = a.stride() != b.stride() or a.is_contiguous() != b.is_contiguous()
    yield from zip(chunks(a, by_rows=by_rows), chunks(b, by_rows=by_rows), strict=True)


def compare_runs(label: str, original: KernelRun, candidate: KernelRun, values: list[Any], roles: list[Role],
                 names: list[str], poisoned: bool, stale: dict[int, list[int]] | None = None,
                 input_scale: float = 1.0, structure: StructureCheck | None = None,
                 floors: dict[int, MagnitudeFloor] | None = None) -> RunCheck:
    """The candidate's run against the original's on the same arguments, chunk by chunk.

    ``stale`` holds fingerprints of the outputs left in the candidate's buffers before its run:
    outputs that still match them are named as a stale result. ``input_scale`` is how much larger
    than unit scale the inputs were drawn: a correct reordering of a sum over inputs of magnitude s
    has absolute rounding error proportional to s, so the absolute tolerance scales with it.
    ``structure`` also checks the error's structure (:mod:`.error_structure`: a systematic bias, a
    worst element far beyond rounding) on outputs that pass the tolerance. ``floors`` (the magnitude
    sweep) replaces atol/rtol, per floating output it names, by a limit per element taken from the
    original's own outputs at that element's magnitude (:func:`.error_structure.magnitude_floor`).
    """
    check = RunCheck(label)
    if original.error is not None:
        return check.cannot_run(f"the ORIGINAL kernel failed on these arguments ({original.error}); "
                                "the check cannot run")
    if candidate.could_not_run:
        return check.cannot_run(f"the check could not run the candidate: {candidate.error}")
    if candidate.error is not None:
        check.problems.append(f"the candidate failed to run: {candidate.error}")
        check.violation = candidate.violation
        return check
    check.problems.extend(candidate.problems)
    for index, guarded in candidate.guarded.items():
        if not guarded.guard_intact() and original.guarded[index].guard_intact():
            check.problems.append(f"wrote outside {names[index]} (out-of-bounds store: its guard region changed)")
    for index, role in enumerate(roles):
        if index not in candidate.guarded:
            continue
        name = names[index]
        cand = candidate.guarded[index].view
        orig = original.guarded[index].view
        total = cand.numel()
        if role == "input":
            begin = time.perf_counter()
            changed = _count(_pairs(cand, values[index]), lambda c, v: bits(c) != bits(v))
            _add_seconds(check, "inputs_s", begin)
            if changed:
                check.problems.append(f"modified its input {name} ({changed} elements changed)")
            continue
        poison = poison_bits(cand.dtype) if poisoned and role == "output" else None
        tol = _tolerance(cand.dtype)
        if tol is None:
            unwritten = _count(_pairs(cand, orig), _unwritten_mask(poison)) if poison is not None else 0
            if unwritten:
                where = _first_index_pair(cand, orig, _unwritten_mask(poison))
                check.problems.append(f"left {unwritten} of {total} elements of {name} unwritten "
                                      f"(first at index {where})")
                continue
            count = _count(_pairs(cand, orig), lambda c, o: bits(c) != bits(o))
            if count:
                check.mismatched += count
                where = _first_index_pair(cand, orig, lambda c, o: bits(c) != bits(o))
                check.problems.append(f"{count} of {total} elements of {name} differ (exact comparison for "
                                      f"{cand.dtype}; first at index {where})")
            continue
        atol = tol * input_scale
        floor = (floors or {}).get(index)
        figures = _float_figures(cand, orig, poison, atol, tol, floor)
        if figures["unwritten"]:
            where = _first_index_pair(cand, orig, _unwritten_mask(poison))
            check.problems.append(f"left {int(figures['unwritten'])} of {total} elements of {name} unwritten "
                                  f"(first at index {where})")
            continue
        check.max_abs_diff = max(check.max_abs_diff, figures["max_abs_diff"])
        count, nonfinite, lost_nonfinite = int(figures["bad"]), int(figures["nonfinite"]), int(figures["lost"])
        worst_bad = figures["worst_bad"]
        kinds = KindMismatches()
        if count:  # the failure's words: which special values became which (a second pass, failures only)
            for c, o in _pairs(cand, orig):
                kinds.add(c, o)
        swapped = kinds.count(lambda got, want: "finite" not in (got, want))
        if not count:
            if structure is not None:
                begin = time.perf_counter()
                _check_structure(check, name, cand, orig, structure)
                _add_seconds(check, "structure_s", begin)
            continue
        check.mismatched += count
        if stale is not None and index in stale and fingerprint(cand) == stale[index]:
            check.problems.append(f"returned a stale result: {count} of {total} elements of {name} differ and the "
                                  "buffer still holds the previous call's output (the candidate skipped work it "
                                  "must redo)")
            continue
        shape = tuple(cand.shape)
        if nonfinite:
            check.problems.append(f"produced NaN/Inf in {nonfinite} of {total} elements of {name} where the "
                                  f"original is finite ({kinds.describe(shape, lambda g, w: w == 'finite')})")
            continue
        if lost_nonfinite:
            check.problems.append(f"{lost_nonfinite} of {total} elements of {name} are finite where the original "
                                  f"is NaN/Inf ({kinds.describe(shape, lambda g, w: g == 'finite')}): the candidate "
                                  "does not propagate NaN/Inf the way the original does")
            continue
        if swapped:
            # NaN where the original gives +Inf (a compensated sum's inf - inf), or the sign of an Inf
            # flipped: no finite difference to report, so say which special value became which.
            check.problems.append(f"{swapped} of {total} elements of {name} differ in their special values: "
                                  f"{kinds.describe(shape, lambda g, w: 'finite' not in (g, w))}")
            continue
        if floor is not None:
            at = _unravel(int(figures["worst_at"]), shape)
            got, want = figures["worst_got"], figures["worst_want"]
            # a few lost bits is precision; an error of a percent of the value or more is a different result
            relative = abs(got - want) / max(abs(want), 1e-300)
            cause = "precision lost at some magnitudes" if relative < 1e-2 else \
                f"a wrong value ({relative:.2g} of the original's), not rounding"
            check.problems.append(
                f"{count} of {total} elements of {name} differ from the original by more than {floor.factor:g}x its "
                f"own rounding at their magnitude (the worst at index {at}: {figures['worst_got']:.6g} where the "
                f"original has {figures['worst_want']:.6g}, {figures['worst_ratio']:.3g}x the floor "
                f"{figures['worst_floor']:.3g} there): {cause}")
            continue
        where = _first_index_pair(cand, orig, _not_close_mask(atol, tol))
        check.problems.append(f"{count} of {total} elements of {name} differ beyond atol={atol:g}, rtol={tol:g} "
                              f"(max |diff| {worst_bad:.3g}, first at index {where})")
    return check


def unlike_answer(candidate: Side, original: Side, roles: list[Role]) -> None:
    """Change every element of the candidate's outputs that equals the original's (the right answer,
    already computed) to a value that does not: the stale-output run then starts from buffers that are
    wrong at every element, so a candidate that leaves any element alone fails there."""
    import torch

    for index, guarded in candidate.run.guarded.items():
        if roles[index] != "output":
            continue
        for c, o in _pairs(guarded.view, original.run.guarded[index].view):
            same = bits(c) == bits(o)
            if c.dtype == torch.bool:
                other = ~o
            elif c.is_floating_point():
                # -o - 1 differs from o for every finite o but -0.5 (and stays finite); NaN becomes 0
                wide = o.to(torch.float64)
                other = torch.where(wide == -0.5, 1.0, -wide - 1)
                other = torch.where(torch.isnan(wide), 0.0, other).to(c.dtype)
                # a narrow dtype may round -o - 1 back onto o: then 0 (or 1 where o is 0)
                other = torch.where(bits(other) == bits(o), (o == 0).to(c.dtype), other)
            else:
                other = o + 1
            c.copy_(torch.where(same, other, c))


def _unwritten_mask(poison: int | None) -> Callable[[Any, Any], Any]:
    """Elementwise over (candidate, original) chunks: the candidate still holds the poison where the
    original does not (an element the candidate left unwritten)."""
    return lambda c, o: (bits(c) == poison) & (bits(o) != poison)


def _not_close_mask(atol: float, rtol: float) -> Callable[[Any, Any], Any]:
    """Elementwise over (candidate, original) chunks: outside ``torch.isclose`` (NaN equals NaN)."""
    import torch

    return lambda c, o: ~torch.isclose(c, o, atol=atol, rtol=rtol, equal_nan=True)


def _add_seconds(check: RunCheck, key: str, begin: float) -> None:
    """Adds the seconds since ``begin`` to one of the check's figures (where its compare time goes)."""
    check.figures[key] = round(check.figures.get(key, 0.0) + time.perf_counter() - begin, 4)


def _count(pairs: Iterator[tuple[Any, Any]], mask_of: Callable[[Any, Any], Any]) -> int:
    """How many elements ``mask_of`` marks over chunk pairs (one synchronisation)."""
    tally = Tally()
    for c, o in pairs:
        tally.add("n", mask_of(c, o).sum())
    return int(tally.read().get("n", 0))


def _abs_difference(c: Any, o: Any, wide: bool = False) -> Any:
    """|c - o| in float32 (float64 for float64 outputs, or when asked): float64 only where the magnitudes
    need it, the decisions themselves are made in the outputs' own dtype by torch.isclose."""
    import torch

    work = torch.float64 if wide or c.dtype == torch.float64 else torch.float32
    return torch.sub(c.to(work), o).abs_()


def _float_figures(cand: Any, orig: Any, poison: int | None, atol: float, rtol: float,
                   floor: MagnitudeFloor | None = None, fused: bool = True) -> dict[str, float]:
    """Per floating output, over all chunks: unwritten (poison left where the original wrote), bad (not
    isclose, or beyond ``floor``'s limit where both are finite), nonfinite (NaN/Inf where the original is
    finite), lost (finite where it is not), and the largest |diff| over elements finite in both, overall
    and among the bad ones; with a floor, also the element furthest beyond it (``worst_ratio``, its flat
    index, values and floor)."""
    import torch

    if fused:  # one fused pass on a GPU where it applies (fused_tally.py); the same figures
        from .fused_tally import fused_float_figures, fused_floor_figures

        in_one_pass = fused_float_figures(cand, orig, poison, atol, rtol) if floor is None else \
            fused_floor_figures(cand, orig, poison, atol, rtol, floor, MAGNITUDE_RTOL)
        if in_one_pass is not None:
            return in_one_pass

    def tally(wide: bool) -> dict[str, float]:
        sums = Tally()
        offset = 0
        for c, o in _pairs(cand, orig):
            if poison is not None:
                sums.add("unwritten", ((bits(c) == poison) & (bits(o) != poison)).sum())
            c_finite, o_finite = torch.isfinite(c), torch.isfinite(o)
            close = torch.isclose(c, o, atol=atol, rtol=rtol, equal_nan=True)
            diff = _abs_difference(c, o, wide).masked_fill_(~(c_finite & o_finite), 0.0)
            if floor is not None:
                limit = floor.limits(offset, c.numel()).reshape(c.shape)
                both = c_finite & o_finite
                within = (diff <= limit.to(diff.dtype)) | (diff <= MAGNITUDE_RTOL * o.abs().to(diff.dtype))
                close = torch.where(both, within, close)
                ratio = torch.where(both & ~within, diff.double() / (limit.double() / floor.factor), 0.0).reshape(-1)
                at = ratio.argmax()
                sums.max("worst_ratio", ratio[at])
                # the worst element's place and values, kept where this chunk holds the largest ratio so far
                sums.add(f"ratio@{offset}", ratio[at])
                sums.add(f"at@{offset}", at + offset)
                sums.add(f"got@{offset}", c.reshape(-1)[at].double())
                sums.add(f"want@{offset}", o.reshape(-1)[at].double())
                sums.add(f"floor@{offset}", (limit.reshape(-1)[at] / floor.factor).double())
            offset += c.numel()
            sums.max("max_abs_diff", diff.max())
            sums.max("worst_bad", diff.masked_fill_(close, 0.0).max())
            sums.add("bad", close.logical_not_().sum())
            sums.add("nonfinite", (o_finite & ~c_finite).sum())
            sums.add("lost", (c_finite & ~o_finite).sum())
        figures = {"unwritten": 0.0, "bad": 0.0, "nonfinite": 0.0, "lost": 0.0, "max_abs_diff": 0.0,
                   "worst_bad": 0.0}
        figures.update(sums.read())
        if floor is not None:
            _worst_of_chunks(figures)
        return figures

    figures = tally(False)
    if not math.isfinite(figures["max_abs_diff"]):  # |c - o| overflowed float32 between two finite values
        figures = tally(True)
    return figures


def _worst_of_chunks(figures: dict[str, float]) -> None:
    """Fold the per-chunk worst elements (``ratio@offset`` ...) into the one furthest beyond its floor."""
    offsets = [key.split("@")[1] for key in figures if key.startswith("ratio@")]
    best = max(offsets, key=lambda k: figures[f"ratio@{k}"], default=None)
    for name in ("at", "got", "want", "floor"):
        figures[f"worst_{name}"] = figures[f"{name}@{best}"] if best is not None else 0.0
    for key in [k for k in figures if "@" in k]:
        del figures[key]


_KIND_NAMES = ("finite", "NaN", "+Inf", "-Inf")


def _kind_codes(x: Any) -> Any:
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf, per element."""
    import torch

    codes = torch.zeros(x.shape, dtype=torch.int64, device=x.device)
    codes[torch.isnan(x)] = 1
    codes[torch.isposinf(x)] = 2
    codes[torch.isneginf(x)] = 3
    return codes


class KindMismatches:
    """Elements whose kind (finite, NaN, +Inf, -Inf) differs from the original's, by (candidate's kind,
    original's kind): how many, and the first flat index and values of each, chunk by chunk."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.first: dict[tuple[str, str], tuple[int, float, float]] = {}
        self._offset = 0

    def add(self, c: Any, o: Any) -> None:
        import torch

        pair = _kind_codes(c).reshape(-1) * 4 + _kind_codes(o).reshape(-1)
        differ = (pair // 4) != (pair % 4)
        if bool(differ.any()):
            found = torch.bincount(pair[differ], minlength=16)
            for code in torch.nonzero(found).reshape(-1).tolist():
                key = (_KIND_NAMES[code // 4], _KIND_NAMES[code % 4])
                self.counts[key] = self.counts.get(key, 0) + int(found[code])
                if key not in self.first:
                    at = int(torch.nonzero(pair == code)[0, 0])
                    self.first[key] = (self._offset + at, float(c.reshape(-1)[at]), float(o.reshape(-1)[at]))
        self._offset += c.numel()

    def count(self, which: Callable[[str, str], bool]) -> int:
        return sum(n for key, n in self.counts.items() if which(*key))

    def describe(self, shape: tuple[int, ...], which: Callable[[str, str], bool]) -> str:
        """"4 are NaN where the original gives +Inf (first at index (46,))", most frequent first."""
        parts = []
        for (got, want), n in sorted(self.counts.items(), key=lambda item: -item[1]):
            if not which(got, want):
                continue
            flat, got_value, want_value = self.first[(got, want)]
            index = _unravel(flat, shape)
            got_text = got if got != "finite" else f"finite ({got_value:.6g})"
            want_text = want if want != "finite" else f"{want_value:.6g}"
            parts.append(f"{n} {'is' if n == 1 else 'are'} {got_text} where the original gives {want_text} "
                         f"(first at index {index})")
        return "; ".join(parts[:3]) + ("; ..." if len(parts) > 3 else "")


def _unravel(flat: int, shape: tuple[int, ...]) -> str:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return str(tuple(reversed(index)))


def _first_index_pair(a: Any, b: Any, mask_of: Callable[[Any, Any], Any]) -> str:
    import torch

    offset = 0
    for c, o in _pairs(a, b):
        where = torch.nonzero(mask_of(c, o).reshape(-1))
        if len(where):
            flat = offset + int(where[0])
            index = []
            for size in reversed(tuple(a.shape)):
                index.append(flat % size)
                flat //= size
            return str(tuple(reversed(index)))
        offset += c.numel()
    return "?"


def device_chunk(tensor: Any) -> int:
    """Elements per chunk for the input sets and the error structure: larger on a GPU, where each chunk
    is one kernel launch, than on the host."""
    from .chunks import DEFAULT_CHUNK

    return DEFAULT_CHUNK * 16 if getattr(tensor, "is_cuda", False) else DEFAULT_CHUNK


@dataclass
class StructureCheck:
    """How to judge the error's structure of one run's outputs (gate 2 has no float64 reference)."""

    row_length: int | None  # outputs that share one reduction (r0_numel), when the output keeps that dimension
    input_scale: float  # the largest finite magnitude among the kernel's floating inputs
    output_rows: dict[int, int | None] = field(default_factory=dict)  # per output index, when it differs
    # per output name: (max, mean) change of the original's output under one ulp of input rounding
    sensitivity: dict[str, tuple[float, float]] = field(default_factory=dict)


_INT_OF_WIDTH = {2: "int16", 4: "int32", 8: "int64"}


def nudge_last_bit(tensor: Any) -> bool:
    """Move every finite element of a floating ``tensor`` by one ulp, in place (its last mantissa bit
    flipped, up or down as the bit falls); calling it again restores the tensor exactly. False for
    a dtype it cannot nudge. (The structure check's sensitivity; the magnitude floor's is :func:`nudge_up`.)"""
    import torch

    width = _INT_OF_WIDTH.get(tensor.element_size())
    if width is None or not tensor.is_floating_point() or tensor.numel() == 0:
        return False
    from .chunks import flat_pieces

    integers = tensor.view(getattr(torch, width))
    for _, piece in flat_pieces(integers, device_chunk(tensor)):  # views: edited in place
        piece.bitwise_xor_(torch.isfinite(piece.view(tensor.dtype)).to(piece.dtype))
    return True


@dataclass
class Nudge:
    """How to undo :func:`nudge_up` on one tensor: the bits of the elements it left alone, per piece."""

    kept: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # piece's flat start -> (indices, bits)


def nudge_up(tensor: Any) -> Nudge | None:
    """Move every finite non-zero element of a floating ``tensor`` up (towards +inf) by one or two ulps, in
    place, which of the two by a hash of its flat index; :func:`undo_nudge` restores it bit for bit. None
    for a dtype it cannot nudge.

    Up, all of them: a sum's exact value then rises by at least an ulp of its largest term, whatever its
    terms cancel (moved by a flipped bit, x and -x, or two terms and a third, can cancel and hide the
    rounding a reordered sum shows). One or two: the differences of like values move too. Left alone,
    and kept to restore: zeros, and the few values whose move would cross zero or reach infinity."""
    import torch

    if _INT_OF_WIDTH.get(tensor.element_size()) is None or not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    undo = Nudge()
    top = _largest_bits(tensor.dtype)
    for start, piece, step, magnitude, moved, negative in _nudge_pieces(tensor):
        crossing = moved & ((negative & (magnitude <= 2)) | (~negative & (magnitude >= top - 1)))
        if bool(crossing.any()):
            where = crossing.reshape(-1).nonzero().reshape(-1)
            undo.kept[start] = (where, piece.reshape(-1)[where].clone())
        piece.add_(torch.where(moved & ~crossing, torch.where(negative, -step, step), 0).to(piece.dtype))
    return undo


def undo_nudge(tensor: Any, undo: Nudge) -> None:
    """Restore a tensor :func:`nudge_up` moved, bit for bit: each move kept the element's sign, finiteness
    and non-zero magnitude, so the same elements move back; those it left alone get their bits back."""
    import torch

    from .chunks import write_flat

    for start, piece, step, _, moved, negative in _nudge_pieces(tensor):
        piece.sub_(torch.where(moved, torch.where(negative, -step, step), 0).to(piece.dtype))
        if start in undo.kept:
            where, bits = undo.kept[start]
            if piece.is_contiguous():
                piece.view(-1)[where] = bits
            else:
                flat = piece.reshape(-1)  # a copy: written back whole
                flat[where] = bits
                write_flat(piece, flat)


def _nudge_pieces(tensor: Any) -> Iterator[tuple[int, Any, Any, Any, Any, Any]]:
    """Per flat piece of ``tensor`` as integers: (start, piece, step of one or two ulps by a hash of the flat
    index, magnitude bits, finite and non-zero, negative)."""
    import torch

    from .chunks import flat_pieces

    width = tensor.element_size()
    integers = tensor.view(getattr(torch, _INT_OF_WIDTH[width]))
    all_but_sign = (1 << (8 * width - 1)) - 1
    for start, piece in flat_pieces(integers, device_chunk(tensor)):  # views: edited in place
        index = torch.arange(start, start + piece.numel(), device=piece.device, dtype=torch.int64).view(piece.shape)
        step = ((index * 2654435761) >> 15 & 1) + 1
        magnitude = piece.to(torch.int64) & all_but_sign
        moved = torch.isfinite(piece.view(tensor.dtype)) & (magnitude != 0)
        yield start, piece, step, magnitude, moved, piece < 0


def _largest_bits(dtype: Any) -> int:
    """The bits of the dtype's largest finite value, as an integer."""
    import torch

    largest = torch.tensor(torch.finfo(dtype).max, dtype=dtype)
    return int(largest.view(getattr(torch, _INT_OF_WIDTH[largest.element_size()])).item())


def _check_structure(check: RunCheck, name: str, cand: Any, orig: Any, structure: StructureCheck) -> None:
    from .error_structure import error_structure

    if not cand.is_floating_point() or cand.numel() == 0:
        return
    rows = structure.row_length if structure.row_length and cand.numel() % structure.row_length == 0 else None
    figures = error_structure(cand, orig, None, row_length=rows, input_scale=structure.input_scale,
                              chunk=device_chunk(cand), sensitivity=structure.sensitivity.get(name),
                              reduction_length=structure.row_length)
    check.figures.setdefault("error_structure", {})[name] = figures.to_json()
    if not figures.passed:
        check.problems.append(f"{name}: {figures.reason}")
        check.structure_problems += 1


def compare_reruns(label: str, first: KernelRun, again: KernelRun, roles: list[Role], names: list[str],
                   bitwise: bool) -> RunCheck:
    """A re-run of the candidate against its own first run: bit for bit (or at the kernel tolerance)."""
    import torch

    check = RunCheck(label)
    if again.could_not_run:
        return check.cannot_run(f"the check could not re-run the candidate: {again.error}")
    if again.error is not None:
        check.problems.append(f"the candidate failed when run again: {again.error}")
        return check
    for index, role in enumerate(roles):
        if role in ("input", "scalar") or index not in first.guarded:
            continue
        a, b = first.guarded[index].view, again.guarded[index].view
        sums = Tally()
        for x, y in _pairs(a, b):
            if bitwise:
                differ = bits(x) != bits(y)
            else:
                tol = _tolerance(x.dtype) or 0.0
                differ = ~torch.isclose(x, y, atol=tol, rtol=tol, equal_nan=True)
            sums.add("count", differ.sum())
            if x.is_floating_point():
                finite = differ & torch.isfinite(x) & torch.isfinite(y)
                sums.max("worst", _abs_difference(x, y, True).masked_fill_(~finite, 0.0).max())
        figures = sums.read()
        count, worst = int(figures.get("count", 0)), figures.get("worst", 0.0)
        if count:
            check.mismatched += count
            kinds = KindMismatches()
            if a.is_floating_point():
                for x, y in _pairs(a, b):
                    kinds.add(y, x)
            # NaN/Inf that changed have no finite difference: say which became which, not "max |diff| 0"
            change = (kinds.describe(tuple(a.shape), lambda g, w: True).replace("the original", "the first run")
                      + (f"; max |diff| {worst:.3g} among the finite" if worst else "")) if kinds.counts \
                else f"max |diff| {worst:.3g}"
            check.problems.append(f"nondeterministic: re-running on the same inputs changed {count} elements of "
                                  f"{names[index]} ({change}); order-dependent atomics or races")
    return check


# --- argument sets -----------------------------------------------------------------------------


def draw_arguments(values: list[Any], roles: list[Role], seed: int, distribution: str) -> None:
    """Fresh floating-point inputs drawn IN PLACE into ``values`` (outputs and integers untouched)."""
    import torch

    generators: dict[str, Any] = {}
    for value, role in zip(values, roles, strict=True):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or role == "output":
            continue
        device = value.device
        generator = generators.get(str(device))
        if generator is None:
            # not the seed itself: the graph's own inputs come from torch.manual_seed(seed) and would repeat
            generator = generators[str(device)] = torch.Generator(device=device).manual_seed(
                (seed * 1_000_003 + 0x9E3779B9) % (2**63 - 1))
        if distribution not in ("randn", "uniform", "small-ints", "large"):
            raise ValueError(f"unknown distribution {distribution!r}")
        if str(value.dtype) in _DRAWN_IN_PLACE:
            _draw_in_place(value, distribution, generator)
            continue
        for piece in chunks(value):  # other floating dtypes (float8): a float32 chunk at a time, then rounded
            data = torch.empty(tuple(piece.shape), dtype=torch.float32, device=device)
            _draw_in_place(data, distribution, generator, LARGE_MAGNITUDE.get(str(value.dtype), 1000.0))
            piece.copy_(data.to(value.dtype))


_DRAWN_IN_PLACE = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")  # by str(dtype)


def _draw_in_place(tensor: Any, distribution: str, generator: Any, scale: float | None = None) -> None:
    """Draw into ``tensor`` itself (any layout, no temporary): the random ops write in its own dtype."""
    if distribution == "randn":
        tensor.normal_(0.0, 1.0, generator=generator)
    elif distribution == "uniform":
        tensor.uniform_(-3.0, 5.0, generator=generator)
    elif distribution == "small-ints":
        tensor.random_(-8, 9, generator=generator)
    else:
        tensor.normal_(0.0, scale if scale is not None else LARGE_MAGNITUDE.get(str(tensor.dtype), 1000.0),
                       generator=generator)


def random_arguments(values: list[Any], roles: list[Role], seed: int, distribution: str) -> list[Any]:
    """Fresh copies of ``values`` with new floating-point inputs (for tests and small sets)."""
    import torch

    out = [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
    draw_arguments(out, roles, seed, distribution)
    return out


def distribution_label(distribution: str) -> str:
    return {"randn": "randn", "uniform": "uniform in [-3, 5)", "small-ints": "small integers in [-8, 8] as floats",
            "large": "large magnitude (randn x 1000, x 100 for fp16/bf16)"}[distribution]


@dataclass
class ExtraSet:
    """One more run of gate 2's battery (an input set, or the aliasing run): fills the inputs in place;
    named in the verdict."""

    label: str
    fill: Callable[[list[Any], list[Role]], None]
    input_scale: float = 1.0
    error_structure: bool = True  # False where outputs amplify rounding without bound (constant rows)
    # "tolerance": atol/rtol and the error structure; "magnitude": each element against a floor taken from
    # the original's own outputs at its magnitude (the magnitude sweep, whose scales span 60 decades)
    comparison: str = "tolerance"
    aliases: dict[int, int] = field(default_factory=dict)  # argument -> the argument whose buffer it shares


INPUT_SET_SEED = 7
INPUT_SEED_STEP = 7919  # each floating input's seed is the input set's seed plus this times its position


def _floating_inputs(values: list[Any], roles: list[Role]) -> list[int]:
    return [i for i, (value, role) in enumerate(zip(values, roles, strict=True))
            if role in ("input", "inout") and hasattr(value, "is_floating_point") and value.is_floating_point()]


# Input sets compared element by element against the original's own rounding at each output's magnitude: their
# values span many decades within one tensor (the sweep), or mix the candidate's constants, of any size, with
# unit values, so that a tolerance scaled to the largest input would hide a wrong unit-sized output.
INPUT_SETS_BY_MAGNITUDE = frozenset({"magnitude-sweep", "offset-sweep", "constants"})


def all_input_sets(dtype: Any, reduction: bool, row_length: int | None, seed: int = INPUT_SET_SEED,
                input_sets: Sequence[Any] | None = None, constants: tuple[float, ...] = ()) -> list[ExtraSet]:
    """Gate 2's input sets (:mod:`.input_sets`, or ``input_sets``) for a kernel whose inputs are
    ``dtype``. Each floating input gets its own draw (its own seed): same-shaped inputs never hold the same
    values, so a shortcut keyed on one input meets the others' values at random."""
    from .input_sets import fill, input_sets_for

    def filler(input_set: Any) -> Callable[[list[Any], list[Role]], None]:
        def apply(values: list[Any], roles: list[Role]) -> None:
            for position, index in enumerate(_floating_inputs(values, roles)):
                fill(values[index], input_set, seed=seed + INPUT_SEED_STEP * position, row_length=row_length,
                     chunk=device_chunk(values[index]), constants=constants, reduction=reduction)
        return apply

    chosen = input_sets_for(dtype, reduction) if input_sets is None else input_sets
    return [ExtraSet(f"inputs: {input_set.label}", filler(input_set), error_structure=input_set.error_structure,
                     comparison="magnitude" if input_set.name in INPUT_SETS_BY_MAGNITUDE else "tolerance")
            for input_set in chosen]


def _more_sweep_draws(value: Any, reduction: bool, row_length: int | None, structured: Sequence[Any],
                      constants: tuple[float, ...]) -> list[ExtraSet]:
    """Further draws of the sweeps for a tensor of few groups of rows, their scales continuing the first
    draw's sequence: the sweeps meet SWEEP_MIN_SCALES scales whatever the tensor's size. The offset sweep's
    further draws go to reductions only: a pointwise kernel is not invariant to a shift, so the magnitude
    sweep's draws already meet the magnitudes an offset would."""
    from .structured_input_sets import SWEEPS, sweep_draw, sweep_draws, sweep_groups

    sweeps = [f for f in structured if f.name in SWEEPS and (reduction or f.name != "offset-sweep")]
    if not sweeps or value.dim() == 0:
        return []
    length = row_length or value.shape[-1]
    draws = sweep_draws(value.numel(), length, reduction)
    groups = sweep_groups(value.numel(), length, reduction)
    total = groups * (draws - 1)
    variants = [sweep_draw(f, groups * (draw - 1), draw + 1, total) for draw in range(1, draws) for f in sweeps]
    return all_input_sets(value.dtype, reduction, row_length, input_sets=variants, constants=constants)


ALIAS_SEED = 13


def alias_sets(values: list[Any], roles: list[Role], names: list[str], seed: int = ALIAS_SEED,
               fills: Sequence[Any] = (), row_length: int | None = None, reduction: bool = False,
               constants: tuple[float, ...] = ()) -> list[ExtraSet]:
    """One run where every read-only floating input shares the buffer of the first input of its layout
    (``f(x, x)``): a shortcut taken when two inputs are the same tensor, or hold equal values, shows only
    there; then one more such run per input set of ``fills`` (the sweep's magnitudes, the candidate's
    constants), since a shortcut may want equal inputs and something more (``x == y`` and ``|x| > 9``). None
    when no two inputs share a shape, strides and dtype."""
    import torch

    from .input_sets import fill

    groups: dict[Any, list[int]] = {}
    for index, (value, role) in enumerate(zip(values, roles, strict=True)):
        if role == "input" and isinstance(value, torch.Tensor) and value.is_floating_point():
            groups.setdefault((tuple(value.shape), tuple(value.stride()), value.dtype), []).append(index)
    aliases = {j: members[0] for members in groups.values() for j in members[1:]}
    if not aliases:
        return []

    def aliased(input_set: Any | None) -> Callable[[list[Any], list[Role]], None]:
        def apply(values: list[Any], roles: list[Role]) -> None:
            draw_arguments(values, roles, seed, "randn")
            if input_set is not None:
                for position, index in enumerate(sorted(set(aliases.values()))):
                    fill(values[index], input_set, seed=seed + INPUT_SEED_STEP * position, row_length=row_length,
                         chunk=device_chunk(values[index]), constants=constants, reduction=reduction)
            for j, i in aliases.items():  # equal values too: the copy a shortcut might read is the same
                values[j].copy_(values[i])
        return apply

    pairs = ", ".join(f"{names[j]} is {names[i]}" for j, i in aliases.items())
    out = [ExtraSet(f"inputs: the same tensor passed twice ({pairs})", aliased(None), aliases=aliases)]
    for input_set in fills:
        out.append(ExtraSet(f"inputs: the same tensor passed twice ({pairs}), {input_set.label}", aliased(input_set),
                            aliases=aliases, error_structure=False,
                            comparison="magnitude" if input_set.name in INPUT_SETS_BY_MAGNITUDE else "tolerance"))
    return out


# Input sets drawn into ONE floating input at a time, the others randn. Each input has its own draw in the
# input sets above, but all-zero and constant inputs are alike whatever the seed, and a fast path keyed on one
# input ("skip tanh(x) * sigmoid(y) where y's block is zero") meets a skipped term that is zero anyway when
# x is zero too. The set is chosen for the keys such a fast path tests, one run per key and input:
#   zeros          a zero-keyed skip fires on every block of the input, whatever the candidate's block size;
#   constant-rows  a shortcut for rows of one input without spread (a norm that skips the residual);
#   nan-inf        NaN/+-Inf in one input where the others are finite.
# Cost: three full-size runs per floating input, only for kernels with two or more floating inputs (with
# one, the all-input set is the same run).
ONE_INPUT_SET_NAMES = ("zeros", "constant-rows", "nan-inf")
ONE_INPUT_SEED = 11


def one_input_sets(values: list[Any], roles: list[Role], names: list[str], reduction: bool,
                   row_length: int | None, seed: int = ONE_INPUT_SEED) -> list[ExtraSet]:
    """Each of :data:`ONE_INPUT_SET_NAMES` in each floating input alone, the other inputs drawn randn."""
    from .input_sets import INPUT_SETS, fill, input_sets_for

    floating = [i for i, (value, role) in enumerate(zip(values, roles, strict=True))
                if role in ("input", "inout") and hasattr(value, "is_floating_point") and value.is_floating_point()]
    if len(floating) < 2:
        return []

    def filler(index: int, input_set: Any) -> Callable[[list[Any], list[Role]], None]:
        def apply(values: list[Any], roles: list[Role]) -> None:
            draw_arguments(values, roles, seed, "randn")
            fill(values[index], input_set, seed=seed, row_length=row_length, chunk=device_chunk(values[index]))
        return apply

    sets = []
    for name in ONE_INPUT_SET_NAMES:
        input_set = INPUT_SETS[name]
        for index in floating:
            if input_set not in input_sets_for(values[index].dtype, reduction):
                continue
            sets.append(ExtraSet(f"inputs: {input_set.label} in {names[index]} alone, the others randn",
                                 filler(index, input_set), error_structure=input_set.error_structure))
    return sets


def kernel_input_sets(values: list[Any], roles: list[Role], names: list[str], reduction: bool,
                      row_length: int | None, *, adds_decisions: bool = True,
                      constants: Sequence[float] = ()) -> list[ExtraSet]:
    """Gate 2's input sets for one kernel: each input set in every floating input at once (each input
    its own draw), then the one-input variants (:func:`one_input_sets`); for a candidate that adds
    decisions (``adds_decisions``), also the structured input sets (:mod:`.structured_input_sets`: sign
    blocks, sorted, repeated, leading-max and sparse rows, values at and beside ``constants``) and the
    aliasing run (:func:`alias_sets`): a candidate that adds no decision takes no path the original does
    not, so these runs would only repeat what the others show. The magnitude sweep goes to every candidate."""
    from .structured_input_sets import SWEEPS, structured_input_sets_for

    floating = [v for v, r in zip(values, roles, strict=True)
                if r != "output" and hasattr(v, "is_floating_point") and v.is_floating_point()]
    if not floating:
        return []
    sets = [*all_input_sets(floating[0].dtype, reduction, row_length),
            *one_input_sets(values, roles, names, reduction, row_length)]
    constants = tuple(float(c) for c in constants)
    structured = structured_input_sets_for(floating[0].dtype, constants)
    if not adds_decisions:  # a precision drop needs no decision: the sweeps go to every candidate
        structured = [f for f in structured if f.name in SWEEPS]
    sets += all_input_sets(floating[0].dtype, reduction, row_length, input_sets=structured, constants=constants)
    if adds_decisions:  # a band keyed on magnitude needs a changed body: a launch configuration gets one draw
        sets += _more_sweep_draws(floating[0], reduction, row_length, structured, constants)
        fills = [f for f in structured if f.name in ("magnitude-sweep", "constants")]
        sets += alias_sets(values, roles, names, fills=fills, row_length=row_length, reduction=reduction,
                           constants=constants)
    return sets
