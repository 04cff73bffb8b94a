"""Level 3: a three-layer MLP with GELU activations."""
# est. eager H200: ~6.3 ms (2 x 4096 x (2 x 4096^2 + 4096 x 1024) = 309 GFLOP at ~50 TFLOP/s fp32)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (4096, 4096, 4096, 1024), "tiny": (8, 16, 32, 8)}  # batch, in, hidden, out


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1])]


def get_init_inputs():
    return list(SIZES[SCALE][1:])
