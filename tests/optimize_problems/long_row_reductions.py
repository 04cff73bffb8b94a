"""A tiny KernelBench-format problem for the algorithmic reduction families (tests/test_reduction_families.py).

Compiled with TORCHINDUCTOR_PERSISTENT_REDUCTIONS=0, Inductor writes every reduction as a looped one
(what it writes for long rows), over few short rows so the CPU interpreter stays quick: a softmax (three
passes: max, sum with the exponentials stored, divide), a layer norm over rows longer than 1024 (Welford)
with an affine epilogue, an L2 normalisation over rows whose length is not a power of two, and a max with
a sum in one loop writing per-row values."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n: int = 1200):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(n) + 0.5)
        self.bias = nn.Parameter(torch.rand(n) - 0.5)

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor):
        softmax = torch.softmax(a, -1)
        norm = F.layer_norm(b, (b.shape[-1],), self.weight, self.bias, 1e-5)
        l2 = c / c.norm(dim=-1, keepdim=True)
        stats = d.amax(-1) + d.sum(-1) * 0.5
        return softmax, norm, l2, stats


def get_inputs():
    return [torch.randn(3, 1024) * 3.0, torch.randn(2, 1200) + 1.0, torch.randn(3, 1000), torch.randn(5, 600)]


def get_init_inputs():
    return [1200]
