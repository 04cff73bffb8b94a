"""KernelBench-scale memory-bound set: LayerNorm over the last three axes of 16 x 128 x 512 x 512: 16 very long rows."""
# est. eager H200: ~1.6 ms (537M fp32: read 2.15 GB and the 2 x 134 MB affine parameters, write 2.15 GB at ~3 TB/s)

import os

import torch
import torch.nn as nn

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16, 128, 512, 512), "tiny": (2, 4, 8, 8)}


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple[int, ...]):
        super().__init__()
        self.norm = nn.LayerNorm(normalized_shape)
        with torch.no_grad():  # non-trivial affine parameters, so a dropped epilogue shows
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [tuple(SIZES[SCALE][1:])]
