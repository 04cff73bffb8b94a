"""Tiny (CI): an elementwise chain, relu(2x + 1) + sigmoid(x), sized for the CPU Triton interpreter."""
# est. eager H200: n/a (a CPU-sized problem for CI; see benchmarks/problems/level1 for H200 sizes)

import torch
import torch.nn as nn

LEVEL = 1  # the suite has no level folders here, so the level is declared


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0) + torch.sigmoid(x)


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
