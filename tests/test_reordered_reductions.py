"""Gate 2's rounding floor for reordered reductions: a group norm's statistics (one mean, m2 and rstd per
group of n terms, outputs that do not keep the reduced dimension) computed by Inductor's looped Welford
at other block sizes pass; a dropped term or a wrong eps is still rejected.

The block sizes are emulated in float32 with torch (each of R lanes runs Welford over n / R terms in
order, then the lanes combine pairwise, as ``triton_helpers.welford_reduce`` and ``welford`` do), so the
rounding is float32's own. benchmarks/gpu/group_norm_floor.py checks the same on a GPU with Triton
kernels and a float64 reference."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelopt_core.gates.kernel import KernelRun, StructureCheck, compare_runs  # noqa: E402
from kernelopt_core.sandbox.guarded_buffers import guarded_allocation  # noqa: E402

GROUPS, TERMS, EPS = 96, 16384, 1e-5


def welford(x: torch.Tensor, lanes: int) -> tuple[torch.Tensor, torch.Tensor]:
    groups, n = x.shape
    steps = x.view(groups, n // lanes, lanes)
    mean, m2, weight = steps[:, 0].clone(), torch.zeros(groups, lanes), torch.ones(groups, lanes)
    for j in range(1, n // lanes):
        value = steps[:, j]
        delta = value - mean
        weight = weight + 1
        mean = mean + delta / weight
        m2 = m2 + delta * (value - mean)
    while mean.shape[1] > 1:
        half = mean.shape[1] // 2
        delta = mean[:, half:] - mean[:, :half]
        total = weight[:, :half] + weight[:, half:]
        share = weight[:, half:] / total
        m2 = m2[:, :half] + m2[:, half:] + delta * delta * weight[:, :half] * share
        mean, weight = mean[:, :half] + delta * share, total
    return mean[:, 0], m2[:, 0]


def two_pass(x: torch.Tensor, lanes: int) -> tuple[torch.Tensor, torch.Tensor]:
    groups, n = x.shape
    mean = x.view(groups, -1, lanes).sum(1).sum(1) / n
    centred = x - mean[:, None]
    return mean, (centred * centred).view(groups, -1, lanes).sum(1).sum(1)


def statistics(mean: torch.Tensor, m2: torch.Tensor, n: int, eps: float = EPS) -> list[torch.Tensor]:
    return [mean, m2, torch.rsqrt(m2 / n + eps)]


@pytest.fixture(scope="module")
def terms() -> torch.Tensor:
    generator = torch.Generator().manual_seed(5)
    # a sigmoid's outputs, as the group norm of conv2d + add + scale + sigmoid reads them
    return torch.sigmoid(torch.randn(GROUPS, TERMS, generator=generator) + 0.3)


@pytest.fixture(scope="module")
def original(terms: torch.Tensor) -> list[torch.Tensor]:
    return statistics(*welford(terms, 64), TERMS)


def _run(outputs: list[torch.Tensor]) -> KernelRun:
    run = KernelRun()
    for index, value in enumerate(outputs):
        run.guarded[index] = guarded_allocation(tuple(value.shape), value.dtype, value.device)
        run.guarded[index].view.copy_(value)
    return run


def _gate2(candidate: list[torch.Tensor], original: list[torch.Tensor], reduction_length: int | None) -> list[str]:
    names, roles = ["mean", "m2", "rstd"], ["output"] * 3
    check = compare_runs("group norm statistics", _run(original), _run(candidate), original, roles, names,
                         poisoned=False, structure=StructureCheck(reduction_length, 1.0))
    return check.problems


@pytest.mark.parametrize("variant", ["welford/1", "welford/8", "welford/256", "welford/2048", "two-pass/1024"])
def test_a_reordered_group_norm_statistic_passes(terms: torch.Tensor, original: list[torch.Tensor],
                                                 variant: str) -> None:
    kind, lanes = variant.split("/")
    candidate = statistics(*(welford if kind == "welford" else two_pass)(terms, int(lanes)), TERMS)
    assert _gate2(candidate, original, TERMS) == []


def test_the_floor_grows_with_the_terms_when_outputs_drop_the_reduced_dimension(
        terms: torch.Tensor, original: list[torch.Tensor]) -> None:
    # floored by one rounding of each output alone, a sequential Welford's m2 is 50x the floor: what a
    # block size that reorders a long reduction met on the GPU ("11.5x the rounding floor")
    problems = _gate2(statistics(*welford(terms, 1), TERMS), original, None)
    assert problems and "the rounding floor" in problems[0]


def test_a_dropped_term_or_a_wrong_eps_is_still_rejected(terms: torch.Tensor, original: list[torch.Tensor]) -> None:
    kept = terms[:, 1:]  # the first term of every group left out, the sums still divided by all of them
    mean = kept.sum(1) / TERMS
    dropped = _gate2(statistics(mean, ((kept - mean[:, None]) ** 2).sum(1), TERMS), original, TERMS)
    assert dropped and any(word in dropped[0] for word in ("rounding floor", "systematic bias"))
    wrong_eps = _gate2(statistics(*welford(terms, 64), TERMS, eps=1e-6), original, TERMS)
    assert wrong_eps and "rstd" in wrong_eps[0] and "systematic bias" in wrong_eps[0]
