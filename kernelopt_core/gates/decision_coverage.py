"""Gate 2's evidence for the decisions a candidate adds: each seen with both outcomes on inputs whose
outputs were compared and matched, or the candidate is "not verified".

:mod:`.decisions` lists the added decisions, :mod:`.decision_probe` makes the instrumented copy.
Here: which outcomes the copy recorded on which inputs (:class:`DecisionCoverage`), which inputs
may credit an outcome (:func:`degenerate_reason`: on zeros, constant rows or a repeated value many
wrong shortcuts give the right answer), and the further inputs gate 2 draws to reach a side not yet
seen (:func:`search_sets`: values at and beside the candidate's own constants, fresh draws at
random log-uniform magnitudes, structured rows, each input alone). Shared by every kind of target:
the caller supplies how to run the copy. Imports torch only inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .decisions import Decision

# How long gate 2 may keep drawing inputs for a side not yet seen (the battery's own sets come first).
SEARCH_SECONDS = 30.0
SAMPLE = 65536  # elements looked at to call an input degenerate
LOOP_FORCED = 64  # evaluations a loop-keeping synchronisation decision is forced for, in the withholding run
ALWAYS_FORCED = 1 << 30
NOT_VERIFIED = "not verified: the candidate adds a path that no test reached"


@dataclass
class DecisionCoverage:
    """Outcomes seen per added decision (pair i: [true seen, false seen])."""

    decisions: list[Decision]
    skipped: list[tuple[Decision, str]] = field(default_factory=list)  # could not be instrumented
    seen: list[list[bool]] = field(default_factory=list)
    credited: list[str] = field(default_factory=list)  # labels of the input sets that credited outcomes
    not_credited: list[str] = field(default_factory=list)  # "label: why"
    searched: int = 0  # further input sets drawn to reach an unseen side
    seconds: float = 0.0
    forced: list[str] = field(default_factory=list)  # synchronisation decisions forced in the withholding run
    boundaries: list[str] = field(default_factory=list)  # walks to a decision's boundary (kernel_gate)

    def __post_init__(self) -> None:
        if not self.seen:
            self.seen = [[False, False] for _ in self.decisions]

    def record(self, counts: Sequence[int], label: str) -> None:
        """Credits the outcomes in ``counts`` (per decision: times true, times false, force code)."""
        for index, decision_seen in enumerate(self.seen):
            for side in (0, 1):
                if 4 * index + side < len(counts) and counts[4 * index + side] > 0:
                    decision_seen[side] = True
        self.credited.append(label)

    def missing_sync(self) -> dict[int, tuple[int, int]]:
        """(force code, evaluations) per decision index for the synchronisation decisions seen one way only:
        the run that withholds a partial takes all their other sides at once. A decision that keeps a loop
        going is forced for its first LOOP_FORCED evaluations only (a wait that lasts a while, as a slow
        program makes it; forced for good, it could never end)."""
        from .decision_probe import FORCE_FALSE, FORCE_TRUE

        skipped = {id(d) for d, _ in self.skipped}
        out: dict[int, tuple[int, int]] = {}
        for index, (decision, (true_seen, false_seen)) in enumerate(zip(self.decisions, self.seen, strict=True)):
            if decision.sync and not decision.advisory and id(decision) not in skipped \
                    and decision.probe in ("cond", "truthy") and true_seen != false_seen:
                out[index] = (FORCE_TRUE if not true_seen else FORCE_FALSE,
                              LOOP_FORCED if decision.loop else ALWAYS_FORCED)
        return out

    @property
    def complete(self) -> bool:
        """Every added decision that must be (all but the advisory select effects) was seen both ways."""
        return not any(not d.advisory for d, _ in self.skipped) and \
            all(all(s) for d, s in zip(self.decisions, self.seen, strict=True) if not d.advisory)

    @property
    def effects_seen(self) -> bool:
        """Every select that holds an added decision was seen both ways where its arms differ (or could not be
        recorded): until then gate 2 searches on, within its time, for inputs where the choice matters."""
        return all(all(s) for d, s in zip(self.decisions, self.seen, strict=True) if d.advisory)

    @property
    def settled(self) -> bool:
        """Nothing more to look for: complete, and every select's effect seen."""
        return self.complete and self.effects_seen

    def unreached(self) -> list[tuple[Decision, str]]:
        """(decision, the outcome never seen) for each decision short of evidence; skipped ones first."""
        out = [(d, f"not recorded: {why}") for d, why in self.skipped if not d.advisory]
        skipped = {id(d) for d, _ in self.skipped}
        for decision, (true_seen, false_seen) in zip(self.decisions, self.seen, strict=True):
            if id(decision) in skipped or decision.advisory:
                continue
            if not true_seen and not false_seen:
                out.append((decision, "never evaluated in a lane that counts"))
            elif not true_seen:
                out.append((decision, "never saturated" if decision.kind == "saturation" else "never true"))
            elif not false_seen:
                out.append((decision, "never in range" if decision.kind == "saturation" else "never false"))
        return out

    def reason(self) -> str | None:
        """The verdict's reason when evidence is missing (None: every added decision was seen both ways)."""
        missing = self.unreached()
        if not missing:
            return None
        decision, why = missing[0]
        more = f"; {len(missing) - 1} more added decision(s) lack evidence" if len(missing) > 1 else ""
        return (f"{NOT_VERIFIED} ({decision.describe()}, a {decision.kind} {why} on {len(self.credited)} compared "
                f"input set(s){more}); it is not accepted, and not shown wrong")

    def to_json(self) -> dict[str, Any]:
        return {"decisions": [{**d.to_json(), "true_seen": s[0], "false_seen": s[1]}
                              for d, s in zip(self.decisions, self.seen, strict=True)],
                "skipped": [{**d.to_json(), "why": why} for d, why in self.skipped],
                "credited": self.credited[:50], "not_credited": self.not_credited[:50], "searched": self.searched,
                "forced": self.forced,
                "boundaries": self.boundaries,
                "seconds": round(self.seconds, 3), "complete": self.complete, "effects_seen": self.effects_seen}


def degenerate_reason(values: Sequence[Any], roles: Sequence[str]) -> str | None:
    """Why these inputs may not credit an outcome (None: they may): a floating input that is one repeated
    value, holds two distinct values at most, or has rows that are each constant. Looks at a strided sample."""
    import torch

    for value, role in zip(values, roles, strict=True):
        if role == "output" or not isinstance(value, torch.Tensor) or not value.is_floating_point() \
                or value.is_meta or value.numel() < 2:
            continue
        flat = value.reshape(-1) if value.is_contiguous() else value.flatten()
        step = max(1, flat.numel() // SAMPLE)
        sample = flat[::step][:SAMPLE].double()
        finite = sample[torch.isfinite(sample)]
        if finite.numel() and torch.unique(finite).numel() <= 2 and finite.numel() > 2:
            return "an input holds at most two distinct values"
        if value.dim() >= 2 and value.shape[-1] > 1:
            rows = value.reshape(-1, value.shape[-1])
            pick = rows[:: max(1, rows.shape[0] // 64)][:64].double()
            spread = (pick.amax(dim=1) - pick.amin(dim=1))
            if torch.isfinite(spread).all() and bool((spread == 0).all()):
                return "an input's rows are each constant"
    return None


@dataclass
class DecisionProbeRun:
    """The instrumented copy gate 2 runs for a candidate that adds decisions: its kernel's name in the
    candidate's process, what it has seen, and the constants the search draws at."""

    key: str
    coverage: DecisionCoverage
    constants: list[float] = field(default_factory=list)
    search_seconds: float = SEARCH_SECONDS
    failed: str | None = None  # the copy itself failed to run: nothing more can be credited
    launches: int = 0  # of the copy (its first compiles it)

    def reason(self) -> str | None:
        """The verdict's reason when evidence is missing (None: complete)."""
        if self.failed is not None and not self.coverage.complete:
            return f"{NOT_VERIFIED}: {self.failed}"
        return self.coverage.reason()


PROBE_SUFFIX = "#decisions"


@dataclass
class ProbePlan:
    """What gate 2 needs for a candidate that adds decisions: the instrumented copy's source, and its run."""

    source: str
    run: DecisionProbeRun
    original_decisions: int = 0


def plan_decision_probe(original_source: str, candidate_source: str, kernel_name: str,
                        search_seconds: float = SEARCH_SECONDS, launched_source: str | None = None) -> ProbePlan | None:
    """The instrumented copy for a candidate that adds decisions; None when it adds none (no extra cost).

    ``launched_source``: what the process loads, when it is the candidate module with more appended (a
    user kernel's generated launcher, named ``kernel_name``); the candidate's lines keep their numbers."""
    from .decision_probe import ProbeError, probe_source
    from .decisions import added_decisions

    added = added_decisions(original_source, candidate_source)
    if not added.required:
        return None
    try:
        probed = probe_source(launched_source or candidate_source, kernel_name, added.added)
        source, decisions, skipped = probed.source, probed.decisions, probed.skipped
    except ProbeError as exc:
        source, decisions, skipped = "", list(added.added), [(d, str(exc)) for d in added.added]
    coverage = DecisionCoverage(decisions, skipped=skipped)
    run = DecisionProbeRun(kernel_name + PROBE_SUFFIX, coverage, added.constants, search_seconds)
    if not source:
        run.failed = "the candidate could not be instrumented"
    return ProbePlan(source, run, added.original_count)


@dataclass
class SearchSet:
    label: str
    fill: Callable[[list[Any], list[str]], None]


def _floating_inputs(values: Sequence[Any], roles: Sequence[str]) -> list[int]:
    import torch

    return [i for i, (v, r) in enumerate(zip(values, roles, strict=True))
            if r != "output" and isinstance(v, torch.Tensor) and v.is_floating_point() and not v.is_meta]


def _generator(device: Any, seed: int) -> Any:
    import torch

    return torch.Generator(device=device).manual_seed((seed * 2_654_435_761 + 12345) % (2**63 - 1))


def _randn(value: Any, seed: int, scale: float = 1.0) -> None:
    value.normal_(0.0, scale, generator=_generator(value.device, seed))


CHUNK_ELEMENTS = 1 << 24  # temporaries of the fills stay this size, whatever the working set


def _row_chunks(value: Any) -> Iterator[Any]:
    """The tensor as (rows, row length) views of at most about CHUNK_ELEMENTS elements (contiguous only)."""
    rows = value.view(-1, value.shape[-1]) if value.dim() >= 2 else value.view(1, -1)
    if rows.shape[1] > CHUNK_ELEMENTS:
        flat = value.view(-1)
        for start in range(0, flat.numel(), CHUNK_ELEMENTS):
            yield flat[start:start + CHUNK_ELEMENTS].view(1, -1)
        return
    step = max(1, CHUNK_ELEMENTS // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        yield rows[start:start + step]


def _at_constants(value: Any, constants: Sequence[float], seed: int) -> None:
    """randn, then one element in four set at, or one ulp beside, a constant (or its negation)."""
    import torch

    _randn(value, seed)
    picks: list[float] = []
    for constant in constants:
        if not math.isfinite(constant):
            continue
        for c in (constant, -constant):
            picks += [c, c * (1 + 1e-3), c * (1 - 1e-3)]
    if not picks or not value.is_contiguous() or value.dim() == 0:
        return
    info = torch.finfo(value.dtype)
    exact = torch.tensor([min(max(p, info.min), info.max) for p in picks], dtype=value.dtype, device=value.device)
    # one ulp beside each, in the input's own dtype (a float64 neighbour rounds back onto the constant)
    try:
        table = torch.cat([exact, torch.nextafter(exact, torch.full_like(exact, math.inf)),
                           torch.nextafter(exact, torch.full_like(exact, -math.inf))])
    except (RuntimeError, NotImplementedError):  # nextafter is not implemented for every dtype and device
        wide = exact.double()
        table = torch.cat([exact, torch.nextafter(wide.float(), torch.full_like(wide.float(), math.inf))
                           .to(value.dtype), exact])
    generator = _generator(value.device, seed + 1)
    for piece in _row_chunks(value):
        chosen = torch.rand(piece.shape, generator=generator, device=value.device) < 0.25
        index = torch.randint(0, table.numel(), piece.shape, generator=generator, device=value.device)
        piece[chosen] = table[index[chosen]]


def _log_uniform(value: Any, seed: int) -> None:
    """randn at one magnitude drawn log-uniform over the dtype's normal range (bands between decades too):
    one magnitude per set, so that the comparison's tolerance, scaled to the inputs, fits every element."""
    import torch

    info = torch.finfo(value.dtype)
    low, high = math.log10(info.tiny) + 2, math.log10(info.max) - 4
    exponent = float(torch.rand((1,), generator=_generator(torch.device("cpu"), seed + 2), dtype=torch.float64))
    _randn(value, seed, 10.0 ** (low + (high - low) * exponent))


def _structured(value: Any, kind: str, seed: int) -> None:
    """Row structures: sorted, reverse-sorted, a repeated row, a row leading with its maximum, all-positive,
    all-negative, sparse (nine zeros in ten)."""
    import torch

    _randn(value, seed)
    if not value.is_contiguous() or value.dim() == 0:
        return
    generator = _generator(value.device, seed + 3)
    for rows in _row_chunks(value):
        if kind == "sorted":
            rows.copy_(torch.sort(rows, dim=1).values)
        elif kind == "reverse-sorted":
            rows.copy_(torch.sort(rows, dim=1, descending=True).values)
        elif kind == "repeated row" and rows.shape[0] > 1:
            rows[1:] = rows[:1]
        elif kind == "leading maximum":
            largest = rows.argmax(dim=1, keepdim=True)
            first = rows[:, :1].clone()
            rows[:, :1] = rows.gather(1, largest)
            rows.scatter_(1, largest, first)
        elif kind == "all positive":
            rows.abs_().add_(1e-3)
        elif kind == "all negative":
            rows.abs_().add_(1e-3).neg_()
        elif kind == "sparse":
            rows.mul_(torch.rand(rows.shape, generator=generator, device=value.device) < 0.1)


def _beside(value: Any, constant: float, above: bool, seed: int) -> None:
    """Every element strictly above (or below) ``constant``, by up to a few units of its size: a block all
    below one threshold while another input's block is all above it."""
    import torch

    step = max(1.0, abs(constant) * 2.0 ** -10)
    value.normal_(0.0, 1.0, generator=_generator(value.device, seed)).abs_().add_(1e-3).mul_(step if above else -step)
    value.add_(constant)
    info = torch.finfo(value.dtype)
    value.clamp_(info.min, info.max)


SIDE_CONSTANTS = 6  # constants the above/below sets are drawn for (the added decisions' own, in order)


def _sides(count: int) -> list[tuple[bool, ...]]:
    """Which inputs lie above the constant: all, none, and each one alone above or below the others."""
    patterns = [tuple([True] * count), tuple([False] * count)]
    if count > 1:
        for index in range(count):
            patterns += [tuple(i == index for i in range(count)), tuple(i != index for i in range(count))]
    return list(dict.fromkeys(patterns))


STRUCTURES = ("all positive", "all negative", "sorted", "reverse-sorted", "repeated row", "leading maximum", "sparse")


def search_sets(values: Sequence[Any], roles: Sequence[str], names: Sequence[str], constants: Sequence[float],
                seed: int = 9000) -> Iterator[SearchSet]:
    """Further input sets, in the order gate 2 tries them, to reach an outcome not yet seen: the candidate's
    constants (in every input, then in each alone), structured rows (in each input alone, then all), random
    log-uniform magnitudes, then fresh draws with new seeds. Endless: the caller's time cap stops it."""
    floating = _floating_inputs(values, roles)
    if not floating:
        return

    def each(fill_one: Callable[[Any, int], None], only: int | None) -> Callable[[list[Any], list[str]], None]:
        def apply(vals: list[Any], _roles: list[str]) -> None:
            for k, index in enumerate(floating):
                if only is None or index == only:
                    fill_one(vals[index], seed + 17 * k)
                else:
                    _randn(vals[index], seed + 17 * k + 5)
        return apply

    if constants:
        yield SearchSet("at and beside the candidate's constants, every input",
                        each(lambda v, s: _at_constants(v, constants, s), None))
        if len(floating) > 1:
            for index in floating:
                yield SearchSet(f"at and beside the candidate's constants, {names[index]} alone",
                                each(lambda v, s: _at_constants(v, constants, s), index))
        sides = [c for c in dict.fromkeys(constants) if math.isfinite(c)][:SIDE_CONSTANTS]
        for constant in sides:
            for pattern in _sides(len(floating)):
                where = ", ".join(f"{names[i]} {'above' if up else 'below'}" for i, up in zip(floating, pattern,
                                                                                             strict=True))
                yield SearchSet(f"every element beside {constant:g}: {where}",
                                _beside_fill(floating, constant, pattern, seed))
    alone: list[int | None] = [*floating, None] if len(floating) > 1 else [None]
    for kind in STRUCTURES:
        for only in alone:
            where = "every input" if only is None else f"{names[only]} alone"
            yield SearchSet(f"{kind} rows, {where}", each(_structured_fill(kind, 0), only))
    round_ = 0
    while True:
        round_ += 1
        yield SearchSet(f"log-uniform magnitudes per row, draw {round_}", each(_log_uniform_fill(1000 * round_), None))
        if constants:
            yield SearchSet(f"the candidate's constants, draw {round_ + 1}",
                            each(_constants_fill(constants, 1000 * round_), None))
        for kind in STRUCTURES:
            yield SearchSet(f"{kind} rows, draw {round_ + 1}", each(_structured_fill(kind, 1000 * round_), None))


def _beside_fill(floating: list[int], constant: float, above: tuple[bool, ...],
                 seed: int) -> Callable[[list[Any], list[str]], None]:
    """Each floating input all above (or below) ``constant``, as ``above`` says, input by input."""
    def apply(values: list[Any], _roles: list[str]) -> None:
        for k, (index, up) in enumerate(zip(floating, above, strict=True)):
            _beside(values[index], constant, up, seed + 17 * k + 11)
    return apply


def _structured_fill(kind: str, offset: int) -> Callable[[Any, int], None]:
    return lambda value, seed: _structured(value, kind, seed + offset)


def _log_uniform_fill(offset: int) -> Callable[[Any, int], None]:
    return lambda value, seed: _log_uniform(value, seed + offset)


def _constants_fill(constants: Sequence[float], offset: int) -> Callable[[Any, int], None]:
    return lambda value, seed: _at_constants(value, constants, seed + offset)


__all__ = ["NOT_VERIFIED", "PROBE_SUFFIX", "SEARCH_SECONDS", "DecisionCoverage", "DecisionProbeRun", "ProbePlan",
           "SearchSet", "degenerate_reason", "plan_decision_probe", "search_sets"]
