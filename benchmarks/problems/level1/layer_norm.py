"""Level 1: LayerNorm over the last axis (with learned weight and bias)."""
# est. eager H200: ~1.4 ms (537M fp32: the fused ATen kernel reads 2.15 GB and writes 2.15 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (65536, 8192), "tiny": (8, 64)}


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():  # non-trivial affine parameters, so a dropped epilogue shows
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
