"""Level 2: Linear followed by a softmax over its outputs."""
# est. eager H200: ~5.8 ms (2 x 8192 x 2048 x 8192 = 275 GFLOP at ~50 TFLOP/s; softmax moves 0.5 GB)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8192, 2048, 8192), "tiny": (8, 16, 32)}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x), dim=-1)


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1])]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][2]]
