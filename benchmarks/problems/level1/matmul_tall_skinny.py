"""Level 1: a tall-skinny matrix multiplication (small inner dimension, large output)."""
# est. eager H200: ~3 ms (2 x 65536 x 256 x 4096 = 137 GFLOP at ~50 TFLOP/s fp32, plus a 1 GB output)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (65536, 256, 4096), "tiny": (32, 8, 16)}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    m, k, n = SIZES[SCALE]
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
