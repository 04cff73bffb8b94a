"""Level 1: NCHW to NHWC with a per-channel bias, materialized (add + copy in eager, one pass fused)."""
# est. eager H200: ~1.6 ms (268M fp32; add + contiguous = 4 passes x 1.07 GB = 4.3 GB, strided)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 256, 128, 128), "tiny": (2, 4, 4, 4)}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.permute(0, 2, 3, 1) + self.bias).contiguous()


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
