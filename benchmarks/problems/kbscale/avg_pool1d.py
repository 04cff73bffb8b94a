"""KernelBench-scale memory-bound set: 1D average pooling, kernel 8, stride 1, padding 4, over 64 x 128 x 65536."""
# est. eager H200: ~1.4 ms (537M fp32: read 2.15 GB + write 2.15 GB at ~3 TB/s; eight taps per output)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 128, 65536), "tiny": (2, 4, 64)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=8, stride=1, padding=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
