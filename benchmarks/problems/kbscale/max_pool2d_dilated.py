"""KernelBench-scale memory-bound set: 2D max pooling, kernel 2, stride 2, padding 1, dilation 3, over 64 x 64 x 512 x 512."""
# est. eager H200: ~1.8 ms (1.07G fp32: read 4.29 GB, write 1.07 GB at ~3 TB/s; strided window loads run below peak)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 64, 512, 512), "tiny": (2, 4, 8, 8)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2, padding=1, dilation=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
