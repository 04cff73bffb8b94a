"""Level 2: Linear (GEMM + bias) followed by ReLU."""
# est. eager H200: ~5.6 ms (2 x 8192 x 4096 x 4096 = 275 GFLOP at ~50 TFLOP/s fp32; ReLU moves 0.27 GB)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8192, 4096, 4096), "tiny": (8, 16, 16)}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1])]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][2]]
