"""KernelBench-scale memory-bound set: ReLU over 4096 x 393216 floats."""
# est. eager H200: ~4.3 ms (1.61G fp32: read 6.44 GB + write 6.44 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (4096, 393216), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
