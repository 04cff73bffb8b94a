"""Level 1: an elementwise chain, tanh(x) * sigmoid(x) + 0.5 * x (five eager kernels, one fused)."""
# est. eager H200: ~2.1 ms (134M fp32; 5 eager kernels = 12 passes x 537 MB = 6.4 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

# KERNELOPT_PROBLEM_SCALE=tiny (or setting SCALE before get_inputs()) gives CPU-sized inputs for CI.
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8192, 16384), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * torch.sigmoid(x) + 0.5 * x


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
