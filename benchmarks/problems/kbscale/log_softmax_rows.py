"""KernelBench-scale memory-bound set: log-softmax over 8192 rows of 131072 floats."""
# est. eager H200: ~2.9 ms (1.07G fp32: read 4.29 GB + write 4.29 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8192, 131072), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(*SIZES[SCALE]) * 4.0]


def get_init_inputs():
    return []
