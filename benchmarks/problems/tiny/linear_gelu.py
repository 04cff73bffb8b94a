"""Tiny (CI): Linear (a vendor GEMM) with a GELU epilogue, sized for the CPU Triton interpreter."""
# est. eager H200: n/a (a CPU-sized problem for CI)

import torch
import torch.nn as nn
import torch.nn.functional as F

LEVEL = 2


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32]
