"""Level 1: RMSNorm written out in plain ops, x * rsqrt(mean(x^2) + eps) * weight."""
# est. eager H200: ~1.25 ms (134M fp32; pow, mean, mul, mul = 7 passes x 537 MB = 3.8 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 8192), "tiny": (8, 64)}


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(features) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
