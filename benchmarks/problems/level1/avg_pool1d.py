"""Level 1: 1-d average pooling with overlapping windows (kernel 8, stride 4)."""
# est. eager H200: ~1.3 ms (read 805M fp32 = 3.2 GB, write 0.8 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (192, 512, 8192), "tiny": (2, 4, 64)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=8, stride=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
