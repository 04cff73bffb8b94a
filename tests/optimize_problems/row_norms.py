"""A tiny KernelBench-format problem for the rewrite tests: an RMSNorm over long rows (Inductor writes
a looped reduction) and a softmax over 1024 (a persistent reduction, long enough to split)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int = 4096):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return rms, torch.softmax(y, -1) * 2.0 + y.mean(-1, keepdim=True)


def get_inputs():
    return [torch.randn(8, 4096), torch.randn(8, 1024)]


def get_init_inputs():
    return [4096]
