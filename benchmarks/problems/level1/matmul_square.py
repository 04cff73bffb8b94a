"""Level 1: a square fp32 matrix multiplication (a vendor GEMM: expect a vendor-dominated fallback)."""
# est. eager H200: ~2.7 ms (2 x 4096^3 = 137 GFLOP at ~50 TFLOP/s fp32 without TF32; ~0.4 ms if TF32 is on)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": 4096, "tiny": 16}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    n = SIZES[SCALE]
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
