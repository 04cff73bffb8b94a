"""Gate 2, multi-seed kernel correctness. Runs inside a worker (imports torch inside functions).

The original and the candidate kernel run side by side on the same arguments:

1. the arguments captured at the kernel's launch in a real run of the graph;
2. fresh random inputs per seed, drawn from a different distribution each time (randn,
   uniform with an offset, small integers stored as floats), plus one large-magnitude set;
3. the second seed's inputs with the *first* seed's correct outputs already in the output
   buffers: a candidate that skips work and leaves the previous result in place fails here;
4. re-runs of the candidate on the first seed's inputs (on the CPU interpreter in a shuffled
   program order) that must reproduce its first result bit for bit.

Every tensor argument sits in a guarded allocation and every output is poisoned with a NaN
payload first (:mod:`.guarded_buffers`): unwritten elements, writes outside a tensor, reads from
outside one and writes into inputs are all caught. Integer and boolean inputs keep their captured
values (they are often indices). Tolerance: atol = rtol = 1e-3 for fp32 (and fp64), 1e-2 for
fp16/bf16, exact for integers.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from .guarded_buffers import GuardedTensor, bits, fill_poison, guarded_copy, poison_bits

Role = Literal["output", "inout", "input", "scalar"]
KERNEL_TOLERANCE = {"torch.float32": 1e-3, "torch.float64": 1e-3, "torch.float16": 1e-2, "torch.bfloat16": 1e-2}
DISTRIBUTIONS = ("randn", "uniform", "small-ints")
LARGE_MAGNITUDE = {"torch.float16": 100.0, "torch.bfloat16": 100.0}  # others: 1000
MAX_LAUNCHES = 4


# --- which argument is what (pure Python) ----------------------------------------------------


def runtime_parameters(kernel_source: str, kernel_name: str) -> list[str]:
    """The parameters the wrapper passes (everything but the constexpr meta-parameters)."""
    func = _kernel_def(kernel_source, kernel_name)
    if func is None:
        return []
    return [a.arg for a in func.args.args if not _is_constexpr(a)]


def argument_roles(kernel_source: str, kernel_name: str, mutated: list[str]) -> dict[str, Role]:
    """Output/in-out/input roles of the pointer parameters, from the original kernel.

    ``out_ptr*`` are outputs, ``in_out_ptr*`` and ``mutated_arg_names`` are in-out; an in-out the
    original never loads from is poisoned like an output (Inductor reuses a dead buffer in place).
    """
    func = _kernel_def(kernel_source, kernel_name)
    params = runtime_parameters(kernel_source, kernel_name)
    loaded = _loaded_pointers(func) if func is not None else set(params)
    roles: dict[str, Role] = {}
    for name in params:
        if name.startswith("in_out_ptr") or name in mutated:
            roles[name] = "inout" if name in loaded else "output"
        elif name.startswith("out_ptr"):
            roles[name] = "inout" if name in loaded else "output"
        else:
            roles[name] = "input"
    return roles


def _kernel_def(source: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return next((f for f in funcs if f.name == name), funcs[0] if funcs else None)


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _loaded_pointers(func: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
            if node.args:
                names.update(n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name))
    return names


# --- running one kernel on one argument set --------------------------------------------------


@dataclass
class KernelRun:
    guarded: dict[int, GuardedTensor] = field(default_factory=dict)
    error: str | None = None


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


@contextmanager
def shuffled_program_order(seed: int) -> Iterator[None]:
    """On the CPU interpreter, run a grid's program instances in a seeded random order.

    The interpreter walks the grid in order, which hides races and order-dependent float
    atomics; permuting the order (a bijection on program ids) exposes them. No-op on a GPU.
    """
    try:
        from triton.runtime import interpreter
    except ImportError:
        yield
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    if builder is None or not hasattr(builder, "set_grid_idx"):
        yield
        return
    original = builder.set_grid_idx
    permutations: dict[tuple[int, int, int], list[int]] = {}

    def permuted(x: int, y: int, z: int) -> Any:
        gx, gy, gz = builder.grid_dim
        key = (gx, gy, gz)
        if key not in permutations:
            order = list(range(gx * gy * gz))
            random.Random(seed).shuffle(order)
            permutations[key] = order
        linear = permutations[key][(x * gy + y) * gz + z]
        return original(linear // (gy * gz), (linear // gz) % gy, linear % gz)

    builder.set_grid_idx = permuted
    try:
        yield
    finally:
        builder.set_grid_idx = original


def run_kernel(kernel: Any, values: list[Any], roles: list[Role], kwargs: dict[str, Any], device: str,
               prefill: dict[int, Any] | None = None, shuffle_seed: int | None = None) -> KernelRun:
    """Launch ``kernel`` on guarded copies of ``values``; outputs poisoned (or prefilled)."""
    import torch

    run = KernelRun()
    args: list[Any] = []
    for index, (value, role) in enumerate(zip(values, roles, strict=True)):
        if isinstance(value, torch.Tensor):
            guarded = guarded_copy(value)
            if role == "output":
                if prefill is not None and index in prefill:
                    guarded.view.copy_(prefill[index])
                else:
                    fill_poison(guarded.view)
            run.guarded[index] = guarded
            args.append(guarded.view)
        else:
            args.append(value)
    try:
        if shuffle_seed is not None and not device.startswith("cuda"):
            with shuffled_program_order(shuffle_seed):
                kernel.run(*args, **kwargs)
        else:
            kernel.run(*args, **kwargs)
        _synchronize(device)
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is the verdict
        run.error = f"{type(exc).__name__}: {str(exc)[:2000]}"
    return run


# --- comparing runs --------------------------------------------------------------------------


@dataclass
class RunCheck:
    label: str
    problems: list[str] = field(default_factory=list)
    max_abs_diff: float = 0.0
    mismatched: int = 0

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "passed": self.passed, "problems": self.problems,
                "max_abs_diff": self.max_abs_diff, "mismatched": self.mismatched}


def _tolerance(dtype: Any) -> float | None:
    return KERNEL_TOLERANCE.get(str(dtype))


def _first_index(mask: Any) -> str:
    import torch

    where = torch.nonzero(mask)
    return str(tuple(int(i) for i in where[0].tolist())) if len(where) else "?"


def compare_runs(label: str, original: KernelRun, candidate: KernelRun, values: list[Any], roles: list[Role],
                 names: list[str], poisoned: bool, stale: dict[int, Any] | None = None,
                 input_scale: float = 1.0) -> RunCheck:
    """The candidate's run against the original's on the same arguments.

    ``input_scale`` is how much larger than unit scale the inputs were drawn: a correct reordering
    of a sum over inputs of magnitude s has absolute rounding error proportional to s, so the
    absolute tolerance scales with it (the relative tolerance does not change).
    """
    import torch

    check = RunCheck(label)
    if original.error is not None:
        check.problems.append(f"the ORIGINAL kernel failed on these arguments ({original.error}); "
                              "the check cannot run")
        return check
    if candidate.error is not None:
        check.problems.append(f"the candidate failed to run: {candidate.error}")
        return check
    for index, guarded in candidate.guarded.items():
        if not guarded.guard_intact() and original.guarded[index].guard_intact():
            check.problems.append(f"wrote outside {names[index]} (out-of-bounds store: its guard region changed)")
    for index, role in enumerate(roles):
        if index not in candidate.guarded:
            continue
        name = names[index]
        cand = candidate.guarded[index].view
        orig = original.guarded[index].view
        if role == "input":
            if not torch.equal(bits(cand), bits(values[index])):
                changed = int((bits(cand) != bits(values[index])).sum())
                check.problems.append(f"modified its input {name} ({changed} elements changed)")
            continue
        total = cand.numel()
        if poisoned and role == "output":
            poison = poison_bits(cand.dtype)
            if poison is not None:
                unwritten = (bits(cand) == poison) & (bits(orig) != poison)
                count = int(unwritten.sum())
                if count:
                    check.problems.append(f"left {count} of {total} elements of {name} unwritten "
                                          f"(first at index {_first_index(unwritten)})")
                    continue
        tol = _tolerance(cand.dtype)
        if tol is None:
            bad = bits(cand) != bits(orig)
            count = int(bad.sum())
            if count:
                check.mismatched += count
                check.problems.append(f"{count} of {total} elements of {name} differ (exact comparison for "
                                      f"{cand.dtype}; first at index {_first_index(bad)})")
            continue
        atol = tol * input_scale
        close = torch.isclose(cand, orig, atol=atol, rtol=tol, equal_nan=True)
        bad = ~close
        count = int(bad.sum())
        finite = torch.isfinite(cand) & torch.isfinite(orig)
        if finite.any():
            diff = (cand.double() - orig.double()).abs()[finite]
            check.max_abs_diff = max(check.max_abs_diff, float(diff.max()))
        if not count:
            continue
        check.mismatched += count
        new_nonfinite = (~torch.isfinite(cand)) & torch.isfinite(orig)
        nonfinite = int(new_nonfinite.sum())
        if stale is not None and index in stale:
            kept = bad & torch.isclose(cand, stale[index].to(cand.dtype), atol=tol, rtol=tol, equal_nan=True)
            if int(kept.sum()) == count:
                check.problems.append(f"returned a stale result: {count} of {total} elements of {name} still hold "
                                      "the previous call's output (the candidate skipped work it must redo)")
                continue
        if nonfinite:
            check.problems.append(f"produced NaN/Inf in {nonfinite} of {total} elements of {name} where the "
                                  f"original is finite (first at index {_first_index(new_nonfinite)})")
            continue
        worst = float((cand.double() - orig.double()).abs()[bad & finite].max()) if (bad & finite).any() else 0.0
        check.problems.append(f"{count} of {total} elements of {name} differ beyond atol={atol:g}, rtol={tol:g} "
                              f"(max |diff| {worst:.3g}, first at index {_first_index(bad)})")
    return check


def compare_reruns(label: str, first: KernelRun, again: KernelRun, roles: list[Role], names: list[str],
                   bitwise: bool) -> RunCheck:
    """A re-run of the candidate against its own first run: bit for bit (or at the kernel tolerance)."""
    import torch

    check = RunCheck(label)
    if again.error is not None:
        check.problems.append(f"the candidate failed when run again: {again.error}")
        return check
    for index, role in enumerate(roles):
        if role == "input" or role == "scalar" or index not in first.guarded:
            continue
        a, b = first.guarded[index].view, again.guarded[index].view
        if bitwise:
            differ = bits(a) != bits(b)
        else:
            tol = _tolerance(a.dtype) or 0.0
            differ = ~torch.isclose(a, b, atol=tol, rtol=tol, equal_nan=True)
        count = int(differ.sum())
        if count:
            finite = differ & torch.isfinite(a) & torch.isfinite(b) if a.is_floating_point() else differ
            worst = float((a.double() - b.double()).abs()[finite].max()) if finite.any() else float("nan")
            check.mismatched += count
            check.problems.append(f"nondeterministic: re-running on the same inputs changed {count} elements of "
                                  f"{names[index]} (max |diff| {worst:.3g}); order-dependent atomics or races")
    return check


# --- argument sets ---------------------------------------------------------------------------


def random_arguments(values: list[Any], roles: list[Role], seed: int, distribution: str) -> list[Any]:
    """Fresh floating-point inputs (same sizes, strides, dtypes, devices); others keep their values."""
    import torch

    # Draw on the tensor's own device: drawing GBs of float64 on the host took most of gate 2's
    # time on large GPU graphs (25 s of 27 s for the attention fixture on the H200).
    generators: dict[str, Any] = {}
    out: list[Any] = []
    for value, role in zip(values, roles, strict=True):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or role == "output":
            out.append(value.clone() if isinstance(value, torch.Tensor) else value)
            continue
        device = value.device
        generator = generators.get(str(device))
        if generator is None:
            generator = generators[str(device)] = torch.Generator(device=device).manual_seed(seed)
        work = torch.float64  # drawn in float64 then rounded once to the tensor's dtype
        shape = tuple(value.shape)
        if distribution == "randn":
            data = torch.randn(shape, generator=generator, dtype=work, device=device)
        elif distribution == "uniform":
            data = torch.rand(shape, generator=generator, dtype=work, device=device) * 8.0 - 3.0
        elif distribution == "small-ints":
            data = torch.randint(-8, 9, shape, generator=generator, device=device).to(work)
        elif distribution == "large":
            scale = LARGE_MAGNITUDE.get(str(value.dtype), 1000.0)
            data = torch.randn(shape, generator=generator, dtype=work, device=device) * scale
        else:
            raise ValueError(f"unknown distribution {distribution!r}")
        fresh = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=device)
        fresh.copy_(data.to(value.dtype))
        out.append(fresh)
    return out


def distribution_label(distribution: str) -> str:
    return {"randn": "randn", "uniform": "uniform in [-3, 5)", "small-ints": "small integers in [-8, 8] as floats",
            "large": "large magnitude (randn x 1000, x 100 for fp16/bf16)"}[distribution]


# --- the gate --------------------------------------------------------------------------------


def check_kernel(original: Any, candidate: Any, launch_values: list[list[Any]], launch_kwargs: list[dict[str, Any]],
                 names: list[str], roles: list[Role], seeds: tuple[int, ...], device: str, reruns: int = 2,
                 original_uses_atomics: bool = False) -> list[RunCheck]:
    """Gate 2's runs for one kernel, in order, stopping at the first failing check (which decides)."""
    checks: list[RunCheck] = []
    kwargs = launch_kwargs[0] if launch_kwargs else {}
    for number, (values, launch_kw) in enumerate(zip(launch_values, launch_kwargs, strict=True)):
        a = run_kernel(original, values, roles, launch_kw, device)
        b = run_kernel(candidate, values, roles, launch_kw, device)
        checks.append(compare_runs(f"captured launch {number}", a, b, values, roles, names, poisoned=True))
        if not checks[-1].passed:
            return checks
    base = launch_values[0]
    sets: list[tuple[str, list[Any], KernelRun]] = []
    first_candidate: KernelRun | None = None
    plan = [(seed, DISTRIBUTIONS[i % len(DISTRIBUTIONS)]) for i, seed in enumerate(seeds)]
    if seeds:
        plan.append((seeds[-1] + 1, "large"))
    for seed, distribution in plan:
        values = random_arguments(base, roles, seed, distribution)
        a = run_kernel(original, values, roles, kwargs, device)
        b = run_kernel(candidate, values, roles, kwargs, device)
        label = f"seed {seed}, {distribution_label(distribution)}"
        scale = max((LARGE_MAGNITUDE.get(str(v.dtype), 1000.0) for v in values
                     if hasattr(v, "is_floating_point") and v.is_floating_point()), default=1.0) \
            if distribution == "large" else 1.0
        checks.append(compare_runs(label, a, b, values, roles, names, poisoned=True, input_scale=scale))
        if not checks[-1].passed:
            return checks
        sets.append((label, values, a))
        if len(sets) == 1:
            first_candidate = b  # the determinism re-runs repeat this one
    if len(sets) >= 2:
        (_, _, first_original), (second_label, second_values, second_original) = sets[0], sets[1]
        stale = {i: g.view for i, g in first_original.guarded.items() if roles[i] == "output"}
        if stale:
            b = run_kernel(candidate, second_values, roles, kwargs, device, prefill=stale)
            checks.append(compare_runs(f"{second_label}, previous outputs left in the buffers", second_original, b,
                                       second_values, roles, names, poisoned=False, stale=stale))
            if not checks[-1].passed:
                return checks
    if first_candidate is not None:
        values = sets[0][1]
        for rerun in range(max(0, reruns)):
            again = run_kernel(candidate, values, roles, kwargs, device, shuffle_seed=1000 + rerun)
            order = "program order shuffled" if not device.startswith("cuda") else "same order"
            checks.append(compare_reruns(f"re-run {rerun + 1} ({order})", first_candidate, again, roles, names,
                                         bitwise=not original_uses_atomics))
            if not checks[-1].passed:
                return checks
    return checks
