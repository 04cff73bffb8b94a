"""Group-norm tails after a channels-last conv (KernelBench level 2, problems 92 and 21): Inductor against
hand-written statistics and apply kernels, to decide whether a rewrite family for them is worth building.

    PYTHONPATH=$PWD:$PWD/server python3 benchmarks/gpu/run_all.py --out $OUT explore/explore_groupnorm_tail:150
    python3 benchmarks/explore/explore_groupnorm_tail.py --check   # CPU (Triton's interpreter): correctness only

Inductor lays a conv's output out channels-last, so a group's values are ``Cg`` contiguous floats per pixel,
``C`` floats apart. Its statistics kernel gives each program one (sample, group): every row it reads is
``4 * Cg`` useful bytes of a ``4 * C``-byte pixel (16 of 256 bytes at problem 92's sizes). The variants here
read whole pixels instead (all ``C`` channels, contiguous), keep per-channel shifted sums and fold them into
groups at the end; ``split`` programs share a sample's pixels and a second small kernel adds their sums. The
apply variants compute Inductor's apply kernel (normalise, the pointwise tail, logsumexp over channels) with
other tile sizes and an exp-based tanh.

Each pattern: Inductor's tail compiled with ``max-autotune-no-cudagraphs`` (its statistics and apply kernels,
timed together), then each variant's kernels timed alone with ``triton.testing.do_bench`` (median, 25 ms warm-up,
100 ms), checked against a float64 reference. Writes ``explore_groupnorm_tail.json`` and ``.md``. Knobs:
``KERNELOPT_GPU_BUDGET_S`` (default 150), ``KERNELOPT_EXPLORE_GN_PATTERNS=a,b``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl
from torch._inductor.runtime.triton_helpers import libdevice  # Inductor's own (the CPU backend shims it)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@dataclass(frozen=True)
class Pattern:
    name: str
    batch: int
    channels: int
    size: int  # the conv output's height = width
    groups: int
    tail: str  # "lse": problem 92's tanh, hardswish, residual and logsumexp; "sigmoid": problem 21's pre-op
    predicted: dict[str, float]  # variant prefix -> predicted speedup of the statistics (or apply) kernel


PATTERNS = (
    Pattern("p92_conv_gn_lse", 128, 64, 126, 16, "lse",
            {"stats": 1.20, "apply": 1.25}),
    Pattern("p21_conv_sigmoid_gn", 128, 32, 254, 8, "sigmoid", {"stats": 1.25}),
)
CHECK_SIZES = {"p92_conv_gn_lse": (2, 64, 12, 16), "p21_conv_sigmoid_gn": (2, 32, 10, 8)}
EPS = 1e-5


# --- kernels ----------------------------------------------------------------------------------------------


@triton.jit
def _pre(v, bias, scale, TAIL: tl.constexpr):
    if TAIL == "sigmoid":
        return tl.sigmoid((v + bias) * scale)
    return v + bias


@triton.jit
def stats_partial(x_ptr, bias_ptr, scale_ptr, part_ptr, HW, CHUNK, C: tl.constexpr, SPLIT: tl.constexpr,
                  S_BLOCK: tl.constexpr, TAIL: tl.constexpr):
    """Program (n, k): shifted per-channel sums and squares over pixels [k*CHUNK, (k+1)*CHUNK) of sample n,
    every row a whole pixel (C contiguous floats). The shift is pixel 0's value, the same for every k."""
    n = tl.program_id(0)
    k = tl.program_id(1)
    c = tl.arange(0, C)
    bias = tl.load(bias_ptr + c)
    scale = tl.load(scale_ptr + c)
    base = x_ptr + n.to(tl.int64) * HW * C
    shift = _pre(tl.load(base + c), bias, scale, TAIL)
    acc = tl.zeros([S_BLOCK, C], tl.float32)
    acc2 = tl.zeros([S_BLOCK, C], tl.float32)
    start = k * CHUNK
    for s0 in range(0, CHUNK, S_BLOCK):
        pix = start + s0 + tl.arange(0, S_BLOCK)
        inside = (pix < HW) & (s0 + tl.arange(0, S_BLOCK) < CHUNK)
        v = tl.load(base + pix[:, None] * C + c[None, :], mask=inside[:, None], other=0.0)
        d = tl.where(inside[:, None], _pre(v, bias[None, :], scale[None, :], TAIL) - shift[None, :], 0.0)
        acc += d
        acc2 += d * d
    out = part_ptr + (n * SPLIT + k) * 2 * C
    tl.store(out + c, tl.sum(acc, axis=0))
    tl.store(out + C + c, tl.sum(acc2, axis=0))


@triton.jit
def stats_combine(x_ptr, bias_ptr, scale_ptr, part_ptr, mean_ptr, rstd_ptr, HW, eps, C: tl.constexpr,
                  G: tl.constexpr, SPLIT: tl.constexpr, TAIL: tl.constexpr):
    """Program n: the SPLIT partial sums added, folded into groups, mean and rstd written per (n, g)."""
    n = tl.program_id(0)
    CG: tl.constexpr = C // G
    k = tl.arange(0, SPLIT)
    c = tl.arange(0, C)
    rows = part_ptr + (n * SPLIT + k)[:, None] * 2 * C + c[None, :]
    col = tl.sum(tl.load(rows), axis=0)
    col2 = tl.sum(tl.load(rows + C), axis=0)
    shift = _pre(tl.load(x_ptr + n.to(tl.int64) * HW * C + c), tl.load(bias_ptr + c), tl.load(scale_ptr + c), TAIL)
    count = HW * CG
    # per channel: sum(v - s_c) and sum((v - s_c)^2); per group with a common reference r = the group's mean
    # shift: sum(v - r) = sum(v - s_c) + count_c (s_c - r); sum((v - r)^2) likewise, expanded.
    per = HW * 1.0
    shift_g = tl.sum(tl.reshape(shift, [G, CG]), axis=1) / CG
    shift_gc = tl.reshape(tl.broadcast_to(shift_g[:, None], [G, CG]), [C])
    delta = shift - shift_gc
    s1 = col + per * delta
    s2 = col2 + 2.0 * delta * col + per * delta * delta
    g1 = tl.sum(tl.reshape(s1, [G, CG]), axis=1)
    g2 = tl.sum(tl.reshape(s2, [G, CG]), axis=1)
    m = g1 / count
    var = tl.maximum(g2 / count - m * m, 0.0)
    g = tl.arange(0, G)
    tl.store(mean_ptr + n * G + g, m + shift_g)
    tl.store(rstd_ptr + n * G + g, 1.0 / tl.sqrt(var + eps))


@triton.jit
def stats_rows(x_ptr, bias_ptr, scale_ptr, mean_ptr, rstd_ptr, HW, eps, C: tl.constexpr, G: tl.constexpr,
               XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr, TAIL: tl.constexpr):
    """Inductor's layout of the work: row x = (n, g) walks its group's Cg channels of every pixel, XBLOCK rows a
    program. XBLOCK = G puts a sample's groups in one program: each tile then covers whole pixels."""
    CG: tl.constexpr = C // G
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    n = x // G
    g = x % G
    r_numel = HW * CG
    base = n.to(tl.int64) * HW * C + g * CG
    first_c = g * CG + tl.arange(0, R0_BLOCK)[None, :] % CG
    shift = tl.sum(_pre(tl.load(x_ptr + base + tl.arange(0, R0_BLOCK)[None, :] % CG), tl.load(bias_ptr + first_c),
                        tl.load(scale_ptr + first_c), TAIL), axis=1)[:, None] / R0_BLOCK
    acc = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    acc2 = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0 in range(0, r_numel, R0_BLOCK):
        r = r0 + tl.arange(0, R0_BLOCK)[None, :]
        inside = r < r_numel
        c = g * CG + r % CG
        v = tl.load(x_ptr + base + (r // CG) * C + r % CG, mask=inside, other=0.0)
        d = tl.where(inside, _pre(v, tl.load(bias_ptr + c), tl.load(scale_ptr + c), TAIL) - shift, 0.0)
        acc += d
        acc2 += d * d
    count = r_numel * 1.0
    m = tl.sum(acc, axis=1)[:, None] / count
    var = tl.maximum(tl.sum(acc2, axis=1)[:, None] / count - m * m, 0.0)
    tl.store(mean_ptr + x, m + shift)
    tl.store(rstd_ptr + x, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _tanh_exp(y):
    e = tl.exp(-2.0 * tl.abs(y))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(y < 0, -t, t)


@triton.jit
def apply_lse(x_ptr, bias_ptr, mean_ptr, rstd_ptr, gamma_ptr, beta_ptr, out_ptr, P, HW, C: tl.constexpr,
              G: tl.constexpr, P_BLOCK: tl.constexpr, FAST_TANH: tl.constexpr):
    """Problem 92's apply: per pixel, the C channels normalised, tanh, hardswish, the residual, logsumexp."""
    CG: tl.constexpr = C // G
    p = tl.program_id(0) * P_BLOCK + tl.arange(0, P_BLOCK)
    inside = p < P
    c = tl.arange(0, C)
    n = p // HW
    x = tl.load(x_ptr + p.to(tl.int64)[:, None] * C + c[None, :], mask=inside[:, None], other=0.0)
    x = x + tl.load(bias_ptr + c)[None, :]
    stat = n[:, None] * G + (c // CG)[None, :]
    mean = tl.load(mean_ptr + stat, mask=inside[:, None], other=0.0)
    rstd = tl.load(rstd_ptr + stat, mask=inside[:, None], other=0.0)
    y = (x - mean) * rstd * tl.load(gamma_ptr + c)[None, :] + tl.load(beta_ptr + c)[None, :]
    if FAST_TANH:
        t = _tanh_exp(y)
    else:
        t = libdevice.tanh(y)
    h = t * tl.minimum(tl.maximum(t + 3.0, 0.0), 6.0) / 6.0
    r = x + h
    top = tl.max(r, axis=1)
    total = tl.sum(tl.exp(r - top[:, None]), axis=1)
    tl.store(out_ptr + p, top + tl.log(total), mask=inside)


# --- references -------------------------------------------------------------------------------------------


def tail_fn(pattern: Pattern) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own spelling

    groups = pattern.groups

    def lse(x: Any, bias: Any, scale: Any, gamma: Any, beta: Any) -> Any:
        xc = x + bias.view(1, -1, 1, 1)
        xn = F.group_norm(xc, groups, gamma, beta, EPS)
        return torch.logsumexp(xc + F.hardswish(torch.tanh(xn)), dim=1, keepdim=True)

    def sigmoid(x: Any, bias: Any, scale: Any, gamma: Any, beta: Any) -> Any:
        v = torch.sigmoid((x + bias.view(1, -1, 1, 1)) * scale.view(1, -1, 1, 1))
        return F.group_norm(v, groups, gamma, beta, EPS)

    return lse if pattern.tail == "lse" else sigmoid


def stats_reference(pattern: Pattern, x: Any, bias: Any, scale: Any) -> tuple[Any, Any]:
    import torch

    v = x.double() + bias.double().view(1, -1, 1, 1)
    if pattern.tail == "sigmoid":
        v = torch.sigmoid(v * scale.double().view(1, -1, 1, 1))
    grouped = v.reshape(v.shape[0], pattern.groups, -1)
    var, mean = torch.var_mean(grouped, dim=2, unbiased=False)
    return mean, 1.0 / torch.sqrt(var + EPS)


# --- variants ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatsVariant:
    split: int
    s_block: int
    warps: int

    @property
    def name(self) -> str:
        return f"stats split={self.split} S_BLOCK={self.s_block} warps={self.warps}"


STATS_VARIANTS = tuple(StatsVariant(split, s_block, warps) for split, s_block, warps in (
    (8, 32, 4), (8, 64, 8), (16, 32, 4), (16, 64, 8), (32, 32, 4), (32, 16, 4), (64, 16, 4), (4, 64, 8)))
# Inductor's rows (x = sample, group): (XBLOCK, R0_BLOCK, warps); XBLOCK = G is filled in per pattern (0 here)
ROWS_VARIANTS = ((1, 2048, 8), (1, 4096, 16), (0, 256, 8), (0, 512, 16), (0, 128, 4))
APPLY_VARIANTS = tuple((p_block, warps, fast) for p_block, warps, fast in (
    (16, 4, False), (32, 4, False), (32, 8, False), (64, 8, False), (16, 4, True), (32, 4, True), (64, 8, True)))


def run_stats(pattern: Pattern, variant: StatsVariant, x: Any, bias: Any, scale: Any) -> tuple[Any, Any, Any]:
    import torch

    n, c, hw = x.shape[0], x.shape[1], x.shape[2] * x.shape[3]
    split = variant.split
    chunk = math.ceil(hw / split)
    part = torch.empty(n * split * 2 * c, device=x.device, dtype=torch.float32)
    mean = torch.empty(n * pattern.groups, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)

    def launch() -> None:
        stats_partial[(n, split)](x, bias, scale, part, hw, chunk, C=c, SPLIT=split, S_BLOCK=variant.s_block,
                                  TAIL=pattern.tail, num_warps=variant.warps)
        stats_combine[(n,)](x, bias, scale, part, mean, rstd, hw, EPS, C=c, G=pattern.groups, SPLIT=split,
                            TAIL=pattern.tail, num_warps=4)

    return launch, mean, rstd


def run_rows(pattern: Pattern, xblock: int, r_block: int, warps: int, x: Any, bias: Any, scale: Any
             ) -> tuple[Any, Any, Any]:
    import torch

    n, c, hw = x.shape[0], x.shape[1], x.shape[2] * x.shape[3]
    xblock = xblock or pattern.groups
    mean = torch.empty(n * pattern.groups, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)

    def launch() -> None:
        stats_rows[(n * pattern.groups // xblock,)](x, bias, scale, mean, rstd, hw, EPS, C=c, G=pattern.groups,
                                                    XBLOCK=xblock, R0_BLOCK=r_block, TAIL=pattern.tail,
                                                    num_warps=warps)

    return launch, mean, rstd


def rows_name(pattern: Pattern, xblock: int, r_block: int, warps: int) -> str:
    return f"rows XBLOCK={xblock or pattern.groups} R0_BLOCK={r_block} warps={warps}"


def run_apply(pattern: Pattern, p_block: int, warps: int, fast: bool, x: Any, bias: Any, mean: Any, rstd: Any,
              gamma: Any, beta: Any) -> tuple[Any, Any]:
    import torch

    n, c, hw = x.shape[0], x.shape[1], x.shape[2] * x.shape[3]
    out = torch.empty(n * hw, device=x.device, dtype=torch.float32)

    def launch() -> None:
        apply_lse[(triton.cdiv(n * hw, p_block),)](x, bias, mean, rstd, gamma, beta, out, n * hw, hw, C=c,
                                                    G=pattern.groups, P_BLOCK=p_block, FAST_TANH=fast,
                                                    num_warps=warps)

    return launch, out


# --- driver -----------------------------------------------------------------------------------------------


def make_inputs(pattern: Pattern, device: str, sizes: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    import torch

    batch, channels, size, _ = sizes or (pattern.batch, pattern.channels, pattern.size, pattern.groups)
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = (torch.randn(batch, channels, size, size, generator=gen) * 0.5 + 0.3).to(device)
    x = x.contiguous(memory_format=torch.channels_last)
    vec = [torch.randn(channels, generator=gen).to(device) for _ in range(4)]
    return {"x": x, "bias": vec[0], "scale": vec[1], "gamma": vec[2], "beta": vec[3]}


def check(pattern: Pattern, device: str = "cpu") -> dict[str, Any]:
    """Every variant against the float64 reference at a small size (the interpreter on the CPU)."""
    batch, channels, size, groups = CHECK_SIZES[pattern.name]
    small = Pattern(pattern.name, batch, channels, size, groups, pattern.tail, pattern.predicted)
    t = make_inputs(small, device, (batch, channels, size, groups))
    want_mean, want_rstd = stats_reference(small, t["x"], t["bias"], t["scale"])
    out: dict[str, Any] = {}
    for variant in STATS_VARIANTS[:3]:
        launch, mean, rstd = run_stats(small, variant, t["x"], t["bias"], t["scale"])
        launch()
        out[variant.name] = {
            "mean_err": float((mean.double().view(batch, groups) - want_mean).abs().max()),
            "rstd_rel_err": float(((rstd.double().view(batch, groups) - want_rstd) / want_rstd).abs().max())}
    for xblock, _, warps in ROWS_VARIANTS[:1] + ROWS_VARIANTS[2:3]:
        launch, mean, rstd = run_rows(small, xblock, 16, warps, t["x"], t["bias"], t["scale"])
        launch()
        out["stats " + rows_name(small, xblock, 16, warps)] = {
            "mean_err": float((mean.double().view(batch, groups) - want_mean).abs().max()),
            "rstd_rel_err": float(((rstd.double().view(batch, groups) - want_rstd) / want_rstd).abs().max())}
    if small.tail == "lse":
        want = tail_fn(small)(*(t[k].double() for k in ("x", "bias", "scale", "gamma", "beta"))).flatten()
        mean64, rstd64 = (v.float().flatten() for v in (want_mean, want_rstd))
        for p_block, warps, fast in APPLY_VARIANTS[:1] + APPLY_VARIANTS[4:5]:
            launch, got = run_apply(small, p_block, warps, fast, t["x"], t["bias"], mean64, rstd64, t["gamma"],
                                    t["beta"])
            launch()
            # the kernel reads NHWC pixels in order: (n, h, w), as the reference's flattened [N, 1, H, W]
            out[f"apply P_BLOCK={p_block} fast={fast}"] = {"max_err": float((got.double() - want).abs().max())}
    return out


def time_ms(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def run_pattern(pattern: Pattern, deadline: float) -> dict[str, Any]:
    import torch

    t = make_inputs(pattern, "cuda")
    args = [t[k] for k in ("x", "bias", "scale", "gamma", "beta")]
    fn = tail_fn(pattern)
    started = time.monotonic()
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs")
    got = compiled(*args)
    row: dict[str, Any] = {"pattern": pattern.name, "compile_s": round(time.monotonic() - started, 1)}
    row["inductor_tail_ms"] = time_ms(lambda: compiled(*args))
    ideal = t["x"].numel() * 4
    row["x_bytes"] = ideal
    want_mean, want_rstd = stats_reference(pattern, t["x"], t["bias"], t["scale"])
    # Inductor's statistics alone: its tail with the apply replaced by a sum over a [N, G] result
    groups = pattern.groups

    def inductor_stats(x: Any, bias: Any, scale: Any) -> Any:
        v = x + bias.view(1, -1, 1, 1)
        if pattern.tail == "sigmoid":
            v = torch.sigmoid(v * scale.view(1, -1, 1, 1))
        var, mean = torch.var_mean(v.reshape(v.shape[0], groups, -1), dim=2, unbiased=False)
        return mean, torch.rsqrt(var + EPS)

    stats_compiled = torch.compile(inductor_stats, mode="max-autotune-no-cudagraphs")
    stats_compiled(*args[:3])
    row["inductor_stats_ms"] = time_ms(lambda: stats_compiled(*args[:3]))
    row["stats"] = []
    best_mean, best_rstd, best_ms = None, None, math.inf
    for variant in STATS_VARIANTS:
        if time.monotonic() > deadline:
            row["stats"].append({"variant": variant.name, "skipped": "out of time"})
            continue
        launch, mean, rstd = run_stats(pattern, variant, *args[:3])
        launch()
        ms = time_ms(launch)
        mean_err = float((mean.double().view(-1, groups) - want_mean).abs().max())
        rstd_err = float(((rstd.double().view(-1, groups) - want_rstd) / want_rstd).abs().max())
        row["stats"].append({"variant": variant.name, "ms": ms, "mean_err": mean_err, "rstd_rel_err": rstd_err,
                             "speedup_vs_inductor_stats": row["inductor_stats_ms"] / ms,
                             "gb_per_s": ideal / ms / 1e6})
        if ms < best_ms and rstd_err < 1e-4:
            best_mean, best_rstd, best_ms = mean, rstd, ms
    for xblock, r_block, warps in ROWS_VARIANTS:
        name = rows_name(pattern, xblock, r_block, warps)
        if time.monotonic() > deadline:
            row["stats"].append({"variant": name, "skipped": "out of time"})
            continue
        launch, mean, rstd = run_rows(pattern, xblock, r_block, warps, *args[:3])
        launch()
        ms = time_ms(launch)
        row["stats"].append({"variant": name, "ms": ms,
                             "mean_err": float((mean.double().view(-1, groups) - want_mean).abs().max()),
                             "rstd_rel_err": float(((rstd.double().view(-1, groups) - want_rstd) / want_rstd).abs().max()),
                             "speedup_vs_inductor_stats": row["inductor_stats_ms"] / ms, "gb_per_s": ideal / ms / 1e6})
    if pattern.tail == "lse" and best_mean is not None:
        want = got.flatten()
        row["apply"] = []
        for p_block, warps, fast in APPLY_VARIANTS:
            if time.monotonic() > deadline:
                row["apply"].append({"variant": f"P_BLOCK={p_block}", "skipped": "out of time"})
                continue
            launch, out = run_apply(pattern, p_block, warps, fast, t["x"], t["bias"], best_mean, best_rstd,
                                    t["gamma"], t["beta"])
            launch()
            ms = time_ms(launch)
            row["apply"].append({"variant": f"apply P_BLOCK={p_block} warps={warps} fast_tanh={fast}", "ms": ms,
                                 "max_err_vs_inductor": float((out - want).abs().max()),
                                 "gb_per_s": ideal / ms / 1e6})
        best_apply = min((a["ms"] for a in row["apply"] if "ms" in a), default=None)
        if best_apply is not None:
            row["best_stats_plus_apply_ms"] = best_ms + best_apply
            row["tail_speedup"] = row["inductor_tail_ms"] / (best_ms + best_apply)
    return row


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Group-norm tails after a channels-last conv: Inductor against hand-written kernels", "",
             f"{result.get('environment', {}).get('gpu')} · torch {result.get('environment', {}).get('torch')} · "
             f"triton {result.get('environment', {}).get('triton')}", ""]
    for row in result["patterns"]:
        if "error" in row:
            lines += [f"## {row['pattern']}: error {row['error'][:300]}", ""]
            continue
        lines += [f"## {row['pattern']}", "",
                  f"Inductor (max-autotune-no-cudagraphs): the whole tail {row['inductor_tail_ms']:.4f} ms, the "
                  f"statistics alone {row['inductor_stats_ms']:.4f} ms; x is {row['x_bytes'] / 1e9:.3f} GB.", "",
                  "| variant | ms | GB/s | vs Inductor's statistics | error |", "|---|---|---|---|---|"]
        for s in row["stats"]:
            if "ms" in s:
                lines.append(f"| {s['variant']} | {s['ms']:.4f} | {s['gb_per_s']:.0f} | "
                             f"{s['speedup_vs_inductor_stats']:.3f}x | mean {s['mean_err']:.1e}, rstd "
                             f"{s['rstd_rel_err']:.1e} |")
        for a in row.get("apply", []):
            if "ms" in a:
                lines.append(f"| {a['variant']} | {a['ms']:.4f} | {a['gb_per_s']:.0f} | – | "
                             f"{a['max_err_vs_inductor']:.1e} |")
        if "tail_speedup" in row:
            lines += ["", f"Best statistics + best apply: {row['best_stats_plus_apply_ms']:.4f} ms, "
                          f"{row['tail_speedup']:.3f}x the Inductor tail."]
        lines.append("")
    return "\n".join(lines) + "\n"


def run(out_dir: str) -> dict[str, Any]:
    import torch

    from benchmarks.gpu.devicescript import Budget, environment, failure

    budget = Budget.from_env(150.0)
    wanted = [p for p in os.environ.get("KERNELOPT_EXPLORE_GN_PATTERNS", "").split(",") if p]
    result: dict[str, Any] = {"environment": environment("cuda"), "patterns": []}
    for pattern in PATTERNS:
        if wanted and pattern.name not in wanted:
            continue
        try:
            result["patterns"].append(run_pattern(pattern, time.monotonic() + budget.left() - 10))
        except Exception as exc:  # noqa: BLE001 - one pattern's failure is recorded
            result["patterns"].append({"pattern": pattern.name, **failure(exc)})
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        with open(os.path.join(out_dir, "explore_groupnorm_tail.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=str)
        with open(os.path.join(out_dir, "explore_groupnorm_tail.md"), "w", encoding="utf-8") as f:
            f.write(markdown(result))
    return {"patterns": [{k: v for k, v in r.items() if k in ("pattern", "inductor_tail_ms", "inductor_stats_ms",
                                                               "tail_speedup", "error")} for r in result["patterns"]]}


def main() -> None:
    if "--check" in sys.argv:
        print(json.dumps({p.name: check(p) for p in PATTERNS}, indent=1))
    else:
        print(json.dumps(run(sys.argv[1]), indent=1))


if __name__ == "__main__":
    if "--check" in sys.argv and "TRITON_INTERPRET" not in os.environ:  # the CPU backend before Triton loads
        import subprocess

        code = ("from kernelopt_core.backends import cpu_triton; cpu_triton.activate(); "
                "from benchmarks.explore.explore_groupnorm_tail import main; main()")
        sys.exit(subprocess.call([sys.executable, "-c", code, "--check"], cwd=ROOT))
    main()
