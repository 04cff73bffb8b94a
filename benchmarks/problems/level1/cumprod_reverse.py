"""Level 1: a reverse cumulative product (flip, cumprod, flip) on values near 1."""
# est. eager H200: ~1.1 ms (134M fp32; flip, cumprod, flip = 6 passes x 537 MB = 3.2 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 8192), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x.flip(-1), dim=-1).flip(-1)


def get_inputs():
    # values in [0.999, 1.001]: long products stay finite and away from zero
    return [1.0 + (torch.rand(*SIZES[SCALE]) - 0.5) * 0.002]


def get_init_inputs():
    return []
