"""KernelBench-scale memory-bound set: mean over the first axis (a column reduction) of 98304 x 16384 floats."""
# est. eager H200: ~2.1 ms (1.61G fp32: read 6.44 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (98304, 16384), "tiny": (64, 8)}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=0)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
