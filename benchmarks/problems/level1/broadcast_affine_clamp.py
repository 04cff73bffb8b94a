"""Level 1: a per-channel affine transform with broadcasting, then a clamp."""
# est. eager H200: ~1.1 ms (134M fp32; mul, add, clamp = 6 passes x 537 MB = 3.2 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 512, 4096), "tiny": (2, 4, 16)}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(channels, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * self.scale + self.shift, -3.0, 3.0)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
