"""Tiny (CI): a scaled row softmax (one reduction kernel), sized for the CPU Triton interpreter."""
# est. eager H200: n/a (a CPU-sized problem for CI)

import torch
import torch.nn as nn

LEVEL = 1


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 0.5, dim=-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
