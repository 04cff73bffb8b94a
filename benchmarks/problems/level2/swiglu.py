"""Level 2: a SwiGLU feed-forward gate, silu(x W1) * (x W3): two GEMMs and a fused epilogue."""
# est. eager H200: ~4 ms (2 x 2 x 4096 x 2048 x 5632 = 189 GFLOP at ~50 TFLOP/s; gating moves ~0.3 GB)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (4096, 2048, 5632), "tiny": (8, 16, 32)}


class Model(nn.Module):
    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(features, hidden, bias=False)
        self.up = nn.Linear(features, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate(x)) * self.up(x)


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1])]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][2]]
