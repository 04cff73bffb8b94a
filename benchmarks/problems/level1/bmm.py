"""Level 1: a batched matrix multiplication."""
# est. eager H200: ~1.4 ms (2 x 128 x 512 x 1024 x 512 = 69 GFLOP at ~50 TFLOP/s fp32)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (128, 512, 1024, 512), "tiny": (2, 8, 16, 8)}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    batch, m, k, n = SIZES[SCALE]
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
