"""Level 2: Linear, GELU, then LayerNorm over the features."""
# est. eager H200: ~3 ms (2 x 16384 x 2048^2 = 137 GFLOP at ~50 TFLOP/s; GELU + LN move ~0.5 GB)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 2048), "tiny": (8, 16)}


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.linear(x)))


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
