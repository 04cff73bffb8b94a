"""KernelBench-scale memory-bound set: a broadcast bias add and a scale, (x + b) * 0.5, over 16384 x 65536 floats."""
# est. eager H200: ~2.9 ms (1.07G fp32: read 4.29 GB (the 256 kB bias once) + write 4.29 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 65536), "tiny": (8, 64)}


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.bias) * 0.5


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1]]
