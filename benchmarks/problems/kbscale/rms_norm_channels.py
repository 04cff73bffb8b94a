"""KernelBench-scale memory-bound set: RMS norm over the channel axis (stride 262144) of 32 x 64 x 512 x 512."""
# est. eager H200: ~1.4 ms (537M fp32: read 2.15 GB + write 2.15 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (32, 64, 512, 512), "tiny": (2, 4, 8, 8)}

EPS = 1e-5


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + EPS)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
