"""Gate 2's sequence of runs for one kernel: the original here, the candidate in its own process.

The checker (this worker) owns three sets of buffers per kernel — the argument values, the
original's guarded copy and the candidate's guarded copy, the last in exchange memory the
candidate process maps — and reuses them for every run (:mod:`.kernel` has the pieces). Runs only
inside a worker (imports torch inside functions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..artifacts.kernel_arguments import Role
from ..sandbox.exchange import ExchangeArena, TensorView
from ..sandbox.process import SandboxError, SandboxProcess
from .chunks import aligned_flat
from .decision_coverage import DecisionCoverage, DecisionProbeRun, degenerate_reason, search_sets
from .kernel import (
    DISTRIBUTIONS,
    LARGE_MAGNITUDE,
    ExtraSet,
    RunCheck,
    Side,
    StructureCheck,
    compare_reruns,
    compare_runs,
    device_chunk,
    distribution_label,
    draw_arguments,
    fingerprint,
    nudge_last_bit,
    nudge_up,
    run_original,
    undo_nudge,
    unlike_answer,
)
from .step_clock import StepClock

CURRENT_STREAM = "__current_stream__"

# A hung candidate must cost a bounded wait, not the task's whole time: each of its launches gets
# LAUNCH_TIME_FACTOR times the original's time, at least a floor, at most the task's run limit. The
# floors allow for compiling: a GPU candidate's first launch compiles its kernels (several, for a
# launcher), a later one may compile another specialisation; the CPU interpreter compiles nothing.
LAUNCH_TIME_FACTOR = 100.0
FIRST_LAUNCH_FLOOR_S = {"cpu": 20.0, "cuda": 180.0}
LATER_LAUNCH_FLOOR_S = {"cpu": 20.0, "cuda": 60.0}


def launch_limits(original_s: float, device: str, job_limit_s: float) -> tuple[float, float]:
    """(first launch, later launches) time limits for a candidate whose original took ``original_s``."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    scaled = LAUNCH_TIME_FACTOR * max(0.0, original_s)
    return (min(job_limit_s, max(FIRST_LAUNCH_FLOOR_S[kind], scaled)),
            min(job_limit_s, max(LATER_LAUNCH_FLOOR_S[kind], scaled)))


class CandidateSide(Side):
    """The candidate's guarded buffers, in exchange memory, and its launches in its own process."""

    def __init__(self, values: list[Any], roles: list[Role], process: SandboxProcess, arena: ExchangeArena,
                 name: str, timeout_s: float):
        self.process = process
        self.name = name
        self.timeout_s = timeout_s
        self.limit_note = ""  # why the launch limit is what it is, for the verdict of a hung candidate
        self._refs: list[dict[str, Any]] = []
        self._buffers: list[Any] = []

        def allocate(nbytes: int) -> Any:
            buffer, ref = arena.allocate(nbytes)
            self._refs.append(ref.to_json())
            self._buffers.append(buffer)
            return buffer

        super().__init__(values, roles, allocate)
        self._views: dict[int, dict[str, Any]] = {}
        for index, guarded in self.run.guarded.items():
            buffer_index = next(i for i, b in enumerate(self._buffers)
                                if b.untyped_storage().data_ptr() == guarded.flat.untyped_storage().data_ptr())
            view = guarded.view
            self._views[index] = TensorView(buffer_index, str(view.dtype), tuple(view.size()), tuple(view.stride()),
                                            guarded.guard).to_json()

    def message_args(self, values: list[Any]) -> list[Any]:
        return [{"view": self._views[self.aliases.get(i, i)]} if i in self._views else _scalar(v)
                for i, v in enumerate(values)]

    def launch(self, values: list[Any], kwargs: dict[str, Any], shuffle_seed: int | None = None,
               name: str | None = None, extra: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """Launch on ``values``; ``name`` another kernel loaded in the process (the instrumented copy), and
        ``extra`` (its shared ref, its view) one more trailing argument (the copy's counter buffer)."""
        refs, args = self._refs, self.message_args(values)
        if extra is not None:
            refs = [*refs, extra[0]]
            args = [*args, {"view": {**extra[1], "buffer": len(self._refs)}}]
        try:
            reply = self.process.call("run_kernel", timeout_s=self.timeout_s, name=name or self.name, refs=refs,
                                      args=args, kwargs=_child_kwargs(kwargs), shuffle_seed=shuffle_seed)
        except SandboxError as exc:
            if exc.kind in ("timeout", "crash"):
                # the candidate hung or took its process down: its verdict
                self.run.error = f"{exc} ({self.limit_note})" if exc.kind == "timeout" and self.limit_note else str(exc)
            else:
                self.run.error, self.run.could_not_run = str(exc), True
            return
        if not reply.get("ok"):
            self.run.error = str(reply.get("error", "failed"))
            self.run.violation = bool(reply.get("violation"))
            self.run.could_not_run = bool(reply.get("checker_error"))
            return
        self.run.problems.extend(str(p) for p in reply.get("scratch_problems") or [])


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return float(value) if hasattr(value, "__float__") else str(value)


def _child_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's keyword arguments for the candidate process: its own stream, not ours."""
    return {k: (CURRENT_STREAM if k == "stream" else _scalar(v)) for k, v in kwargs.items()}


BATTERIES = ("screen", "full")


@dataclass
class KernelChecks:
    checks: list[RunCheck] = field(default_factory=list)
    peak_bytes: int = 0  # the largest number of bytes gate 2's own buffers held at once
    working_set_bytes: int = 0
    launch_limits_s: tuple[float, float] = (0.0, 0.0)  # the candidate's first and later launch limits
    battery: str = "full"
    original_runs: int = 0
    candidate_runs: int = 0
    coverage: DecisionCoverage | None = None  # the added decisions' outcomes (full battery, when any)

    @property
    def failed(self) -> RunCheck | None:
        return next((c for c in self.checks if not c.passed), None)


def _scale(values: Sequence[Any], distribution: str) -> float:
    if distribution != "large":
        return 1.0
    return max((LARGE_MAGNITUDE.get(str(v.dtype), 1000.0) for v in values
                if hasattr(v, "is_floating_point") and v.is_floating_point()), default=1.0)


def original_sensitivity(original: Any, orig: Side, values: list[Any], kwargs: dict[str, Any], roles: list[Role],
                         names: list[str], device: str) -> dict[str, tuple[float, float]] | None:
    """Per floating output: (max, mean) of |original(inputs nudged by one ulp) - original(inputs)|.

    Runs the original once more with every finite input element moved by one ulp, then restores the
    inputs and all the original's outputs exactly. Holds one copy of the outputs meanwhile (this runs
    only when a candidate is about to be rejected on its error's structure alone). Empty when it measures
    nothing (no floating output, the original failed); None when that copy does not fit in memory.
    """
    import torch

    sensitivity: dict[str, tuple[float, float]] = {}

    def measure(index: int, now: Any, before: Any) -> None:
        largest, total, count = 0.0, 0.0, 0
        for _, (a, b) in aligned_flat([now, before], device_chunk(now)):  # bounded temporaries
            change = (a.double() - b.double()).abs()
            change = change[torch.isfinite(change)]
            if change.numel():
                largest = max(largest, float(change.max()))
                total, count = total + float(change.sum()), count + change.numel()
        if count:
            sensitivity[names[index]] = (largest, total / count)

    ran = _run_original_nudged(original, orig, values, kwargs, roles, device, measure, up=False)
    return None if ran is None else sensitivity


def magnitude_floors(original: Any, orig: Side, values: list[Any], kwargs: dict[str, Any], roles: list[Role],
                     device: str, row_length: int | None) -> dict[int, Any] | None:
    """Per floating output index: its :class:`.error_structure.MagnitudeFloor` (the magnitude sweep's
    limit per element, from the original's own outputs and their change under one ulp of input rounding).
    The original's buffers hold its outputs on ``values`` before and after. None when the copy of the
    outputs this needs does not fit in memory."""
    from .error_structure import magnitude_floor

    floors: dict[int, Any] = {}

    def measure(index: int, now: Any, before: Any) -> None:
        floors[index] = magnitude_floor(now, before, row_length, chunk=device_chunk(now))

    ran = _run_original_nudged(original, orig, values, kwargs, roles, device, measure, up=True)
    return None if ran is None else floors


def _run_original_nudged(original: Any, orig: Side, values: list[Any], kwargs: dict[str, Any], roles: list[Role],
                         device: str, measure: Callable[[int, Any, Any], None], up: bool) -> bool | None:
    """Run the original on its inputs moved by an ulp and call ``measure(index, nudged output, output)``
    per floating output (``up``: every input up by one or two ulps, :func:`.kernel.nudge_up`, the magnitude
    floor's; else its last bit flipped, :func:`.kernel.nudge_last_bit`, the structure check's sensitivity,
    whose bias floor a one-sided move would loosen); then restore the inputs and every output of the original's buffers exactly.
    False when the original failed on the nudged inputs, None when the outputs' copy does not fit."""
    import torch

    written = {i: g.view for i, g in orig.run.guarded.items() if roles[i] != "input"}
    outputs = {i: view for i, view in written.items() if view.is_floating_point()}
    if not outputs:
        return True
    try:  # every output is restored afterwards, integer ones too: the comparison that follows reads them all
        saved = {i: view.clone() for i, view in written.items()}
    except torch.OutOfMemoryError:
        return None
    restores: list[Callable[[], Any]] = []  # one per nudged input: puts it back bit for bit
    nudged: set[int] = set()  # an input listed twice is nudged once
    for v, r in zip(values, roles, strict=True):
        if r == "output" or not isinstance(v, torch.Tensor) or id(v) in nudged:
            continue
        nudged.add(id(v))
        if up:
            undo = nudge_up(v)
            if undo is not None:
                restores.append(partial(undo_nudge, v, undo))
        elif nudge_last_bit(v):
            restores.append(partial(nudge_last_bit, v))  # a second flip restores it
    try:
        orig.fill(values)
        run_original(original, orig, values, kwargs, device)
        ran = orig.run.error is None
        if ran:
            for i, view in outputs.items():
                measure(i, view, saved[i])
    finally:
        for restore in restores:
            restore()
        orig.fill(values)
        for i, view in written.items():
            view.copy_(saved[i])
        orig.run.error = None
    return ran


def _note_peak(check: RunCheck, clock: StepClock) -> None:
    """The worker's device-memory peak during this check's comparison, where it is measured (a GPU): which
    check sets gate 2's peak."""
    if clock.last_peak is not None:
        check.figures["compare_peak_bytes"] = clock.last_peak


def check_kernel(original: Any, process: SandboxProcess, arena: ExchangeArena, name: str,
                 launch_values: list[list[Any]], launch_kwargs: list[dict[str, Any]], names: list[str],
                 roles: list[Role], seeds: tuple[int, ...], device: str, *, reruns: int = 2,
                 original_uses_atomics: bool = False, extra_sets: Sequence[ExtraSet] = (),
                 timeout_s: float = 600.0, row_length: int | None = None, structure: bool = True,
                 battery: str = "full", clock: StepClock | None = None,
                 decisions: DecisionProbeRun | None = None) -> KernelChecks:
    """Gate 2's runs for one kernel, in order, stopping at the first failing check (which decides).

    ``battery`` "full" runs every check; "screen" runs the first captured launch and the first seed
    only (the search's screen: each of its runs is the same-named run of the full battery, so what
    the screen rejects the full battery rejects too). Arguments whose captured value is never read
    (outputs) may come as layouts only (meta tensors, :func:`.launch_capture.layout_only`).

    ``decisions`` (full battery only): the candidate adds data-dependent decisions, and its instrumented
    copy (:mod:`.decision_probe`) is loaded in the candidate's process. After each set whose outputs
    matched, the copy runs on the same inputs, and where its outputs match too, the outcomes it recorded
    are credited; then further sets are drawn (:func:`.decision_coverage.search_sets`) until every added
    decision was seen both ways or the search's time is up. ``result.coverage`` holds what was seen.
    """
    import torch

    if battery not in BATTERIES:
        raise ValueError(f"gate 2's battery is one of {', '.join(BATTERIES)}, not {battery!r}")
    screen = battery == "screen"
    clock = clock or StepClock(device)
    result = KernelChecks(battery=battery)
    checks = result.checks

    def layout(values: list[Any]) -> list[Any]:
        return [(tuple(v.size()), tuple(v.stride()), v.dtype) if isinstance(v, torch.Tensor) else None for v in values]

    def held_bytes(values: list[Any]) -> int:
        return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor) and not v.is_meta)

    # Buffers are laid out once, for the first launch: later launches with other layouts are skipped.
    same = [i for i, values in enumerate(launch_values) if layout(values) == layout(launch_values[0])]
    if screen:
        same = same[:1]
    launch_values = [launch_values[i] for i in same]
    launch_kwargs = [launch_kwargs[i] for i in same]
    base = launch_values[0]
    result.working_set_bytes = sum(v.numel() * v.element_size() for v in base if isinstance(v, torch.Tensor))
    with clock("setup"):
        captured = sum(held_bytes(values) for values in launch_values)
        orig = Side(base, roles, device=device)
        orig.fill(base)
        # The original never writes its inputs: its guarded copies hold the input values from now on. Outputs
        # are poisoned before every run, so their captured values are never read. Both captured copies are
        # released; only in-out values, which runs overwrite, keep theirs.
        for index, role in enumerate(roles):
            if role in ("input", "output") and index in orig.run.guarded:
                base[index] = orig.run.guarded[index].view
        _release_cached_memory(device)
    kept = held_bytes([v for v, r in zip(base, roles, strict=True) if r == "inout"]) \
        + sum(held_bytes(values) for values in launch_values[1:])
    # One timed run of the original sets the candidate's launch limits (and warms the original up); its
    # outputs are the original's result for captured launch 0.
    with clock("original"):
        begin = time.monotonic()
        run_original(original, orig, base, launch_kwargs[0] if launch_kwargs else {}, device)
        original_s = time.monotonic() - begin
    result.original_runs += 1
    held: list[str | None] = ["captured launch 0"]  # the argument set whose result the original's buffers hold
    first_limit_s, later_limit_s = launch_limits(original_s, device, timeout_s)
    result.launch_limits_s = (first_limit_s, later_limit_s)
    with clock("setup"):
        cand = CandidateSide(base, roles, process, arena, name, first_limit_s)
    cand.limit_note = (f"the original launch took {original_s:.3g} s; a candidate's launch may take "
                       f"{LAUNCH_TIME_FACTOR:g}x that, at least {first_limit_s:g} s for its first launch "
                       f"and {later_limit_s:g} s after")
    steady = kept + orig.nbytes + cand.nbytes
    probing = decisions if decisions is not None and not screen and decisions.coverage.decisions else None
    counters: Any = None
    counter_arg: tuple[dict[str, Any], dict[str, Any]] | None = None
    if probing is not None:
        result.coverage = probing.coverage
        slots = max(1, 4 * len(probing.coverage.decisions))
        counter_buffer, counter_ref = arena.allocate(4 * slots)
        counters = counter_buffer.view(torch.int32)[:slots]
        counter_arg = (counter_ref.to_json(), TensorView(0, "torch.int32", (slots,), (1,), 0).to_json())
    result.peak_bytes = max(captured + orig.nbytes, steady)
    output_bytes = sum(g.view.numel() * g.view.element_size() for i, g in orig.run.guarded.items()
                       if roles[i] != "input")  # what the sensitivity run saves
    magnitudes: dict[str, float] = {}

    def input_magnitude(key: str, values: list[Any]) -> float:
        """The largest finite |input| of an argument set (measured once per set)."""
        if key not in magnitudes:
            from .error_structure import max_finite_magnitude

            inputs = [v for v, r in zip(values, roles, strict=True) if r != "output" and isinstance(v, torch.Tensor)
                      and v.is_floating_point()]
            with clock("magnitude"):
                magnitudes[key] = max_finite_magnitude(inputs, device_chunk(inputs[0])) if inputs else 0.0
        return magnitudes[key]

    def run_candidate(values: list[Any], kwargs: dict[str, Any], outputs: str = "poison",
                      shuffle_seed: int | None = None, name: str | None = None,
                      extra: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        with clock("fill"):
            cand.fill(values, outputs=outputs)
        # The first launch apart: it holds the candidate's autotuning, which the runs after it do not pay
        with clock("candidate_first" if result.candidate_runs == 0 else "candidate"):
            cand.launch(values, kwargs, shuffle_seed=shuffle_seed, name=name, extra=extra)
        result.candidate_runs += 1

    def run_original_on(values: list[Any], kwargs: dict[str, Any], key: str) -> None:
        """The original on this argument set, unless its buffers already hold its result for it."""
        if held[0] == key:
            return
        with clock("fill"):
            orig.fill(values)
        with clock("original"):
            run_original(original, orig, values, kwargs, device)
        result.original_runs += 1
        held[0] = key

    def output_magnitude() -> float:
        """The largest finite |value| among the original's floating outputs on the set it just ran."""
        from .error_structure import max_finite_magnitude

        outputs = [g.view for i, g in orig.run.guarded.items() if roles[i] != "input" and g.view.is_floating_point()]
        with clock("magnitude"):
            return max_finite_magnitude(outputs, device_chunk(outputs[0])) if outputs else 0.0

    def both(values: list[Any], kwargs: dict[str, Any], label: str, key: str, scale: float = 1.0,
             stale: dict[int, list[int]] | None = None, prefilled: bool = False, judge_structure: bool = True,
             scale_with_outputs: bool = False, by_magnitude: bool = False, probe: bool = True) -> bool:
        begin = time.perf_counter()
        run_candidate(values, kwargs, "keep" if prefilled else "poison")
        run_original_on(values, kwargs, key)
        if by_magnitude and orig.run.error is None and cand.run.error is None:
            # each element against the original's own rounding at its magnitude: one more run of the original
            with clock("sensitivity"):
                floors = magnitude_floors(original, orig, values, kwargs, roles, device, row_length)
            result.original_runs += 1
            result.peak_bytes = max(result.peak_bytes, steady + output_bytes + output_bytes // 4)
            with clock("compare"):
                check = compare_runs(label, orig.run, cand.run, values, roles, names, poisoned=not prefilled,
                                     floors=floors or {})
            _note_peak(check, clock)
            if floors is None:  # the check's own memory ran out: not a verdict on the candidate
                check.problems.append("the check ran out of memory measuring the original's rounding at each "
                                      "magnitude")
                check.could_not_run = True
            check.figures["seconds"] = round(time.perf_counter() - begin, 4)
            checks.append(check)
            if check.passed and probe and probing is not None:
                observe(values, kwargs, label, scale, floors=floors or {})
            return check.passed and result.failed is None  # (a boundary run inside observe may have failed)
        if scale_with_outputs:
            scale = input_set_tolerance_scale(scale, input_magnitude(key, values), output_magnitude())
        spec = StructureCheck(row_length, max(1.0, input_magnitude(key, values))) \
            if structure and judge_structure else None
        with clock("compare"):
            check = compare_runs(label, orig.run, cand.run, values, roles, names, poisoned=not prefilled,
                                 stale=stale, input_scale=scale, structure=spec)
        if spec is not None and check.structure_only:
            # Outputs can amplify rounding (a layer norm of rows at mean 1000 with weights of 1000): before
            # rejecting on structure alone, measure how far one ulp of input rounding moves the original.
            with clock("sensitivity"):
                sensitivity = original_sensitivity(original, orig, values, kwargs, roles, names, device)
            result.original_runs += 1
            result.peak_bytes = max(result.peak_bytes, steady + output_bytes)
            if sensitivity is None:  # the check's own memory ran out: not a verdict on the candidate
                check.problems.append("the error structure is outside the rounding floor, and the check ran out of "
                                      "memory measuring the original's own sensitivity to rounding")
                check.could_not_run = True
            spec.sensitivity = sensitivity or {}
            if spec.sensitivity:
                with clock("compare"):
                    check = compare_runs(label, orig.run, cand.run, values, roles, names, poisoned=not prefilled,
                                         stale=stale, input_scale=scale, structure=spec)
                check.figures["sensitivity"] = {k: list(v) for k, v in spec.sensitivity.items()}
        _note_peak(check, clock)
        check.figures["seconds"] = round(time.perf_counter() - begin, 4)
        checks.append(check)
        if check.passed and probe and probing is not None:
            observe(values, kwargs, label, scale)
        return check.passed and result.failed is None  # (a boundary run inside observe may have failed)

    def observe(values: list[Any], kwargs: dict[str, Any], label: str, scale: float,
                force: dict[int, tuple[int, int]] | None = None, floors: dict[int, Any] | None = None) -> None:
        """The instrumented copy on the set just compared: its outcomes count where its outputs match too.
        ``force``: decision index -> (force code, forced evaluations) (the withholding run); ``floors``: the
        set was compared element by element at its magnitude, and so is the copy."""
        assert probing is not None and counters is not None
        coverage = probing.coverage
        if coverage.settled or probing.failed is not None:
            return
        if coverage.seconds >= 2 * probing.search_seconds and not force:
            # the copy's runs have had their time: what is still unseen stays so (a bounded extra cost)
            coverage.not_credited.append(f"{label}: not run, the instrumented copy's time is spent")
            return
        begin = time.perf_counter()
        gained: list[int] = []  # decisions whose side this set showed first
        why = degenerate_reason(values, roles)
        if why is not None:
            coverage.not_credited.append(f"{label}: {why}")
            return
        # the copy's first launch apart: it compiles the instrumented source
        with clock("decisions_first" if probing.launches == 0 else "decisions"):
            counters.zero_()
            for index, (code, evaluations) in (force or {}).items():
                counters[4 * index + 2] = code
                counters[4 * index + 3] = evaluations
            later = cand.timeout_s
            # the copy records with atomics and may run far slower than the candidate (the interpreter): its
            # launches get the first launch's limit, which allows for compiling too
            cand.timeout_s = max(first_limit_s, later)
            probing.launches += 1
            try:
                run_candidate(values, kwargs, name=probing.key, extra=counter_arg)
            finally:
                cand.timeout_s = later
            check = compare_runs(f"{label} (instrumented copy)", orig.run, cand.run, values, roles, names,
                                 poisoned=True, input_scale=scale, floors=floors)
            if cand.run.error is not None:
                probing.failed = f"the instrumented copy failed on {label}: {cand.run.error}"
            elif check.passed:
                before = [list(seen) for seen in coverage.seen]
                coverage.record([int(c) for c in counters.tolist()], label)
                gained = [i for i, (was, now) in enumerate(zip(before, coverage.seen, strict=True)) if was != now]
            else:
                coverage.not_credited.append(f"{label}: the instrumented copy's outputs differ ({check.problems[0]})")
        coverage.seconds += time.perf_counter() - begin
        # (the walk's own runs do not come back here: they are compared with probe=False)
        if gained and not force and not label.startswith(PLAIN_DRAWS) \
                and len(coverage.boundaries) < MAX_BOUNDARY_WALKS:
            walk_to_boundary(values, kwargs, label, gained)

    def walk_to_boundary(values: list[Any], kwargs: dict[str, Any], label: str, gained: list[int]) -> None:
        """A side first seen on a structured set (a repeated row, equal inputs, a constant) may be one where a
        wrong path happens to be right, and only there. Walk from these inputs towards a random draw,
        ``rare + c + t (random - rare)`` for t from 1e-1 down to 1e-8: the decision turns somewhere on the way,
        and the inputs just beside that boundary, no longer degenerate, are compared element by element at
        their magnitude (the arguments apart, no longer aliased). A reduction walks at a common offset c of 1e3
        times the input's magnitude: it keeps the structure (rows still repeat) while a threshold relative to
        the values grows with it, and a norm or softmax sees only the spread, so a row taken as its neighbour
        where ``max |x - prev| < 1e-5 max |x|`` is wrong by 1e-2 beside that boundary, far above the rounding
        floor. A pointwise kernel walks at c = 0 (an offset would saturate a tanh or a clamp). Holds one copy of
        the inputs."""
        assert probing is not None
        coverage = probing.coverage
        floating = [i for i, (v, r) in enumerate(zip(values, roles, strict=True))
                    if r != "output" and isinstance(v, torch.Tensor) and v.is_floating_point()]
        if not floating:
            return
        try:
            with clock("boundary"):
                rare = {i: values[i].clone() for i in floating}
        except torch.OutOfMemoryError:
            coverage.not_credited.append(f"{label}: no walk to the boundary (its inputs' copy does not fit)")
            return
        decided = ", ".join(coverage.decisions[i].describe() for i in gained)
        coverage.boundaries.append(f"from {label} ({decided})")
        shift = {i: 0.0 for i in floating}
        if row_length:  # a reduction: the common offset, from each input's magnitude
            from .error_structure import max_finite_magnitude

            with clock("boundary"):
                for i in floating:
                    magnitude = max(1.0, max_finite_magnitude([rare[i]], device_chunk(rare[i])))
                    shift[i] = min(BOUNDARY_OFFSET * magnitude, float(torch.finfo(values[i].dtype).max) / 16)
        where = f"offset by {BOUNDARY_OFFSET:g}x its magnitude and " if row_length else ""
        aliases = orig.aliases, cand.aliases
        orig.aliases = cand.aliases = {}
        try:
            for step, t in enumerate(BOUNDARY_STEPS):
                with clock("boundary"):
                    draw_arguments(values, roles, BOUNDARY_SEED, "randn")
                    for i in floating:
                        values[i].sub_(rare[i]).mul_(t).add_(rare[i])
                        if shift[i]:
                            values[i].add_(shift[i])
                if not both(values, kwargs, f"{label}, {where}moved {t:.2g} of the way to a random draw",
                            f"boundary {len(coverage.boundaries)} {step}", judge_structure=False, by_magnitude=True,
                            probe=False):
                    return
        finally:
            orig.aliases, cand.aliases = aliases

    def attribute_stale_failure(values: list[Any], kwargs: dict[str, Any], label: str, scale: float) -> None:
        """The stale-output run failed: say whether the previous outputs were the cause. A result that is
        not the buffers' old contents is run again with fresh (poisoned) outputs: failing there too, the
        failure is the inputs' and is reported as that run's (a backdoor's trigger, not stale outputs);
        passing there, the candidate's result depends on what its outputs held, and the verdict says so."""
        failed = checks[-1]
        if any("stale result" in problem for problem in failed.problems) or failed.could_not_run \
                or cand.run.error is not None:
            return
        checks.remove(failed)  # first: both() reads a failure already listed as its own
        fresh_passed = both(values, kwargs, label, label, scale)
        if not fresh_passed:
            return  # the fresh run's failure stands alone: the previous outputs were not the cause
        failed.problems[0] = ("its result depends on what the output buffers held before the call (with fresh "
                              f"outputs it matches the original): {failed.problems[0]}")
        checks.append(failed)

    # 1. the captured launches (a warm-up launch first: an autotuner's trials would overwrite the poison)
    for number, (values, kwargs) in enumerate(zip(launch_values, launch_kwargs, strict=True)):
        if number == 0:
            run_candidate(values, kwargs)
            cand.timeout_s = later_limit_s
            if cand.run.error is not None:
                checks.append(compare_runs("captured launch 0 (first launch)", orig.run, cand.run, values, roles,
                                           names, poisoned=True))
                return result
        if not both(values, kwargs, f"captured launch {number}", f"captured launch {number}"):
            return result
    kwargs = launch_kwargs[0] if launch_kwargs else {}
    values = base
    plan = [(seed, DISTRIBUTIONS[i % len(DISTRIBUTIONS)]) for i, seed in enumerate(seeds)]
    if seeds:
        plan.append((seeds[-1] + 1, "large"))
    for position, (seed, distribution) in enumerate(plan[:1] if screen else plan):
        with clock("draw"):
            draw_arguments(values, roles, seed, distribution)
        label = f"seed {seed}, {distribution_label(distribution)}"
        scale = _scale(values, distribution)
        if position == 2:
            # 4. the previous set's outputs stay in the candidate's buffers: it must overwrite them. Where they
            # equal this set's right answer they are changed, so that no element left alone passes.
            run_original_on(values, kwargs, label)
            with clock("fill"):
                unlike_answer(cand, orig, roles)
            with clock("compare"):
                stale = {i: fingerprint(g.view) for i, g in cand.run.guarded.items() if roles[i] == "output"}
            if stale and not both(values, kwargs, f"{label}, previous outputs left in the buffers", label, scale,
                                  stale, prefilled=True):
                attribute_stale_failure(values, kwargs, label, scale)
                return result
        if not both(values, kwargs, label, label, scale, probe=not (position == 0 and reruns > 0 and not screen)):
            return result
        if position == 0 and reruns > 0 and not screen:
            # 3. re-runs on this set: the first run's outputs become the reference in the original's buffers
            for index, guarded in cand.run.guarded.items():
                if roles[index] != "input":
                    orig.run.guarded[index].view.copy_(guarded.view)
            held[0] = None
            reference = orig.run
            for rerun in range(reruns):
                begin = time.perf_counter()
                run_candidate(values, kwargs, shuffle_seed=1000 + rerun)
                order = "program order shuffled" if not device.startswith("cuda") else "same order"
                with clock("compare"):
                    check = compare_reruns(f"re-run {rerun + 1} ({order})", reference, cand.run, roles, names,
                                           bitwise=not original_uses_atomics)
                check.figures["seconds"] = round(time.perf_counter() - begin, 4)
                checks.append(check)
                if not check.passed:
                    return result
    if screen:
        return result
    for extra in extra_sets:
        key = f"input set {extra.label}"
        with clock("input_sets"):
            extra.fill(values, roles)
        orig.aliases = cand.aliases = dict(extra.aliases)  # an aliasing run: arguments share buffers
        try:
            if extra.comparison == "magnitude":
                passed = both(values, kwargs, extra.label, key, judge_structure=False, by_magnitude=True)
            else:
                magnitude = input_magnitude(key, values)
                passed = both(values, kwargs, extra.label, key, max(extra.input_scale, min(magnitude, INPUT_SCALE_CAP)),
                              judge_structure=extra.error_structure, scale_with_outputs=magnitude > INPUT_SCALE_CAP)
        finally:
            orig.aliases = cand.aliases = {}
        if not passed:
            return result
    if probing is not None:
        withhold(probing, values, kwargs, roles, seeds, both, observe)
        search_decisions(probing, values, kwargs, roles, names, both)
    return result


# Sets whose outcomes need no walk to the boundary: the captured launches and the seeds' plain draws.
PLAIN_DRAWS = ("captured launch", "seed ")
# How far a boundary walk moves from the set that showed a side first (decades, 1e-1 to 1e-8), and the common
# offset a reduction's walk adds (times the inputs' magnitude): see walk_to_boundary
BOUNDARY_STEPS = tuple(10.0 ** -k for k in range(1, 9))
BOUNDARY_OFFSET = 1e3
BOUNDARY_SEED = 9173
MAX_BOUNDARY_WALKS = 2


def withhold(probing: DecisionProbeRun, values: list[Any], kwargs: dict[str, Any], roles: list[Role],
             seeds: tuple[int, ...], both: Callable[..., bool], observe: Callable[..., None]) -> None:
    """The run that withholds a partial: synchronisation decisions (on flags and counters in the launcher's own
    scratch, :attr:`.decisions.Decision.sync`) seen one way only are forced, all at once, the other way; the
    sides count where the copy's outputs still match. A decision that keeps a loop going is forced for a bounded
    number of evaluations only (:data:`.decision_coverage.LOOP_FORCED`)."""
    force = probing.coverage.missing_sync()
    if not force or probing.failed is not None:
        return
    draw_arguments(values, roles, (seeds[-1] if seeds else 0) + 77, "randn")
    label = "a partial withheld: " + ", ".join(probing.coverage.decisions[i].describe() for i in sorted(force))
    probing.coverage.forced = [probing.coverage.decisions[i].describe() for i in sorted(force)]
    if both(values, kwargs, label, "withheld", probe=False):
        observe(values, kwargs, label, 1.0, force=force)


def search_decisions(probing: DecisionProbeRun, values: list[Any], kwargs: dict[str, Any], roles: list[Role],
                     names: list[str], both: Callable[..., bool]) -> bool:
    """Draw further sets until every added decision was seen both ways, the copy failed, a set's outputs
    differ (False: the candidate is wrong on it), or the search's time is up."""
    coverage = probing.coverage
    deadline = time.monotonic() + probing.search_seconds
    for number, drawn in enumerate(search_sets(values, roles, names, probing.constants)):
        if coverage.settled or probing.failed is not None or time.monotonic() > deadline:
            break
        drawn.fill(values, list(roles))
        coverage.searched += 1
        key = f"decision search {number}"
        # element by element at each output's own magnitude: a set mixes the candidate's constants, of any size,
        # with unit values, and a tolerance scaled to its largest input would hide a wrong unit-sized output
        if not both(values, kwargs, f"decision search: {drawn.label}", key, judge_structure=False, by_magnitude=True):
            return False
    return True




# An input set's inputs scale the absolute tolerance up to this magnitude; beyond it, up to the original's own
# outputs (a softmax of inputs near 3e35 still gives outputs near 1, an average gives outputs near 3e35).
INPUT_SCALE_CAP = 1e6


def input_set_tolerance_scale(floor: float, input_magnitude: float, output_magnitude: float) -> float:
    """How much larger than unit scale an input set's absolute tolerance is.

    Up to :data:`INPUT_SCALE_CAP` the inputs' largest magnitude sets it. Beyond, the original's largest
    output does, never more than the inputs: a linear kernel's outputs are as large as its inputs, and so
    is its rounding where terms cancel (docs/gates.md has the average pool that showed it), while a
    normalising kernel's stay near 1 and keep the tolerance as tight as the cap."""
    scale = max(floor, min(input_magnitude, INPUT_SCALE_CAP))
    if input_magnitude > INPUT_SCALE_CAP:
        scale = max(scale, min(input_magnitude, output_magnitude))
    return scale


def _release_cached_memory(device: str) -> None:
    """Hand the allocator's cached blocks back to the device (the captured copies just released): memory
    this process keeps cached is memory the candidate's process cannot have."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


__all__ = ["BATTERIES", "INPUT_SCALE_CAP", "CandidateSide", "KernelChecks", "check_kernel",
           "input_set_tolerance_scale", "launch_limits", "search_decisions"]
