"""KernelBench-scale memory-bound set: GroupNorm with 8 groups over 32 x 64 x 512 x 512 (256 rows of 2M)."""
# est. eager H200: ~1.4 ms (537M fp32: read 2.15 GB + write 2.15 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": ((32, 64, 512, 512), 8), "tiny": ((2, 8, 8, 8), 4)}  # (input shape, groups)


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    shape, _ = SIZES[SCALE]
    return [torch.randn(*shape)]


def get_init_inputs():
    shape, groups = SIZES[SCALE]
    return [groups, shape[1]]
