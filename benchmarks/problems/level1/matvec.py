"""Level 1: a matrix-vector product (memory-bound GEMV)."""
# est. eager H200: ~1.4 ms (reads the 1.07G fp32 matrix once: 4.3 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (32768, 32768), "tiny": (16, 32)}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.mv(a, v)


def get_inputs():
    m, k = SIZES[SCALE]
    return [torch.randn(m, k), torch.randn(k)]


def get_init_inputs():
    return []
